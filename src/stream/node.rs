//! One stream node: a listpack holding a master entry and delta-encoded entries.
//!
//! The layout is the built-in's (t_stream.c), so node sizes, and with them the
//! points where a node is full and what an approximate trim removes, are the same:
//!
//! ```text
//! master entry:
//! +-------+---------+------------+---------+--/--+---------+---+
//! | count | deleted | num-fields | field_1 | ... | field_N | 0 |
//! +-------+---------+------------+---------+--/--+---------+---+
//! entry (fields differ from the master's):
//! +-------+---------+---------+------------+---------+---------+-/-+----------+
//! | flags | ms-diff | seq-diff | num-fields | field_1 | value_1 |...| lp-count |
//! +-------+---------+---------+------------+---------+---------+-/-+----------+
//! entry with STREAM_ITEM_FLAG_SAMEFIELDS (fields equal the master's):
//! +-------+---------+----------+---------+-/-+---------+----------+
//! | flags | ms-diff | seq-diff | value_1 |...| value_N | lp-count |
//! +-------+---------+----------+---------+-/-+---------+----------+
//! ```
//!
//! `count` is the number of live entries, `deleted` the number of tombstones
//! (entries with the DELETED flag) still in the node. The ID of an entry is the
//! node's master ID (its rax key) plus the two deltas (wrapping u64 arithmetic,
//! stored as i64 as the built-in does). `lp-count` is the number of listpack
//! elements of the entry before it, so a node can be walked backwards; the
//! master entry's trailing `0` plays that role for the start of the node.

use super::id::StreamId;
use crate::listpack::{Listpack, Reader, Value};

/// Entry flag: the entry is a tombstone.
pub const FLAG_DELETED: i64 = 1;
/// Entry flag: the entry's fields are the master entry's (only values stored).
pub const FLAG_SAMEFIELDS: i64 = 2;

/// Offsets into a node's master entry.
#[derive(Clone, Copy, Debug)]
pub struct Master {
    /// Offset of `count`.
    pub count_off: usize,
    /// Number of master fields.
    pub fields_count: usize,
    /// Offset of the first master field (or of the terminator when none).
    pub fields_off: usize,
    /// Offset of the first entry's flags, `None` when the node has no entries.
    pub first_entry: Option<usize>,
}

/// Reads the master entry of a node. On a node that was loaded without the deep
/// check (RDB loading under `sanitize-dump-payload no`) this and every reader
/// below stay total: counts are clamped to what the node's bytes can hold, walks
/// stop at the node's end, and garbage reads as 0 or an empty string (see
/// `listpack::Listpack::from_vec`). A corrupt node then gives wrong answers, never
/// a panic, an unbounded loop or an allocation larger than the node.
pub fn master(lp: &Listpack) -> Master {
    let lp = lp.reader();
    let count_off = lp.first().unwrap_or(0);
    let mut p = Some(count_off);
    let _count = lp.next_int(&mut p);
    let _deleted = lp.next_int(&mut p);
    let fields_count = clamp_elements(lp, lp.next_int(&mut p));
    let fields_off = p.unwrap_or(0);
    let p = skip_elements(lp, p, fields_count);
    // p is at the master terminator.
    let first_entry = p.and_then(|o| lp.next(o));
    Master { count_off, fields_count, fields_off, first_entry }
}

/// A count read from a node, as a number of elements the node can actually
/// hold: every element takes at least 2 bytes (encoding + backlen).
fn clamp_elements(lp: Reader, n: i64) -> usize {
    usize::try_from(n.max(0)).unwrap_or(usize::MAX).min(lp.bytes_len() / 2)
}

/// Moves `p` over `n` elements; None once the node ends (at most `n` steps).
fn skip_elements(lp: Reader, mut p: Option<usize>, n: usize) -> Option<usize> {
    for _ in 0..n {
        p = lp.next(p?);
    }
    p
}

/// The head of a node's master entry, read in one pass (the append hot path):
/// (offset of `count`, count, deleted, number of master fields, offset of the
/// first master field).
pub fn head(lp: &Listpack) -> (usize, i64, i64, usize, Option<usize>) {
    let lp = lp.reader();
    let count_off = lp.first().unwrap_or(0);
    let mut p = Some(count_off);
    let count = lp.next_int(&mut p);
    let deleted = lp.next_int(&mut p);
    let fields = clamp_elements(lp, lp.next_int(&mut p));
    (count_off, count, deleted, fields, p)
}

/// Live entries and tombstones of a node.
pub fn counts(lp: &Listpack) -> (i64, i64) {
    let lp = lp.reader();
    let mut p = lp.first();
    let count = lp.next_int(&mut p);
    let deleted = lp.next_int(&mut p);
    (count, deleted)
}

/// Rewrites `count` and `deleted`. (On a node not deep-checked, an element
/// that cannot be replaced is left as it is.)
pub fn set_counts(lp: &mut Listpack, count: i64, deleted: i64) {
    let Some(first) = lp.first() else { return };
    if lp.try_replace(first, Value::Int(count)).is_err() {
        return;
    }
    if let Some(second) = lp.next(first) {
        let _ = lp.try_replace(second, Value::Int(deleted));
    }
}

/// One entry of a node, as found by a walk.
#[derive(Clone, Copy, Debug)]
pub struct EntryPos {
    pub id: StreamId,
    pub flags: i64,
    /// Offset of the flags element.
    pub flags_off: usize,
    /// Offset of the first field (or value, with SAMEFIELDS).
    pub data_off: Option<usize>,
    /// Number of field-value pairs.
    pub numfields: usize,
    /// Offset of the next entry's flags (forward walk), `None` at the node end.
    pub next_off: Option<usize>,
}

/// Decodes the entry whose flags are at `flags_off` (a forward walk).
pub fn entry_at(lp: &Listpack, m: &Master, master_id: StreamId, flags_off: usize) -> EntryPos {
    entry_within(lp, m, master_id, flags_off, usize::MAX)
}

/// [`entry_at`] for an entry known to hold at most `elements_max` elements before
/// its lp-count (a backward walk reached its flags by stepping back that many).
/// In a valid node the bound never binds; in one that was not deep-checked it
/// keeps the work of a walk linear in the node's size: forward, each entry's
/// elements end where the next begins; backward, within the elements stepped over.
pub fn entry_within(lp: &Listpack, m: &Master, master_id: StreamId, flags_off: usize, elements_max: usize) -> EntryPos {
    let lp = lp.reader();
    let mut p = Some(flags_off);
    let flags = lp.next_int(&mut p);
    let ms = master_id.ms.wrapping_add(lp.next_int(&mut p) as u64);
    let seq = master_id.seq.wrapping_add(lp.next_int(&mut p) as u64);
    let same = flags & FLAG_SAMEFIELDS != 0;
    let (numfields, elements) = if same {
        let n = m.fields_count.min(elements_max);
        (n, n)
    } else {
        // Each pair takes two elements.
        let n = clamp_elements(lp, lp.next_int(&mut p)).min(lp.bytes_len() / 4).min(elements_max / 2);
        (n, n * 2)
    };
    let data_off = p;
    let (p, skipped) = skip_counted(lp, p, elements);
    // An entry cut short by the end of the node (not deep-checked) has the pairs it holds.
    let numfields = if skipped == elements {
        numfields
    } else if same {
        skipped
    } else {
        skipped / 2
    };
    // p is at lp-count.
    let next_off = p.and_then(|o| lp.next(o));
    EntryPos { id: StreamId { ms, seq }, flags, flags_off, data_off, numfields, next_off }
}

/// Moves `p` over up to `n` elements: (where it stops, None at the node's end;
/// how many elements it passed).
fn skip_counted(lp: Reader, mut p: Option<usize>, n: usize) -> (Option<usize>, usize) {
    for i in 0..n {
        match p {
            Some(o) => p = lp.next(o),
            None => return (None, i),
        }
    }
    (p, n)
}

/// The entry whose `lp-count` element is at `count_off`: (offset of its flags,
/// number of elements before its lp-count), or `None` when `count_off` is the
/// master terminator (start of node reached).
pub fn entry_start_from_lp_count(lp: &Listpack, count_off: usize) -> Option<(usize, usize)> {
    lp_count_start(lp.reader(), count_off)
}

fn lp_count_start(lp: Reader, count_off: usize) -> Option<(usize, usize)> {
    let n = clamp_elements(lp, lp.get_int(count_off));
    let mut p = Some(count_off);
    for _ in 0..n {
        p = lp.prev(p?);
    }
    // A valid node's lp-count is never 0; as the master terminator, 0 ends the walk.
    if n == 0 {
        None
    } else {
        p.map(|f| (f, n))
    }
}

/// Calls `f(field, value)` for each pair of the entry: exactly `e.numfields`
/// times (a reply announces that many pairs before they are written), with empty
/// strings where a node that was not deep-checked ends early.
pub fn for_each_field<'a>(lp: &'a Listpack, m: &Master, e: &EntryPos, mut f: impl FnMut(Value<'a>, Value<'a>)) {
    let lp = lp.reader();
    let same = e.flags & FLAG_SAMEFIELDS != 0;
    let mut mf = Some(m.fields_off);
    let mut p = e.data_off;
    let take = |p: &mut Option<usize>| match *p {
        Some(o) => {
            *p = lp.next(o);
            lp.get(o)
        }
        None => Value::Str(&[]),
    };
    for _ in 0..e.numfields {
        let field = if same { take(&mut mf) } else { take(&mut p) };
        f(field, take(&mut p));
    }
}

/// The ID of the last entry (tombstone or not) of a node, `None` if it has none.
pub fn last_entry_id(lp: &Listpack, master_id: StreamId) -> Option<StreamId> {
    let lp = lp.reader();
    let last = lp.last()?;
    let (flags_off, _) = lp_count_start(lp, last)?;
    let mut p = lp.next(flags_off);
    let ms = master_id.ms.wrapping_add(lp.next_int(&mut p) as u64);
    let seq = master_id.seq.wrapping_add(lp.next_int(&mut p) as u64);
    Some(StreamId { ms, seq })
}
