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
use redis_module::raw;
use std::collections::{BTreeSet, HashMap};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Keys visited per timer tick at most.
const KEYS_PER_TICK: usize = 64;
/// Entries removed per tick at most (spread over its keys; whole nodes).
const ENTRIES_PER_TICK: i64 = 10_000;
/// How soon a tick that stopped on its budget runs again (ms).
const CONTINUE_MS: u64 = 1;
/// How often a replica (or a loading server) looks again whether it became primary (ms).
const REPLICA_RECHECK_MS: u64 = 1000;
/// The longest the timer is armed for (ms); a due time further away is reached by
/// re-arming. The event loop reschedules a module timer with `int retval * 1000` (µs):
/// a period past 2,147,483 ms overflows into the past and the server spins (measured:
/// one stream due in an hour kept a core at 100% on 7.0.15).
const TIMER_PERIOD_MAX_MS: u64 = 600_000;

#[derive(Default)]
struct Index {
    by_due: BTreeSet<(u64, i32, Vec<u8>)>,
    by_key: HashMap<i32, HashMap<Vec<u8>, u64>>,
    timer: Option<(raw::RedisModuleTimerID, u64)>,
}

static INDEX: Mutex<Option<Index>> = Mutex::new(None);

/// A load brought streams with a MAXAGE (set by rdb_load, read at the end of loading).
pub static LOADED_RETAINED: AtomicBool = AtomicBool::new(false);

fn with_index<R>(f: impl FnOnce(&mut Index) -> R) -> R {
    let mut g = INDEX.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(Index::default))
}

fn now_ms() -> u64 {
    // SAFETY: no arguments; plain clock read.
    unsafe { api!(RedisModule_Milliseconds)() }.max(0) as u64
}

impl Index {
    /// Indexes (db, key) for `due_ms` (replacing a later or earlier time).
    fn put(&mut self, db: i32, key: &[u8], due_ms: u64) {
        let dbmap = self.by_key.entry(db).or_default();
        if let Some(slot) = dbmap.get_mut(key) {
            if *slot == due_ms {
                return;
            }
            self.by_due.remove(&(*slot, db, key.to_vec()));
            *slot = due_ms;
        } else {
            dbmap.insert(key.to_vec(), due_ms);
        }
        self.by_due.insert((due_ms, db, key.to_vec()));
    }

    fn take_due(&mut self, now: u64) -> Option<(i32, Vec<u8>)> {
        let first = self.by_due.first()?;
        if first.0 > now {
            return None;
        }
        let (_, db, key) = self.by_due.pop_first()?;
        if let Some(m) = self.by_key.get_mut(&db) {
            m.remove(&key);
        }
        Some((db, key))
    }

    fn earliest(&self) -> Option<u64> {
        self.by_due.first().map(|e| e.0)
    }
}

fn arm(ctx: *mut raw::RedisModuleCtx, idx: &mut Index, at_ms: u64) {
    let mut armed = idx.timer.map(|(id, when)| (id, i64::try_from(when).unwrap_or(i64::MAX)));
    let due = i64::try_from(at_ms).unwrap_or(i64::MAX);
    super::timer::arm_earliest(ctx, &mut armed, due, 1, TIMER_PERIOD_MAX_MS as i64, tick);
    idx.timer = armed.map(|(id, when)| (id, u64::try_from(when).unwrap_or(0)));
}

/// Key argument `key_i` of `c` holds a retained stream with something to age at `due_ms`.
pub fn register(c: &Ctx, key_i: usize, due_ms: u64) {
    // SAFETY: valid context of the running command.
    let db = unsafe { api!(RedisModule_GetSelectedDb)(c.raw()) };
    register_raw(c.raw(), db, c.arg(key_i), due_ms);
}

fn register_raw(ctx: *mut raw::RedisModuleCtx, db: i32, key: &[u8], due_ms: u64) {
    with_index(|idx| {
        idx.put(db, key, due_ms);
        if let Some(e) = idx.earliest() {
            arm(ctx, idx, e);
        }
    });
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

fn acts(ctx: *mut raw::RedisModuleCtx) -> bool {
    // SAFETY: valid context.
    let f = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    f & raw::REDISMODULE_CTX_FLAGS_MASTER != 0 && f & raw::REDISMODULE_CTX_FLAGS_LOADING == 0
}

unsafe extern "C" fn tick(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    fence::guard("retention timer", (), || {
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
        let mut budget = ENTRIES_PER_TICK;
        for _ in 0..KEYS_PER_TICK {
            if budget <= 0 {
                break;
            }
            let Some((db, key)) = with_index(|idx| idx.take_due(now)) else { break };
            // SAFETY: as above; a DB that no longer exists fails and the entry is dropped.
            if unsafe { api!(RedisModule_SelectDb)(ctx, db) } != raw::REDISMODULE_OK as c_int {
                continue;
            }
            let (removed, next) = age_one(ctx, &key, now, budget);
            budget = budget.saturating_sub(removed.max(1) as i64);
            if let Some(due) = next {
                with_index(|idx| idx.put(db, &key, due));
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

/// One pass on `key` of the selected DB: (entries removed, when next due).
fn age_one(ctx: *mut raw::RedisModuleCtx, key: &[u8], now: u64, budget: i64) -> (u64, Option<u64>) {
    let parts: [&[u8]; 2] = [b"XS.TRIM", key];
    let mut argv: Vec<*mut raw::RedisModuleString> = parts
        .iter()
        // SAFETY: new strings from valid buffers (NULL ctx: ours), freed below.
        .map(|b| unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), b.as_ptr().cast(), b.len()) })
        .collect();
    let result = {
        // SAFETY: the timer's context is valid during the callback; `argv` holds live
        // strings that outlive `c` (this block).
        let c = unsafe { Ctx::new(ctx, argv.as_mut_ptr(), argv.len() as c_int) };
        age_key(&c, now, budget)
    };
    for s in argv.drain(..) {
        // SAFETY: created above with a NULL ctx; Redis took its own references.
        unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), s) };
    }
    result
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
    fence::guard("retention scan", (), || {
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
        // SAFETY: our type's values are Box<Stream> pointers; written only to mark the index.
        let Some(s) = (unsafe { api!(RedisModule_ModuleTypeGetValue)(key).cast::<crate::stream::Stream>().as_mut() }) else { return };
        if let Some(due) = s.age_due_ms() {
            if let Some(a) = s.max_age.as_mut() {
                a.indexed_due_ms = due;
            }
            // SAFETY: the key name is valid during the callback; copied.
            found.push((unsafe { super::ctx::string_bytes(keyname) }.to_vec(), due));
        }
    })
}
