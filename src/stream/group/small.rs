//! The per-group indexes that are small in most groups, each kept as a sorted vector
//! until it first grows past [`SMALL_MAX`] keys, then as a radix tree:
//!
//! - [`IdMap`]: the group's PEL (ID -> NACK) and each consumer's own PEL (the IDs it owns,
//!   [`OwnPel`]). A queue's consumer holds one batch or less.
//! - [`Names`]: a group's consumers by name. Most groups have one consumer or a few.
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

use super::{Consumer, EmptyRax, LazyRax};
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

// ---- a group's consumers by name -----------------------------------------------

/// A group's consumers by name: name -> slot in the group's `slots`, where each
/// consumer holds its own name. The vector form holds only the slots, ordered by
/// their consumers' names; each call takes the slots to read the names from.
#[derive(Clone, Debug)]
pub struct Names(Index);

#[derive(Clone, Debug)]
enum Index {
    /// Slots sorted by name, at most [`SMALL_MAX`].
    Small(Vec<u32>),
    /// Since the index first outgrew [`SMALL_MAX`].
    Tree(LazyRax<u32>),
}

impl Default for Names {
    fn default() -> Self {
        Names(Index::Small(Vec::new()))
    }
}

/// The name of the consumer in `slot` (empty if none: the index and the slots are
/// written together, so that does not happen).
fn name_of(slots: &[Option<Consumer>], slot: u32) -> &[u8] {
    slots.get(slot as usize).and_then(Option::as_ref).map_or(&[], |c| &c.name[..])
}

impl Names {
    pub fn len(&self) -> usize {
        match &self.0 {
            Index::Small(v) => v.len(),
            Index::Tree(t) => t.len(),
        }
    }

    /// The slot of `name`.
    pub fn get(&self, name: &[u8], slots: &[Option<Consumer>]) -> Option<u32> {
        match &self.0 {
            Index::Small(v) => v.binary_search_by(|&s| name_of(slots, s).cmp(name)).ok().map(|at| v[at]),
            Index::Tree(t) => t.get(name).copied(),
        }
    }

    /// Adds `name` -> `slot`, where `slots[slot]` already holds the consumer called `name`
    /// and no other slot does.
    pub fn insert(&mut self, name: &[u8], slot: u32, slots: &[Option<Consumer>]) {
        match &mut self.0 {
            Index::Small(v) => {
                let at = match v.binary_search_by(|&s| name_of(slots, s).cmp(name)) {
                    Ok(at) => {
                        v[at] = slot;
                        return;
                    }
                    Err(at) => at,
                };
                if v.len() < SMALL_MAX {
                    reserve_first(v);
                    v.insert(at, slot);
                    return;
                }
                let mut t = LazyRax::default();
                for &s in v.iter() {
                    t.insert(name_of(slots, s), s);
                }
                t.insert(name, slot);
                self.0 = Index::Tree(t);
            }
            Index::Tree(t) => {
                t.insert(name, slot);
            }
        }
    }

    /// Removes `name`, whose consumer is still in its slot; returns the slot.
    pub fn remove(&mut self, name: &[u8], slots: &[Option<Consumer>]) -> Option<u32> {
        match &mut self.0 {
            Index::Small(v) => {
                let at = v.binary_search_by(|&s| name_of(slots, s).cmp(name)).ok()?;
                Some(v.remove(at))
            }
            Index::Tree(t) => t.remove(name),
        }
    }

    /// (name, slot) in name order.
    pub fn iter<'a>(&'a self, slots: &'a [Option<Consumer>]) -> NameIter<'a> {
        match &self.0 {
            Index::Small(v) => NameIter::Small(v.iter(), slots),
            Index::Tree(t) => NameIter::Tree(t.iter()),
        }
    }

    /// Bytes used beyond the handle.
    pub fn mem_bytes(&self) -> usize {
        match &self.0 {
            Index::Small(v) => v.capacity() * 4,
            Index::Tree(t) => t.mem_bytes(),
        }
    }

    #[cfg(test)]
    pub(super) fn is_tree(&self) -> bool {
        matches!(self.0, Index::Tree(_))
    }
}

/// A group's consumers in name order: (name, slot).
pub enum NameIter<'a> {
    Small(std::slice::Iter<'a, u32>, &'a [Option<Consumer>]),
    Tree(rax::Iter<'a, u32>),
}

impl<'a> NameIter<'a> {
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<(&[u8], u32)> {
        match self {
            NameIter::Small(it, slots) => {
                let slots: &'a [Option<Consumer>] = slots;
                it.next().map(|&s| (name_of(slots, s), s))
            }
            NameIter::Tree(it) => it.next().map(|(k, &s)| (k, s)),
        }
    }
}
