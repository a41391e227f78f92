//! The schedule of a group (delayed delivery, src/stream/delay.rs): the entries a `>` read
//! passed over, by due time, as methods of the group.

use super::*;
use crate::stream::delay::*;

impl Group {
    /// The group's schedule, if it has scheduled entries.
    pub fn schedule(&self) -> Option<&Schedule> {
        self.extra.as_deref()?.schedule.as_ref()
    }

    fn schedule_mut(&mut self) -> Option<&mut Schedule> {
        self.extra.as_deref_mut()?.schedule.as_mut()
    }

    /// Drops an emptied schedule (and the extras, when nothing is left in them).
    fn drop_empty_schedule(&mut self) {
        if let Some(e) = self.extra.as_deref_mut() {
            if e.schedule.as_ref().is_some_and(Schedule::is_empty) {
                e.schedule = None;
            }
        }
        self.drop_empty_extra();
    }

    /// Entries in the schedule (XS.INFO GROUPS `scheduled`).
    pub fn scheduled_count(&self) -> usize {
        self.schedule().map_or(0, |s| s.len())
    }

    /// Adds `id` due at `due`; false if already scheduled.
    pub fn schedule_entry(&mut self, id: StreamId, due: i64) -> bool {
        self.extra_mut().schedule.get_or_insert_with(Default::default).insert(id, due)
    }

    /// Removes `id` from the schedule; returns whether it was there.
    pub fn unschedule(&mut self, id: StreamId) -> bool {
        let Some(s) = self.schedule_mut() else { return false };
        if !s.remove(id) {
            return false;
        }
        self.drop_empty_schedule();
        true
    }

    /// XS.GROUP SETID: scheduled entries after the new last ID leave the schedule
    /// (a later `>` read reaches them again and looks at their due time then).
    pub fn unschedule_after(&mut self, last: StreamId) -> usize {
        let Some(s) = self.schedule_mut() else { return 0 };
        let gone = s.remove_after(last);
        self.drop_empty_schedule();
        gone
    }

    /// Scheduled entries due at `now`, in (due, ID) order, at most `limit` (0 = all).
    pub fn scheduled_due(&self, now: i64, limit: u64) -> Vec<StreamId> {
        let Some(s) = self.schedule() else { return Vec::new() };
        let mut out = Vec::new();
        for (due, id) in s.iter() {
            if due > now || (limit != 0 && out.len() as u64 >= limit) {
                break;
            }
            out.push(id);
        }
        out
    }

    /// The earliest due time in the schedule.
    pub fn next_scheduled(&self) -> Option<i64> {
        self.schedule().and_then(Schedule::next_due)
    }
}
