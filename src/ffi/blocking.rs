//! Blocking reads: a small safe layer over RedisModule_BlockClientOnKeys.
//!
//! Who waits for what: a client blocked by XS.READ / XS.READGROUP BLOCK waits on
//! its keys with a [`Waiter`] as private data: the command's own description of
//! what it waits for (src/commands/read.rs: the IDs it waits after, COUNT, NOACK),
//! which also knows how to serve it and what to answer when it is released. This
//! layer knows no command. Every write that can satisfy a waiter calls
//! `SignalKeyAsReady` (XS.ADD; XS.GROUP DESTROY so that waiters learn their group
//! is gone); Redis also signals a key when it is created. After the command,
//! Redis calls [`on_ready`] for each client blocked on a signalled key, in the
//! order they blocked: serving it (reply + return OK) unblocks it, returning ERR
//! keeps it waiting ("two waiters, one entry"). On timeout or CLIENT UNBLOCK,
//! [`on_timeout`] replies a null array, as XREAD does. The private data is freed
//! on every path (served, timeout, disconnect, unblock) by [`free_state`].
//!
//! Time-driven wake-ups ([`wake_on_time`]): when something of a group reader's falls due with no
//! write (a CLAIM min-idle, an ack timeout, a delayed entry), its key is signalled for the first
//! reader of each *wait* (readers of the same group, CLAIM, NOACK and keys, in the order they
//! blocked); [`on_ready`] passes the others over without running their read. Redis still calls
//! back every client blocked on the key (the API has no way to ready one client of a key), but
//! with 10,000 readers on a key one read runs instead of 10,000.
//!
//! Deleted keys. An XREAD waiter stays blocked when its key is deleted or
//! replaced by another type, while an XREADGROUP waiter is released (its group is
//! gone with the key; what it is told depends on the level: the waiter's
//! `serve` / `release`). Since 7.2 the module API does it: group readers block
//! with `REDISMODULE_BLOCK_UNBLOCK_DELETED` and Redis calls [`on_ready`] for the
//! key that went away. Redis 7.0 does that only for its own stream type, so there
//! the module watches its keys itself: the type's `unlink2` callback (DEL, UNLINK, expiry, eviction,
//! RENAME, MOVE, overwrite by SET...) and the FLUSHDB / SWAPDB server events
//! schedule a check of the group waiters on the affected keys, run once the current command
//! (or MULTI) is over, as the built-in checks after the command, and before replies are
//! written: a waiter whose key is no longer one of our streams is released through
//! `RedisModule_UnblockClient`, which runs [`on_timeout`] with the "key gone" mark set.
//!
//! Nothing here runs on every turn of the event loop. A subscription to the loop's
//! before/after-sleep events would: Redis then builds a context with a temporary client for the
//! module twice per turn, about 1,150 instructions, which every command of the server pays
//! when clients are few (a GET from one client cost 6,413 instructions with the module loaded,
//! 4,799 without; 5,601 with the subscription gone; callgrind, Redis 7.0.15, bench/analysis.md).
//! The deferred work arms a module timer when there is some instead ([`arm_soon`],
//! [`arm_forget`]).

use super::api;
use super::ctx::{string_bytes, Ctx};
use super::fence;
use redis_module::raw;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

/// Blocked group readers, by (db, key): registration id -> (handle, its waiter state).
type Waiters = HashMap<(i32, Vec<u8>), BTreeMap<u64, (usize, usize)>>;

/// The registry of blocked group readers (main thread only; the mutex is never contended).
static GROUP_WAITERS: Mutex<Option<Waiters>> = Mutex::new(None);
/// The blocked group readers of each (db, key), every host: who reads as which consumer
/// (CONSUMERTTL does not expire a consumer while it waits) and who waits alike (time-driven
/// wake-ups run the first of each wait, below).
static WAITING: Mutex<Option<HashMap<DbKey, KeyReaders>>> = Mutex::new(None);

/// A key's blocked group readers.
#[derive(Default)]
struct KeyReaders {
    /// Registration id (the order they blocked in) -> the reader.
    by_id: BTreeMap<u64, Reader>,
    /// Wait ([`Registration::wait`]) -> its readers' registration ids.
    by_wait: HashMap<Vec<u8>, BTreeSet<u64>>,
}

/// A blocked group reader: the (group, consumer) it reads as, its wait.
struct Reader {
    group: Vec<u8>,
    consumer: Vec<u8>,
    wait: Vec<u8>,
}

/// Keys a time-driven wake-up signalled by db, then key (looked up by the key's bytes: no
/// allocation per reader called back), with the readers it is meant for.
type Timed = HashMap<i32, HashMap<Vec<u8>, Chosen>>;

/// The readers of one key a time-driven wake-up is meant for.
#[derive(Default)]
struct Chosen {
    /// The wake-up that last added to them (numbered from 1, [`WAKES`]).
    wake: u64,
    ids: HashSet<u64>,
}

/// Keys a time-driven wake-up signalled ([`wake_on_time`]), with the readers it is meant for,
/// until the server has served them (before its next sleep; [`forget_timed`] forgets them
/// once it has, at the latest at the first time events after that sleep) or a write signals a
/// key (then every reader runs, as for any write).
static TIMED: Mutex<Option<Timed>> = Mutex::new(None);
/// Whether TIMED has anything (read without locking by every write's signal).
static TIMED_ANY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Time-driven wake-ups so far.
static WAKES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// Whether the timer that forgets served wake-ups is armed.
static FORGET_ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Keys whose waiters must be checked once the current command is over.
static PENDING: Mutex<Option<HashSet<DbKey>>> = Mutex::new(None);
/// Whether the timer of the deferred work ([`run_soon`]) is armed.
static SOON_ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A key in a database: (db id, key name).
type DbKey = (i32, Vec<u8>);
/// Whether PENDING has anything.
static HAS_PENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
/// A context for the deferred checks and for arming their timer (created at load).
static CHECK_CTX: std::sync::atomic::AtomicPtr<raw::RedisModuleCtx> = std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// What a blocked client waits for, provided by the command that blocks it.
pub trait Waiter {
    /// A signalled key is ready: serve the client (reply) and return true, or
    /// return false to keep it blocked.
    fn serve(&self, c: &Ctx, ready_key: &[u8]) -> bool;
    /// The client is released unserved: timeout or CLIENT UNBLOCK (`key_gone`
    /// false), or one of its keys is no longer a stream of ours (`key_gone`).
    fn release(&self, c: &Ctx, key_gone: bool);
    /// Waiters that must learn that their key is gone register it.
    fn registration(&self) -> Option<&Registration>;
    /// The waiter was served by a time-driven wake-up: whether readers that wait as it does
    /// can be served now too (then the next of them runs); if not, it registers their next
    /// wake-up itself (the readers passed over did not run, so registered nothing).
    fn served_on_time(&self, c: &Ctx) -> bool;
}

/// The private data of a blocked client: a thin pointer to the waiter.
type State = Box<dyn Waiter>;

/// What the registry knows of a blocked group reader (kept in its waiter).
#[derive(Debug, Default)]
pub struct Registration {
    pub id: u64,
    pub db: i32,
    pub keys: Vec<Vec<u8>>,
    /// The (group, consumer) the reader reads as.
    pub consumer: Option<(Vec<u8>, Vec<u8>)>,
    /// What it waits for, as bytes the command chose: readers with equal bytes are served by
    /// the same entries in the same way, so a time-driven wake-up runs the first of them only
    /// (and the next once that one is served, while something is still due).
    pub wait: Vec<u8>,
    /// Set before the client is released because its key is gone.
    pub key_gone: std::cell::Cell<bool>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn register(reg: &Registration, bc: *mut raw::RedisModuleBlockedClient, state: *const State) {
    let mut g = lock(&GROUP_WAITERS);
    let map = g.get_or_insert_with(HashMap::new);
    for k in &reg.keys {
        map.entry((reg.db, k.clone())).or_default().insert(reg.id, (bc as usize, state as usize));
    }
}

/// Records a blocked group reader under each of its keys (every host).
fn register_consumer(reg: &Registration) {
    if let Some((g, c)) = &reg.consumer {
        let mut w = lock(&WAITING);
        let map = w.get_or_insert_with(HashMap::new);
        for k in &reg.keys {
            let r = map.entry((reg.db, k.clone())).or_default();
            r.by_id.insert(reg.id, Reader { group: g.clone(), consumer: c.clone(), wait: reg.wait.clone() });
            r.by_wait.entry(reg.wait.clone()).or_default().insert(reg.id);
        }
    }
}

/// Whether a client is blocked reading `key` of `db` as `consumer` of `group`.
pub fn consumer_waiting(db: i32, key: &[u8], group: &[u8], consumer: &[u8]) -> bool {
    let w = lock(&WAITING);
    w.as_ref().and_then(|m| m.get(&(db, key.to_vec()))).is_some_and(|r| r.by_id.values().any(|w| w.group == group && w.consumer == consumer))
}

fn unregister(reg: &Registration) {
    leaving(reg);
    if reg.consumer.is_some() {
        if let Some(map) = lock(&WAITING).as_mut() {
            for k in &reg.keys {
                let key = (reg.db, k.clone());
                let Some(r) = map.get_mut(&key) else { continue };
                if let Some(w) = r.by_id.remove(&reg.id) {
                    if let Some(ids) = r.by_wait.get_mut(&w.wait) {
                        ids.remove(&reg.id);
                        if ids.is_empty() {
                            r.by_wait.remove(&w.wait);
                        }
                    }
                }
                if r.by_id.is_empty() {
                    map.remove(&key);
                }
            }
        }
    }
    if let Some(map) = lock(&GROUP_WAITERS).as_mut() {
        remove_registration(map, reg);
    }
}

/// A time-driven wake-up of the group readers blocked on `key` of `db` (something of theirs
/// fell due: a CLAIM min-idle, an ack timeout, a delayed entry; no write touched the key).
/// Redis runs the ready callback of every client blocked on a signalled key; this one is meant
/// for the first reader of each wait only: the others are passed over without running their
/// read ([`on_ready`]), and a reader that is served passes the wake-up on to the next of its
/// wait while its waiter says something is still due ([`Waiter::served_on_time`]). Nothing is
/// signalled when no group reader waits on the key.
pub fn wake_on_time(c: &Ctx, db: i32, key: &[u8]) {
    let firsts: Vec<u64> = {
        let w = lock(&WAITING);
        let Some(r) = w.as_ref().and_then(|m| m.get(&(db, key.to_vec()))) else { return };
        r.by_wait.values().filter_map(|ids| ids.first().copied()).collect()
    };
    if firsts.is_empty() || !c.select_db(db) {
        return;
    }
    let wake = WAKES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    {
        let mut t = lock(&TIMED);
        let chosen = t.get_or_insert_with(HashMap::new).entry(db).or_default().entry(key.to_vec()).or_default();
        chosen.wake = wake;
        chosen.ids.extend(firsts);
    }
    TIMED_ANY.store(true, std::sync::atomic::Ordering::Relaxed);
    arm_forget(c.raw(), wake);
    c.signal_ready_quietly(super::ctx::Name::Bytes(key));
}

/// Arms the timer that forgets the wake-ups up to `wake` once the server has served them,
/// unless it is armed. 1 ms, never 0: Redis serves the signalled keys before it next sleeps,
/// and a timer armed from a timer callback (a wake-up comes from one) fires in the same pass
/// over the module's timers if it is due at the instant the pass started; armed 1 ms ahead it
/// fires at the first time events after that sleep.
fn arm_forget(ctx: *mut raw::RedisModuleCtx, wake: u64) {
    if FORGET_ARMED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    // SAFETY: a live main-thread context; the callback is a plain function that lives as long
    // as the module; the data is a number, not a pointer (nothing to free).
    unsafe { api!(RedisModule_CreateTimer)(ctx, 1, Some(forget_timed), wake as usize as *mut c_void) };
}

/// The wake-ups up to the number in `data` were served: they are forgotten; later ones wait for
/// a timer of their own.
unsafe extern "C" fn forget_timed(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    fence::guard("time-driven wake-up", (), || {
        FORGET_ARMED.store(false, std::sync::atomic::Ordering::Relaxed);
        let served = data as usize as u64;
        let mut t = lock(&TIMED);
        let Some(by_db) = t.as_mut() else { return };
        for keys in by_db.values_mut() {
            keys.retain(|_, c| c.wake > served);
        }
        by_db.retain(|_, keys| !keys.is_empty());
        if by_db.is_empty() {
            TIMED_ANY.store(false, std::sync::atomic::Ordering::Relaxed);
        } else {
            drop(t);
            arm_forget(ctx, WAKES.load(std::sync::atomic::Ordering::Relaxed));
        }
    })
}

/// A write signalled a key (or a stream left the keyspace): every reader blocked on a key a
/// time-driven wake-up signalled runs again, as for any write.
pub fn written() {
    // A plain load first: this runs on every XS.ADD, and TIMED is empty but for the moment
    // between a wake-up timer and the server's next sleep.
    if TIMED_ANY.load(std::sync::atomic::Ordering::Relaxed) && TIMED_ANY.swap(false, std::sync::atomic::Ordering::Relaxed) {
        if let Some(t) = lock(&TIMED).as_mut() {
            t.clear();
        }
    }
}

/// What a time-driven wake-up means for the reader `id` (None: not a group reader) called back
/// for `key` with `c`: None when the key was not signalled by one (or a write signalled it
/// since), else whether the wake-up is meant for this reader, and the reader's DB.
fn timed_for(c: &Ctx, key: &[u8], id: Option<u64>) -> Option<(bool, i32)> {
    if !TIMED_ANY.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    let db = c.selected_db();
    let t = lock(&TIMED);
    let chosen = t.as_ref()?.get(&db)?.get(key)?;
    Some((id.is_some_and(|i| chosen.ids.contains(&i)), db))
}

/// The reader `id` of `key` in `db` that a time-driven wake-up was meant for has run (or is
/// leaving without running): it is no longer waited for, and with `pass`, the next reader of
/// its wait runs too (Redis reaches it later in the same pass: it blocked later).
fn ran(db: i32, key: &[u8], id: u64, pass: bool) {
    let next = if pass {
        let w = lock(&WAITING);
        let r = w.as_ref().and_then(|m| m.get(&(db, key.to_vec())));
        let wait = r.and_then(|r| r.by_id.get(&id)).map(|w| &w.wait);
        r.zip(wait).and_then(|(r, wait)| r.by_wait.get(wait)).and_then(|ids| ids.range(id + 1..).next().copied())
    } else {
        None
    };
    if let Some(chosen) = lock(&TIMED).as_mut().and_then(|t| t.get_mut(&db)).and_then(|k| k.get_mut(key)) {
        chosen.ids.remove(&id);
        chosen.ids.extend(next);
    }
}

/// A reader leaves (served, timed out, disconnected, unblocked): if a time-driven wake-up was
/// meant for it and it has not run, the next reader of its wait runs in its place. The key is
/// signalled again: Redis 7.2+ frees a timed-out reader after it has served the ready keys
/// (7.0 before), and the next reader must still be called back. If the wake-up was forgotten
/// first ([`forget_timed`]), every reader of the key runs, as for a write.
fn leaving(reg: &Registration) {
    if !TIMED_ANY.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    for k in &reg.keys {
        let meant = lock(&TIMED).as_ref().and_then(|t| t.get(&reg.db)).and_then(|m| m.get(k.as_slice())).is_some_and(|c| c.ids.contains(&reg.id));
        if meant {
            ran(reg.db, k, reg.id, true);
            signal_again(reg.db, k);
        }
    }
}

/// SignalKeyAsReady on `key` of `db` through the module's own context (outside any command).
fn signal_again(db: i32, key: &[u8]) {
    let ctx = CHECK_CTX.load(std::sync::atomic::Ordering::Relaxed);
    if ctx.is_null() {
        return;
    }
    // SAFETY: the detached context is valid for the module's lifetime and used on the main
    // thread only (this runs from a blocked client's free callback); the string is freed here.
    unsafe {
        api!(RedisModule_SelectDb)(ctx, db);
        let name = api!(RedisModule_CreateString)(std::ptr::null_mut(), key.as_ptr().cast(), key.len());
        api!(RedisModule_SignalKeyAsReady)(ctx, name);
        api!(RedisModule_FreeString)(std::ptr::null_mut(), name);
    }
}

/// Takes `reg` out of a registry by (db, key), dropping keys left without registrations.
fn remove_registration<V>(map: &mut HashMap<DbKey, BTreeMap<u64, V>>, reg: &Registration) {
    for k in &reg.keys {
        let key = (reg.db, k.clone());
        if let Some(w) = map.get_mut(&key) {
            w.remove(&reg.id);
            if w.is_empty() {
                map.remove(&key);
            }
        }
    }
}

/// Creates the context the deletion checks use (at load).
pub fn init(context: &redis_module::Context) -> Result<(), String> {
    let ctx = context.ctx;
    // SAFETY: valid OnLoad ctx; the detached context lives as long as the module.
    let d = unsafe { api!(RedisModule_GetDetachedThreadSafeContext)(ctx) };
    if d.is_null() {
        return Err("cannot create a detached context".into());
    }
    CHECK_CTX.store(d, std::sync::atomic::Ordering::Relaxed);
    for (id, cb) in [
        (raw::REDISMODULE_EVENT_FLUSHDB, on_flush as unsafe extern "C" fn(_, _, _, _)),
        (raw::REDISMODULE_EVENT_SWAPDB, on_swapdb as unsafe extern "C" fn(_, _, _, _)),
    ] {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: valid OnLoad ctx; callbacks live as long as the module.
        let rc = unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx, event, Some(cb)) };
        if rc != raw::REDISMODULE_OK as c_int {
            return Err("cannot subscribe to flush / swapdb events".into());
        }
    }
    // Work asked for before this context existed (a config applied from the module's
    // arguments) is armed now.
    if super::stats::rescan_due() {
        arm_soon();
    }
    Ok(())
}

/// Schedules a check of the group waiters on `keys` (None: every key of `db`).
fn schedule(db: i32, key: Option<&[u8]>) {
    let keys: Vec<(i32, Vec<u8>)> = {
        let g = lock(&GROUP_WAITERS);
        let Some(map) = g.as_ref() else { return };
        match key {
            Some(k) => {
                let e = (db, k.to_vec());
                if map.contains_key(&e) {
                    vec![e]
                } else {
                    Vec::new()
                }
            }
            None => map.keys().filter(|(d, _)| db < 0 || *d == db).cloned().collect(),
        }
    };
    if keys.is_empty() {
        return;
    }
    lock(&PENDING).get_or_insert_with(HashSet::new).extend(keys);
    HAS_PENDING.store(true, std::sync::atomic::Ordering::Relaxed);
    arm_soon();
}

/// Arms the timer of the deferred work ([`run_soon`]) unless it is armed: 0 ms, so it fires
/// once the commands the event loop is running are over (a timer armed while the server
/// processes its time events fires on their next pass, after its next sleep). Main thread
/// only. Before the load's context exists nothing is armed: `init` arms what is due then.
pub(super) fn arm_soon() {
    let ctx = CHECK_CTX.load(std::sync::atomic::Ordering::Relaxed);
    if ctx.is_null() || SOON_ARMED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    // SAFETY: the detached context lives as long as the module (Redis takes only its module
    // from it); the callback is a plain function, no data.
    unsafe { api!(RedisModule_CreateTimer)(ctx, 0, Some(run_soon), std::ptr::null_mut()) };
}

/// The deferred work: the checks of waiters whose key may be gone, the group-stats rescan.
unsafe extern "C" fn run_soon(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    SOON_ARMED.store(false, std::sync::atomic::Ordering::Relaxed);
    if HAS_PENDING.swap(false, std::sync::atomic::Ordering::Relaxed) {
        run_checks();
    }
    if super::stats::rescan_due() {
        fence::guard("group stats rescan", (), || {
            // SAFETY: the context Redis passed to this timer callback, valid for its duration.
            let c = unsafe { Ctx::for_callback(ctx) };
            super::stats::rescan(&c);
        });
    }
}

/// Called by the type's unlink callback: our stream at (db, key) is leaving the keyspace.
pub fn key_unlinked(db: i32, key: &[u8]) {
    schedule(db, Some(key));
    written();
}

unsafe extern "C" fn on_flush(_ctx: *mut raw::RedisModuleCtx, _e: raw::RedisModuleEvent, sub: u64, data: *mut c_void) {
    fence::guard("flush event", (), || {
        if sub != raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
            return;
        }
        // SAFETY: FLUSHDB events carry a RedisModuleFlushInfo.
        let info = unsafe { data.cast::<raw::RedisModuleFlushInfo>().as_ref() };
        schedule(info.map_or(-1, |i| i.dbnum), None);
    })
}

unsafe extern "C" fn on_swapdb(_ctx: *mut raw::RedisModuleCtx, _e: raw::RedisModuleEvent, _sub: u64, data: *mut c_void) {
    fence::guard("swapdb event", (), || {
        // SAFETY: SWAPDB events carry a RedisModuleSwapDbInfo.
        if let Some(i) = unsafe { data.cast::<raw::RedisModuleSwapDbInfo>().as_ref() } {
            schedule(i.dbnum_first, None);
            schedule(i.dbnum_second, None);
            // The time-driven indexes follow their keys (one subscription per event and
            // module: a second one would replace this callback).
            super::timer::swap_db(i.dbnum_first, i.dbnum_second);
        }
    })
}

/// Releases the group waiters whose key is no longer one of our streams.
fn run_checks() {
    fence::guard("blocked readers check", (), || {
        let keys: Vec<(i32, Vec<u8>)> = lock(&PENDING).as_mut().map(|p| p.drain().collect()).unwrap_or_default();
        let ctx = CHECK_CTX.load(std::sync::atomic::Ordering::Relaxed);
        if ctx.is_null() {
            return;
        }
        for (db, key) in keys {
            // SAFETY: the detached context is valid for the module's lifetime; we run
            // on the main thread between commands. The key string is freed below.
            let gone = unsafe {
                api!(RedisModule_SelectDb)(ctx, db);
                let name = api!(RedisModule_CreateString)(std::ptr::null_mut(), key.as_ptr().cast(), key.len());
                let k = api!(RedisModule_OpenKey)(ctx, name, raw::REDISMODULE_READ as c_int).cast::<raw::RedisModuleKey>();
                let ours = !k.is_null()
                    && api!(RedisModule_KeyType)(k) as isize == raw::REDISMODULE_KEYTYPE_MODULE
                    && api!(RedisModule_ModuleTypeGetType)(k) == super::types::stream_type();
                if !k.is_null() {
                    api!(RedisModule_CloseKey)(k);
                }
                api!(RedisModule_FreeString)(std::ptr::null_mut(), name);
                !ours
            };
            if !gone {
                continue;
            }
            let handles: Vec<(usize, usize)> =
                lock(&GROUP_WAITERS).as_ref().and_then(|m| m.get(&(db, key.clone()))).map(|w| w.values().copied().collect()).unwrap_or_default();
            for (h, st) in handles {
                let bc = h as *mut raw::RedisModuleBlockedClient;
                // SAFETY: a registered handle and its waiter are live until free_state
                // unregisters them, which happens after this release (UnblockClient runs
                // the timeout callback now and frees the private data later).
                unsafe {
                    if let Some(r) = (st as *const State).as_ref().and_then(|w| w.registration()) {
                        if r.key_gone.get() {
                            continue; // already released
                        }
                        r.key_gone.set(true);
                    }
                    api!(RedisModule_UnblockClient)(bc, std::ptr::null_mut());
                }
            }
        }
    })
}

/// Blocks the client of `c` on the key arguments `key_args` (indexes into argv)
/// for `timeout_ms` (0 = forever), waiting as `waiter` says.
pub fn block_on_keys(c: &Ctx, key_args: &[usize], timeout_ms: i64, waiter: State) -> bool {
    let mut keys: Vec<*mut raw::RedisModuleString> = key_args.iter().map(|&i| c.arg_string(i)).collect();
    let watch_deletion = waiter.registration().is_some();
    // SAFETY: the API table is filled by RedisModule_Init and never written again.
    let with_flags = unsafe { raw::RedisModule_BlockClientOnKeysWithFlags };
    let data: *mut State = Box::into_raw(Box::new(waiter));
    // SAFETY: the key strings are the command's live arguments (Redis retains what it
    // needs); `data` is owned by Redis from here on and handed back to free_state
    // exactly once, whatever ends the block.
    let bc = unsafe {
        match (watch_deletion, with_flags) {
            // 7.2+: Redis itself wakes the waiter (on_ready) when a key is deleted,
            // replaced, renamed or flushed away, right after the command that did it.
            (true, Some(f)) => f(
                c.raw(),
                Some(on_ready),
                Some(on_timeout),
                Some(free_state),
                timeout_ms,
                keys.as_mut_ptr(),
                keys.len() as c_int,
                data.cast(),
                raw::REDISMODULE_BLOCK_UNBLOCK_DELETED as c_int,
            ),
            _ => api!(RedisModule_BlockClientOnKeys)(
                c.raw(),
                Some(on_ready),
                Some(on_timeout),
                Some(free_state),
                timeout_ms,
                keys.as_mut_ptr(),
                keys.len() as c_int,
                data.cast(),
            ),
        }
    };
    if bc.is_null() {
        // SAFETY: Redis did not take the private data.
        drop(unsafe { Box::from_raw(data) });
        return false;
    }
    // SAFETY: data is alive (owned by Redis until free_state); we only read it.
    if let Some(r) = unsafe { (*data).registration() } {
        register_consumer(r);
    }
    // 7.0 (no UNBLOCK_DELETED): our own watch of deletions (see the module docs).
    if with_flags.is_none() {
        // SAFETY: data is alive (owned by Redis until free_state); we only read it.
        if let Some(r) = unsafe { (*data).registration() } {
            register(r, bc, data);
        }
    }
    true
}

/// A fresh registration id.
pub fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

unsafe extern "C" fn on_ready(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int) -> c_int {
    // SAFETY: Redis passes the blocked command's arguments with the callback's ctx.
    let c = unsafe { Ctx::new(ctx, argv, argc) };
    // Held back while nodes are on disk, as a command's (src/ffi/register.rs `run`).
    if crate::tier::cold::has_cold() {
        c.hold_replies();
    }
    let served = fence::catch(|| {
        // SAFETY: valid callback ctx.
        let key = unsafe { api!(RedisModule_GetBlockedClientReadyKey)(ctx) };
        // SAFETY: the private data is the Box<State> given to block_on_keys, alive
        // until free_state runs (after this callback).
        let state = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx).cast::<State>().as_ref() };
        let Some(w) = state else { return false };
        // SAFETY: the ready key Redis passes for this callback, alive during it.
        let key = unsafe { string_bytes(key) };
        let id = w.registration().map(|r| r.id);
        let timed = timed_for(&c, key, id);
        if let Some((false, _)) = timed {
            // A time-driven wake-up meant for other readers: nothing of this one's changed.
            super::stats::bump(&super::stats::EVENTS.blocked_reads_skipped, 1);
            return false;
        }
        super::stats::bump(&super::stats::EVENTS.blocked_reads_rerun, 1);
        let served = w.serve(&c, key);
        if let (Some((true, db)), Some(id)) = (timed, id) {
            ran(db, key, id, served && w.served_on_time(&c));
        }
        served
    });
    match served {
        Ok(true) => {
            c.send_held();
            raw::REDISMODULE_OK as c_int
        }
        Ok(false) => {
            c.send_held();
            raw::REDISMODULE_ERR as c_int
        }
        Err(msg) if super::register::cold_read_failed(&c, &msg) => raw::REDISMODULE_OK as c_int,
        Err(msg) => {
            c.drop_held();
            super::log_warning(&format!("xstream: internal error serving a blocked read: {msg}"));
            c.reply_error("ERR xstream internal error (see the server log)");
            raw::REDISMODULE_OK as c_int
        }
    }
}

unsafe extern "C" fn on_timeout(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int) -> c_int {
    // SAFETY: Redis passes the blocked command's arguments with the callback's ctx.
    let c = unsafe { Ctx::new(ctx, argv, argc) };
    fence::guard("blocked read timeout", (), || {
        // SAFETY: the private data is the Box<State> (alive until free_state).
        let st = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx).cast::<State>().as_ref() };
        match st {
            Some(w) => w.release(&c, w.registration().is_some_and(|r| r.key_gone.get())),
            None => c.reply_null_array(),
        }
    });
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn free_state(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    fence::guard("blocked read cleanup", (), || {
        if !data.is_null() {
            // SAFETY: the Box<State> leaked in block_on_keys; Redis calls this once.
            let st = unsafe { Box::from_raw(data.cast::<State>()) };
            if let Some(r) = st.registration() {
                unregister(r);
            }
        }
    })
}
