//! MAXCOUNT / MAXSIZE (Redis 8.10): what one read may still emit.

use super::*;

/// MAXCOUNT / MAXSIZE of Redis 8.10 (REDIS8.md §7): what one call may still emit.
///
/// - MAXCOUNT caps the entries of the whole reply: streams are served in argument
///   order, each with min(COUNT, what is left); once nothing is left, later
///   streams are not served (and do not appear).
/// - MAXSIZE is a soft byte budget, checked before every further entry and before
///   every further stream: once at least one entry is in the reply and the bytes
///   emitted so far reach it, the call stops. The first entry always goes out, and
///   the entry that crosses the budget goes out whole. The built-in counts its
///   client's output bytes; a module cannot see them, so the bytes are the RESP
///   encoding of what this call emitted in the client's protocol: stream names (in
///   RESP2 with their 2-element array), entries, and each stream's entry-array
///   header once filled; the outer array or map header (filled at the end) is not
///   counted (docs/redis8.md).
///
/// Withheld entries are not delivered: no PEL entry, no last-ID move, nothing
/// propagated. Without either option a budget never stops anything and sizes are
/// not computed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Budget {
    /// Entries still allowed (MAXCOUNT), None without MAXCOUNT.
    pub(super) count_left: Option<u64>,
    /// MAXSIZE in bytes, None without it.
    pub(super) size_max: Option<u64>,
    /// Entries and bytes emitted so far by this call.
    pub(super) entries: u64,
    pub(super) bytes: u64,
    resp3: bool,
}

/// Length of a RESP aggregate or bulk header for `n` (`*n\r\n`: 3 + digits).
pub(super) fn header_len(n: u64) -> u64 {
    let mut digits = 1;
    let mut v = n;
    while v >= 10 {
        v /= 10;
        digits += 1;
    }
    3 + digits
}

/// Bytes of a bulk string of `len` bytes.
pub(super) fn bulk_len(len: u64) -> u64 {
    header_len(len) + len + 2
}

/// Bytes of a listpack value replied as a bulk string.
pub(super) fn value_len(v: crate::listpack::Value<'_>) -> u64 {
    match v {
        crate::listpack::Value::Str(b) => bulk_len(b.len() as u64),
        crate::listpack::Value::Int(i) => {
            let digits = i.unsigned_abs().checked_ilog10().map_or(1, |d| u64::from(d) + 1) + u64::from(i < 0);
            bulk_len(digits)
        }
    }
}

/// Bytes of a RESP integer (`:n\r\n`).
pub(super) fn int_len(v: i64) -> u64 {
    let digits = v.unsigned_abs().checked_ilog10().map_or(1, |d| u64::from(d) + 1) + u64::from(v < 0);
    3 + digits
}

pub(super) fn id_len(id: StreamId) -> u64 {
    let mut buf = [0u8; 44];
    bulk_len(id.write_to_slice(&mut buf) as u64)
}

impl Budget {
    pub(super) fn new(maxcount: u64, maxsize: u64, resp3: bool) -> Budget {
        Budget { count_left: (maxcount > 0).then_some(maxcount), size_max: (maxsize > 0).then_some(maxsize), entries: 0, bytes: 0, resp3 }
    }

    /// Nothing more may be emitted.
    pub(super) fn exhausted(&self) -> bool {
        self.count_left == Some(0) || (self.entries > 0 && self.size_max.is_some_and(|m| self.bytes >= m))
    }

    /// The count for the next stream: COUNT (0 = all) within MAXCOUNT.
    pub(super) fn stream_count(&self, count: u64) -> u64 {
        match self.count_left {
            Some(left) if count == 0 || left < count => left,
            _ => count,
        }
    }

    /// A stream's name went out (RESP2: inside its 2-element array).
    pub(super) fn add_stream(&mut self, key: &[u8]) {
        if self.size_max.is_some() {
            self.bytes += bulk_len(key.len() as u64) + if self.resp3 { 0 } else { header_len(2) };
        }
    }

    /// A stream's entry array was filled with `n` entries.
    pub(super) fn add_array(&mut self, n: u64) {
        if self.size_max.is_some() {
            self.bytes += header_len(n);
        }
    }

    /// An entry went out (`claim`: a CLAIM read's 4-element entry with these idle
    /// and count integers). Returns whether the call may go on.
    pub(super) fn add_entry(&mut self, e: Option<&crate::stream::Entry<'_>>, id: StreamId, claim: Option<(i64, i64)>) -> bool {
        self.entries += 1;
        if let Some(left) = self.count_left.as_mut() {
            *left = left.saturating_sub(1);
        }
        if self.size_max.is_some() {
            self.bytes += match claim {
                Some((idle, count)) => header_len(4) + int_len(idle) + int_len(count),
                None => header_len(2),
            } + id_len(id);
            match e {
                Some(e) => {
                    self.bytes += header_len(e.numfields() as u64 * 2);
                    let mut fields = 0;
                    e.for_each_field(|f, v| fields += value_len(f) + value_len(v));
                    self.bytes += fields;
                }
                // [id, nil] of a deleted entry in a history read.
                None => self.bytes += if self.resp3 { 3 } else { 5 },
            }
        }
        !self.exhausted()
    }
}

/// XREAD's entries of one stream from `start`, within `count` and the budget.
pub(super) fn reply_range_budget(c: &Ctx, s: &crate::stream::Stream, start: StreamId, count: u64, budget: &mut Budget) {
    c.reply_array_postponed();
    let mut n = 0u64;
    for e in s.range(start, StreamId::MAX, false) {
        crate::commands::range::reply_entry(c, &e);
        n += 1;
        if !budget.add_entry(Some(&e), e.id(), None) || (count != 0 && n == count) {
            break;
        }
    }
    c.set_array_len(n as usize);
    budget.add_array(n);
}
