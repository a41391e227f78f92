//! The one-timer-per-index pattern of the module's time-driven work (claim_wake.rs: blocked
//! CLAIM / ACKTIMEOUT readers; ttl_timer.rs: CONSUMERTTL; idmp_expiry.rs: IDMP expiry; age_timer.rs: MAXAGE retention): each
//! keeps an index by due time and ONE module timer armed for its earliest entry, re-armed only
//! when an earlier time comes and cleared by its callback when it fires. Nothing polls.

use super::api;
use redis_module::raw;
use std::os::raw::c_void;

/// The longest delay a module timer is armed for; a later due time re-arms when it fires. The
/// event loop reschedules a module timer as an `int` number of ms * 1000, which overflows past
/// about 2,147 s: a timer armed further ahead fires at once, again and again (100% of a core;
/// found with a MAXAGE stream with nothing to trim for an hour, `far_timers_keep_the_server_idle`).
pub const PERIOD_MAX_MS: i64 = 600_000;

/// The armed timer of an index: (timer ID, Unix ms it fires at).
pub type Armed = Option<(raw::RedisModuleTimerID, i64)>;

/// A timer callback.
pub type Callback = unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut c_void);

/// Unix time in ms.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Arms `armed` to call `cb` at `due` (Unix ms), the delay clamped to `min_ms..=max_ms` (a
/// timer far ahead is re-armed when it fires), unless it is already armed for `due` or earlier;
/// an armed later timer is stopped first.
pub fn arm_earliest(ctx: *mut raw::RedisModuleCtx, armed: &mut Armed, due: i64, min_ms: i64, max_ms: i64, cb: Callback) {
    if let Some((id, at)) = *armed {
        if at <= due {
            return;
        }
        // SAFETY: `id` is a timer of this module that has not fired (its callback clears
        // `armed`); its data is null, nothing to free.
        unsafe { api!(RedisModule_StopTimer)(ctx, id, std::ptr::null_mut()) };
        *armed = None;
    }
    let now = now_ms();
    let period = due.saturating_sub(now).clamp(min_ms, max_ms.min(PERIOD_MAX_MS));
    // SAFETY: a live main-thread context; the callback is a plain function that lives as long
    // as the module; no data.
    let id = unsafe { api!(RedisModule_CreateTimer)(ctx, period, Some(cb), std::ptr::null_mut()) };
    *armed = Some((id, now + period));
}
