//! The one-timer-per-index pattern of the module's time-driven work (claim_wake.rs: blocked
//! CLAIM / ACKTIMEOUT readers; ttl_timer.rs: CONSUMERTTL; idmp_expiry.rs: IDMP expiry; age_timer.rs: MAXAGE retention): each
//! keeps an index by due time and ONE module timer armed for its earliest entry, re-armed only
//! when an earlier time comes and cleared by its callback when it fires. Nothing polls.

use super::api;
use super::ctx::Ctx;
use crate::stream::wake::{DbKey, WakeIndex};
use redis_module::raw;
use std::os::raw::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

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
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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

/// An index of keys by due time with its one timer: the shape all four time-driven parts share.
/// The callback takes [`KeyTimer::fired`] first, then [`KeyTimer::pop_due`] (bounded), does its
/// work, puts back what is due again ([`KeyTimer::put`]) and re-arms ([`KeyTimer::rearm`]).
/// Every instance is listed in [`ALL`] so that SWAPDB moves its keys ([`swap_db`]).
pub struct KeyTimer {
    state: Mutex<(Option<WakeIndex>, Armed)>,
    cb: Callback,
    /// The shortest delay the timer is armed with (ms).
    min_ms: i64,
}

impl KeyTimer {
    pub const fn new(cb: Callback, min_ms: i64) -> Self {
        Self { state: Mutex::new((None, None)), cb, min_ms }
    }

    fn lock(&self) -> MutexGuard<'_, (Option<WakeIndex>, Armed)> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `key` of `db` for `due_ms` (unless it is for that time or earlier) and arms
    /// the timer if that is the earliest.
    pub fn schedule(&self, ctx: *mut raw::RedisModuleCtx, db: i32, key: &[u8], due_ms: i64) {
        self.schedule_many(ctx, db, std::iter::once(key), due_ms);
    }

    /// [`KeyTimer::schedule`] for key argument `key_i` of the running command `c`, in its DB.
    pub fn schedule_arg(&self, c: &Ctx, key_i: usize, due_ms: u64) {
        // SAFETY: valid context of the running command.
        let db = unsafe { api!(RedisModule_GetSelectedDb)(c.raw()) };
        self.schedule(c.raw(), db, c.arg(key_i), i64::try_from(due_ms).unwrap_or(i64::MAX));
    }

    /// [`KeyTimer::schedule`] for several keys of one database.
    pub fn schedule_many<'a>(&self, ctx: *mut raw::RedisModuleCtx, db: i32, keys: impl Iterator<Item = &'a [u8]>, due_ms: i64) {
        let mut g = self.lock();
        let w = g.0.get_or_insert_with(WakeIndex::new);
        for k in keys {
            w.insert(db, k, due_ms);
        }
        self.arm_locked(ctx, &mut g, i64::MIN);
    }

    /// Registers without arming (rdb_load has no context that may create timers); the
    /// loading-ended event calls [`KeyTimer::rearm`].
    pub fn put(&self, db: i32, key: &[u8], due_ms: i64) {
        self.lock().0.get_or_insert_with(WakeIndex::new).insert(db, key, due_ms);
    }

    /// The callback runs: the timer it was is gone.
    pub fn fired(&self) {
        self.lock().1 = None;
    }

    /// Takes out at most `max` keys due at `now_ms`, earliest first.
    pub fn pop_due(&self, now_ms: i64, max: usize) -> Vec<DbKey> {
        self.lock().0.as_mut().map(|w| w.pop_due_max(now_ms, max)).unwrap_or_default()
    }

    /// Arms the timer for the earliest key, not before `not_before` (Unix ms).
    pub fn rearm(&self, ctx: *mut raw::RedisModuleCtx, not_before: i64) {
        let mut g = self.lock();
        self.arm_locked(ctx, &mut g, not_before);
    }

    fn arm_locked(&self, ctx: *mut raw::RedisModuleCtx, g: &mut (Option<WakeIndex>, Armed), not_before: i64) {
        if let Some(e) = g.0.as_ref().and_then(WakeIndex::earliest) {
            arm_earliest(ctx, &mut g.1, e.max(not_before), self.min_ms, PERIOD_MAX_MS, self.cb);
        }
    }

    /// Keys registered and not yet reached (tests, XS.DEBUG).
    pub fn len(&self) -> usize {
        self.lock().0.as_ref().map_or(0, WakeIndex::len)
    }

    fn swap_db(&self, a: i32, b: i32) {
        if let Some(w) = self.lock().0.as_mut() {
            w.swap_db(a, b);
        }
    }
}

/// Every key index, for SWAPDB.
static ALL: [&KeyTimer; 4] = [&super::claim_wake::TIMER, &super::ttl_timer::TIMER, &super::idmp_expiry::TIMER, &super::age_timer::TIMER];

/// SWAPDB a b (server event): the indexed keys of the two databases change places, so the
/// streams keep their wake-ups, expiries and ages under their new database.
pub fn swap_db(a: i32, b: i32) {
    for t in ALL {
        t.swap_db(a, b);
    }
}

/// Whether the server acts on time-driven work: a primary that is not loading, with clients
/// not paused. A replica (or a loading server) leaves its clock alone and waits for what its
/// primary propagates. While clients are paused (`CLIENT PAUSE`, the FAILOVER and Cluster
/// manual failover pauses) nothing may be propagated: Redis asserts it in
/// `propagatePendingCommands` and aborts, as a timer's trim, expiry or wake-up would make it
/// (found with a MAXAGE stream, a replica and `CLIENT PAUSE 3000 WRITE`). Redis pauses its own
/// key expiry then; the module's time-driven work waits the same way, and a failover that
/// follows leaves it to the new primary.
pub fn acts(ctx: *mut raw::RedisModuleCtx) -> bool {
    // SAFETY: a live context of the main thread.
    let f = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    f & raw::REDISMODULE_CTX_FLAGS_MASTER != 0 && f & raw::REDISMODULE_CTX_FLAGS_LOADING == 0 && !paused()
}

/// Clients are paused (RM_AvoidReplicaTraffic: `CLIENT PAUSE` WRITE or ALL, a FAILOVER or a
/// Cluster manual failover in progress): nothing may be propagated now.
pub fn paused() -> bool {
    // SAFETY: no arguments; reads the server's pause state (main thread).
    unsafe { api!(RedisModule_AvoidReplicaTraffic)() != 0 }
}

/// Runs `f` with a command context over `parts` (strings created here, freed after `f`), for a
/// timer that executes one of our commands' paths (the context's DB is the selected one).
pub fn with_command<R>(ctx: *mut raw::RedisModuleCtx, parts: &[&[u8]], f: impl FnOnce(&Ctx) -> R) -> R {
    let mut argv: Vec<*mut raw::RedisModuleString> = parts
        .iter()
        // SAFETY: new strings from valid buffers (NULL ctx: ours), freed below.
        .map(|b| unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), b.as_ptr().cast(), b.len()) })
        .collect();
    let r = {
        // SAFETY: the caller's context is valid during its callback; `argv` holds live strings
        // that outlive `c` (this block).
        let c = unsafe { Ctx::new(ctx, argv.as_mut_ptr(), argv.len() as c_int) };
        f(&c)
    };
    for s in argv.drain(..) {
        // SAFETY: created above with a NULL ctx; Redis took its own references if it kept any.
        unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), s) };
    }
    r
}

/// Every stream of ours in every database for which `f` answers a due time (`f` may update
/// the stream's own marks): (db, key, due). For the end of a load; the context's DB is restored.
pub fn scan_streams(ctx: *mut raw::RedisModuleCtx, mut f: impl FnMut(&mut crate::stream::Stream) -> Option<i64>) -> Vec<(i32, Vec<u8>, i64)> {
    type Found<'a> = (Vec<(Vec<u8>, i64)>, &'a mut dyn FnMut(&mut crate::stream::Stream) -> Option<i64>);
    unsafe extern "C" fn collect(
        _ctx: *mut raw::RedisModuleCtx,
        keyname: *mut raw::RedisModuleString,
        key: *mut raw::RedisModuleKey,
        data: *mut c_void,
    ) {
        super::fence::guard("key scan", (), || {
            // SAFETY: the pair passed by scan_streams, alive during RM_Scan.
            let Some((found, f)) = (unsafe { data.cast::<Found>().as_mut() }) else { return };
            if key.is_null() {
                return;
            }
            // SAFETY: a key handle valid during the callback.
            let ours = unsafe { api!(RedisModule_KeyType)(key) } as isize == raw::REDISMODULE_KEYTYPE_MODULE
                // SAFETY: as above.
                && unsafe { api!(RedisModule_ModuleTypeGetType)(key) } == super::types::stream_type();
            if !ours {
                return;
            }
            // SAFETY: our type's values are Box<Stream> pointers, not borrowed elsewhere during
            // the callback.
            let Some(s) = (unsafe { api!(RedisModule_ModuleTypeGetValue)(key).cast::<crate::stream::Stream>().as_mut() }) else { return };
            if let Some(due) = f(s) {
                // SAFETY: the key name is valid during the callback; copied.
                found.push((unsafe { super::ctx::string_bytes(keyname) }.to_vec(), due));
            }
        })
    }
    let mut out = Vec::new();
    // SAFETY: the caller's context has a temporary client whose DB we select and restore.
    let home = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
    for db in 0.. {
        // SAFETY: as above; SelectDb fails past the last DB.
        if unsafe { api!(RedisModule_SelectDb)(ctx, db) } != raw::REDISMODULE_OK as c_int {
            break;
        }
        // SAFETY: a cursor owned here, destroyed below.
        let cursor = unsafe { api!(RedisModule_ScanCursorCreate)() };
        if cursor.is_null() {
            continue;
        }
        let mut data: Found = (Vec::new(), &mut f);
        let p: *mut Found = &mut data;
        // SAFETY: valid context and cursor; the callback runs inside RM_Scan with `p`.
        while unsafe { api!(RedisModule_Scan)(ctx, cursor, Some(collect), p.cast()) } != 0 {}
        // SAFETY: created above.
        unsafe { api!(RedisModule_ScanCursorDestroy)(cursor) };
        out.extend(data.0.into_iter().map(|(k, due)| (db, k, due)));
    }
    // SAFETY: as above; `home` was valid.
    unsafe { api!(RedisModule_SelectDb)(ctx, home) };
    out
}
