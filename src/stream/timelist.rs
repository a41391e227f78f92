//! The delivery-time order of a group's pending entries (8.4+'s
//! `pel_time_head` / `pel_time_tail`, 8.8's `pel_nack_tail`): a doubly linked
//! list over the group PEL's IDs, kept in a slab.
//!
//! ```text
//!   head ──> [NACK zone: unowned, delivery_time 0, FIFO of XNACK] ──> [time order ...] <── tail
//!             head ... nack_tail                                         oldest ... newest
//! ```
//!
//! Nodes live in `nodes` and are named by their index (a `u32`, which the
//! group PEL's `Nack::link` holds). Freed nodes form a free list threaded
//! through `next`. The slab is released when the list empties and compacted
//! (in list order) when more than half of it is free; both renumber nodes, so
//! [`TimeList::remove`] reports when the caller must re-read the links
//! ([`TimeList::iter`] gives the new ones). This module knows nothing of the
//! NACKs: the group (group.rs) keeps `Nack::link` and the zone membership in
//! step with it.

use super::id::StreamId;
use crate::rax::Slab;

/// No node.
pub const NIL: u32 = u32::MAX;

/// A slab smaller than this is never compacted (a few free slots cost less than
/// renumbering every link).
const COMPACT_SLOTS_MIN: usize = 16;

#[derive(Clone, Copy, Debug)]
struct Node {
    id: StreamId,
    prev: u32,
    next: u32,
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct TimeList {
    nodes: Slab<Node>,
    /// Head of the free list (threaded through `next`).
    free: u32,
    head: u32,
    tail: u32,
    /// Last node of the NACK zone, NIL when the zone is empty.
    nack_tail: u32,
    /// Nodes in the NACK zone.
    nacked: u32,
    /// Nodes in the list.
    len: u32,
}

impl Default for TimeList {
    fn default() -> Self {
        TimeList { nodes: Slab::new(), free: NIL, head: NIL, tail: NIL, nack_tail: NIL, nacked: 0, len: 0 }
    }
}

impl TimeList {
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Nodes in the NACK zone.
    pub fn nacked(&self) -> usize {
        self.nacked as usize
    }

    pub fn head(&self) -> u32 {
        self.head
    }

    pub fn tail(&self) -> u32 {
        self.tail
    }

    /// The last node of the NACK zone, NIL if the zone is empty.
    pub fn nack_tail(&self) -> u32 {
        self.nack_tail
    }

    /// The ID held by node `i`.
    pub fn id(&self, i: u32) -> Option<StreamId> {
        self.nodes.get(i as usize).map(|n| n.id)
    }

    pub fn next(&self, i: u32) -> u32 {
        self.nodes.get(i as usize).map_or(NIL, |n| n.next)
    }

    pub fn prev(&self, i: u32) -> u32 {
        self.nodes.get(i as usize).map_or(NIL, |n| n.prev)
    }

    /// Slab slots (used and free), for the checks.
    pub fn slab_len(&self) -> usize {
        self.nodes.len()
    }

    /// Room for `n` more nodes, exactly (loading: `n` is the size of a PEL that
    /// exists, not a count read from the input).
    pub fn reserve_exact(&mut self, n: usize) {
        self.nodes.reserve(n);
    }

    /// Bytes held by the slab.
    pub fn mem_bytes(&self) -> usize {
        self.nodes.mem_bytes()
    }

    fn alloc(&mut self, id: StreamId) -> u32 {
        let node = Node { id, prev: NIL, next: NIL };
        if self.free != NIL {
            let i = self.free;
            if let Some(slot) = self.nodes.get_mut(i as usize) {
                self.free = slot.next;
                *slot = node;
                return i;
            }
            // A broken free list cannot happen (only this module writes it);
            // forget it rather than loop.
            self.free = NIL;
        }
        // A node index is a u32 below NIL: 2^32 - 1 pending entries in one group
        // (about 100 GB of PEL) is out of reach of any server.
        self.nodes.push(node) as u32
    }

    /// Links a new node for `id` after node `after` (NIL: at the head).
    fn link_after(&mut self, after: u32, id: StreamId) -> u32 {
        let i = self.alloc(id);
        let next = if after == NIL { self.head } else { self.next(after) };
        if let Some(n) = self.nodes.get_mut(i as usize) {
            n.prev = after;
            n.next = next;
        }
        match self.nodes.get_mut(after as usize) {
            Some(p) => p.next = i,
            None => self.head = i,
        }
        match self.nodes.get_mut(next as usize) {
            Some(nx) => nx.prev = i,
            None => self.tail = i,
        }
        self.len += 1;
        i
    }

    /// Appends `id` at the tail (a delivery at "now"); returns its node.
    pub fn push_tail(&mut self, id: StreamId) -> u32 {
        self.link_after(self.tail, id)
    }

    /// Appends `id` at the end of the NACK zone; returns its node.
    pub fn push_zone(&mut self, id: StreamId) -> u32 {
        let i = self.link_after(self.nack_tail, id);
        self.nack_tail = i;
        self.nacked += 1;
        i
    }

    /// Inserts `id` delivered at `t` after the last node (scanning back from the
    /// tail) whose delivery time (`time_of`) is <= t, never inside the NACK zone.
    pub fn insert_sorted(&mut self, id: StreamId, t: i64, mut time_of: impl FnMut(StreamId) -> i64) -> u32 {
        let mut cur = self.tail;
        let mut steps = 0usize;
        while cur != NIL && cur != self.nack_tail && steps <= self.nodes.len() {
            match self.nodes.get(cur as usize) {
                Some(n) if time_of(n.id) > t => cur = n.prev,
                _ => break,
            }
            steps += 1;
        }
        self.link_after(cur, id)
    }

    /// Unlinks node `i` (which must be linked; `in_zone` says whether it is in the
    /// NACK zone). Returns the renumbering when the slab was renumbered (released or
    /// compacted): the new index of each old one, NIL for a node no longer in the list;
    /// empty when no node is left. The caller maps the links it holds through it (an
    /// index per link, where looking each link up again by its ID cost a tree walk per
    /// pending entry).
    #[must_use]
    pub fn remove(&mut self, i: u32, in_zone: bool) -> Option<Vec<u32>> {
        let &Node { prev, next, .. } = self.nodes.get(i as usize)?;
        if i == self.nack_tail {
            self.nack_tail = if in_zone { prev } else { NIL };
        }
        if in_zone {
            self.nacked = self.nacked.saturating_sub(1);
        }
        match self.nodes.get_mut(prev as usize) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.nodes.get_mut(next as usize) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
        if let Some(n) = self.nodes.get_mut(i as usize) {
            n.prev = NIL;
            n.next = self.free;
        }
        self.free = i;
        self.len -= 1;
        if self.len == 0 {
            // Released, but a small slab is kept: a queue's PEL empties after every
            // acknowledged batch and fills again at the next read.
            let mut nodes = std::mem::take(&mut self.nodes);
            nodes.clear(64);
            *self = TimeList { nodes, ..TimeList::default() };
            return Some(Vec::new());
        }
        // Free slots: the slab's less the list's (no count of its own: a group record's
        // time list is 8 bytes smaller for it).
        let free = self.nodes.len().saturating_sub(self.len as usize);
        if free > self.nodes.len() / 2 && self.nodes.len() >= COMPACT_SLOTS_MIN {
            return Some(self.compact());
        }
        None
    }

    /// Rebuilds the slab in list order, without free slots; returns the renumbering
    /// (see [`TimeList::remove`]).
    fn compact(&mut self) -> Vec<u32> {
        let mut nodes = Slab::new();
        nodes.reserve(self.len as usize);
        let mut remap = vec![NIL; self.nodes.len()];
        let mut cur = self.head;
        let mut nack_tail = NIL;
        while let Some(n) = self.nodes.get(cur as usize) {
            if nodes.len() >= self.len as usize {
                break;
            }
            let i = nodes.len() as u32;
            if cur == self.nack_tail {
                nack_tail = i;
            }
            nodes.push(Node { id: n.id, prev: if i == 0 { NIL } else { i - 1 }, next: i + 1 });
            if let Some(r) = remap.get_mut(cur as usize) {
                *r = i;
            }
            cur = n.next;
        }
        if let Some(last) = nodes.len().checked_sub(1).and_then(|i| nodes.get_mut(i)) {
            last.next = NIL;
        }
        self.head = if nodes.is_empty() { NIL } else { 0 };
        self.tail = if nodes.is_empty() { NIL } else { nodes.len() as u32 - 1 };
        self.len = nodes.len() as u32;
        self.nack_tail = nack_tail;
        self.nodes = nodes;
        self.free = NIL;
        remap
    }

    /// (node, ID) from the head.
    pub fn iter(&self) -> TimeIter<'_> {
        TimeIter { list: self, cur: self.head, left: self.len }
    }
}

/// Iterator over a [`TimeList`] from the head: (node, ID).
pub struct TimeIter<'a> {
    list: &'a TimeList,
    cur: u32,
    left: u32,
}

impl Iterator for TimeIter<'_> {
    type Item = (u32, StreamId);
    fn next(&mut self) -> Option<(u32, StreamId)> {
        if self.left == 0 {
            return None;
        }
        let n = self.list.nodes.get(self.cur as usize)?;
        let out = (self.cur, n.id);
        self.cur = n.next;
        self.left -= 1;
        Some(out)
    }
}
