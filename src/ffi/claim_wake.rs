//! Timed wake-ups of blocked `XS.READGROUP ... BLOCK ms CLAIM min-idle` readers
//! (REDIS8.md §4.5).
//!
//! Such a reader must re-run when a pending entry of one of its streams becomes
//! claimable, although no write touches the key then. When it blocks (and each
//! time it is woken without being served) the command registers its keys here with
//! the time that will happen: min-idle after the oldest delivery among the first
//! live pending entries of its streams (src/commands/read.rs). The index
//! ([`WakeIndex`], pure) keeps the earliest time per (db, key); ONE module timer is
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
use crate::stream::wake::WakeIndex;
use redis_module::raw;
use std::os::raw::c_void;
use std::sync::Mutex;

/// The longest the timer is armed for: a due time further away is reached by
/// re-arming (a timer period in ms must not overflow the event loop's µs clock).
const TIMER_PERIOD_MAX_MS: i64 = 600_000;

static INDEX: Mutex<Option<WakeIndex>> = Mutex::new(None);
/// The armed timer and the time (ms) it fires at.
static ARMED: Mutex<Option<(raw::RedisModuleTimerID, i64)>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn now_ms() -> i64 {
    // SAFETY: no arguments; plain clock read.
    unsafe { api!(RedisModule_Milliseconds)() }
}

/// Registers `keys` of `db` to be signalled at `due_ms` (unix ms), and arms the
/// timer if that is earlier than what it is armed for. `ctx` is any live context
/// of the main thread (command, blocked-client callback, timer).
pub fn schedule<'a>(ctx: *mut raw::RedisModuleCtx, db: i32, keys: impl Iterator<Item = &'a [u8]>, due_ms: i64) {
    let earliest = {
        let mut g = lock(&INDEX);
        let w = g.get_or_insert_with(WakeIndex::new);
        for k in keys {
            w.insert(db, k, due_ms);
        }
        w.earliest()
    };
    arm(ctx, earliest);
}

/// Keys registered and not yet reached (tests, XS.DEBUG).
pub fn pending() -> usize {
    lock(&INDEX).as_ref().map_or(0, WakeIndex::len)
}

/// Arms the timer for `earliest`, unless it is armed for that time or earlier.
fn arm(ctx: *mut raw::RedisModuleCtx, earliest: Option<i64>) {
    let Some(due) = earliest else { return };
    super::timer::arm_earliest(ctx, &mut lock(&ARMED), due, 0, TIMER_PERIOD_MAX_MS, on_timer);
}

unsafe extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    fence::guard("CLAIM wake-up timer", (), || {
        // This timer is firing: Redis removes it after the callback.
        *lock(&ARMED) = None;
        let now = now_ms();
        let (due, earliest) = {
            let mut g = lock(&INDEX);
            match g.as_mut() {
                Some(w) => (w.pop_due(now), w.earliest()),
                None => (Vec::new(), None),
            }
        };
        for (db, key) in due {
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
        arm(ctx, earliest);
    })
}
