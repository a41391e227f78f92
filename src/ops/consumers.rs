//! Expiry of idle consumers (CONSUMERTTL, docs/queues.md): a shared write of `>` reads and the
//! primary's CONSUMERTTL job.

use crate::ffi::ctx::{Arg, Ctx, Name};
use crate::ffi::stats::{bump, EVENTS};
use crate::stream::{NackCount, Stream, StreamId};

/// Consumers of group `group` of the stream `s` at `key` (selected DB) idle
/// past the policy's CONSUMERTTL are deleted (never `reader`, the consumer reading
/// now); their pending entries stay pending, unowned (as XS.NACK FAIL leaves them),
/// for the next `>` reader. Propagated as `XS.NACK key group FAIL IDS n ...` then
/// `XS.GROUP DELCONSUMER key group name` (which then drops nothing). At most
/// TTL_EXPIRY_MAX consumers per call; the O(consumers) scan runs only once the
/// earliest possible expiry has come. Returns when the group must be looked at
/// again (None: no CONSUMERTTL, or registered for that already). Called by `>` reads and by the
/// primary's timer (src/jobs/ttl.rs).
pub fn expire(c: &Ctx, s: &mut Stream, key: Name<'_>, group: Name<'_>, reader: Option<&[u8]>, now: i64) -> Option<i64> {
    const TTL_EXPIRY_MAX: usize = 16;
    let g = c.name_bytes(group);
    let grp = s.group_mut(g)?;
    let ttl = grp.policy()?.consumer_ttl?;
    let names = grp.take_expired_consumers(now, TTL_EXPIRY_MAX);
    let db = c.selected_db();
    let mut released = false;
    for name in names {
        // Not the reader, nor a consumer blocked in a read (it is waiting, not gone: the
        // next scan looks again).
        if Some(&name[..]) == reader || crate::ffi::blocking::consumer_waiting(db, c.name_bytes(key), g, &name) {
            continue;
        }
        let Some(slot) = grp.find_consumer(&name) else { continue };
        let ids: Vec<StreamId> = match grp.consumer(slot) {
            Some(cons) => {
                let mut v = Vec::with_capacity(cons.pel().len());
                let mut it = cons.pel().iter();
                while let Some((k, _)) = it.next() {
                    v.push(StreamId::from_be_bytes(k).unwrap_or_default());
                }
                v
            }
            None => continue,
        };
        for &id in &ids {
            grp.nack_entry(id, NackCount::Fail, false);
        }
        released |= !ids.is_empty();
        if !ids.is_empty() {
            let texts: Vec<Vec<u8>> = ids.iter().map(|id| id.to_bytes()).collect();
            let n = ids.len().to_string();
            let mut args: Vec<Arg> = vec![key.into(), group.into(), Arg::New(b"FAIL"), Arg::New(b"IDS"), Arg::New(n.as_bytes())];
            args.extend(texts.iter().map(|t| Arg::New(t)));
            c.replicate(c"XS.NACK", &args);
        }
        grp.delete_consumer(&name);
        c.replicate(c"XS.GROUP", &[Arg::New(b"DELCONSUMER"), key.into(), group.into(), Arg::New(&name)]);
        bump(&EVENTS.consumers_expired, 1);
    }
    if released {
        // Blocked `>` readers of the group have entries to take now.
        c.signal_ready_name(key);
    }
    let at = grp.policy().map_or(i64::MAX, |p| p.ttl_check_at);
    // A consumer seen now (the reader) expires at now + ttl at the earliest.
    let next = at.min(now.saturating_add(ttl));
    // Registered already for a time still to come: nothing to do (the common case of a read).
    grp.ttl_schedule_needed(now, next).then_some(next)
}
