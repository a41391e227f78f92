//! Timed wake-ups of blocked readers (REDIS8.md §4.5): `XS.READGROUP ... BLOCK ms CLAIM
//! min-idle`, ACKTIMEOUT and delayed-delivery readers must re-run when something of theirs
//! becomes due, although no write touches the key then. When such a reader blocks (and each
//! time it is woken without being served) the command registers its keys in
//! [`due::READERS`](crate::ops::due::READERS) with that time (src/commands/read.rs). When the
//! timer fires, every due key is signalled ready in its DB, for the first reader of each wait
//! (readers of the same group, CLAIM and keys: src/ffi/blocking.rs `wake_on_time`); Redis then
//! calls back the readers blocked on those keys before it sleeps (handleClientsBlockedOnKeys
//! from beforeSleep): the first of each wait re-runs its read, the others are passed over
//! without running theirs. A first reader with nothing due yet stays blocked and registers its
//! wait again; one that is served passes the wake-up on to the next of its wait while
//! something is still due, and registers the wait's next time when nothing is. Entries whose
//! readers left (timeout, served by a write, disconnect) are dropped when reached.

use crate::ffi::blocking::wake_on_time;
use crate::ffi::ctx::{paused, Ctx};
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
            wake_on_time(c, db, &key);
        }
        READERS.rearm(c, i64::MIN);
    }
}
