//! What a stream counts for in the module's running totals (`INFO xstream`, src/ffi/stats.rs):
//! its entries, nodes, groups, consumers and pending entries.
//!
//! Entries, nodes and groups are counters the stream keeps. Consumers and pending entries are
//! sums over the groups, kept incrementally so that a write costs O(groups it touched), not
//! O(groups) ([`Census::update`]). The groups live in a [`GroupSet`], whose only mutable
//! accessors record what they hand out:
//! - [`GroupSet::get_mut`]: the group's slab index and its contribution at that moment (a
//!   snapshot, once per group between two updates): until then a group not recorded
//!   contributes exactly what it was accounted as;
//! - [`GroupSet::remove`]: the removed group's accounted contribution (its snapshot if it was
//!   recorded, whose record goes, else what it holds);
//! - [`GroupSet::all_mut`] (every group at once), or more than [`TOUCHED_MAX`] groups
//!   recorded: a flag making the next update walk every group.
//!
//! [`Census::update`] applies, for each recorded group, (current - snapshot), and forgets the
//! records. Nothing is stored per group: a slab index is reused only by a group created after
//! the removal that dropped the old group's record, and a new group contributes nothing.

use super::group::{Group, Groups};
use super::Stream;

/// A stream's contribution to the totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    pub entries: u64,
    pub nodes: u64,
    pub groups: u64,
    pub consumers: u64,
    pub pending: u64,
}

/// A group's contribution to its stream's consumers and pending entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    pub consumers: u64,
    pub pending: u64,
}

impl Counted {
    #[inline]
    fn of(g: &Group) -> Counted {
        Counted { consumers: g.consumer_count() as u64, pending: g.pel().len() as u64 }
    }

    fn add(&mut self, o: Counted) {
        // Wrapping: partial sums may cross zero, the result is the true (non-negative) sum.
        self.consumers = self.consumers.wrapping_add(o.consumers);
        self.pending = self.pending.wrapping_add(o.pending);
    }

    fn sub(&mut self, o: Counted) {
        self.consumers = self.consumers.wrapping_sub(o.consumers);
        self.pending = self.pending.wrapping_sub(o.pending);
    }
}

/// Most groups recorded between two updates; past it the next update walks every group (a
/// command touching that many groups is O(groups) anyway), and the record stays small: the
/// look-ups in it are linear.
pub const TOUCHED_MAX: usize = 64;

/// The consumer groups of a stream, by name, with the record of what changed since the last
/// [`Census::update`]. Nothing is allocated before the first group.
#[derive(Clone, Debug, Default)]
pub struct GroupSet(Option<Box<Tracked>>);

#[derive(Clone, Debug, Default)]
struct Tracked {
    groups: Groups,
    /// (slab index, contribution when first handed out) of the groups handed out mutably.
    touched: Vec<(u32, Counted)>,
    /// Every group may have changed (`touched` is then empty).
    all: bool,
    /// The accounted contributions of the groups removed.
    gone: Counted,
}

impl GroupSet {
    /// The groups (None before the first one).
    #[inline]
    pub fn get(&self) -> Option<&Groups> {
        self.0.as_deref().map(|t| &t.groups)
    }

    pub fn len(&self) -> usize {
        self.get().map_or(0, |g| g.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The group called `name`, recorded as possibly changed.
    #[inline]
    pub fn get_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        let Tracked { groups, touched, all, .. } = self.0.as_deref_mut()?;
        let (index, g) = groups.get_mut_indexed(name)?;
        if !*all && !touched.iter().any(|&(i, _)| i == index) {
            if touched.len() >= TOUCHED_MAX {
                *all = true;
                touched.clear();
            } else {
                touched.push((index, Counted::of(g)));
            }
        }
        Some(g)
    }

    /// Every group at once (for updates that do not add or remove groups), all recorded as
    /// possibly changed: the next update walks every group.
    pub fn all_mut(&mut self) -> Option<&mut Groups> {
        let t = self.0.as_deref_mut()?;
        t.all = true;
        t.touched.clear();
        Some(&mut t.groups)
    }

    /// Adds a group unless the name exists; whether it was added.
    pub fn insert(&mut self, name: &[u8], g: Group) -> bool {
        let t = self.0.get_or_insert_with(Default::default);
        // (Only empty groups are created; a loaded one is accounted by its stream's birth.)
        let fresh = Counted::of(&g) == Counted::default();
        if t.groups.try_insert(name, g).is_err() {
            return false;
        }
        if !fresh {
            t.all = true;
            t.touched.clear();
        }
        true
    }

    /// Removes the group called `name`; its accounted contribution leaves the totals at the
    /// next update.
    pub fn remove(&mut self, name: &[u8]) -> Option<Group> {
        let t = self.0.as_deref_mut()?;
        let (index, _) = t.groups.get_mut_indexed(name)?;
        let g = t.groups.remove(name)?;
        if !t.all {
            let accounted = match t.touched.iter().position(|&(i, _)| i == index) {
                Some(at) => t.touched.swap_remove(at).1,
                None => Counted::of(&g),
            };
            t.gone.add(accounted);
        }
        Some(g)
    }

    /// Removes every group (the next update walks the groups: none).
    pub fn clear(&mut self) {
        if let Some(t) = self.0.as_deref_mut() {
            t.groups = Groups::default();
            t.touched = Vec::new();
            t.all = true;
        }
    }

    /// Bytes of the table (the tree and its slab; the groups' own heap not included).
    pub fn mem_bytes(&self) -> usize {
        self.get().map_or(0, |g| g.mem_bytes())
    }

    /// The consumers and pending entries now, given what they were as last accounted
    /// (`was`), and forgets the records: O(groups recorded), or O(groups) after
    /// [`GroupSet::all_mut`] or when `full`.
    fn settle(&mut self, was: Counted, full: bool) -> Counted {
        let Some(t) = self.0.as_deref_mut() else { return Counted::default() };
        let now = if full || t.all {
            let mut now = Counted::default();
            for g in t.groups.values() {
                now.add(Counted::of(g));
            }
            now
        } else {
            let mut now = was;
            now.sub(t.gone);
            for &(index, snapshot) in &t.touched {
                if let Some(g) = t.groups.value_at(index) {
                    now.sub(snapshot);
                    now.add(Counted::of(g));
                }
            }
            now
        };
        t.all = false;
        t.touched.clear();
        t.gone = Counted::default();
        now
    }
}

impl Census {
    /// The census computed from scratch, O(groups) (read only: the oracle of the tests and
    /// of debug checks).
    pub fn of(s: &Stream) -> Census {
        let mut c = Census { entries: s.length, nodes: s.rax_keys() as u64, groups: s.group_count() as u64, ..Census::default() };
        // The value slab, not a walk of the tree: the order does not matter here.
        if let Some(gs) = s.groups.get() {
            for g in gs.values() {
                c.consumers += g.consumer_count() as u64;
                c.pending += g.pel().len() as u64;
            }
        }
        c
    }

    /// A stream enters the totals (loaded, copied, created): its census from scratch, which
    /// becomes what it is accounted as, every group's contribution with it. O(groups).
    pub fn reset(s: &mut Stream) -> Census {
        let now = Census::compute(s, true);
        s.accounted = now;
        now
    }

    /// After a write: (what the stream was accounted as, what it counts now), the latter
    /// becoming what it is accounted as. O(groups touched since the last update).
    pub fn update(s: &mut Stream) -> (Census, Census) {
        let was = s.accounted;
        let now = Census::compute(s, false);
        s.accounted = now;
        (was, now)
    }

    fn compute(s: &mut Stream, full: bool) -> Census {
        let was = Counted { consumers: s.accounted.consumers, pending: s.accounted.pending };
        let cp = s.groups.settle(was, full);
        Census { entries: s.length, nodes: s.rax_keys() as u64, groups: s.group_count() as u64, consumers: cp.consumers, pending: cp.pending }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::policy::RefPolicy;
    use crate::stream::queue::Reason;
    use crate::stream::tests::{seed, Rng};
    use crate::stream::{ClaimCount, DeliveryTime, IdSpec, LagRules, NackCount, NodeLimits, StreamId, Trim, TrimStrategy};

    #[test]
    fn counts_entries_nodes_groups_consumers_and_pending() {
        let mut s = Stream::new();
        let limits = NodeLimits { entries_max: 2, bytes_max: 4096 };
        for i in 1..=5u64 {
            s.append(&[b"f", b"v"], IdSpec::Explicit(StreamId { ms: i, seq: 0 }), 0, limits).unwrap();
        }
        assert_eq!(Census::of(&s), Census { entries: 5, nodes: 3, ..Census::default() });
        assert!(s.create_group(b"g", StreamId::default(), 0));
        let g = s.group_mut(b"g").unwrap();
        let a = g.create_consumer(b"a", 0).unwrap();
        g.create_consumer(b"b", 0).unwrap();
        g.deliver_new(StreamId { ms: 1, seq: 0 }, a, 0);
        g.deliver_new(StreamId { ms: 2, seq: 0 }, a, 0);
        assert_eq!(Census::of(&s), Census { entries: 5, nodes: 3, groups: 1, consumers: 2, pending: 2 });
    }

    /// After every operation, the incremental census (what `stats::account` applies) equals
    /// the census from scratch; and every group's accounted contribution is exact.
    fn check(s: &mut Stream, what: &str) {
        let (_, now) = Census::update(s);
        assert_eq!(now, Census::of(s), "{what}");
        assert_eq!(s.accounted, now, "{what}");
    }

    const GROUPS: &[&[u8]] = &[b"g0", b"g1", b"g2", b"g3", b"g4", b"g5", b"g6", b"g7"];
    const CONSUMERS: &[&[u8]] = &[b"c0", b"c1", b"c2"];

    fn run_seed(seed: u64, ops: usize) {
        let mut r = Rng::new(seed);
        let limits = NodeLimits { entries_max: 1 + r.below(4) as i64, bytes_max: 4096 };
        let mut s = Stream::new();
        Census::reset(&mut s);
        let mut next = 1u64;
        for op in 0..ops {
            let what = format!("seed {seed} op {op}");
            let g = GROUPS[r.below(GROUPS.len() as u64) as usize];
            let c = CONSUMERS[r.below(CONSUMERS.len() as u64) as usize];
            let id = StreamId { ms: 1 + r.below(next), seq: 0 };
            let now = op as i64;
            // Several operations between two updates now and then (a command touching many groups).
            let batch = if r.below(4) == 0 { 1 + r.below(6) } else { 1 };
            for _ in 0..batch {
                match r.below(20) {
                    0..=2 => {
                        let nid = StreamId { ms: next, seq: 0 };
                        next += 1;
                        s.append(&[b"f", b"v"], IdSpec::Explicit(nid), 0, limits).unwrap();
                        if r.below(4) == 0 {
                            s.record_delay(nid, now + r.below(5) as i64);
                        }
                    }
                    3 => {
                        s.create_group(g, StreamId::default(), 0);
                    }
                    4 => {
                        s.destroy_group(g);
                    }
                    5 => {
                        if let Some(gr) = s.group_mut(g) {
                            gr.create_consumer(c, now);
                        }
                    }
                    6 => {
                        if let Some(gr) = s.group_mut(g) {
                            gr.delete_consumer(c);
                        }
                    }
                    7 | 8 => {
                        // A `>` read of a few entries.
                        let slot = match s.group_mut(g) {
                            Some(gr) => gr.lookup_consumer(c, Some(now)).or_else(|| gr.create_consumer(c, now)),
                            None => None,
                        };
                        if let Some(slot) = slot {
                            let start = s.group(g).map_or(StreamId::default(), |gr| gr.last_id);
                            let mut skipped = Vec::new();
                            let n = 1 + r.below(3);
                            s.read_group_new(g, slot, start, n, r.below(5) == 0, now, LagRules::Redis7, Some(&mut skipped), |_, _, _| true);
                        }
                    }
                    9 | 10 => {
                        if let Some(gr) = s.group_mut(g) {
                            gr.ack(id);
                        }
                    }
                    11 => {
                        let count = if r.below(2) == 0 { ClaimCount::Increment } else { ClaimCount::Keep };
                        let create = r.below(2) == 0;
                        if let Some(gr) = s.group_mut(g) {
                            if let Some(slot) = gr.find_consumer(c) {
                                gr.claim(id, slot, DeliveryTime::Now(now), count, create);
                            }
                        }
                    }
                    12 => {
                        let rule = [NackCount::Silent, NackCount::Fail, NackCount::Fatal][r.below(3) as usize];
                        let create = r.below(2) == 0;
                        if let Some(gr) = s.group_mut(g) {
                            gr.nack_entry(id, rule, create);
                        }
                    }
                    13 => {
                        if let Some(gr) = s.group_mut(g) {
                            gr.dead_letter(id, Reason::Manual);
                        }
                    }
                    14 => {
                        let policy = [RefPolicy::KeepRef, RefPolicy::DelRef, RefPolicy::Acked][r.below(3) as usize];
                        let strategy = if r.below(2) == 0 { TrimStrategy::MaxLen(r.below(6)) } else { TrimStrategy::MinId(id) };
                        s.trim_with(&Trim { strategy, approx: r.below(2) == 0, limit: 0 }, policy);
                    }
                    15 => {
                        let policy = [RefPolicy::KeepRef, RefPolicy::DelRef, RefPolicy::Acked][r.below(3) as usize];
                        s.delete_ex(&[id, StreamId { ms: 1 + r.below(next), seq: 0 }], policy);
                    }
                    16 => {
                        let policy = [RefPolicy::KeepRef, RefPolicy::DelRef, RefPolicy::Acked][r.below(3) as usize];
                        s.ack_del(g, &[id], policy);
                    }
                    17 => {
                        // XSETID's clamp of the read counters (every group).
                        if let Some(gs) = s.groups_all_mut() {
                            for gr in gs.values_mut() {
                                gr.entries_read = gr.entries_read.min(1);
                            }
                        }
                    }
                    18 => {
                        s.pass_over_delayed(g, now, LagRules::Redis7);
                        s.schedule_existing(g, id);
                    }
                    _ => {
                        if r.below(10) == 0 {
                            s.clear_groups();
                        } else if r.below(2) == 0 {
                            s.delete(id);
                            s.forget_delay(id);
                        } else if let Some(gr) = s.group_mut(g) {
                            // History reads: deliveries of pending entries.
                            if let Some(slot) = gr.find_consumer(c) {
                                s.read_group_history(g, slot, StreamId::default(), 2, now, false, |_, _| true);
                            }
                        }
                    }
                }
            }
            check(&mut s, &what);
            // A copy (COPY) is accounted from scratch and goes on alike.
            if r.below(50) == 0 {
                let mut t = s.clone();
                Census::reset(&mut t);
                assert_eq!(t.accounted, Census::of(&t), "{what}: copy");
            }
        }
    }

    #[test]
    fn incremental_census_equals_the_census_from_scratch() {
        let base = seed();
        for i in 0..200 {
            run_seed(base.wrapping_add(i), 300);
        }
    }

    #[test]
    fn many_groups_touched_one_at_a_time_and_all_at_once() {
        let mut s = Stream::new();
        Census::reset(&mut s);
        for i in 0..500u32 {
            assert!(s.create_group(format!("g{i}").as_bytes(), StreamId::default(), 0));
        }
        // More touched groups than the record holds: the update walks every group.
        for i in 0..500u32 {
            let g = s.group_mut(format!("g{i}").as_bytes()).unwrap();
            g.create_consumer(b"c", 0).unwrap();
        }
        assert_eq!(Census::update(&mut s).1, Census::of(&s));
        assert_eq!(s.accounted.consumers, 500);
        for i in (0..500u32).step_by(7) {
            assert!(s.destroy_group(format!("g{i}").as_bytes()));
        }
        assert!(s.create_group(b"new", StreamId::default(), 0));
        s.group_mut(b"new").unwrap().create_consumer(b"x", 0).unwrap();
        assert_eq!(Census::update(&mut s).1, Census::of(&s));
        // Within one update: a group changed then removed, its slab slot reused by a new group
        // that is changed too.
        s.group_mut(b"g1").unwrap().create_consumer(b"d", 0).unwrap();
        assert!(s.destroy_group(b"g1"));
        assert!(s.create_group(b"reuse", StreamId::default(), 0));
        s.group_mut(b"reuse").unwrap().create_consumer(b"y", 0).unwrap();
        s.group_mut(b"g2").unwrap().delete_consumer(b"c").unwrap();
        let (was, now) = Census::update(&mut s);
        assert_eq!(now, Census::of(&s));
        assert_eq!(now.consumers, was.consumers - 1);
    }
}
