//! Element encodings and the backward length ("backlen"), byte for byte as in
//! Redis 7.0 `listpack.c`. Everything here is a pure function on bytes; the
//! functions that take untrusted input (`read_head`, `decode_backlen`) only use
//! checked indexing and checked arithmetic.
//!
//! ```text
//!  first byte   | encoding        | header | data              | value range
//!  -------------+-----------------+--------+-------------------+-----------------------
//!  0xxxxxxx     | 7-bit uint      | 1      | (in the header)   | 0 ..= 127
//!  10xxxxxx     | 6-bit str       | 1      | len = xxxxxx      | 0 ..= 63 bytes
//!  110xxxxx yy  | 13-bit int      | 2      | (in the header)   | -4096 ..= 4095, big-endian 13 bits
//!  1110xxxx yy  | 12-bit str      | 2      | len = xxxx yy     | 0 ..= 4095 bytes
//!  11110000     | 32-bit str      | 5      | len = u32 LE      | 0 ..= 2^32-1 bytes
//!  11110001     | 16-bit int      | 1      | 2 bytes LE        | i16
//!  11110010     | 24-bit int      | 1      | 3 bytes LE        | -2^23 ..= 2^23-1
//!  11110011     | 32-bit int      | 1      | 4 bytes LE        | i32
//!  11110100     | 64-bit int      | 1      | 8 bytes LE        | i64
//!  11110101 ..= 11111110            unused: rejected by validation
//!  11111111     | end of listpack (LP_EOF), never an element
//! ```
//!
//! Note the 13-bit integer and the 12-bit string length are stored with the
//! high bits in the first byte (big-endian), while every multi-byte field
//! after a 0xF? encoding byte is little-endian.

use super::Value;

/// Size of the listpack header: u32 total bytes + u16 element count (LP_HDR_SIZE).
pub const HDR_SIZE: usize = 6;
/// The terminator byte, also the last byte of every listpack (LP_EOF).
pub const EOF: u8 = 0xFF;
/// Header element count meaning "too many to store, walk to count" (LP_HDR_NUMELE_UNKNOWN).
pub const NUMELE_UNKNOWN: u16 = u16::MAX;

/// Longest integer encoding in bytes: 0xF4 + 8 data bytes (LP_MAX_INT_ENCODING_LEN).
pub const MAX_INT_ENCODING_LEN: usize = 9;
/// Longest string header in bytes: 0xF0 + u32 length.
pub const MAX_STR_HEADER_LEN: usize = 5;
/// Longest backlen in bytes (LP_MAX_BACKLEN_SIZE): 5 x 7 bits = 35 bits.
pub const MAX_BACKLEN_SIZE: usize = 5;
/// Longest decimal string that can be a canonical i64, in bytes: "-9223372036854775808"
/// (Redis' LONG_STR_SIZE - 1). Used only to reject long strings early.
pub const INT_STR_MAX_LEN: usize = 20;

// Encoding byte patterns (LP_ENCODING_*) and the masks selecting their tag bits.
pub const ENC_7BIT_UINT: u8 = 0x00;
pub const ENC_7BIT_UINT_MASK: u8 = 0x80;
pub const ENC_6BIT_STR: u8 = 0x80;
pub const ENC_6BIT_STR_MASK: u8 = 0xC0;
pub const ENC_13BIT_INT: u8 = 0xC0;
pub const ENC_13BIT_INT_MASK: u8 = 0xE0;
pub const ENC_12BIT_STR: u8 = 0xE0;
pub const ENC_12BIT_STR_MASK: u8 = 0xF0;
pub const ENC_32BIT_STR: u8 = 0xF0;
pub const ENC_16BIT_INT: u8 = 0xF1;
pub const ENC_24BIT_INT: u8 = 0xF2;
pub const ENC_32BIT_INT: u8 = 0xF3;
pub const ENC_64BIT_INT: u8 = 0xF4;

/// Longest string (bytes) that fits the 6-bit string encoding.
pub const STR6_MAX_LEN: usize = 63;
/// Longest string (bytes) that fits the 12-bit string encoding.
pub const STR12_MAX_LEN: usize = 4095;
/// Longest string (bytes) that fits the 32-bit string encoding.
pub const STR32_MAX_LEN: usize = u32::MAX as usize;

/// Integer ranges of each encoding, smallest first (lpEncodeIntegerGetType).
pub const UINT7_MAX: i64 = 127;
pub const INT13_MIN: i64 = -4096;
pub const INT13_MAX: i64 = 4095;
pub const INT24_MIN: i64 = -(1 << 23);
pub const INT24_MAX: i64 = (1 << 23) - 1;

/// Backlen size thresholds (lpEncodeBacklen). Redis compares with `<`, not `<=`,
/// for the 2..4 byte cases, so e.g. an entry of exactly 16383 bytes gets a
/// 3-byte backlen although 2 bytes (14 bits) would hold it. Kept for byte
/// identity.
pub const BACKLEN1_MAX: usize = 127; // l <= 127       -> 1 byte
pub const BACKLEN2_LIMIT: usize = 16383; // l <  16383     -> 2 bytes
pub const BACKLEN3_LIMIT: usize = 2097151; // l <  2097151   -> 3 bytes
pub const BACKLEN4_LIMIT: usize = 268435455; // l <  268435455 -> 4 bytes, else 5

/// Bytes needed for the backlen of an entry whose encoding+data is `l` bytes
/// (lpEncodeBacklen with buf == NULL).
#[inline]
pub fn backlen_size(l: usize) -> usize {
    if l <= BACKLEN1_MAX {
        1
    } else if l < BACKLEN2_LIMIT {
        2
    } else if l < BACKLEN3_LIMIT {
        3
    } else if l < BACKLEN4_LIMIT {
        4
    } else {
        5
    }
}

/// Writes the backlen of `l` into `out[..n]` in memory order and returns n.
///
/// The first byte (lowest address, next to the entry's data) holds the most
/// significant 7-bit group with bit 7 clear; each following byte holds the next
/// less significant group with bit 7 set. A reader starting at the byte just
/// before the next entry therefore sees the least significant group first, and
/// bit 7 tells it whether another byte lies further left.
pub fn encode_backlen(l: usize, out: &mut [u8; MAX_BACKLEN_SIZE]) -> usize {
    let n = backlen_size(l);
    let l = l as u64;
    for (i, slot) in out.iter_mut().take(n).enumerate() {
        let shift = 7 * (n - 1 - i) as u32;
        // The first byte keeps whatever high bits remain (as the C code's
        // `buf[0] = l>>28` does); for valid sizes that is at most 7 bits.
        let group = (l >> shift) as u8;
        *slot = if i == 0 { group } else { (group & 0x7F) | 0x80 };
    }
    n
}

/// Reads the backlen that ends just before `end` (lpDecodeBacklen applied to
/// `end - 1`). Returns None if it would read before the start of `buf` or past
/// `MAX_BACKLEN_SIZE` bytes.
pub fn decode_backlen(buf: &[u8], end: usize) -> Option<usize> {
    let mut val: u64 = 0;
    let mut pos = end;
    for i in 0..MAX_BACKLEN_SIZE {
        pos = pos.checked_sub(1)?;
        let b = *buf.get(pos)?;
        val |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return usize::try_from(val).ok();
        }
    }
    None
}

/// Which encoding an element header uses; enough to decode its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Uint7,
    Int13,
    Int16,
    Int24,
    Int32,
    Int64,
    Str,
}

/// The parsed encoding header of an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub kind: Kind,
    /// Bytes of encoding header before the data (lpCurrentEncodedSizeBytes,
    /// except that integers report their full size here and have no data).
    pub hdr_len: usize,
    /// Encoding + data bytes, i.e. the value the backlen stores
    /// (lpCurrentEncodedSizeUnsafe).
    pub enc_len: usize,
}

/// Why an element header could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadError {
    /// The byte is LP_EOF: there is no element here.
    Eof,
    /// 0xF5..=0xFE: not an encoding.
    Unknown,
    /// The header (encoding byte + length bytes, or integer data) reaches `limit`.
    Truncated,
}

/// Parses the element header at `off`, reading only bytes below `limit`
/// (normally the offset of the terminator). Only the header is bounds-checked
/// here; the caller checks that `off + enc_len + backlen <= limit`.
pub fn read_head(buf: &[u8], off: usize, limit: usize) -> Result<Head, HeadError> {
    let limit = limit.min(buf.len());
    let byte = |i: usize| -> Result<u8, HeadError> {
        let at = off.checked_add(i).ok_or(HeadError::Truncated)?;
        if at >= limit {
            return Err(HeadError::Truncated);
        }
        buf.get(at).copied().ok_or(HeadError::Truncated)
    };
    let b0 = byte(0)?;
    let int = |kind: Kind, size: usize| -> Result<Head, HeadError> {
        // The integer's data bytes belong to the header for bounds purposes.
        byte(size - 1)?;
        Ok(Head { kind, hdr_len: size, enc_len: size })
    };
    if b0 & ENC_7BIT_UINT_MASK == ENC_7BIT_UINT {
        int(Kind::Uint7, 1)
    } else if b0 & ENC_6BIT_STR_MASK == ENC_6BIT_STR {
        let len = usize::from(b0 & 0x3F);
        Ok(Head { kind: Kind::Str, hdr_len: 1, enc_len: 1 + len })
    } else if b0 & ENC_13BIT_INT_MASK == ENC_13BIT_INT {
        int(Kind::Int13, 2)
    } else if b0 & ENC_12BIT_STR_MASK == ENC_12BIT_STR {
        let len = (usize::from(b0 & 0x0F) << 8) | usize::from(byte(1)?);
        Ok(Head { kind: Kind::Str, hdr_len: 2, enc_len: 2 + len })
    } else {
        match b0 {
            ENC_32BIT_STR => {
                let len = u32::from_le_bytes([byte(1)?, byte(2)?, byte(3)?, byte(4)?]);
                let len = usize::try_from(len).map_err(|_| HeadError::Truncated)?;
                let enc_len = len.checked_add(5).ok_or(HeadError::Truncated)?;
                Ok(Head { kind: Kind::Str, hdr_len: 5, enc_len })
            }
            ENC_16BIT_INT => int(Kind::Int16, 3),
            ENC_24BIT_INT => int(Kind::Int24, 4),
            ENC_32BIT_INT => int(Kind::Int32, 5),
            ENC_64BIT_INT => int(Kind::Int64, 9),
            EOF => Err(HeadError::Eof),
            _ => Err(HeadError::Unknown),
        }
    }
}

/// What [`decode`] yields for bytes that are not an element (only reachable in a
/// listpack that was loaded without the deep check): an empty string one byte
/// long, so that a forward walk still advances and stays inside the buffer.
pub const GARBAGE: (Value<'static>, usize) = (Value::Str(&[]), 1);

/// Decodes the element at `off`, returning its value and its encoded size
/// (encoding + data, without backlen). Total: never panics and reads only
/// inside `buf`. On a deep-validated listpack every offset navigation yields is
/// an element; on one loaded with the header check only (RDB loading under
/// `sanitize-dump-payload no`) an offset may point at garbage, which decodes as
/// [`GARBAGE`].
#[inline]
pub fn decode(buf: &[u8], off: usize) -> (Value<'_>, usize) {
    decode_checked(buf, off).unwrap_or(GARBAGE)
}

#[inline]
fn decode_checked(buf: &[u8], off: usize) -> Option<(Value<'_>, usize)> {
    let b0 = *buf.get(off)?;
    if b0 & ENC_7BIT_UINT_MASK == ENC_7BIT_UINT {
        return Some((Value::Int(i64::from(b0)), 1));
    }
    let d = buf.get(off + 1..)?;
    if b0 & ENC_6BIT_STR_MASK == ENC_6BIT_STR {
        let len = usize::from(b0 & 0x3F);
        return Some((Value::Str(d.get(..len)?), 1 + len));
    }
    if b0 & ENC_13BIT_INT_MASK == ENC_13BIT_INT {
        let u = (i64::from(b0 & 0x1F) << 8) | i64::from(*d.first()?);
        // Two's complement in 13 bits: values >= 2^12 are negative.
        let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
        return Some((Value::Int(v), 2));
    }
    if b0 & ENC_12BIT_STR_MASK == ENC_12BIT_STR {
        let len = (usize::from(b0 & 0x0F) << 8) | usize::from(*d.first()?);
        return Some((Value::Str(d.get(1..1 + len)?), 2 + len));
    }
    match b0 {
        ENC_16BIT_INT => {
            let &[a, b, ..] = d else { return None };
            Some((Value::Int(i64::from(i16::from_le_bytes([a, b]))), 3))
        }
        ENC_24BIT_INT => {
            let &[a, b, c, ..] = d else { return None };
            // Place the 3 bytes in the top of an i32 and shift back to sign-extend.
            let v = i32::from_le_bytes([0, a, b, c]) >> 8;
            Some((Value::Int(i64::from(v)), 4))
        }
        ENC_32BIT_INT => {
            let &[a, b, c, e, ..] = d else { return None };
            Some((Value::Int(i64::from(i32::from_le_bytes([a, b, c, e]))), 5))
        }
        ENC_64BIT_INT => {
            let b: [u8; 8] = d.get(..8)?.try_into().ok()?;
            Some((Value::Int(i64::from_le_bytes(b)), 9))
        }
        ENC_32BIT_STR => {
            let &[a, b, c, e, ..] = d else { return None };
            let len = usize::try_from(u32::from_le_bytes([a, b, c, e])).ok()?;
            let end = len.checked_add(4)?;
            Some((Value::Str(d.get(4..end)?), end.checked_add(1)?))
        }
        _ => None,
    }
}

/// lpStringToInt64 / string2ll: `s` is a canonical decimal i64 — optional '-',
/// no '+', no spaces, no leading zeros ("0" itself is fine, "-0" is not), and
/// within i64. Exactly the strings Redis stores with an integer encoding.
pub fn string_to_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > INT_STR_MAX_LEN {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if negative {
        // -2^63 is the one magnitude that does not fit as a positive i64.
        if v > 1u64 << 63 {
            return None;
        }
        Some(0i64.wrapping_sub(v as i64))
    } else {
        i64::try_from(v).ok()
    }
}

/// Formats `v` as decimal ASCII into the end of `buf`, returning the digits
/// (what lpGet does with `%lld` into LP_INTBUF_SIZE).
pub fn fmt_i64(v: i64, buf: &mut [u8; INT_STR_MAX_LEN]) -> &[u8] {
    let mut i = u64_digits(v.unsigned_abs(), buf);
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// "00" "01" ... "99".
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Writes the decimal digits of `v` at the end of `buf` and returns where they start: two
/// digits a step from a table (Redis's ull2string), so a 13-digit ms of an ID takes 7
/// steps, not 13 divisions (XADD's reply of its ID took 268 instructions digit by digit).
#[inline]
pub fn u64_digits(mut v: u64, buf: &mut [u8; INT_STR_MAX_LEN]) -> usize {
    let mut d = buf.len();
    while v >= 100 {
        let r = (v % 100) as usize * 2;
        v /= 100;
        d -= 2;
        buf[d..d + 2].copy_from_slice(&DIGIT_PAIRS[r..r + 2]);
    }
    if v >= 10 {
        let r = v as usize * 2;
        d -= 2;
        buf[d..d + 2].copy_from_slice(&DIGIT_PAIRS[r..r + 2]);
    } else {
        d -= 1;
        buf[d] = b'0' + v as u8;
    }
    d
}

/// Writes the smallest integer encoding of `v` (lpEncodeIntegerGetType) into
/// `out[..n]` and returns n.
pub fn encode_int(v: i64, out: &mut [u8; MAX_INT_ENCODING_LEN]) -> usize {
    if (0..=UINT7_MAX).contains(&v) {
        out[0] = v as u8;
        1
    } else if (INT13_MIN..=INT13_MAX).contains(&v) {
        let u = (v as u64) & 0x1FFF;
        out[0] = ENC_13BIT_INT | (u >> 8) as u8;
        out[1] = u as u8;
        2
    } else if let Ok(x) = i16::try_from(v) {
        out[0] = ENC_16BIT_INT;
        out[1..3].copy_from_slice(&x.to_le_bytes());
        3
    } else if (INT24_MIN..=INT24_MAX).contains(&v) {
        out[0] = ENC_24BIT_INT;
        out[1..4].copy_from_slice(&(v as i32).to_le_bytes()[..3]);
        4
    } else if let Ok(x) = i32::try_from(v) {
        out[0] = ENC_32BIT_INT;
        out[1..5].copy_from_slice(&x.to_le_bytes());
        5
    } else {
        out[0] = ENC_64BIT_INT;
        out[1..9].copy_from_slice(&v.to_le_bytes());
        9
    }
}

/// Writes the string header for a string of `len` bytes (lpEncodeString) into
/// `out[..n]` and returns n. `len` must be <= STR32_MAX_LEN; callers check the
/// total size first, and a longer string cannot fit MAX_BYTES anyway.
pub fn encode_str_header(len: usize, out: &mut [u8; MAX_INT_ENCODING_LEN]) -> usize {
    debug_assert!(len <= STR32_MAX_LEN, "string of {len} bytes cannot be encoded");
    if len <= STR6_MAX_LEN {
        out[0] = ENC_6BIT_STR | len as u8;
        1
    } else if len <= STR12_MAX_LEN {
        out[0] = ENC_12BIT_STR | (len >> 8) as u8;
        out[1] = len as u8;
        2
    } else {
        out[0] = ENC_32BIT_STR;
        out[1..5].copy_from_slice(&(len as u32).to_le_bytes());
        MAX_STR_HEADER_LEN
    }
}

/// An element ready to be written: header (integer encoding or string header),
/// string data, backlen.
pub struct Encoded<'a> {
    head: [u8; MAX_INT_ENCODING_LEN],
    head_len: usize,
    data: &'a [u8],
    back: [u8; MAX_BACKLEN_SIZE],
    back_len: usize,
}

impl<'a> Encoded<'a> {
    /// Encodes `v` as lpInsert would: a `Str` that is a canonical integer is
    /// stored as an integer (lpEncodeGetType).
    pub fn new(v: Value<'a>) -> Self {
        let mut head = [0u8; MAX_INT_ENCODING_LEN];
        let (head_len, data) = match v {
            Value::Int(i) => (encode_int(i, &mut head), &[][..]),
            Value::Str(s) => match string_to_i64(s) {
                Some(i) => (encode_int(i, &mut head), &[][..]),
                None => (encode_str_header(s.len(), &mut head), s),
            },
        };
        let mut back = [0u8; MAX_BACKLEN_SIZE];
        // Saturating: a string too long for the format gets a nonsense size
        // here, but it exceeds MAX_BYTES and is rejected before being written.
        let back_len = encode_backlen(head_len.saturating_add(data.len()), &mut back);
        Encoded { head, head_len, data, back, back_len }
    }

    /// Encoding + data bytes (what the backlen stores).
    pub fn enc_len(&self) -> usize {
        self.head_len.saturating_add(self.data.len())
    }

    /// Total bytes the entry occupies: encoding + data + backlen.
    pub fn total_len(&self) -> usize {
        self.enc_len().saturating_add(self.back_len)
    }

    /// Writes the entry over `dst`, which must be exactly `total_len()` bytes.
    pub fn write_over(&self, dst: &mut [u8]) {
        let (h, rest) = dst.split_at_mut(self.head_len);
        h.copy_from_slice(&self.head[..self.head_len]);
        let (d, b) = rest.split_at_mut(self.data.len());
        d.copy_from_slice(self.data);
        b.copy_from_slice(&self.back[..self.back_len]);
    }
}
