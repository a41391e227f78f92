//! Tests: encodings against hand-computed bytes, golden listpacks written by
//! real Redis 7.0.15, a randomised model test, and validation of mangled input.
//!
//! The random tests print their seed (`XSTREAM_SEED=...`, shown by cargo test
//! on failure); set the env var `XSTREAM_SEED` to replay a run.

use super::encoding::*;
use super::*;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// xorshift64* — a tiny PRNG so the tests need no crates.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in 0..n (n > 0); the modulo bias is irrelevant here.
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// The seed for a randomised test: env XSTREAM_SEED, else the clock. Printed
/// so that a failing run can be replayed.
fn seed(test: &str) -> u64 {
    let s = match std::env::var("XSTREAM_SEED") {
        Ok(v) => v.trim().parse().expect("XSTREAM_SEED must be a u64"),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(42),
    };
    eprintln!("{test}: XSTREAM_SEED={s}");
    s
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn fnv1a64(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn string_of(v: Value) -> Vec<u8> {
    let mut out = Vec::new();
    v.write_to(&mut out);
    out
}

fn header_total(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Offsets of all elements, forward via next() and backward via prev();
/// asserts both walks agree.
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

/// Full consistency check of `lp` against the model of element strings.
fn check_model(lp: &Listpack, model: &[Vec<u8>], rng: &mut Rng) {
    let bytes = lp.as_bytes();
    validate(bytes, true).unwrap_or_else(|e| panic!("deep validation failed: {e}"));
    validate(bytes, false).unwrap();
    assert_eq!(header_total(bytes) as usize, bytes.len());
    assert_eq!(lp.bytes_len(), bytes.len());
    let again = Listpack::from_vec(bytes.to_vec(), true).unwrap();
    assert_eq!(&again, lp);

    assert_eq!(lp.len(), model.len());
    assert_eq!(lp.is_empty(), model.is_empty());
    let hc = lp.header_count();
    if hc != COUNT_UNKNOWN {
        assert_eq!(usize::from(hc), model.len());
    } else {
        // Unknown only after the count reached 65535 (delete_range recounts).
        assert!(model.len() >= usize::from(COUNT_UNKNOWN));
    }

    // Sizes: the buffer is exactly header + entries + terminator.
    let expect_bytes: usize = EMPTY_BYTES + model.iter().map(|m| Listpack::encoded_size(Value::Str(m))).sum::<usize>();
    assert_eq!(lp.bytes_len(), expect_bytes);

    let offs = offsets(lp);
    assert_eq!(offs.len(), model.len());
    for (i, (&o, m)) in offs.iter().zip(model).enumerate() {
        let v = lp.get(o);
        assert!(v.eq_bytes(m), "element {i} at {o}: {v:?} != {:?}", String::from_utf8_lossy(m));
        assert_eq!(string_of(v), *m);
        // Canonical integers must be stored with an integer encoding.
        match string_to_i64(m) {
            Some(n) => {
                assert_eq!(v, Value::Int(n));
                assert_eq!(lp.get_int(o), n);
            }
            None => assert!(matches!(v, Value::Str(_))),
        }
        assert_eq!(lp.entry_size(o), Some(Listpack::encoded_size(v)));
    }
    if !model.is_empty() {
        assert_eq!(lp.seek(0), offs.first().copied());
        let i = rng.below(model.len());
        assert_eq!(lp.seek(i), Some(offs[i]));
    }
    assert_eq!(lp.seek(model.len()), None);

    // Iterators: forward, backward, and both ends interleaved.
    assert!(lp.iter().map(string_of).eq(model.iter().cloned()));
    assert!(lp.iter().rev().map(string_of).eq(model.iter().rev().cloned()));
    let mut it = lp.iter();
    let (mut lo, mut hi) = (0usize, model.len());
    loop {
        if rng.chance(50) {
            match it.next() {
                Some(v) => {
                    assert!(v.eq_bytes(&model[lo]));
                    lo += 1;
                }
                None => break,
            }
        } else {
            match it.next_back() {
                Some(v) => {
                    hi -= 1;
                    assert!(v.eq_bytes(&model[hi]));
                }
                None => break,
            }
        }
    }
    assert_eq!(lo, hi, "double-ended iteration stopped early");
    assert!(it.next().is_none() && it.next_back().is_none());
}

/// For any bytes that pass deep validation: navigation agrees both ways, the
/// count matches, and mutations keep the listpack valid without panicking.
fn check_consistent(bytes: &[u8]) {
    let lp = Listpack::from_vec(bytes.to_vec(), true).expect("deep-valid bytes");
    let offs = offsets(&lp);
    let hc = lp.header_count();
    if hc != COUNT_UNKNOWN {
        assert_eq!(usize::from(hc), offs.len());
    }
    assert_eq!(lp.len(), offs.len());
    let fwd: Vec<Vec<u8>> = lp.iter().map(string_of).collect();
    let mut bwd: Vec<Vec<u8>> = lp.iter().rev().map(string_of).collect();
    bwd.reverse();
    assert_eq!(fwd, bwd);
    assert_eq!(fwd.len(), offs.len());
    for &o in &offs {
        let _ = lp.get(o).as_int();
    }

    let mut m = lp.clone();
    m.append_int(-5000);
    m.append_str(b"tail");
    validate(m.as_bytes(), true).unwrap();
    if let Some(f) = m.first() {
        m.replace(f, Value::Str(&[b'x'; 300]));
        validate(m.as_bytes(), true).unwrap();
    }
    if let Some(l) = m.last() {
        m.replace_int(l, 1);
        validate(m.as_bytes(), true).unwrap();
    }
    if let Some(f) = m.first() {
        m.delete_range(f, 2);
        validate(m.as_bytes(), true).unwrap();
    }
    assert_eq!(m.len(), offs.len());
}

// ---------------------------------------------------------------------------
// Encodings, byte for byte
// ---------------------------------------------------------------------------

fn enc_int(v: i64) -> Vec<u8> {
    let mut b = [0u8; MAX_INT_ENCODING_LEN];
    let n = encode_int(v, &mut b);
    b[..n].to_vec()
}

fn enc_backlen(l: usize) -> Vec<u8> {
    let mut b = [0u8; MAX_BACKLEN_SIZE];
    let n = encode_backlen(l, &mut b);
    b[..n].to_vec()
}

#[test]
fn integer_encodings_at_every_boundary() {
    let cases: &[(i64, &str)] = &[
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "c0 80"),
        (-1, "df ff"),
        (4095, "cf ff"),
        (-4096, "d0 00"),
        (4096, "f1 00 10"),
        (-4097, "f1 ff ef"),
        (32767, "f1 ff 7f"),
        (-32768, "f1 00 80"),
        (32768, "f2 00 80 00"),
        (-32769, "f2 ff 7f ff"),
        (8388607, "f2 ff ff 7f"),
        (-8388608, "f2 00 00 80"),
        (8388608, "f3 00 00 80 00"),
        (-8388609, "f3 ff ff 7f ff"),
        (2147483647, "f3 ff ff ff 7f"),
        (-2147483648, "f3 00 00 00 80"),
        (2147483648, "f4 00 00 00 80 00 00 00 00"),
        (-2147483649, "f4 ff ff ff 7f ff ff ff ff"),
        (i64::MAX, "f4 ff ff ff ff ff ff ff 7f"),
        (i64::MIN, "f4 00 00 00 00 00 00 00 80"),
    ];
    for &(v, h) in cases {
        let bytes = enc_int(v);
        assert_eq!(bytes, hex(h), "encoding of {v}");
        // Decodes back, alone and inside a listpack.
        let (dv, n) = decode(&bytes, 0);
        assert_eq!((dv, n), (Value::Int(v), bytes.len()));
        let mut lp = Listpack::new();
        lp.append_int(v);
        assert_eq!(lp.get(lp.first().unwrap()), Value::Int(v));
        assert_eq!(Listpack::encoded_size(Value::Int(v)), bytes.len() + 1);
    }
}

#[test]
fn string_encodings_at_every_boundary() {
    for &(len, hdr) in &[(0usize, "80"), (1, "81"), (63, "bf"), (64, "e0 40"), (4095, "ef ff"), (4096, "f0 00 10 00 00"), (70000, "f0 70 11 01 00")] {
        let s = vec![b'a'; len];
        let mut lp = Listpack::new();
        lp.append_str(&s);
        let b = lp.as_bytes();
        let h = hex(hdr);
        assert_eq!(&b[HDR_SIZE..HDR_SIZE + h.len()], &h[..], "header of {len}-byte string");
        let enc_len = h.len() + len;
        let bl = enc_backlen(enc_len);
        assert_eq!(&b[HDR_SIZE + enc_len..b.len() - 1], &bl[..]);
        assert_eq!(Listpack::encoded_size(Value::Str(&s)), enc_len + bl.len());
        assert_eq!(lp.get(HDR_SIZE), Value::Str(&s[..]));
    }
}

#[test]
fn backlen_at_every_boundary() {
    let cases: &[(usize, &str)] = &[
        (1, "01"),
        (127, "7f"),
        (128, "01 80"),
        (16382, "7f fe"),
        // Redis uses `l < 16383`: 16383 takes 3 bytes.
        (16383, "00 ff ff"),
        (16384, "01 80 80"),
        (2097150, "7f ff fe"),
        (2097151, "00 ff ff ff"),
        (268435454, "7f ff ff fe"),
        (268435455, "00 ff ff ff ff"),
        (u32::MAX as usize, "0f ff ff ff ff"),
        (u32::MAX as usize + 5, "10 80 80 80 84"),
    ];
    for &(l, h) in cases {
        let b = enc_backlen(l);
        assert_eq!(b, hex(h), "backlen of {l}");
        assert_eq!(backlen_size(l), b.len());
        // Decoding starts at the end and walks left.
        let mut buf = vec![0xAA; 3];
        buf.extend_from_slice(&b);
        assert_eq!(decode_backlen(&buf, buf.len()), Some(l));
    }
    // More than 5 bytes, or running off the start, is rejected.
    assert_eq!(decode_backlen(&[0x80; 6], 6), None);
    assert_eq!(decode_backlen(&[0x80, 0x80], 2), None);
    assert_eq!(decode_backlen(&[], 0), None);
    assert_eq!(decode_backlen(&[1, 2], 3), None);
}

#[test]
fn canonical_integer_strings() {
    let yes: &[(&str, i64)] = &[
        ("0", 0),
        ("1", 1),
        ("-1", -1),
        ("127", 127),
        ("-4096", -4096),
        ("9223372036854775807", i64::MAX),
        ("-9223372036854775808", i64::MIN),
        ("10", 10),
    ];
    for &(s, v) in yes {
        assert_eq!(string_to_i64(s.as_bytes()), Some(v), "{s}");
        assert_eq!(string_of(Value::Int(v)), s.as_bytes());
    }
    let no = [
        "",
        "-",
        "+1",
        "-0",
        "007",
        "00",
        "01",
        "-01",
        " 1",
        "1 ",
        "1.0",
        "1e3",
        "0x10",
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999",
        "123456789012345678901",
        "--1",
        "1-",
    ];
    for s in no {
        assert_eq!(string_to_i64(s.as_bytes()), None, "{s:?}");
        // And such strings stay strings.
        let mut lp = Listpack::new();
        lp.append_str(s.as_bytes());
        assert_eq!(lp.get(HDR_SIZE), Value::Str(s.as_bytes()));
    }
}

#[test]
fn value_helpers() {
    assert_eq!(Value::Int(-12).as_int(), Some(-12));
    assert_eq!(Value::Str(b"-12").as_int(), Some(-12));
    assert_eq!(Value::Str(b"012").as_int(), None);
    assert!(Value::Int(i64::MIN).eq_bytes(b"-9223372036854775808"));
    assert!(Value::Int(0).eq_bytes(b"0"));
    assert!(!Value::Int(0).eq_bytes(b"-0"));
    assert!(!Value::Int(7).eq_bytes(b"07"));
    assert!(Value::Str(b"07").eq_bytes(b"07"));
    assert!(Value::Str(b"").eq_bytes(b""));
    let mut out = b"x".to_vec();
    Value::Int(-4096).write_to(&mut out);
    Value::Str(b"yz").write_to(&mut out);
    assert_eq!(out, b"x-4096yz");
}

#[test]
fn empty_listpack() {
    let lp = Listpack::new();
    assert_eq!(lp.as_bytes(), &[7, 0, 0, 0, 0, 0, 0xff]);
    assert_eq!(lp.bytes_len(), EMPTY_BYTES);
    assert!(lp.is_empty());
    assert_eq!(lp.len(), 0);
    assert_eq!((lp.first(), lp.last()), (None, None));
    assert_eq!(lp.iter().next(), None);
    assert_eq!(lp.iter().next_back(), None);
    assert_eq!(Listpack::with_capacity(4096), lp);
    assert!(Listpack::with_capacity(4096).alloc_bytes() >= 4096);
    assert_eq!(Listpack::default(), lp);
    validate(lp.as_bytes(), true).unwrap();
    let mut m = lp.clone();
    m.delete_range(HDR_SIZE, 5); // the terminator: nothing to delete
    assert_eq!(m, lp);
}

#[test]
fn stream_style_int_walk() {
    // A stream master entry: count, deleted, num-fields, fields..., 0.
    let mut lp = Listpack::new();
    for v in [3i64, 0, 2] {
        lp.append_int(v);
    }
    lp.append_str(b"f1");
    lp.append_str(b"f2");
    lp.append_int(0);
    lp.append_str(b"123456"); // stored as an integer
    let mut p = lp.first();
    assert_eq!(lp.next_int(&mut p), 3);
    assert_eq!(lp.next_int(&mut p), 0);
    assert_eq!(lp.next_int(&mut p), 2);
    let f1 = p.unwrap();
    assert_eq!(lp.get(f1), Value::Str(b"f1"));
    assert_eq!(lp.try_get_int(f1), None);
    p = lp.next(lp.next(f1).unwrap());
    assert_eq!(lp.next_int(&mut p), 0);
    assert_eq!(lp.next_int(&mut p), 123456);
    assert_eq!(p, None);
    // Replacing an int in place with a same-size int keeps every offset.
    let first = lp.first().unwrap();
    let before = offsets(&lp);
    lp.replace_int(first, 99);
    assert_eq!(offsets(&lp), before);
    assert_eq!(lp.get_int(first), 99);
    // Growing it shifts the rest.
    lp.replace_int(first, 100_000);
    assert_eq!(lp.get_int(first), 100_000);
    assert_eq!(lp.len(), 7);
    validate(lp.as_bytes(), true).unwrap();
}

#[test]
fn get_int_on_string_is_zero() {
    // Where Redis asserts (lpGetInteger on a string): only a node loaded without
    // the deep check gets here, and reading stays total.
    let mut lp = Listpack::new();
    lp.append_str(b"abc");
    assert_eq!(lp.get_int(HDR_SIZE), 0);
    let mut p = Some(HDR_SIZE);
    assert_eq!((lp.next_int(&mut p), p), (0, None));
    assert_eq!((lp.next_int(&mut p), p), (0, None));
}

#[test]
fn decode_is_total() {
    // Every offset of every prefix of a listpack holding each encoding: a value
    // or GARBAGE, never a panic, and the size never runs past the buffer.
    let mut lp = Listpack::new();
    for v in [0i64, 100, -100, 1000, -30000, 1 << 20, 1 << 30, i64::MIN] {
        lp.append_int(v);
    }
    for n in [0usize, 1, 63, 64, 4095, 4096] {
        lp.append_str(&vec![b'x'; n]);
    }
    let bytes = lp.as_bytes().to_vec();
    for len in 0..=bytes.len() {
        let b = &bytes[..len];
        for off in 0..len + 2 {
            let (v, size) = decode(b, off);
            assert!(size >= 1);
            if (v, size) != GARBAGE {
                assert!(off + size <= len, "offset {off} of {len}");
            }
        }
    }
}

#[test]
fn size_limit_is_checked_before_writing() {
    assert_eq!(checked_total(MAX_BYTES - 3, 0, 3), Ok(MAX_BYTES));
    assert_eq!(checked_total(MAX_BYTES - 3, 0, 4), Err(LpError::TooLarge { bytes: MAX_BYTES + 1 }));
    assert_eq!(checked_total(MAX_BYTES, 10, 10), Ok(MAX_BYTES));
    assert!(checked_total(usize::MAX, 0, usize::MAX).is_err());
    // Replacing at a non-element offset is refused, not a corruption.
    let mut lp = Listpack::new();
    lp.append_int(1);
    let before = lp.clone();
    assert!(lp.try_replace(0, Value::Int(5)).is_err());
    assert!(lp.try_replace(lp.bytes_len() - 1, Value::Int(5)).is_err());
    assert_eq!(lp, before);
}

#[test]
fn header_count_overflow_to_unknown() {
    let mut lp = Listpack::new();
    for i in 0..65534u32 {
        lp.append_int(i64::from(i % 100));
    }
    assert_eq!(lp.header_count(), 65534);
    lp.append_int(1);
    // Like lpInsert: the 65535th element makes the count unknown...
    assert_eq!(lp.header_count(), COUNT_UNKNOWN);
    for _ in 0..4465 {
        lp.append_str(b"ab");
    }
    // ... and it stays unknown while appending.
    assert_eq!(lp.header_count(), COUNT_UNKNOWN);
    assert_eq!(lp.len(), 70000);
    assert_eq!(lp.iter().count(), 70000);
    assert_eq!(lp.iter().rev().count(), 70000);
    validate(lp.as_bytes(), true).unwrap();
    // A deep validation accepts the unknown count with any number of entries.
    lp.delete_range(lp.first().unwrap(), 10);
    // delete_range recounts (as lpDeleteRange); 69990 still does not fit.
    assert_eq!(lp.header_count(), COUNT_UNKNOWN);
    assert_eq!(lp.len(), 69990);
    lp.delete_range(lp.first().unwrap(), 10_000);
    assert_eq!(lp.header_count(), 59990);
    assert_eq!(lp.len(), 59990);
    validate(lp.as_bytes(), true).unwrap();
    // A header of 65535 on a short listpack is accepted and walked.
    let mut small = Listpack::new();
    small.append_int(5);
    let mut b = small.into_vec();
    b[4] = 0xff;
    b[5] = 0xff;
    let lp = Listpack::from_vec(b, true).unwrap();
    assert_eq!(lp.len(), 1);
}

#[test]
fn appends_are_amortised() {
    // Capacity must grow geometrically: few reallocations for many appends.
    let mut lp = Listpack::new();
    let mut reallocs = 0;
    let mut cap = lp.alloc_bytes();
    for i in 0..100_000i64 {
        lp.append_int(i);
        if lp.alloc_bytes() != cap {
            reallocs += 1;
            cap = lp.alloc_bytes();
        }
    }
    assert!(reallocs < 40, "{reallocs} reallocations");
    lp.shrink_to_fit();
    assert_eq!(lp.alloc_bytes(), lp.bytes_len());
}

// ---------------------------------------------------------------------------
// Golden listpacks written by Redis 7.0.15 (DUMP of listpack-encoded keys with
// rdbcompression off; the listpack is the payload's RDB string).
// ---------------------------------------------------------------------------

/// `HSET hsmall` with these field/value pairs (type 16, hash listpack):
/// every integer encoding at its boundaries, and strings that look like
/// integers but are not canonical.
const HSMALL_PAIRS: &[(&str, &str)] = &[
    ("a", "0"),
    ("b", "127"),
    ("c", "128"),
    ("-1", "-4096"),
    ("4095", "4096"),
    ("-4097", "32767"),
    ("-32768", "32768"),
    ("-32769", "8388607"),
    ("-8388608", "8388608"),
    ("-8388609", "2147483647"),
    ("-2147483648", "2147483648"),
    ("-2147483649", "9223372036854775807"),
    ("-9223372036854775808", "9223372036854775808"),
    ("-9223372036854775809", "18446744073709551615"),
    ("007", "-0"),
    ("+1", " 1"),
    ("1 ", ""),
    ("-", "0x10"),
    ("00", "-007"),
    ("01", "1.5"),
    ("12345678901234567890", "-12"),
];

fn golden_hsmall() -> Vec<u8> {
    hex(concat!(
        "110100002a0081610200018162027f01816302c08002dfff02d00002cfff02f1",
        "001003f1ffef03f1ff7f03f1008003f200800004f2ff7fff04f2ffff7f04f200",
        "008004f30000800005f3ffff7fff05f3ffffff7f05f30000008005f400000080",
        "0000000009f4ffffff7fffffffff09f4ffffffffffffff7f09f4000000000000",
        "008009933932323333373230333638353437373538303814942d393232333337",
        "3230333638353437373538303915943138343436373434303733373039353531",
        "363135158330303704822d3003822b310382203103823120038001812d028430",
        "7831300582303003842d303037058230310383312e3504943132333435363738",
        "39303132333435363738393015dff402ff",
    ))
}

/// `RPUSH lsmall` (type 18, quicklist of one listpack node).
const LSMALL_ITEMS: &[&str] = &["hello", "1", "-1", "300", "70000", "foo", "bar", "9999999999", ""];

fn golden_lsmall() -> Vec<u8> {
    hex(concat!("3100000009008568656c6c6f060101dfff02c12c02f27011010483666f6f0483", "62617204f4ffe30b5402000000098001ff",))
}

/// `XADD s1 1-1 f1 v1 f2 100`, `XADD s1 1-2 f1 v2 f2 -5`, `XADD s1 5-0 other x`
/// (type 19, the stream's only node). Elements as Redis wrote them: master
/// entry, then per entry flags, ms-diff, seq-diff, [fields,] values, lp-count.
#[rustfmt::skip]
fn golden_s1_values() -> Vec<Value<'static>> {
    use Value::{Int as I, Str as S};
    vec![
        I(3), I(0), I(2), S(b"f1"), S(b"f2"), I(0),
        I(2), I(0), I(0), S(b"v1"), I(100), I(5),
        I(2), I(0), I(1), S(b"v2"), I(-5), I(5),
        I(0), I(4), I(-1), I(1), S(b"other"), S(b"x"), I(6),
    ]
}

fn golden_s1() -> Vec<u8> {
    hex(concat!(
        "4900000019000301000102018266310382663203000102010001000182763103",
        "6401050102010001010182763203dffb02050100010401dfff020101856f7468",
        "6572068178020601ff",
    ))
}

/// `HSET hbig` (hash-max-listpack-value 100000) with long strings around the
/// string-encoding and backlen boundaries: enc_len 127/128 (1/2-byte backlen)
/// and 16382/16383 (2/3-byte backlen). Stored run-length encoded.
const HBIG_PAIRS: &[(&str, u8, usize)] = &[
    ("s63", b'x', 63),
    ("s64", b'y', 64),
    ("s4095", b'z', 4095),
    ("s4096", b'w', 4096),
    ("s70000", b'v', 70000),
    ("s127", b'q', 127),
    ("s128", b'r', 128),
    ("s16380", b'k', 16380),
    ("s16381", b'm', 16381),
    ("s125", b'a', 125),
    ("s126", b'b', 126),
    ("s16377", b'n', 16377),
    ("s16378", b'o', 16378),
];

const HBIG_RLE: &[(u8, usize)] = &[
    (0x79, 1),
    (0x34, 1),
    (0x02, 1),
    (0x00, 1),
    (0x1a, 1),
    (0x00, 1),
    (0x83, 1),
    (0x73, 1),
    (0x36, 1),
    (0x33, 1),
    (0x04, 1),
    (0xbf, 1),
    (0x78, 63),
    (0x40, 1),
    (0x83, 1),
    (0x73, 1),
    (0x36, 1),
    (0x34, 1),
    (0x04, 1),
    (0xe0, 1),
    (0x40, 1),
    (0x79, 64),
    (0x42, 1),
    (0x85, 1),
    (0x73, 1),
    (0x34, 1),
    (0x30, 1),
    (0x39, 1),
    (0x35, 1),
    (0x06, 1),
    (0xef, 1),
    (0xff, 1),
    (0x7a, 4095),
    (0x20, 1),
    (0x81, 1),
    (0x85, 1),
    (0x73, 1),
    (0x34, 1),
    (0x30, 1),
    (0x39, 1),
    (0x36, 1),
    (0x06, 1),
    (0xf0, 1),
    (0x00, 1),
    (0x10, 1),
    (0x00, 2),
    (0x77, 4096),
    (0x20, 1),
    (0x85, 1),
    (0x86, 1),
    (0x73, 1),
    (0x37, 1),
    (0x30, 4),
    (0x07, 1),
    (0xf0, 1),
    (0x70, 1),
    (0x11, 1),
    (0x01, 1),
    (0x00, 1),
    (0x76, 70000),
    (0x04, 1),
    (0xa2, 1),
    (0xf5, 1),
    (0x84, 1),
    (0x73, 1),
    (0x31, 1),
    (0x32, 1),
    (0x37, 1),
    (0x05, 1),
    (0xe0, 1),
    (0x7f, 1),
    (0x71, 127),
    (0x01, 1),
    (0x81, 1),
    (0x84, 1),
    (0x73, 1),
    (0x31, 1),
    (0x32, 1),
    (0x38, 1),
    (0x05, 1),
    (0xe0, 1),
    (0x80, 1),
    (0x72, 128),
    (0x01, 1),
    (0x82, 1),
    (0x86, 1),
    (0x73, 1),
    (0x31, 1),
    (0x36, 1),
    (0x33, 1),
    (0x38, 1),
    (0x30, 1),
    (0x07, 1),
    (0xf0, 1),
    (0xfc, 1),
    (0x3f, 1),
    (0x00, 2),
    (0x6b, 16380),
    (0x01, 1),
    (0x80, 1),
    (0x81, 1),
    (0x86, 1),
    (0x73, 1),
    (0x31, 1),
    (0x36, 1),
    (0x33, 1),
    (0x38, 1),
    (0x31, 1),
    (0x07, 1),
    (0xf0, 1),
    (0xfd, 1),
    (0x3f, 1),
    (0x00, 2),
    (0x6d, 16381),
    (0x01, 1),
    (0x80, 1),
    (0x82, 1),
    (0x84, 1),
    (0x73, 1),
    (0x31, 1),
    (0x32, 1),
    (0x35, 1),
    (0x05, 1),
    (0xe0, 1),
    (0x7d, 1),
    (0x61, 125),
    (0x7f, 1),
    (0x84, 1),
    (0x73, 1),
    (0x31, 1),
    (0x32, 1),
    (0x36, 1),
    (0x05, 1),
    (0xe0, 1),
    (0x7e, 1),
    (0x62, 126),
    (0x01, 1),
    (0x80, 1),
    (0x86, 1),
    (0x73, 1),
    (0x31, 1),
    (0x36, 1),
    (0x33, 1),
    (0x37, 2),
    (0x07, 1),
    (0xf0, 1),
    (0xf9, 1),
    (0x3f, 1),
    (0x00, 2),
    (0x6e, 16377),
    (0x7f, 1),
    (0xfe, 1),
    (0x86, 1),
    (0x73, 1),
    (0x31, 1),
    (0x36, 1),
    (0x33, 1),
    (0x37, 1),
    (0x38, 1),
    (0x07, 1),
    (0xf0, 1),
    (0xfa, 1),
    (0x3f, 1),
    (0x00, 2),
    (0x6f, 16378),
    (0x00, 1),
    (0xff, 3),
];

fn golden_hbig() -> Vec<u8> {
    HBIG_RLE.iter().flat_map(|&(b, n)| std::iter::repeat_n(b, n)).collect()
}

fn build_from_strs<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Listpack {
    let mut lp = Listpack::new();
    for s in items {
        lp.append_str(s);
    }
    lp
}

fn check_golden(golden: &[u8], built: &Listpack) {
    assert_eq!(built.as_bytes().len(), golden.len(), "size differs from Redis");
    if let Some(i) = built.as_bytes().iter().zip(golden).position(|(a, b)| a != b) {
        panic!("byte {i} differs from Redis: ours {:02x}, Redis {:02x}", built.as_bytes()[i], golden[i]);
    }
    validate(golden, true).unwrap();
    // Re-appending the decoded values reproduces the bytes too.
    let lp = Listpack::from_vec(golden.to_vec(), true).unwrap();
    let mut again = Listpack::new();
    for v in lp.iter() {
        again.append(v);
    }
    assert_eq!(again.as_bytes(), golden);
    check_consistent(golden);
}

#[test]
fn golden_hash_small() {
    let g = golden_hsmall();
    let lp = build_from_strs(HSMALL_PAIRS.iter().flat_map(|(k, v)| [k.as_bytes(), v.as_bytes()]));
    check_golden(&g, &lp);
    assert_eq!(lp.len(), 42);
    let mut rng = Rng::new(1);
    let model: Vec<Vec<u8>> = HSMALL_PAIRS.iter().flat_map(|(k, v)| [k.as_bytes().to_vec(), v.as_bytes().to_vec()]).collect();
    check_model(&lp, &model, &mut rng);
}

#[test]
fn golden_list_small() {
    let g = golden_lsmall();
    let lp = build_from_strs(LSMALL_ITEMS.iter().map(|s| s.as_bytes()));
    check_golden(&g, &lp);
}

#[test]
fn golden_stream_node() {
    let g = golden_s1();
    let vals = golden_s1_values();
    let mut lp = Listpack::new();
    for v in &vals {
        match *v {
            Value::Int(i) => lp.append_int(i),
            Value::Str(s) => lp.append_str(s),
        }
    }
    check_golden(&g, &lp);
    let parsed = Listpack::from_vec(g, true).unwrap();
    assert!(parsed.iter().eq(vals.iter().copied()));
    assert!(parsed.iter().rev().eq(vals.iter().rev().copied()));
}

#[test]
fn golden_hash_big_strings() {
    let g = golden_hbig();
    let values: Vec<Vec<u8>> = HBIG_PAIRS.iter().map(|&(_, b, n)| vec![b; n]).collect();
    let lp = build_from_strs(HBIG_PAIRS.iter().zip(&values).flat_map(|(&(k, _, _), v)| [k.as_bytes(), &v[..]]));
    check_golden(&g, &lp);
    assert_eq!(lp.bytes_len(), 144505);
}

/// `XADD shuge 1-1 f0 0 f1 1 ... f32999 32999`: one stream node of 66008
/// elements, so Redis' header count overflowed to 65535. Too big to embed:
/// checked by size, header, tail and FNV-1a.
#[test]
fn golden_stream_count_overflow() {
    const N: i64 = 33000;
    let mut lp = Listpack::new();
    for v in [1, 0, N] {
        lp.append_int(v); // master entry: count, deleted, num-fields
    }
    for j in 0..N {
        lp.append_str(format!("f{j}").as_bytes());
    }
    lp.append_int(0); // master terminator
    for v in [2, 0, 0] {
        lp.append_int(v); // flags = SAMEFIELDS, ms-diff, seq-diff
    }
    for j in 0..N {
        lp.append_str(format!("{j}").as_bytes());
    }
    lp.append_int(N + 3); // lp-count
    let b = lp.as_bytes();
    assert_eq!(b.len(), 380927);
    assert_eq!(&b[..8], &hex("ffcf0500ffff0101")[..]);
    assert_eq!(&b[b.len() - 8..], &hex("0004f2eb800004ff")[..]);
    assert_eq!(fnv1a64(b), 0x4008_2e21_f262_aced);
    assert_eq!(lp.header_count(), COUNT_UNKNOWN);
    assert_eq!(lp.len(), 66008);
    validate(b, true).unwrap();
}

// ---------------------------------------------------------------------------
// Randomised model test: a Listpack against a Vec<Vec<u8>>
// ---------------------------------------------------------------------------

/// Integers at and around every encoding boundary.
const BOUNDARY_INTS: &[i64] = &[
    0,
    1,
    63,
    64,
    127,
    128,
    -1,
    -64,
    -4096,
    -4097,
    4095,
    4096,
    8191,
    -8192,
    32767,
    32768,
    -32768,
    -32769,
    8388607,
    8388608,
    -8388608,
    -8388609,
    2147483647,
    2147483648,
    -2147483648,
    -2147483649,
    i64::MAX,
    i64::MAX - 1,
    i64::MIN,
    i64::MIN + 1,
];

/// String lengths at and around every string-encoding and backlen boundary:
/// 6/12/32-bit headers (63/64, 4095/4096), enc_len 127/128 (125/126 for a
/// 12-bit string) and 16382/16383 (16377/16378 for a 32-bit string).
const BOUNDARY_LENS: &[usize] = &[0, 1, 2, 62, 63, 64, 65, 125, 126, 127, 128, 4094, 4095, 4096, 4097, 16377, 16378, 16379, 70000];

/// Strings that are, or look like but are not, canonical integers.
const TRICKY_STRS: &[&str] = &[
    "0",
    "-0",
    "007",
    "00",
    "+1",
    " 1",
    "1 ",
    "-",
    "",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1.5",
    "1e9",
    "-12",
    "4096",
    "abc",
];

/// A random element as (how to append it, its string form).
enum Gen {
    Int(i64),
    Str(Vec<u8>),
}

impl Gen {
    fn value(&self) -> Value<'_> {
        match self {
            Gen::Int(i) => Value::Int(*i),
            Gen::Str(s) => Value::Str(s),
        }
    }
    fn model(&self) -> Vec<u8> {
        string_of(self.value())
    }
}

fn gen_value(rng: &mut Rng, small_only: bool) -> Gen {
    let int = |rng: &mut Rng| -> i64 {
        match rng.below(3) {
            0 => *rng.pick(BOUNDARY_INTS),
            1 => (rng.next_u64() >> rng.below(64)) as i64 * if rng.chance(50) { -1 } else { 1 },
            _ => rng.below(300) as i64 - 150,
        }
    };
    match rng.below(6) {
        0 => Gen::Int(int(rng)),
        // An integer given as a string: must be stored as that integer.
        1 => Gen::Str(string_of(Value::Int(int(rng)))),
        2 => Gen::Str(rng.pick(TRICKY_STRS).as_bytes().to_vec()),
        3 if !small_only => {
            let len = *rng.pick(BOUNDARY_LENS);
            let fill = b'a' + rng.below(26) as u8;
            let mut s = vec![fill; len];
            if let Some(b) = s.first_mut() {
                *b = rng.below(256) as u8; // maybe a digit, maybe binary
            }
            Gen::Str(s)
        }
        _ => {
            let len = rng.below(20);
            Gen::Str((0..len).map(|_| rng.below(256) as u8).collect())
        }
    }
}

fn run_model(rng: &mut Rng, ops: usize, small_only: bool) {
    let mut lp = if rng.chance(50) { Listpack::new() } else { Listpack::with_capacity(rng.below(5000)) };
    let mut model: Vec<Vec<u8>> = Vec::new();
    for _ in 0..ops {
        match rng.below(100) {
            0..=59 => {
                let g = gen_value(rng, small_only);
                let before = lp.bytes_len();
                lp.append(g.value());
                assert_eq!(lp.bytes_len() - before, Listpack::encoded_size(g.value()));
                model.push(g.model());
            }
            60..=79 if !model.is_empty() => {
                let i = rng.below(model.len());
                let off = lp.seek(i).unwrap();
                let g = gen_value(rng, small_only);
                match &g {
                    Gen::Int(v) if rng.chance(50) => lp.replace_int(off, *v),
                    _ => lp.replace(off, g.value()),
                }
                model[i] = g.model();
            }
            80..=86 if !model.is_empty() => {
                let i = rng.below(model.len());
                let n = match rng.below(10) {
                    0 => model.len() - i,     // to the end exactly
                    1 => model.len() - i + 5, // past the end: clamped
                    2..=5 => 1,
                    _ => 1 + rng.below(5),
                };
                lp.delete_range(lp.seek(i).unwrap(), n);
                model.drain(i..(i + n).min(model.len()));
            }
            87..=89 => {
                // Round-trip through bytes mid-run.
                lp = Listpack::from_vec(lp.clone().into_vec(), rng.chance(50)).unwrap();
            }
            90..=92 => lp.shrink_to_fit(),
            _ => {}
        }
        // Keep the run fast: bound the size.
        if lp.bytes_len() > 400_000 || model.len() > 400 {
            let i = rng.below(model.len());
            lp.delete_range(lp.seek(i).unwrap(), model.len());
            model.truncate(i);
        }
        check_model(&lp, &model, rng);
    }
}

#[test]
fn model_mixed_sizes() {
    let mut rng = Rng::new(seed("model_mixed_sizes"));
    for _ in 0..4 {
        run_model(&mut rng, 1500, false);
    }
}

#[test]
fn model_small_values() {
    let mut rng = Rng::new(seed("model_small_values"));
    for _ in 0..4 {
        run_model(&mut rng, 1500, true);
    }
}

// ---------------------------------------------------------------------------
// Validation of untrusted bytes: Err or a consistent Ok, never a panic
// ---------------------------------------------------------------------------

/// Builds a listpack from raw entry bytes with a correct header.
fn raw_listpack(entries: &[u8], count: u16) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&((entries.len() + EMPTY_BYTES) as u32).to_le_bytes());
    b.extend_from_slice(&count.to_le_bytes());
    b.extend_from_slice(entries);
    b.push(EOF);
    b
}

/// Validates both ways; anything deep-valid must be consistent, and shallow
/// validity must follow from deep validity.
fn probe(bytes: &[u8]) -> Result<(), LpError> {
    let shallow = validate(bytes, false);
    let deep = validate(bytes, true);
    if deep.is_ok() {
        assert!(shallow.is_ok(), "deep ok but shallow {shallow:?}");
        check_consistent(bytes);
    }
    if shallow.is_ok() {
        assert!(Listpack::from_vec(bytes.to_vec(), false).is_ok());
    }
    assert_eq!(Listpack::from_vec(bytes.to_vec(), true).err(), deep.clone().err());
    deep
}

fn sample_listpacks(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut out = vec![golden_hsmall(), golden_lsmall(), golden_s1(), Listpack::new().into_vec()];
    for _ in 0..6 {
        let mut lp = Listpack::new();
        for _ in 0..rng.below(30) {
            let small = rng.chance(70);
            lp.append(gen_value(rng, small).value());
        }
        out.push(lp.into_vec());
    }
    out
}

#[test]
fn every_truncation_is_rejected() {
    let mut rng = Rng::new(seed("every_truncation_is_rejected"));
    let mut samples = sample_listpacks(&mut rng);
    samples.push(golden_hbig());
    for full in &samples {
        let step = if full.len() > 20_000 { 97 } else { 1 };
        for k in (0..full.len()).step_by(step) {
            let cut = &full[..k];
            assert!(validate(cut, true).is_err(), "truncation to {k} accepted");
            assert!(validate(cut, false).is_err());
            // Same cut with the header and terminator patched to look right:
            // the walk must notice the missing entry bytes (or accept a
            // consistent prefix).
            if k >= EMPTY_BYTES {
                let mut fixed = cut.to_vec();
                fixed[..4].copy_from_slice(&(k as u32).to_le_bytes());
                fixed[k - 1] = EOF;
                let _ = probe(&fixed);
            }
        }
    }
}

#[test]
fn random_byte_flips() {
    let mut rng = Rng::new(seed("random_byte_flips"));
    let samples = sample_listpacks(&mut rng);
    let mut accepted = 0;
    for _ in 0..20_000 {
        let mut b = rng.pick(&samples).clone();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(b.len());
            b[i] = match rng.below(3) {
                0 => b[i] ^ (1 << rng.below(8)),
                1 => *rng.pick(&[0x00, 0x7f, 0x80, 0xbf, 0xc0, 0xe0, 0xef, 0xf0, 0xf4, 0xf5, 0xfe, 0xff]),
                _ => rng.below(256) as u8,
            };
        }
        if probe(&b).is_ok() {
            accepted += 1;
        }
    }
    eprintln!("random_byte_flips: {accepted} of 20000 mutants were still valid");
}

#[test]
fn random_garbage() {
    let mut rng = Rng::new(seed("random_garbage"));
    for _ in 0..20_000 {
        let len = rng.below(64);
        let mut b: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
        if len >= EMPTY_BYTES && rng.chance(80) {
            // Make the header plausible so the walk is exercised.
            b[..4].copy_from_slice(&(len as u32).to_le_bytes());
            b[len - 1] = EOF;
            if rng.chance(50) {
                b[4] = 0xff;
                b[5] = 0xff;
            }
        }
        let _ = probe(&b);
    }
}

#[test]
fn crafted_headers_and_entries() {
    use LpError::*;
    // Too short, and wrong total-bytes fields.
    assert_eq!(validate(&[], true), Err(TooShort { len: 0 }));
    assert_eq!(validate(&[6, 0, 0, 0, 0, 0], false), Err(TooShort { len: 6 }));
    assert_eq!(validate(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0xff], true), Err(BadTotalBytes { header: u32::MAX, actual: 7 }));
    assert_eq!(validate(&[8, 0, 0, 0, 0, 0, 0xff], false), Err(BadTotalBytes { header: 8, actual: 7 }));
    assert_eq!(validate(&[7, 0, 0, 0, 0, 0, 0x00], true), Err(NoTerminator));
    assert_eq!(probe(&[7, 0, 0, 0, 0, 0, 0xff]), Ok(()));

    // Lying counts; 65535 means unknown and is accepted.
    assert_eq!(probe(&raw_listpack(&[5, 1, 6, 1], 2)), Ok(()));
    assert_eq!(probe(&raw_listpack(&[5, 1, 6, 1], 3)), Err(CountMismatch { header: 3, actual: 2 }));
    assert_eq!(probe(&raw_listpack(&[5, 1, 6, 1], 1)), Err(CountMismatch { header: 1, actual: 2 }));
    assert_eq!(probe(&raw_listpack(&[5, 1, 6, 1], 0)), Err(CountMismatch { header: 0, actual: 2 }));
    assert_eq!(probe(&raw_listpack(&[5, 1, 6, 1], 65535)), Ok(()));
    assert_eq!(probe(&raw_listpack(&[], 65535)), Ok(()));
    // Shallow validation does not walk, so it misses the count.
    assert!(validate(&raw_listpack(&[5, 1, 6, 1], 3), false).is_ok());

    // Backlen mismatches.
    assert_eq!(probe(&raw_listpack(&[5, 2], 1)), Err(BadBacklen { offset: 6 }));
    assert_eq!(probe(&raw_listpack(&[5, 1, 6, 0x81], 2)), Err(BadBacklen { offset: 8 }));
    assert_eq!(probe(&raw_listpack(&[0x82, b'a', b'b', 4], 1)), Err(BadBacklen { offset: 6 }));
    // A 126-byte 12-bit string (enc_len 128) needs the 2-byte backlen 01 80;
    // a 1-byte backlen makes it overflow into the terminator.
    let mut e = vec![0xe0, 126];
    e.extend_from_slice(&[b'z'; 126]);
    let good = {
        let mut g = e.clone();
        g.extend_from_slice(&[0x01, 0x80]);
        g
    };
    assert_eq!(probe(&raw_listpack(&good, 1)), Ok(()));
    let mut bad = e.clone();
    bad.push(0x80);
    assert_eq!(probe(&raw_listpack(&bad, 1)), Err(EntryOverflow { offset: 6 }));
    let mut bad = e.clone();
    bad.extend_from_slice(&[0x80, 0x01]); // right value, wrong byte order
    assert_eq!(probe(&raw_listpack(&bad, 1)), Err(BadBacklen { offset: 6 }));
    // Non-canonical backlen that decodes to the right value via a data byte:
    // Redis would accept it; we require the exact bytes.
    let mut e = vec![0xe0, 125]; // enc_len 127 -> 1-byte backlen 7f
    e.extend_from_slice(&[0u8; 125]);
    e.push(0xff); // decodes as 0x7f plus "more to the left" into the data
    assert_eq!(probe(&raw_listpack(&e, 1)), Err(BadBacklen { offset: 6 }));

    // Unknown encodings and misplaced terminators.
    for b0 in 0xf5..=0xfeu8 {
        assert_eq!(probe(&raw_listpack(&[b0, 1], 1)), Err(BadEncoding { offset: 6 }));
        assert_eq!(validate(&raw_listpack(&[b0, 1], 1), false), Err(BadEncoding { offset: 6 }));
    }
    assert_eq!(probe(&raw_listpack(&[5, 1, 0xff, 6, 1], 2)), Err(MisplacedTerminator { offset: 8 }));
    assert_eq!(probe(&raw_listpack(&[0xff], 0)), Err(MisplacedTerminator { offset: 6 }));

    // Entries running past the end: huge 32-bit string lengths, truncated
    // headers and integers.
    for len in [u32::MAX, u32::MAX - 4, u32::MAX - 5, 1 << 31, 4096, 10] {
        let mut e = vec![0xf0];
        e.extend_from_slice(&len.to_le_bytes());
        e.extend_from_slice(b"abc\x08");
        assert_eq!(probe(&raw_listpack(&e, 1)), Err(EntryOverflow { offset: 6 }), "len {len}");
        assert!(validate(&raw_listpack(&e, 1), false).is_err());
    }
    assert_eq!(probe(&raw_listpack(&[0xf0, 1, 0], 1)), Err(EntryOverflow { offset: 6 }));
    assert_eq!(probe(&raw_listpack(&[0xe0], 1)), Err(EntryOverflow { offset: 6 }));
    assert_eq!(probe(&raw_listpack(&[0xf4, 1, 2, 3], 1)), Err(EntryOverflow { offset: 6 }));
    assert_eq!(probe(&raw_listpack(&[0xc0], 1)), Err(EntryOverflow { offset: 6 }));
    assert_eq!(probe(&raw_listpack(&[0xbf, 1, 2], 1)), Err(EntryOverflow { offset: 6 }));
    assert_eq!(probe(&raw_listpack(&[5], 1)), Err(EntryOverflow { offset: 6 }));

    // Non-minimal but well-formed encodings are accepted and read correctly,
    // as Redis does.
    let mut e = vec![0xf4, 5, 0, 0, 0, 0, 0, 0, 0, 9];
    e.extend_from_slice(&[0xe0, 2, b'a', b'b', 4]);
    e.extend_from_slice(&[0xf0, 1, 0, 0, 0, b'c', 6]);
    assert_eq!(probe(&raw_listpack(&e, 3)), Ok(()));
    let lp = Listpack::from_vec(raw_listpack(&e, 3), true).unwrap();
    let vals: Vec<Value> = lp.iter().collect();
    assert_eq!(vals, vec![Value::Int(5), Value::Str(b"ab"), Value::Str(b"c")]);
    // Fuzz regression (a wrong assertion in the fuzz target): for such
    // entries the stored size exceeds what re-encoding the value would take.
    assert_eq!(lp.entry_size(HDR_SIZE), Some(10));
    assert_eq!(Listpack::encoded_size(lp.get(HDR_SIZE)), 2);
    assert_eq!(lp.next(HDR_SIZE), Some(HDR_SIZE + 10));
    // A canonical-integer string stored as a string still reads as an int.
    let lp = Listpack::from_vec(raw_listpack(&[0x82, b'4', b'2', 3], 1), true).unwrap();
    assert_eq!(lp.get_int(HDR_SIZE), 42);
}

/// `try_append_all` writes exactly what one `append` per value writes, header
/// count included (also across the 65535 NUMELE_UNKNOWN boundary).
#[test]
fn append_all_equals_appends() {
    let mut rng = Rng::new(seed("append_all_equals_appends"));
    let strs: Vec<Vec<u8>> = ["", "0", "-1", "12345678901", "007", "abc", "9223372036854775808"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([vec![b'x'; 63], vec![b'y'; 64], vec![b'z'; 4095], vec![b'w'; 4096]])
        .collect();
    for round in 0..200 {
        let mut one = Listpack::new();
        let mut all = Listpack::new();
        // Start some rounds just below the count limit.
        if round % 10 == 0 {
            for _ in 0..65530 {
                one.append_int(1);
                all.append_int(1);
            }
        }
        for _ in 0..rng.below(20) {
            let n = rng.below(12);
            let vals: Vec<Value> = (0..n)
                .map(|_| {
                    if rng.chance(40) {
                        Value::Int(*rng.pick(&[0i64, 12, -4096, 1 << 20, i64::MIN, i64::MAX]))
                    } else {
                        Value::Str(&strs[rng.below(strs.len())])
                    }
                })
                .collect();
            for v in &vals {
                one.append(*v);
            }
            all.try_append_all(vals.iter().copied()).expect("append_all");
            assert_eq!(one.as_bytes(), all.as_bytes(), "round {round}");
        }
        check_consistent(all.as_bytes());
    }
}

/// `Checked` (the one-pass walk loading uses) accepts exactly what
/// `validate(deep = true)` accepts, and yields the values iteration yields:
/// valid listpacks of every encoding, then each with bytes mutated.
#[test]
fn checked_walk_agrees_with_deep_validate() {
    fn walk(b: &[u8]) -> Result<Vec<Value<'_>>, LpError> {
        let mut c = Checked::new(b)?;
        let mut out = Vec::new();
        while let Some(v) = c.next_value()? {
            out.push(v);
        }
        c.finish()?;
        Ok(out)
    }
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut valid, mut invalid) = (0, 0);
    for case in 0..3000 {
        let mut lp = Listpack::new();
        for _ in 0..rnd() % 12 {
            match rnd() % 6 {
                0 => lp.append_int((rnd() % 300) as i64 - 150),
                1 => lp.append_int(rnd() as i64 >> (rnd() % 64)),
                2 => lp.append_str(&vec![b'a'; (rnd() % 70) as usize]),
                3 => lp.append_str(&vec![b'b'; 60 + (rnd() % 200) as usize]),
                4 if case % 50 == 0 => lp.append_str(&vec![b'c'; 4090 + (rnd() % 20) as usize]),
                _ => lp.append_str(b"field"),
            }
        }
        let good = lp.as_bytes().to_vec();
        assert_eq!(walk(&good), Ok(lp.iter().collect::<Vec<_>>()));
        for m in 0..8 {
            let mut b = good.clone();
            match m % 3 {
                0 => {
                    let at = (rnd() as usize) % b.len();
                    b[at] ^= 1 << (rnd() % 8);
                }
                1 => {
                    let at = (rnd() as usize) % b.len();
                    b[at] = [0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xE0, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF][(rnd() % 11) as usize];
                }
                _ => {
                    let at = HDR_SIZE + (rnd() as usize) % (b.len() - HDR_SIZE);
                    b.truncate(at);
                    b.push(EOF);
                    let n = b.len() as u32;
                    b[..4].copy_from_slice(&n.to_le_bytes());
                }
            }
            let deep = validate(&b, true);
            let w = walk(&b);
            assert_eq!(deep.is_ok(), w.is_ok(), "case {case}/{m}: {b:02x?}: validate {deep:?}, walk {w:?}");
            if deep.is_ok() {
                valid += 1
            } else {
                invalid += 1
            }
        }
    }
    assert!(valid > 1000 && invalid > 1000, "{valid} valid, {invalid} invalid mutants");
}

#[test]
fn packed_listpack_reads_as_plain_and_unpacks_on_write() {
    let mut lp = Listpack::new();
    for i in 0..200 {
        lp.append_str(format!("{{\"user\":\"u{}\",\"action\":\"click\"}}", i % 7).as_bytes());
        lp.append_int(i);
    }
    let plain = lp.clone();
    assert!(lp.pack(Codec::Lz4));
    assert!(lp.is_packed());
    assert!(lp.alloc_bytes() < plain.alloc_bytes() / 2, "{} vs {}", lp.alloc_bytes(), plain.alloc_bytes());
    let before = super::cache_fills();
    assert_eq!(lp, plain);
    assert_eq!(lp.iter().collect::<Vec<_>>(), plain.iter().collect::<Vec<_>>());
    assert_eq!(super::cache_fills(), before + 1);
    assert!(lp.release_cache(true));
    assert_eq!(super::cache_fills(), before);
    assert!(!lp.release_cache(true));
    // Read without view(): an empty listpack, never garbage.
    assert!(lp.first().is_none());
    // A mutation decompresses for good.
    let f = lp.view().first().unwrap();
    lp.replace(f, Value::Int(7));
    assert!(!lp.is_packed());
    assert_eq!(lp.get(f), Value::Int(7));
    assert_eq!(super::cache_fills(), before);
    // Incompressible bytes stay plain.
    let mut r = Listpack::new();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..100 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.append_str(&x.to_le_bytes());
    }
    assert!(!r.pack(Codec::Lz4));
}

/// The decoded-node cache between reads: a released slot is kept (within the budget) and the
/// next view takes it back without decoding; a write takes it too; a clone, a new packing and
/// a freed listpack never see another's bytes.
#[test]
fn decoded_cache_serves_the_next_view_and_never_a_changed_node() {
    use super::decoded;
    let _serial = decoded::TEST_LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    decoded::set_budget(1 << 20);
    let mut lp = Listpack::new();
    for i in 0..200 {
        lp.append_str(format!("{{\"user\":\"u{}\",\"action\":\"click\"}}", i % 7).as_bytes());
        lp.append_int(i);
    }
    let plain = lp.clone();
    assert!(lp.pack(Codec::Zstd));
    let s0 = decoded::stats();
    assert_eq!(lp, plain);
    assert!(lp.release_cache(true));
    let s1 = decoded::stats();
    assert_eq!((s1.hits, s1.misses, s1.nodes), (s0.hits, s0.misses + 1, s0.nodes + 1));
    assert_eq!(s1.bytes, s0.bytes + decoded::alloc_class(plain.bytes_len()) + decoded::ENTRY_OVERHEAD);
    assert_eq!(lp, plain);
    assert!(lp.release_cache(true));
    assert_eq!(decoded::stats().hits, s1.hits + 1);
    // A clone is another packed form: it decodes on its own.
    let copy = lp.clone();
    assert_eq!(copy, plain);
    assert_eq!(decoded::stats().misses, s1.misses + 1);
    drop(copy);
    // A write takes the cached bytes; packed again, the listpack is a new form.
    let f = lp.view().first().unwrap();
    assert_eq!(decoded::stats().hits, s1.hits + 2);
    assert!(lp.release_cache(true));
    lp.replace(f, Value::Int(7));
    assert_eq!(decoded::stats().hits, s1.hits + 3);
    assert!(lp.pack(Codec::Lz4));
    assert_eq!(lp.view().get(f), Value::Int(7));
    assert_eq!(decoded::stats().misses, s1.misses + 2);
    assert!(lp.release_cache(true));
    // Freed: its entry goes.
    let n = decoded::stats().nodes;
    drop(lp);
    assert_eq!(decoded::stats().nodes, n - 1);
    decoded::set_budget(0);
    assert_eq!(decoded::stats().nodes, 0);
}

/// RDB encoding 6: a packed listpack's stored form loads back packed; any mutation of the
/// block, of its claimed size or of its codec is refused or loads a valid listpack, never
/// a panic, and no claim larger than MAX_RATIO per compressed byte is allocated.
#[test]
fn packed_parts_load_back_and_mutants_never_panic() {
    packed_parts_with(Codec::Lz4);
    packed_parts_with(Codec::Zstd);
}

fn packed_parts_with(codec: Codec) {
    let mut lp = Listpack::new();
    for i in 0..300 {
        lp.append_str(format!("{{\"user\":\"u{}\",\"page\":\"/p/{}\"}}", i % 11, i % 5).as_bytes());
        lp.append_int(i * 37);
    }
    let plain = lp.clone();
    assert!(lp.pack(codec));
    let (c, n, data) = lp.packed_parts().unwrap().unwrap();
    assert_eq!((c, n), (codec, plain.bytes_len()));
    let data = data.to_vec();
    let back = Listpack::from_packed(codec, n, data.clone(), true).unwrap();
    assert!(back.is_packed());
    assert_eq!(back, plain);
    assert_eq!(Listpack::from_packed(codec, n + 1, data.clone(), false).err(), Some(LpError::BadBlock));
    assert_eq!(Listpack::from_packed(codec, n - 1, data.clone(), false).err(), Some(LpError::BadBlock));
    assert_eq!(Listpack::from_packed(codec, usize::MAX, data.clone(), false).err(), Some(LpError::BadBlock));
    assert_eq!(Listpack::from_packed(codec, data.len() * MAX_RATIO + 17, data.clone(), false).err(), Some(LpError::BadBlock));
    // Unchecked (shallow RDB loading): taken as it is; an undecodable block reads as
    // UNDECODABLE, itself a deep-valid listpack.
    validate(&UNDECODABLE, true).unwrap();
    let lazy = Listpack::from_packed_unchecked(codec, n, data.clone()).unwrap();
    assert_eq!(lazy, plain);
    let mut broken = data.clone();
    broken.truncate(broken.len() / 2);
    let lazy = Listpack::from_packed_unchecked(codec, n, broken).unwrap();
    assert_eq!(lazy.as_bytes(), &UNDECODABLE[..]);
    assert!(Listpack::from_packed_unchecked(codec, data.len() * MAX_RATIO + 17, data.clone()).is_err());
    assert!(Listpack::from_packed_unchecked(codec, 3, data.clone()).is_err());
    assert_eq!(Codec::from_tag(0), None);
    assert_eq!(Codec::from_tag(9), None);
    assert_eq!(Codec::from_tag(codec.tag()), Some(codec));
    // The other codec's decoder on this block: refused or valid, never a panic.
    let other = if codec == Codec::Lz4 { Codec::Zstd } else { Codec::Lz4 };
    let _ = Listpack::from_packed(other, n, data.clone(), true);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut m = data.clone();
        let i = (x as usize) % m.len();
        m[i] ^= (x >> 32) as u8 | 1;
        if x & 0x100 != 0 {
            m.truncate((x >> 40) as usize % (m.len() + 1));
        }
        if let Ok(l) = Listpack::from_packed(codec, n, m.clone(), x & 0x200 != 0) {
            let _ = l.iter().count();
            assert!(l.view().first().is_some());
        }
        if let Ok(l) = Listpack::from_packed_unchecked(codec, n, m) {
            let _ = l.iter().count();
            assert!(l.view().first().is_some());
        }
    }
}

/// A listpack grows by doubling but stops at 4 KB while what it holds fits there (a stream
/// node's tail holds no more than the built-in's 4 KB preallocation), then doubles again past
/// it. Its bytes stay exactly a listpack's whatever room follows them.
#[test]
fn growth_pauses_at_four_kilobytes() {
    let mut lp = Listpack::with_capacity(64);
    let mut plain = Vec::new();
    let mut i = 0i64;
    while lp.bytes_len() + 10 <= 4096 {
        lp.append_int(i * 1_000_003);
        plain.push(i * 1_000_003);
        assert!(lp.alloc_bytes() <= 4096, "{} of {}", lp.bytes_len(), lp.alloc_bytes());
        i += 1;
    }
    assert_eq!(lp.alloc_bytes(), 4096);
    while lp.bytes_len() <= 4096 {
        lp.append_int(i);
        plain.push(i);
        i += 1;
    }
    assert_eq!(lp.alloc_bytes(), 8192);
    assert_eq!(lp.as_bytes().len(), lp.bytes_len());
    assert!(validate(lp.as_bytes(), true).is_ok());
    let copy = Listpack::from_vec(lp.as_bytes().to_vec(), true).unwrap();
    assert_eq!(copy, lp);
    assert_eq!(copy.alloc_bytes(), copy.bytes_len());
    assert_eq!(lp.iter().map(|v| v.as_int().unwrap()).collect::<Vec<_>>(), plain);
}

/// The vacant state (a freed slot of a stream's node tree) is no listpack and holds nothing.
#[test]
fn a_vacant_listpack_holds_nothing() {
    let v = Listpack::vacant();
    assert!(v.is_vacant());
    assert_eq!(v.alloc_bytes(), 0);
    assert!(!Listpack::new().is_vacant());
    assert_eq!(std::mem::size_of::<Listpack>(), 16);
    assert_eq!(std::mem::size_of::<Option<Listpack>>(), 24);
}
