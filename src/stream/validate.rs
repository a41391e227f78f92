//! Checks a stream assembled from untrusted bytes (RDB, RESTORE) before it is
//! accepted. Every check that a later operation relies on is here, so the rest
//! of the code may trust a stream that passed.
//!
//! Per node (as streamValidateListpackIntegrity, deep): the listpack itself is
//! valid; the master entry is `count deleted num-fields field... 0`; exactly
//! `count + deleted` entries follow, each `flags ms-diff seq-diff [num-fields
//! fields...] values... lp-count` with integer elements where integers are
//! expected, known flags and a correct lp-count; `count` equals the live entries
//! and `deleted` the tombstones. (`count` may be 0: an exact MINID trim can
//! leave a node holding only tombstones, in the built-in too.)
//! Across nodes: master IDs strictly increasing; `length` equals the live
//! entries.
//!
//! Deliberately not checked: that entry IDs increase inside a node or stay above
//! their node's master ID, that `last_id` is above every entry, that
//! `max_deleted_entry_id <= last_id`, `entries_added >= length` and the range of
//! a group's entries-read (the built-in's counters wrap: XSETID ENTRIESADDED
//! near 2^64 then one XADD).
//! The built-in lets XSETID (on an empty stream, or below a trailing tombstone)
//! reach those states, and our code stays memory-safe and terminating without
//! them; refusing them would refuse data the built-in produces.

use super::id::StreamId;
use super::node::{FLAG_DELETED, FLAG_SAMEFIELDS};
use super::Stream;
use crate::listpack::Listpack;

/// What is wrong with a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub &'static str);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

fn int_at(lp: &Listpack, p: Option<usize>) -> Result<(i64, Option<usize>), Invalid> {
    let off = p.ok_or(Invalid("node ends inside an entry"))?;
    let (v, next) = lp.get_next(off);
    Ok((v.as_int().ok_or(Invalid("integer expected"))?, next))
}

fn skip(lp: &Listpack, p: Option<usize>, n: i64) -> Result<Option<usize>, Invalid> {
    let mut p = p;
    for _ in 0..n {
        let off = p.ok_or(Invalid("node ends inside an entry"))?;
        p = lp.next(off);
    }
    Ok(p)
}

/// Summary of one valid node.
#[derive(Debug, Clone, Copy)]
pub struct NodeSummary {
    pub live: u64,
    pub first_live: Option<StreamId>,
    pub last_entry: StreamId,
}

/// Validates one node's structure; `prev` is the previous node's master ID
/// (None for the first node). The listpack must already have passed
/// `listpack::validate(deep = true)`.
pub fn validate_node(master_id: StreamId, lp: &Listpack, prev: Option<StreamId>) -> Result<NodeSummary, Invalid> {
    let p = lp.first();
    let (count, p) = int_at(lp, p)?;
    let (deleted, p) = int_at(lp, p)?;
    let (master_fields, p) = int_at(lp, p)?;
    if count < 0 || deleted < 0 || master_fields < 0 {
        return Err(Invalid("bad node counters"));
    }
    if count.checked_add(deleted).is_none() || master_fields as usize > lp.len() {
        return Err(Invalid("bad node counters"));
    }
    let p = skip(lp, p, master_fields)?;
    let (zero, mut p) = int_at(lp, p)?;
    if zero != 0 {
        return Err(Invalid("master entry not terminated"));
    }
    if let Some(prev) = prev {
        if master_id <= prev {
            return Err(Invalid("node IDs not increasing"));
        }
    }
    let mut last = prev;
    let (mut live, mut dead) = (0i64, 0i64);
    let mut first_live = None;
    for _ in 0..count + deleted {
        let (flags, q) = int_at(lp, p)?;
        if flags & !(FLAG_DELETED | FLAG_SAMEFIELDS) != 0 {
            return Err(Invalid("unknown entry flags"));
        }
        let (ms_diff, q) = int_at(lp, q)?;
        let (seq_diff, mut q) = int_at(lp, q)?;
        let id = StreamId {
            ms: master_id.ms.wrapping_add(ms_diff as u64),
            seq: master_id.seq.wrapping_add(seq_diff as u64),
        };
        last = Some(id);
        let (fields, extra) = if flags & FLAG_SAMEFIELDS != 0 {
            (master_fields, 3)
        } else {
            let (n, r) = int_at(lp, q)?;
            if n < 1 || n as usize > lp.len() {
                return Err(Invalid("bad field count"));
            }
            q = skip(lp, r, n)?;
            (n, 3 + n + 1)
        };
        if fields < 1 {
            return Err(Invalid("entry without fields"));
        }
        q = skip(lp, q, fields)?;
        let (lp_count, r) = int_at(lp, q)?;
        if lp_count != fields + extra {
            return Err(Invalid("bad lp-count"));
        }
        p = r;
        if flags & FLAG_DELETED != 0 {
            dead += 1;
        } else {
            live += 1;
            first_live.get_or_insert(id);
        }
    }
    if p.is_some() {
        return Err(Invalid("trailing elements in node"));
    }
    if live != count || dead != deleted {
        return Err(Invalid("node counters disagree with entries"));
    }
    Ok(NodeSummary { live: live as u64, first_live, last_entry: last.unwrap_or(master_id) })
}

/// Validates the whole stream's nodes against its metadata.
pub fn validate_stream(s: &Stream) -> Result<(), Invalid> {
    let mut prev: Option<StreamId> = None;
    let mut length = 0u64;
    let mut first_live = None;
    for (master_id, lp) in s.nodes() {
        let sum = validate_node(master_id, lp, prev)?;
        length += sum.live;
        if first_live.is_none() {
            first_live = sum.first_live;
        }
        prev = Some(master_id);
    }
    if length != s.length {
        return Err(Invalid("length disagrees with entries"));
    }
    let _ = first_live;
    if let Some(mut it) = s.groups_iter() {
        while let Some((_, g)) = it.next() {
            g.check().map_err(Invalid)?;
        }
    }
    Ok(())
}
