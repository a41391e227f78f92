//! The module's keyspace subscriptions.
//!
//! - The generic events that bring a stream of ours under a new name (`rename_to`, `move_to`,
//!   `copy_to`, `restore`). The indexes of the time-driven jobs know a key by its old name (or,
//!   for RESTORE, not armed: rdb_load has no context that may arm a timer), so each job hears of
//!   the arrival ([`super::timer::arrived`]) and indexes the stream again under its new name.
//! - The mechanism of the keyspace log (issue 33, src/jobs/keylog.rs): a [`Listener`] decides,
//!   inside each notification, whether to keep it (no write is safe there); the kept ones are
//!   handed to it, in order, by one post-notification job (RM_AddPostNotificationJob, Redis 7.2),
//!   which Redis runs at the end of the execution unit (the command, the whole EXEC or script, the
//!   expiry or eviction of a key) before it propagates: the unit's change and what the listener
//!   writes reach replicas and the AOF together. Classes are subscribed when first asked for
//!   (a module cannot unsubscribe); nothing is subscribed while the log is off.

use super::api;
use super::ctx::Ctx;
use super::fence;
use redis_module::raw;
use std::cell::{Cell, RefCell};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::sync::OnceLock;

/// Subscribes to the generic keyspace events (called from OnLoad).
pub fn start(context: &redis_module::Context) -> Result<(), String> {
    // SAFETY: valid OnLoad ctx; the callback lives as long as the module.
    let rc = unsafe { api!(RedisModule_SubscribeToKeyspaceEvents)(context.ctx, raw::REDISMODULE_NOTIFY_GENERIC as c_int, Some(on_event)) };
    if rc != raw::REDISMODULE_OK as c_int {
        return Err("cannot subscribe to keyspace events".into());
    }
    // SAFETY: valid OnLoad ctx; the detached context lives as long as the module (never
    // freed) and is used only on the main thread, to subscribe (RM_SubscribeToKeyspaceEvents
    // reads only its module).
    let detached = unsafe { api!(RedisModule_GetDetachedThreadSafeContext)(context.ctx) };
    MODULE_CTX.store(detached, Ordering::Relaxed);
    Ok(())
}

/// The DB of the last `move_from` event: the DB the MOVE runs in (see `move_to`).
static MOVE_SOURCE_DB: AtomicI32 = AtomicI32::new(-1);

unsafe extern "C" fn on_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const std::os::raw::c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    fence::guard("keyspace event", 0, || {
        // SAFETY: the event's context, valid during the callback.
        let c = unsafe { Ctx::for_callback(ctx) };
        // SAFETY: a NUL-terminated event name valid during the callback.
        let ev = unsafe { std::ffi::CStr::from_ptr(event) }.to_bytes();
        if ev == b"move_from" {
            MOVE_SOURCE_DB.store(c.selected_db(), Ordering::Relaxed);
            return 0;
        }
        if !matches!(ev, b"rename_to" | b"move_to" | b"copy_to" | b"restore") {
            restore_client_db(&c);
            return 0;
        }
        // SAFETY: the key name is valid during the callback.
        let name = unsafe { super::ctx::string_bytes(key) };
        if ev == b"move_to" {
            let source = MOVE_SOURCE_DB.swap(-1, Ordering::Relaxed);
            on_arrival(&c, name);
            if source >= 0 {
                // Valkey 8.1 (valkey-io/valkey #1819, fixed by #4024) runs this callback on the
                // client executing MOVE, selected to the destination DB and never selected back:
                // the client would go on in the destination DB. Select the source DB again (the
                // DB MOVE ran in; on other hosts the context's client is a temporary one, and
                // selecting it changes nothing a client sees).
                c.select_db(source);
            }
            return 0;
        }
        on_arrival(&c, name);
        restore_client_db(&c);
        0
    })
}

/// A key arrived under `name` in the event context's DB: if it holds a stream of ours, every
/// job hears. Opened for reading (no expiry deletion, no keyspace side effect); the jobs only
/// update their own marks in the stream.
fn on_arrival(c: &Ctx, name: &[u8]) {
    let db = c.selected_db();
    let mut k = c.open_key_named(name, false);
    if let Some(s) = k.stream_mut() {
        super::timer::arrived(c, db, name, s);
    }
}

// ---- the keyspace log's mechanism ------------------------------------------------------------

/// One kept notification: its name (`set`, `expired`, ...), key and database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub event: Vec<u8>,
    pub key: Vec<u8>,
    pub db: i32,
}

/// What reacts to notifications after the fact (the keyspace log).
pub trait Listener: Sync {
    /// Whether it listens at all now (the first, cheapest check of every notification).
    fn active(&self) -> bool;
    /// Inside the notification (nothing may be written): whether to keep it. `class` is the
    /// notification's REDISMODULE_NOTIFY_* bit; `db` answers its database (asked only when
    /// needed: every notification of its classes comes here, kept or not).
    fn wants(&self, class: u32, key: &[u8], db: &dyn Fn() -> i32) -> bool;
    /// After the execution unit, with writes allowed: the kept notifications, in order.
    fn write(&self, c: &Ctx, events: Vec<Event>);
    /// A kept notification could not be handed on (the server refused the job).
    fn lost(&self, n: u64);
}

static LISTENER: OnceLock<&'static dyn Listener> = OnceLock::new();
/// A context of the module's own for subscribing outside OnLoad (CONFIG SET).
static MODULE_CTX: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(std::ptr::null_mut());
/// The classes subscribed for the listener so far (each once: the masks are disjoint, so a
/// notification reaches [`on_logged`] once).
static SUBSCRIBED: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// Kept notifications waiting for the post-notification job (main thread only).
    static PENDING: RefCell<Vec<Event>> = const { RefCell::new(Vec::new()) };
    /// A job is queued for [`PENDING`].
    static QUEUED: Cell<bool> = const { Cell::new(false) };
    /// The listener's job is writing (its own writes raise notifications too).
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
    /// The DB of the last notification kept outside the job, and the one the job started
    /// with: where the executing client is on hosts that move it (see [`restore_client_db`]).
    static LAST_DB: Cell<i32> = const { Cell::new(0) };
    static JOB_DB: Cell<i32> = const { Cell::new(0) };
}

/// On hosts where a module's notification callback runs on the executing client, selected to
/// the event's DB and left there (Valkey 8.1: ffi::host::notifications_move_the_client), a
/// notification raised by the listener's own writes to the log (DB 0: its creation's `new`,
/// an `xadd`) would leave the command's client in DB 0. Called at the end of every callback:
/// during the job, the callback's client is selected back to the DB the job started in (that
/// client's DB after the notifications of its command, the last kept one).
fn restore_client_db(c: &Ctx) {
    if IN_JOB.get() && super::host::notifications_move_the_client() {
        c.select_db(JOB_DB.get());
    }
}

/// Binds the listener (at load).
pub fn listen(l: &'static dyn Listener) {
    let _ = LISTENER.set(l);
}

/// Whether the server can run a module's writes after a notification (Redis 7.2+, Valkey).
pub fn post_jobs_available() -> bool {
    // SAFETY: the API table is filled once by RedisModule_Init, before anything runs this.
    unsafe { raw::RedisModule_AddPostNotificationJob }.is_some()
}

/// Subscribes the listener to the classes of `mask` it is not subscribed to yet. Err when the
/// server lacks post-notification jobs or the module context is not there yet (before OnLoad
/// created it: the caller subscribes again at the end of the load).
pub fn subscribe(mask: u32) -> Result<(), String> {
    if !post_jobs_available() {
        return Err("this server has no RedisModule_AddPostNotificationJob (Redis 7.2 or later)".into());
    }
    let ctx = MODULE_CTX.load(Ordering::Relaxed);
    if ctx.is_null() {
        return Err("not loaded yet".into());
    }
    let new = mask & !SUBSCRIBED.load(Ordering::Relaxed);
    if new == 0 {
        return Ok(());
    }
    // SAFETY: the module's detached context (start); main thread (configs are set there);
    // the callback lives as long as the module.
    let rc = unsafe { api!(RedisModule_SubscribeToKeyspaceEvents)(ctx, new as c_int, Some(on_logged)) };
    if rc != raw::REDISMODULE_OK as c_int {
        return Err("cannot subscribe to keyspace events".into());
    }
    SUBSCRIBED.fetch_or(new, Ordering::Relaxed);
    Ok(())
}

/// Runs `f` with a context of the module's own, outside any command (CONFIG SET, main thread);
/// None before the load created it.
pub fn with_module_ctx<R>(f: impl FnOnce(&Ctx) -> R) -> Option<R> {
    let ctx = MODULE_CTX.load(Ordering::Relaxed);
    if ctx.is_null() {
        return None;
    }
    // SAFETY: the module's detached context, alive as long as the module; used on the main
    // thread only (configs are set there), for the duration of `f`.
    let c = unsafe { Ctx::for_callback(ctx) };
    Some(f(&c))
}

unsafe extern "C" fn on_logged(ctx: *mut raw::RedisModuleCtx, class: c_int, event: *const c_char, key: *mut raw::RedisModuleString) -> c_int {
    fence::guard("keyspace log event", 0, || {
        // SAFETY: the event's context, valid during the callback.
        let c = unsafe { Ctx::for_callback(ctx) };
        let Some(l) = LISTENER.get().filter(|l| l.active()) else {
            restore_client_db(&c);
            return 0;
        };
        // SAFETY: the key name, valid during the callback.
        let name = unsafe { super::ctx::string_bytes(key) };
        // A replica logs nothing (its primary's entries arrive with the changes), nor does a
        // server loading its AOF (the log's entries are in it): asked last, as the costliest.
        let keep = l.wants(class as u32, name, &|| c.selected_db()) && c.is_primary_serving();
        restore_client_db(&c);
        if !keep {
            return 0;
        }
        let db = c.selected_db();
        // SAFETY: a NUL-terminated event name, valid during the callback.
        let ev = unsafe { std::ffi::CStr::from_ptr(event) }.to_bytes();
        if !IN_JOB.get() {
            LAST_DB.set(db);
        }
        PENDING.with_borrow_mut(|p| p.push(Event { event: ev.to_vec(), key: name.to_vec(), db }));
        if !QUEUED.get() {
            // SAFETY: the event's context; a plain extern "C" callback and no private data.
            let rc = unsafe { api!(RedisModule_AddPostNotificationJob)(ctx, Some(run_job), std::ptr::null_mut(), None) };
            if rc == raw::REDISMODULE_OK as c_int {
                QUEUED.set(true);
            } else {
                let n = PENDING.with_borrow_mut(|p| std::mem::take(p).len());
                l.lost(n as u64);
            }
        }
        0
    })
}

unsafe extern "C" fn run_job(ctx: *mut raw::RedisModuleCtx, _pd: *mut c_void) {
    fence::guard("keyspace log", (), || {
        QUEUED.set(false);
        let events = PENDING.with_borrow_mut(std::mem::take);
        let Some(l) = LISTENER.get() else { return };
        if events.is_empty() {
            return;
        }
        // SAFETY: the job's context, valid during the callback.
        let c = unsafe { Ctx::for_callback(ctx) };
        JOB_DB.set(LAST_DB.get());
        let _in_job = InJob::enter();
        l.write(&c, events);
    })
}

/// [`IN_JOB`] for the duration of the job's writes, cleared on the way out even when a write
/// panics (the fence catches it): a flag left set would keep selecting the client's DB in
/// every later callback on the hosts that need it.
struct InJob;

impl InJob {
    fn enter() -> InJob {
        IN_JOB.set(true);
        InJob
    }
}

impl Drop for InJob {
    fn drop(&mut self) {
        IN_JOB.set(false);
    }
}
