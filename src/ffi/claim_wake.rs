//! Timed wake-ups of blocked `XS.READGROUP ... BLOCK ms CLAIM min-idle` readers
//! (REDIS8.md §4.5).
//!
//! Such a reader must re-run when a pending entry of one of its streams becomes
//! claimable, although no write touches the key then. When it blocks (and each
//! time it is woken without being served) the command registers its keys here with
//! the time that will happen: min-idle after the oldest delivery among the first
//! live pending entries of its streams (src/commands/read.rs). The index
//! ([`KeyTimer`] over the pure `WakeIndex`) keeps the earliest time per (db, key); ONE module timer is
//! armed for the earliest of all, and re-armed when an earlier one arrives. When it
//! fires, every due key is signalled ready (`SignalKeyAsReady` in its db) and the
//! timer re-armed for what is left. Redis then serves the readers blocked on those
//! keys before it sleeps (handleClientsBlockedOnKeys from beforeSleep): each
//! re-runs its read, and one with nothing claimable yet stays blocked and registers
//! again. Nothing scans the keys: with nothing due, the only cost is the armed
//! timer. Entries whose readers left (timeout, served by a write, disconnect) are
//! dropped when reached, at the price of one signal nobody waits for.
//!
//! Main thread only (commands, blocked-client callbacks and the timer all run
//! there); the mutexes are never contended.

use super::api;
use super::fence;
use super::timer::KeyTimer;
use redis_module::raw;
use std::os::raw::c_void;

/// The keys to signal, by due time, and the one timer.
pub static TIMER: KeyTimer = KeyTimer::new(on_timer, 0);

/// Registers `keys` of `db` to be signalled at `due_ms` (unix ms), and arms the
/// timer if that is earlier than what it is armed for. `ctx` is any live context
/// of the main thread (command, blocked-client callback, timer).
pub fn schedule<'a>(ctx: *mut raw::RedisModuleCtx, db: i32, keys: impl Iterator<Item = &'a [u8]>, due_ms: i64) {
    TIMER.schedule_many(ctx, db, keys, due_ms);
}

/// Keys registered and not yet reached (tests, XS.DEBUG).
pub fn pending() -> usize {
    TIMER.len()
}

/// While clients are paused, how often the wake-ups look again (ms).
const PAUSED_RECHECK_MS: i64 = 50;

unsafe extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    fence::guard("CLAIM wake-up timer", (), || {
        // This timer is firing: Redis removes it after the callback.
        TIMER.fired();
        // SAFETY: no arguments; plain clock read.
        let now = unsafe { api!(RedisModule_Milliseconds)() };
        if super::timer::paused() {
            // A woken reader's delivery is propagated, which may not happen while clients are
            // paused (timer.rs `acts`): look again shortly.
            TIMER.rearm(ctx, now.saturating_add(PAUSED_RECHECK_MS));
            return;
        }
        for (db, key) in TIMER.pop_due(now, usize::MAX) {
            // SAFETY: the timer's context (a temporary client of ours, main thread);
            // the key string is created and freed here; SelectDb only moves that
            // client, so the signal lands in the key's db.
            unsafe {
                if api!(RedisModule_SelectDb)(ctx, db) != raw::REDISMODULE_OK as i32 {
                    continue;
                }
                let name = api!(RedisModule_CreateString)(std::ptr::null_mut(), key.as_ptr().cast(), key.len());
                api!(RedisModule_SignalKeyAsReady)(ctx, name);
                api!(RedisModule_FreeString)(std::ptr::null_mut(), name);
            }
        }
        TIMER.rearm(ctx, i64::MIN);
    })
}
