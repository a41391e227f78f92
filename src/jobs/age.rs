//! Retention by age on the primary (issue 17, docs/retention.md): trims streams that carry a
//! MAXAGE and that nobody writes to (XS.ADD trims the streams it writes).
//!
//! [`AGE`] indexes a stream for the time its oldest entry (EXACT) or its first node (whole
//! nodes) ages out (`Stream::age_due_ms`): when XS.CFGSET sets a MAXAGE, when XS.ADD writes to
//! a retained stream not indexed yet, when a stream arrives under a new name, and at the end of
//! a load that brought retained streams. A stream with nothing left to age leaves the index
//! until it is written again. Only a primary acts; the work is bounded per tick (KEYS_PER_TICK
//! keys, ENTRIES_PER_TICK entries), each pass propagated as an exact XS.TRIM
//! (src/ops/trim.rs `by_age`).

use super::clamp;
use crate::ffi::ctx::{Ctx, Name};
use crate::ffi::timer::Job;
use crate::ops::due::AGE;
use crate::stream::Stream;
use std::sync::atomic::{AtomicBool, Ordering};

/// Keys visited per timer tick at most.
const KEYS_PER_TICK: usize = 64;
/// Entries removed per tick at most (spread over its keys; whole nodes).
const ENTRIES_PER_TICK: u64 = 10_000;

/// A load brought streams with a MAXAGE (set by rdb_load, read at the end of loading).
static LOADED: AtomicBool = AtomicBool::new(false);

/// When something in `s` ages out, marked as indexed for then.
fn index_due(s: &mut Stream) -> Option<u64> {
    let due = s.age_due_ms()?;
    if let Some(a) = s.max_age.as_mut() {
        a.indexed_due_ms = due;
    }
    Some(due)
}

pub struct Age;

impl Job for Age {
    fn name(&self) -> &'static str {
        "retention timer"
    }

    fn tick(&self, c: &Ctx) {
        super::primary_pass(c, &AGE, KEYS_PER_TICK, ENTRIES_PER_TICK, |now, db, key, budget| {
            let budget = i64::try_from(budget).unwrap_or(i64::MAX);
            let (removed, next) = crate::ops::trim::by_age(c, Name::Bytes(&key), now.max(0) as u64, budget);
            if let Some(due) = next {
                AGE.put(db, &key, clamp(due));
            }
            removed
        });
    }

    fn arrived(&self, c: &Ctx, db: i32, key: &[u8], s: &mut Stream) {
        if let Some(due) = index_due(s) {
            AGE.schedule(c, db, key, clamp(due));
        }
    }

    fn loaded_value(&self, _at: Option<(i32, &[u8])>, s: &Stream) {
        if s.max_age.is_some() {
            // Indexed at the end of the load (RESTORE: when its keyspace event arrives).
            LOADED.store(true, Ordering::Relaxed);
        }
    }

    fn loading_ended(&self, c: &Ctx) {
        super::index_after_load(c, &LOADED, &AGE, index_due);
    }
}
