//! Interprets the input as a stream of operations on a `Rax<u64>` and a `BTreeMap` model and
//! checks they agree (results, seeks, iterator walks in both directions, len, and a full walk
//! at the end). `RUSTC_BOOTSTRAP=1 cargo fuzz run rax_ops`
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};
use xstream::rax::{Rax, SeekOp};

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (a, rest) = self.0.split_at(n);
        self.0 = rest;
        a.to_vec()
    }
}

const OPS: [SeekOp; 7] = [SeekOp::First, SeekOp::Last, SeekOp::Eq, SeekOp::Ge, SeekOp::Gt, SeekOp::Le, SeekOp::Lt];

type Model = BTreeMap<Vec<u8>, u64>;

fn model_seek(m: &Model, op: SeekOp, key: &[u8]) -> Option<(Vec<u8>, u64)> {
    let r = match op {
        SeekOp::First => m.iter().next(),
        SeekOp::Last => m.iter().next_back(),
        SeekOp::Eq => m.get_key_value(key),
        SeekOp::Ge => m.range(key.to_vec()..).next(),
        SeekOp::Gt => m.range::<Vec<u8>, _>((Excluded(key.to_vec()), Unbounded)).next(),
        SeekOp::Le => m.range(..=key.to_vec()).next_back(),
        SeekOp::Lt => m.range(..key.to_vec()).next_back(),
    };
    r.map(|(k, v)| (k.clone(), *v))
}

/// Reads a key: fresh bytes, or a previously used key, possibly truncated or extended.
fn key(inp: &mut Input, hist: &[Vec<u8>]) -> Vec<u8> {
    let sel = inp.byte().unwrap_or(0);
    if sel & 0x80 != 0 && !hist.is_empty() {
        let mut k = hist[(sel & 0x3f) as usize % hist.len()].clone();
        if sel & 0x40 != 0 {
            let l = inp.byte().unwrap_or(0) as usize % (k.len() + 1);
            k.truncate(l);
        } else {
            let n = (inp.byte().unwrap_or(0) % 4) as usize;
            k.extend(inp.bytes(n));
        }
        k
    } else {
        // Short keys from a tiny alphabet share prefixes; longer ones are raw bytes.
        let len = (sel & 0x1f) as usize;
        if sel & 0x40 != 0 {
            inp.bytes(len).into_iter().map(|b| b"ab\x00\xff"[(b & 3) as usize]).collect()
        } else {
            inp.bytes(len)
        }
    }
}

/// One step of the documented iterator semantics over the sorted model.
/// `pos`: current index; `state`: 0 just seeked (found), 1 just seeked (not found), 2 walking, 3 EOF.
fn model_step(ks: &[(Vec<u8>, u64)], pos: &mut usize, state: &mut u8, op: SeekOp, fwd: bool) -> Option<(Vec<u8>, u64)> {
    let res = match (*state, fwd) {
        (3, _) => None,
        (0, _) => Some(*pos),
        (1, true) if matches!(op, SeekOp::Le | SeekOp::Lt) && !ks.is_empty() => Some(0),
        (1, false) if matches!(op, SeekOp::Ge | SeekOp::Gt) && !ks.is_empty() => Some(ks.len() - 1),
        (1, _) => None,
        (_, true) => (*pos + 1 < ks.len()).then(|| *pos + 1),
        (_, false) => pos.checked_sub(1),
    };
    match res {
        Some(p) => {
            *pos = p;
            *state = 2;
            Some(ks[p].clone())
        }
        None => {
            *state = 3;
            None
        }
    }
}

fn full_check(r: &Rax<u64>, m: &Model) {
    assert_eq!(r.len(), m.len());
    assert_eq!(r.is_empty(), m.is_empty());
    let want: Vec<(Vec<u8>, u64)> = m.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let mut fwd = Vec::new();
    let mut it = r.iter();
    while let Some((k, v)) = it.next() {
        fwd.push((k.to_vec(), *v));
    }
    assert_eq!(fwd, want);
    let mut back = Vec::new();
    let mut it = r.seek(SeekOp::Last, b"");
    while let Some((k, v)) = it.prev() {
        back.push((k.to_vec(), *v));
    }
    back.reverse();
    assert_eq!(back, want);
    // Only the root when empty; at least one node per key besides the root ("" is the root).
    if m.is_empty() {
        assert_eq!(r.node_count(), 1);
    }
    assert!(r.node_count() >= m.len());
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let mut r: Rax<u64> = Rax::new();
    let mut m: Model = BTreeMap::new();
    let mut hist: Vec<Vec<u8>> = Vec::new();
    let mut counter = 0u64;
    while let Some(op) = inp.byte() {
        counter += 1;
        let k = key(&mut inp, &hist);
        match op % 16 {
            0..=3 => {
                assert_eq!(r.insert(&k, counter), m.insert(k.clone(), counter));
            }
            4 => {
                let want = if m.contains_key(&k) { Err(counter) } else { Ok(()) };
                assert_eq!(r.try_insert(&k, counter), want);
                m.entry(k.clone()).or_insert(counter);
            }
            5..=7 => {
                assert_eq!(r.remove(&k), m.remove(&k));
            }
            8 => {
                assert_eq!(r.get(&k), m.get(&k));
                if let Some(v) = r.get_mut(&k) {
                    *v = counter;
                    m.insert(k.clone(), counter);
                }
            }
            9 | 10 => {
                let sop = OPS[(op >> 4) as usize % 7];
                let mut out = vec![1, 2, 3];
                let got = r.seek_mut(sop, &k, &mut out).map(|v| *v);
                match model_seek(&m, sop, &k) {
                    Some((wk, wv)) => {
                        assert_eq!((got, &out), (Some(wv), &wk));
                        if let Some(v) = r.seek_mut(sop, &k, &mut out) {
                            *v = counter;
                        }
                        m.insert(wk, counter);
                    }
                    None => assert!(got.is_none() && out.is_empty()),
                }
            }
            11..=13 => {
                let sop = OPS[(op >> 4) as usize % 7];
                let dirs = inp.byte().unwrap_or(0);
                let steps = inp.byte().unwrap_or(0) % 24;
                let ks: Vec<(Vec<u8>, u64)> = m.iter().map(|(k, v)| (k.clone(), *v)).collect();
                let found = model_seek(&m, sop, &k);
                let mut pos = match &found {
                    Some((fk, _)) => ks.iter().position(|(x, _)| x == fk).unwrap_or(0),
                    None => 0,
                };
                let mut state = if found.is_some() { 0 } else { 1 };
                let mut it = r.seek(sop, &k);
                for s in 0..steps {
                    // Low bits choose the direction of the first steps, then mostly forward
                    // (op 11, 12) or backward (op 13).
                    let fwd = if s < 8 { dirs >> s & 1 == 0 } else { op % 16 != 13 };
                    let got = if fwd { it.next() } else { it.prev() }.map(|(a, b)| (a.to_vec(), *b));
                    assert_eq!(got, model_step(&ks, &mut pos, &mut state, sop, fwd));
                }
            }
            14 => {
                assert_eq!(r.first(), m.iter().next().map(|(k, v)| (k.clone(), v)));
                assert_eq!(r.last(), m.iter().next_back().map(|(k, v)| (k.clone(), v)));
            }
            _ => match op >> 4 {
                0 => {
                    r.clear();
                    m.clear();
                }
                1 | 2 => {
                    let c = r.clone();
                    full_check(&c, &m);
                }
                _ => full_check(&r, &m),
            },
        }
        assert_eq!(r.len(), m.len());
        hist.push(k);
        if hist.len() > 64 {
            hist.drain(..32);
        }
    }
    full_check(&r, &m);
    let _ = r.mem_bytes();
});
