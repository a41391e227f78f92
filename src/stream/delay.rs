//! Delayed delivery (ours, issue 17; docs/retention.md "Time in the stream"):
//! `XS.ADD key NOTBEFORE unix-ms|DELAY ms ...` appends the entry now, but a
//! consumer group's `>` read does not deliver it before its due time.
//!
//! ```text
//!   Stream ── delayed: Option<Box<BTreeMap<ID, due ms>>>    (None: never used)
//!   Group  ── extra ── schedule: Option<Schedule>           (None: nothing scheduled)
//!                        by_due {(due, ID)}   by_id {ID -> due}
//! ```
//!
//! - The stream's record of a delayed entry lives as long as the entry: it goes
//!   when the entry is deleted or trimmed, never on a clock (replicas and the AOF
//!   hold the same records).
//! - A `>` read that reaches an entry whose record is due after `now` (and that is
//!   not pending in the group) passes over it: the group's last ID and read counter
//!   move past it as if it had been read, and it enters the group's schedule (at most
//!   [`PASS_OVER_MAX`] entries per read).
//! - Scheduled entries are served by later `>` reads once due, by (due, ID).
//! - Invariants ([`check_delayed`]): every record names a live entry; every
//!   scheduled ID has a record with the same due time, is at or before the group's
//!   last ID and is not pending in the group.
//!
//! Everything here is a function of the state and a clock passed in.

#![forbid(unsafe_code)]

use super::group::Group;
use super::{Stream, StreamId};
use std::collections::{BTreeMap, BTreeSet};

/// A stream's delayed entries: ID -> due time (unix ms).
pub type DelayMap = BTreeMap<StreamId, i64>;

/// Most entries one `>` read passes over per stream (bounded work per command: a read that
/// reaches it stops there, and the next read goes on).
pub const PASS_OVER_MAX: usize = 10_000;

/// A group's scheduled entries, by due time and by ID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    by_due: BTreeSet<(i64, StreamId)>,
    by_id: BTreeMap<StreamId, i64>,
}

impl Schedule {
    pub fn len(&self) -> usize {
        self.by_id.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
    /// (due, ID) in serving order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, StreamId)> + '_ {
        self.by_due.iter().copied()
    }
    /// IDs in ID order.
    pub fn ids(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.by_id.keys().copied()
    }
    pub fn due_of(&self, id: StreamId) -> Option<i64> {
        self.by_id.get(&id).copied()
    }
    /// Adds `id` due at `due`; false if it is scheduled already.
    pub fn insert(&mut self, id: StreamId, due: i64) -> bool {
        if self.by_id.contains_key(&id) {
            return false;
        }
        self.by_id.insert(id, due);
        self.by_due.insert((due, id));
        true
    }
    /// Removes `id`; whether it was there.
    pub fn remove(&mut self, id: StreamId) -> bool {
        let Some(due) = self.by_id.remove(&id) else { return false };
        self.by_due.remove(&(due, id));
        true
    }
    /// Removes the IDs after `last`; how many.
    pub fn remove_after(&mut self, last: StreamId) -> usize {
        let Some(from) = last.next() else { return 0 };
        let gone: Vec<(StreamId, i64)> = self.by_id.range(from..).map(|(k, v)| (*k, *v)).collect();
        for (id, due) in &gone {
            self.by_id.remove(id);
            self.by_due.remove(&(*due, *id));
        }
        gone.len()
    }
    /// The earliest due time.
    pub fn next_due(&self) -> Option<i64> {
        self.by_due.first().map(|&(d, _)| d)
    }
    /// Approximate bytes (MEMORY USAGE): two B-tree entries per ID.
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Schedule>() + self.by_id.len() * 2 * (24 + 16)
    }
}

impl Stream {
    /// The due time recorded for `id`, if it was added delayed.
    pub fn delay_of(&self, id: StreamId) -> Option<i64> {
        self.delayed.as_deref().and_then(|m| m.get(&id).copied())
    }

    /// Records that `id` (just appended) is due at `due`.
    pub fn record_delay(&mut self, id: StreamId, due: i64) {
        self.delayed.get_or_insert_with(Default::default).insert(id, due);
    }

    /// Number of delayed-entry records.
    pub fn delayed_count(&self) -> usize {
        self.delayed.as_ref().map_or(0, |m| m.len())
    }

    /// The entry `id` is gone: its record and every group's schedule entry go.
    pub(crate) fn forget_delay(&mut self, id: StreamId) {
        let Some(m) = self.delayed.as_deref_mut() else { return };
        if m.remove(&id).is_none() {
            return;
        }
        if m.is_empty() {
            self.delayed = None;
        }
        if let Some(gs) = self.groups.all_mut() {
            for g in gs.values_mut() {
                if g.schedule().is_some() {
                    g.unschedule(id);
                }
            }
        }
    }

    /// After a trim: records of entries that are gone go (those before the first
    /// live entry; with `check_all`, any whose entry is gone).
    pub(crate) fn forget_trimmed(&mut self, check_all: bool) {
        let Some(m) = self.delayed.as_deref() else { return };
        let first = self.first_id;
        let empty = self.length == 0;
        let gone: Vec<StreamId> =
            m.keys().copied().take_while(|&id| check_all || empty || id < first).filter(|&id| empty || id < first || !self.contains(id)).collect();
        for id in gone {
            self.forget_delay(id);
        }
    }

    /// Whether a `>` read of group `g` at `now` passes over `id` (delayed, not due,
    /// not pending in the group).
    pub fn passes_over(&self, g: &Group, id: StreamId, now: i64) -> Option<i64> {
        let due = self.delay_of(id)?;
        (due > now && g.nack(id).is_none()).then_some(due)
    }

    /// Before a `>` read of `gname`: the delayed entries right after the group's
    /// last ID that are not due at `now` are passed over (scheduled, the last ID and
    /// read counter moved past each). Stops at the first entry it must deliver, or
    /// after [`PASS_OVER_MAX`] entries. Returns the entries scheduled (as many as the
    /// cap when it stopped there).
    pub fn pass_over_delayed(&mut self, gname: &[u8], now: i64, rules: super::LagRules) -> Vec<StreamId> {
        let mut out = Vec::new();
        if self.delayed.is_none() {
            return out;
        }
        let meta = self.meta(rules);
        let Some(start) = self.group(gname).map(|g| g.last_id) else { return out };
        let Some(start) = start.next() else { return out };
        // No record after the group's last ID: nothing to pass over, no walk (the common case
        // of readers at the stream's tail).
        if self.delayed.as_deref().is_none_or(|m| m.range(start..).next().is_none()) {
            return out;
        }
        let mut todo: Vec<(StreamId, i64)> = Vec::new();
        {
            let Some(g) = self.group(gname) else { return out };
            for e in self.range(start, StreamId::MAX, false) {
                if todo.len() >= PASS_OVER_MAX {
                    break;
                }
                match self.passes_over(g, e.id(), now) {
                    Some(due) => todo.push((e.id(), due)),
                    None => break,
                }
            }
        }
        let Some(g) = self.groups.get_mut(gname) else { return out };
        for (id, due) in todo {
            if id > g.last_id {
                g.entries_read = meta.entries_read_after(g, id);
                g.last_id = id;
            }
            g.schedule_entry(id, due);
            out.push(id);
        }
        out
    }

    /// XS.GROUP SCHEDULE (the propagated form of a pass-over, and the AOF rewrite's):
    /// schedules `id` in `gname` with its recorded due time when it has a record,
    /// exists, is at or before the group's last ID and is not pending. Returns
    /// whether it was added.
    pub fn schedule_existing(&mut self, gname: &[u8], id: StreamId) -> bool {
        let Some(due) = self.delay_of(id) else { return false };
        if !self.contains(id) {
            return false;
        }
        match self.group_mut(gname) {
            Some(g) if id <= g.last_id && g.nack(id).is_none() => g.schedule_entry(id, due),
            _ => false,
        }
    }
}

/// Checks the invariants of the module documentation (`live`: also that every
/// record names a live entry, which reads the nodes).
pub fn check_delayed(s: &Stream, live: bool) -> Result<(), &'static str> {
    if let Some(m) = s.delayed.as_deref() {
        if m.is_empty() {
            return Err("empty delayed-entry map");
        }
        if live && m.keys().any(|&id| !s.contains(id)) {
            return Err("delayed-entry record of an entry that does not exist");
        }
    }
    if let Some(it) = s.groups_iter() {
        for (_, g) in it {
            let Some(sch) = g.schedule() else { continue };
            if sch.is_empty() || sch.by_due.len() != sch.by_id.len() {
                return Err("group schedule inconsistent");
            }
            for (&id, &due) in &sch.by_id {
                if s.delay_of(id) != Some(due) || !sch.by_due.contains(&(due, id)) {
                    return Err("scheduled entry without its delayed-entry record");
                }
                if id > g.last_id || g.nack(id).is_some() {
                    return Err("scheduled entry after the group's last ID or pending");
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{IdSpec, LagRules, NodeLimits, ENTRIES_READ_INVALID};

    fn limits() -> NodeLimits {
        NodeLimits { entries_max: 4, bytes_max: 4096 }
    }

    /// Entries at 1..=n ms; `delayed` lists (ms, due).
    fn stream(n: u64, delayed: &[(u64, i64)]) -> Stream {
        let mut s = Stream::new();
        for t in 1..=n {
            let id = s.append(&[b"f", b"v"], IdSpec::Explicit(StreamId::new(t, 0)), t, limits()).unwrap();
            if let Some(&(_, due)) = delayed.iter().find(|&&(m, _)| m == t) {
                s.record_delay(id, due);
            }
        }
        s.create_group(b"g", StreamId::MIN, 0);
        s
    }

    fn id(ms: u64) -> StreamId {
        StreamId::new(ms, 0)
    }

    /// A `>` read as the command does it: pass over, then new entries skipping
    /// delayed ones; returns delivered IDs.
    fn read_new(s: &mut Stream, now: i64, count: u64) -> (Vec<StreamId>, Vec<StreamId>) {
        let mut sched = s.pass_over_delayed(b"g", now, LagRules::Redis8);
        let mut got = Vec::new();
        let slot = match s.group_mut(b"g").unwrap().lookup_consumer(b"c", None) {
            Some(x) => x,
            None => s.group_mut(b"g").unwrap().create_consumer(b"c", now).unwrap(),
        };
        for d in s.group(b"g").unwrap().scheduled_due(now, count) {
            let g = s.group_mut(b"g").unwrap();
            g.unschedule(d);
            g.deliver_new(d, slot, now);
            got.push(d);
        }
        let left = if count == 0 { 0 } else { count - got.len() as u64 };
        if count == 0 || left > 0 {
            let start = s.group(b"g").unwrap().last_id.next().unwrap();
            let mut skipped = Vec::new();
            s.read_group_new(b"g", slot, start, left, false, now, LagRules::Redis8, Some(&mut skipped), |e, _, _| {
                got.push(e.id());
                true
            });
            sched.extend(skipped);
        }
        (got, sched)
    }

    #[test]
    fn delayed_entries_are_passed_over_then_served_by_due_time() {
        // 2 due at 500, 4 due at 300, 5 due at 50 (already due at 100).
        let mut s = stream(6, &[(2, 500), (4, 300), (5, 50)]);
        let (got, sched) = read_new(&mut s, 100, 0);
        assert_eq!(got, vec![id(1), id(3), id(5), id(6)]);
        assert_eq!(sched, vec![id(2), id(4)]);
        let g = s.group(b"g").unwrap();
        assert_eq!(g.last_id, id(6));
        // Passed-over entries count as read: no lag.
        assert_eq!(g.entries_read, 6);
        assert_eq!(g.scheduled_count(), 2);
        assert_eq!(g.next_scheduled(), Some(300));
        check_delayed(&s, true).unwrap();
        s.group(b"g").unwrap().check().unwrap();
        assert_eq!(read_new(&mut s, 299, 0).0, Vec::<StreamId>::new());
        assert_eq!(read_new(&mut s, 300, 0).0, vec![id(4)]);
        assert_eq!(read_new(&mut s, 1000, 0).0, vec![id(2)]);
        assert_eq!(s.group(b"g").unwrap().scheduled_count(), 0);
        assert!(s.group(b"g").unwrap().schedule().is_none());
        check_delayed(&s, true).unwrap();
    }

    #[test]
    fn due_order_then_id_and_count_bounds_the_serving() {
        let mut s = stream(5, &[(1, 200), (2, 100), (3, 100), (4, 150)]);
        assert_eq!(read_new(&mut s, 0, 0).0, vec![id(5)]);
        assert_eq!(read_new(&mut s, 1000, 2).0, vec![id(2), id(3)]);
        assert_eq!(read_new(&mut s, 1000, 2).0, vec![id(4), id(1)]);
    }

    #[test]
    fn delete_trim_and_setid_drop_schedule_entries() {
        let mut s = stream(8, &[(2, 500), (3, 500), (6, 500), (7, 500)]);
        read_new(&mut s, 0, 0);
        assert_eq!(s.group(b"g").unwrap().scheduled_count(), 4);
        s.delete_ids(&[id(3)]);
        assert_eq!(s.delay_of(id(3)), None);
        assert_eq!(s.group(b"g").unwrap().scheduled_count(), 3);
        s.trim(&crate::stream::Trim { strategy: crate::stream::TrimStrategy::MinId(id(5)), approx: false, limit: 0 });
        assert_eq!(s.delayed_count(), 2);
        assert_eq!(s.group(b"g").unwrap().scheduled_count(), 2);
        check_delayed(&s, true).unwrap();
        // SETID back to 6: 7 leaves the schedule, 6 stays.
        let g = s.group_mut(b"g").unwrap();
        g.last_id = id(6);
        assert_eq!(g.unschedule_after(id(6)), 1);
        assert_eq!(g.schedule().unwrap().ids().collect::<Vec<_>>(), vec![id(6)]);
        // The next `>` read reaches 7 again and schedules it again.
        let (got, sched) = read_new(&mut s, 0, 0);
        assert_eq!((got, sched), (vec![id(8)], vec![id(7)]));
        s.trim(&crate::stream::Trim { strategy: crate::stream::TrimStrategy::MaxLen(0), approx: false, limit: 0 });
        assert!(s.delayed.is_none());
        assert!(s.group(b"g").unwrap().schedule().is_none());
    }

    #[test]
    fn a_pending_delayed_entry_is_delivered_as_an_ordinary_one() {
        let mut s = stream(3, &[(2, 500)]);
        let slot = s.group_mut(b"g").unwrap().create_consumer(b"c", 0).unwrap();
        s.group_mut(b"g").unwrap().deliver_new(id(2), slot, 0);
        let (got, sched) = read_new(&mut s, 0, 0);
        assert_eq!(got, vec![id(1), id(2), id(3)]);
        assert!(sched.is_empty());
    }

    #[test]
    fn claims_and_forced_nacks_take_entries_out_of_the_schedule() {
        let mut s = stream(3, &[(2, 500)]);
        read_new(&mut s, 0, 0);
        let g = s.group_mut(b"g").unwrap();
        let slot = g.lookup_consumer(b"c", None).unwrap();
        g.claim(id(2), slot, crate::stream::group::DeliveryTime::Now(1), crate::stream::ClaimCount::Set(1), true);
        assert_eq!(g.scheduled_count(), 0);
        check_delayed(&s, true).unwrap();
        assert!(!s.schedule_existing(b"g", id(2)), "pending: not scheduled again");
        s.group_mut(b"g").unwrap().ack(id(2));
        assert!(s.schedule_existing(b"g", id(2)));
        assert!(!s.schedule_existing(b"g", id(1)), "no record");
        let g = s.group_mut(b"g").unwrap();
        g.nack_entry(id(2), crate::stream::group::NackCount::Fail, true);
        assert_eq!(g.scheduled_count(), 0);
    }

    #[test]
    fn a_read_passes_over_at_most_the_cap() {
        let n = PASS_OVER_MAX as u64 + 5;
        let delayed: Vec<(u64, i64)> = (1..=n).map(|t| (t, 1_000_000)).collect();
        let mut s = stream(n + 1, &delayed);
        assert_eq!(s.pass_over_delayed(b"g", 0, LagRules::Redis8).len(), PASS_OVER_MAX);
        assert_eq!(s.group(b"g").unwrap().last_id, id(PASS_OVER_MAX as u64));
        // The next read goes on: 5 more, then the ordinary entry is delivered.
        let (got, sched) = read_new(&mut s, 0, 0);
        assert_eq!((got, sched.len()), (vec![id(n + 1)], 5));
        assert_eq!(s.group(b"g").unwrap().scheduled_count(), n as usize);
        // Skipping inside a read is capped too.
        let mut s = stream(n + 1, &[(1, 5)]);
        for t in 2..=n {
            s.record_delay(id(t), 1_000_000);
        }
        let slot = s.group_mut(b"g").unwrap().create_consumer(b"c", 0).unwrap();
        let mut skipped = Vec::new();
        let (got, moved) = s.read_group_new(b"g", slot, id(1), 0, false, 10, LagRules::Redis8, Some(&mut skipped), |_, _, _| true);
        assert_eq!((got, moved, skipped.len()), (1, true, PASS_OVER_MAX));
        assert_eq!(s.group(b"g").unwrap().last_id, id(PASS_OVER_MAX as u64 + 1));
        check_delayed(&s, true).unwrap();
    }

    #[test]
    fn entries_read_stays_valid_when_a_group_starts_in_the_past() {
        let mut s = stream(4, &[(1, 500), (3, 500)]);
        s.destroy_group(b"g");
        s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID);
        let (got, sched) = read_new(&mut s, 0, 0);
        assert_eq!(got, vec![id(2), id(4)]);
        assert_eq!(sched, vec![id(1), id(3)]);
        let g = s.group(b"g").unwrap();
        assert_eq!(s.meta(LagRules::Redis8).lag(g), Some(0));
    }
}
