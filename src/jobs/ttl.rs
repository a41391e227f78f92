//! CONSUMERTTL expiry on the primary (issue 16, docs/queues.md).
//!
//! Groups with a CONSUMERTTL are in [`CONSUMER_TTL`] by (db, key + group), with the earliest
//! time one of their consumers can expire: SETPOLICY registers the group at once; every `>`
//! read and every pass registers it again with the time the pass computed
//! (src/ops/consumers.rs). When the timer fires, on the primary, at most [`GROUPS_PER_TICK`]
//! due groups are expired (each at most 16 consumers), their changes propagated as explicit
//! commands (XS.NACK ... FAIL, XS.GROUP DELCONSUMER), and each is registered again for its
//! next possible expiry. Groups whose consumers cannot expire yet are never looked at: the
//! cost is independent of the number of idle groups. On a replica (or while loading) due
//! groups are put back a second later, so that a promoted replica takes over. Entries for keys
//! or groups gone are dropped when reached. Groups loaded with a CONSUMERTTL (RDB, full sync,
//! RESTORE) are registered under their key's name, armed when loading ends.

use crate::ffi::ctx::{Ctx, Name};
use crate::ffi::timer::Job;
use crate::ops::due::{ttl_key, ttl_key_split, CONSUMER_TTL};
use crate::stream::Stream;

/// Groups expired per timer tick at most (bounded work, like active expiry).
const GROUPS_PER_TICK: usize = 64;

pub struct ConsumerTtl;

/// The groups of `s` with a CONSUMERTTL.
fn ttl_groups(s: &Stream) -> Vec<Vec<u8>> {
    let mut groups = Vec::new();
    if let Some(it) = s.groups_iter() {
        for (name, g) in it {
            if g.policy().is_some_and(|p| p.consumer_ttl.is_some()) {
                groups.push(name.to_vec());
            }
        }
    }
    groups
}

impl Job for ConsumerTtl {
    fn name(&self) -> &'static str {
        "CONSUMERTTL timer"
    }

    fn tick(&self, c: &Ctx) {
        let now = c.now_ms() as i64;
        let due = CONSUMER_TTL.pop_due(now, GROUPS_PER_TICK);
        let primary = c.acts_on_time();
        let mut again: Vec<(i32, Vec<u8>, i64)> = Vec::new();
        for (db, index_key) in due {
            if !primary {
                again.push((db, index_key, now + super::REPLICA_RECHECK_MS));
                continue;
            }
            let Some((key, group)) = ttl_key_split(&index_key) else { continue };
            if !c.select_db(db) {
                continue;
            }
            let mut k = c.open_key_named(key, true);
            let next = k.stream_mut().and_then(|s| {
                // Its index entry was just taken out: whatever the group recorded.
                if let Some(g) = s.group_mut(group) {
                    g.ttl_unscheduled();
                }
                crate::ops::consumers::expire(c, s, Name::Bytes(key), Name::Bytes(group), None, now)
            });
            drop(k);
            if let Some(n) = next.filter(|&n| n != i64::MAX) {
                again.push((db, index_key, n.max(now + 1)));
            }
        }
        for (db, index_key, at) in again {
            CONSUMER_TTL.put(db, &index_key, at);
        }
        CONSUMER_TTL.rearm(c, i64::MIN);
    }

    fn arrived(&self, c: &Ctx, db: i32, key: &[u8], s: &mut Stream) {
        let now = c.now_ms() as i64;
        for g in ttl_groups(s) {
            CONSUMER_TTL.schedule(c, db, &ttl_key(key, &g), now);
        }
    }

    fn loaded_value(&self, at: Option<(i32, &[u8])>, s: &Stream) {
        let Some((db, key)) = at else { return };
        let groups = ttl_groups(s);
        if groups.is_empty() {
            return;
        }
        // Looked at once loading ends (the index's timer is armed then).
        for g in groups {
            CONSUMER_TTL.put(db, &ttl_key(key, &g), 0);
        }
    }

    fn loading_ended(&self, c: &Ctx) {
        CONSUMER_TTL.rearm(c, i64::MIN);
    }
}
