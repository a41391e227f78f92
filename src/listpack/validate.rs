//! Integrity checks for untrusted listpacks (RDB payloads, RESTORE, fuzzing):
//! lpValidateIntegrity / lpValidateNext, made stricter where Redis is lenient.
//!
//! Every read is `.get()` or bounds-checked first, all offset arithmetic is
//! checked, nothing is allocated, and every loop step advances by at least two
//! bytes (encoding byte + backlen byte), so validation is O(len) and total.

use super::encoding::{self, HeadError, EOF, HDR_SIZE, MAX_BACKLEN_SIZE, NUMELE_UNKNOWN};
use super::{LpError, Value, EMPTY_BYTES};

/// Validates `bytes` as a listpack.
///
/// * `deep == false` (lpValidateIntegrity with deep=0): at least EMPTY_BYTES,
///   the header's total-bytes field equals `bytes.len()`, the last byte is
///   LP_EOF, and the first entry (if any) is well formed. O(1).
/// * `deep == true`: additionally walks every entry: known encoding, entry
///   inside the listpack, backlen bytes exactly the canonical encoding of the
///   entry size, no LP_EOF byte where an entry should start except at the
///   very end, and the header count equals the number of entries unless it is
///   NUMELE_UNKNOWN. O(len).
///
/// Stricter than Redis in two ways, neither of which a Redis-written listpack
/// can trip: the backlen must be byte-identical to what lpEncodeBacklen
/// writes (Redis only compares the decoded value), and the terminator must be
/// the last byte (Redis stops at the first LP_EOF it meets while walking).
pub fn validate(bytes: &[u8], deep: bool) -> Result<(), LpError> {
    if bytes.len() < EMPTY_BYTES {
        return Err(LpError::TooShort { len: bytes.len() });
    }
    let header: [u8; 4] = [bytes[0], bytes[1], bytes[2], bytes[3]];
    let total = u32::from_le_bytes(header);
    if usize::try_from(total).ok() != Some(bytes.len()) {
        return Err(LpError::BadTotalBytes { header: total, actual: bytes.len() });
    }
    let eof = bytes.len() - 1;
    if bytes[eof] != EOF {
        return Err(LpError::NoTerminator);
    }

    if !deep {
        if bytes[HDR_SIZE] != EOF {
            check_entry(bytes, HDR_SIZE, eof)?;
        }
        return Ok(());
    }

    let mut off = HDR_SIZE;
    let mut count: usize = 0;
    while off < eof {
        off = check_entry(bytes, off, eof)?;
        count += 1;
    }
    // check_entry never returns an offset past `eof`, so the walk ended on it.
    let numele = u16::from_le_bytes([bytes[4], bytes[5]]);
    if numele != NUMELE_UNKNOWN && usize::from(numele) != count {
        return Err(LpError::CountMismatch { header: numele, actual: count });
    }
    Ok(())
}

/// `check_entry` out of the inlined fast path of `Checked::step` (long strings
/// and invalid bytes).
#[cold]
#[inline(never)]
fn check_entry_cold(bytes: &[u8], off: usize, eof: usize) -> Result<usize, LpError> {
    check_entry(bytes, off, eof)
}

/// Checks the entry at `off` (which is < `eof`) and returns the offset of the
/// next one, which is <= `eof`.
fn check_entry(bytes: &[u8], off: usize, eof: usize) -> Result<usize, LpError> {
    let head = match encoding::read_head(bytes, off, eof) {
        Ok(h) => h,
        Err(HeadError::Eof) => return Err(LpError::MisplacedTerminator { offset: off }),
        Err(HeadError::Unknown) => return Err(LpError::BadEncoding { offset: off }),
        Err(HeadError::Truncated) => return Err(LpError::EntryOverflow { offset: off }),
    };
    let back_len = encoding::backlen_size(head.enc_len);
    let data_end = off.checked_add(head.enc_len).ok_or(LpError::EntryOverflow { offset: off })?;
    let end = data_end.checked_add(back_len).ok_or(LpError::EntryOverflow { offset: off })?;
    if end > eof {
        return Err(LpError::EntryOverflow { offset: off });
    }
    if back_len == 1 {
        // The common case (entries under 128 bytes): one byte, compared inline.
        if bytes.get(data_end) != Some(&(head.enc_len as u8)) {
            return Err(LpError::BadBacklen { offset: off });
        }
        return Ok(end);
    }
    let mut expect = [0u8; MAX_BACKLEN_SIZE];
    let n = encoding::encode_backlen(head.enc_len, &mut expect);
    if bytes.get(data_end..end) != Some(&expect[..n]) {
        return Err(LpError::BadBacklen { offset: off });
    }
    Ok(end)
}

/// A forward walk over an untrusted listpack that checks each element exactly as
/// `validate(deep = true)` does while handing out its value: one pass where a
/// deep validation followed by a decoding walk took two (loading validates
/// every element of every node: `stream::validate`).
///
/// ```text
/// new()         header: total-bytes == len, last byte 0xFF      (rules 1-3)
/// next_value()  one element: rules 5-8, then its value; Ok(None) at the terminator
/// step()        the same without decoding; next_int() decoding an integer
/// finish()      after Ok(None): the header count                 (rule 9)
/// ```
///
/// Integers and strings under 64 bytes (nearly every element of a stream node:
/// flags, ID deltas, lp-counts, field names, most values), whose size the first
/// byte gives and whose backlen is one byte, are checked inline; anything else
/// goes through `check_entry`.
pub struct Checked<'a> {
    bytes: &'a [u8],
    /// Offset of the next element (== eof at the end).
    off: usize,
    /// Offset of the terminator.
    eof: usize,
    /// Elements walked so far.
    count: usize,
}

impl<'a> Checked<'a> {
    pub fn new(bytes: &'a [u8]) -> Result<Self, LpError> {
        if bytes.len() < EMPTY_BYTES {
            return Err(LpError::TooShort { len: bytes.len() });
        }
        let header: [u8; 4] = [bytes[0], bytes[1], bytes[2], bytes[3]];
        let total = u32::from_le_bytes(header);
        if usize::try_from(total).ok() != Some(bytes.len()) {
            return Err(LpError::BadTotalBytes { header: total, actual: bytes.len() });
        }
        let eof = bytes.len() - 1;
        if bytes[eof] != EOF {
            return Err(LpError::NoTerminator);
        }
        Ok(Checked { bytes, off: HDR_SIZE, eof, count: 0 })
    }

    /// The next element, checked; `Ok(None)` once the terminator is reached.
    #[inline]
    pub fn next_value(&mut self) -> Result<Option<Value<'a>>, LpError> {
        Ok(self.step()?.map(|off| encoding::decode(self.bytes, off).0))
    }

    /// The next element as an integer: `Ok(Some(None))` for a string that is not
    /// a canonical integer, `Ok(None)` at the terminator.
    #[inline(always)]
    pub fn next_int(&mut self) -> Result<Option<Option<i64>>, LpError> {
        let Some(off) = self.step()? else { return Ok(None) };
        let b0 = self.bytes[off];
        if b0 < 0x80 {
            return Ok(Some(Some(i64::from(b0))));
        }
        Ok(Some(encoding::decode(self.bytes, off).0.as_int()))
    }

    /// Checks the next element without decoding it: its offset, `Ok(None)` at the
    /// terminator. (Always inlined: called per element, and a call returning this
    /// Result through memory cost more than the check itself.)
    #[inline(always)]
    pub fn step(&mut self) -> Result<Option<usize>, LpError> {
        let off = self.off;
        if off >= self.eof {
            return Ok(None);
        }
        let b = self.bytes;
        let b0 = b[off];
        // Every integer encoding and every string under 64 bytes has a size known from
        // its first byte and at most 127, so a one-byte backlen equal to that size.
        let enc_len = match b0 {
            0x00..=0x7F => 1,
            0x80..=0xBF => 1 + usize::from(b0 & 0x3F),
            0xC0..=0xDF => 2,
            0xF1 => 3,
            0xF2 => 4,
            0xF3 => 5,
            0xF4 => 9,
            _ => 0, // 12- and 32-bit strings, invalid bytes: the general path
        };
        let end = off + enc_len;
        self.off = if enc_len != 0 && end < self.eof && b[end] == enc_len as u8 { end + 1 } else { check_entry_cold(b, off, self.eof)? };
        self.count += 1;
        Ok(Some(off))
    }

    /// After `next_value` / `step` returned `Ok(None)`: the header count equals the elements
    /// walked, unless it is NUMELE_UNKNOWN.
    pub fn finish(&self) -> Result<(), LpError> {
        let numele = u16::from_le_bytes([self.bytes[4], self.bytes[5]]);
        if numele != NUMELE_UNKNOWN && usize::from(numele) != self.count {
            return Err(LpError::CountMismatch { header: numele, actual: self.count });
        }
        Ok(())
    }
}
