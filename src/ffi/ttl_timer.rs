//! CONSUMERTTL expiry on the primary's timer (issue 16).
//!
//! Groups with a CONSUMERTTL are registered here, by (db, key, group), with the
//! earliest time one of their consumers can expire (SETPOLICY registers the group
//! at once; every `>` read and every expiry pass registers it again with the time
//! the pass computed, src/commands/queue.rs `expire_consumers`). The index is a
//! [`KeyTimer`] (keyed by db and a key+group composite); ONE module timer is
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
use super::timer::KeyTimer;
use redis_module::raw;
use std::os::raw::c_void;

/// Groups expired per timer tick at most (bounded work, like active expiry).
const GROUPS_PER_TICK: usize = 64;
/// When a replica looks again at what is due (it acts on nothing itself).
const REPLICA_RETRY_MS: i64 = 1000;

/// The groups (key + group composites) by the time one of their consumers can expire.
pub static TIMER: KeyTimer = KeyTimer::new(on_timer, 0);

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
    TIMER.schedule(ctx, db, &composite(key, group), due_ms);
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
    for group in groups {
        TIMER.put(db, &composite(&key, &group), now);
    }
}

/// When loading ends: arms the timer for what loading registered.
pub fn arm_after_loading(ctx: *mut raw::RedisModuleCtx) {
    TIMER.rearm(ctx, i64::MIN);
}

/// Groups registered (tests).
pub fn pending() -> usize {
    TIMER.len()
}

unsafe extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    fence::guard("CONSUMERTTL timer", (), || {
        TIMER.fired();
        let now = now_ms();
        let due = TIMER.pop_due(now, GROUPS_PER_TICK);
        // A primary, not loading, clients not paused (timer.rs `acts`).
        let primary = super::timer::acts(ctx);
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
            let next = super::timer::with_command(ctx, &[key, group], |c: &Ctx| {
                let mut k = c.key(0, true);
                match k.stream_mut() {
                    Some(s) => {
                        // Its index entry was just taken out: whatever the group recorded.
                        if let Some(g) = s.group_mut(group) {
                            g.ttl_unscheduled();
                        }
                        crate::commands::queue::expire_consumers(c, s, group, 0, 1, None, now)
                    }
                    None => None,
                }
            });
            if let Some(n) = next {
                if n != i64::MAX {
                    again.push((db, comp, n.max(now + 1)));
                }
            }
        }
        for (db, comp, at) in again {
            TIMER.put(db, &comp, at);
        }
        TIMER.rearm(ctx, i64::MIN);
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
