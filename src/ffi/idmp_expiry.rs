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
use redis_module::raw;
use std::collections::{BTreeSet, HashMap};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Keys expired per timer tick at most.
const KEYS_PER_TICK: usize = 32;
/// Producers visited + iids removed per tick at most (spread over its keys).
const WORK_PER_TICK: u64 = 2000;
/// How soon a tick that stopped on its budget runs again (ms).
const CONTINUE_MS: u64 = 1;
/// How often a replica (or a loading server) looks again whether it became primary (ms).
const REPLICA_RECHECK_MS: u64 = 1000;
/// The longest the timer is armed for (ms); a due time further away is reached by
/// re-arming. The event loop reschedules a module timer with `int retval * 1000` (µs):
/// a period past 2,147,483 ms overflows into the past and the server spins (measured:
/// one stream due in an hour kept a core at 100% on 7.0.15).
const TIMER_PERIOD_MAX_MS: u64 = 600_000;

/// One indexed key.
struct Slot {
    due_ms: u64,
    /// Resume the stream's walk here (the previous pass hit its work limit).
    from: Option<Vec<u8>>,
}

#[derive(Default)]
struct Index {
    by_due: BTreeSet<(u64, i32, Vec<u8>)>,
    by_key: HashMap<i32, HashMap<Vec<u8>, Slot>>,
    /// The armed timer and the time it fires (Unix ms).
    timer: Option<(raw::RedisModuleTimerID, u64)>,
}

static INDEX: Mutex<Option<Index>> = Mutex::new(None);

/// A load brought streams with iids (set by rdb_load, read at the end of loading).
pub static LOADED_IIDS: AtomicBool = AtomicBool::new(false);

fn with_index<R>(f: impl FnOnce(&mut Index) -> R) -> R {
    let mut g = INDEX.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(Index::default))
}

fn now_ms() -> u64 {
    // SAFETY: no arguments; plain clock read.
    unsafe { api!(RedisModule_Milliseconds)() }.max(0) as u64
}

impl Index {
    /// Indexes (db, key) for `due_ms` unless it is indexed for that time or earlier.
    fn put(&mut self, db: i32, key: &[u8], due_ms: u64, from: Option<Vec<u8>>) {
        let dbmap = self.by_key.entry(db).or_default();
        if let Some(slot) = dbmap.get_mut(key) {
            if slot.due_ms <= due_ms && from.is_none() {
                return;
            }
            self.by_due.remove(&(slot.due_ms, db, key.to_vec()));
            slot.due_ms = due_ms;
            slot.from = from;
        } else {
            dbmap.insert(key.to_vec(), Slot { due_ms, from });
        }
        self.by_due.insert((due_ms, db, key.to_vec()));
    }

    /// Takes the first entry due at `now` or before.
    fn take_due(&mut self, now: u64) -> Option<(i32, Vec<u8>, Option<Vec<u8>>)> {
        let first = self.by_due.first()?;
        if first.0 > now {
            return None;
        }
        let (_, db, key) = self.by_due.pop_first()?;
        let slot = self.by_key.get_mut(&db).and_then(|m| m.remove(&key));
        Some((db, key, slot.and_then(|s| s.from)))
    }

    fn earliest(&self) -> Option<u64> {
        self.by_due.first().map(|e| e.0)
    }
}

/// Arms (or moves earlier) the timer for `at_ms`.
fn arm(ctx: *mut raw::RedisModuleCtx, idx: &mut Index, at_ms: u64) {
    let mut armed = idx.timer.map(|(id, when)| (id, i64::try_from(when).unwrap_or(i64::MAX)));
    let due = i64::try_from(at_ms).unwrap_or(i64::MAX);
    super::timer::arm_earliest(ctx, &mut armed, due, 1, TIMER_PERIOD_MAX_MS as i64, tick);
    idx.timer = armed.map(|(id, when)| (id, u64::try_from(when).unwrap_or(0)));
}

/// An iid was recorded in key argument `key_i` of `c`, due at `due_ms`.
pub fn register(c: &Ctx, key_i: usize, due_ms: u64) {
    // SAFETY: valid context of the running command.
    let db = unsafe { api!(RedisModule_GetSelectedDb)(c.raw()) };
    register_raw(c.raw(), db, c.arg(key_i), due_ms);
}

fn register_raw(ctx: *mut raw::RedisModuleCtx, db: i32, key: &[u8], due_ms: u64) {
    with_index(|idx| {
        idx.put(db, key, due_ms, None);
        if let Some(e) = idx.earliest() {
            arm(ctx, idx, e);
        }
    });
}

/// The server's role now: true on a primary that is not loading.
fn acts(ctx: *mut raw::RedisModuleCtx) -> bool {
    // SAFETY: valid context.
    let f = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    f & raw::REDISMODULE_CTX_FLAGS_MASTER != 0 && f & raw::REDISMODULE_CTX_FLAGS_LOADING == 0
}

unsafe extern "C" fn tick(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    fence::guard("idmp expiry timer", (), || {
        with_index(|idx| idx.timer = None);
        if !acts(ctx) {
            with_index(|idx| {
                if idx.earliest().is_some() {
                    arm(ctx, idx, now_ms() + REPLICA_RECHECK_MS);
                }
            });
            return;
        }
        let now = now_ms();
        // SAFETY: the timer's context has a temporary client whose DB we select.
        let home = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
        let mut work_left = WORK_PER_TICK;
        for _ in 0..KEYS_PER_TICK {
            if work_left == 0 {
                break;
            }
            let Some((db, key, from)) = with_index(|idx| idx.take_due(now)) else { break };
            // SAFETY: as above; a DB that no longer exists fails and the entry is dropped.
            if unsafe { api!(RedisModule_SelectDb)(ctx, db) } != raw::REDISMODULE_OK as c_int {
                continue;
            }
            let (removed, next) = expire_one(ctx, &key, now, work_left, from.as_deref());
            work_left = work_left.saturating_sub(removed.max(1));
            match next {
                Next::Resume(pid) => with_index(|idx| idx.put(db, &key, now, Some(pid))),
                Next::Due(due) => with_index(|idx| idx.put(db, &key, due, None)),
                Next::Drop => {}
            }
        }
        // SAFETY: as above; `home` was valid.
        unsafe { api!(RedisModule_SelectDb)(ctx, home) };
        with_index(|idx| {
            if let Some(e) = idx.earliest() {
                arm(ctx, idx, e.max(now + CONTINUE_MS));
            }
        });
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
    let mut argv: Vec<*mut raw::RedisModuleString> = parts
        .iter()
        // SAFETY: new strings from valid buffers (NULL ctx: ours), freed below.
        .map(|b| unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), b.as_ptr().cast(), b.len()) })
        .collect();
    let result = {
        // SAFETY: the timer's context is valid during the callback; `argv` holds live
        // strings that outlive `c` (this block).
        let c = unsafe { Ctx::new(ctx, argv.as_mut_ptr(), argv.len() as c_int) };
        match crate::commands::idmp::expire_key(&c) {
            Ok(Some(o)) => {
                if o.removed > 0 {
                    let args: Vec<Arg> = (1..argv.len()).map(Arg::Orig).collect();
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
        }
    };
    for s in argv.drain(..) {
        // SAFETY: created above with a NULL ctx; Redis took its own references.
        unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), s) };
    }
    result
}

/// Subscribes to the generic keyspace events that bring a stream under a new name
/// (called from OnLoad).
pub fn start(context: &redis_module::Context) -> Result<(), String> {
    // SAFETY: valid OnLoad ctx; the callback lives as long as the module.
    let rc = unsafe {
        api!(RedisModule_SubscribeToKeyspaceEvents)(context.ctx, raw::REDISMODULE_NOTIFY_GENERIC as c_int, Some(on_event))
    };
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
        if !matches!(ev, b"rename_to" | b"move_to" | b"copy_to" | b"restore") {
            return 0;
        }
        // SAFETY: the context selects the event's DB; the key name is valid during the callback.
        let (db, name) = unsafe { (api!(RedisModule_GetSelectedDb)(ctx), super::ctx::string_bytes(key)) };
        let (due, age_due) = due_of(ctx, key);
        if let Some(due) = due {
            register_raw(ctx, db, name, due);
        }
        // Compression of queued nodes (pack_timer.rs): looked up by the new name when the
        // step runs (skipped if nothing is queued there).
        if crate::stream::compression() {
            super::pack_timer::note(ctx, db, name);
        }
        // Retention by age (age_timer.rs) rides on this subscription.
        if let Some(due) = age_due {
            super::age_timer::register_arrived(ctx, db, name, due);
        }
        0
    })
}

/// The due times of the stream at `key` (selected DB), if it is ours: of its iids (if
/// it holds some) and of its retention by age (if it has one; marked indexed).
fn due_of(ctx: *mut raw::RedisModuleCtx, key: *mut raw::RedisModuleString) -> (Option<u64>, Option<u64>) {
    // SAFETY: valid context and key name; the key is closed below.
    let k = unsafe { api!(RedisModule_OpenKey)(ctx, key, raw::REDISMODULE_READ as c_int) };
    if k.is_null() {
        return (None, None);
    }
    let k: *mut raw::RedisModuleKey = k.cast();
    // SAFETY: an open key.
    let ours = unsafe { api!(RedisModule_KeyType)(k) } as isize == raw::REDISMODULE_KEYTYPE_MODULE
        // SAFETY: an open module key.
        && unsafe { api!(RedisModule_ModuleTypeGetType)(k) } == super::types::stream_type();
    let due = if ours {
        // SAFETY: our type's values are Box<Stream> pointers, not borrowed elsewhere
        // during the callback; written only to mark the retention indexed.
        let s = unsafe { api!(RedisModule_ModuleTypeGetValue)(k).cast::<crate::stream::Stream>().as_mut() };
        s.map_or((None, None), |s| {
            let age = s.age_due_ms();
            if let (Some(a), Some(d)) = (s.max_age.as_mut(), age) {
                a.indexed_due_ms = d;
            }
            (s.idmp.as_ref().and_then(|m| m.due_ms()), age)
        })
    } else {
        (None, None)
    };
    // SAFETY: opened above, closed once.
    unsafe { api!(RedisModule_CloseKey)(k) };
    due
}

/// End of a load: indexes every stream with iids, once, when the load brought some.
pub fn loading_ended(ctx: *mut raw::RedisModuleCtx) {
    if LOADED_IIDS.swap(false, Ordering::Relaxed) {
        index_all(ctx);
    }
}

/// Indexes every stream of ours with iids, in every DB (the loading event's context).
fn index_all(ctx: *mut raw::RedisModuleCtx) {
    // SAFETY: the event's context has a temporary client whose DB we select and restore.
    let home = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
    for db in 0.. {
        // SAFETY: as above; SelectDb fails past the last DB.
        if unsafe { api!(RedisModule_SelectDb)(ctx, db) } != raw::REDISMODULE_OK as c_int {
            break;
        }
        let mut found: Vec<(Vec<u8>, u64)> = Vec::new();
        // SAFETY: a cursor owned here, destroyed below.
        let cursor = unsafe { api!(RedisModule_ScanCursorCreate)() };
        if cursor.is_null() {
            continue;
        }
        let data: *mut Vec<(Vec<u8>, u64)> = &mut found;
        // SAFETY: valid context and cursor; the callback runs inside RM_Scan with `data`.
        while unsafe { api!(RedisModule_Scan)(ctx, cursor, Some(collect), data.cast()) } != 0 {}
        // SAFETY: created above.
        unsafe { api!(RedisModule_ScanCursorDestroy)(cursor) };
        for (name, due) in found {
            register_raw(ctx, db, &name, due);
        }
    }
    // SAFETY: as above.
    unsafe { api!(RedisModule_SelectDb)(ctx, home) };
}

unsafe extern "C" fn collect(_ctx: *mut raw::RedisModuleCtx, keyname: *mut raw::RedisModuleString, key: *mut raw::RedisModuleKey, data: *mut c_void) {
    fence::guard("idmp scan", (), || {
        // SAFETY: the Vec passed by loading_ended, alive during RM_Scan.
        let Some(found) = (unsafe { data.cast::<Vec<(Vec<u8>, u64)>>().as_mut() }) else { return };
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
        // SAFETY: our type's values are Box<Stream> pointers; read only.
        let due = unsafe { api!(RedisModule_ModuleTypeGetValue)(key).cast::<crate::stream::Stream>().as_ref() }
            .and_then(|s| s.idmp.as_ref())
            .and_then(|m| m.due_ms());
        if let Some(due) = due {
            // SAFETY: the key name is valid during the callback; copied.
            found.push((unsafe { super::ctx::string_bytes(keyname) }.to_vec(), due));
        }
    })
}
