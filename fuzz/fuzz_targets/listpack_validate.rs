//! Fuzz target for src/listpack.
//!
//! Input byte 0 picks the mode:
//! * even: bytes 1.. are an untrusted listpack. `validate` must return
//!   without panicking either way; when deep validation passes, forward and
//!   backward walks must agree, the count must match, and appends, replaces
//!   and deletes on the `Listpack` built by `from_vec` must keep it valid.
//! * odd: bytes 1.. are a script of operations run on a fresh `Listpack`
//!   alongside a `Vec<Vec<u8>>` model; after every operation the listpack
//!   must deep-validate and match the model.
//!
//! Run from the repository root:
//!   RUSTC_BOOTSTRAP=1 cargo fuzz run listpack_validate -- -max_total_time=600
#![no_main]

use libfuzzer_sys::fuzz_target;
use xstream::listpack::{validate, Listpack, Value, COUNT_UNKNOWN};

fn string_of(v: Value) -> Vec<u8> {
    let mut out = Vec::new();
    v.write_to(&mut out);
    out
}

/// Offsets forward via next() and backward via prev(); they must agree.
fn offsets(lp: &Listpack) -> Vec<usize> {
    let mut fwd = Vec::new();
    let mut p = lp.first();
    while let Some(o) = p {
        fwd.push(o);
        p = lp.next(o);
    }
    let mut bwd = Vec::new();
    let mut p = lp.last();
    while let Some(o) = p {
        bwd.push(o);
        p = lp.prev(o);
    }
    bwd.reverse();
    assert_eq!(fwd, bwd, "forward and backward walks disagree");
    fwd
}

fn check_walks(lp: &Listpack) -> usize {
    let offs = offsets(lp);
    let hc = lp.header_count();
    if hc != COUNT_UNKNOWN {
        assert_eq!(usize::from(hc), offs.len(), "header count");
    }
    assert_eq!(lp.len(), offs.len());
    let fwd: Vec<Vec<u8>> = lp.iter().map(string_of).collect();
    let mut bwd: Vec<Vec<u8>> = lp.iter().rev().map(string_of).collect();
    bwd.reverse();
    assert_eq!(fwd, bwd, "iterators disagree");
    for (i, (&o, s)) in offs.iter().zip(&fwd).enumerate() {
        assert_eq!(string_of(lp.get(o)), *s);
        // Entries tile the listpack. (entry_size may exceed encoded_size:
        // foreign listpacks may use non-minimal encodings.)
        let end = o + lp.entry_size(o).expect("entry size");
        assert!(Listpack::encoded_size(lp.get(o)) <= end - o);
        let next = offs.get(i + 1).copied().unwrap_or(lp.bytes_len() - 1);
        assert_eq!(end, next, "entries do not tile");
    }
    offs.len()
}

/// Reads operation arguments from the input, yielding zeros when it runs out.
struct Script<'a>(&'a [u8]);

impl Script<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn int(&mut self) -> i64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.byte();
        }
        // Shift so that every integer encoding size is likely.
        let shift = u32::from(self.byte() % 64);
        i64::from_le_bytes(b) >> shift
    }
    fn string(&mut self) -> Vec<u8> {
        let sel = self.byte();
        match sel % 8 {
            // Lengths at the string-encoding and backlen boundaries.
            0 => vec![b'a'; [63, 64, 125, 126, 4095, 4096, 16377, 16378][usize::from(sel / 8 % 8)]],
            1 => self.int().to_string().into_bytes(),
            _ => {
                let n = usize::from(sel / 8).min(self.0.len());
                let (s, rest) = self.0.split_at(n);
                self.0 = rest;
                s.to_vec()
            }
        }
    }
    fn value(&mut self) -> (Option<i64>, Vec<u8>) {
        if self.byte() & 1 == 0 {
            let v = self.int();
            (Some(v), v.to_string().into_bytes())
        } else {
            (None, self.string())
        }
    }
}

fn mutate(lp: &mut Listpack, script: &mut Script, model: Option<&mut Vec<Vec<u8>>>) {
    let mut model = model;
    for _ in 0..64 {
        if script.0.is_empty() {
            break;
        }
        let op = script.byte();
        let n = lp.len();
        match op % 4 {
            0 | 1 => {
                let (int, s) = script.value();
                match int {
                    Some(v) => lp.append_int(v),
                    None => lp.append_str(&s),
                }
                if let Some(m) = model.as_deref_mut() {
                    m.push(s);
                }
            }
            2 if n > 0 => {
                let i = usize::from(script.byte()) % n;
                let off = lp.seek(i).expect("seek in range");
                let (int, s) = script.value();
                match int {
                    Some(v) => lp.replace_int(off, v),
                    None => lp.replace(off, Value::Str(&s)),
                }
                if let Some(m) = model.as_deref_mut() {
                    m[i] = s;
                }
            }
            3 if n > 0 => {
                let i = usize::from(script.byte()) % n;
                let count = usize::from(script.byte() % 8);
                lp.delete_range(lp.seek(i).expect("seek in range"), count);
                if let Some(m) = model.as_deref_mut() {
                    m.drain(i..(i + count).min(n));
                }
            }
            _ => {}
        }
        validate(lp.as_bytes(), true).expect("mutation broke the listpack");
        if let Some(m) = model.as_deref() {
            assert_eq!(lp.len(), m.len());
            assert!(lp.iter().map(string_of).eq(m.iter().cloned()), "model mismatch");
        }
    }
    check_walks(lp);
    let again = Listpack::from_vec(lp.as_bytes().to_vec(), true).expect("round trip");
    assert_eq!(&again, &*lp);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let shallow = validate(rest, false);
        let deep = validate(rest, true);
        if deep.is_ok() {
            assert!(shallow.is_ok(), "deep ok, shallow {shallow:?}");
        }
        if shallow.is_ok() {
            assert!(Listpack::from_vec(rest.to_vec(), false).is_ok());
        }
        if let Ok(mut lp) = Listpack::from_vec(rest.to_vec(), true) {
            check_walks(&lp);
            // Drive mutations from the listpack's own bytes.
            let mut script = Script(rest);
            mutate(&mut lp, &mut script, None);
        }
    } else {
        let mut lp = Listpack::new();
        let mut model = Vec::new();
        let mut script = Script(rest);
        mutate(&mut lp, &mut script, Some(&mut model));
    }
});
