//! Stream entry IDs: `<ms>-<seq>`, two u64 halves compared as one 128-bit number.
//!
//! The textual forms accepted by commands, and their parsing rules, are the
//! built-in's (`streamGenericParseIDOrReply` in t_stream.c), quirks included:
//! the argument is cut at its first NUL byte, each half is parsed first as a
//! strict integer and then with `strtoull` semantics (leading blanks, a sign,
//! leading zeros accepted; a leading `-` negates modulo 2^64).

use crate::listpack::{u64_digits, INT_STR_MAX_LEN};
use std::fmt;

/// An entry ID. Ordering is `(ms, seq)` lexicographic, which is also the
/// ordering of [`StreamId::to_be_bytes`], the rax key of a node.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds part (wall clock for generated IDs).
    pub ms: u64,
    /// Sequence number within the millisecond.
    pub seq: u64,
}

/// The longest argument the built-in parses as an ID (its stack buffer is 128 bytes).
pub const ID_ARG_LEN_MAX: usize = 127;

/// How the sequence part of a parsed ID was given.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SeqGiven {
    /// `ms-seq`, `ms` alone (missing seq filled in), `-` or `+`.
    Yes,
    /// `ms-*`: the sequence is to be generated (XADD only).
    Auto,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    /// The 16-byte big-endian form used as rax key: sorts like the ID.
    pub fn to_be_bytes(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    /// Inverse of [`to_be_bytes`](Self::to_be_bytes); `None` unless exactly 16 bytes.
    pub fn from_be_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != 16 {
            return None;
        }
        let (hi, lo) = b.split_at(8);
        Some(StreamId { ms: u64::from_be_bytes(hi.try_into().ok()?), seq: u64::from_be_bytes(lo.try_into().ok()?) })
    }

    /// The successor, or `None` at `MAX` (streamIncrID's C_ERR).
    pub fn next(self) -> Option<Self> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId { ms: self.ms + 1, seq: 0 })
            }
        } else {
            Some(StreamId { ms: self.ms, seq: self.seq + 1 })
        }
    }

    /// The predecessor, or `None` at `MIN` (streamDecrID's C_ERR).
    pub fn prev(self) -> Option<Self> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId { ms: self.ms - 1, seq: u64::MAX })
            }
        } else {
            Some(StreamId { ms: self.ms, seq: self.seq - 1 })
        }
    }

    pub fn is_zero(self) -> bool {
        self.ms == 0 && self.seq == 0
    }

    /// Appends the `ms-seq` text form to `out`.
    pub fn write_to(self, out: &mut Vec<u8>) {
        push_u64(out, self.ms);
        out.push(b'-');
        push_u64(out, self.seq);
    }

    /// Writes the `ms-seq` form into `buf` (at least 41 bytes) and returns its length.
    /// Every reply of an ID goes through here (XADD's reply of a 13-digit ms took 268
    /// instructions with one division per digit; two digits a step take about a third).
    pub fn write_to_slice(self, buf: &mut [u8; 44]) -> usize {
        let n = write_u64(self.ms, buf, 0);
        buf[n] = b'-';
        write_u64(self.seq, buf, n + 1)
    }

    /// The `ms-seq` form on the stack ([`IdText`]).
    pub fn text(self) -> IdText {
        let mut buf = [0u8; 44];
        let len = self.write_to_slice(&mut buf);
        IdText { buf, len: len as u8 }
    }

    pub fn to_bytes(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(41);
        self.write_to(&mut v);
        v
    }

    /// Parses an ID argument as the built-in does.
    ///
    /// * `missing_seq`: the sequence used when only `ms` is given (0 for a range
    ///   start, `u64::MAX` for a range end).
    /// * `strict`: `-` and `+` are rejected (XADD, XDEL, XSETID, MINID...).
    /// * `allow_auto_seq`: `ms-*` is accepted and reported as [`SeqGiven::Auto`].
    ///
    /// `None` means "Invalid stream ID specified as stream command argument".
    pub fn parse(arg: &[u8], missing_seq: u64, strict: bool, allow_auto_seq: bool) -> Option<(StreamId, SeqGiven)> {
        if arg.len() > ID_ARG_LEN_MAX {
            return None;
        }
        // The built-in copies the argument into a C string: a NUL ends it.
        let s = match arg.iter().position(|&b| b == 0) {
            Some(n) => &arg[..n],
            None => arg,
        };
        if s == b"-" || s == b"+" {
            if strict {
                return None;
            }
            let id = if s == b"-" { StreamId::MIN } else { StreamId::MAX };
            return Some((id, SeqGiven::Yes));
        }
        let (ms_part, seq_part) = match s.iter().position(|&b| b == b'-') {
            Some(n) => (&s[..n], Some(&s[n + 1..])),
            None => (s, None),
        };
        let ms = string2ull(ms_part)?;
        match seq_part {
            None => Some((StreamId { ms, seq: missing_seq }, SeqGiven::Yes)),
            Some(b"*") if allow_auto_seq => Some((StreamId { ms, seq: 0 }, SeqGiven::Auto)),
            Some(p) => Some((StreamId { ms, seq: string2ull(p)? }, SeqGiven::Yes)),
        }
    }

    /// Parses a range bound: `(` makes it exclusive (then parsed strictly).
    /// Returns the ID and whether it was exclusive.
    pub fn parse_interval(arg: &[u8], missing_seq: u64) -> Option<(StreamId, bool)> {
        if arg.len() > 1 && arg[0] == b'(' {
            let (id, _) = StreamId::parse(&arg[1..], missing_seq, true, false)?;
            Some((id, true))
        } else {
            let (id, _) = StreamId::parse(arg, missing_seq, false, false)?;
            Some((id, false))
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Appends the decimal form of `v`.
pub fn push_u64(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; INT_STR_MAX_LEN];
    let d = u64_digits(v, &mut buf);
    out.extend_from_slice(&buf[d..]);
}

/// Redis's `string2ll`: the strict integer form (no blanks, no `+`, no leading
/// zeros, `-0` rejected), fitting an i64. The same rules decide which strings a
/// listpack stores as integers, so the listpack's implementation serves both.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    crate::listpack::string_to_i64(s)
}

/// Redis's `string2ull`: `string2ll` (negative rejected), else C `strtoull`
/// base 10 over the whole string (leading blanks, optional sign, at least one
/// digit, no overflow; a `-` negates modulo 2^64).
pub fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = string2ll(s) {
        return if v < 0 { None } else { Some(v as u64) };
    }
    if s.is_empty() {
        return None;
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None; // no digits, or trailing garbage: endptr not at the end
    }
    let mut v: u64 = 0;
    for &c in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?; // ERANGE
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<StreamId> {
        StreamId::parse(s.as_bytes(), 0, false, false).map(|x| x.0)
    }

    #[test]
    fn text_on_the_stack_is_the_allocated_form() {
        for v in [0, 1, 9, 10, 99, 100, 1_000_000_007, u64::MAX - 1, u64::MAX] {
            assert_eq!(&*IdText::number(v), v.to_string().as_bytes());
            for seq in [0, 7, u64::MAX] {
                let id = StreamId::new(v, seq);
                assert_eq!(&*id.text(), &id.to_bytes()[..], "{v}-{seq}");
            }
        }
    }

    #[test]
    fn writes_every_width_as_format_does() {
        let mut vals = vec![0u64, 1, 9, 10, 11, 99, 100, 101, 999, 1000, u64::MAX, u64::MAX - 1, 1_796_415_435_429];
        let mut p = 1u64;
        while let Some(q) = p.checked_mul(10) {
            vals.extend([p - 1, p, p + 1, q / 2]);
            p = q;
        }
        let mut buf = [0u8; 44];
        for &ms in &vals {
            for &seq in &vals {
                let n = StreamId { ms, seq }.write_to_slice(&mut buf);
                assert_eq!(&buf[..n], format!("{ms}-{seq}").as_bytes());
            }
        }
    }

    #[test]
    fn parse_forms() {
        assert_eq!(p("5"), Some(StreamId::new(5, 0)));
        assert_eq!(p("5-3"), Some(StreamId::new(5, 3)));
        assert_eq!(p("-"), Some(StreamId::MIN));
        assert_eq!(p("+"), Some(StreamId::MAX));
        assert_eq!(StreamId::parse(b"+", 0, true, false), None);
        assert_eq!(StreamId::parse(b"5", u64::MAX, false, false).unwrap().0, StreamId::new(5, u64::MAX));
        assert_eq!(StreamId::parse(b"5-*", 0, true, true), Some((StreamId::new(5, 0), SeqGiven::Auto)));
        assert_eq!(StreamId::parse(b"5-*", 0, true, false), None);
        assert_eq!(p("007-01"), Some(StreamId::new(7, 1)));
        assert_eq!(p(" 5"), Some(StreamId::new(5, 0)));
        assert_eq!(p("+5"), Some(StreamId::new(5, 0)));
        assert_eq!(p("-5"), None); // "" before the dash
        assert_eq!(p("1--1"), None, "string2ll parses -1, negative is rejected");
        assert_eq!(p("1- -1"), Some(StreamId::new(1, u64::MAX)), "strtoull negates");
        assert_eq!(p("1-x"), None);
        assert_eq!(p("18446744073709551615-18446744073709551615"), Some(StreamId::MAX));
        assert_eq!(p("18446744073709551616"), None);
        assert_eq!(p(""), None);
        assert_eq!(StreamId::parse(b"5\0junk", 0, false, false).unwrap().0, StreamId::new(5, 0));
        assert_eq!(p(&"1".repeat(128)), None);
    }

    #[test]
    fn interval() {
        assert_eq!(StreamId::parse_interval(b"(5", 0), Some((StreamId::new(5, 0), true)));
        assert_eq!(StreamId::parse_interval(b"(-", 0), None);
        assert_eq!(StreamId::parse_interval(b"(", 0), None);
        assert_eq!(StreamId::parse_interval(b"-", 0), Some((StreamId::MIN, false)));
    }

    #[test]
    fn next_prev_and_bytes() {
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::MIN.prev(), None);
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
        let id = StreamId::new(0x0102, 0x0304);
        assert_eq!(StreamId::from_be_bytes(&id.to_be_bytes()), Some(id));
        assert_eq!(id.to_bytes(), b"258-772".to_vec());
        assert!(StreamId::new(1, 5).to_be_bytes() < StreamId::new(2, 0).to_be_bytes());
    }

    #[test]
    fn string2ll_rules() {
        assert_eq!(string2ll(b"-0"), None);
        assert_eq!(string2ll(b"01"), None);
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(string2ll(b"9223372036854775808"), None);
    }
}

/// An ID or a count as text, on the stack: what a propagated threshold is (XS.ADD with `~`
/// formats one on every call; a Vec was an allocation and a free each time).
#[derive(Clone, Copy)]
pub struct IdText {
    buf: [u8; 44],
    len: u8,
}

impl IdText {
    /// The decimal form of `v`.
    pub fn number(v: u64) -> IdText {
        let mut buf = [0u8; 44];
        let len = write_u64(v, &mut buf, 0);
        IdText { buf, len: len as u8 }
    }
}

impl std::ops::Deref for IdText {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

/// Writes `v` in decimal into `buf` at `at` (20 bytes must fit) and returns the end.
#[inline]
fn write_u64(v: u64, buf: &mut [u8; 44], at: usize) -> usize {
    let mut tmp = [0u8; INT_STR_MAX_LEN];
    let d = u64_digits(v, &mut tmp);
    let len = tmp.len() - d;
    buf[at..at + len].copy_from_slice(&tmp[d..]);
    at + len
}
