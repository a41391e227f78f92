//! Tiering of sealed nodes to disk (issue 30, `xstream.tier-dir` / `xstream.tier-memory`),
//! run by the compression job's timer (src/jobs/pack.rs) after it compresses.
//!
//! Every sealed node held in RAM is in [`RESIDENT`], oldest first across all streams, with the
//! bytes it holds: a node enters when the compression step takes it off its stream's queue
//! (sealed by an append: packed first when `xstream.compression` is on), and when its stream
//! arrives (the end of a load, RENAME, MOVE, COPY, RESTORE). While the queued bytes are over
//! `tier-memory`, the oldest node goes to the segment store (`Stream::tier_node`), a bounded
//! number per tick. The tail node, groups, consumers and PELs never leave RAM.
//!
//! A write that fails with an I/O error (a full disk, EIO) leaves its node in RAM at the head
//! of the queue and pauses the step for [`RETRY_AFTER`]: tiering resumes by itself once the
//! disk has room again.
//!
//! What this does not count (yet): a cold node that a write brought back (XDEL, an exact trim
//! of its entries) stays in RAM until its stream arrives again; a node queued under a name
//! that has gone (a renamed or deleted key) is skipped, and its stream's nodes are queued
//! again under the new name when it arrives. SWAPDB swaps the queued nodes' databases. Layout
//! only, like compression: nothing is propagated, every server (primary or replica) tiers on
//! its own budget.

use crate::config::TIER_MEMORY;
use crate::ffi::ctx::Ctx;
use crate::stream::StreamId;
use crate::tier::segment::TierError;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Nodes moved to disk per tick at most.
const NODES_PER_TICK: usize = 512;
/// Time spent per tick at most (checked between nodes).
const TICK_BUDGET: Duration = Duration::from_micros(2000);

struct Resident {
    db: i32,
    key: Arc<[u8]>,
    node: StreamId,
    bytes: usize,
}

static RESIDENT: Mutex<VecDeque<Resident>> = Mutex::new(VecDeque::new());
/// The bytes of the nodes in RESIDENT.
static RESIDENT_BYTES: AtomicU64 = AtomicU64::new(0);
/// Write errors already logged (one line per error, the first few).
static WRITE_ERRORS_LOGGED: AtomicU64 = AtomicU64::new(0);
const WRITE_ERRORS_LOG_MAX: u64 = 16;

fn resident() -> std::sync::MutexGuard<'static, VecDeque<Resident>> {
    RESIDENT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Nodes of `key` (in `db`) now held in RAM, oldest first.
pub fn queue(db: i32, key: &[u8], nodes: impl IntoIterator<Item = (StreamId, usize)>) {
    let key: Arc<[u8]> = Arc::from(key);
    let mut q = resident();
    for (node, bytes) in nodes {
        RESIDENT_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
        q.push_back(Resident { db, key: key.clone(), node, bytes });
    }
}

/// More sealed bytes in RAM than `tier-memory` allows (with a store open)?
pub fn over_budget() -> bool {
    crate::stream::tiering() && RESIDENT_BYTES.load(Ordering::Relaxed) > TIER_MEMORY.load(Ordering::Relaxed).max(0) as u64
}

/// Moves the oldest queued nodes to disk while over budget, within this tick's bounds.
pub fn step(c: &Ctx) {
    log_faults();
    if !crate::stream::tiering() {
        if !resident().is_empty() {
            resident().clear();
            RESIDENT_BYTES.store(0, Ordering::Relaxed);
        }
        *PASS.lock().unwrap_or_else(PoisonError::into_inner) = None;
        return;
    }
    let start = Instant::now();
    if paused(start) {
        return;
    }
    let home = c.selected_db();
    let mut left = NODES_PER_TICK;
    while left > 0 && over_budget() && start.elapsed() < TICK_BUDGET {
        let Some(r) = resident().pop_front() else { break };
        RESIDENT_BYTES.fetch_sub(r.bytes as u64, Ordering::Relaxed);
        if !c.select_db(r.db) {
            continue;
        }
        let mut k = c.open_key_named(&r.key, false);
        let Some(s) = k.stream_mut() else { continue };
        left -= 1;
        if let Err(e) = s.tier_node(r.node) {
            if WRITE_ERRORS_LOGGED.fetch_add(1, Ordering::Relaxed) < WRITE_ERRORS_LOG_MAX {
                crate::ffi::log_warning(&format!("xstream: tiering a node to {}: {e} (the node stays in RAM)", crate::config::tier_dir()));
            }
            if let TierError::Io(_) = e {
                // A full disk or a failing one: the node waits at the head of the queue and
                // the step pauses, so that tiering resumes once space comes back (a trim, a
                // deleted key, the operator) without a write per node per tick meanwhile.
                RESIDENT_BYTES.fetch_add(r.bytes as u64, Ordering::Relaxed);
                resident().push_front(r);
                *paused_until() = Some(Instant::now() + RETRY_AFTER);
                break;
            }
        }
    }
    if start.elapsed() < TICK_BUDGET && !over_budget() && !paused(Instant::now()) {
        compact(c, start);
    }
    c.select_db(home);
}

/// A compaction pass: the streams that had nodes on disk when it began, walked in turn, and
/// the sparse segments it empties.
struct Pass {
    sparse: Vec<u32>,
    streams: Vec<(i32, Vec<u8>)>,
    /// The stream walked now, and the node it goes on from.
    at: usize,
    from: StreamId,
}

static PASS: Mutex<Option<Pass>> = Mutex::new(None);
/// When the last pass ended.
static PASS_ENDED: Mutex<Option<Instant>> = Mutex::new(None);
/// A pass starts at most this long after the previous one ended: a segment that stays sparse
/// after a pass (a record that cannot be read back, a stream renamed during the pass) does not
/// make every tick scan the keyspace.
const PASS_EVERY: Duration = Duration::from_secs(5);
/// Nodes rewritten per call of `compact_cold`, between two checks of the tick's time.
const REWRITE_CHUNK: usize = 64;

/// Is a compaction pass under way?
pub fn compacting() -> bool {
    PASS.lock().unwrap_or_else(PoisonError::into_inner).is_some()
}

/// Compaction of the segment store, in what is left of the tick: the live records of sealed
/// segments that at most half their bytes are live in are written anew at the end of the
/// store, so that the segments empty and go (`Store::release`). Space on disk is then at most
/// about twice the live bytes (plus the active segment), whatever was trimmed or deleted.
/// Layout only, like tiering: nothing is propagated. Paused while a fork child runs: the
/// pages it would touch are copied for the child, and a segment deleted then keeps its space
/// until the child, which holds the file open, is gone.
fn compact(c: &Ctx, start: Instant) {
    if c.active_child() {
        return;
    }
    let mut guard = PASS.lock().unwrap_or_else(PoisonError::into_inner);
    if guard.is_none() {
        let recent = PASS_ENDED.lock().unwrap_or_else(PoisonError::into_inner).is_some_and(|t| t.elapsed() < PASS_EVERY);
        if recent {
            return;
        }
        let sparse = crate::tier::cold::sparse();
        if sparse.is_empty() {
            return;
        }
        let mut found = crate::ffi::timer::scan_streams(c, |s| s.cold_max().is_some().then_some(0));
        found.sort_unstable();
        found.dedup();
        *guard = Some(Pass { sparse, streams: found.into_iter().map(|(db, k, _)| (db, k)).collect(), at: 0, from: StreamId::MIN });
    }
    let Some(p) = guard.as_mut() else { return };
    while start.elapsed() < TICK_BUDGET {
        let Some((db, name)) = p.streams.get(p.at) else { break };
        let mut k = if c.select_db(*db) { Some(c.open_key_named(name, false)) } else { None };
        let Some(s) = k.as_mut().and_then(|k| k.stream_mut()) else {
            p.at += 1;
            p.from = StreamId::MIN;
            continue;
        };
        let (next, err) = s.compact_cold(p.from, &p.sparse, REWRITE_CHUNK, || start.elapsed() < TICK_BUDGET);
        match next {
            Some(n) => p.from = n,
            None => {
                p.at += 1;
                p.from = StreamId::MIN;
            }
        }
        if let Some(e) = err {
            if WRITE_ERRORS_LOGGED.fetch_add(1, Ordering::Relaxed) < WRITE_ERRORS_LOG_MAX {
                crate::ffi::log_warning(&format!("xstream: compacting {}: {e} (the record stays where it is)", crate::config::tier_dir()));
            }
            // A failed write pauses tiering and compaction alike; a record that cannot be read
            // back is left where it is (its node's reads fail as they would anyway).
            if let TierError::Io(_) = e {
                *paused_until() = Some(Instant::now() + RETRY_AFTER);
            }
            if !matches!(e, TierError::Io(_)) {
                match p.from.next() {
                    Some(n) => p.from = n,
                    None => {
                        p.at += 1;
                        p.from = StreamId::MIN;
                    }
                }
            }
            break;
        }
    }
    if p.at >= p.streams.len() {
        *guard = None;
        *PASS_ENDED.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
    }
}

/// After a write error, the step waits this long before it writes again.
const RETRY_AFTER: Duration = Duration::from_secs(1);
static PAUSED_UNTIL: Mutex<Option<Instant>> = Mutex::new(None);

fn paused_until() -> std::sync::MutexGuard<'static, Option<Instant>> {
    PAUSED_UNTIL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Paused after a write error (see [`RETRY_AFTER`])?
fn paused(now: Instant) -> bool {
    let mut p = paused_until();
    match *p {
        Some(t) if now < t => true,
        Some(_) => {
            *p = None;
            false
        }
        None => false,
    }
}

/// Logs the cold-read faults since the last tick (their count is in INFO).
fn log_faults() {
    for f in crate::tier::cold::take_faults() {
        crate::ffi::log_warning(&format!("xstream: {f}"));
    }
}

/// SWAPDB a b: the queued nodes of the two databases change places (their streams did).
pub fn swap_db(a: i32, b: i32) {
    for r in resident().iter_mut() {
        if r.db == a {
            r.db = b;
        } else if r.db == b {
            r.db = a;
        }
    }
}

/// A stream arrived (RENAME, MOVE, COPY, RESTORE, or seen at the end of a load): its sealed
/// nodes in RAM are queued.
pub fn arrived(db: i32, key: &[u8], s: &crate::stream::Stream) {
    if crate::stream::tiering() {
        queue(db, key, s.resident_sealed());
    }
}

/// The end of a load, or the settings changed: every stream's sealed nodes in RAM are queued
/// (anew: the queue is rebuilt), oldest first per stream.
pub fn requeue_all(c: &Ctx) {
    resident().clear();
    RESIDENT_BYTES.store(0, Ordering::Relaxed);
    if !crate::stream::tiering() {
        return;
    }
    let mut found = crate::ffi::timer::scan_streams(c, |s| (s.rax_keys() > 1).then_some(0));
    // (A scan may return a key twice: while the table rehashes.)
    found.sort_unstable();
    found.dedup();
    let home = c.selected_db();
    for (db, name, _) in found {
        if !c.select_db(db) {
            continue;
        }
        let k = c.open_key_named(&name, false);
        if let Some(s) = k.stream() {
            queue(db, &name, s.resident_sealed());
        }
    }
    c.select_db(home);
}

/// INFO xstream's tiering fields.
pub fn info(out: &mut Vec<(&'static str, i64)>) {
    let q = resident().len();
    out.push(("tier_resident_queued_nodes", q as i64));
    out.push(("tier_resident_queued_bytes", RESIDENT_BYTES.load(Ordering::Relaxed) as i64));
    let (st, cold) = crate::tier::cold::stats().unwrap_or_default();
    let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    out.push(("tier_disk_nodes", i(st.live_records)));
    out.push(("tier_disk_bytes", i(st.live_bytes)));
    out.push(("tier_file_bytes", i(st.file_bytes)));
    out.push(("tier_segments", i(st.segments)));
    out.push(("tier_cold_reads", i(cold.reads)));
    out.push(("tier_cold_read_us", i(cold.read_us)));
    out.push(("tier_cold_read_us_max", i(cold.read_us_max)));
    out.push(("tier_read_errors", i(cold.faults)));
    out.push(("tier_checksum_errors", i(st.checksum_errors)));
    out.push(("tier_writes", i(cold.writes)));
    out.push(("tier_write_errors", i(cold.write_faults)));
    out.push(("tier_records_moved", i(cold.moved)));
}
