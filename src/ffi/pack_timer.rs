//! Compression of sealed nodes off the append path (issue 18, `xstream.compression`).
//!
//! XS.ADD seals a full node without compressing it: the node's key goes on its stream's
//! `pack_queue` and the stream's (db, key) into this index; ONE module timer (src/ffi/timer.rs)
//! then compresses queued nodes, a bounded amount per tick (NODES_PER_TICK nodes or TICK_BUDGET
//! of time), oldest stream first. Nothing polls: the timer is armed only while the index has
//! keys.
//!
//! The node layout is not replicated: every server (primary or replica) runs this with its own
//! setting, and nothing is propagated or signalled (the content does not change). Keys are
//! looked up by name when the step runs: a key deleted, renamed, moved, swapped or flushed
//! meanwhile is skipped when it is not ours or has nothing queued (a renamed stream is indexed
//! again under its new name by the keyspace event, or at its next seal).

use super::api;
use super::fence;
use redis_module::raw;
use std::collections::{HashSet, VecDeque};
use std::os::raw::{c_int, c_void};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Nodes compressed per tick at most.
const NODES_PER_TICK: usize = 256;
/// Time spent per tick at most (checked between nodes: a 4 KB node takes a few µs).
const TICK_BUDGET: Duration = Duration::from_micros(1000);
/// Delay between a seal and the first tick (ms): a burst of appends seals several nodes per
/// tick, and a tick that stopped on its budget runs again after this much time for commands.
const DELAY_MS: i64 = 2;

#[derive(Default)]
struct Index {
    order: VecDeque<(i32, Vec<u8>)>,
    set: HashSet<(i32, Vec<u8>)>,
    timer: super::timer::Armed,
}

static INDEX: Mutex<Option<Index>> = Mutex::new(None);

fn with_index<R>(f: impl FnOnce(&mut Index) -> R) -> R {
    let mut g = INDEX.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(Index::default))
}

fn arm(ctx: *mut raw::RedisModuleCtx, idx: &mut Index) {
    let due = super::timer::now_ms() + DELAY_MS;
    super::timer::arm_earliest(ctx, &mut idx.timer, due, 1, DELAY_MS, tick);
}

/// `key` of `db` holds a stream with queued nodes.
pub fn note(ctx: *mut raw::RedisModuleCtx, db: i32, key: &[u8]) {
    with_index(|idx| {
        let k = (db, key.to_vec());
        if !idx.set.contains(&k) {
            idx.set.insert(k.clone());
            idx.order.push_back(k);
        }
        if idx.timer.is_none() {
            arm(ctx, idx);
        }
    });
}

/// The running command sealed nodes of the stream at `key` (selected DB).
pub fn note_ctx(c: &super::ctx::Ctx, key: &[u8]) {
    // SAFETY: valid context of the running command.
    let db = unsafe { api!(RedisModule_GetSelectedDb)(c.raw()) };
    note(c.raw(), db, key);
}

/// Keys waiting (tests, INFO).
pub fn queued_keys() -> usize {
    with_index(|idx| idx.order.len())
}

unsafe extern "C" fn tick(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    fence::guard("compression timer", (), || {
        with_index(|idx| idx.timer = None);
        let start = Instant::now();
        // SAFETY: the timer's context has a temporary client whose DB we select and restore.
        let home = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
        let mut left = NODES_PER_TICK;
        while left > 0 && start.elapsed() < TICK_BUDGET {
            let Some((db, key)) = with_index(|idx| {
                let k = idx.order.pop_front()?;
                idx.set.remove(&k);
                Some(k)
            }) else {
                break;
            };
            // SAFETY: as above; a DB that no longer exists fails and the key is dropped.
            if unsafe { api!(RedisModule_SelectDb)(ctx, db) } != raw::REDISMODULE_OK as c_int {
                continue;
            }
            let (taken, more) = pack_key(ctx, &key, left, start);
            left = left.saturating_sub(taken.max(1));
            if more {
                with_index(|idx| {
                    let k = (db, key);
                    if idx.set.insert(k.clone()) {
                        idx.order.push_back(k);
                    }
                });
            }
        }
        // SAFETY: as above; `home` was valid.
        unsafe { api!(RedisModule_SelectDb)(ctx, home) };
        with_index(|idx| {
            if !idx.order.is_empty() {
                arm(ctx, idx);
            }
        });
    })
}

/// Compresses up to `max` queued nodes of the stream at `key` (selected DB), if it is ours:
/// (nodes taken off its queue, whether some remain).
fn pack_key(ctx: *mut raw::RedisModuleCtx, key: &[u8], max: usize, start: Instant) -> (usize, bool) {
    // SAFETY: a string from a valid buffer (NULL ctx: ours), freed below.
    let name = unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), key.as_ptr().cast(), key.len()) };
    // SAFETY: valid context and key name; the key is closed below. READ: no expiry
    // deletion, no keyspace side effect (the value is our own memory, changed in layout only).
    let k = unsafe { api!(RedisModule_OpenKey)(ctx, name, raw::REDISMODULE_READ as c_int) };
    let mut out = (0, false);
    if !k.is_null() {
        let k: *mut raw::RedisModuleKey = k.cast();
        // SAFETY: an open key.
        let ours = unsafe { api!(RedisModule_KeyType)(k) } as isize == raw::REDISMODULE_KEYTYPE_MODULE
            // SAFETY: an open module key.
            && unsafe { api!(RedisModule_ModuleTypeGetType)(k) } == super::types::stream_type();
        if ours {
            // SAFETY: our type's values are Box<Stream> pointers, not borrowed elsewhere
            // during the timer callback (no command runs meanwhile).
            if let Some(s) = unsafe { api!(RedisModule_ModuleTypeGetValue)(k).cast::<crate::stream::Stream>().as_mut() } {
                let taken = s.pack_queued(max, || start.elapsed() < TICK_BUDGET);
                if taken > 0 {
                    super::stats::account(s);
                }
                out = (taken, !s.pack_queue.is_empty());
            }
        }
        // SAFETY: opened above, closed once.
        unsafe { api!(RedisModule_CloseKey)(k) };
    }
    // SAFETY: created above with a NULL ctx.
    unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), name) };
    out
}
