//! Time-driven work, the mechanism: indexes by due time, each with ONE module timer armed for
//! its earliest entry, re-armed only when an earlier time comes and cleared when it fires.
//! Nothing polls.
//!
//! The work itself is not here. Whoever needs it implements [`Job`] (src/jobs) and binds it to
//! an index ([`KeyTimer::bind`], [`KeyQueue::bind`]) at load; this file calls the job when its
//! timer fires ([`Job::tick`]), when a stream of ours arrives under a new name (RENAME, MOVE,
//! COPY, RESTORE: [`arrived`], from the keyspace subscription in keyspace.rs), when a load ends
//! ([`loading_ended`]) and for each stream `rdb_load` builds ([`rdb_value`]). It never names a
//! job, a command or a write: a new timer is a new `impl Job` and one `bind` call.
//!
//! Main thread only (commands, callbacks and timers all run there): the mutexes are never
//! contended.

use super::api;
use super::ctx::Ctx;
use crate::stream::wake::{DbKey, WakeIndex};
use crate::stream::Stream;
use redis_module::raw;
use std::collections::{BTreeSet, VecDeque};
use std::os::raw::c_void;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

/// The longest delay a module timer is armed for; a later due time re-arms when it fires. The
/// event loop reschedules a module timer as an `int` number of ms * 1000, which overflows past
/// about 2,147 s: a timer armed further ahead fires at once, again and again (100% of a core;
/// found with a MAXAGE stream with nothing to trim for an hour, `far_timers_keep_the_server_idle`).
pub const PERIOD_MAX_MS: i64 = 600_000;

/// Time-driven work over an index of keys, implemented above ffi (src/jobs). Every method but
/// [`Job::tick`] has a default that does nothing.
pub trait Job: Sync {
    /// The job's name in the panic fence's log line.
    fn name(&self) -> &'static str;

    /// Its timer fired (the index knows the timer is gone): do what is due, bounded, and
    /// re-arm through the index.
    fn tick(&self, c: &Ctx);

    /// A stream of ours arrived under the name `key` of `db` (RENAME, MOVE, COPY, RESTORE).
    fn arrived(&self, _c: &Ctx, _db: i32, _key: &[u8], _s: &mut Stream) {}

    /// A load (RDB, AOF, full sync) ended.
    fn loading_ended(&self, _c: &Ctx) {}

    /// `rdb_load` built `s` (an RDB, a full sync, RESTORE), named `at` (db, key) when the
    /// server tells the loader. No context: nothing may be armed here.
    fn loaded_value(&self, _at: Option<(i32, &[u8])>, _s: &Stream) {}

    /// SWAPDB a b: what the job keeps by database changes places (its key indexes and
    /// queues bound here do already).
    fn swapped_db(&self, _a: i32, _b: i32) {}

    /// Fields of `INFO xstream` the job reports.
    fn info(&self, _out: &mut Vec<(&'static str, i64)>) {}
}

/// Every bound job, in binding order.
static JOBS: Mutex<Vec<&'static dyn Job>> = Mutex::new(Vec::new());
/// Every bound key index, for SWAPDB.
static KEY_TIMERS: Mutex<Vec<&'static KeyTimer>> = Mutex::new(Vec::new());
/// Every bound key queue, for SWAPDB.
static KEY_QUEUES: Mutex<Vec<&'static KeyQueue>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn jobs() -> Vec<&'static dyn Job> {
    lock(&JOBS).clone()
}

/// The armed timer of an index: (timer ID, Unix ms it fires at).
type Armed = Option<(raw::RedisModuleTimerID, i64)>;

/// Unix time in ms ([`super::ctx::unix_ms`]), as the indexes keep due times.
fn now_ms() -> i64 {
    i64::try_from(super::ctx::unix_ms()).unwrap_or(i64::MAX)
}

/// Arms `armed` to call `cb(data)` at `due` (Unix ms), the delay clamped to `min_ms..=max_ms`
/// (a timer far ahead is re-armed when it fires), unless it is already armed for `due` or
/// earlier; an armed later timer is stopped first.
fn arm_earliest(
    c: &Ctx,
    armed: &mut Armed,
    due: i64,
    min_ms: i64,
    max_ms: i64,
    cb: unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut c_void),
    data: *const c_void,
) {
    if let Some((id, at)) = *armed {
        if at <= due {
            return;
        }
        // SAFETY: `id` is a timer of this module that has not fired (its callback clears
        // `armed` first); its data is a static, nothing to free.
        unsafe { api!(RedisModule_StopTimer)(c.raw(), id, std::ptr::null_mut()) };
        *armed = None;
    }
    let now = now_ms();
    let period = due.saturating_sub(now).clamp(min_ms, max_ms.min(PERIOD_MAX_MS));
    // SAFETY: a live main-thread context; the callback is a plain function that lives as long
    // as the module; `data` points to a static index.
    let id = unsafe { api!(RedisModule_CreateTimer)(c.raw(), period, Some(cb), data.cast_mut()) };
    *armed = Some((id, now + period));
}

/// An index of keys by due time with its one timer. The job's tick takes [`KeyTimer::pop_due`]
/// (bounded), does its work, puts back what is due again ([`KeyTimer::put`]) and re-arms
/// ([`KeyTimer::rearm`]). SWAPDB moves its keys ([`swap_db`]).
pub struct KeyTimer {
    state: Mutex<(Option<WakeIndex>, Armed)>,
    job: OnceLock<&'static dyn Job>,
    /// The shortest delay the timer is armed with (ms).
    min_ms: i64,
}

impl KeyTimer {
    pub const fn new(min_ms: i64) -> Self {
        Self { state: Mutex::new((None, None)), job: OnceLock::new(), min_ms }
    }

    /// At load: `job` does this index's work. A second bind is ignored.
    pub fn bind(&'static self, job: &'static dyn Job) {
        if self.job.set(job).is_ok() {
            lock(&JOBS).push(job);
            lock(&KEY_TIMERS).push(self);
        }
    }

    /// Registers `key` of `db` for `due_ms` (unless it is for that time or earlier) and arms
    /// the timer if that is the earliest.
    pub fn schedule(&'static self, c: &Ctx, db: i32, key: &[u8], due_ms: i64) {
        self.schedule_many(c, db, std::iter::once(key), due_ms);
    }

    /// [`KeyTimer::schedule`] for several keys of one database.
    pub fn schedule_many<'a>(&'static self, c: &Ctx, db: i32, keys: impl Iterator<Item = &'a [u8]>, due_ms: i64) {
        let mut g = lock(&self.state);
        let w = g.0.get_or_insert_with(WakeIndex::new);
        for k in keys {
            w.insert(db, k, due_ms);
        }
        self.arm_locked(c, &mut g, i64::MIN);
    }

    /// Registers without arming (rdb_load has no context that may create timers); the end of
    /// the load re-arms.
    pub fn put(&self, db: i32, key: &[u8], due_ms: i64) {
        lock(&self.state).0.get_or_insert_with(WakeIndex::new).insert(db, key, due_ms);
    }

    /// Takes out at most `max` keys due at `now_ms`, earliest first.
    pub fn pop_due(&self, now_ms: i64, max: usize) -> Vec<DbKey> {
        lock(&self.state).0.as_mut().map(|w| w.pop_due_max(now_ms, max)).unwrap_or_default()
    }

    /// Arms the timer for the earliest key, not before `not_before` (Unix ms).
    pub fn rearm(&'static self, c: &Ctx, not_before: i64) {
        let mut g = lock(&self.state);
        self.arm_locked(c, &mut g, not_before);
    }

    fn arm_locked(&'static self, c: &Ctx, g: &mut (Option<WakeIndex>, Armed), not_before: i64) {
        if let Some(e) = g.0.as_ref().and_then(WakeIndex::earliest) {
            let data: *const KeyTimer = self;
            arm_earliest(c, &mut g.1, e.max(not_before), self.min_ms, PERIOD_MAX_MS, fire_key_timer, data.cast());
        }
    }

    /// Keys registered and not yet reached (tests, XS.DEBUG).
    pub fn len(&self) -> usize {
        lock(&self.state).0.as_ref().map_or(0, WakeIndex::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn swap_db(&self, a: i32, b: i32) {
        if let Some(w) = lock(&self.state).0.as_mut() {
            w.swap_db(a, b);
        }
    }
}

unsafe extern "C" fn fire_key_timer(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    // SAFETY: `data` is the &'static KeyTimer that armed this timer (arm_locked).
    let Some(t) = (unsafe { data.cast::<KeyTimer>().as_ref() }) else { return };
    let Some(job) = t.job.get() else { return };
    super::fence::guard(job.name(), (), || {
        // This timer is firing: Redis removes it after the callback.
        lock(&t.state).1 = None;
        // SAFETY: the timer callback's context, valid during the callback.
        let c = unsafe { Ctx::for_callback(ctx) };
        job.tick(&c);
    })
}

/// A queue of keys, first noted first served, with its one timer armed `delay_ms` after the
/// first key is noted: for work that is due as soon as possible but not inside the command
/// that causes it (compression of sealed nodes).
pub struct KeyQueue {
    state: Mutex<(VecDeque<DbKey>, BTreeSet<DbKey>, Armed)>,
    job: OnceLock<&'static dyn Job>,
    delay_ms: i64,
}

impl KeyQueue {
    pub const fn new(delay_ms: i64) -> Self {
        Self { state: Mutex::new((VecDeque::new(), BTreeSet::new(), None)), job: OnceLock::new(), delay_ms }
    }

    /// At load: `job` does this queue's work. A second bind is ignored.
    pub fn bind(&'static self, job: &'static dyn Job) {
        if self.job.set(job).is_ok() {
            lock(&JOBS).push(job);
            lock(&KEY_QUEUES).push(self);
        }
    }

    /// `key` of `db` has work; the timer is armed unless it is.
    pub fn note(&'static self, c: &Ctx, db: i32, key: &[u8]) {
        let mut g = lock(&self.state);
        let k = (db, key.to_vec());
        if g.1.insert(k.clone()) {
            g.0.push_back(k);
        }
        if g.2.is_none() {
            self.arm_locked(c, &mut g);
        }
    }

    /// The next key to serve.
    pub fn pop(&self) -> Option<DbKey> {
        let mut g = lock(&self.state);
        let k = g.0.pop_front()?;
        g.1.remove(&k);
        Some(k)
    }

    /// A served key has work left: back at the end of the queue.
    pub fn push_back(&self, k: DbKey) {
        let mut g = lock(&self.state);
        if g.1.insert(k.clone()) {
            g.0.push_back(k);
        }
    }

    /// Arms the timer if it is not (work beyond the queued keys: the tiering step).
    pub fn arm(&'static self, c: &Ctx) {
        let mut g = lock(&self.state);
        if g.2.is_none() {
            self.arm_locked(c, &mut g);
        }
    }

    /// Arms the timer to fire within `ms` (a timer armed to fire sooner stands): work of the
    /// job's own beyond the queued keys, at its own pace.
    pub fn arm_in(&'static self, c: &Ctx, ms: i64) {
        let mut g = lock(&self.state);
        let data: *const KeyQueue = self;
        arm_earliest(c, &mut g.2, now_ms() + ms, 1, ms.max(1), fire_key_queue, data.cast());
    }

    /// Arms the timer if keys wait.
    pub fn rearm(&'static self, c: &Ctx) {
        let mut g = lock(&self.state);
        if !g.0.is_empty() {
            self.arm_locked(c, &mut g);
        }
    }

    fn arm_locked(&'static self, c: &Ctx, g: &mut (VecDeque<DbKey>, BTreeSet<DbKey>, Armed)) {
        let data: *const KeyQueue = self;
        arm_earliest(c, &mut g.2, now_ms() + self.delay_ms, 1, self.delay_ms, fire_key_queue, data.cast());
    }

    /// Keys waiting.
    pub fn len(&self) -> usize {
        lock(&self.state).0.len()
    }

    /// SWAPDB a b: the queued keys of the two databases change places, in place in the order
    /// (a key queued in both stays queued in both: the pairs stay distinct).
    fn swap_db(&self, a: i32, b: i32) {
        let swap = |db: i32| {
            if db == a {
                b
            } else if db == b {
                a
            } else {
                db
            }
        };
        let mut g = lock(&self.state);
        for k in g.0.iter_mut() {
            k.0 = swap(k.0);
        }
        g.1 = std::mem::take(&mut g.1).into_iter().map(|(db, k)| (swap(db), k)).collect();
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

unsafe extern "C" fn fire_key_queue(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    // SAFETY: `data` is the &'static KeyQueue that armed this timer (arm_locked).
    let Some(q) = (unsafe { data.cast::<KeyQueue>().as_ref() }) else { return };
    let Some(job) = q.job.get() else { return };
    super::fence::guard(job.name(), (), || {
        lock(&q.state).2 = None;
        // SAFETY: the timer callback's context, valid during the callback.
        let c = unsafe { Ctx::for_callback(ctx) };
        job.tick(&c);
    })
}

/// SWAPDB a b (server event): the indexed and queued keys of the two databases change places,
/// so the streams keep their wake-ups, expiries, ages and queued compression under their new
/// database.
pub fn swap_db(a: i32, b: i32) {
    let timers = lock(&KEY_TIMERS).clone();
    for t in timers {
        t.swap_db(a, b);
    }
    let queues = lock(&KEY_QUEUES).clone();
    for q in queues {
        q.swap_db(a, b);
    }
    for j in jobs() {
        j.swapped_db(a, b);
    }
}

/// A stream of ours arrived under `key` of `db` (keyspace event context `c`): every job hears.
pub fn arrived(c: &Ctx, db: i32, key: &[u8], s: &mut Stream) {
    for j in jobs() {
        j.arrived(c, db, key, s);
    }
}

/// A load ended (loading event context `ctx`): every job hears.
pub(super) fn loading_ended(ctx: *mut raw::RedisModuleCtx) {
    // SAFETY: the event callback's context, valid during the callback.
    let c = unsafe { Ctx::for_callback(ctx) };
    for j in jobs() {
        j.loading_ended(&c);
    }
}

/// `rdb_load` built `s`, named `at` when the server says: every job hears.
pub fn rdb_value(at: Option<(i32, &[u8])>, s: &Stream) {
    for j in jobs() {
        j.loaded_value(at, s);
    }
}

/// The jobs' INFO fields.
pub fn info(out: &mut Vec<(&'static str, i64)>) {
    for j in jobs() {
        j.info(out);
    }
}

/// Every stream of ours in every database for which `f` answers a due time (`f` may update
/// the stream's own marks): (db, key, due). For the end of a load; the context's DB is restored.
pub fn scan_streams(c: &Ctx, mut f: impl FnMut(&mut Stream) -> Option<i64>) -> Vec<(i32, Vec<u8>, i64)> {
    type Found<'a> = (Vec<(Vec<u8>, i64)>, &'a mut dyn FnMut(&mut Stream) -> Option<i64>);
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
            let Some(s) = (unsafe { api!(RedisModule_ModuleTypeGetValue)(key).cast::<Stream>().as_mut() }) else { return };
            if let Some(due) = f(s) {
                // SAFETY: the key name is valid during the callback; copied.
                found.push((unsafe { super::ctx::string_bytes(keyname) }.to_vec(), due));
            }
        })
    }
    let mut out = Vec::new();
    let home = c.selected_db();
    for db in 0.. {
        if !c.select_db(db) {
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
        while unsafe { api!(RedisModule_Scan)(c.raw(), cursor, Some(collect), p.cast()) } != 0 {}
        // SAFETY: created above.
        unsafe { api!(RedisModule_ScanCursorDestroy)(cursor) };
        out.extend(data.0.into_iter().map(|(k, due)| (db, k, due)));
    }
    c.select_db(home);
    out
}
