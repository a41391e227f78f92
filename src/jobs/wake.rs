//! Timed wake-ups of blocked readers (REDIS8.md §4.5): `XS.READGROUP ... BLOCK ms CLAIM
//! min-idle`, ACKTIMEOUT and delayed-delivery readers must re-run when something of theirs
//! becomes due, although no write touches the key then. When such a reader blocks (and each
//! time it is woken without being served) the command registers its keys in
//! [`due::READERS`](crate::ops::due::READERS) with that time (src/commands/read.rs). When the
//! timer fires, every due key is signalled ready in its DB; Redis then serves the readers
//! blocked on those keys before it sleeps (handleClientsBlockedOnKeys from beforeSleep): each
//! re-runs its read, and one with nothing due yet stays blocked and registers again. Entries
//! whose readers left (timeout, served by a write, disconnect) are dropped when reached, at the
//! price of one signal nobody waits for.

use crate::ffi::ctx::{paused, Ctx, Name};
use crate::ffi::timer::Job;
use crate::ops::due::READERS;

/// While clients are paused, how often the wake-ups look again (ms).
const PAUSED_RECHECK_MS: i64 = 50;

pub struct Wake;

impl Job for Wake {
    fn name(&self) -> &'static str {
        "CLAIM wake-up timer"
    }

    fn tick(&self, c: &Ctx) {
        let now = c.now_ms() as i64;
        if paused() {
            // A woken reader's delivery is propagated, which may not happen while clients are
            // paused (Ctx::acts_on_time): look again shortly.
            READERS.rearm(c, now.saturating_add(PAUSED_RECHECK_MS));
            return;
        }
        for (db, key) in READERS.pop_due(now, usize::MAX) {
            if c.select_db(db) {
                c.signal_ready_name(Name::Bytes(&key));
            }
        }
        READERS.rearm(c, i64::MIN);
    }
}
