//! Consumer groups: the group's pending entries list (PEL) of NACKs, its
//! consumers and their own PELs, as in t_stream.c.
//!
//! ```text
//!   Group "g"  last_id 5-0  entries_read 5
//!     pel (16-byte IDs)      ──> Nack { delivery_time, delivery_count, owner: slot | NO_OWNER, link }
//!     consumers (names)      ──> slot ──> Consumer { name, seen_time, active_time,
//!                                                     pel (the same IDs, no value) }
//!     time (timelist.rs)     ──> [4-0 2-0 | 1-0 3-0 5-0]   node `link` of each NACK
//!                                 NACK zone   by delivery time, oldest first
//! ```
//!
//! A NACK lives once, in the group PEL; its owner is a consumer slot (a small
//! index instead of the built-in's pointer) and the owner's PEL holds the same
//! ID. The group also orders its NACKs by delivery time (timelist.rs; 8.4+'s
//! time list, 8.8's NACK zone at its head).
//!
//! The three indexes are radix trees as in t_stream.c once they hold more than 64
//! keys, and sorted vectors before (small.rs): a group with one consumer and one
//! pending entry costs about half of what three trees did. A stream's groups are
//! kept the way a group's consumers are ([`Roster`]: slots, and an index of them
//! by name), each group holding its own name.
//!
//! Invariants ([`Group::check`]):
//! - an ID is in a consumer's PEL iff the group PEL's NACK for it names that consumer;
//! - a NACK is owned, or unowned ([`NO_OWNER`], after XNACK) and in the NACK zone
//!   with delivery_time 0, and every NACK in the zone is unowned;
//! - every NACK is in the time list exactly once, its `link` naming its node.
//!
//! Every PEL mutation goes through the methods below, which keep all three.

use super::id::StreamId;
use super::timelist::{TimeList, NIL};

#[cfg(test)]
mod check_tests;
mod queue;
mod schedule;
mod small;
#[cfg(test)]
mod small_tests;
use crate::rax::Rax;
pub use small::{IdIter, IdMap, Named, OwnPel, Roster, RosterIter};
use std::sync::LazyLock;

/// A radix tree allocated on its first key and released with its last, so that
/// a consumer without pending entries, or a group without any, costs a pointer
/// instead of an empty tree (a workload of 100k consumers is mostly that).
/// Reads go through `Deref` (an empty tree when unallocated); writes through the
/// methods below.
///
/// A released tree goes to a few spares kept per thread and value type, which the
/// next allocation takes: a queue's PEL empties at every acknowledged batch and
/// fills again at the next read, and building its two trees anew each time (the
/// box, the arena, the pool grown block by block) was 11% of an XS.READGROUP +
/// XS.ACK pair.
#[derive(Clone, Debug)]
pub struct LazyRax<V: 'static>(Option<Box<Rax<V>>>);

impl<V> Default for LazyRax<V> {
    fn default() -> Self {
        LazyRax(None)
    }
}

/// The shared empty tree that an unallocated [`LazyRax`] reads as, and this thread's
/// spare emptied trees.
pub trait EmptyRax: Sized + 'static {
    fn empty() -> &'static Rax<Self>;
    fn spares() -> &'static std::thread::LocalKey<std::cell::RefCell<Vec<Box<Rax<Self>>>>>;
}

/// Spare trees kept per thread and value type. An emptied tree keeps only small buffers
/// (Rax::reset_storage: about 2 KB at most), so the spares hold little.
const SPARES_MAX: usize = 16;

macro_rules! empty_rax {
    ($t:ty, $name:ident, $spares:ident) => {
        static $name: LazyLock<Rax<$t>> = LazyLock::new(Rax::new);
        thread_local! {
            static $spares: std::cell::RefCell<Vec<Box<Rax<$t>>>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        impl EmptyRax for $t {
            fn empty() -> &'static Rax<$t> {
                &$name
            }
            fn spares() -> &'static std::thread::LocalKey<std::cell::RefCell<Vec<Box<Rax<$t>>>>> {
                &$spares
            }
        }
    };
}
empty_rax!((), EMPTY_UNIT, SPARE_UNIT);
empty_rax!(u32, EMPTY_SLOTS, SPARE_SLOTS);
empty_rax!(Nack, EMPTY_NACKS, SPARE_NACKS);

impl<V: EmptyRax> std::ops::Deref for LazyRax<V> {
    type Target = Rax<V>;
    fn deref(&self) -> &Rax<V> {
        match &self.0 {
            Some(r) => r,
            None => V::empty(),
        }
    }
}

impl<V: EmptyRax> LazyRax<V> {
    fn tree(&mut self) -> &mut Rax<V> {
        self.0.get_or_insert_with(|| V::spares().with(|s| s.borrow_mut().pop()).unwrap_or_else(|| Box::new(Rax::new())))
    }
    pub fn insert(&mut self, key: &[u8], v: V) -> Option<V> {
        self.tree().insert(key, v)
    }
    pub fn try_insert(&mut self, key: &[u8], v: V) -> Result<(), V> {
        self.tree().try_insert(key, v)
    }
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        self.0.as_mut()?.get_mut(key)
    }
    /// Every value, in no particular order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.0.iter_mut().flat_map(|t| t.values_mut())
    }
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        let t = self.0.as_mut()?;
        let v = t.remove(key);
        if t.is_empty() {
            if let Some(t) = self.0.take() {
                V::spares().with(|s| {
                    let mut s = s.borrow_mut();
                    if s.len() < SPARES_MAX {
                        s.push(t);
                    }
                });
            }
        }
        v
    }
    /// Bytes used, the box included.
    pub fn mem_bytes(&self) -> usize {
        self.0.as_ref().map_or(0, |t| t.mem_bytes())
    }
}

/// `entries_read` value meaning "unknown" (SCG_INVALID_ENTRIES_READ).
pub const ENTRIES_READ_INVALID: i64 = -1;

/// No owner: a NACKed entry (XNACK), in the NACK zone.
pub const NO_OWNER: u32 = u32::MAX;

/// The largest delivery count an increment reaches (LLONG_MAX, 8.8's saturation).
pub const DELIVERY_COUNT_MAX: u64 = i64::MAX as u64;

/// One more delivery, saturating at [`DELIVERY_COUNT_MAX`] (a count already
/// above it, only possible from a loaded payload, stays).
pub fn count_plus_one(c: u64) -> u64 {
    if c < DELIVERY_COUNT_MAX {
        c + 1
    } else {
        c
    }
}

/// A pending entry: delivered, not yet acknowledged. Equality compares the
/// delivery time, count and owner (not the link, a position in one group's slab).
#[derive(Clone, Copy, Debug)]
pub struct Nack {
    /// Unix time in ms of the last delivery (0 in the NACK zone).
    pub delivery_time: i64,
    /// Number of deliveries.
    pub delivery_count: u64,
    /// Slot of the owning consumer, or NO_OWNER (NACK zone).
    pub owner: u32,
    /// Its node in the group's time list (NIL only while loading).
    link: Link,
}

// The value slot of the PEL's tree is an Option<Nack>: the niche of `Link` makes it 24
// bytes, not 32 (a quarter of the module's bytes per pending entry was that tag).
const _: () = assert!(std::mem::size_of::<Nack>() == 24);
const _: () = assert!(std::mem::size_of::<Option<Nack>>() == 24);

/// A node of the time list (or NIL), stored plus 2 in a `NonZeroU32`, so that
/// `Option<Nack>` needs no tag of its own. Every index fits: the PEL's tree holds at most
/// 2^31 keys (rax.rs), so the time list has at most 2^31 nodes in use and, compacted when
/// half of its slab is free, fewer than 2^32 - 2 slots; NIL (u32::MAX) is stored as 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Link(std::num::NonZeroU32);

impl Link {
    const NIL: Link = Link(std::num::NonZeroU32::MIN);

    fn new(i: u32) -> Link {
        std::num::NonZeroU32::new(i.wrapping_add(2)).map_or(Link::NIL, Link)
    }

    fn get(self) -> u32 {
        self.0.get().wrapping_sub(2)
    }
}

impl PartialEq for Nack {
    fn eq(&self, o: &Nack) -> bool {
        (self.delivery_time, self.delivery_count, self.owner) == (o.delivery_time, o.delivery_count, o.owner)
    }
}
impl Eq for Nack {}

impl Nack {
    fn link(&self) -> u32 {
        self.link.get()
    }

    fn set_link(&mut self, i: u32) {
        self.link = Link::new(i);
    }

    /// A NACK that is not in any group (a placeholder for readers).
    pub const fn detached(delivery_time: i64, delivery_count: u64, owner: u32) -> Nack {
        Nack { delivery_time, delivery_count, owner, link: Link::NIL }
    }

    /// Whether it has no owner (NACKed).
    pub fn is_unowned(&self) -> bool {
        self.owner == NO_OWNER
    }
}

/// How XNACK sets the delivery count (REDIS8.md §6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NackCount {
    /// SILENT: one less (floor 0).
    Silent,
    /// FAIL: unchanged.
    Fail,
    /// FATAL: LLONG_MAX.
    Fatal,
    /// RETRYCOUNT c.
    Set(u64),
}

impl NackCount {
    fn apply(self, c: u64) -> u64 {
        match self {
            NackCount::Silent => c.saturating_sub(1),
            NackCount::Fail => c,
            NackCount::Fatal => DELIVERY_COUNT_MAX,
            NackCount::Set(n) => n,
        }
    }
}

/// Where a claim puts the entry in the time list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryTime {
    /// Delivered now (the default of XCLAIM, XAUTOCLAIM, CLAIM): at the tail.
    Now(i64),
    /// An explicit time (XCLAIM IDLE / TIME): sorted insertion from the tail.
    At(i64),
}

impl DeliveryTime {
    pub fn ms(self) -> i64 {
        match self {
            DeliveryTime::Now(t) | DeliveryTime::At(t) => t,
        }
    }
}

/// A consumer of a group.
#[derive(Clone, Debug)]
pub struct Consumer {
    pub name: Box<[u8]>,
    /// Last time (ms) the consumer was seen (any interaction).
    pub seen_time: i64,
    /// Last time (ms) the consumer read or claimed successfully (7.2's active-time).
    pub active_time: i64,
    /// IDs of the NACKs it owns (written by the group only).
    pel: OwnPel,
}

impl Consumer {
    /// IDs of the NACKs it owns.
    pub fn pel(&self) -> &OwnPel {
        &self.pel
    }
}

/// What a group holds only when it uses a reliable-queue policy or delayed delivery: one
/// box, 8 bytes in every group's record rather than 16, so that the record fits jemalloc's
/// 160-byte class (bench/analysis.md, `mem-small-group`).
#[derive(Clone, Debug, Default)]
struct Extra {
    /// The reliable-queue policy (queue.rs); None for a plain group.
    policy: Option<super::queue::QueuePolicy>,
    /// Delayed entries passed over and not yet served (delay.rs); None when empty.
    schedule: Option<super::delay::Schedule>,
}

impl Extra {
    fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Extra>()
            + self.policy.as_ref().map_or(0, |p| p.dead_letter_key().map_or(0, <[u8]>::len))
            + self.schedule.as_ref().map_or(0, |s| s.mem_bytes() - std::mem::size_of::<super::delay::Schedule>())
    }
}

/// A consumer group.
#[derive(Clone, Debug)]
pub struct Group {
    /// Its name (the key of the stream's [`Groups`]).
    name: Box<[u8]>,
    /// Last ID delivered to the group (`>` reads start after it).
    pub last_id: StreamId,
    /// Logical read counter of `last_id`, or ENTRIES_READ_INVALID.
    pub entries_read: i64,
    /// ID -> NACK (written through the methods below only).
    pel: IdMap<Nack>,
    /// The NACKs by delivery time, NACK zone first.
    time: TimeList,
    /// The consumers, by name; a consumer's slot is the owner its NACKs name.
    consumers: Roster<Consumer>,
    /// What only a group using a feature the built-in's groups lack holds; None for a
    /// plain group.
    extra: Option<Box<Extra>>,
}

impl Group {
    pub fn new(name: &[u8], last_id: StreamId, entries_read: i64) -> Self {
        let mut consumers = Roster::default();
        consumers.set_tag([super::census::NOT_ACCOUNTED; 2]);
        Group { name: name.into(), last_id, entries_read, pel: IdMap::default(), time: TimeList::default(), consumers, extra: None }
    }

    /// The histogram buckets (PEL size, lag) this group was last accounted in, or
    /// [`NOT_ACCOUNTED`](crate::stream::census::NOT_ACCOUNTED) (src/stream/census.rs). Not part
    /// of the group's content. Kept in two bytes of its consumers' roster that would
    /// otherwise be padding: as a field of the group they took it from 160 bytes to 168
    /// (jemalloc's 192-byte class).
    #[inline]
    pub(crate) fn hist(&self) -> [u8; 2] {
        self.consumers.tag()
    }

    #[inline]
    pub(crate) fn set_hist(&mut self, hist: [u8; 2]) {
        self.consumers.set_tag(hist);
    }

    /// The reliable-queue policy, if set (queue.rs).
    #[inline]
    pub fn policy(&self) -> Option<&super::queue::QueuePolicy> {
        self.extra.as_deref()?.policy.as_ref()
    }

    pub(crate) fn policy_mut(&mut self) -> Option<&mut super::queue::QueuePolicy> {
        self.extra.as_deref_mut()?.policy.as_mut()
    }

    /// The group's extras, made if it has none.
    fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Default::default)
    }

    /// Drops the extras when nothing is left in them.
    fn drop_empty_extra(&mut self) {
        if self.extra.as_deref().is_some_and(|e| e.policy.is_none() && e.schedule.is_none()) {
            self.extra = None;
        }
    }

    pub fn consumer_count(&self) -> usize {
        self.consumers.len()
    }

    /// The consumer in `slot`.
    pub fn consumer(&self, slot: u32) -> Option<&Consumer> {
        self.consumers.slot(slot)
    }

    pub fn consumer_mut(&mut self, slot: u32) -> Option<&mut Consumer> {
        self.consumers.slot_mut(slot)
    }

    /// Slot of the consumer called `name`, without touching it.
    pub fn find_consumer(&self, name: &[u8]) -> Option<u32> {
        self.consumers.find(name)
    }

    /// Slot of the consumer called `name`; `now` refreshes its seen-time when given
    /// (streamLookupConsumer with or without SLC_NO_REFRESH).
    pub fn lookup_consumer(&mut self, name: &[u8], refresh_now: Option<i64>) -> Option<u32> {
        let slot = self.consumers.find(name)?;
        if let (Some(now), Some(c)) = (refresh_now, self.consumer_mut(slot)) {
            c.seen_time = now;
        }
        Some(slot)
    }

    /// Creates a consumer; `None` if the name exists (streamCreateConsumer).
    pub fn create_consumer(&mut self, name: &[u8], now: i64) -> Option<u32> {
        if self.consumers.find(name).is_some() {
            return None;
        }
        let c = Consumer { name: name.into(), seen_time: now, active_time: -1, pel: OwnPel::default() };
        self.consumers.try_insert(c).ok()
    }

    /// Deletes a consumer and its pending entries; returns how many it had.
    /// Unowned (NACKed) entries are not the consumer's and stay.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let (_, c) = self.consumers.remove(name)?;
        let mut it = c.pel.iter();
        let mut n = 0;
        while let Some((k, _)) = it.next() {
            if let Some(nk) = self.pel.remove(k) {
                self.unlink(nk);
            }
            n += 1;
        }
        Some(n)
    }

    /// Consumers in name order: (name, slot).
    pub fn consumers(&self) -> ConsumerIter<'_> {
        ConsumerIter { it: self.consumers.iter() }
    }

    // ---- the PEL ---------------------------------------------------------------

    /// The group PEL, by ID (read only: writes go through the methods).
    pub fn pel(&self) -> &IdMap<Nack> {
        &self.pel
    }

    /// The NACK of `id`, if pending.
    pub fn nack(&self, id: StreamId) -> Option<&Nack> {
        self.pel.get(&id.to_be_bytes())
    }

    /// Size of the NACK zone (XINFO's `nacked-count`).
    pub fn nacked_count(&self) -> usize {
        self.time.nacked()
    }

    /// The pending entries in the time list's order: the NACK zone first (FIFO of
    /// XNACK), then by delivery time (oldest first; a delivery at "now" goes last,
    /// an explicit time after the last entry at or before it).
    pub fn by_time(&self) -> ByTime<'_> {
        ByTime { g: self, it: self.time.iter() }
    }

    /// (entries, slab slots) of the time list: the slab holds at most about twice
    /// what the list holds, nothing when it is empty (tests, MEMORY USAGE checks).
    pub fn time_slab(&self) -> (usize, usize) {
        (self.time.len(), self.time.slab_len())
    }

    /// Name of the owner of a NACK ("" when unowned).
    pub fn owner_name(&self, n: &Nack) -> &[u8] {
        self.consumer(n.owner).map_or(&[][..], |c| &c.name[..])
    }

    /// Unlinks a NACK already removed from (or about to leave) its place in the
    /// time list; relinks everything when the slab was renumbered.
    /// Every other link must be in the old numbering (see [`TimeList::remove`]).
    fn unlink(&mut self, n: Nack) {
        if n.link() == NIL {
            return;
        }
        if let Some(remap) = self.time.remove(n.link(), n.is_unowned()) {
            relink_pel(&mut self.pel, &remap);
        }
    }

    /// Links the NACK of `id` (loading: not linked yet) where `pos` says and
    /// records the node in it.
    fn link(&mut self, id: StreamId, pos: Place) {
        let Self { pel, time, .. } = self;
        let i = match pos {
            Place::Tail => time.push_tail(id),
            Place::Zone => time.push_zone(id),
            Place::Sorted(t) => time.insert_sorted(id, t, |x| pel.get(&x.to_be_bytes()).map_or(i64::MIN, |n| n.delivery_time)),
        };
        if let Some(n) = pel.get_mut(&id.to_be_bytes()) {
            n.set_link(i);
        }
    }

    /// Removes a NACK from the group and its owner (XACK). Returns whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let key = id.to_be_bytes();
        match self.pel.remove(&key) {
            Some(n) => {
                if let Some(c) = self.consumer_mut(n.owner) {
                    c.pel.remove(&key);
                }
                self.unlink(n);
                true
            }
            None => false,
        }
    }

    /// Moves `key` from consumer `old`'s PEL to `slot`'s (NO_OWNER: none); the
    /// caller sets the NACK's owner.
    fn move_owner(&mut self, key: &[u8; 16], old: u32, slot: u32) {
        if old == slot {
            return;
        }
        if let Some(c) = self.consumer_mut(old) {
            c.pel.remove(key);
        }
        if let Some(c) = self.consumer_mut(slot) {
            c.pel.insert(key, ());
        }
    }

    /// The common step of every move in the time list, with one PEL lookup when
    /// `pos` is the tail or the zone: the NACK of `id` (which exists, linked or not)
    /// leaves its place, `update` changes it (owner included: the consumers' PELs
    /// are the caller's), and it is linked where `pos` says. Returns the NACK
    /// before and after.
    fn relocate(&mut self, id: StreamId, pos: Place, update: impl FnOnce(&mut Nack)) -> Option<(Nack, Nack)> {
        let key = id.to_be_bytes();
        let Group { pel, time, .. } = self;
        let n = pel.get_mut(&key)?;
        let old = *n;
        let renumbered = if old.link() != NIL { time.remove(old.link(), old.is_unowned()) } else { None };
        // Renumbered (rare): every link is mapped before this one is set (its old node
        // is gone: it maps to NIL, and is linked below).
        let n = if let Some(remap) = renumbered {
            relink_pel(pel, &remap);
            pel.get_mut(&key)?
        } else {
            n
        };
        update(n);
        let new = match pos {
            Place::Tail => {
                n.set_link(time.push_tail(id));
                *n
            }
            Place::Zone => {
                n.set_link(time.push_zone(id));
                *n
            }
            Place::Sorted(t) => {
                n.set_link(NIL);
                // The moved NACK is in no node now: the scan never looks it up.
                let i = time.insert_sorted(id, t, |x| pel.get(&x.to_be_bytes()).map_or(i64::MIN, |m| m.delivery_time));
                let n = pel.get_mut(&key)?;
                n.set_link(i);
                *n
            }
        };
        Some((old, new))
    }

    /// Records the delivery of `id` to `slot` by a `>` read (streamReplyWithRange):
    /// a new NACK, or an existing one (owned or NACKed) moved to this consumer with
    /// its count reset to 1. It goes to the tail of the time list.
    pub fn deliver_new(&mut self, id: StreamId, slot: u32, now: i64) -> Nack {
        let key = id.to_be_bytes();
        if self.schedule().is_some() {
            self.unschedule(id);
        }
        // The common case, a new NACK: one insertion, linked at once.
        let link = self.time.push_tail(id);
        let fresh = Nack { delivery_time: now, delivery_count: 1, owner: slot, link: Link::new(link) };
        match self.pel.insert(&key, fresh) {
            None => {
                if let Some(c) = self.consumer_mut(slot) {
                    c.pel.insert(&key, ());
                }
            }
            Some(old) => {
                // Re-delivered after a SETID: the old node goes (the new one is linked).
                self.unlink(old);
                self.move_owner(&key, old.owner, slot);
            }
        }
        fresh
    }

    /// A history re-read of `id` by its owner (XREADGROUP with an ID): delivered
    /// again now (count + 1: saturating at LLONG_MAX with `saturate`, 8.8; else
    /// wrapping as the built-in's uint64_t before 8.8), moved to the tail. False
    /// if not pending.
    pub fn redeliver(&mut self, id: StreamId, now: i64, saturate: bool) -> bool {
        self.relocate(id, Place::Tail, |n| {
            n.delivery_time = now;
            n.delivery_count = if saturate { count_plus_one(n.delivery_count) } else { n.delivery_count.wrapping_add(1) };
        })
        .is_some()
    }

    /// Moves (or keeps) the NACK for `id` to `slot` and applies the claim's
    /// delivery time and count rule (XCLAIM / XAUTOCLAIM / CLAIM). `create` makes
    /// a NACK when there is none (FORCE). Returns the updated NACK, or None when
    /// there is no NACK to claim. A NACKed entry leaves the zone.
    pub fn claim(&mut self, id: StreamId, slot: u32, when: DeliveryTime, count: ClaimCount, create: bool) -> Option<Nack> {
        let key = id.to_be_bytes();
        if create && self.pel.get(&key).is_none() {
            // A scheduled entry claimed with FORCE is delivered: it leaves the schedule.
            if self.schedule().is_some() {
                self.unschedule(id);
            }
            self.pel.insert(&key, Nack { delivery_time: when.ms(), delivery_count: 1, owner: NO_OWNER, link: Link::NIL });
        }
        let pos = match when {
            DeliveryTime::Now(_) => Place::Tail,
            DeliveryTime::At(t) => Place::Sorted(t),
        };
        let (old, new) = self.relocate(id, pos, |n| {
            n.delivery_time = when.ms();
            n.owner = slot;
            match count {
                ClaimCount::Set(c) => n.delivery_count = c,
                ClaimCount::Increment => n.delivery_count = count_plus_one(n.delivery_count),
                ClaimCount::IncrementWrapping => n.delivery_count = n.delivery_count.wrapping_add(1),
                ClaimCount::Keep => {}
            }
        })?;
        self.move_owner(&key, old.owner, slot);
        Some(new)
    }

    /// XNACK of one ID (REDIS8.md §6.2): a pending entry (owned or already NACKed)
    /// loses its owner, gets its count from `rule`, delivery time 0, and goes to
    /// the end of the NACK zone. Without a NACK, `create` (FORCE, the caller having
    /// checked that the stream entry exists) makes an unowned one with count 0
    /// before the rule. Returns whether the ID was NACKed.
    pub fn nack_entry(&mut self, id: StreamId, rule: NackCount, create: bool) -> bool {
        let key = id.to_be_bytes();
        if create && self.pel.get(&key).is_none() {
            if self.schedule().is_some() {
                self.unschedule(id);
            }
            self.pel.insert(&key, Nack { delivery_time: 0, delivery_count: 0, owner: NO_OWNER, link: Link::NIL });
        }
        let Some((old, _)) = self.relocate(id, Place::Zone, |n| {
            n.delivery_time = 0;
            n.owner = NO_OWNER;
            n.delivery_count = rule.apply(n.delivery_count);
        }) else {
            return false;
        };
        self.move_owner(&key, old.owner, NO_OWNER);
        true
    }

    // ---- loading (rdb) -------------------------------------------------------

    /// Adds a NACK without owner and outside the time list (loading); false if
    /// the ID is already pending. [`Group::load_finish`] must follow.
    pub fn load_nack(&mut self, id: StreamId, delivery_time: i64, delivery_count: u64) -> bool {
        self.pel.try_insert(&id.to_be_bytes(), Nack { delivery_time, delivery_count, owner: NO_OWNER, link: Link::NIL }).is_ok()
    }

    /// Adds a consumer (loading); None if the name exists.
    pub fn load_consumer(&mut self, name: &[u8], seen_time: i64, active_time: i64) -> Option<u32> {
        let slot = self.create_consumer(name, seen_time)?;
        if let Some(c) = self.consumer_mut(slot) {
            c.active_time = active_time;
        }
        Some(slot)
    }

    /// Gives the loaded NACK `id` to consumer `slot`; false unless the NACK exists
    /// and has no owner yet.
    pub fn load_owner(&mut self, slot: u32, id: StreamId) -> bool {
        let key = id.to_be_bytes();
        match self.pel.get_mut(&key) {
            Some(n) if n.owner == NO_OWNER => n.owner = slot,
            _ => return false,
        }
        match self.consumer_mut(slot) {
            Some(c) => c.pel.try_insert(&key, ()).is_ok(),
            None => false,
        }
    }

    /// Appends the loaded NACK `id` to the NACK zone (after the consumers were
    /// loaded); false unless it is pending, unowned, with delivery time 0 and
    /// not yet placed.
    pub fn load_zone(&mut self, id: StreamId) -> bool {
        self.load_reserve();
        // One lookup: the entry is checked and linked through the same reference.
        let Self { pel, time, .. } = self;
        match pel.get_mut(&id.to_be_bytes()) {
            Some(n) if n.owner == NO_OWNER && n.link() == NIL && n.delivery_time == 0 => {
                n.set_link(time.push_zone(id));
                true
            }
            _ => false,
        }
    }

    /// Appends the loaded NACK `id` at the tail of the time list (the saved
    /// order, after the zone); false unless it is pending, owned and not yet placed.
    pub fn load_time(&mut self, id: StreamId) -> bool {
        self.load_reserve();
        let Self { pel, time, .. } = self;
        match pel.get_mut(&id.to_be_bytes()) {
            Some(n) if n.owner != NO_OWNER && n.link() == NIL => {
                n.set_link(time.push_tail(id));
                true
            }
            _ => false,
        }
    }

    /// Before the first node of a load: the slab sized for the loaded PEL (which
    /// exists), so that it does not end up to twice that by doubling.
    fn load_reserve(&mut self) {
        if self.time.slab_len() == 0 {
            self.time.reserve_exact(self.pel.len());
        }
    }

    /// Ends the loading of a group: with `rebuild` (a payload without the order:
    /// encoding 1, the built-in's formats) the NACKs not placed yet are put in
    /// order as sorted insertions in ID order would (a stable sort by delivery
    /// time); without, every NACK must have been placed. Then [`Group::check`].
    pub fn load_finish(&mut self, rebuild: bool) -> Result<(), &'static str> {
        if self.time.len() != self.pel.len() {
            if !rebuild {
                return Err("PEL entry missing from the time order");
            }
            self.load_reserve();
            // Sized by the PEL, which exists.
            let mut rest: Vec<(i64, StreamId)> = Vec::new();
            let mut it = self.pel.iter();
            while let Some((k, n)) = it.next() {
                if n.link() == NIL {
                    rest.push((n.delivery_time, StreamId::from_be_bytes(k).unwrap_or_default()));
                }
            }
            drop(it);
            rest.sort_by_key(|&(t, _)| t);
            // Placed after what is already in the list (the zone): times from a
            // payload may be anything, so no sorted insertion against the zone.
            for (_, id) in rest {
                self.link(id, Place::Tail);
            }
        }
        self.check()
    }

    /// Checks the invariants of the module documentation. Walks only, no lookup: the time
    /// list once from its head, then the group PEL in ID order with each consumer's PEL
    /// alongside (a consumer's PEL is, in the same order, the group entries it owns). It runs
    /// on every group a load makes (load_finish): about 620 instructions per pending entry,
    /// against 1,300 with a lookup per consumer entry and per time-list node (callgrind, the
    /// RESTORE of bench/instr_cmp.py's `restore`).
    pub fn check(&self) -> Result<(), &'static str> {
        // The time list: counted, back links consistent, the zone its first `nacked` nodes.
        // Each node visited is marked (sized by the list's slab, which exists).
        const UNSEEN: u8 = 0;
        const ZONE: u8 = 1;
        const OWNED: u8 = 2;
        if self.time.len() != self.pel.len() {
            return Err("time list and PEL sizes differ");
        }
        let mut mark = vec![UNSEEN; self.time.slab_len()];
        let mut seen = 0usize;
        let mut prev = NIL;
        let mut zone_left = self.time.nacked();
        let mut last_zone = NIL;
        for (i, _) in self.time.iter() {
            if seen == self.pel.len() || self.time.prev(i) != prev {
                return Err("time list links inconsistent");
            }
            let m = mark.get_mut(i as usize).ok_or("time list links inconsistent")?;
            if *m != UNSEEN {
                return Err("time list links inconsistent");
            }
            *m = if zone_left > 0 {
                zone_left -= 1;
                last_zone = i;
                ZONE
            } else {
                OWNED
            };
            prev = i;
            seen += 1;
        }
        if seen != self.pel.len() || self.time.tail() != prev || zone_left != 0 || self.time.nack_tail() != last_zone {
            return Err("time list links inconsistent");
        }
        // Consumers by slot, each with its PEL's cursor.
        let mut cursors: Vec<Option<IdIter<'_, ()>>> = Vec::new();
        self.consumers.check()?;
        for (slot, c) in self.consumers.iter() {
            let at = slot as usize;
            if cursors.len() <= at {
                // Sized by the slots, which exist (`consumer(slot)` found one).
                cursors.resize_with(at + 1, || None);
            }
            cursors[at] = Some(c.pel.iter());
        }
        // The group PEL: each entry's time-list node holds its ID (so the PEL and the list
        // match one to one: IDs are distinct and there are as many nodes as entries), the
        // zone's entries are unowned with no delivery time, every other one is owned, and an
        // owned entry is its owner's next consumer-PEL entry.
        let mut p = self.pel.iter();
        while let Some((k, n)) = p.next() {
            let i = n.link();
            let id = StreamId::from_be_bytes(k).ok_or("PEL key is not an ID")?;
            if self.time.id(i) != Some(id) {
                return Err("time list links inconsistent");
            }
            match mark.get(i as usize) {
                Some(&ZONE) => {
                    if n.owner != NO_OWNER || n.delivery_time != 0 {
                        return Err("NACK zone entry owned or with a delivery time");
                    }
                }
                Some(&OWNED) => {
                    if n.owner == NO_OWNER {
                        return Err("unowned PEL entry outside the NACK zone");
                    }
                    let cursor = cursors.get_mut(n.owner as usize).and_then(Option::as_mut).ok_or("group PEL entry without owner")?;
                    if cursor.next().map(|(ck, _)| ck) != Some(k) {
                        return Err("consumer PEL entry not owned in the group PEL");
                    }
                }
                _ => return Err("time list links inconsistent"),
            }
        }
        for cursor in cursors.iter_mut().flatten() {
            if cursor.next().is_some() {
                return Err("consumer PEL entry not owned in the group PEL");
            }
        }
        Ok(())
    }

    /// [`Group::check`] as it was, a lookup per consumer entry and per time-list node: the
    /// tests' oracle for the walk.
    #[cfg(test)]
    pub fn check_by_lookups(&self) -> Result<(), &'static str> {
        let mut owned = 0usize;
        self.consumers.check()?;
        for (slot, c) in self.consumers.iter() {
            let mut p = c.pel.iter();
            while let Some((k, _)) = p.next() {
                match self.pel.get(k) {
                    Some(n) if n.owner == slot => owned += 1,
                    _ => return Err("consumer PEL entry not owned in the group PEL"),
                }
            }
        }
        // The time list: each node's NACK points back at it, the zone is a prefix
        // of unowned NACKs with time 0, the rest are owned, every NACK is linked once.
        if self.time.len() != self.pel.len() {
            return Err("time list and PEL sizes differ");
        }
        let mut seen = 0usize;
        let mut prev = NIL;
        let mut zone_left = self.time.nacked();
        let mut last_zone = NIL;
        for (i, id) in self.time.iter() {
            let n = self.pel.get(&id.to_be_bytes()).ok_or("time list entry not in the PEL")?;
            if n.link() != i || self.time.prev(i) != prev {
                return Err("time list links inconsistent");
            }
            if zone_left > 0 {
                if n.owner != NO_OWNER || n.delivery_time != 0 {
                    return Err("NACK zone entry owned or with a delivery time");
                }
                zone_left -= 1;
                last_zone = i;
            } else if n.owner == NO_OWNER {
                return Err("unowned PEL entry outside the NACK zone");
            }
            prev = i;
            seen += 1;
        }
        if seen != self.pel.len() || self.time.tail() != prev || zone_left != 0 || self.time.nack_tail() != last_zone {
            return Err("time list links inconsistent");
        }
        if owned + self.time.nacked() != self.pel.len() {
            return Err("group PEL entry without owner");
        }
        Ok(())
    }

    /// Approximate bytes used (MEMORY USAGE).
    pub fn mem_bytes(&self) -> usize {
        let mut total = std::mem::size_of::<Group>()
            + self.pel.mem_bytes()
            + self.time.mem_bytes()
            + self.name.len()
            + self.consumers.mem_bytes()
            + self.extra.as_deref().map_or(0, Extra::mem_bytes);
        for c in self.consumers.values() {
            total += c.name.len() + c.pel.mem_bytes();
        }
        total
    }
}

/// Maps the link of every NACK of `pel` through the time list's renumbering `remap`.
fn relink_pel(pel: &mut IdMap<Nack>, remap: &[u32]) {
    pel.for_each_value_mut(|n| {
        let l = n.link();
        if l != NIL {
            n.set_link(remap.get(l as usize).copied().unwrap_or(NIL));
        }
    });
}

/// How a claim changes the delivery count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimCount {
    /// RETRYCOUNT n.
    Set(u64),
    /// The default: one more delivery, saturating at LLONG_MAX (8.8).
    Increment,
    /// One more delivery, wrapping as the built-in's uint64_t before 8.8 (the
    /// compat levels below `latest`, so that replies match the host's).
    IncrementWrapping,
    /// JUSTID: unchanged.
    Keep,
}

/// Where [`Group::link`] puts a NACK.
#[derive(Clone, Copy)]
enum Place {
    Tail,
    Zone,
    Sorted(i64),
}

/// Iterator over a group's pending entries in time-list order ([`Group::by_time`]).
pub struct ByTime<'a> {
    g: &'a Group,
    it: super::timelist::TimeIter<'a>,
}

impl<'a> Iterator for ByTime<'a> {
    type Item = (StreamId, &'a Nack);
    fn next(&mut self) -> Option<(StreamId, &'a Nack)> {
        let (_, id) = self.it.next()?;
        Some((id, self.g.pel.get(&id.to_be_bytes())?))
    }
}

/// Iterator over a group's consumers in name order.
pub struct ConsumerIter<'a> {
    it: RosterIter<'a, Consumer>,
}

impl<'a> ConsumerIter<'a> {
    pub fn next_consumer(&mut self) -> Option<(u32, &'a Consumer)> {
        self.it.next()
    }
}

impl Named for Consumer {
    fn name(&self) -> &[u8] {
        &self.name
    }
}

impl Named for Group {
    fn name(&self) -> &[u8] {
        &self.name
    }
}

/// All groups of a stream, by name.
pub type Groups = Roster<Group>;

/// Seeks a PEL from `start` (inclusive) in ID order.
pub fn pel_from<V: EmptyRax>(pel: &IdMap<V>, start: StreamId) -> IdIter<'_, V> {
    pel.from(start)
}
