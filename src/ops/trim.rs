//! Trimming as a shared write: the exact forms a trim is propagated in, the on-write
//! compaction of the nodes a deletion touched, and the primary's trim of a stream by age.

use crate::ffi::ctx::{Arg, Ctx, KeyKind, Name};
use crate::ffi::stats::{bump, EVENTS};
use crate::stream::id::IdText;
use crate::stream::{RefPolicy, Stream, StreamId, Trim, TrimStrategy, Trimmed};

/// The argument that replaces an approximate threshold when propagating: the
/// resulting length (MAXLEN) or first entry ID, tombstones included (MINID).
pub fn exact_threshold(s: &Stream, t: &Trim) -> IdText {
    match t.strategy {
        TrimStrategy::MaxLen(_) => IdText::number(s.length),
        TrimStrategy::MinId(_) => s.edge_id(true, false).text(),
    }
}

/// The work cap of an approximate trim without LIMIT: ~100 nodes, as the built-in.
pub fn default_approx_limit() -> i64 {
    let limit = 100i64.saturating_mul(crate::config::limits().entries_max);
    if limit <= 0 {
        10_000
    } else {
        limit.min(1_000_000)
    }
}

/// The keyword of a policy, for propagation.
pub fn policy_word(p: RefPolicy) -> &'static [u8] {
    match p {
        RefPolicy::KeepRef => b"KEEPREF",
        RefPolicy::DelRef => b"DELREF",
        RefPolicy::Acked => b"ACKED",
    }
}

/// The exact trim clause that repeats a DELREF / ACKED trim on any node layout:
/// `MINID = <first ID not examined>`, or `MAXLEN = 0` when every entry was
/// examined (Stream::trim_with).
pub fn policy_threshold(done: &Trimmed) -> (&'static [u8], Vec<u8>) {
    match done.examined_below {
        Some(id) => (b"MINID", id.to_bytes()),
        None => (b"MAXLEN", b"0".to_vec()),
    }
}

/// The on-write compaction step (`xstream.compact-deleted`): after a write deleted
/// entries, each node holding one of `ids` (or the node an ID would be in) is
/// rewritten if its share of deleted entries passed the threshold, and merged with
/// its neighbours where they fit. At most three nodes are read per ID.
pub fn compact_touched(s: &mut Stream, ids: &[StreamId]) {
    let pct = crate::config::compact_deleted();
    if pct == 0 {
        return;
    }
    let limits = crate::config::limits();
    let mut total = crate::stream::compact::Compacted::default();
    for &id in ids {
        total.add(s.compact_at(id, pct, limits));
    }
    count_compaction(&total);
}

/// INFO xstream's compaction counters.
pub fn count_compaction(d: &crate::stream::compact::Compacted) {
    bump(&EVENTS.nodes_compacted, d.nodes_rewritten);
    bump(&EVENTS.nodes_merged, d.nodes_merged);
    bump(&EVENTS.compacted_bytes_freed, d.bytes_freed);
}

/// Trims the stream at `key` (selected DB) by its MAXAGE at `now` (Unix ms), removing at most
/// about `budget` entries (whole nodes; a first node larger than the budget is taken whole
/// rather than never). A pass that removed entries is propagated as `XS.TRIM key MINID = <id>`
/// (exact: the same entries go on any node layout). Returns (entries removed, when to look
/// again: None when the key holds no retained stream or nothing is left to age).
pub fn by_age(c: &Ctx, key: Name<'_>, now: u64, budget: i64) -> (u64, Option<u64>) {
    let mut k = c.open(key, true);
    if k.kind() != KeyKind::Stream {
        return (0, None);
    }
    let Some(s) = k.stream_mut() else { return (0, None) };
    if s.max_age.is_none() {
        return (0, None);
    }
    let Some((t, mut done)) = s.trim_aged(now, budget.max(1)) else { return (0, None) };
    if done.deleted == 0 && s.age_due_ms().is_some_and(|d| d <= now) {
        if let Some((_, d)) = s.trim_aged(now, 0) {
            done = d;
        }
    }
    let limited = s.age_due_ms().is_some_and(|d| d <= now);
    if done.deleted > 0 {
        let th = match t.strategy {
            TrimStrategy::MinId(id) if !t.approx && !limited => id.text(),
            _ => exact_threshold(s, &t),
        };
        c.replicate(c"XS.TRIM", &[key.into(), Arg::New(b"MINID"), Arg::New(b"="), Arg::New(&th)]);
        c.notify_name(c"xtrim", key);
        bump(&EVENTS.entries_trimmed, done.deleted);
        bump(&EVENTS.entries_expired, done.deleted);
        c.signal_modified_name(key);
        let first = s.first_id;
        compact_touched(s, &[first]);
    }
    let next = if limited { Some(now) } else { s.age_due_ms() };
    if let Some(a) = s.max_age.as_mut() {
        a.indexed_due_ms = next.unwrap_or(0);
    }
    (done.deleted, next)
}
