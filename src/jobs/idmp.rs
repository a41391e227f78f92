//! Time-driven expiry of idempotency records (REDIS8.md §5.4, docs/redis8.md "IDMP expiry").
//!
//! [`IDMP`] indexes the streams that hold records by the time their oldest one expires: a key
//! is added when a record is written (XS.ADD IDMP / IDMPAUTO, XS.IDMPRECORD), when a stream
//! arrives under a new name (RENAME, MOVE, COPY, RESTORE), and once at the end of a load that
//! brought records (RDB, full sync). A key deleted, renamed away or replaced is dropped when
//! reached. Only a primary acts: a replica never expires a record on its own clock (it would
//! answer a replicated IDMP XADD differently from its primary). The work is bounded per tick
//! (KEYS_PER_TICK keys, WORK_PER_TICK producers visited + records removed), and each pass that
//! removed records is propagated as `XS.IDMPEXPIRE key now-ms LIMIT n [FROM pid]`
//! (src/ops/idmp.rs). The index is rebuilt, not persisted: replicas keep theirs up to date
//! through the replicated records, so a promoted replica expires from its first tick.

use super::clamp;
use crate::ffi::ctx::{Ctx, Name};
use crate::ffi::timer::Job;
use crate::ops::due::IDMP;
use crate::stream::Stream;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Keys expired per timer tick at most.
const KEYS_PER_TICK: usize = 32;
/// Producers visited + records removed per tick at most (spread over its keys).
const WORK_PER_TICK: u64 = 2000;

/// Where to resume a stream's walk (the previous pass hit its work limit): its producer.
static RESUME: Mutex<Option<Resume>> = Mutex::new(None);
/// (db, key) -> the producer to resume from.
type Resume = HashMap<(i32, Vec<u8>), Vec<u8>>;

/// A load brought streams with records (set by rdb_load, read at the end of loading).
static LOADED: AtomicBool = AtomicBool::new(false);

fn resume() -> MutexGuard<'static, Option<Resume>> {
    RESUME.lock().unwrap_or_else(PoisonError::into_inner)
}

fn due_ms(s: &Stream) -> Option<u64> {
    s.idmp.as_ref().and_then(|m| m.due_ms())
}

pub struct IdmpExpiry;

impl Job for IdmpExpiry {
    fn name(&self) -> &'static str {
        "idmp expiry timer"
    }

    fn tick(&self, c: &Ctx) {
        super::primary_pass(c, &IDMP, KEYS_PER_TICK, WORK_PER_TICK, |now, db, key, work_left| {
            let from = resume().as_mut().and_then(|m| m.remove(&(db, key.clone())));
            let Some(o) = crate::ops::idmp::expire(c, Name::Bytes(&key), now.max(0) as u64, Some(work_left), from.as_deref()) else {
                return 0;
            };
            match (o.resume_from, o.next_due_ms) {
                (Some(pid), _) => {
                    IDMP.put(db, &key, now);
                    resume().get_or_insert_with(HashMap::new).insert((db, key), pid);
                }
                (None, Some(due)) => IDMP.put(db, &key, clamp(due)),
                (None, None) => {}
            }
            o.removed
        });
    }

    fn arrived(&self, c: &Ctx, db: i32, key: &[u8], s: &mut Stream) {
        if let Some(due) = due_ms(s) {
            IDMP.schedule(c, db, key, clamp(due));
        }
    }

    fn loaded_value(&self, _at: Option<(i32, &[u8])>, s: &Stream) {
        if s.idmp.as_ref().is_some_and(|m| m.pids_tracked() > 0) {
            // Indexed at the end of the load (RESTORE: when its keyspace event arrives).
            LOADED.store(true, Ordering::Relaxed);
        }
    }

    fn loading_ended(&self, c: &Ctx) {
        super::index_after_load(c, &LOADED, &IDMP, |s| due_ms(s));
    }
}
