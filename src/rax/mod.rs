#![forbid(unsafe_code)]
//! A radix tree ("rax") mapping byte-string keys to values, node-for-node compatible with
//! Redis's `rax.c` (the structure indexing stream nodes, consumer groups, consumers and PELs).
//!
//! # Structure
//!
//! Edges carry bytes; a node stands for the string spelled by the edges from the root to it.
//! The tree holding "foo", "foobar" and "footer" (a node that is a key is drawn `[]`, one that
//! is not `()`; the string a node stands for is written beside it):
//!
//! ```text
//!              (f) ""
//!                \
//!                (o) "f"
//!                  \
//!                  (o) "fo"
//!                    \
//!                  [t   b] "foo"
//!                  /     \
//!         "foot" (e)     (a) "foob"
//!                /         \
//!      "foote" (r)         (r) "fooba"
//!              /             \
//!    "footer" []             [] "foobar"
//! ```
//!
//! Chains of nodes with a single child are compressed into one node holding the whole run of
//! bytes and a single link to the node the last byte leads to:
//!
//! ```text
//!                  ("foo") ""
//!                     |
//!                  [t   b] "foo"
//!                  /     \
//!        "foot" ("er")    ("ar") "foob"
//!                 /          \
//!       "footer" []          [] "foobar"
//! ```
//!
//! That tree has 6 nodes and 3 keys. Inserting "first" splits the compressed head:
//!
//! ```text
//!                    (f) ""
//!                    /
//!                 (i o) "f"
//!                 /   \
//!    "fi"  ("rst")    (o) "fo"
//!              /        \
//!    "first" []       [t   b] "foo"
//!                     /     \
//!           "foot" ("er")    ("ar") "foob"
//!                    /          \
//!          "footer" []          [] "foobar"
//! ```
//!
//! # Node rules (exactly those of `rax.c`)
//!
//! * A node is either *compressed*: a run of `size >= 2` bytes and exactly one child, the node
//!   the whole run leads to; or *normal*: `size` in `0..=256` children, each labelled by one
//!   byte, kept sorted by that byte.
//! * A node may be a key (`iskey`) whatever its kind; the key's value is held by the node the
//!   key's path leads to (the node *after* its last byte). Every leaf is a key, and every node
//!   other than the root that is not a key has at least one child.
//! * Insertion (`raxGenericInsert`): walk as far as the key matches. Ending exactly on a node
//!   boundary marks that node as a key. Ending inside a compressed node on a mismatch at offset
//!   `j` (ALGO 1) splits it into: the first `j` bytes (kept in place, compressed iff `j > 1`;
//!   absent if `j == 0`, in which case the split node takes its place and its key), a normal
//!   "split" node with the mismatching byte, and the remaining `size - j - 1` bytes (a new node,
//!   compressed iff more than 1 byte; absent if 0); the key's byte is then added to the split
//!   node. Ending inside a compressed node without mismatch (ALGO 2) trims it to the first `j`
//!   bytes (compressed iff `j > 1`) followed by a new key node holding the rest (compressed iff
//!   more than 1 byte). Remaining key bytes are appended below: a childless node gets them as a
//!   compressed run when more than one byte remains, otherwise one byte becomes a new child.
//! * Removal (`raxRemove`): unmark the key; if its node is a leaf, free it and its ancestors
//!   up to the first one that is a key or a normal node with other than one child, then unlink
//!   the last freed node from that ancestor (a compressed ancestor becomes a childless normal
//!   node). If the result is a non-key normal node with one child (or the removed key's own
//!   node had exactly one child as a normal node), walk up while the parents are non-key
//!   nodes with one child (compressed or normal of size 1), then merge the chain of such nodes
//!   from there down into one compressed node. Note that, as in `rax.c`, removing the key of a
//!   *compressed* node does not trigger recompression.
//!
//! # Counts
//!
//! [`Rax::len`] is the number of keys (`numele`); [`Rax::node_count`] is the number of nodes,
//! the root included, so an empty tree has 1 node (`numnodes`, reported by `XINFO STREAM` as
//! `radix-tree-nodes`; the key count is `radix-tree-keys`).
//!
//! # Representation
//!
//! The logical tree above is exactly rax's; its physical form is compact:
//!
//! * Nodes live in an arena (`Vec<Node>`, 12 bytes each: flags+size, value slot, block
//!   offset; addressed by `u32`, freed slots reused through a free list). The root is always
//!   slot 0: replacing a node (a split, a merge) reuses its slot, so parent links stay valid.
//! * A node's bytes and child references live in one block: up to 1280 bytes in a shared
//!   word-aligned pool, in size classes (exact to 64 bytes, then about an eighth apart: a
//!   node gaining a child usually stays in its block) with a free list per length, larger
//!   ones (long compressed runs only) in a box of their own.
//! * Values live in a slab of [`Slot`]s (`Option<V>` unless the value type has a vacant
//!   state of its own; chunked so that a big one never moves, + free list), so nodes that
//!   are not keys pay nothing for them.
//! * A *leaf* (childless key node, one per key in most trees) has no arena slot at all: its
//!   parent's child reference is the value slot tagged with `LEAF`. It gets a slot when it
//!   gains a child and gives it back when it loses its last one. Counts are unaffected.
//!
//! Every walk is iterative; nothing recurses, dropping included. Indices are `u32` (with one
//! tag bit), which bounds a tree to 2^31 keys and 2^31 nodes and 16 GiB of pooled blocks.

use std::fmt;

mod slab;
pub use slab::Slab;

#[cfg(test)]
mod tests;

/// Longest run of bytes one compressed node holds (`RAX_NODE_MAX_SIZE`).
const MAX_NODE_SIZE: usize = (1 << 29) - 1;
const SIZE_MASK: u32 = (1 << 29) - 1;
const COMPR: u32 = 1 << 31;
const FREE: u32 = 1 << 30;
const NONE: u32 = u32::MAX;
const HEAD: u32 = 0;
/// A child reference with this bit set is a *leaf*: a childless key node that has no arena
/// slot; the other bits are its value slot.
const LEAF: u32 = 1 << 31;
/// Blocks of at most this many 4-byte words live in the pool (a normal node with 256 children
/// needs 64 + 256 words); larger ones get a box of their own.
const MAX_SMALL_WORDS: usize = 320;

/// The block size class of every small block length in words (index: words needed):
/// exact up to 16 words, then classes about an eighth apart (18, 20, 22, 24, 27, ...,
/// 289, 320). A normal node gains one child at a time (a stream's master IDs, a PEL's
/// IDs arrive in order): with a block per exact length it moved at every insertion and
/// left its old block to a free list that only its next sibling would reuse (a group
/// PEL growing by 30,000 deliveries spent 35% of XS.READGROUP in Rax::compact and as
/// much in growing the pool). With classes it grows in place within a class and moves
/// about 25 times on its way to 256 children; the room a node does not use is at most
/// an eighth of its block, and only for nodes above 16 words.
const CLASS_WORDS: [u16; MAX_SMALL_WORDS + 1] = {
    let mut t = [0u16; MAX_SMALL_WORDS + 1];
    let mut w = 0;
    let mut class = 0;
    while w <= MAX_SMALL_WORDS {
        if w > class {
            class = if w <= 16 { w } else { class + class / 8 };
            if class < w {
                class = w;
            }
            if class > MAX_SMALL_WORDS {
                class = MAX_SMALL_WORDS;
            }
        }
        t[w] = class as u16;
        w += 1;
    }
    t
};

/// The words of the block that holds `words` words (unchanged for big blocks).
#[inline]
fn class_words(words: usize) -> usize {
    CLASS_WORDS.get(words).map_or(words, |&c| c as usize)
}

/// Where a seek lands relative to the given key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekOp {
    /// The smallest key (`^`); the key argument is ignored.
    First,
    /// The largest key (`$`); the key argument is ignored.
    Last,
    /// Exactly the key (`==`).
    Eq,
    /// The smallest key `>=` the given one.
    Ge,
    /// The smallest key `>` the given one.
    Gt,
    /// The largest key `<=` the given one.
    Le,
    /// The largest key `<` the given one.
    Lt,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    /// bit 31: compressed; bit 30: slot is free; bits 0..29: size.
    meta: u32,
    /// Index into the value slab, `NONE` if the node is not a key.
    val: u32,
    /// Block offset (pool words, or index of a big block); next free slot when free.
    off: u32,
}

impl Node {
    const EMPTY: Node = Node { meta: 0, val: NONE, off: 0 };
    #[inline]
    fn size(self) -> usize {
        (self.meta & SIZE_MASK) as usize
    }
    #[inline]
    fn compr(self) -> bool {
        self.meta & COMPR != 0
    }
    #[inline]
    fn is_key(self) -> bool {
        self.val != NONE
    }
    /// Number of children.
    #[inline]
    fn kids(self) -> usize {
        if self.compr() {
            1
        } else {
            self.size()
        }
    }
    /// Length of the bytes a step from this node towards a child adds to the key.
    #[inline]
    fn edge_len(self) -> usize {
        if self.compr() {
            self.size()
        } else {
            1
        }
    }
    /// Bytes of the block: the data padded to 4, then one u32 per child.
    #[inline]
    fn block_len(self) -> usize {
        block_len(self.meta)
    }
}

/// Makes room for `extra` more elements, growing by an eighth rather than doubling, so that
/// large arenas carry at most ~12% spare capacity (the built-in's nodes are separate
/// allocations: jemalloc's size classes leave them about that much).
#[inline]
fn reserve<T>(v: &mut Vec<T>, extra: usize) {
    if v.capacity() - v.len() < extra {
        v.reserve_exact(extra.max(v.capacity() / 8).max(8));
    }
}

#[inline]
fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

#[inline]
fn block_len(meta: u32) -> usize {
    let size = (meta & SIZE_MASK) as usize;
    let kids = if meta & COMPR != 0 { 1 } else { size };
    pad4(size) + 4 * kids
}

#[inline]
fn rd32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

#[inline]
fn wr32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Position of byte `c` among the sorted child labels `d`.
#[inline]
fn find_child(d: &[u8], c: u8) -> Option<usize> {
    if d.len() <= 16 {
        d.iter().position(|&b| b == c)
    } else {
        d.binary_search(&c).ok()
    }
}

#[inline]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut i = 0;
    while i + 8 <= n {
        if a[i..i + 8] != b[i..i + 8] {
            break;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Node blocks. Small ones are carved from one byte pool (offsets in 4-byte words) and
/// recycled through per-size free lists threaded through the freed blocks; big ones are boxes.
#[derive(Clone, Default)]
struct Store {
    pool: Vec<u8>,
    /// Free-list head per block size in words (grown on demand).
    heads: Vec<u32>,
    /// Blocks too big for the pool (keys longer than a few hundred bytes): most trees have
    /// none, and pay one pointer.
    big: Option<Box<Big>>,
    /// Bytes of the pool in free lists. A node that gains children moves to a bigger block
    /// and leaves its old one to the free list of that size, which only a node of exactly
    /// that size reuses; the keys of a stream (node master IDs, in increasing order) grow
    /// nodes one child at a time, so without [`Rax::compact`] most of the pool would end up
    /// in free lists (measured: 142 KB of a 162 KB pool for 1,000 IDs 100 ms apart).
    free_small: usize,
}

#[derive(Clone, Default)]
struct Big {
    blocks: Vec<Box<[u8]>>,
    free: Vec<u32>,
    bytes: usize,
}

impl Store {
    #[inline]
    fn bigs(&self) -> &[Box<[u8]>] {
        self.big.as_deref().map_or(&[], |b| &b.blocks)
    }

    #[inline]
    fn bigs_mut(&mut self) -> &mut [Box<[u8]>] {
        self.big.as_deref_mut().map_or(&mut [], |b| &mut b.blocks)
    }

    fn alloc(&mut self, len: usize) -> u32 {
        let words = class_words(len.div_ceil(4));
        if words == 0 {
            return 0;
        }
        if words <= MAX_SMALL_WORDS {
            if let Some(&h) = self.heads.get(words) {
                if h != NONE {
                    self.heads[words] = rd32(&self.pool, h as usize * 4);
                    self.free_small -= words * 4;
                    return h;
                }
            }
            let off = self.pool.len() / 4;
            reserve(&mut self.pool, words * 4);
            self.pool.resize(self.pool.len() + words * 4, 0);
            off as u32
        } else {
            let b = vec![0u8; len].into_boxed_slice();
            let big = self.big.get_or_insert_with(Box::default);
            big.bytes += len;
            if let Some(i) = big.free.pop() {
                big.blocks[i as usize] = b;
                i
            } else {
                big.blocks.push(b);
                (big.blocks.len() - 1) as u32
            }
        }
    }

    fn free(&mut self, off: u32, len: usize) {
        let words = class_words(len.div_ceil(4));
        if words == 0 {
            return;
        }
        if words <= MAX_SMALL_WORDS {
            self.free_words(off, words);
        } else if let Some(big) = self.big.as_deref_mut() {
            let b = std::mem::take(&mut big.blocks[off as usize]);
            big.bytes -= b.len();
            big.free.push(off);
        }
    }

    /// Puts `words` words of the pool at `off` on the free list of that length (a whole
    /// block, or the tail of one that shrank in place, which only a block of exactly that
    /// length reuses, or a compaction).
    fn free_words(&mut self, off: u32, words: usize) {
        if self.heads.len() <= words {
            self.heads.resize(words + 1, NONE);
        }
        let prev = self.heads[words];
        wr32(&mut self.pool, off as usize * 4, prev);
        self.heads[words] = off;
        self.free_small += words * 4;
    }

    #[inline]
    fn get(&self, off: u32, len: usize) -> &[u8] {
        let words = len.div_ceil(4);
        if words == 0 {
            &[]
        } else if words <= MAX_SMALL_WORDS {
            let s = off as usize * 4;
            &self.pool[s..s + len]
        } else {
            &self.bigs()[off as usize][..len]
        }
    }

    #[inline]
    fn get_mut(&mut self, off: u32, len: usize) -> &mut [u8] {
        let words = len.div_ceil(4);
        if words == 0 {
            &mut []
        } else if words <= MAX_SMALL_WORDS {
            let s = off as usize * 4;
            &mut self.pool[s..s + len]
        } else {
            &mut self.bigs_mut()[off as usize][..len]
        }
    }

    /// Bytes of the pool sitting in free lists, counted by walking them (tests).
    #[cfg(test)]
    fn free_bytes(&self) -> usize {
        let mut t = 0;
        for (w, &h) in self.heads.iter().enumerate() {
            let mut h = h;
            while h != NONE {
                t += w * 4;
                h = rd32(&self.pool, h as usize * 4);
            }
        }
        t
    }

    /// Whether the free lists hold more than an eighth of a pool worth compacting.
    fn wants_compaction(&self) -> bool {
        self.pool.len() >= 1024 && self.free_small > self.pool.len() / 8
    }

    fn mem_bytes(&self) -> usize {
        self.pool.capacity()
            + self.heads.capacity() * 4
            + self
                .big
                .as_ref()
                .map_or(0, |b| std::mem::size_of::<Big>() + b.blocks.capacity() * std::mem::size_of::<Box<[u8]>>() + b.bytes + b.free.capacity() * 4)
    }
}

/// A slot of a tree's value slab: a value, or a vacancy (its key was removed; the slot awaits
/// reuse). `Option<V>` serves any value type. A type with a vacant state of its own is its
/// own slot, no larger than the value: a stream node's listpack handle is 16 bytes, and
/// `Option` would make each slot 24.
pub trait Slot<V> {
    fn vacant() -> Self;
    fn fill(v: V) -> Self;
    fn value(&self) -> Option<&V>;
    fn value_mut(&mut self) -> Option<&mut V>;
    /// The value, the slot left vacant.
    fn take_value(&mut self) -> Option<V>;
}

impl<V> Slot<V> for Option<V> {
    #[inline(always)]
    fn vacant() -> Self {
        None
    }
    #[inline(always)]
    fn fill(v: V) -> Self {
        Some(v)
    }
    #[inline(always)]
    fn value(&self) -> Option<&V> {
        self.as_ref()
    }
    #[inline(always)]
    fn value_mut(&mut self) -> Option<&mut V> {
        self.as_mut()
    }
    #[inline(always)]
    fn take_value(&mut self) -> Option<V> {
        self.take()
    }
}

/// A radix tree with byte-string keys; see the [module documentation](self). Its values are
/// stored in slots of type `S` (see [`Slot`]).
#[derive(Clone)]
pub struct Rax<V, S = Option<V>> {
    nodes: Vec<Node>,
    /// Head of the list of free node slots (threaded through `Node::off`).
    free_node: u32,
    store: Store,
    values: Slab<S>,
    free_vals: Vec<u32>,
    /// Counts as u32: a tree holds at most 2^31 keys and nodes (see Representation).
    numele: u32,
    numnodes: u32,
    /// Reused buffers, boxed together when first given back (see [`Work`]).
    work: Option<Box<Work>>,
    /// The largest key and its value slot, remembered by [`Rax::seek_mut`]`(Last)` until a
    /// key is inserted or removed (a value keeps its slot while its key exists): a stream
    /// appends to its last node on every XADD, and the walk down to it was 4% of XS.ADD.
    /// Boxed: most trees (PELs, consumers) never ask, and pay 8 bytes.
    last: Option<Box<LastKey>>,
    _values: std::marker::PhantomData<fn() -> V>,
}

/// Buffers a tree reuses between calls: the bytes of a compressed node being rebuilt, the
/// parent path of a removal. Per tree, not thread-local: a thread-local costs a
/// `__tls_get_addr` call per access in a shared object (measured: XS.ACK of 10 IDs 3.9% more
/// instructions). Boxed, and only once a buffer that holds room is given back: a tree that
/// never splits a compressed node nor removes a key (a stream's one-node tree, a
/// never-acknowledged PEL) pays a pointer where the two vectors took 48 bytes.
#[derive(Clone, Default)]
struct Work {
    scratch: Vec<u8>,
    stack: Vec<(u32, u32)>,
}

/// Gives buffer `v` back to a tree's [`Work`] box, into the field `slot` picks: cleared,
/// dropped when it holds room for more than 4096 elements, and the box made only once there
/// is room worth keeping.
fn give_back<T>(work: &mut Option<Box<Work>>, mut v: Vec<T>, slot: impl FnOnce(&mut Work) -> &mut Vec<T>) {
    v.clear();
    if v.capacity() > 4096 {
        v = Vec::new();
    }
    if v.capacity() > 0 || work.is_some() {
        *slot(work.get_or_insert_with(Box::default)) = v;
    }
}

#[derive(Clone)]
struct LastKey {
    /// NONE: to be found again.
    slot: u32,
    key: Vec<u8>,
}

impl<V, S: Slot<V>> Default for Rax<V, S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: fmt::Debug, S: Slot<V>> fmt::Debug for Rax<V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        let mut it = self.iter();
        while let Some((k, v)) = it.next() {
            m.entry(&k, v);
        }
        m.finish()
    }
}

/// What a seek walk settled on before descending to the final key.
enum Outcome {
    /// The first key in the subtree reached by child `k` of node `p`, below prefix `key[..pl]`.
    FirstIn(u32, usize, usize),
    /// The last key in that subtree.
    LastIn(u32, usize, usize),
    /// The closest greater subtree met on the way.
    Succ,
    /// The closest smaller key or subtree met on the way.
    Pred,
}

enum Pred {
    None,
    /// An ancestor that is a key, standing for `key[..pl]`.
    Node(u32, usize),
    /// A smaller sibling subtree: child `k` of `p` below prefix `key[..pl]`.
    Sub(u32, usize, usize),
}

impl<V, S: Slot<V>> Rax<V, S> {
    /// An empty tree (one node, the root).
    pub fn new() -> Self {
        Rax {
            nodes: vec![Node::EMPTY],
            free_node: NONE,
            store: Store::default(),
            values: Slab::new(),
            free_vals: Vec::new(),
            numele: 0,
            numnodes: 1,
            work: None,
            last: None,
            _values: std::marker::PhantomData,
        }
    }

    /// Forgets the remembered largest key (the set of keys changed).
    #[inline]
    fn keys_changed(&mut self) {
        if let Some(l) = &mut self.last {
            l.slot = NONE;
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.numele as usize
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.numele == 0
    }

    /// Number of nodes, root included, exactly as `rax->numnodes` for the same operations.
    pub fn node_count(&self) -> usize {
        self.numnodes as usize
    }

    /// Bytes occupied by this tree's own structures: the struct, node arena, blocks, value slab
    /// slots (values inline, not what they own on the heap), free lists and spare capacity.
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.store.mem_bytes()
            + self.values.mem_bytes()
            + self.free_vals.capacity() * 4
            + self
                .work
                .as_ref()
                .map_or(0, |w| std::mem::size_of::<Work>() + w.scratch.capacity() + w.stack.capacity() * std::mem::size_of::<(u32, u32)>())
            + self.last.as_ref().map_or(0, |l| std::mem::size_of::<LastKey>() + l.key.capacity())
    }

    /// Moves every pool block next to each other in a new pool (an eighth of spare
    /// capacity) and empties the free lists. Called after an insert once the free lists
    /// hold more than an eighth of the pool: each compaction copies the live blocks and
    /// walks the node table, and at least an eighth of the pool must have been freed
    /// since the previous one, so the work is at most about 8 bytes per byte freed.
    fn compact(&mut self) {
        let live = self.store.pool.len() - self.store.free_small;
        let mut pool: Vec<u8> = Vec::with_capacity(live + live / 8);
        for n in self.nodes.iter_mut() {
            if n.meta & FREE != 0 {
                continue;
            }
            let words = class_words(n.block_len().div_ceil(4));
            if words == 0 || words > MAX_SMALL_WORDS {
                continue;
            }
            let src = n.off as usize * 4;
            let new_off = (pool.len() / 4) as u32;
            pool.extend_from_slice(&self.store.pool[src..src + words * 4]);
            n.off = new_off;
        }
        self.store.pool = pool;
        self.store.heads.clear();
        self.store.free_small = 0;
    }

    fn maybe_compact(&mut self) {
        if self.store.wants_compaction() {
            self.compact();
        }
    }

    /// Every value, in no particular order (the value slab): cheaper than a walk of the
    /// tree when the order does not matter.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.values.iter().filter_map(S::value)
    }

    /// Every value, in no particular order (the value slab): for updates that do not
    /// depend on key order and do not add or remove keys.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.values.iter_mut().filter_map(S::value_mut)
    }

    /// Every value with its slot in the value slab, in no particular order.
    pub fn values_mut_indexed(&mut self) -> impl Iterator<Item = (u32, &mut V)> {
        self.values.iter_mut().enumerate().filter_map(|(i, v)| v.value_mut().map(|v| (i as u32, v)))
    }

    /// Removes every key, releasing memory.
    pub fn clear(&mut self) {
        *self = Self::new();
    }

    // ----------------------------------------------------------------- node access

    #[inline]
    fn nd(&self, n: u32) -> Node {
        if n & LEAF != 0 {
            Node { meta: 0, val: n & !LEAF, off: 0 }
        } else {
            self.nodes[n as usize]
        }
    }

    /// Overwrites child reference `k` of real node `p`.
    fn set_child(&mut self, p: u32, k: usize, c: u32) {
        let n = self.nd(p);
        let at = pad4(n.size()) + 4 * k;
        wr32(self.store.get_mut(n.off, n.block_len()), at, c);
    }

    #[inline]
    fn block(&self, n: Node) -> &[u8] {
        self.store.get(n.off, n.block_len())
    }

    #[inline]
    fn data(&self, n: Node) -> &[u8] {
        &self.block(n)[..n.size()]
    }

    #[inline]
    fn child(&self, n: Node, k: usize) -> u32 {
        rd32(self.block(n), pad4(n.size()) + 4 * k)
    }

    #[inline]
    fn last_child(&self, n: Node) -> u32 {
        self.child(n, n.kids() - 1)
    }

    #[inline]
    fn value_of(&self, n: Node) -> Option<&V> {
        if n.val == NONE {
            return None;
        }
        self.values.get(n.val as usize).and_then(S::value)
    }

    /// Gives node `idx` a new block: `data` (compressed or child labels) and `kids`.
    /// Key status is kept.
    fn write_node(nodes: &mut [Node], store: &mut Store, idx: u32, compr: bool, data: &[u8], kids: &[u32]) {
        let old = nodes[idx as usize];
        store.free(old.off, old.block_len());
        let size = data.len();
        let meta = if compr { COMPR } else { 0 } | size as u32;
        let len = block_len(meta);
        let off = store.alloc(len);
        let b = store.get_mut(off, len);
        b[..size].copy_from_slice(data);
        let base = pad4(size);
        for (k, &c) in kids.iter().enumerate() {
            wr32(b, base + 4 * k, c);
        }
        let n = &mut nodes[idx as usize];
        n.meta = meta;
        n.off = off;
    }

    /// A new real node: normal, childless, not a key.
    fn alloc_node(&mut self) -> u32 {
        self.numnodes += 1;
        if self.free_node != NONE {
            let idx = self.free_node;
            self.free_node = self.nodes[idx as usize].off;
            self.nodes[idx as usize] = Node::EMPTY;
            idx
        } else {
            reserve(&mut self.nodes, 1);
            self.nodes.push(Node::EMPTY);
            (self.nodes.len() - 1) as u32
        }
    }

    /// Frees a node (its value, if any, must have been taken).
    fn free_node(&mut self, idx: u32) {
        if idx & LEAF != 0 {
            self.numnodes -= 1;
            return;
        }
        let n = self.nd(idx);
        self.store.free(n.off, n.block_len());
        self.nodes[idx as usize] = Node { meta: FREE, val: NONE, off: self.free_node };
        self.free_node = idx;
        self.numnodes -= 1;
    }

    /// Stores a new value (counted as a key) and returns its slot.
    fn new_value(&mut self, value: V) -> u32 {
        self.numele += 1;
        if let Some(s) = self.free_vals.pop() {
            if let Some(v) = self.values.get_mut(s as usize) {
                *v = S::fill(value);
            }
            s
        } else {
            self.values.push(S::fill(value)) as u32
        }
    }

    /// Marks real node `idx` (not a key) as a key holding `value`.
    fn set_new_value(&mut self, idx: u32, value: V) {
        let slot = self.new_value(value);
        self.nodes[idx as usize].val = slot;
    }

    /// A new leaf holding `value` (counted as a node and a key).
    fn new_leaf(&mut self, value: V) -> u32 {
        self.numnodes += 1;
        LEAF | self.new_value(value)
    }

    /// Takes the value of key node `idx`, which stops being a key (a leaf reference then
    /// dangles and must be freed).
    fn take_value(&mut self, idx: u32) -> Option<V> {
        let slot = self.nd(idx).val;
        if slot == NONE {
            return None;
        }
        if idx & LEAF == 0 {
            self.nodes[idx as usize].val = NONE;
        }
        self.free_vals.push(slot);
        self.numele -= 1;
        self.values.get_mut(slot as usize).and_then(S::take_value)
    }

    /// Links `child` under byte `c` of normal node `h` (which has no child `c`).
    fn add_child(&mut self, h: u32, c: u8, child: u32) {
        let pos = self.data(self.nd(h)).partition_point(|&k| k < c);
        self.splice_children(h, pos, Some((c, child)));
    }

    /// Unlinks child number `k` of `h` (`raxRemoveChild`): a compressed node becomes a
    /// childless normal node.
    fn remove_child(&mut self, h: u32, k: usize) {
        if self.nd(h).compr() {
            Self::write_node(&mut self.nodes, &mut self.store, h, false, &[], &[]);
        } else {
            self.splice_children(h, k, None);
        }
    }

    /// Rebuilds normal node `h` with child `(label, ref)` inserted at position `pos`, or with
    /// the child at `pos` removed, copying the old block through the scratch buffer.
    fn splice_children(&mut self, h: u32, pos: usize, ins: Option<(u8, u32)>) {
        let n = self.nd(h);
        let size = n.size();
        let mut sc = self.take_scratch();
        sc.clear();
        sc.extend_from_slice(self.block(n));
        let old_base = pad4(size);
        let new_size = if ins.is_some() { size + 1 } else { size - 1 };
        let meta = new_size as u32;
        let len = block_len(meta);
        let old_len = n.block_len();
        let (old_words, new_words) = (class_words(old_len.div_ceil(4)), class_words(len.div_ceil(4)));
        let off = if new_words > 0 && new_words == old_words && old_words <= MAX_SMALL_WORDS {
            // Grows or shrinks within its block's size class.
            n.off
        } else if ins.is_none() && new_words > 0 && old_words <= MAX_SMALL_WORDS {
            // Shrinks in place (as raxRemoveChild's realloc): the node keeps the head of its
            // block and the tail goes to the free list of its length. Moving to a block of the
            // smaller size instead grew the pool by a block per removal (a trim removes
            // children one by one, and the smaller size's free list is empty).
            self.store.free_words(n.off + new_words as u32, old_words - new_words);
            n.off
        } else {
            self.store.free(n.off, old_len);
            self.store.alloc(len)
        };
        let b = self.store.get_mut(off, len);
        let base = pad4(new_size);
        let (keys, kids) = (&sc[..size], &sc[old_base..old_base + 4 * size]);
        b[..pos].copy_from_slice(&keys[..pos]);
        b[base..base + 4 * pos].copy_from_slice(&kids[..4 * pos]);
        match ins {
            Some((c, child)) => {
                b[pos] = c;
                b[pos + 1..new_size].copy_from_slice(&keys[pos..]);
                wr32(b, base + 4 * pos, child);
                b[base + 4 * pos + 4..].copy_from_slice(&kids[4 * pos..]);
            }
            None => {
                b[pos..new_size].copy_from_slice(&keys[pos + 1..]);
                b[base + 4 * pos..].copy_from_slice(&kids[4 * pos + 4..]);
            }
        }
        let node = &mut self.nodes[h as usize];
        node.meta = meta;
        node.off = off;
        self.put_scratch(sc);
    }

    // ----------------------------------------------------------------- walks

    /// `raxLowWalk`: returns how many key bytes matched, the node where the walk stopped,
    /// if that node is compressed the offset in it where matching stopped, and the link to
    /// that node (parent, child index; `NONE` for the root). Pushes `(parent, child index)`
    /// for every step onto `stack` if given.
    #[inline]
    fn low_walk(&self, s: &[u8], mut stack: Option<&mut Vec<(u32, u32)>>) -> (usize, u32, usize, (u32, usize)) {
        let mut h = HEAD;
        let mut i = 0;
        let mut j = 0;
        let mut link = (NONE, 0);
        loop {
            let n = self.nd(h);
            let size = n.size();
            if size == 0 || i >= s.len() {
                break;
            }
            let b = self.block(n);
            let k = if n.compr() {
                j = common_prefix(&b[..size], &s[i..]);
                i += j;
                if j != size {
                    break;
                }
                0
            } else {
                match find_child(&b[..size], s[i]) {
                    Some(k) => {
                        i += 1;
                        k
                    }
                    None => break,
                }
            };
            if let Some(st) = stack.as_deref_mut() {
                st.push((h, k as u32));
            }
            link = (h, k);
            h = rd32(b, pad4(size) + 4 * k);
            j = 0;
        }
        (i, h, j, link)
    }

    /// The node holding exactly `key`, if it is a key.
    #[inline]
    fn find(&self, key: &[u8]) -> Option<Node> {
        let (i, h, j, _) = self.low_walk(key, None);
        let n = self.nd(h);
        if i != key.len() || (n.compr() && j != 0) || !n.is_key() {
            None
        } else {
            Some(n)
        }
    }

    /// Value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        let n = self.find(key)?;
        self.value_of(n)
    }

    /// Mutable value stored under `key`.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let n = self.find(key)?;
        self.values.get_mut(n.val as usize).and_then(S::value_mut)
    }

    /// Mutable value stored under `key`, with its index in the value slab (stable while the
    /// key exists; a freed index may be reused by a later insert): see [`Rax::value_at`].
    pub fn get_mut_indexed(&mut self, key: &[u8]) -> Option<(u32, &mut V)> {
        let n = self.find(key)?;
        let v = self.values.get_mut(n.val as usize).and_then(S::value_mut)?;
        Some((n.val, v))
    }

    /// The value in slot `index` of the value slab, if that slot holds one.
    pub fn value_at(&self, index: u32) -> Option<&V> {
        self.values.get(index as usize).and_then(S::value)
    }

    /// The value in slot `index` of the value slab, mutably, if that slot holds one.
    pub fn value_at_mut(&mut self, index: u32) -> Option<&mut V> {
        self.values.get_mut(index as usize).and_then(S::value_mut)
    }

    // ----------------------------------------------------------------- insertion

    /// Inserts or overwrites; returns the previous value.
    pub fn insert(&mut self, key: &[u8], value: V) -> Option<V> {
        self.keys_changed();
        let r = self.generic_insert(key, value, true).unwrap_or_default();
        self.maybe_compact();
        r
    }

    /// Inserts only if `key` is absent; otherwise gives `value` back.
    pub fn try_insert(&mut self, key: &[u8], value: V) -> Result<(), V> {
        self.keys_changed();
        let r = self.generic_insert(key, value, false).map(|_| ());
        self.maybe_compact();
        r
    }

    /// `raxGenericInsert`. `Err(value)` if the key exists and `overwrite` is false.
    fn generic_insert(&mut self, s: &[u8], value: V, overwrite: bool) -> Result<Option<V>, V> {
        let len = s.len();
        let (mut i, mut h, j, link) = self.low_walk(s, None);
        let n = self.nd(h);

        if i == len && (!n.compr() || j == 0) {
            if n.is_key() {
                if !overwrite {
                    return Err(value);
                }
                return match self.values.get_mut(n.val as usize) {
                    Some(slot) => Ok(std::mem::replace(slot, S::fill(value)).take_value()),
                    None => Ok(None),
                };
            }
            self.set_new_value(h, value);
            return Ok(None);
        }

        if n.compr() {
            let size = n.size();
            let next = self.child(n, 0);
            let mut sc = self.take_scratch();
            sc.clear();
            sc.extend_from_slice(self.data(n));
            if i != len {
                // ALGO 1: mismatch at offset j of the compressed node.
                let postfixlen = size - j - 1;
                let postfix = if postfixlen > 0 {
                    let p = self.alloc_node();
                    Self::write_node(&mut self.nodes, &mut self.store, p, postfixlen > 1, &sc[j + 1..], &[next]);
                    p
                } else {
                    next
                };
                if j == 0 {
                    // The split node replaces the compressed node (and keeps its key).
                    Self::write_node(&mut self.nodes, &mut self.store, h, false, &sc[..1], &[postfix]);
                } else {
                    let split = self.alloc_node();
                    Self::write_node(&mut self.nodes, &mut self.store, split, false, &sc[j..j + 1], &[postfix]);
                    Self::write_node(&mut self.nodes, &mut self.store, h, j > 1, &sc[..j], &[split]);
                    h = split;
                }
                self.put_scratch(sc);
            } else {
                // ALGO 2: the key ends inside the compressed node.
                let postfix = self.alloc_node();
                Self::write_node(&mut self.nodes, &mut self.store, postfix, size - j > 1, &sc[j..], &[next]);
                Self::write_node(&mut self.nodes, &mut self.store, h, j > 1, &sc[..j], &[postfix]);
                self.put_scratch(sc);
                self.set_new_value(postfix, value);
                return Ok(None);
            }
        }

        if h & LEAF != 0 {
            // The walk ended on a leaf that now gets children: give it an arena slot.
            let real = self.alloc_node();
            self.numnodes -= 1; // same logical node
            self.nodes[real as usize].val = h & !LEAF;
            self.set_child(link.0, link.1, real);
            h = real;
        }
        // Append the remaining bytes; the node the key ends at is a new leaf.
        loop {
            let n = self.nd(h);
            if n.size() == 0 && len - i > 1 {
                let comprsize = (len - i).min(MAX_NODE_SIZE);
                if i + comprsize == len {
                    let leaf = self.new_leaf(value);
                    Self::write_node(&mut self.nodes, &mut self.store, h, true, &s[i..], &[leaf]);
                    return Ok(None);
                }
                let child = self.alloc_node();
                Self::write_node(&mut self.nodes, &mut self.store, h, true, &s[i..i + comprsize], &[child]);
                i += comprsize;
                h = child;
            } else {
                if i + 1 == len {
                    let leaf = self.new_leaf(value);
                    self.add_child(h, s[i], leaf);
                    return Ok(None);
                }
                let child = self.alloc_node();
                self.add_child(h, s[i], child);
                i += 1;
                h = child;
            }
        }
    }

    fn take_scratch(&mut self) -> Vec<u8> {
        self.work.as_mut().map_or_else(Vec::new, |w| std::mem::take(&mut w.scratch))
    }

    fn put_scratch(&mut self, sc: Vec<u8>) {
        give_back(&mut self.work, sc, |w| &mut w.scratch);
    }

    // ----------------------------------------------------------------- removal

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        self.keys_changed();
        let mut stack = self.work.as_mut().map_or_else(Vec::new, |w| std::mem::take(&mut w.stack));
        stack.clear();
        let (i, h, j, _) = self.low_walk(key, Some(&mut stack));
        let n = self.nd(h);
        let old = if i != key.len() || (n.compr() && j != 0) || !n.is_key() {
            None
        } else {
            let old = self.take_value(h);
            self.remove_cleanup(h, &mut stack);
            old
        };
        give_back(&mut self.work, stack, |w| &mut w.stack);
        if self.numele == 0 && self.numnodes == 1 {
            self.reset_storage();
        }
        // No compaction here: a trim removes many keys in a row, and compacting after each
        // eighth of the pool freed would walk the node table tens of times; the next insert
        // compacts once (and a tree that only shrinks keeps its free blocks for reuse).
        old
    }

    /// The structural part of `raxRemove` after node `h` stopped being a key; `stack` holds
    /// the `(parent, child index)` path to `h`.
    fn remove_cleanup(&mut self, mut h: u32, stack: &mut Vec<(u32, u32)>) {
        let n = self.nd(h);
        let mut trycompress = false;
        if n.size() == 0 {
            let mut child = NONE;
            let mut cidx = 0usize;
            while h != HEAD {
                child = h;
                self.free_node(child);
                let Some((p, k)) = stack.pop() else { return };
                h = p;
                cidx = k as usize;
                let pn = self.nd(h);
                if pn.is_key() || (!pn.compr() && pn.size() != 1) {
                    break;
                }
            }
            if child != NONE {
                self.remove_child(h, cidx);
                let pn = self.nd(h);
                if pn.size() == 1 && !pn.is_key() {
                    trycompress = true;
                } else if pn.size() == 0 && pn.is_key() && h != HEAD {
                    // A childless key node: turn it back into a leaf reference.
                    if let Some(&(p, k)) = stack.last() {
                        self.set_child(p, k as usize, LEAF | pn.val);
                        self.nodes[h as usize].val = NONE;
                        self.free_node(h);
                        self.numnodes += 1; // same logical node
                    }
                }
            }
        } else if n.size() == 1 {
            trycompress = true;
        }
        if !trycompress {
            return;
        }

        // Go up to the highest node of the chain of non-key single-child nodes.
        while let Some(&(p, _)) = stack.last() {
            let pn = self.nd(p);
            if pn.is_key() || (!pn.compr() && pn.size() != 1) {
                break;
            }
            stack.pop();
            h = p;
        }
        let start = h;

        // Measure the chain of nodes that can be merged.
        let mut comprsize = self.nd(start).size();
        let mut nodes = 1usize;
        let mut cur = start;
        loop {
            let cn = self.nd(cur);
            if cn.size() == 0 {
                break;
            }
            cur = self.last_child(cn);
            let c = self.nd(cur);
            if c.is_key() || (!c.compr() && c.size() != 1) {
                break;
            }
            if comprsize + c.size() > MAX_NODE_SIZE {
                break;
            }
            nodes += 1;
            comprsize += c.size();
        }
        if nodes < 2 {
            return;
        }

        // Merge them into `start`'s slot.
        let mut sc = self.take_scratch();
        sc.clear();
        let mut cur = start;
        for k in 0..nodes {
            let cn = self.nd(cur);
            sc.extend_from_slice(self.data(cn));
            let next = self.last_child(cn);
            if k > 0 {
                self.free_node(cur);
            }
            cur = next;
        }
        Self::write_node(&mut self.nodes, &mut self.store, start, true, &sc, &[cur]);
        self.put_scratch(sc);
    }

    /// Called when the tree became empty: drops all slack (keeping small buffers for reuse).
    fn reset_storage(&mut self) {
        if self.nodes.capacity() > 64 {
            self.nodes = Vec::with_capacity(1);
        } else {
            self.nodes.clear();
        }
        self.nodes.push(Node::EMPTY);
        self.free_node = NONE;
        if self.store.pool.capacity() > 1024 || self.store.big.is_some() {
            self.store = Store::default();
        } else {
            self.store.pool.clear();
            self.store.heads.clear();
            self.store.free_small = 0;
        }
        self.values.clear(64);
        if self.free_vals.capacity() > 64 {
            self.free_vals = Vec::new();
        } else {
            self.free_vals.clear();
        }
    }

    // ----------------------------------------------------------------- seeking

    /// Appends the edge towards child `k` of `n` to `out`.
    #[inline]
    fn push_edge(&self, n: Node, k: usize, out: &mut Vec<u8>) {
        let d = self.data(n);
        if n.compr() {
            out.extend_from_slice(d);
        } else {
            out.push(d[k]);
        }
    }

    /// Smallest key in the subtree of `h` (`h` included), its bytes below `h` appended to `out`.
    fn descend_first(&self, mut h: u32, out: &mut Vec<u8>) -> Option<u32> {
        loop {
            let n = self.nd(h);
            if n.is_key() {
                return Some(h);
            }
            if n.size() == 0 {
                return None;
            }
            self.push_edge(n, 0, out);
            h = self.child(n, 0);
        }
    }

    /// Largest key in the subtree of `h`.
    fn descend_last(&self, mut h: u32, out: &mut Vec<u8>) -> Option<u32> {
        loop {
            let n = self.nd(h);
            if n.size() == 0 {
                return if n.is_key() { Some(h) } else { None };
            }
            let k = n.kids() - 1;
            self.push_edge(n, k, out);
            h = self.child(n, k);
        }
    }

    /// Finds the key `op` designates relative to `key`; writes it to `out` (cleared first)
    /// and returns its node. One root-to-leaf pass, no allocation besides `out`.
    fn locate(&self, op: SeekOp, key: &[u8], out: &mut Vec<u8>) -> Option<u32> {
        out.clear();
        if self.numele == 0 {
            return None;
        }
        let (eq, gt, lt) = match op {
            SeekOp::First => return self.descend_first(HEAD, out),
            SeekOp::Last => return self.descend_last(HEAD, out),
            SeekOp::Eq => (true, false, false),
            SeekOp::Ge => (true, true, false),
            SeekOp::Gt => (false, true, false),
            SeekOp::Le => (true, false, true),
            SeekOp::Lt => (false, false, true),
        };
        // Closest subtree greater than `key` passed on the way: child k of p below key[..pl].
        let mut succ: Option<(u32, usize, usize)> = None;
        let mut pred = Pred::None;
        let mut h = HEAD;
        let mut i = 0;
        let outcome = loop {
            let n = self.nd(h);
            let size = n.size();
            if i == key.len() {
                if eq && n.is_key() {
                    out.extend_from_slice(key);
                    return Some(h);
                }
                if gt {
                    break if size > 0 { Outcome::FirstIn(h, 0, i) } else { Outcome::Succ };
                }
                if lt {
                    break Outcome::Pred;
                }
                return None;
            }
            if n.is_key() {
                pred = Pred::Node(h, i);
            }
            if size == 0 {
                if gt {
                    break Outcome::Succ;
                }
                if lt {
                    break Outcome::Pred;
                }
                return None;
            }
            let d = self.data(n);
            let rest = &key[i..];
            if n.compr() {
                let j = common_prefix(d, rest);
                if j == size {
                    i += size;
                    h = self.child(n, 0);
                    continue;
                }
                let greater = j == rest.len() || d[j] > rest[j];
                if gt {
                    break if greater { Outcome::FirstIn(h, 0, i) } else { Outcome::Succ };
                }
                if lt {
                    break if greater { Outcome::Pred } else { Outcome::LastIn(h, 0, i) };
                }
                return None;
            }
            let c = rest[0];
            let k = d.partition_point(|&b| b < c);
            if k < size && d[k] == c {
                if gt && k + 1 < size {
                    succ = Some((h, k + 1, i));
                }
                if lt && k > 0 {
                    pred = Pred::Sub(h, k - 1, i);
                }
                i += 1;
                h = self.child(n, k);
                continue;
            }
            if gt {
                break if k < size { Outcome::FirstIn(h, k, i) } else { Outcome::Succ };
            }
            if lt {
                break if k > 0 { Outcome::LastIn(h, k - 1, i) } else { Outcome::Pred };
            }
            return None;
        };
        let (first, p, k, pl) = match outcome {
            Outcome::FirstIn(p, k, pl) => (true, p, k, pl),
            Outcome::LastIn(p, k, pl) => (false, p, k, pl),
            Outcome::Succ => {
                let (p, k, pl) = succ?;
                (true, p, k, pl)
            }
            Outcome::Pred => match pred {
                Pred::None => return None,
                Pred::Node(h, pl) => {
                    out.extend_from_slice(&key[..pl]);
                    return Some(h);
                }
                Pred::Sub(p, k, pl) => (false, p, k, pl),
            },
        };
        out.extend_from_slice(&key[..pl]);
        let pn = self.nd(p);
        self.push_edge(pn, k, out);
        let c = self.child(pn, k);
        if first {
            self.descend_first(c, out)
        } else {
            self.descend_last(c, out)
        }
    }

    /// The smallest key and its value.
    pub fn first(&self) -> Option<(Vec<u8>, &V)> {
        let mut k = Vec::new();
        let h = self.locate(SeekOp::First, b"", &mut k)?;
        Some((k, self.value_of(self.nd(h))?))
    }

    /// The largest key and its value.
    pub fn last(&self) -> Option<(Vec<u8>, &V)> {
        let mut k = Vec::new();
        let h = self.locate(SeekOp::Last, b"", &mut k)?;
        Some((k, self.value_of(self.nd(h))?))
    }

    /// `f` applied to the smallest (`first`) or largest key and its value, with the key
    /// rebuilt in a reused buffer (no allocation, unlike [`first`](Self::first)).
    pub fn edge_with<R>(&self, first: bool, f: impl FnOnce(&[u8], &V) -> R) -> Option<R> {
        let mut k = buffers::take_key();
        let op = if first { SeekOp::First } else { SeekOp::Last };
        let r = self.locate(op, b"", &mut k).and_then(|h| self.value_of(self.nd(h))).map(|v| f(&k, v));
        buffers::give_key(k);
        r
    }

    /// Finds the element `op` designates relative to `key` (Ge: the smallest key >= key; Le:
    /// the largest <= key; First/Last ignore key; Eq exact), writes its key into `key_out`
    /// (cleared first; left empty if nothing qualifies) and returns its value.
    pub fn seek_mut(&mut self, op: SeekOp, key: &[u8], key_out: &mut Vec<u8>) -> Option<&mut V> {
        if op == SeekOp::Last {
            if let Some(l) = self.last.as_deref().filter(|l| l.slot != NONE) {
                key_out.clear();
                key_out.extend_from_slice(&l.key);
                let slot = l.slot;
                return self.values.get_mut(slot as usize).and_then(S::value_mut);
            }
        }
        let h = self.locate(op, key, key_out);
        let Some(h) = h else {
            key_out.clear();
            return None;
        };
        let slot = self.nd(h).val;
        if op == SeekOp::Last {
            let l = self.last.get_or_insert_with(|| Box::new(LastKey { slot: NONE, key: Vec::new() }));
            l.key.clear();
            l.key.extend_from_slice(key_out);
            l.slot = slot;
        }
        self.values.get_mut(slot as usize).and_then(S::value_mut)
    }

    /// An iterator positioned by a seek; see [`Iter`].
    pub fn seek(&self, op: SeekOp, key: &[u8]) -> Iter<'_, V, S> {
        let mut it = Iter { rax: self, key: buffers::take_key(), stack: buffers::take_stack(), stack_ok: false, node: NONE, state: IterState::Eof };
        it.reseek(op, key);
        it
    }

    /// Iterator over all keys, starting at the smallest (`seek(First, b"")`).
    pub fn iter(&self) -> Iter<'_, V, S> {
        self.seek(SeekOp::First, b"")
    }
}

#[derive(Clone, Copy, Debug)]
enum IterState {
    /// Just seeked: the next call of `next()` or `prev()` returns the sought element.
    Seeked {
        found: bool,
        op: SeekOp,
    },
    Walking,
    Eof,
}

/// A lending cursor over a [`Rax`], created by [`Rax::seek`] or [`Rax::iter`].
///
/// Semantics (those of `raxSeek` + `raxNext`/`raxPrev`, with one documented extension):
///
/// * Right after a seek that found an element, the first call of either `next()` or `prev()`
///   returns that element. After that, `next()` moves to the following (greater) key and
///   `prev()` to the preceding (smaller) one, so direction may change freely: `next()` then
///   `prev()` returns to the previous key.
/// * When a step finds no key in its direction it returns `None` and the iterator is
///   exhausted: every later call of `next()` or `prev()` returns `None` too (as `raxEOF`),
///   until [`Iter::reseek`].
/// * A seek that found nothing (`Eq` absent; `Ge`/`Gt` above every key; `Le`/`Lt` below every
///   key; any op on an empty tree) also exhausts the iterator, **except** (an extension: in
///   `rax.c` the EOF is sticky here too): after a `Ge`/`Gt` seek that found nothing, `prev()`
///   returns the largest key (all keys are then below the sought one) and iteration continues
///   backward from there; symmetrically after an `Le`/`Lt` seek that found nothing, `next()`
///   returns the smallest key. The other direction returns `None` and exhausts the iterator.
///
/// Keys are rebuilt in the iterator's own buffer (the returned slice borrows the iterator);
/// steps do not allocate once the buffers have grown to the key length.
pub struct Iter<'a, V, S = Option<V>> {
    rax: &'a Rax<V, S>,
    key: Vec<u8>,
    /// `(ancestor, child index taken)` from the root down to `node`.
    stack: Vec<(u32, u32)>,
    /// Whether `stack` describes the path to `node` (rebuilt lazily after a seek).
    stack_ok: bool,
    node: u32,
    state: IterState,
}

/// A second cursor at the same place (its own buffers, taken from the pool as a seek's are):
/// a walk ahead of a read that must not move the read's own cursor.
impl<V, S: Slot<V>> Clone for Iter<'_, V, S> {
    fn clone(&self) -> Self {
        let mut key = buffers::take_key();
        key.extend_from_slice(&self.key);
        let mut stack = buffers::take_stack();
        stack.extend_from_slice(&self.stack);
        Iter { rax: self.rax, key, stack, stack_ok: self.stack_ok, node: self.node, state: self.state }
    }
}

impl<V, S> Drop for Iter<'_, V, S> {
    fn drop(&mut self) {
        buffers::give_key(std::mem::take(&mut self.key));
        buffers::give_stack(std::mem::take(&mut self.stack));
    }
}

/// Buffers of iterators, kept between uses: a command that iterates (XRANGE, XREADGROUP,
/// XPENDING...) would otherwise pay two allocations per iterator for its key and path. One
/// of each is kept per thread (commands run on Redis's main thread), never a large one.
mod buffers {
    use std::cell::Cell;

    /// Buffers that grew past this are dropped rather than kept.
    const KEEP_MAX: usize = 256;

    thread_local! {
        static KEY: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
        static STACK: Cell<Vec<(u32, u32)>> = const { Cell::new(Vec::new()) };
    }

    pub fn take_key() -> Vec<u8> {
        KEY.try_with(Cell::take).unwrap_or_default()
    }

    pub fn give_key(mut k: Vec<u8>) {
        if k.capacity() <= KEEP_MAX {
            k.clear();
            let _ = KEY.try_with(|c| c.set(k));
        }
    }

    pub fn take_stack() -> Vec<(u32, u32)> {
        STACK.try_with(Cell::take).unwrap_or_default()
    }

    pub fn give_stack(mut s: Vec<(u32, u32)>) {
        if s.capacity() <= KEEP_MAX {
            s.clear();
            let _ = STACK.try_with(|c| c.set(s));
        }
    }
}

impl<'a, V, S: Slot<V>> Iter<'a, V, S> {
    /// Positions the iterator anew (as [`Rax::seek`]), reusing its buffers.
    pub fn reseek(&mut self, op: SeekOp, key: &[u8]) {
        self.stack.clear();
        self.stack_ok = false;
        match self.rax.locate(op, key, &mut self.key) {
            Some(h) => {
                self.node = h;
                self.state = IterState::Seeked { found: true, op };
            }
            None => {
                self.node = NONE;
                self.state = IterState::Seeked { found: false, op };
            }
        }
    }

    /// The element at `node`, or exhaustion if there is none.
    fn current(&mut self) -> Option<(&[u8], &'a V)> {
        let rax = self.rax;
        let n = if self.node == NONE { None } else { Some(rax.nd(self.node)) };
        match n.and_then(|n| rax.value_of(n)) {
            Some(v) => {
                self.state = IterState::Walking;
                Some((&self.key[..], v))
            }
            None => {
                self.state = IterState::Eof;
                None
            }
        }
    }

    /// Repositions at the smallest (or largest) key after an unsuccessful seek.
    fn restart(&mut self, op: SeekOp) -> Option<(&[u8], &'a V)> {
        match self.rax.locate(op, b"", &mut self.key) {
            Some(h) => {
                self.node = h;
                self.stack.clear();
                self.stack_ok = false;
                self.current()
            }
            None => {
                self.state = IterState::Eof;
                None
            }
        }
    }

    /// Rebuilds the root-to-`node` path from the current key.
    fn rebuild_stack(&mut self) -> bool {
        let rax = self.rax;
        self.stack.clear();
        let mut h = HEAD;
        let mut i = 0;
        while i < self.key.len() {
            let n = rax.nd(h);
            if n.size() == 0 {
                return false;
            }
            let k = if n.compr() {
                i += n.size();
                0
            } else {
                match find_child(rax.data(n), self.key[i]) {
                    Some(k) => {
                        i += 1;
                        k
                    }
                    None => return false,
                }
            };
            self.stack.push((h, k as u32));
            h = rax.child(n, k);
        }
        self.stack_ok = h == self.node && i == self.key.len();
        self.stack_ok
    }

    /// Moves down into child `k` of `p`.
    #[inline]
    fn enter(&mut self, p: u32, k: usize) -> u32 {
        let rax = self.rax;
        let n = rax.nd(p);
        rax.push_edge(n, k, &mut self.key);
        self.stack.push((p, k as u32));
        rax.child(n, k)
    }

    /// Moves up to the parent; returns it and the child index we came from.
    #[inline]
    fn leave(&mut self) -> Option<(u32, usize)> {
        let (p, k) = self.stack.pop()?;
        let el = self.rax.nd(p).edge_len();
        self.key.truncate(self.key.len().saturating_sub(el));
        Some((p, k as usize))
    }

    fn step_next(&mut self) -> bool {
        let rax = self.rax;
        let mut h = self.node;
        if rax.nd(h).kids() > 0 {
            h = self.enter(h, 0);
        } else {
            loop {
                let Some((p, k)) = self.leave() else { return false };
                let pn = rax.nd(p);
                if !pn.compr() && k + 1 < pn.size() {
                    h = self.enter(p, k + 1);
                    break;
                }
            }
        }
        // Smallest key of the subtree at h.
        loop {
            let n = rax.nd(h);
            if n.is_key() {
                self.node = h;
                return true;
            }
            if n.kids() == 0 {
                return false;
            }
            h = self.enter(h, 0);
        }
    }

    fn step_prev(&mut self) -> bool {
        let rax = self.rax;
        loop {
            let Some((p, k)) = self.leave() else { return false };
            let pn = rax.nd(p);
            if !pn.compr() && k > 0 {
                let mut h = self.enter(p, k - 1);
                // Largest key of the subtree at h.
                loop {
                    let n = rax.nd(h);
                    if n.kids() == 0 {
                        self.node = h;
                        return n.is_key();
                    }
                    h = self.enter(h, n.kids() - 1);
                }
            }
            if pn.is_key() {
                self.node = p;
                return true;
            }
        }
    }

    fn step(&mut self, forward: bool) -> Option<(&[u8], &'a V)> {
        if !self.stack_ok && !self.rebuild_stack() {
            self.state = IterState::Eof;
            return None;
        }
        let moved = if forward { self.step_next() } else { self.step_prev() };
        if moved {
            self.current()
        } else {
            self.state = IterState::Eof;
            None
        }
    }

    /// The next element (see the type's documentation).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<(&[u8], &'a V)> {
        match self.state {
            IterState::Eof => None,
            IterState::Seeked { found: true, .. } => self.current(),
            IterState::Seeked { found: false, op: SeekOp::Le | SeekOp::Lt } => self.restart(SeekOp::First),
            IterState::Seeked { found: false, .. } => {
                self.state = IterState::Eof;
                None
            }
            IterState::Walking => self.step(true),
        }
    }

    /// The previous element (see the type's documentation).
    pub fn prev(&mut self) -> Option<(&[u8], &'a V)> {
        match self.state {
            IterState::Eof => None,
            IterState::Seeked { found: true, .. } => self.current(),
            IterState::Seeked { found: false, op: SeekOp::Ge | SeekOp::Gt } => self.restart(SeekOp::Last),
            IterState::Seeked { found: false, .. } => {
                self.state = IterState::Eof;
                None
            }
            IterState::Walking => self.step(false),
        }
    }
}
