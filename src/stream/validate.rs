//! Checks a stream assembled from untrusted bytes (RDB, RESTORE) before it is
//! accepted. Every check that a later operation relies on is here, so the rest
//! of the code may trust a stream that passed.
//!
//! Per node (as streamValidateListpackIntegrity, deep), in one pass over its
//! bytes: the listpack itself is valid (every element, as
//! `listpack::validate(deep = true)`); the master entry is `count deleted num-fields field... 0`; exactly
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
use crate::listpack::{Checked, Listpack, LpError};

/// What is wrong with a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub &'static str);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// The node's listpack walk, checked element by element (listpack::Checked).
struct Walk<'a>(Checked<'a>);

impl<'a> Walk<'a> {
    #[inline(always)]
    fn int(&mut self) -> Result<i64, Invalid> {
        match self.0.next_int() {
            Ok(Some(Some(v))) => Ok(v),
            Ok(Some(None)) => Err(Invalid("integer expected")),
            Ok(None) => Err(Invalid("node ends inside an entry")),
            Err(e) => Err(lp_invalid(&e)),
        }
    }

    /// Checks `n` elements whose values do not matter (fields and values).
    #[inline(always)]
    fn skip(&mut self, n: i64) -> Result<(), Invalid> {
        for _ in 0..n {
            match self.0.step() {
                Ok(Some(_)) => {}
                Ok(None) => return Err(Invalid("node ends inside an entry")),
                Err(e) => return Err(lp_invalid(&e)),
            }
        }
        Ok(())
    }
}

/// The listpack rule a node breaks (docs/listpack.md, "Validation").
fn lp_invalid(e: &LpError) -> Invalid {
    Invalid(match e {
        LpError::TooShort { .. } => "listpack: too short",
        LpError::BadTotalBytes { .. } => "listpack: total-bytes disagrees with the size",
        LpError::NoTerminator => "listpack: no terminator",
        LpError::BadEncoding { .. } => "listpack: unknown encoding",
        LpError::EntryOverflow { .. } => "listpack: element runs past the end",
        LpError::BadBacklen { .. } => "listpack: wrong backlen",
        LpError::MisplacedTerminator { .. } => "listpack: terminator before the end",
        LpError::CountMismatch { .. } => "listpack: header count disagrees with the elements",
        LpError::TooLarge { .. } => "listpack: too large",
        LpError::BadBlock => "listpack: compressed block does not decode",
    })
}

/// Summary of one valid node.
#[derive(Debug, Clone, Copy)]
pub struct NodeSummary {
    pub live: u64,
    pub first_live: Option<StreamId>,
    pub last_entry: StreamId,
}

/// Validates one node completely, in one pass over its bytes: every listpack
/// element (as `listpack::validate(deep = true)`) and the node structure. `prev`
/// is the previous node's master ID (None for the first node).
pub fn validate_node(master_id: StreamId, lp: &Listpack, prev: Option<StreamId>) -> Result<NodeSummary, Invalid> {
    let mut w = Walk(Checked::new(lp.as_bytes()).map_err(|e| lp_invalid(&e))?);
    let count = w.int()?;
    let deleted = w.int()?;
    let master_fields = w.int()?;
    if count < 0 || deleted < 0 || master_fields < 0 {
        return Err(Invalid("bad node counters"));
    }
    // Every element takes at least 2 bytes: larger counts cannot be walked.
    let elements_max = (lp.bytes_len() / 2) as i64;
    if count.checked_add(deleted).is_none() || master_fields > elements_max {
        return Err(Invalid("bad node counters"));
    }
    w.skip(master_fields)?;
    if w.int()? != 0 {
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
        let flags = w.int()?;
        if flags & !(FLAG_DELETED | FLAG_SAMEFIELDS) != 0 {
            return Err(Invalid("unknown entry flags"));
        }
        let ms_diff = w.int()?;
        let seq_diff = w.int()?;
        let id = StreamId { ms: master_id.ms.wrapping_add(ms_diff as u64), seq: master_id.seq.wrapping_add(seq_diff as u64) };
        last = Some(id);
        let (fields, extra) = if flags & FLAG_SAMEFIELDS != 0 {
            (master_fields, 3)
        } else {
            let n = w.int()?;
            if n < 1 || n > elements_max {
                return Err(Invalid("bad field count"));
            }
            w.skip(n)?;
            (n, 3 + n + 1)
        };
        if fields < 1 {
            return Err(Invalid("entry without fields"));
        }
        w.skip(fields)?;
        if w.int()? != fields + extra {
            return Err(Invalid("bad lp-count"));
        }
        if flags & FLAG_DELETED != 0 {
            dead += 1;
        } else {
            live += 1;
            first_live.get_or_insert(id);
        }
    }
    if w.0.step().map_err(|e| lp_invalid(&e))?.is_some() {
        return Err(Invalid("trailing elements in node"));
    }
    w.0.finish().map_err(|e| lp_invalid(&e))?;
    if live != count || dead != deleted {
        return Err(Invalid("node counters disagree with entries"));
    }
    Ok(NodeSummary { live: live as u64, first_live, last_entry: last.unwrap_or(master_id) })
}

/// The whole-stream part of the check, fed one node at a time in key order: loading checks
/// each node right after reading it, while its bytes are still in the CPU's caches (a 1M-entry
/// RESTORE checked them all at the end before, from memory).
#[derive(Debug, Default)]
pub struct StreamCheck {
    prev: Option<StreamId>,
    length: u64,
}

impl StreamCheck {
    /// Checks the next node (`master_id` above the previous one's; a packed node is checked
    /// on a copy dropped at once: no cache filled, a deep load never holds the whole stream
    /// decompressed).
    pub fn node(&mut self, master_id: StreamId, stored: &Listpack) -> Result<(), Invalid> {
        let copy = stored.unpacked_copy().transpose().map_err(|e| lp_invalid(&e))?;
        let lp = copy.as_ref().unwrap_or(stored);
        let sum = validate_node(master_id, lp, self.prev)?;
        self.length += sum.live;
        self.prev = Some(master_id);
        Ok(())
    }

    /// After every node: the stream's length. (A load checks each group as it makes it:
    /// `Group::load_finish`.)
    pub fn finish(&self, s: &Stream) -> Result<(), Invalid> {
        if self.length != s.length {
            return Err(Invalid("length disagrees with entries"));
        }
        Ok(())
    }
}

/// Validates the whole stream's nodes (completely: the listpacks need not have
/// been deep-checked) against its metadata.
pub fn validate_stream(s: &Stream) -> Result<(), Invalid> {
    let mut check = StreamCheck::default();
    for (master_id, stored) in s.stored_nodes() {
        check.node(master_id, stored)?;
    }
    check.finish(s)?;
    if let Some(it) = s.groups_iter() {
        for (_, g) in it {
            g.check().map_err(Invalid)?;
        }
    }
    Ok(())
}
