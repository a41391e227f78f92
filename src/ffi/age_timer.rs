//! Time-driven retention by age (issue 17, docs/retention.md): trims streams that
//! carry a MAXAGE and that nobody writes to (XS.ADD trims the streams it writes).
//!
//! The shape of src/ffi/idmp_expiry.rs: an index `(due_ms, db, key)` with one module
//! timer armed for the earliest due time; nothing scans all keys per tick. A stream is
//! indexed for the time its oldest entry (EXACT) or its first node (whole nodes) ages
//! out ([`crate::stream::Stream::age_due_ms`]): when XS.CFGSET sets a MAXAGE, when
//! XS.ADD writes to a retained stream not indexed yet, when a key arrives by RENAME /
//! MOVE / COPY / RESTORE (keyspace events, through idmp_expiry's subscription), and at
//! the end of a load that brought retained streams. A stream with nothing left to age
//! (empty) leaves the index until it is written again.
//!
//! Only a primary acts (a replica re-arms and waits); the work is bounded per tick
//! (KEYS_PER_TICK keys, ENTRIES_PER_TICK entries) and each pass that removed entries
//! is propagated as `XS.TRIM key MINID = <id>` (exact: the same entries go on any
//! node layout).

use super::api;
use super::ctx::{Arg, Ctx, KeyKind};
use super::fence;
use super::timer::KeyTimer;
use redis_module::raw;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

/// Keys visited per timer tick at most.
const KEYS_PER_TICK: usize = 64;
/// Entries removed per tick at most (spread over its keys; whole nodes).
const ENTRIES_PER_TICK: i64 = 10_000;
/// How soon a tick that stopped on its budget runs again (ms).
const CONTINUE_MS: i64 = 1;
/// How often a replica (or a loading server) looks again whether it became primary (ms).
const REPLICA_RECHECK_MS: i64 = 1000;

/// The retained streams, by the time something in them ages out.
pub static TIMER: KeyTimer = KeyTimer::new(tick, 1);

/// A load brought streams with a MAXAGE (set by rdb_load, read at the end of loading).
pub static LOADED_RETAINED: AtomicBool = AtomicBool::new(false);

fn now_ms() -> i64 {
    // SAFETY: no arguments; plain clock read.
    unsafe { api!(RedisModule_Milliseconds)() }
}

/// Key argument `key_i` of `c` holds a retained stream with something to age at `due_ms`.
pub fn register(c: &Ctx, key_i: usize, due_ms: u64) {
    TIMER.schedule_arg(c, key_i, due_ms);
}

fn register_raw(ctx: *mut raw::RedisModuleCtx, db: i32, key: &[u8], due_ms: u64) {
    TIMER.schedule(ctx, db, key, i64::try_from(due_ms).unwrap_or(i64::MAX));
}

/// XS.ADD wrote to a retained stream (key argument `key_i`): indexed unless it is.
pub fn note_write(c: &Ctx, key_i: usize, s: &mut crate::stream::Stream) {
    let Some(a) = s.max_age.as_ref() else { return };
    if a.indexed_due_ms != 0 {
        return;
    }
    if let Some(due) = s.age_due_ms() {
        register(c, key_i, due);
        if let Some(a) = s.max_age.as_mut() {
            a.indexed_due_ms = due;
        }
    }
}

unsafe extern "C" fn tick(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    fence::guard("retention timer", (), || {
        TIMER.fired();
        let now = now_ms();
        if !super::timer::acts(ctx) {
            TIMER.rearm(ctx, now + REPLICA_RECHECK_MS);
            return;
        }
        // SAFETY: the timer's context has a temporary client whose DB we select.
        let home = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
        let mut budget = ENTRIES_PER_TICK;
        for _ in 0..KEYS_PER_TICK {
            if budget <= 0 {
                break;
            }
            let Some((db, key)) = TIMER.pop_due(now, 1).pop() else { break };
            // SAFETY: as above; a DB that no longer exists fails and the entry is dropped.
            if unsafe { api!(RedisModule_SelectDb)(ctx, db) } != raw::REDISMODULE_OK as c_int {
                continue;
            }
            let (removed, next) = super::timer::with_command(ctx, &[b"XS.TRIM", &key], |c: &Ctx| age_key(c, now.max(0) as u64, budget));
            budget = budget.saturating_sub(removed.max(1) as i64);
            if let Some(due) = next {
                TIMER.put(db, &key, i64::try_from(due).unwrap_or(i64::MAX));
            }
        }
        // SAFETY: as above; `home` was valid.
        unsafe { api!(RedisModule_SelectDb)(ctx, home) };
        TIMER.rearm(ctx, now + CONTINUE_MS);
    })
}

fn age_key(c: &Ctx, now: u64, budget: i64) -> (u64, Option<u64>) {
    let mut key = c.key(1, true);
    if key.kind() != KeyKind::Stream {
        return (0, None);
    }
    let Some(s) = key.stream_mut() else { return (0, None) };
    if s.max_age.is_none() {
        return (0, None);
    }
    let Some((t, mut done)) = s.trim_aged(now, budget.max(1)) else { return (0, None) };
    if done.deleted == 0 && s.age_due_ms().is_some_and(|d| d <= now) {
        // A first node larger than the budget: taken whole rather than never.
        if let Some((_, d)) = s.trim_aged(now, 0) {
            done = d;
        }
    }
    let limited = s.age_due_ms().is_some_and(|d| d <= now);
    if done.deleted > 0 {
        let th = if t.approx || limited {
            crate::commands::add::exact_threshold(s, &t)
        } else {
            match t.strategy {
                crate::stream::TrimStrategy::MinId(id) => id.to_bytes(),
                crate::stream::TrimStrategy::MaxLen(_) => crate::commands::add::exact_threshold(s, &t),
            }
        };
        c.replicate(c"XS.TRIM", &[Arg::Orig(1), Arg::New(b"MINID"), Arg::New(b"="), Arg::New(&th)]);
        c.notify(c"xtrim", 1);
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_trimmed, done.deleted);
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_expired, done.deleted);
        c.signal_modified(1);
        let first = s.first_id;
        crate::commands::compact_touched(s, &[first]);
    }
    let next = if limited { Some(now) } else { s.age_due_ms() };
    if let Some(a) = s.max_age.as_mut() {
        a.indexed_due_ms = next.unwrap_or(0);
    }
    (done.deleted, next)
}

/// A key arrived under a new name (RENAME / MOVE / COPY / RESTORE) holding a retained
/// stream due at `due_ms` (from idmp_expiry's keyspace event handler).
pub fn register_arrived(ctx: *mut raw::RedisModuleCtx, db: i32, name: &[u8], due_ms: u64) {
    register_raw(ctx, db, name, due_ms);
}

/// End of a load: indexes every retained stream, once, when the load brought some.
pub fn loading_ended(ctx: *mut raw::RedisModuleCtx) {
    if !LOADED_RETAINED.swap(false, Ordering::Relaxed) {
        return;
    }
    let found = super::timer::scan_streams(ctx, |s| {
        let due = s.age_due_ms()?;
        if let Some(a) = s.max_age.as_mut() {
            a.indexed_due_ms = due;
        }
        Some(i64::try_from(due).unwrap_or(i64::MAX))
    });
    for (db, name, due) in found {
        TIMER.schedule(ctx, db, &name, due);
    }
}
