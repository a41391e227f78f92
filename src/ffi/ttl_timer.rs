//! CONSUMERTTL expiry on the primary's timer (issue 16).
//!
//! Groups with a CONSUMERTTL are registered here, by (db, key, group), with the
//! earliest time one of their consumers can expire (SETPOLICY registers the group
//! at once; every `>` read and every expiry pass registers it again with the time
//! the pass computed, src/commands/queue.rs `expire_consumers`). The index is
//! [`WakeIndex`] (pure, keyed by db and a key+group composite); ONE module timer is
//! armed for its earliest time. When it fires, on the primary, at most
//! [`GROUPS_PER_TICK`] due groups are expired (each at most 16 consumers), their
//! changes propagated as the explicit commands (XS.NACK ... FAIL, XS.GROUP
//! DELCONSUMER), and each is registered again for its next possible expiry.
//! Groups whose consumers cannot expire yet are never looked at: the cost is
//! independent of the number of idle groups. On a replica (or while loading) the
//! timer acts on nothing: due groups are put back a second later, so that a
//! promoted replica takes over. Entries for keys or groups gone are dropped when
//! reached.
//! Groups loaded with a CONSUMERTTL (RDB, full sync, RESTORE) are registered by the
//! loader under their key's name, and the timer is armed when loading ends.
//!
//! Main thread only; the mutexes are never contended.

use super::api;
use super::ctx::Ctx;
use super::fence;
use crate::stream::wake::WakeIndex;
use redis_module::raw;
use std::os::raw::c_void;
use std::sync::Mutex;

/// Groups expired per timer tick at most (bounded work, like active expiry).
const GROUPS_PER_TICK: usize = 64;
/// The longest the timer is armed for.
const TIMER_PERIOD_MAX_MS: i64 = 600_000;
/// When a replica looks again at what is due (it acts on nothing itself).
const REPLICA_RETRY_MS: i64 = 1000;

static INDEX: Mutex<Option<WakeIndex>> = Mutex::new(None);
static ARMED: Mutex<Option<(raw::RedisModuleTimerID, i64)>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn now_ms() -> i64 {
    // SAFETY: no arguments; plain clock read.
    unsafe { api!(RedisModule_Milliseconds)() }
}

/// `key` and `group` in one index key: u32 LE key length, key, group.
fn composite(key: &[u8], group: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + key.len() + group.len());
    v.extend_from_slice(&(key.len() as u32).to_le_bytes());
    v.extend_from_slice(key);
    v.extend_from_slice(group);
    v
}

fn split(c: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u32::from_le_bytes(c.get(..4)?.try_into().ok()?) as usize;
    let rest = c.get(4..)?;
    Some((rest.get(..n)?, rest.get(n..)?))
}

/// Registers group `group` of `key` in `db` to be looked at at `due_ms`.
pub fn schedule(ctx: *mut raw::RedisModuleCtx, db: i32, key: &[u8], group: &[u8], due_ms: i64) {
    let earliest = {
        let mut g = lock(&INDEX);
        let w = g.get_or_insert_with(WakeIndex::new);
        w.insert(db, &composite(key, group), due_ms);
        w.earliest()
    };
    arm(ctx, earliest);
}

/// Registers the CONSUMERTTL groups of a stream just loaded (RDB, full sync, RESTORE) under
/// its key, to be looked at now; the timer is armed when loading ends
/// ([`arm_after_loading`]) or by the next registration. Skipped when the server
/// does not name the key to the loader.
///
/// # Safety
/// `io` is the IO handle of the running rdb_load callback.
pub unsafe fn register_loaded(io: *mut raw::RedisModuleIO, s: &crate::stream::Stream) {
    let Some(mut it) = s.groups_iter() else { return };
    let mut groups = Vec::new();
    while let Some((name, g)) = it.next() {
        if g.policy().is_some_and(|p| p.consumer_ttl.is_some()) {
            groups.push(name.to_vec());
        }
    }
    if groups.is_empty() {
        return;
    }
    // SAFETY: optional API (7.0+), looked up without panicking; the handle is the callback's.
    let (Some(name_of), Some(db_of)) = (unsafe { raw::RedisModule_GetKeyNameFromIO }, unsafe { raw::RedisModule_GetDbIdFromIO }) else {
        return;
    };
    // SAFETY: the IO handle of the running callback; the name (if any) lives as long as it.
    let (name, db) = unsafe { (name_of(io), db_of(io)) };
    if name.is_null() || db < 0 {
        return;
    }
    // SAFETY: a live string of the callback (checked non-null).
    let key = unsafe { super::ctx::string_bytes(name.cast_mut()) }.to_vec();
    let now = now_ms();
    let mut g = lock(&INDEX);
    let w = g.get_or_insert_with(WakeIndex::new);
    for group in groups {
        w.insert(db, &composite(&key, &group), now);
    }
}

/// When loading ends: arms the timer for what loading registered.
pub fn arm_after_loading(ctx: *mut raw::RedisModuleCtx) {
    let earliest = lock(&INDEX).as_ref().and_then(WakeIndex::earliest);
    arm(ctx, earliest);
}

/// Groups registered (tests).
pub fn pending() -> usize {
    lock(&INDEX).as_ref().map_or(0, WakeIndex::len)
}

fn arm(ctx: *mut raw::RedisModuleCtx, earliest: Option<i64>) {
    let Some(due) = earliest else { return };
    super::timer::arm_earliest(ctx, &mut lock(&ARMED), due, 0, TIMER_PERIOD_MAX_MS, on_timer);
}

unsafe extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    fence::guard("CONSUMERTTL timer", (), || {
        *lock(&ARMED) = None;
        let now = now_ms();
        let due = lock(&INDEX).as_mut().map(|w| w.pop_due_max(now, GROUPS_PER_TICK)).unwrap_or_default();
        // SAFETY: the timer's context, valid during the callback.
        let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
        let primary = flags & (raw::REDISMODULE_CTX_FLAGS_SLAVE | raw::REDISMODULE_CTX_FLAGS_LOADING) == 0;
        let mut again: Vec<(i32, Vec<u8>, i64)> = Vec::new();
        for (db, comp) in due {
            if !primary {
                again.push((db, comp, now + REPLICA_RETRY_MS));
                continue;
            }
            let Some((key, group)) = split(&comp) else { continue };
            // SAFETY: the timer's context (a temporary client of ours); SelectDb only moves it.
            if unsafe { api!(RedisModule_SelectDb)(ctx, db) } != raw::REDISMODULE_OK as i32 {
                continue;
            }
            // SAFETY: strings owned here (NULL ctx), freed below, after the Ctx that uses them.
            let mut argv = unsafe {
                [
                    api!(RedisModule_CreateString)(std::ptr::null_mut(), key.as_ptr().cast(), key.len()),
                    api!(RedisModule_CreateString)(std::ptr::null_mut(), group.as_ptr().cast(), group.len()),
                ]
            };
            let next = {
                // SAFETY: the timer's context is valid during the callback; `argv` holds two live
                // strings that outlive `c` (this block).
                let c = unsafe { Ctx::new(ctx, argv.as_mut_ptr(), 2) };
                let mut k = c.key(0, true);
                match k.stream_mut() {
                    Some(s) => {
                        // Its index entry was just taken out: whatever the group recorded.
                        if let Some(g) = s.group_mut(group) {
                            g.ttl_unscheduled();
                        }
                        crate::commands::queue::expire_consumers(&c, s, group, 0, 1, None, now)
                    }
                    None => None,
                }
            };
            for s in argv.iter_mut() {
                // SAFETY: created above with a NULL ctx; Redis took its own references if it kept any.
                unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), *s) };
            }
            if let Some(n) = next {
                if n != i64::MAX {
                    again.push((db, comp, n.max(now + 1)));
                }
            }
        }
        let earliest = {
            let mut g = lock(&INDEX);
            let w = g.get_or_insert_with(WakeIndex::new);
            for (db, comp, at) in again {
                w.insert(db, &comp, at);
            }
            w.earliest()
        };
        arm(ctx, earliest);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composite_round_trip() {
        for (k, g) in [(&b"k"[..], &b"g"[..]), (b"", b""), (b"a\0b", b"\xff")] {
            assert_eq!(split(&composite(k, g)), Some((k, g)));
        }
        assert_eq!(split(b"\x05\0\0\0ab"), None);
    }
}
