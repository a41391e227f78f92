//! Time-driven work: each job implements ffi's [`Job`](crate::ffi::timer::Job) over one of the
//! indexes of src/ops/due.rs, and does its work through src/ops. Jobs act only on a primary
//! that is not loading, with clients not paused (`Ctx::acts_on_time`), bounded per tick, and
//! propagate what they did as explicit commands; replicas and the AOF never act on their own
//! clocks. No unsafe code here (lib.rs forbids it).
//!
//! - `wake`: signals keys whose blocked CLAIM / ACKTIMEOUT / delayed readers have something due.
//! - `ttl`: CONSUMERTTL expiry of idle consumers.
//! - `idmp`: expiry of idempotency records.
//! - `age`: retention by age (MAXAGE) of streams nobody writes to.
//! - `pack`: compression of sealed nodes off the append path (every server, nothing propagated),
//!   then `tier`: sealed nodes beyond `xstream.tier-memory` to disk.
//! - `keylog`: the keyspace log, run by the server's notifications rather than a clock: each
//!   notification kept, appended after its execution unit (post-notification jobs).

#![forbid(unsafe_code)]

pub mod age;
pub mod idmp;
pub mod keylog;
pub mod pack;
pub mod tier;
pub mod ttl;
pub mod wake;

use crate::ffi::ctx::Ctx;
use crate::ffi::timer::KeyTimer;
use crate::ops::due;
use std::sync::atomic::{AtomicBool, Ordering};

/// At load: binds every job to its index (the order in which they hear arrivals and loads).
pub fn init() {
    due::IDMP.bind(&idmp::IdmpExpiry);
    due::PACK.bind(&pack::Pack);
    due::AGE.bind(&age::Age);
    due::CONSUMER_TTL.bind(&ttl::ConsumerTtl);
    due::READERS.bind(&wake::Wake);
    crate::ffi::keyspace::listen(&keylog::KEYLOG);
}

/// How often a replica (or a loading server) looks again whether it became primary (ms).
const REPLICA_RECHECK_MS: i64 = 1000;
/// How soon a tick that stopped on its budget runs again (ms).
const CONTINUE_MS: i64 = 1;

/// A due time as the indexes keep it.
fn clamp(due: u64) -> i64 {
    i64::try_from(due).unwrap_or(i64::MAX)
}

/// The end of a load that brought streams `loaded` marks (set by the job's `loaded_value`):
/// every stream of ours for which `due` answers a time is indexed in `timer`, once.
fn index_after_load(c: &Ctx, loaded: &AtomicBool, timer: &'static KeyTimer, due: impl FnMut(&mut crate::stream::Stream) -> Option<u64>) {
    if !loaded.swap(false, Ordering::Relaxed) {
        return;
    }
    let mut due = due;
    for (db, name, at) in crate::ffi::timer::scan_streams(c, |s| due(s).map(clamp)) {
        timer.schedule(c, db, &name, at);
    }
}

/// The primary's bounded pass over the keys of `timer` due now, the shape of the jobs that
/// write (age, idmp): at most `keys_max` keys and about `work_max` units of work, each key
/// handed to `step(now, db, key, work left)` in its DB, which does its work, puts the key back
/// for when it is due again, and answers the work it did. A replica (or a loading server)
/// does nothing and looks again later; the context's DB is restored.
fn primary_pass(c: &Ctx, timer: &'static KeyTimer, keys_max: usize, work_max: u64, mut step: impl FnMut(i64, i32, Vec<u8>, u64) -> u64) {
    let now = c.now_ms() as i64;
    if !c.acts_on_time() {
        timer.rearm(c, now + REPLICA_RECHECK_MS);
        return;
    }
    let home = c.selected_db();
    let mut left = work_max;
    for _ in 0..keys_max {
        if left == 0 {
            break;
        }
        let Some((db, key)) = timer.pop_due(now, 1).pop() else { break };
        if !c.select_db(db) {
            continue;
        }
        left = left.saturating_sub(step(now, db, key, left).max(1));
    }
    c.select_db(home);
    timer.rearm(c, now + CONTINUE_MS);
}
