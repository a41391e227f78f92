//! Consumer groups: the group's pending entries list (PEL) of NACKs, its
//! consumers and their own PELs, as in t_stream.c.
//!
//! ```text
//!   Group "g"  last_id 5-0  entries_read 5
//!     pel (rax, 16-byte IDs) ──> Nack { delivery_time, delivery_count, owner: slot }
//!     consumers (rax, names) ──> slot ──> Consumer { name, seen_time, active_time,
//!                                                     pel (rax of the same IDs, no value) }
//! ```
//!
//! A NACK lives once, in the group PEL; its owner is a consumer slot (a small
//! index instead of the built-in's pointer) and the owner's PEL holds the same
//! ID. Invariant: every NACK has an owner, and an ID is in a consumer's PEL iff
//! the group PEL's NACK for it names that consumer.

use super::id::StreamId;
use crate::rax::{Rax, SeekOp};
use std::sync::LazyLock;

/// A radix tree allocated on its first key and released with its last, so that
/// a consumer without pending entries, or a group without any, costs a pointer
/// instead of an empty tree (a workload of 100k consumers is mostly that).
/// Reads go through `Deref` (an empty tree when unallocated); writes through the
/// methods below.
#[derive(Clone, Debug)]
pub struct LazyRax<V: 'static>(Option<Box<Rax<V>>>);

impl<V> Default for LazyRax<V> {
    fn default() -> Self {
        LazyRax(None)
    }
}

/// The shared empty tree that an unallocated [`LazyRax`] reads as.
pub trait EmptyRax: Sized + 'static {
    fn empty() -> &'static Rax<Self>;
}

macro_rules! empty_rax {
    ($t:ty, $name:ident) => {
        static $name: LazyLock<Rax<$t>> = LazyLock::new(Rax::new);
        impl EmptyRax for $t {
            fn empty() -> &'static Rax<$t> {
                &$name
            }
        }
    };
}
empty_rax!((), EMPTY_UNIT);
empty_rax!(u32, EMPTY_SLOTS);
empty_rax!(Nack, EMPTY_NACKS);

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
        self.0.get_or_insert_with(|| Box::new(Rax::new()))
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
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        let t = self.0.as_mut()?;
        let v = t.remove(key);
        if t.is_empty() {
            self.0 = None;
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

/// No owner (only transiently, while XCLAIM FORCE creates a NACK).
pub const NO_OWNER: u32 = u32::MAX;

/// A pending entry: delivered, not yet acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nack {
    /// Unix time in ms of the last delivery.
    pub delivery_time: i64,
    /// Number of deliveries.
    pub delivery_count: u64,
    /// Slot of the owning consumer.
    pub owner: u32,
}

/// A consumer of a group.
#[derive(Clone, Debug)]
pub struct Consumer {
    pub name: Box<[u8]>,
    /// Last time (ms) the consumer was seen (any interaction).
    pub seen_time: i64,
    /// Last time (ms) the consumer read or claimed successfully (7.2's active-time).
    pub active_time: i64,
    /// IDs of the NACKs it owns.
    pub pel: LazyRax<()>,
}

/// A consumer group.
#[derive(Clone, Debug)]
pub struct Group {
    /// Last ID delivered to the group (`>` reads start after it).
    pub last_id: StreamId,
    /// Logical read counter of `last_id`, or ENTRIES_READ_INVALID.
    pub entries_read: i64,
    pub pel: LazyRax<Nack>,
    /// Name -> slot in `slots`.
    consumers: LazyRax<u32>,
    slots: Vec<Option<Consumer>>,
    free_slots: Vec<u32>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Self {
        Group {
            last_id,
            entries_read,
            pel: LazyRax::default(),
            consumers: LazyRax::default(),
            slots: Vec::new(),
            free_slots: Vec::new(),
        }
    }

    pub fn consumer_count(&self) -> usize {
        self.consumers.len()
    }

    /// The consumer in `slot`.
    pub fn consumer(&self, slot: u32) -> Option<&Consumer> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    pub fn consumer_mut(&mut self, slot: u32) -> Option<&mut Consumer> {
        self.slots.get_mut(slot as usize).and_then(Option::as_mut)
    }

    /// Slot of the consumer called `name`, without touching it.
    pub fn find_consumer(&self, name: &[u8]) -> Option<u32> {
        self.consumers.get(name).copied()
    }

    /// Slot of the consumer called `name`; `now` refreshes its seen-time when given
    /// (streamLookupConsumer with or without SLC_NO_REFRESH).
    pub fn lookup_consumer(&mut self, name: &[u8], refresh_now: Option<i64>) -> Option<u32> {
        let slot = *self.consumers.get(name)?;
        if let (Some(now), Some(c)) = (refresh_now, self.consumer_mut(slot)) {
            c.seen_time = now;
        }
        Some(slot)
    }

    /// Creates a consumer; `None` if the name exists (streamCreateConsumer).
    pub fn create_consumer(&mut self, name: &[u8], now: i64) -> Option<u32> {
        if self.consumers.get(name).is_some() {
            return None;
        }
        let c = Consumer { name: name.into(), seen_time: now, active_time: -1, pel: LazyRax::default() };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(c);
                s
            }
            None => {
                self.slots.push(Some(c));
                (self.slots.len() - 1) as u32
            }
        };
        self.consumers.insert(name, slot);
        Some(slot)
    }

    /// Deletes a consumer and its pending entries; returns how many it had.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let slot = self.consumers.remove(name)?;
        let c = self.slots.get_mut(slot as usize)?.take()?;
        self.free_slots.push(slot);
        let mut it = c.pel.iter();
        let mut n = 0;
        while let Some((k, _)) = it.next() {
            self.pel.remove(k);
            n += 1;
        }
        Some(n)
    }

    /// Consumers in name order: (name, slot).
    pub fn consumers(&self) -> ConsumerIter<'_> {
        ConsumerIter { g: self, it: self.consumers.iter() }
    }

    /// Removes a NACK from the group and its owner (XACK). Returns whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let key = id.to_be_bytes();
        match self.pel.remove(&key) {
            Some(n) => {
                if let Some(c) = self.consumer_mut(n.owner) {
                    c.pel.remove(&key);
                }
                true
            }
            None => false,
        }
    }

    /// Records the delivery of `id` to `slot` by a `>` read (streamReplyWithRange):
    /// a new NACK, or an existing one moved to this consumer with its count reset to 1.
    pub fn deliver_new(&mut self, id: StreamId, slot: u32, now: i64) -> Nack {
        let key = id.to_be_bytes();
        let fresh = Nack { delivery_time: now, delivery_count: 1, owner: slot };
        if let Some(old) = self.pel.insert(&key, fresh) {
            if old.owner != slot {
                if let Some(c) = self.consumer_mut(old.owner) {
                    c.pel.remove(&key);
                }
            }
        }
        if let Some(c) = self.consumer_mut(slot) {
            c.pel.insert(&key, ());
        }
        fresh
    }

    /// Moves (or keeps) the NACK for `id` to `slot` and applies the claim's
    /// delivery time and count rule (XCLAIM / XAUTOCLAIM). `create` makes a NACK
    /// when there is none (FORCE). Returns the updated NACK, or None when there is
    /// no NACK to claim.
    pub fn claim(&mut self, id: StreamId, slot: u32, delivery_time: i64, count: ClaimCount, create: bool) -> Option<Nack> {
        let key = id.to_be_bytes();
        if self.pel.get(&key).is_none() {
            if !create {
                return None;
            }
            self.pel.insert(&key, Nack { delivery_time, delivery_count: 1, owner: NO_OWNER });
        }
        let nack = self.pel.get_mut(&key)?;
        let old_owner = nack.owner;
        nack.delivery_time = delivery_time;
        match count {
            ClaimCount::Set(n) => nack.delivery_count = n,
            ClaimCount::Increment => nack.delivery_count = nack.delivery_count.wrapping_add(1),
            ClaimCount::Keep => {}
        }
        nack.owner = slot;
        let out = *nack;
        if old_owner != slot {
            if let Some(c) = self.consumer_mut(old_owner) {
                c.pel.remove(&key);
            }
            if let Some(c) = self.consumer_mut(slot) {
                c.pel.insert(&key, ());
            }
        }
        Some(out)
    }

    /// The NACK of `id`, if pending.
    pub fn nack(&self, id: StreamId) -> Option<&Nack> {
        self.pel.get(&id.to_be_bytes())
    }

    /// Name of the owner of a NACK.
    pub fn owner_name(&self, n: &Nack) -> &[u8] {
        self.consumer(n.owner).map_or(&[][..], |c| &c.name[..])
    }

    // ---- loading (rdb) -------------------------------------------------------

    /// Adds a NACK without owner (loading); false if the ID is already pending.
    pub fn load_nack(&mut self, id: StreamId, delivery_time: i64, delivery_count: u64) -> bool {
        self.pel
            .try_insert(&id.to_be_bytes(), Nack { delivery_time, delivery_count, owner: NO_OWNER })
            .is_ok()
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

    /// Checks the invariants linking the group PEL and the consumers' PELs.
    pub fn check(&self) -> Result<(), &'static str> {
        let mut owned = 0usize;
        let mut it = self.consumers.iter();
        while let Some((name, &slot)) = it.next() {
            let c = self.consumer(slot).ok_or("consumer slot empty")?;
            if &c.name[..] != name {
                return Err("consumer name mismatch");
            }
            let mut p = c.pel.iter();
            while let Some((k, _)) = p.next() {
                match self.pel.get(k) {
                    Some(n) if n.owner == slot => owned += 1,
                    _ => return Err("consumer PEL entry not owned in the group PEL"),
                }
            }
        }
        if owned != self.pel.len() {
            return Err("group PEL entry without owner");
        }
        Ok(())
    }

    /// Approximate bytes used (MEMORY USAGE).
    pub fn mem_bytes(&self) -> usize {
        let mut total = std::mem::size_of::<Group>()
            + self.pel.mem_bytes()
            + self.consumers.mem_bytes()
            + self.slots.capacity() * std::mem::size_of::<Option<Consumer>>()
            + self.free_slots.capacity() * 4;
        for c in self.slots.iter().flatten() {
            total += c.name.len() + c.pel.mem_bytes();
        }
        total
    }
}

/// How a claim changes the delivery count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimCount {
    /// RETRYCOUNT n.
    Set(u64),
    /// The default: one more delivery.
    Increment,
    /// JUSTID: unchanged.
    Keep,
}

/// Iterator over a group's consumers in name order.
pub struct ConsumerIter<'a> {
    g: &'a Group,
    it: crate::rax::Iter<'a, u32>,
}

impl<'a> ConsumerIter<'a> {
    pub fn next_consumer(&mut self) -> Option<(u32, &'a Consumer)> {
        let (_, &slot) = self.it.next()?;
        Some((slot, self.g.consumer(slot)?))
    }
}

/// All groups of a stream, by name.
pub type Groups = Rax<Group>;

/// Seeks a PEL from `start` (inclusive) in ID order.
pub fn pel_from<V>(pel: &Rax<V>, start: StreamId) -> crate::rax::Iter<'_, V> {
    pel.seek(SeekOp::Ge, &start.to_be_bytes())
}
