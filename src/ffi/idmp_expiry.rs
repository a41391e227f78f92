//! Time-driven IDMP expiry (REDIS8.md §5.4), our rule (docs/redis8.md, "IDMP expiry"):
//!
//! - An index `(due_ms, db, key)` of the streams that hold iids, with one module timer
//!   armed for the earliest due time. Nothing scans all keys per tick: an entry is
//!   added when an iid is recorded (XS.ADD IDMP / IDMPAUTO, XS.IDMPRECORD), when a key
//!   arrives by RENAME / MOVE / COPY / RESTORE (keyspace events), and once at the end
//!   of a load that brought iids (RDB, full sync). An entry whose key was deleted,
//!   renamed away or replaced is dropped when the timer reaches it.
//! - Only a primary acts: on a replica (or while loading) the timer re-arms and does
//!   nothing, so a replica never expires an iid on its own clock. A replica would
//!   otherwise answer a replicated IDMP XADD differently from its primary (a duplicate
//!   on one side, a new entry on the other).
//! - The work is bounded per tick (KEYS_PER_TICK keys, WORK_PER_TICK units of producers
//!   visited + iids removed) and each pass that removed something is propagated as
//!   `XS.IDMPEXPIRE key now-ms LIMIT n [FROM pid]`, which replicas and AOF replay apply
//!   as received (src/commands/idmp.rs).
//!
//! The index is rebuilt, not persisted: it lives in memory on every node (replicas
//! keep theirs up to date through the replicated records, so a promoted replica
//! expires from its first tick as primary).

use super::api;
use super::ctx::{Arg, Ctx};
use super::fence;
use super::timer::KeyTimer;
use redis_module::raw;
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;

/// Keys expired per timer tick at most.
const KEYS_PER_TICK: usize = 32;
/// Producers visited + iids removed per tick at most (spread over its keys).
const WORK_PER_TICK: u64 = 2000;
/// How soon a tick that stopped on its budget runs again (ms).
const CONTINUE_MS: i64 = 1;
/// How often a replica (or a loading server) looks again whether it became primary (ms).
const REPLICA_RECHECK_MS: i64 = 1000;

/// The streams holding iids, by the time their oldest iid expires.
pub static TIMER: KeyTimer = KeyTimer::new(tick, 1);

/// Where to resume a stream's walk (the previous pass hit its work limit): its producer.
static RESUME: Mutex<Option<HashMap<(i32, Vec<u8>), Vec<u8>>>> = Mutex::new(None);

/// A load brought streams with iids (set by rdb_load, read at the end of loading).
pub static LOADED_IIDS: AtomicBool = AtomicBool::new(false);

fn resume() -> std::sync::MutexGuard<'static, Option<HashMap<(i32, Vec<u8>), Vec<u8>>>> {
    RESUME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn now_ms() -> i64 {
    // SAFETY: no arguments; plain clock read.
    unsafe { api!(RedisModule_Milliseconds)() }
}

/// An iid was recorded in key argument `key_i` of `c`, due at `due_ms`.
pub fn register(c: &Ctx, key_i: usize, due_ms: u64) {
    TIMER.schedule_arg(c, key_i, due_ms);
}

fn register_raw(ctx: *mut raw::RedisModuleCtx, db: i32, key: &[u8], due_ms: u64) {
    TIMER.schedule(ctx, db, key, i64::try_from(due_ms).unwrap_or(i64::MAX));
}

unsafe extern "C" fn tick(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    fence::guard("idmp expiry timer", (), || {
        TIMER.fired();
        let now = now_ms();
        if !super::timer::acts(ctx) {
            TIMER.rearm(ctx, now + REPLICA_RECHECK_MS);
            return;
        }
        // SAFETY: the timer's context has a temporary client whose DB we select.
        let home = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
        let mut work_left = WORK_PER_TICK;
        for _ in 0..KEYS_PER_TICK {
            if work_left == 0 {
                break;
            }
            let Some((db, key)) = TIMER.pop_due(now, 1).pop() else { break };
            let from = resume().as_mut().and_then(|m| m.remove(&(db, key.clone())));
            // SAFETY: as above; a DB that no longer exists fails and the entry is dropped.
            if unsafe { api!(RedisModule_SelectDb)(ctx, db) } != raw::REDISMODULE_OK as c_int {
                continue;
            }
            let (removed, next) = expire_one(ctx, &key, now.max(0) as u64, work_left, from.as_deref());
            work_left = work_left.saturating_sub(removed.max(1));
            match next {
                Next::Resume(pid) => {
                    resume().get_or_insert_with(HashMap::new).insert((db, key.clone()), pid);
                    TIMER.put(db, &key, now);
                }
                Next::Due(due) => TIMER.put(db, &key, i64::try_from(due).unwrap_or(i64::MAX)),
                Next::Drop => {}
            }
        }
        // SAFETY: as above; `home` was valid.
        unsafe { api!(RedisModule_SelectDb)(ctx, home) };
        TIMER.rearm(ctx, now + CONTINUE_MS);
    })
}

enum Next {
    Resume(Vec<u8>),
    Due(u64),
    Drop,
}

/// One pass on `key` of the selected DB; returns (work done, what next). Propagates
/// the pass as `XS.IDMPEXPIRE key now LIMIT work [FROM pid]` when it removed iids.
fn expire_one(ctx: *mut raw::RedisModuleCtx, key: &[u8], now: u64, work: u64, from: Option<&[u8]>) -> (u64, Next) {
    let now_s = now.to_string();
    let work_s = work.to_string();
    let mut parts: Vec<&[u8]> = vec![b"XS.IDMPEXPIRE", key, now_s.as_bytes(), b"LIMIT", work_s.as_bytes()];
    if let Some(p) = from {
        parts.extend([&b"FROM"[..], p]);
    }
    let n = parts.len();
    super::timer::with_command(ctx, &parts, |c: &Ctx| match crate::commands::idmp::expire_key(c) {
        Ok(Some(o)) => {
            if o.removed > 0 {
                let args: Vec<Arg> = (1..n).map(Arg::Orig).collect();
                c.replicate(c"XS.IDMPEXPIRE", &args);
            }
            let next = match (o.resume_from, o.next_due_ms) {
                (Some(p), _) => Next::Resume(p),
                (None, Some(d)) => Next::Due(d),
                (None, None) => Next::Drop,
            };
            (o.removed, next)
        }
        _ => (0, Next::Drop),
    })
}

/// Subscribes to the generic keyspace events that bring a stream under a new name
/// (called from OnLoad).
pub fn start(context: &redis_module::Context) -> Result<(), String> {
    // SAFETY: valid OnLoad ctx; the callback lives as long as the module.
    let rc = unsafe { api!(RedisModule_SubscribeToKeyspaceEvents)(context.ctx, raw::REDISMODULE_NOTIFY_GENERIC as c_int, Some(on_event)) };
    if rc != raw::REDISMODULE_OK as c_int {
        return Err("cannot subscribe to keyspace events".into());
    }
    Ok(())
}

unsafe extern "C" fn on_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const std::os::raw::c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    fence::guard("idmp keyspace event", 0, || {
        // SAFETY: a NUL-terminated event name valid during the callback.
        let ev = unsafe { std::ffi::CStr::from_ptr(event) }.to_bytes();
        if ev == b"move_from" {
            // SAFETY: the event's context; a plain read of its selected DB (the source).
            MOVE_SOURCE_DB.store(unsafe { api!(RedisModule_GetSelectedDb)(ctx) }, Ordering::Relaxed);
            return 0;
        }
        if !matches!(ev, b"rename_to" | b"move_to" | b"copy_to" | b"restore") {
            return 0;
        }
        if ev == b"move_to" {
            let source = MOVE_SOURCE_DB.swap(-1, Ordering::Relaxed);
            let done = on_arrival(ctx, key);
            if source >= 0 {
                // Valkey 8.1 (valkey-io/valkey #1819, fixed by #4024) runs this callback on the
                // client executing MOVE, selected to the destination DB and never selected back:
                // the client would go on in the destination DB. Select the source DB again (the
                // DB MOVE ran in; on other hosts the context's client is a temporary one, and
                // selecting it changes nothing a client sees).
                // SAFETY: the event's context; `source` was a valid DB of move_from.
                unsafe { api!(RedisModule_SelectDb)(ctx, source) };
            }
            return done;
        }
        on_arrival(ctx, key)
    })
}

/// The DB of the last `move_from` event: the DB the MOVE runs in (see `move_to`).
static MOVE_SOURCE_DB: AtomicI32 = AtomicI32::new(-1);

/// A stream arrived under the name `key` in the event context's DB: index it for the timers.
fn on_arrival(ctx: *mut raw::RedisModuleCtx, key: *mut raw::RedisModuleString) -> c_int {
    // SAFETY: the context selects the event's DB; the key name is valid during the callback.
    let (db, name) = unsafe { (api!(RedisModule_GetSelectedDb)(ctx), super::ctx::string_bytes(key)) };
    let a = arrived(ctx, key);
    if let Some(due) = a.idmp_due {
        register_raw(ctx, db, name, due);
    }
    // Compression of queued nodes (pack_timer.rs): looked up by the new name when the
    // step runs (skipped if nothing is queued there).
    if crate::stream::compression() {
        super::pack_timer::note(ctx, db, name);
    }
    // Retention by age (age_timer.rs) and CONSUMERTTL (ttl_timer.rs) ride on this
    // subscription: their indexes know the key by its old name (or, for RESTORE, not
    // armed: rdb_load registered the groups without a context that may arm a timer).
    if let Some(due) = a.age_due {
        super::age_timer::register_arrived(ctx, db, name, due);
    }
    if !a.ttl_groups.is_empty() {
        // SAFETY: no arguments; plain clock read.
        let now = unsafe { api!(RedisModule_Milliseconds)() };
        for g in &a.ttl_groups {
            super::ttl_timer::schedule(ctx, db, name, g, now);
        }
    }
    0
}

/// What the time-driven parts need to know of a stream that arrived under a name.
#[derive(Default)]
struct Arrived {
    /// When its oldest iid expires (if it holds some).
    idmp_due: Option<u64>,
    /// When something in it ages out (if it has a MAXAGE; marked indexed).
    age_due: Option<u64>,
    /// Its groups with a CONSUMERTTL.
    ttl_groups: Vec<Vec<u8>>,
}

/// [`Arrived`] for the stream at `key` (selected DB), if it is ours.
fn arrived(ctx: *mut raw::RedisModuleCtx, key: *mut raw::RedisModuleString) -> Arrived {
    // SAFETY: valid context and key name; the key is closed below.
    let k = unsafe { api!(RedisModule_OpenKey)(ctx, key, raw::REDISMODULE_READ as c_int) };
    if k.is_null() {
        return Arrived::default();
    }
    let k: *mut raw::RedisModuleKey = k.cast();
    // SAFETY: an open key.
    let ours = unsafe { api!(RedisModule_KeyType)(k) } as isize == raw::REDISMODULE_KEYTYPE_MODULE
        // SAFETY: an open module key.
        && unsafe { api!(RedisModule_ModuleTypeGetType)(k) } == super::types::stream_type();
    let mut a = Arrived::default();
    // SAFETY: our type's values are Box<Stream> pointers, not borrowed elsewhere during the
    // callback; written only to mark the retention indexed.
    if let Some(s) = ours.then(|| unsafe { api!(RedisModule_ModuleTypeGetValue)(k).cast::<crate::stream::Stream>().as_mut() }).flatten() {
        a.age_due = s.age_due_ms();
        if let (Some(m), Some(d)) = (s.max_age.as_mut(), a.age_due) {
            m.indexed_due_ms = d;
        }
        a.idmp_due = s.idmp.as_ref().and_then(|m| m.due_ms());
        if let Some(mut it) = s.groups_iter() {
            while let Some((name, g)) = it.next() {
                if g.policy().is_some_and(|p| p.consumer_ttl.is_some()) {
                    a.ttl_groups.push(name.to_vec());
                }
            }
        }
    }
    // SAFETY: opened above, closed once.
    unsafe { api!(RedisModule_CloseKey)(k) };
    a
}

/// End of a load: indexes every stream with iids, once, when the load brought some.
pub fn loading_ended(ctx: *mut raw::RedisModuleCtx) {
    if !LOADED_IIDS.swap(false, Ordering::Relaxed) {
        return;
    }
    let found = super::timer::scan_streams(ctx, |s| s.idmp.as_ref().and_then(|m| m.due_ms()).map(|d| i64::try_from(d).unwrap_or(i64::MAX)));
    for (db, name, due) in found {
        TIMER.schedule(ctx, db, &name, due);
    }
}
