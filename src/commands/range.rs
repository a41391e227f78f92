//! XS.RANGE key start end [COUNT count] / XS.REVRANGE key end start [COUNT count]
//!
//! Bounds: `-`, `+`, `ms` (seq 0 for a start, max for an end), `ms-seq`, and the
//! exclusive `(id` form.

use super::{is_kw, parse_ll};
use crate::error::{Error, Result};
use crate::ffi::ctx::Ctx;
use crate::stream::{RangeIter, Stream, StreamId};

pub fn run_range(c: &Ctx) -> Result<()> {
    run_generic(c, false)
}

pub fn run_revrange(c: &Ctx) -> Result<()> {
    run_generic(c, true)
}

fn run_generic(c: &Ctx, rev: bool) -> Result<()> {
    let (start_arg, end_arg) = if rev { (c.arg(3), c.arg(2)) } else { (c.arg(2), c.arg(3)) };
    let (mut start, start_ex) = StreamId::parse_interval(start_arg, 0).ok_or(Error::InvalidId)?;
    if start_ex {
        start = start.next().ok_or(Error::Err("invalid start ID for the interval"))?;
    }
    let (mut end, end_ex) = StreamId::parse_interval(end_arg, u64::MAX).ok_or(Error::InvalidId)?;
    if end_ex {
        end = end.prev().ok_or(Error::Err("invalid end ID for the interval"))?;
    }
    let mut count: i64 = -1;
    let mut j = 4;
    while j < c.argc() {
        let additional = c.argc() - j - 1;
        if is_kw(c.arg(j), "COUNT") && additional >= 1 {
            count = parse_ll(c.arg(j + 1))?.max(0);
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let key = c.key(1, false);
    let Some(s) = key.existing()? else {
        c.reply_array(0);
        return Ok(());
    };
    if count == 0 {
        c.reply_null_array();
    } else {
        let count = if count < 0 { 0 } else { count as u64 };
        // Nodes on disk that the read needs are read first (an error, nothing replied, if one
        // cannot be); then nothing can fail and the reply goes straight out, not held back.
        // The walk starts where the reply's iterator stands: one seek for both.
        let mut positioned = None;
        super::read_first(s, |_| {
            let it = s.range(start, end, rev);
            s.read_ahead(&it, count);
            positioned = Some(it);
        })?;
        c.send_held();
        reply_array_of(c, positioned.unwrap_or_else(|| s.range(start, end, rev)), count);
    }
    Ok(())
}

/// Replies `[[id, [field, value, ...]], ...]` for the live entries in
/// `start..=end` (at most `count`, 0 = all). Returns how many were emitted.
pub fn reply_range(c: &Ctx, s: &Stream, start: StreamId, end: StreamId, count: u64, rev: bool) -> u64 {
    reply_array_of(c, s.range(start, end, rev), count)
}

/// Replies the entries of `it` (at most `count`, 0 = all) as an array; returns how many.
fn reply_array_of(c: &Ctx, it: RangeIter<'_>, count: u64) -> u64 {
    c.reply_array_postponed();
    let n = reply_iter(c, it, count);
    c.set_array_len(n as usize);
    n
}

/// Emits one entry: `[id, [field, value, ...]]`.
pub fn reply_entry(c: &Ctx, e: &crate::stream::Entry<'_>) {
    c.reply_array(2);
    c.reply_id(e.id());
    c.reply_array(e.numfields() * 2);
    e.for_each_field(|f, v| {
        c.reply_value(f);
        c.reply_value(v);
    });
}

/// Emits the entries themselves (no enclosing array).
pub fn reply_entries(c: &Ctx, s: &Stream, start: StreamId, end: StreamId, count: u64, rev: bool) -> u64 {
    reply_iter(c, s.range(start, end, rev), count)
}

/// Emits the entries of `it` (at most `count`, 0 = all; no enclosing array); returns how many.
fn reply_iter(c: &Ctx, it: RangeIter<'_>, count: u64) -> u64 {
    let mut n = 0u64;
    for e in it {
        reply_entry(c, &e);
        n += 1;
        if count != 0 && n == count {
            break;
        }
    }
    n
}
