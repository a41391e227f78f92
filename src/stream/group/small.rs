//! The per-group indexes that are small in most groups, each kept as a sorted vector
//! until it first grows past [`SMALL_MAX`] keys, then as a radix tree:
//!
//! - [`IdMap`]: the group's PEL (ID -> NACK) and each consumer's own PEL (the IDs it owns,
//!   [`OwnPel`]). A queue's consumer holds one batch or less.
//! - [`Roster`]: a group's consumers by name, and a stream's groups. Most groups have one
//!   consumer or a few, most streams one group or a few.
//!
//! A radix tree costs a 224-byte header and four allocations before its first key (about
//! 300 bytes for one key); the vector costs its keys. A group with one consumer that owns one
//! entry used 1,693 bytes with all three as trees, against the built-in's 413
//! (bench/xbench.py `mem-small-group`). Nothing outside sees the difference: both forms
//! iterate in key order, and the `radix-tree-*` statistics of XINFO are those of the
//! stream's own tree, not of these.
//!
//! A vector that would outgrow [`SMALL_MAX`] becomes a tree, and stays one: an emptied tree
//! is released (it goes to the spares of [`LazyRax`]) and costs nothing, and a queue whose
//! batches cross the threshold does not convert back and forth at every batch.

use super::{EmptyRax, LazyRax};
use crate::rax;
use crate::rax::SeekOp;
use crate::stream::id::StreamId;

/// Keys kept in a vector at most. An insertion or removal moves the entries after it (at
/// most 2.5 KB of a group PEL's); past this, the tree's logarithmic cost wins.
pub const SMALL_MAX: usize = 64;

/// A vector's first allocation: room for one entry, not Vec's four (most consumers own one
/// entry or none; most groups have one consumer).
fn reserve_first<T>(v: &mut Vec<T>) {
    if v.capacity() == 0 {
        v.reserve_exact(1);
    }
}

// ---- PELs: ID -> value ------------------------------------------------------

/// A PEL: 16-byte big-endian stream IDs to values, in ID order.
#[derive(Clone, Debug)]
pub struct IdMap<V: 'static>(Ids<V>);

#[derive(Clone, Debug)]
enum Ids<V: 'static> {
    /// Sorted by key, distinct, at most [`SMALL_MAX`].
    Small(Vec<([u8; 16], V)>),
    /// Since the map first outgrew [`SMALL_MAX`].
    Tree(LazyRax<V>),
}

/// A consumer's own PEL: the IDs of the NACKs it owns.
pub type OwnPel = IdMap<()>;

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap(Ids::Small(Vec::new()))
    }
}

/// The position of `key` in a sorted vector (Err: where it would go).
fn find<V>(v: &[([u8; 16], V)], key: &[u8]) -> Result<usize, usize> {
    v.binary_search_by(|(k, _)| k[..].cmp(key))
}

/// Adds `key`, which is not in `v`, at `at`, its sorted place; a full vector is emptied
/// into the tree returned, which is to replace it.
fn add_small<V: EmptyRax>(v: &mut Vec<([u8; 16], V)>, at: usize, key: &[u8; 16], value: V) -> Option<LazyRax<V>> {
    if v.len() < SMALL_MAX {
        reserve_first(v);
        v.insert(at, (*key, value));
        return None;
    }
    let mut t = LazyRax::default();
    for (k, x) in v.drain(..) {
        t.insert(&k, x);
    }
    t.insert(key, value);
    Some(t)
}

impl<V: EmptyRax> IdMap<V> {
    pub fn len(&self) -> usize {
        match &self.0 {
            Ids::Small(v) => v.len(),
            Ids::Tree(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        match &self.0 {
            Ids::Small(v) => find(v, key).ok().map(|at| &v[at].1),
            Ids::Tree(t) => t.get(key),
        }
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        match &mut self.0 {
            Ids::Small(v) => find(v, key).ok().map(|at| &mut v[at].1),
            Ids::Tree(t) => t.get_mut(key),
        }
    }

    /// Sets `key` to `value`; returns the value it replaces.
    pub fn insert(&mut self, key: &[u8; 16], value: V) -> Option<V> {
        match &mut self.0 {
            Ids::Small(v) => match find(v, key) {
                Ok(at) => Some(std::mem::replace(&mut v[at].1, value)),
                Err(at) => {
                    if let Some(t) = add_small(v, at, key, value) {
                        self.0 = Ids::Tree(t);
                    }
                    None
                }
            },
            Ids::Tree(t) => t.insert(key, value),
        }
    }

    /// Adds `key` unless it is there (then hands `value` back).
    pub fn try_insert(&mut self, key: &[u8; 16], value: V) -> Result<(), V> {
        match &mut self.0 {
            Ids::Small(v) => match find(v, key) {
                Ok(_) => Err(value),
                Err(at) => {
                    if let Some(t) = add_small(v, at, key, value) {
                        self.0 = Ids::Tree(t);
                    }
                    Ok(())
                }
            },
            Ids::Tree(t) => t.try_insert(key, value),
        }
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        match &mut self.0 {
            Ids::Small(v) => find(v, key).ok().map(|at| v.remove(at).1),
            Ids::Tree(t) => t.remove(key),
        }
    }

    /// Every key and value in order.
    pub fn iter(&self) -> IdIter<'_, V> {
        match &self.0 {
            Ids::Small(v) => IdIter::Small(v.iter()),
            Ids::Tree(t) => IdIter::Tree(t.iter()),
        }
    }

    /// The keys and values from `start` (inclusive) in order.
    pub fn from(&self, start: StreamId) -> IdIter<'_, V> {
        let key = start.to_be_bytes();
        match &self.0 {
            Ids::Small(v) => IdIter::Small(v[v.partition_point(|(k, _)| *k < key)..].iter()),
            Ids::Tree(t) => IdIter::Tree(t.seek(SeekOp::Ge, &key)),
        }
    }

    /// `f` of the first (`first`) or the last key and value.
    pub fn edge_with<R>(&self, first: bool, f: impl FnOnce(&[u8], &V) -> R) -> Option<R> {
        match &self.0 {
            Ids::Small(v) => if first { v.first() } else { v.last() }.map(|(k, x)| f(k, x)),
            Ids::Tree(t) => t.edge_with(first, f),
        }
    }

    /// `f` of every value, in no particular order. A closure, not an iterator: a chain of
    /// the two forms' iterators cost 140 instructions per value (callgrind, the time list's
    /// renumbering of a 30,000-entry PEL).
    pub fn for_each_value_mut(&mut self, mut f: impl FnMut(&mut V)) {
        match &mut self.0 {
            Ids::Small(v) => v.iter_mut().for_each(|(_, x)| f(x)),
            Ids::Tree(t) => t.values_mut().for_each(f),
        }
    }

    /// Bytes used beyond the handle.
    pub fn mem_bytes(&self) -> usize {
        match &self.0 {
            Ids::Small(v) => v.capacity() * std::mem::size_of::<([u8; 16], V)>(),
            Ids::Tree(t) => t.mem_bytes(),
        }
    }

    /// Whether it is a tree (tests).
    #[cfg(test)]
    pub(super) fn is_tree(&self) -> bool {
        matches!(self.0, Ids::Tree(_))
    }
}

/// The keys and values of an [`IdMap`], in order.
pub enum IdIter<'a, V: 'static> {
    Small(std::slice::Iter<'a, ([u8; 16], V)>),
    Tree(rax::Iter<'a, V>),
}

impl<'a, V> IdIter<'a, V> {
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<(&[u8], &'a V)> {
        match self {
            IdIter::Small(it) => it.next().map(|(k, x)| (&k[..], x)),
            IdIter::Tree(it) => it.next(),
        }
    }
}

// ---- named values: a group's consumers, a stream's groups ------------------------

/// A value that holds its own name, the key of a [`Roster`].
pub trait Named {
    fn name(&self) -> &[u8];
}

/// Values by name, each in a slot whose number it keeps while it lives: a consumer's slot
/// is the owner its NACKs name, a group's is how the census records it (census.rs). Freed
/// slots are reused first. The name index holds slot numbers only, ordered by the names
/// the slots hold: a vector until it first outgrows [`SMALL_MAX`], then a tree from name
/// to slot. A roster of one slot (most groups have one consumer, most streams one group)
/// has no index: its slot, if used, holds its only value.
///
/// A stream's groups were a radix tree of their own: a 176-byte header in the stream's
/// record of its groups and four allocations for the first key. A stream's first group
/// took 568 bytes; 304 as a roster, with the records trimmed around it (the built-in's:
/// 185; bench/xbench.py `mem-small-group`, bench/analysis.md).
#[derive(Clone, Debug)]
pub struct Roster<T> {
    index: Index,
    /// A boxed slice, not a vector: 16 bytes, not 24, so that a group's record takes 160
    /// (jemalloc's size class below 192). Its spare room is free slots: when none is left
    /// it doubles, and the new slots go on the free list, so no capacity field is needed.
    slots: Box<[Cell<T>]>,
    /// The first free slot ([`NO_SLOT`]: none); each free slot names the next.
    free: u32,
    /// Two bytes of the roster's owner, in what would otherwise be padding: a group keeps
    /// its histogram buckets in its consumers' roster ([`Group::hist`](super::Group::hist)),
    /// which holds the group to 160 bytes (jemalloc's class below 192). The roster itself
    /// never reads them.
    tag: [u8; 2],
}

/// A slot of a [`Roster`]. A free slot is no bigger than a used one: the value's name is a
/// box, whose null pointer `Free` is told apart by (a free list as a vector took 24 bytes
/// in every group's record and in every stream's record of its groups).
#[derive(Clone, Debug)]
enum Cell<T> {
    Used(T),
    /// Free; the next free slot.
    Free(u32),
}

const _: () = assert!(std::mem::size_of::<Cell<super::Consumer>>() == std::mem::size_of::<super::Consumer>());
const _: () = assert!(std::mem::size_of::<Cell<super::Group>>() == std::mem::size_of::<super::Group>());

/// The end of a roster's free list.
const NO_SLOT: u32 = u32::MAX;

impl<T> Cell<T> {
    #[inline]
    fn get(&self) -> Option<&T> {
        match self {
            Cell::Used(v) => Some(v),
            Cell::Free(_) => None,
        }
    }

    #[inline]
    fn get_mut(&mut self) -> Option<&mut T> {
        match self {
            Cell::Used(v) => Some(v),
            Cell::Free(_) => None,
        }
    }
}

#[derive(Clone, Debug)]
enum Index {
    /// Slots sorted by name, at most [`SMALL_MAX`]. A boxed slice, not a vector: 16 bytes,
    /// not 24, so that a roster takes 48 and a stream's record of its groups 80 (a smaller
    /// size class than 96). An insertion or removal reallocates it (at most 256 bytes,
    /// within the size class mostly); names are added and removed far less often than
    /// looked up.
    Small(Box<[u32]>),
    /// Since the index first outgrew [`SMALL_MAX`].
    Tree(LazyRax<u32>),
}

const _: () = assert!(std::mem::size_of::<Index>() == 16);

/// The index of a roster of one slot: its slot 0.
const SLOT_ZERO: [u32; 1] = [0];

impl<T> Default for Roster<T> {
    fn default() -> Self {
        Roster { index: Index::Small(Box::default()), slots: Box::default(), free: NO_SLOT, tag: [0; 2] }
    }
}

/// The name of the value in `slot` (empty if none: the index and the slots are written
/// together, so that does not happen).
fn name_of<T: Named>(slots: &[Cell<T>], slot: u32) -> &[u8] {
    slots.get(slot as usize).and_then(Cell::get).map_or(&[], |v| v.name())
}

/// The position of `name` in a vector index (Err: where it would go).
fn find_name<T: Named>(v: &[u32], name: &[u8], slots: &[Cell<T>]) -> Result<usize, usize> {
    v.binary_search_by(|&s| name_of(slots, s).cmp(name))
}

impl<T> Roster<T> {
    /// The owner's two bytes.
    #[inline]
    pub(super) fn tag(&self) -> [u8; 2] {
        self.tag
    }

    #[inline]
    pub(super) fn set_tag(&mut self, tag: [u8; 2]) {
        self.tag = tag;
    }
}

impl<T: Named> Roster<T> {
    pub fn len(&self) -> usize {
        match &self.index {
            Index::Small(_) if self.slots.len() <= 1 => self.slots.iter().filter(|c| c.get().is_some()).count(),
            Index::Small(v) => v.len(),
            Index::Tree(t) => t.len(),
        }
    }

    /// The name index's vector: the one of a roster of one slot is implied.
    #[inline]
    fn small_index<'a>(&'a self, v: &'a [u32]) -> &'a [u32] {
        match &self.slots[..] {
            [Cell::Used(_)] => &SLOT_ZERO,
            _ => v,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slot of `name`.
    #[inline]
    pub fn find(&self, name: &[u8]) -> Option<u32> {
        match &self.index {
            Index::Small(v) => {
                let v = self.small_index(v);
                find_name(v, name, &self.slots).ok().map(|at| v[at])
            }
            Index::Tree(t) => t.get(name).copied(),
        }
    }

    /// The value in `slot`.
    #[inline]
    pub fn slot(&self, slot: u32) -> Option<&T> {
        self.slots.get(slot as usize).and_then(Cell::get)
    }

    #[inline]
    pub fn slot_mut(&mut self, slot: u32) -> Option<&mut T> {
        self.slots.get_mut(slot as usize).and_then(Cell::get_mut)
    }

    /// The value called `name`.
    pub fn get(&self, name: &[u8]) -> Option<&T> {
        self.slot(self.find(name)?)
    }

    /// The value called `name`, with its slot.
    #[inline]
    pub fn get_mut_indexed(&mut self, name: &[u8]) -> Option<(u32, &mut T)> {
        let slot = self.find(name)?;
        Some((slot, self.slot_mut(slot)?))
    }

    /// Adds `v` unless its name is taken (then hands it back); returns its slot.
    pub fn try_insert(&mut self, v: T) -> Result<u32, T> {
        // A roster of one slot has no index; of two or more, one that lists every value.
        let had_index = self.slots.len() > 1;
        let at = match &self.index {
            Index::Small(ix) => match find_name(self.small_index(ix), v.name(), &self.slots) {
                Ok(_) => return Err(v),
                Err(at) => Some(at),
            },
            Index::Tree(t) if t.get(v.name()).is_some() => return Err(v),
            Index::Tree(_) => None,
        };
        let slot = match self.slots.get_mut(self.free as usize) {
            Some(cell @ Cell::Free(_)) => {
                let slot = self.free;
                if let Cell::Free(next) = std::mem::replace(cell, Cell::Used(v)) {
                    self.free = next;
                }
                slot
            }
            // The list's end (or a used slot in it, which cannot happen: the list is dropped
            // rather than the value overwritten): twice the slots, the new value in the
            // first new one, the others free. Most groups have one consumer or a few, most
            // streams one group or a few: the first allocation holds one.
            _ => {
                let len = self.slots.len();
                let grown = (2 * len).max(1);
                let mut slots = std::mem::take(&mut self.slots).into_vec();
                slots.reserve_exact(grown - len);
                slots.push(Cell::Used(v));
                // Slots are u32: a roster never holds 2^32 values (each costs far more
                // than a byte, and a key's memory is bounded well below that).
                slots.extend((len + 2..=grown).map(|next| Cell::Free(if next < grown { next as u32 } else { NO_SLOT })));
                self.free = if grown > len + 1 { (len + 1) as u32 } else { NO_SLOT };
                self.slots = slots.into_boxed_slice();
                len as u32
            }
        };
        let name = name_of(&self.slots, slot);
        match (&mut self.index, at) {
            // One slot: no index.
            (Index::Small(_), _) if self.slots.len() == 1 => {}
            // Two slots, grown from one (which was used, or its value would have gone there):
            // the index of both.
            (Index::Small(ix), Some(at)) if !had_index => *ix = if at == 0 { Box::new([slot, 0]) } else { Box::new([0, slot]) },
            (Index::Small(ix), Some(at)) if ix.len() < SMALL_MAX => {
                let mut v = std::mem::take(ix).into_vec();
                v.reserve_exact(1);
                v.insert(at, slot);
                *ix = v.into_boxed_slice();
            }
            (Index::Small(ix), _) => {
                let mut t = LazyRax::default();
                for &s in ix.iter() {
                    t.insert(name_of(&self.slots, s), s);
                }
                t.insert(name, slot);
                self.index = Index::Tree(t);
            }
            (Index::Tree(t), _) => {
                t.insert(name, slot);
            }
        }
        Ok(slot)
    }

    /// Removes the value called `name`; returns it with the slot it leaves.
    pub fn remove(&mut self, name: &[u8]) -> Option<(u32, T)> {
        let slot = match &mut self.index {
            Index::Small(_) if self.slots.len() <= 1 => self.find(name)?,
            Index::Small(ix) => {
                let at = find_name(ix, name, &self.slots).ok()?;
                let mut v = std::mem::take(ix).into_vec();
                let slot = v.remove(at);
                *ix = v.into_boxed_slice();
                slot
            }
            Index::Tree(t) => t.remove(name)?,
        };
        let cell = self.slots.get_mut(slot as usize)?;
        cell.get()?;
        match std::mem::replace(cell, Cell::Free(self.free)) {
            Cell::Used(v) => {
                self.free = slot;
                Some((slot, v))
            }
            Cell::Free(_) => None,
        }
    }

    /// The values in name order, with their slots.
    pub fn iter(&self) -> RosterIter<'_, T> {
        let it = match &self.index {
            Index::Small(v) => Walk::Small(self.small_index(v).iter()),
            Index::Tree(t) => Walk::Tree(t.iter()),
        };
        RosterIter { it, slots: &self.slots }
    }

    /// The values in slot order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter_map(Cell::get)
    }

    /// The values in slot order, to change (names stay).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().filter_map(Cell::get_mut)
    }

    /// The values in slot order with their slots, to change (names stay).
    pub fn values_mut_indexed(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.slots.iter_mut().enumerate().filter_map(|(i, v)| Some((i as u32, v.get_mut()?)))
    }

    /// Slots, used and free.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Bytes used beyond the handle, not counting what the values hold.
    pub fn mem_bytes(&self) -> usize {
        let index = match &self.index {
            Index::Small(v) => v.len() * 4,
            Index::Tree(t) => t.mem_bytes(),
        };
        index + self.slots.len() * std::mem::size_of::<Cell<T>>()
    }

    /// Checks the index against the slots: each used slot indexed once, under its own
    /// name, in name order; each free slot empty and listed once.
    pub fn check(&self) -> Result<(), &'static str> {
        let mut seen = vec![false; self.slots.len()];
        let mut prev: Option<&[u8]> = None;
        let mut n = 0;
        let mut visit = |name: &[u8], slot: u32| -> Result<(), &'static str> {
            let v = self.slot(slot).ok_or("name index points at an empty slot")?;
            if v.name() != name {
                return Err("name index key differs from the name its slot holds");
            }
            if prev.is_some_and(|p| p >= name) {
                return Err("name index out of order");
            }
            match seen.get_mut(slot as usize) {
                Some(s) if !*s => *s = true,
                _ => return Err("slot indexed twice"),
            }
            prev = Some(v.name());
            n += 1;
            Ok(())
        };
        match &self.index {
            Index::Small(v) if self.slots.len() <= 1 && !v.is_empty() => return Err("a roster of one slot with an index"),
            Index::Small(v) => self.small_index(v).iter().try_for_each(|&s| visit(name_of(&self.slots, s), s))?,
            Index::Tree(t) => {
                let mut it = t.iter();
                while let Some((k, &s)) = it.next() {
                    visit(k, s)?;
                }
            }
        }
        if n != self.values().count() {
            return Err("a used slot is not in the name index");
        }
        let mut f = self.free;
        while f != NO_SLOT {
            match (seen.get_mut(f as usize), self.slots.get(f as usize)) {
                (Some(s), Some(&Cell::Free(next))) if !*s => {
                    *s = true;
                    n += 1;
                    f = next;
                }
                _ => return Err("free slot in use or listed twice"),
            }
        }
        if n != self.slots.len() {
            return Err("a free slot is not in the free list");
        }
        Ok(())
    }

    /// Swaps two entries of a vector index (tests: a broken index for the check to find).
    #[cfg(test)]
    pub(super) fn swap_index_for_test(&mut self, a: usize, b: usize) {
        if let Index::Small(v) = &mut self.index {
            v.swap(a, b);
        }
    }

    #[cfg(test)]
    pub(super) fn is_tree(&self) -> bool {
        matches!(self.index, Index::Tree(_))
    }
}

/// A [`Roster`]'s values in name order: (slot, value).
pub struct RosterIter<'a, T> {
    it: Walk<'a>,
    slots: &'a [Cell<T>],
}

enum Walk<'a> {
    Small(std::slice::Iter<'a, u32>),
    Tree(rax::Iter<'a, u32>),
}

impl<'a, T> Iterator for RosterIter<'a, T> {
    type Item = (u32, &'a T);
    #[inline]
    fn next(&mut self) -> Option<(u32, &'a T)> {
        let slot = match &mut self.it {
            Walk::Small(it) => *it.next()?,
            Walk::Tree(it) => *it.next()?.1,
        };
        Some((slot, self.slots.get(slot as usize)?.get()?))
    }
}
