//! `INFO xstream`: the module's section of INFO (RegisterInfoFunc through the redis-module
//! macro's `info:` hook).
//!
//! Nothing here walks the keyspace. Totals are running sums kept by the places where a stream
//! value is born, changed or freed:
//! - born: `rdb_load` (RDB, full sync, RESTORE, DEBUG RELOAD), `copy`, `Key::create_stream` /
//!   `replace_with_stream` (XS.ADD on a missing key, XS.IMPORT, adoption) -> [`born`];
//! - changed: a command that took `Key::stream_mut` is accounted when its key closes
//!   (`Key`'s Drop) -> [`account`], O(groups the write touched) (src/stream/census.rs);
//! - freed: the type's `free` callback (DEL, overwrite, expiry, FLUSHALL, also from the lazyfree
//!   thread: everything here is atomic) -> [`freed`].
//!
//! Each stream remembers what it was last accounted as (`Stream::accounted`), so a value freed
//! after changes nobody accounted removes exactly what it had added.
//! `bytes` is what the module has allocated through RedisModule_Alloc and not freed (streams and
//! the module's own small state), counted by the global allocator (src/ffi/alloc.rs).
//! Event counters are bumped by the commands ([`bump`]).

use super::ctx::cstring;
use crate::stream::census::{bucket_floor, Census, Hist, HistCtx, BUCKETS, LAG_UNKNOWN};
use crate::stream::Stream;
use redis_module::raw;
use std::os::raw::c_int;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};

struct Totals {
    streams: AtomicI64,
    entries: AtomicI64,
    nodes: AtomicI64,
    groups: AtomicI64,
    consumers: AtomicI64,
    pending: AtomicI64,
}

static TOTALS: Totals = Totals {
    streams: AtomicI64::new(0),
    entries: AtomicI64::new(0),
    nodes: AtomicI64::new(0),
    groups: AtomicI64::new(0),
    consumers: AtomicI64::new(0),
    pending: AtomicI64::new(0),
};

/// Groups by PEL size and by lag, in log-2 buckets (src/stream/census.rs); the lag's last
/// bucket is "unknown". Two copies summed by INFO: `HIST` moved by the main thread alone (writes
/// and loads: a plain load and store, no locked instruction on the write path), `HIST_FREED` by
/// frees, which the lazyfree thread may run.
static HIST: [[AtomicI64; BUCKETS + 1]; 2] = [const { [const { AtomicI64::new(0) }; BUCKETS + 1] }; 2];
static HIST_FREED: [[AtomicI64; BUCKETS + 1]; 2] = [const { [const { AtomicI64::new(0) }; BUCKETS + 1] }; 2];

/// The histograms' epoch (src/stream/census.rs `HistCtx`): 0 while `xstream.group-stats` is
/// off; each switch on takes a new one, and every stream is accounted again once the current
/// command is over ([`rescan`], from a timer of 0 ms).
static EPOCH: AtomicU32 = AtomicU32::new(0);
static LAST_EPOCH: AtomicU32 = AtomicU32::new(0);
static RESCAN: AtomicBool = AtomicBool::new(false);

/// `xstream.group-stats` was set (CONFIG SET, or at load): on, a new epoch from zero totals and
/// a rescan of the keyspace to come; off, the totals dropped and nothing kept any more.
pub fn group_stats_changed(on: bool) {
    if on == (EPOCH.load(Relaxed) != 0) {
        return;
    }
    for a in HIST.iter().chain(&HIST_FREED).flatten() {
        a.store(0, Relaxed);
    }
    if on {
        let e = LAST_EPOCH.load(Relaxed).wrapping_add(1).max(1);
        LAST_EPOCH.store(e, Relaxed);
        EPOCH.store(e, Relaxed);
        RESCAN.store(true, Relaxed);
        super::blocking::arm_soon();
    } else {
        EPOCH.store(0, Relaxed);
    }
}

/// `xstream.compat` was set: lags may follow other rules now (8.0's, Valkey 8.1's), so the
/// histograms, when kept, start over in a new epoch and every stream is counted again.
pub fn lag_rules_changed() {
    if EPOCH.load(Relaxed) != 0 {
        group_stats_changed(false);
        group_stats_changed(true);
    }
}

/// A rescan is waiting ([`rescan`]).
pub fn rescan_due() -> bool {
    RESCAN.load(Relaxed)
}

/// Once the command that asked is over (src/ffi/blocking.rs `run_soon`): after
/// `xstream.group-stats` was switched on, every stream of ours in every database is accounted in
/// the new epoch (O(keys) once, on the main thread, as the switch asked for).
pub fn rescan(c: &super::ctx::Ctx) {
    if RESCAN.swap(false, Relaxed) && EPOCH.load(Relaxed) != 0 {
        super::timer::scan_streams(c, |s| {
            account(s);
            None
        });
    }
}

/// The histograms' context for an update: None while they are off.
fn hist_ctx(emit: crate::stream::census::HistMoves<'_>) -> Option<HistCtx<'_>> {
    match EPOCH.load(Relaxed) {
        0 => None,
        epoch => Some(HistCtx { epoch, rules: crate::config::lag_rules(), emit }),
    }
}

/// A group entering (+1) or leaving (-1) a bucket, on the main thread.
fn hist_move(h: Hist, b: u8, delta: i64) {
    if let Some(a) = HIST[h as usize].get(b as usize) {
        a.store(a.load(Relaxed) + delta, Relaxed);
    }
}

/// A freed group leaving its bucket (any thread).
fn hist_freed(h: Hist, b: u8, delta: i64) {
    if let Some(a) = HIST_FREED[h as usize].get(b as usize) {
        a.fetch_add(delta, Relaxed);
    }
}

/// `0=3,1=1,4=2,unknown=1`: the non-empty buckets by their smallest value.
fn hist_text(h: Hist) -> String {
    let mut out = String::new();
    for (b, (a, f)) in HIST[h as usize].iter().zip(&HIST_FREED[h as usize]).enumerate() {
        let n = a.load(Relaxed) + f.load(Relaxed);
        if n > 0 {
            if !out.is_empty() {
                out.push(',');
            }
            if b == LAG_UNKNOWN as usize {
                out.push_str(&format!("unknown={n}"));
            } else {
                out.push_str(&format!("{}={n}", bucket_floor(b as u8)));
            }
        }
    }
    out
}

/// Bytes allocated by the module and not yet freed (src/ffi/alloc.rs).
pub static BYTES: AtomicI64 = AtomicI64::new(0);

fn apply(c: &Census, sign: i64) {
    TOTALS.entries.fetch_add(sign * c.entries as i64, Relaxed);
    TOTALS.nodes.fetch_add(sign * c.nodes as i64, Relaxed);
    TOTALS.groups.fetch_add(sign * c.groups as i64, Relaxed);
    TOTALS.consumers.fetch_add(sign * c.consumers as i64, Relaxed);
    TOTALS.pending.fetch_add(sign * c.pending as i64, Relaxed);
}

/// A stream value enters the keyspace (or a loader's hands).
pub fn born(s: &mut Stream) {
    let now = Census::reset(s, hist_ctx(&mut hist_move));
    TOTALS.streams.fetch_add(1, Relaxed);
    apply(&now, 1);
}

/// A live stream after a write: the totals follow its new census (one atomic add per field
/// that changed; usually one or two).
pub fn account(s: &mut Stream) {
    let (was, now) = Census::update(s, hist_ctx(&mut hist_move));
    if now != was {
        let d = |a: &AtomicI64, new: u64, old: u64| {
            if new != old {
                a.fetch_add(new as i64 - old as i64, Relaxed);
            }
        };
        d(&TOTALS.entries, now.entries, was.entries);
        d(&TOTALS.nodes, now.nodes, was.nodes);
        d(&TOTALS.groups, now.groups, was.groups);
        d(&TOTALS.consumers, now.consumers, was.consumers);
        d(&TOTALS.pending, now.pending, was.pending);
    }
}

/// A stream value is freed.
pub fn freed(s: &Stream) {
    TOTALS.streams.fetch_sub(1, Relaxed);
    apply(&s.accounted, -1);
    Census::unaccount(s, EPOCH.load(Relaxed), &mut hist_freed);
}

/// Counters since the module was loaded.
pub struct Events {
    pub entries_added: AtomicU64,
    pub entries_deleted: AtomicU64,
    pub entries_trimmed: AtomicU64,
    /// Retention by age (MAXAGE): entries trimmed for their age (also counted in entries_trimmed).
    pub entries_expired: AtomicU64,
    pub entries_delivered: AtomicU64,
    pub entries_redelivered: AtomicU64,
    pub entries_acked: AtomicU64,
    pub entries_claimed: AtomicU64,
    pub entries_nacked: AtomicU64,
    pub idmp_duplicates: AtomicU64,
    /// Queue policies (issue 16): entries dead-lettered (or dropped) by MAXDELIVERIES,
    /// XS.NACK FATAL or XS.GROUP DEADLETTER; entries redelivered by ACKTIMEOUT (or
    /// released by a consumer's expiry) to `>` readers; consumers expired by CONSUMERTTL.
    pub entries_dead_lettered: AtomicU64,
    pub entries_redriven: AtomicU64,
    pub entries_timed_out: AtomicU64,
    pub consumers_expired: AtomicU64,
    /// Delayed delivery (issue 17): entries added with a due time to come; scheduled
    /// entries served by `>` reads once due.
    pub entries_delayed: AtomicU64,
    pub entries_scheduled_delivered: AtomicU64,
    pub streams_adopted: AtomicU64,
    pub streams_imported: AtomicU64,
    pub streams_exported: AtomicU64,
    pub restore_rejected: AtomicU64,
    /// Compaction (xstream.compact-deleted, XS.COMPACT): nodes rewritten, merged away, bytes freed.
    pub nodes_compacted: AtomicU64,
    pub nodes_merged: AtomicU64,
    pub compacted_bytes_freed: AtomicU64,
    /// The keyspace log (issue 33): entries appended; notifications seen and not logged (class,
    /// pattern, a key of a slot this node does not own); notifications lost (the log key holds
    /// another type or is in a slot not owned, clients paused, the server refused the job).
    pub keyspace_log_appended: AtomicU64,
    pub keyspace_log_dropped: AtomicU64,
    pub keyspace_log_errors: AtomicU64,
    /// Blocked readers: reads run again for a signalled key (a write, or a time-driven
    /// wake-up meant for them); readers a time-driven wake-up passed over without running their
    /// read (it was meant for the first reader of another wait, src/ffi/blocking.rs).
    pub blocked_reads_rerun: AtomicU64,
    pub blocked_reads_skipped: AtomicU64,
}

pub static EVENTS: Events = Events {
    entries_added: AtomicU64::new(0),
    entries_deleted: AtomicU64::new(0),
    entries_trimmed: AtomicU64::new(0),
    entries_expired: AtomicU64::new(0),
    entries_delivered: AtomicU64::new(0),
    entries_redelivered: AtomicU64::new(0),
    entries_acked: AtomicU64::new(0),
    entries_claimed: AtomicU64::new(0),
    entries_nacked: AtomicU64::new(0),
    idmp_duplicates: AtomicU64::new(0),
    entries_dead_lettered: AtomicU64::new(0),
    entries_redriven: AtomicU64::new(0),
    entries_timed_out: AtomicU64::new(0),
    consumers_expired: AtomicU64::new(0),
    entries_delayed: AtomicU64::new(0),
    entries_scheduled_delivered: AtomicU64::new(0),
    streams_adopted: AtomicU64::new(0),
    streams_imported: AtomicU64::new(0),
    streams_exported: AtomicU64::new(0),
    restore_rejected: AtomicU64::new(0),
    nodes_compacted: AtomicU64::new(0),
    nodes_merged: AtomicU64::new(0),
    compacted_bytes_freed: AtomicU64::new(0),
    keyspace_log_appended: AtomicU64::new(0),
    keyspace_log_dropped: AtomicU64::new(0),
    keyspace_log_errors: AtomicU64::new(0),
    blocked_reads_rerun: AtomicU64::new(0),
    blocked_reads_skipped: AtomicU64::new(0),
};

/// `counter += n`.
pub fn bump(counter: &AtomicU64, n: u64) {
    if n > 0 {
        counter.fetch_add(n, Relaxed);
    }
}

/// Registers the INFO callback (OnLoad).
pub fn register(ctx: &redis_module::Context) -> Result<(), String> {
    // SAFETY: called from OnLoad with its context; the callback is a plain extern "C" fn.
    let rc = unsafe { super::api!(RedisModule_RegisterInfoFunc)(ctx.ctx, Some(info_callback)) };
    if rc == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err("cannot register the INFO section".into())
    }
}

/// The `xstream` section of INFO (`INFO xstream`, `INFO modules`... as Redis selects it).
unsafe extern "C" fn info_callback(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    super::fence::guard("info", (), || {
        let v = crate::MODULE_VERSION;
        let t = |a: &AtomicI64| a.load(Relaxed).max(0);
        let e = |a: &AtomicU64| i64::try_from(a.load(Relaxed)).unwrap_or(i64::MAX);
        let texts = [
            ("version", format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)),
            ("host", super::host::summary()),
            ("compat", crate::config::compat_name().to_string()),
            ("reply_level", crate::config::compat().name().to_string()),
            ("takeover", if crate::config::TAKEOVER.load(Relaxed) { "yes" } else { "no" }.to_string()),
        ];
        let ints: &[(&str, i64)] = &[
            ("streams", t(&TOTALS.streams)),
            ("entries", t(&TOTALS.entries)),
            ("nodes", t(&TOTALS.nodes)),
            ("groups", t(&TOTALS.groups)),
            ("consumers", t(&TOTALS.consumers)),
            ("pending", t(&TOTALS.pending)),
            ("bytes", t(&BYTES)),
            ("entries_added", e(&EVENTS.entries_added)),
            ("entries_deleted", e(&EVENTS.entries_deleted)),
            ("entries_trimmed", e(&EVENTS.entries_trimmed)),
            ("entries_expired", e(&EVENTS.entries_expired)),
            ("entries_delivered", e(&EVENTS.entries_delivered)),
            ("entries_redelivered", e(&EVENTS.entries_redelivered)),
            ("entries_acked", e(&EVENTS.entries_acked)),
            ("entries_claimed", e(&EVENTS.entries_claimed)),
            ("entries_nacked", e(&EVENTS.entries_nacked)),
            ("idmp_duplicates", e(&EVENTS.idmp_duplicates)),
            ("entries_dead_lettered", e(&EVENTS.entries_dead_lettered)),
            ("entries_redriven", e(&EVENTS.entries_redriven)),
            ("entries_timed_out", e(&EVENTS.entries_timed_out)),
            ("consumers_expired", e(&EVENTS.consumers_expired)),
            ("entries_delayed", e(&EVENTS.entries_delayed)),
            ("entries_scheduled_delivered", e(&EVENTS.entries_scheduled_delivered)),
            ("streams_adopted", e(&EVENTS.streams_adopted)),
            ("streams_imported", e(&EVENTS.streams_imported)),
            ("streams_exported", e(&EVENTS.streams_exported)),
            ("restore_rejected", e(&EVENTS.restore_rejected)),
            ("nodes_compacted", e(&EVENTS.nodes_compacted)),
            ("nodes_merged", e(&EVENTS.nodes_merged)),
            ("compacted_bytes_freed", e(&EVENTS.compacted_bytes_freed)),
            ("keyspace_log_appended", e(&EVENTS.keyspace_log_appended)),
            ("keyspace_log_dropped", e(&EVENTS.keyspace_log_dropped)),
            ("keyspace_log_errors", e(&EVENTS.keyspace_log_errors)),
            ("blocked_reads_rerun", e(&EVENTS.blocked_reads_rerun)),
            ("blocked_reads_skipped", e(&EVENTS.blocked_reads_skipped)),
        ];
        // The time-driven jobs' fields (compression_queued_keys), last.
        let mut jobs = Vec::new();
        super::timer::info(&mut jobs);
        // SAFETY: ctx is the INFO context Redis passed to this callback; a NULL section name
        // is the module's own section (`# xstream`).
        unsafe { super::api!(RedisModule_InfoAddSection)(ctx, ptr::null()) };
        for (name, value) in &texts {
            let (n, v) = (cstring(name), cstring(value));
            // SAFETY: as above; the strings outlive the call (Redis copies them).
            unsafe { super::api!(RedisModule_InfoAddFieldCString)(ctx, n.as_ptr(), v.as_ptr()) };
        }
        for &(name, value) in ints.iter().chain(&jobs) {
            let n = cstring(name);
            // SAFETY: as above.
            unsafe { super::api!(RedisModule_InfoAddFieldLongLong)(ctx, n.as_ptr(), value) };
        }
        let hists: &[(&str, Hist)] = if EPOCH.load(Relaxed) != 0 { &[("groups_by_pel_size", Hist::Pel), ("groups_by_lag", Hist::Lag)] } else { &[] };
        for &(name, h) in hists {
            let (n, v) = (cstring(name), cstring(&hist_text(h)));
            // SAFETY: as above.
            unsafe { super::api!(RedisModule_InfoAddFieldCString)(ctx, n.as_ptr(), v.as_ptr()) };
        }
    })
}
