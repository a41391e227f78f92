//! The stream log: a rax of listpack nodes, keyed by each node's master ID.
//!
//! ```text
//!   rax (16-byte big-endian master IDs)
//!    ├── 1700000000000-0  ──> [master | e | e | e ... ]   (≤ node-max-entries, < node-max-bytes)
//!    ├── 1700000000042-7  ──> [master | e | e ... ]
//!    └── 1700000000099-0  ──> [master | e ]                <- tail: appends go here
//! ```
//!
//! Semantics follow t_stream.c function by function (streamAppendItem, streamTrim,
//! streamIteratorGetID, streamDeleteItem...), so that node boundaries, approximate
//! trims and every reply match the built-in's for the same operations.
//!
//! Architecture invariant: this module knows nothing of Redis; it is pure Rust.

#![forbid(unsafe_code)]

pub mod census;
pub mod claim;
pub mod compact;
pub mod delay;
pub mod group;
pub mod id;
pub mod idmp;
pub mod node;
pub mod policy;
pub mod queue;
pub mod retention;
pub mod timelist;
pub mod validate;
pub mod wake;

pub use group::{ClaimCount, Consumer, DeliveryTime, Group, Groups, Nack, NackCount, Named, ENTRIES_READ_INVALID, NO_OWNER};
pub use id::{SeqGiven, StreamId};
pub use idmp::Idmp;
pub use policy::{DelOutcome, RefPolicy};
pub use retention::MaxAge;

use crate::listpack::{Codec, Listpack, Value};
use crate::rax::{Rax, SeekOp};
use node::{EntryPos, Master, FLAG_DELETED, FLAG_SAMEFIELDS};

/// Largest listpack a node may grow to, and largest total size of one entry's
/// fields and values (STREAM_LISTPACK_MAX_SIZE).
pub const NODE_BYTES_MAX: u64 = 1 << 30;
/// What a new node's first entry takes beyond its fields and values (4 bytes of each
/// element's header and backlen are counted apart): the listpack header and terminator
/// (7), the master entry's count, deleted count, field count and terminator, the entry's
/// flags, ID deltas and lp-count, with a margin (the estimate is only the first
/// allocation: appends grow the listpack geometrically).
///
/// The built-in preallocates 4 KB for every new node (STREAM_LISTPACK_MAX_PRE_ALLOCATE,
/// or stream-node-max-bytes when smaller) and shrinks it when the node is full: a stream
/// of one entry holds 4 KB. Here a node takes room as it grows (about six reallocations,
/// each doubling, to fill a 4 KB node from its first entry), so a small stream costs what
/// it holds.
const NODE_FIRST_ROOM: usize = 48;
/// Default node caps (stream-node-max-entries / stream-node-max-bytes).
pub const NODE_ENTRIES_DEFAULT: i64 = 100;
pub const NODE_BYTES_DEFAULT: i64 = 4096;

/// Node caps in force; 0 means "no cap" (bytes are then capped by NODE_BYTES_MAX).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    pub entries_max: i64,
    pub bytes_max: i64,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits { entries_max: NODE_ENTRIES_DEFAULT, bytes_max: NODE_BYTES_DEFAULT }
    }
}

/// How XADD chooses the new entry's ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdSpec {
    /// `*`: wall clock, never going backwards.
    Auto,
    /// `ms-seq`.
    Explicit(StreamId),
    /// `ms-*`: the given ms with a generated sequence.
    AutoSeq(u64),
}

/// Why an append failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// The ID is not greater than the last ID (or the sequence overflowed).
    IdNotGreater,
    /// The fields and values together exceed NODE_BYTES_MAX.
    TooLarge,
    /// The entry belongs in a cold node (`xstream.tier-dir`) that could not be read back.
    Unreadable,
}

/// Trim strategy of XADD / XTRIM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimStrategy {
    MaxLen(u64),
    MinId(StreamId),
}

/// A trim request, as parsed from the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    pub strategy: TrimStrategy,
    /// `~`: only whole nodes are removed.
    pub approx: bool,
    /// Maximum entries to remove; 0 = unlimited.
    pub limit: i64,
}

/// How a trim under DELREF / ACKED behaves (KEEPREF is the same everywhere).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefTrimRules {
    /// Redis 8.2 (checked on 8.2.3): `~` deletes nothing (the approximate check
    /// stops the walk before any entry; fixed upstream by #14623), and a node the
    /// walk empties is freed only when it was eligible as a whole.
    Redis82,
    /// The later releases (REDIS8.md 3.5): `~` walks every eligible node; a node
    /// left without live entries is freed.
    #[default]
    Latest,
}

/// What a trim did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trimmed {
    /// Entries removed.
    pub deleted: u64,
    /// DELREF / ACKED: every entry below this ID was examined (None: every entry),
    /// none above; see [`Stream::trim_with`]. None under KEEPREF.
    pub examined_below: Option<StreamId>,
}

/// Where a trim's walk stopped.
#[derive(Clone, Copy)]
enum Frontier {
    /// Past the last node.
    End,
    /// Before this node or entry.
    At(StreamId),
    /// Before the node the next seek finds.
    NextNode,
}

/// A stream's nodes, keyed by master ID. A listpack is its own value slot (its vacant state
/// is an empty box): 16 bytes per node where an `Option` would take 24.
pub type Nodes = Rax<Listpack, Listpack>;
/// A walk of a stream's nodes in key order.
pub type NodeWalk<'a> = crate::rax::Iter<'a, Listpack, Listpack>;

impl crate::rax::Slot<Listpack> for Listpack {
    #[inline(always)]
    fn vacant() -> Self {
        Listpack::vacant()
    }
    #[inline(always)]
    fn fill(v: Listpack) -> Self {
        v
    }
    #[inline(always)]
    fn value(&self) -> Option<&Listpack> {
        (!self.is_vacant()).then_some(self)
    }
    #[inline(always)]
    fn value_mut(&mut self) -> Option<&mut Listpack> {
        (!self.is_vacant()).then_some(self)
    }
    #[inline(always)]
    fn take_value(&mut self) -> Option<Listpack> {
        (!self.is_vacant()).then(|| std::mem::replace(self, Listpack::vacant()))
    }
}

/// A stream: the entries plus the metadata XINFO reports.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    /// Nodes keyed by master ID.
    pub(crate) rax: Nodes,
    /// Live entries.
    pub length: u64,
    /// The last ID ever generated or set (XSETID); not lowered by deletes.
    pub last_id: StreamId,
    /// ID of the first live entry (0-0 when empty).
    pub first_id: StreamId,
    /// The greatest ID ever deleted by XDEL.
    pub max_deleted_entry_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// Consumer groups by name (allocated with the first group), with the record of which
    /// changed since the totals were last updated (census.rs): private, so that every
    /// mutable access goes through a recording accessor.
    groups: census::GroupSet,
    /// Idempotent production (8.6). None = the default window (100 s, 100 iids), no
    /// producers, zero counters: a stream that never used IDMP pays one pointer. A
    /// stream created while the configs are not the defaults gets its Idmp at once
    /// ([`Stream::new_with_idmp`]), as the configs seed new streams only (§5.6).
    pub idmp: Option<Box<Idmp>>,
    /// Retention by age (ours, src/stream/retention.rs); None for a stream without one.
    pub max_age: Option<Box<MaxAge>>,
    /// Delayed delivery (ours, src/stream/delay.rs): ID -> due time of the entries
    /// added with NOTBEFORE / DELAY; None for a stream that never had one.
    pub delayed: Option<Box<delay::DelayMap>>,
    /// What this stream counts for in the module's running totals (src/ffi/stats.rs), as last
    /// accounted; not part of the stream's content (digest, RDB and equality ignore it).
    pub accounted: census::Census,
    /// How the nodes are held (compression and tiering queues, adoption): not content.
    /// Boxed on first use: most streams never need it.
    layout: Option<Box<Layout>>,
}

/// The part of a stream's state that only compression, tiering and adoption use: layout,
/// not content (digest, RDB and equality ignore it; a COPY keeps it, a clone).
#[derive(Clone, Debug, Default)]
struct Layout {
    /// Sealed nodes waiting for the background step to compress them (`xstream.compression`
    /// on: [`Stream::pack_queued`]), oldest first; a node gone meanwhile is skipped.
    pack_queue: Vec<StreamId>,
    /// Converted from a built-in stream by a read, which propagated nothing
    /// (src/ffi/adopt.rs): the next write to it propagates `XS.IMPORT key` first, so a
    /// replica whose copy is still built-in converts it before that write.
    import_unsent: bool,
    /// Every node on disk (`xstream.tier-dir`) has a key at most this; None: no node of this
    /// stream went to disk. An upper bound, not lowered when a node comes back to RAM (nodes
    /// go oldest first: it is about the newest one that went). A forward read that starts in
    /// a node above it meets no node on disk and needs no read-first walk.
    cold_max: Option<StreamId>,
}

/// How a group's lag follows appends ([`Meta::lag_form`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LagForm {
    /// The lag is entries added minus this, whatever is appended.
    Behind(i64),
    /// The lag is unknown, whatever is appended.
    Unknown,
    /// An append may change how the lag is found.
    Volatile,
}

/// Which release's rules compute lag and entries-read: they changed in Redis 8.0
/// (REDIS8.md 1.4: #13338, #13473, #13958, and the tombstone test of the read
/// counter), and Valkey 8.1 took part of the change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LagRules {
    /// Redis 7.0 to 7.4, Valkey 7.2 / 8.0.
    #[default]
    Redis7,
    /// Valkey 8.1 and 9.1 (read in their t_stream.c, checked on 8.1.8 and 9.1.2): the
    /// read counter and the estimate of Redis 8.0, the lag of Redis 7.
    Valkey81,
    /// Redis 8.0 (8.0.2, the GA release) and later: an empty stream has no lag; a
    /// group behind the first entry with no tombstone ahead lags by the length; a
    /// tombstone after an ID makes its estimate unknown; the read counter looks for
    /// tombstones after the group's last ID, not after the entry read, and is
    /// incremented only while the group's last ID is not behind the first entry
    /// (otherwise it is estimated again).
    Redis8,
}

impl LagRules {
    /// 7.x: a tombstone before the first entry is no tombstone (8.0 and Valkey 8.1
    /// dropped this), and the read counter looks for tombstones after the entry read.
    fn redis7(self) -> bool {
        self == LagRules::Redis7
    }
}

/// The metadata the group read counters are computed from (copied so that the
/// entries can be read while a group is updated), with the rules in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub length: u64,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted_entry_id: StreamId,
    pub entries_added: u64,
    pub rules: LagRules,
}

impl Meta {
    /// streamRangeHasTombstones: may an XDEL'd entry lie in [start, end]?
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_entry_id.is_zero() {
            return false;
        }
        // 7.x: the latest tombstone is before the first entry (8.0 dropped this).
        if self.rules.redis7() && self.first_id > self.max_deleted_entry_id {
            return false;
        }
        start <= self.max_deleted_entry_id && self.max_deleted_entry_id <= end
    }

    /// streamEstimateDistanceFromFirstEverEntry: the logical read counter of `id`,
    /// or ENTRIES_READ_INVALID when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.length == 0 && id <= self.last_id {
            return self.entries_added as i64;
        }
        // 8.0: fragmentation between `id` and the last generated ID.
        if !self.rules.redis7() && !id.is_zero() && id < self.max_deleted_entry_id {
            return ENTRIES_READ_INVALID;
        }
        if id == self.last_id {
            return self.entries_added as i64;
        } else if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        if self.max_deleted_entry_id.is_zero() || self.max_deleted_entry_id < self.first_id {
            if id < self.first_id {
                return self.entries_added.wrapping_sub(self.length) as i64;
            } else if id == self.first_id {
                return self.entries_added.wrapping_sub(self.length).wrapping_add(1) as i64;
            }
        }
        ENTRIES_READ_INVALID
    }

    /// streamReplyWithCGLag: the group's lag, or None (reply nil) when unknown.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.rules == LagRules::Redis8 {
            if self.length == 0 {
                return Some(0);
            }
            if g.last_id < self.first_id && self.max_deleted_entry_id < self.first_id {
                return Some(self.length as i64);
            }
        }
        if g.entries_read != ENTRIES_READ_INVALID && !self.range_has_tombstones(g.last_id, StreamId::MAX) {
            return Some((self.entries_added as i64).wrapping_sub(g.entries_read));
        }
        let read = self.estimate_distance(g.last_id);
        if read != ENTRIES_READ_INVALID {
            Some((self.entries_added as i64).wrapping_sub(read))
        } else {
            None
        }
    }

    /// How [`Meta::lag`] of `g` follows appends ([`Meta::appended_since`]: the length stays
    /// non-zero, the first entry, the tombstones and the rules as they are). Each branch below
    /// is a branch of `lag` and of `estimate_distance`, in their order (src/stream/census.rs
    /// relies on it; its tests check it against `lag`).
    pub fn lag_form(&self, g: &Group) -> LagForm {
        if self.entries_added == 0 || self.length == 0 {
            return LagForm::Volatile;
        }
        if self.rules == LagRules::Redis8 && g.last_id < self.first_id && self.max_deleted_entry_id < self.first_id {
            // The length: entries added minus those before the first entry.
            return LagForm::Behind(self.entries_added.wrapping_sub(self.length) as i64);
        }
        if g.entries_read != ENTRIES_READ_INVALID && !self.range_has_tombstones(g.last_id, StreamId::MAX) {
            return LagForm::Behind(g.entries_read);
        }
        // The estimate of the group's last ID.
        let id = g.last_id;
        if !self.rules.redis7() && !id.is_zero() && id < self.max_deleted_entry_id {
            return LagForm::Unknown;
        }
        if id >= self.last_id {
            // At or past the last ID: an append changes which branch answers.
            return LagForm::Volatile;
        }
        if self.max_deleted_entry_id.is_zero() || self.max_deleted_entry_id < self.first_id {
            let before_first = self.entries_added.wrapping_sub(self.length);
            if id < self.first_id {
                return LagForm::Behind(before_first as i64);
            } else if id == self.first_id {
                return LagForm::Behind(before_first.wrapping_add(1) as i64);
            }
        }
        LagForm::Unknown
    }

    /// The number of entries appended since `before` if the only change from it to `self` is
    /// appends to a non-empty stream (XADD without trimming; XSETID raising the last ID only);
    /// None for any other change.
    pub fn appended_since(&self, before: &Meta) -> Option<u64> {
        if self.rules != before.rules
            || self.first_id != before.first_id
            || self.max_deleted_entry_id != before.max_deleted_entry_id
            || before.length == 0
            || self.last_id < before.last_id
        {
            return None;
        }
        let k = self.entries_added.checked_sub(before.entries_added)?;
        (self.length == before.length.wrapping_add(k)).then_some(k)
    }

    /// The read counter of a group that is delivered `id` (> its last ID).
    pub(crate) fn entries_read_after(&self, g: &Group, id: StreamId) -> i64 {
        let from = if self.rules.redis7() { id } else { g.last_id };
        let behind_first = !self.rules.redis7() && g.last_id < self.first_id;
        if g.entries_read != ENTRIES_READ_INVALID && !behind_first && !self.range_has_tombstones(from, StreamId::MAX) {
            g.entries_read.wrapping_add(1)
        } else if self.entries_added != 0 {
            self.estimate_distance(id)
        } else {
            g.entries_read
        }
    }
}

impl Stream {
    pub fn new() -> Self {
        Stream::default()
    }

    /// A new stream with the IDMP window the configs give now (duration s, max
    /// entries); the defaults allocate nothing.
    pub fn new_with_idmp(window: (u32, u32)) -> Self {
        let mut s = Stream::default();
        if window != idmp::DEFAULT_WINDOW {
            s.idmp = Some(Box::new(Idmp::new(window.0, window.1)));
        }
        s
    }

    /// The IDMP window (duration s, max entries).
    pub fn idmp_window(&self) -> (u32, u32) {
        self.idmp.as_ref().map_or(idmp::DEFAULT_WINDOW, |m| (m.duration_s, m.max_entries))
    }

    /// The IDMP state, allocated with the default window on first use.
    pub fn idmp_mut(&mut self) -> &mut Idmp {
        self.idmp.get_or_insert_with(|| Box::new(Idmp::new(idmp::DEFAULT_WINDOW.0, idmp::DEFAULT_WINDOW.1)))
    }

    fn layout_mut(&mut self) -> &mut Layout {
        self.layout.get_or_insert_with(Box::default)
    }

    /// Sealed nodes waiting for the background step (compression, tiering), oldest first.
    pub fn pack_queue(&self) -> &[StreamId] {
        self.layout.as_ref().map_or(&[], |l| &l.pack_queue)
    }

    /// Converted from a built-in stream by a read and not yet announced to replicas
    /// (src/ffi/adopt.rs).
    pub fn import_unsent(&self) -> bool {
        self.layout.as_ref().is_some_and(|l| l.import_unsent)
    }

    pub fn set_import_unsent(&mut self, unsent: bool) {
        if unsent || self.layout.is_some() {
            self.layout_mut().import_unsent = unsent;
        }
    }

    /// The greatest key of a node that went to disk (an upper bound; None: none ever went).
    pub fn cold_max(&self) -> Option<StreamId> {
        self.layout.as_ref().and_then(|l| l.cold_max)
    }

    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Number of nodes (XINFO radix-tree-keys).
    pub fn rax_keys(&self) -> usize {
        self.rax.len()
    }

    /// XINFO radix-tree-nodes.
    pub fn rax_nodes(&self) -> usize {
        self.rax.node_count()
    }

    /// The nodes in order, as (master ID, listpack): for persistence and digests.
    pub fn nodes(&self) -> NodeIter<'_> {
        NodeIter { it: self.rax.iter(), stored: false }
    }

    /// Inserts a node as is (loading). The caller validates first.
    pub fn insert_node(&mut self, master: StreamId, lp: Listpack) {
        self.rax.insert(&master.to_be_bytes(), lp);
    }

    /// Bytes used: nodes (allocated listpack bytes) plus the tree.
    pub fn mem_bytes(&self) -> usize {
        // (The tree's own struct is inside the stream's, and counted by both.)
        let mut total = std::mem::size_of::<Stream>() + self.rax.mem_bytes() - std::mem::size_of::<Nodes>();
        if let Some(l) = &self.layout {
            total += std::mem::size_of::<Layout>() + l.pack_queue.capacity() * std::mem::size_of::<StreamId>();
        }
        if self.max_age.is_some() {
            total += std::mem::size_of::<MaxAge>();
        }
        if let Some(g) = self.groups.get() {
            total += g.mem_bytes();
            total += g.values().map(Group::mem_bytes).sum::<usize>();
        }
        let mut it = self.rax.iter();
        while let Some((_, lp)) = it.next() {
            total += lp.alloc_bytes();
        }
        if let Some(m) = &self.idmp {
            total += m.mem_bytes();
        }
        if let Some(m) = &self.delayed {
            total += std::mem::size_of::<delay::DelayMap>() + m.len() * (16 + 8 + 16);
        }
        total
    }

    /// Appends an entry (streamAppendItem). `fields` is `f1 v1 f2 v2 ...` (even length,
    /// at least one pair). `now_ms` is the wall clock, used for `*`.
    pub fn append(&mut self, fields: &[&[u8]], spec: IdSpec, now_ms: u64, limits: NodeLimits) -> Result<StreamId, AddError> {
        let id = match spec {
            IdSpec::Explicit(id) => id,
            IdSpec::AutoSeq(ms) => {
                if self.last_id.ms == ms {
                    if self.last_id.seq == u64::MAX {
                        // The built-in returns C_ERR here without setting errno, so its
                        // reply depends on a stale errno ("equal or smaller" after an
                        // earlier EDOM, "too large" otherwise). We give the meaningful one.
                        return Err(AddError::IdNotGreater);
                    }
                    StreamId { ms, seq: self.last_id.seq + 1 }
                } else {
                    StreamId { ms, seq: 0 }
                }
            }
            IdSpec::Auto => {
                if now_ms > self.last_id.ms {
                    StreamId { ms: now_ms, seq: 0 }
                } else {
                    // streamIncrID wraps MAX to 0-0, which the check below rejects.
                    self.last_id.next().unwrap_or(StreamId::MIN)
                }
            }
        };
        if id <= self.last_id {
            return Err(AddError::IdNotGreater);
        }
        let numfields = fields.len() / 2;
        let totelelen: u64 = fields.iter().map(|f| f.len() as u64).sum();
        if totelelen > NODE_BYTES_MAX {
            return Err(AddError::TooLarge);
        }

        let node_bytes_max = if limits.bytes_max <= 0 || limits.bytes_max as u64 > NODE_BYTES_MAX { NODE_BYTES_MAX } else { limits.bytes_max as u64 };

        // The tail node's key, in a buffer kept between calls (no allocation per XADD).
        let mut key = TAIL_KEY.take();
        let mut use_tail = false;
        // (Only a node that became the tail by deletions or trims can be packed, or cold; one
        // that cannot be read back from disk is left as it is, and a new node starts.)
        if let Some(lp) = self.rax.seek_mut(SeekOp::Last, &[], &mut key).filter(|lp| lp.readable()) {
            lp.unpack();
            let (count_off, count, deleted, master_fields, fields_off) = node::head(lp);
            let full = if lp.bytes_len() as u64 + totelelen >= node_bytes_max {
                true
            } else {
                limits.entries_max > 0 && count.saturating_add(deleted) >= limits.entries_max
            };
            let before = lp.bytes_len();
            // (The count always takes the new value: the first element of every loaded
            // node passed the listpack check, and it is an integer in a valid node.)
            if full || lp.try_replace(count_off, Value::Int(count.wrapping_add(1))).is_err() {
                // Sealed: the node will not grow again. Compressed later, off the append
                // path, by the background step (src/jobs/pack.rs).
                lp.shrink_to_fit();
                if compression() || tiering() {
                    self.layout_mut().pack_queue.push(StreamId::from_be_bytes(&key).unwrap_or(StreamId::MIN));
                }
            } else {
                use_tail = true;
                let master_id = StreamId::from_be_bytes(&key).unwrap_or(StreamId::MIN);
                // The new count may need a longer encoding (127 -> 128): what
                // follows it moved by the difference.
                let shift = lp.bytes_len() as isize - before as isize;
                append_to_node(lp, master_id, id, fields, master_fields, fields_off.map(|o| o.wrapping_add_signed(shift)));
            }
        }
        if !use_tail {
            // A node keyed by this very ID can exist although the ID is above the last ID: a
            // node left holding only tombstones by an exact trim, then XSETID below its key (7.0
            // allows it), then appends into it while it is the tail (entries below its key) until
            // it is full. A new node under its key would replace it and lose its entries (the
            // built-in 7.0 does, and leaks it): the entry goes into that node instead, full or
            // not (its ID equals the node's master ID: deltas 0).
            if let Some(lp) = self.rax.get_mut(&id.to_be_bytes()) {
                if !lp.readable() {
                    TAIL_KEY.set(key);
                    return Err(AddError::Unreadable);
                }
                lp.unpack();
                let (count_off, count, _, master_fields, fields_off) = node::head(lp);
                let before = lp.bytes_len();
                if lp.try_replace(count_off, Value::Int(count.wrapping_add(1))).is_ok() {
                    let shift = lp.bytes_len() as isize - before as isize;
                    append_to_node(lp, id, id, fields, master_fields, fields_off.map(|o| o.wrapping_add_signed(shift)));
                    use_tail = true;
                }
            }
        }
        if !use_tail {
            // Room for this first entry only (an estimate, see NODE_FIRST_ROOM): the node then
            // grows geometrically as entries come, where the built-in preallocates 4 KB.
            let room = (totelelen as usize).saturating_add(4 * numfields).saturating_add(NODE_FIRST_ROOM);
            let mut lp = Listpack::with_capacity(room.min(node_bytes_max as usize));
            lp.append_int(1);
            lp.append_int(0);
            lp.append_int(numfields as i64);
            for i in 0..numfields {
                lp.append_str(fields[i * 2]);
            }
            lp.append_int(0);
            append_entry(&mut lp, FLAG_SAMEFIELDS, id, id, fields);
            self.rax.insert(&id.to_be_bytes(), lp);
        }
        TAIL_KEY.set(key);
        self.length += 1;
        self.entries_added = self.entries_added.wrapping_add(1);
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
        Ok(id)
    }

    /// Iterates live entries with `start <= id <= end`, forwards or backwards.
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool) -> RangeIter<'_> {
        RangeIter::new(&self.rax, start, end, rev, true)
    }

    /// Like [`range`](Self::range) but tombstones are returned too.
    pub fn range_with_tombstones(&self, start: StreamId, end: StreamId, rev: bool) -> RangeIter<'_> {
        RangeIter::new(&self.rax, start, end, rev, false)
    }

    /// The first (or last) entry ID, tombstones included or not; when there is
    /// none: MAX for the first, MIN for the last (streamGetEdgeID).
    pub fn edge_id(&self, first: bool, skip_tombstones: bool) -> StreamId {
        let mut it = RangeIter::new(&self.rax, StreamId::MIN, StreamId::MAX, !first, skip_tombstones);
        match it.next_entry() {
            Some(e) => e.id(),
            None if first => StreamId::MAX,
            None => StreamId::MIN,
        }
    }

    /// Does a live entry with this ID exist?
    pub fn contains(&self, id: StreamId) -> bool {
        self.range(id, id, false).next_entry().is_some()
    }

    /// Deletes one entry (streamDeleteItem): marks it deleted, frees its node once
    /// no live entry is left. Does not touch first_id / max_deleted_entry_id (the
    /// XDEL command does, as in the built-in). Returns whether it existed.
    pub fn delete(&mut self, id: StreamId) -> bool {
        // Found as streamDeleteItem finds it: an iterator from `id` to `id` that
        // passes over tombstones and stops at the first live entry above `id`. (After
        // XSETID below a deleted ID, a node's entries are not in ID order: a
        // tombstone above `id` may precede it.)
        let Some((node, flags_off, flags)) = self.range(id, id, false).next_entry().map(|e| (e.node, e.pos.flags_off, e.pos.flags)) else {
            return false;
        };
        let key = node.to_be_bytes();
        let Some(lp) = self.rax.get_mut(&key) else { return false };
        let was_packed = lp.is_packed();
        let was_cold = lp.is_cold();
        // Fails only on a node that was not deep-checked (flags not an element).
        if lp.try_replace(flags_off, Value::Int(flags | FLAG_DELETED)).is_err() {
            return false;
        }
        let (count, deleted) = node::counts(lp);
        if count == 1 {
            self.rax.remove(&key);
        } else {
            node::set_counts(lp, count.wrapping_sub(1), deleted.wrapping_add(1));
            if was_packed {
                lp.pack(codec().unwrap_or(Codec::Lz4));
                refreeze(lp, node, was_cold);
            }
        }
        self.length = self.length.saturating_sub(1);
        if self.delayed.is_some() {
            self.forget_delay(id);
        }
        self.forget_gone_pending(queue::Gone::One(id));
        true
    }

    /// XDEL semantics over several IDs: deletes each, then maintains
    /// max_deleted_entry_id and first_id as xdelCommand does. Returns the count.
    pub fn delete_ids(&mut self, ids: &[StreamId]) -> u64 {
        let mut deleted = 0;
        let mut first_entry = false;
        for &id in ids {
            if self.delete(id) {
                if id == self.first_id {
                    first_entry = true;
                }
                if id > self.max_deleted_entry_id {
                    self.max_deleted_entry_id = id;
                }
                deleted += 1;
            }
        }
        if deleted > 0 {
            if self.length == 0 {
                self.first_id = StreamId::MIN;
            } else if first_entry {
                self.first_id = self.edge_id(true, true);
            }
        }
        deleted
    }

    /// Trims from the head (streamTrim) with the KEEPREF policy. Returns the number
    /// of entries removed.
    pub fn trim(&mut self, t: &Trim) -> u64 {
        self.trim_with(t, RefPolicy::KeepRef).deleted
    }

    /// Trims from the head (streamTrim of 8.2) under a reference policy. Returns
    /// the number of entries removed.
    ///
    /// KEEPREF is the 7.x walk: whole nodes are dropped while they are eligible,
    /// `~` stops at the first node that is not, an exact trim marks entries of
    /// that node deleted. DELREF and ACKED never drop a node blindly: every
    /// eligible node is walked entry by entry (DELREF removes each entry from the
    /// PELs first, ACKED skips referenced entries and goes on with later ones);
    /// a node left without live entries is freed, and the walk goes on to the
    /// next node after an eligible one, with `~` too. LIMIT is checked per node.
    ///
    /// Under DELREF / ACKED the entries examined are those below
    /// [`Trimmed::examined_below`]: every one of them (DELREF), or every one not
    /// referenced (ACKED), was deleted. So the same result follows on any node
    /// layout from an exact `MINID = examined_below` trim under the same policy
    /// (or `MAXLEN = 0` when None): what replicas are sent.
    pub fn trim_with(&mut self, t: &Trim, policy: RefPolicy) -> Trimmed {
        self.trim_with_rules(t, policy, RefTrimRules::Latest)
    }

    /// [`Stream::trim_with`] under the given release's rules for DELREF / ACKED.
    pub fn trim_with_rules(&mut self, t: &Trim, policy: RefPolicy, rules: RefTrimRules) -> Trimmed {
        let min_last = if policy == RefPolicy::Acked { policy::min_last_id(self.groups.get()) } else { None };
        let mut deleted: i64 = 0;
        // A reused buffer: XADD MAXLEN ~ calls this on every add.
        let mut key = TAIL_KEY.take();
        let mut seek_key: Vec<u8> = Vec::new();
        let mut op = SeekOp::First;
        // Where the walk stopped: at the next node (its master ID, found after the
        // loop), at a node or entry already known, or past the last node.
        let mut frontier = Frontier::End;
        loop {
            if let TrimStrategy::MaxLen(maxlen) = t.strategy {
                if self.length <= maxlen {
                    frontier = Frontier::NextNode;
                    break;
                }
            }
            let length = self.length;
            let Some(lp) = self.rax.seek_mut(op, &seek_key, &mut key) else { break };
            let master_id = StreamId::from_be_bytes(&key).unwrap_or(StreamId::MIN);
            // A node on disk is known by its note (nothing read); one without a note that
            // cannot be read back stops the trim before it (its counts are not known; it is
            // never removed or rewritten unread). The command goes on (XS.ADD's entry is
            // added): what it did is what it replies.
            let by_id = matches!(t.strategy, TrimStrategy::MinId(_));
            let Some((entries, marked_deleted, last)) = node_facts(lp, master_id, by_id) else {
                frontier = Frontier::At(master_id);
                break;
            };
            if t.limit != 0 && deleted.saturating_add(entries) > t.limit {
                frontier = Frontier::At(master_id);
                break;
            }
            let remove_node = match t.strategy {
                TrimStrategy::MaxLen(maxlen) => length.wrapping_sub(entries as u64) >= maxlen,
                // The built-in reads the last entry, tombstone or not.
                TrimStrategy::MinId(minid) => last.unwrap_or(master_id) < minid,
            };
            if remove_node && policy == RefPolicy::KeepRef {
                self.rax.remove(&key);
                // (Saturating: only a node that was not deep-checked has a count
                // other than its live entries.)
                self.length = self.length.saturating_sub(entries as u64);
                deleted = deleted.saturating_add(entries);
                // The built-in re-seeks ">=" the removed key: with KEEPREF every node
                // before it was removed (a node kept ends the walk), so that is the
                // first node, and the walk down the first edges is cheaper than a seek
                // compared byte by byte (a trim of 100 nodes: 310,000 -> 280,000
                // instructions).
                op = SeekOp::First;
                continue;
            }
            if t.approx && (!remove_node || (policy != RefPolicy::KeepRef && rules == RefTrimRules::Redis82)) {
                frontier = Frontier::At(master_id);
                break;
            }
            // Mark entries of this node deleted until the condition holds: it is read now (a
            // node on disk that cannot be read back stops the trim before it, as above).
            if lp.try_view().is_none() {
                frontier = Frontier::At(master_id);
                break;
            }
            let was_packed = lp.is_packed();
            let was_cold = lp.is_cold();
            lp.unpack();
            let m = node::master(lp);
            let mut p = m.first_entry;
            let mut deleted_from_lp: i64 = 0;
            while let Some(off) = p {
                let e = node::entry_at(lp, &m, master_id, off);
                let stop = match t.strategy {
                    TrimStrategy::MaxLen(maxlen) => self.length <= maxlen,
                    TrimStrategy::MinId(minid) => e.id >= minid,
                };
                if stop {
                    frontier = Frontier::At(e.id);
                    break;
                }
                let mut next = e.next_off;
                if e.flags & FLAG_DELETED == 0 {
                    match policy {
                        RefPolicy::KeepRef => {}
                        RefPolicy::DelRef => {
                            policy::unref_everywhere(self.groups.all_mut(), e.id);
                        }
                        RefPolicy::Acked => {
                            if policy::is_referenced(self.groups.get(), min_last, e.id) {
                                p = next;
                                continue;
                            }
                        }
                    }
                    let before = lp.bytes_len();
                    if lp.try_replace(e.flags_off, Value::Int(e.flags | FLAG_DELETED)).is_err() {
                        break; // a node that was not deep-checked
                    }
                    // Flags are tiny integers: their size never changes, but stay exact.
                    let grown = lp.bytes_len() as isize - before as isize;
                    next = next.map(|n| (n as isize + grown) as usize);
                    deleted_from_lp += 1;
                    self.length = self.length.saturating_sub(1);
                }
                p = next;
            }
            deleted = deleted.saturating_add(deleted_from_lp);
            let left = entries.wrapping_sub(deleted_from_lp);
            node::set_counts(lp, left, marked_deleted.wrapping_add(deleted_from_lp));
            if was_packed && left != 0 {
                lp.pack(codec().unwrap_or(Codec::Lz4));
                refreeze(lp, master_id, was_cold);
            }
            if policy == RefPolicy::KeepRef {
                break;
            }
            // 8.2.3 frees a node the walk emptied only if it was eligible as a whole;
            // a node it was not eligible stays in the tree without live entries.
            let free_empty = remove_node || rules == RefTrimRules::Latest;
            if let Frontier::At(_) = frontier {
                // Stopped inside the node: done (the next node holds nothing eligible).
                if left == 0 && free_empty {
                    self.rax.remove(&key);
                }
                break;
            }
            if left == 0 && !free_empty {
                frontier = Frontier::NextNode;
                seek_key.clear();
                seek_key.extend_from_slice(&key);
                op = SeekOp::Gt;
                break;
            }
            if left == 0 {
                // Every entry of the node is gone: free it and go on from its key.
                self.rax.remove(&key);
            } else if !remove_node {
                seek_key.clear();
                seek_key.extend_from_slice(&key);
                op = SeekOp::Gt;
                frontier = Frontier::NextNode;
                break;
            }
            op = SeekOp::Ge;
            seek_key.clear();
            seek_key.extend_from_slice(&key);
            if left != 0 {
                // Go on with the node after this one.
                op = SeekOp::Gt;
            }
        }
        TAIL_KEY.set(key);
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.edge_id(true, true);
        }
        if deleted > 0 && self.delayed.is_some() {
            self.forget_trimmed(policy == RefPolicy::Acked);
        }
        // ACKED deletes no pending entry, DELREF has unreferenced what it deleted.
        if deleted > 0 && policy == RefPolicy::KeepRef {
            self.forget_gone_pending(queue::Gone::Below((self.length > 0).then_some(self.first_id)));
        }
        let examined_below = match frontier {
            _ if policy == RefPolicy::KeepRef => None,
            Frontier::At(id) => Some(id),
            Frontier::End => None,
            Frontier::NextNode => {
                let mut it = self.rax.seek(op, &seek_key);
                it.next().and_then(|(k, _)| StreamId::from_be_bytes(k))
            }
        };
        Trimmed { deleted: deleted.max(0) as u64, examined_below }
    }

    /// The last live entry's ID (streamLastValidID); MIN when empty.
    pub fn last_valid_id(&self) -> StreamId {
        self.edge_id(false, true)
    }

    pub fn meta(&self, rules: LagRules) -> Meta {
        Meta {
            rules,
            length: self.length,
            last_id: self.last_id,
            first_id: self.first_id,
            max_deleted_entry_id: self.max_deleted_entry_id,
            entries_added: self.entries_added,
        }
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.get()?.get(name)
    }

    /// The group called `name`, to change (recorded for the totals: census.rs).
    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.groups.get_mut(name)
    }

    /// Every group, to change them all (each recorded as changed: the next update of the
    /// totals walks every group). For updates that neither add nor remove groups.
    pub fn groups_all_mut(&mut self) -> Option<&mut Groups> {
        self.groups.all_mut()
    }

    /// Removes every group.
    pub fn clear_groups(&mut self) {
        self.groups.clear();
    }

    /// Creates a group; false if the name exists (streamCreateCG).
    pub fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        self.groups.insert(Group::new(name, last_id, entries_read))
    }

    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        self.groups.remove(name).is_some()
    }

    /// Groups in name order.
    pub fn groups_iter(&self) -> Option<impl Iterator<Item = (&[u8], &Group)>> {
        self.groups.get().map(|g| g.iter().map(|(_, g)| (g.name(), g)))
    }

    /// Whether a group has NACKed entries (XS.NACK: pending, unowned), which the built-in
    /// streams before 8.8 cannot hold (XS.EXPORT refuses such a stream).
    pub fn has_nacked(&self) -> bool {
        let Some(it) = self.groups_iter() else { return false };
        for (_, g) in it {
            if g.nacked_count() > 0 {
                return true;
            }
        }
        false
    }

    /// A `>` read of group `gname` by consumer `slot` (streamReplyWithRange with a
    /// group): entries after `start`, at most `count` (0 = all). For each entry,
    /// advances the group's last ID and read counter, records the delivery in the
    /// PELs unless `noack`, and calls `emit(entry, nack, group_last_id)`, which
    /// answers whether to go on (MAXSIZE / MAXCOUNT: the next entry is then neither
    /// delivered nor recorded). Returns (entries, whether the group's last ID changed).
    #[expect(clippy::too_many_arguments, reason = "one call site; these are XREADGROUP's parameters")]
    pub fn read_group_new(
        &mut self,
        gname: &[u8],
        slot: u32,
        start: StreamId,
        count: u64,
        noack: bool,
        now: i64,
        rules: LagRules,
        mut skipped: Option<&mut Vec<StreamId>>,
        mut emit: impl FnMut(Entry<'_>, Option<Nack>, StreamId) -> bool,
    ) -> (u64, bool) {
        let meta = self.meta(rules);
        // Delayed delivery (delay.rs): entries not due are passed over into the schedule.
        let delayed = self.delayed.as_deref().filter(|m| skipped.is_some() && m.range(start..).next().is_some());
        let Some(g) = self.groups.get_mut(gname) else { return (0, false) };
        let mut n = 0u64;
        let mut last_changed = false;
        for e in RangeIter::new(&self.rax, start, StreamId::MAX, false, true) {
            let id = e.id();
            if id > g.last_id {
                g.entries_read = meta.entries_read_after(g, id);
                g.last_id = id;
                last_changed = true;
            }
            if let Some(due) = delayed.and_then(|m| m.get(&id).copied()).filter(|&d| d > now && g.nack(id).is_none()) {
                g.schedule_entry(id, due);
                if let Some(v) = skipped.as_deref_mut() {
                    v.push(id);
                    // Bounded work per read: the next read goes on from here.
                    if v.len() >= delay::PASS_OVER_MAX {
                        break;
                    }
                }
                continue;
            }
            let nack = if noack { None } else { Some(g.deliver_new(id, slot, now)) };
            let more = emit(e, nack, g.last_id);
            n += 1;
            if !more || (count != 0 && n == count) {
                break;
            }
        }
        (n, last_changed)
    }

    /// A history read (XREADGROUP with an ID): the consumer's pending entries from
    /// `start`, at most `count` (0 = all). Each one still in the stream counts as a
    /// new delivery; `emit(id, entry)` gets None for entries deleted meanwhile, and
    /// answers whether to go on (the entries after are then not touched).
    #[expect(clippy::too_many_arguments, reason = "the read's own parameters, each a scalar; a struct would only rename them")]
    pub fn read_group_history(
        &mut self,
        gname: &[u8],
        slot: u32,
        start: StreamId,
        count: u64,
        now: i64,
        saturate: bool,
        mut emit: impl FnMut(StreamId, Option<Entry<'_>>) -> bool,
    ) -> u64 {
        let Some(g) = self.groups.get_mut(gname) else { return 0 };
        let Some(c) = g.consumer(slot) else { return 0 };
        // IDs first (bounded by the consumer's PEL), then entries and NACK updates.
        let mut ids = Vec::new();
        let mut it = group::pel_from(c.pel(), start);
        while let Some((k, _)) = it.next() {
            if count != 0 && ids.len() as u64 == count {
                break;
            }
            ids.push(StreamId::from_be_bytes(k).unwrap_or(StreamId::MIN));
        }
        drop(it);
        let mut n = 0u64;
        for &id in &ids {
            let entry = RangeIter::new(&self.rax, id, id, false, true).next_entry();
            if entry.is_some() {
                g.redeliver(id, now, saturate);
            }
            n += 1;
            if !emit(id, entry) {
                break;
            }
        }
        n
    }
}

/// Appends one entry's elements (flags, deltas, [numfields, fields], values, lp-count).
/// Appends an entry to an existing node whose count was already raised: SAMEFIELDS when the
/// fields are the node's master fields (`fields_off`: offset of the first master field).
fn append_to_node(lp: &mut Listpack, master_id: StreamId, id: StreamId, fields: &[&[u8]], master_fields: usize, fields_off: Option<usize>) {
    let numfields = fields.len() / 2;
    let mut flags = 0i64;
    if numfields == master_fields {
        let mut p = fields_off;
        let mut same = true;
        for i in 0..numfields {
            let Some(o) = p else {
                same = false;
                break;
            };
            if !lp.get(o).eq_bytes(fields[i * 2]) {
                same = false;
                break;
            }
            p = lp.next(o);
        }
        if same {
            flags |= FLAG_SAMEFIELDS;
        }
    }
    append_entry(lp, flags, id, master_id, fields);
}

fn append_entry(lp: &mut Listpack, flags: i64, id: StreamId, master: StreamId, fields: &[&[u8]]) {
    let numfields = fields.len() / 2;
    let same = flags & FLAG_SAMEFIELDS != 0;
    let head = [Value::Int(flags), Value::Int(id.ms.wrapping_sub(master.ms) as i64), Value::Int(id.seq.wrapping_sub(master.seq) as i64)];
    let pairs = &fields[..numfields * 2];
    // The lp-count closing the entry: its elements other than itself.
    let result = if same {
        let lp_count = Value::Int(numfields as i64 + 3);
        let values = pairs.iter().skip(1).step_by(2).map(|v| Value::Str(v));
        lp.try_append_all(head.into_iter().chain(values).chain([lp_count]))
    } else {
        let lp_count = Value::Int(2 * numfields as i64 + 4);
        let all = pairs.iter().map(|v| Value::Str(v));
        lp.try_append_all(head.into_iter().chain([Value::Int(numfields as i64)]).chain(all).chain([lp_count]))
    };
    if let Err(e) = result {
        // Stream::append checked the size against NODE_BYTES_MAX first.
        panic!("listpack append: {e}");
    }
}

thread_local! {
    /// The buffer [`Stream::append`] and [`Stream::trim`] find a node's key in.
    static TAIL_KEY: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

// ---- compression of sealed nodes (`xstream.compression`) ---------------------------------

/// Most packed nodes remembered per thread between two releases (a command reading more
/// falls back to a walk of its stream's nodes when it ends).
const TOUCHED_MAX: usize = 256;

thread_local! {
    /// Whether nodes are compressed when sealed (set from the module config).
    static COMPRESSION: std::cell::Cell<Option<Codec>> = const { std::cell::Cell::new(None) };
    /// Packed nodes a reader decompressed: (tree address, node key), released by
    /// [`Stream::release_caches`] when the command is done with the stream.
    static TOUCHED: std::cell::RefCell<Vec<(usize, [u8; 16])>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Compress sealed nodes from now on (this thread: the server's main thread).
pub fn set_compression(on: bool) {
    set_codec(if on { Some(Codec::Lz4) } else { None });
}

/// The codec sealed nodes are compressed with from now on (None: off).
pub fn set_codec(c: Option<Codec>) {
    COMPRESSION.with(|x| x.set(c));
}

pub fn codec() -> Option<Codec> {
    COMPRESSION.with(|c| c.get())
}

pub fn compression() -> bool {
    codec().is_some()
}

/// A cold node that a write rewrote (XDEL, a trim inside it) goes back to disk as it came
/// (a failed write keeps it in RAM: counted by the store's handle).
fn refreeze(lp: &mut Listpack, master: StreamId, was_cold: bool) {
    if was_cold && lp.is_packed() {
        let note = node_note(lp, master);
        if let (Ok(true), Some(n)) = (lp.tier_out(codec().unwrap_or(Codec::Lz4)), note) {
            lp.set_note(n);
        }
    }
}

/// What a trim needs of a node, kept in RAM while the node is on disk (`Listpack::note`): its
/// entry count, deleted count and last entry's ID (tombstone or not). From the plain bytes;
/// a packed node in RAM is decoded without filling its cache (it is going to disk).
fn node_note(lp: &Listpack, master: StreamId) -> Option<crate::listpack::Note> {
    let copy;
    let plain = match lp.unpacked_copy() {
        None => lp,
        Some(Ok(p)) => {
            copy = p;
            &copy
        }
        Some(Err(_)) => return None,
    };
    let (count, deleted) = node::counts(plain);
    let (count, deleted) = (u32::try_from(count).ok()?, u32::try_from(deleted).ok()?);
    let last = node::last_entry_id(plain, master)?;
    Some([u64::from(count) << 32 | u64::from(deleted), last.ms, last.seq])
}

/// The (entries, deleted entries, last entry ID) noted with a node on disk.
fn noted_facts(lp: &Listpack) -> Option<(i64, i64, StreamId)> {
    let [counts, ms, seq] = lp.note()?;
    Some(((counts >> 32) as i64, (counts & 0xffff_ffff) as i64, StreamId { ms, seq }))
}

/// A node's (entries, deleted entries, last entry ID): from its note while it is on disk (no
/// read), else from its bytes (None when it is on disk and cannot be read back). The last ID
/// only when `want_last`, or when it comes free with the note.
fn node_facts(lp: &Listpack, master: StreamId, want_last: bool) -> Option<(i64, i64, Option<StreamId>)> {
    if let Some((entries, deleted, last)) = noted_facts(lp) {
        return Some((entries, deleted, Some(last)));
    }
    let view = lp.try_view()?;
    let (entries, deleted) = node::counts(view);
    Some((entries, deleted, if want_last { node::last_entry_id(view, master) } else { None }))
}

/// Are sealed nodes tiered to disk (`xstream.tier-dir` set: the segment store is open)?
pub fn tiering() -> bool {
    crate::tier::cold::is_open()
}

/// Remembers that a packed node of the tree at `owner` is being read.
pub(crate) fn touch(owner: usize, key: &[u8]) {
    let Ok(k) = <[u8; 16]>::try_from(key) else { return };
    TOUCHED.with(|t| {
        let mut t = t.borrow_mut();
        if t.len() < TOUCHED_MAX && !t.contains(&(owner, k)) {
            t.push((owner, k));
        }
    });
}

impl Stream {
    /// Empties the decompressed slots of this stream's packed nodes that readers filled (what
    /// the module calls when a command is done with the key) into the decoded-node cache
    /// (`xstream.compression-cache`, src/listpack/decoded.rs): the nodes read, or every node
    /// when some were decompressed by a path that does not say which.
    pub fn release_caches(&mut self) {
        if crate::listpack::cache_fills() == 0 {
            return;
        }
        let me = &self.rax as *const Nodes as usize;
        let mine: Vec<[u8; 16]> = TOUCHED.with(|t| {
            let mut t = t.borrow_mut();
            let mine = t.iter().filter(|(o, _)| *o == me).map(|(_, k)| *k).collect();
            t.retain(|(o, _)| *o != me);
            mine
        });
        // The node opened last is where the reader stopped: its next read starts there.
        for (i, k) in mine.iter().enumerate() {
            if let Some(lp) = self.rax.get_mut(k) {
                lp.release_cache(i + 1 == mine.len());
            }
        }
        let others = TOUCHED.with(|t| !t.borrow().is_empty());
        if crate::listpack::cache_fills() > 0 && !others {
            for lp in self.rax.values_mut() {
                lp.release_cache(false);
            }
        }
    }

    /// Compresses every node but the last (after loading, or when turning compression on
    /// by hand). Returns the nodes packed.
    pub fn pack_sealed(&mut self) -> u64 {
        let Some(codec) = codec() else { return 0 };
        let keys: Vec<StreamId> = self.stored_nodes().map(|(k, _)| k).collect();
        let mut n = 0;
        for k in keys.iter().take(keys.len().saturating_sub(1)) {
            if let Some(lp) = self.rax.get_mut(&k.to_be_bytes()) {
                if !lp.is_packed() && lp.pack(codec) {
                    n += 1;
                }
            }
        }
        n
    }

    /// The background step: compresses up to `max` queued sealed nodes, oldest first, while
    /// `more()` says the time budget allows. Nodes gone (deleted, trimmed, merged) or that
    /// became the tail are skipped; with compression off the queue is dropped. Returns the
    /// nodes taken off the queue.
    pub fn pack_queued(&mut self, max: usize, more: impl FnMut() -> bool) -> usize {
        self.pack_queued_then(max, more, |_, _| {})
    }

    /// [`Stream::pack_queued`], and with tiering on, each sealed node taken (packed or not)
    /// handed to `sealed` with the bytes it holds in RAM: the tiering step's queue
    /// (src/jobs/pack.rs). With compression and tiering off the queue is dropped.
    pub fn pack_queued_then(&mut self, max: usize, mut more: impl FnMut() -> bool, mut sealed: impl FnMut(StreamId, usize)) -> usize {
        let tier = tiering();
        let codec = codec();
        let Some(layout) = self.layout.as_deref_mut().filter(|l| !l.pack_queue.is_empty()) else { return 0 };
        if codec.is_none() && !tier {
            return std::mem::take(&mut layout.pack_queue).len();
        }
        let mut queue = std::mem::take(&mut layout.pack_queue);
        let last = self.rax.seek(SeekOp::Last, &[]).next().map(|(k, _)| k.to_vec());
        let mut taken = 0;
        while taken < max && taken < queue.len() && more() {
            let id = queue[taken];
            let k = id.to_be_bytes();
            taken += 1;
            if last.as_deref() == Some(&k[..]) {
                continue;
            }
            if let Some(lp) = self.rax.get_mut(&k) {
                if let Some(codec) = codec {
                    lp.pack(codec);
                }
                if tier && !lp.is_cold() {
                    sealed(id, lp.stored_bytes());
                }
            }
        }
        queue.drain(..taken);
        if !queue.is_empty() {
            self.layout_mut().pack_queue = queue;
        }
        taken
    }

    /// Nodes as stored (packed ones not decompressed): what RDB encoding 6 saves.
    pub fn stored_nodes(&self) -> NodeIter<'_> {
        NodeIter { it: self.rax.iter(), stored: true }
    }

    /// Nodes on disk (`xstream.tier-dir`) and the bytes of their records: XS.INFO STREAM's
    /// `tiered-nodes` / `tiered-bytes`. A walk of the tree (no node is read), as MEMORY USAGE.
    pub fn tiered(&self) -> (u64, u64) {
        self.rax.values().map(Listpack::disk_bytes).filter(|&b| b > 0).fold((0, 0), |(n, t), b| (n + 1, t + b))
    }

    /// Nodes stored compressed.
    pub fn packed_nodes(&self) -> u64 {
        self.rax.values().filter(|lp| lp.is_packed()).count() as u64
    }

    /// Runs the read-only `f` on the stream; false when it met a node kept on disk that cannot
    /// be read back (`xstream.tier-dir`: a read of such a node ends with a panic, see
    /// `listpack::COLD_READ_PANIC`, caught here; any other panic goes on). A write command runs
    /// its reads here first, so that a failed read ends it before it changed anything; the
    /// nodes read stay decoded in their slots for the command itself.
    pub fn probe(&self, f: impl FnOnce(&Stream)) -> bool {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self))) {
            Ok(()) => true,
            Err(p) if p.downcast_ref::<&str>() == Some(&crate::listpack::COLD_READ_PANIC) => false,
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    /// Reads the nodes a trim `t` reads (every node it cuts, and the one it stops at; under
    /// DELREF / ACKED, `whole` false, every node it removes too: it walks their entries),
    /// without changing anything: what [`Stream::probe`] runs before a trim. A node on disk
    /// removed whole is known by its note and not read. (One node more than the condition
    /// asks: XS.ADD trims after its append, one entry longer.)
    pub fn read_trimmed_nodes(&self, t: &Trim, whole: bool) {
        let mut left = self.length;
        let mut removed: i64 = 0;
        let mut it = self.rax.iter();
        while let Some((k, lp)) = it.next() {
            let master = StreamId::from_be_bytes(k).unwrap_or(StreamId::MIN);
            let (entries, last) = match noted_facts(lp).filter(|_| whole) {
                Some((entries, _, last)) => (entries, Some(last)),
                None => {
                    let view = self.view_touched(k, lp);
                    (node::counts(view).0, node::last_entry_id(view, master))
                }
            };
            // LIMIT: the trim stops before this node, unread.
            removed = removed.saturating_add(entries);
            if t.limit != 0 && removed > t.limit {
                return;
            }
            // Where the trim stops or cuts: read (and the walk ends there).
            let (stop, cut) = match t.strategy {
                TrimStrategy::MaxLen(maxlen) => {
                    let stop = left <= maxlen;
                    left = left.saturating_sub(entries.max(0) as u64);
                    (stop, left < maxlen)
                }
                TrimStrategy::MinId(minid) => (last.unwrap_or(master) >= minid, false),
            };
            if stop || cut {
                self.view_touched(k, lp);
                return;
            }
        }
    }

    /// Reads the nodes a forward read of `count` live entries from `start` (0: all) may read: the
    /// node holding `start` and those after it until their live entries (the first node's only
    /// when all of them are at or after `start`) reach `count`. A node is read by its header alone when it is plain (in RAM):
    /// only nodes on disk (and compressed ones, which the read decodes anyway) are decoded.
    pub fn read_nodes_forward(&self, start: StreamId, count: u64) {
        self.read_nodes_between(start, StreamId::MAX, count, false)
    }

    /// The nodes a read of `count` live entries (0: all) between `start` and `end` reads, in
    /// either direction, as [`Stream::read_nodes_forward`] (and, backwards, from the node
    /// holding `end` down to the first whose key is at most `start`): a range iterator's
    /// [`RangeIter::read_ahead`].
    pub fn read_nodes_between(&self, start: StreamId, end: StreamId, count: u64, rev: bool) {
        self.read_ahead(&self.range(start, end, rev), count);
    }

    /// [`RangeIter::read_ahead`] of `it` (an iterator of this stream), skipped when the read
    /// cannot meet a node on disk: none of this stream ever went, or the read goes forwards
    /// from a node above every one that did ([`Stream::cold_max`]).
    pub fn read_ahead(&self, it: &RangeIter<'_>, count: u64) {
        match (self.cold_max(), it.node()) {
            (None, _) => {}
            (Some(cold), Some(at)) if !it.rev && at > cold => {}
            _ => it.read_ahead(count),
        }
    }

    /// `lp` (the node at key `k` of this stream) to read, a packed one remembered as read so
    /// that the end of the command releases its slot (`release_caches`) without a walk over
    /// every node.
    fn view_touched<'a>(&self, k: &[u8], lp: &'a Listpack) -> &'a Listpack {
        if lp.is_packed() {
            touch(&self.rax as *const Nodes as usize, k);
        }
        lp.view()
    }

    /// Reads the nodes that looking up each of `ids` reads ([`Stream::contains`]).
    pub fn read_nodes_of(&self, ids: impl IntoIterator<Item = StreamId>) {
        for id in ids {
            self.contains(id);
        }
    }

    /// The bytes node `master` holds in RAM (0 if there is none).
    pub fn node_stored_bytes(&self, master: StreamId) -> usize {
        self.rax.get(&master.to_be_bytes()).map_or(0, |lp| lp.stored_bytes())
    }

    /// The sealed nodes (all but the last) held in RAM, oldest first, with the bytes each
    /// holds: what the tiering step queues for a stream that arrived (a load, RENAME, COPY,
    /// RESTORE). Not those still in `pack_queue`: the compression step hands them over when
    /// it takes them.
    pub fn resident_sealed(&self) -> Vec<(StreamId, usize)> {
        let n = self.rax.len();
        let queued: std::collections::HashSet<StreamId> = self.pack_queue().iter().copied().collect();
        self.stored_nodes()
            .take(n.saturating_sub(1))
            .filter(|(k, lp)| !lp.is_cold() && !queued.contains(k))
            .map(|(k, lp)| (k, lp.stored_bytes()))
            .collect()
    }

    /// Moves sealed node `master` to disk (packed with the stream codec, LZ4 without one);
    /// Ok(None) when there is nothing to do (the node is gone, is the tail, or is cold
    /// already), Ok(Some(bytes)) with the RAM it gave back, an error (the node stays in RAM)
    /// when the write failed.
    pub fn tier_node(&mut self, master: StreamId) -> Result<Option<usize>, crate::tier::segment::TierError> {
        let k = master.to_be_bytes();
        let is_last = self.rax.seek(SeekOp::Last, &[]).next().is_some_and(|(last, _)| last == &k[..]);
        if is_last {
            return Ok(None);
        }
        let Some(lp) = self.rax.get_mut(&k) else { return Ok(None) };
        if lp.is_cold() {
            return Ok(None);
        }
        let before = lp.stored_bytes();
        let note = node_note(lp, master);
        if lp.tier_out(codec().unwrap_or(Codec::Lz4))? {
            if let Some(n) = note {
                lp.set_note(n);
            }
            let freed = before.saturating_sub(lp.stored_bytes());
            let l = self.layout_mut();
            l.cold_max = l.cold_max.max(Some(master));
            Ok(Some(freed))
        } else {
            Ok(None)
        }
    }

    /// Compaction of the segment store (src/jobs/tier.rs): the cold nodes from `from` on whose
    /// records are in one of the `sparse` segments are written anew ([`Listpack::rewrite_cold`]),
    /// at most `max` of them, while `more()` allows, looking at [`COMPACT_SCAN_MAX`] nodes
    /// at most. Returns where to go on (None: the stream's end was reached) and the error
    /// that stopped it, if one did (the node it met keeps its record; the walk goes on from
    /// that node).
    pub fn compact_cold(
        &mut self,
        from: StreamId,
        sparse: &[u32],
        max: usize,
        mut more: impl FnMut() -> bool,
    ) -> (Option<StreamId>, Option<crate::tier::segment::TierError>) {
        let mut todo = Vec::new();
        let mut next = None;
        let mut it = self.rax.seek(SeekOp::Ge, &from.to_be_bytes());
        let mut scanned = 0;
        while let Some((k, lp)) = it.next() {
            let Some(id) = StreamId::from_be_bytes(k) else { continue };
            if todo.len() >= max || scanned >= COMPACT_SCAN_MAX {
                next = Some(id);
                break;
            }
            scanned += 1;
            if lp.cold_segment().is_some_and(|seg| sparse.contains(&seg)) {
                todo.push(id);
            }
        }
        drop(it);
        for id in todo {
            if !more() {
                return (Some(id), None);
            }
            if let Some(lp) = self.rax.get_mut(&id.to_be_bytes()) {
                if let Err(e) = lp.rewrite_cold() {
                    return (Some(id), Some(e));
                }
            }
        }
        (next, None)
    }
}

/// Nodes [`Stream::compact_cold`] looks at per call at most.
pub const COMPACT_SCAN_MAX: usize = 4096;

/// Iterator over nodes: (master ID, listpack).
pub struct NodeIter<'a> {
    it: NodeWalk<'a>,
    /// Packed nodes as stored (not decompressed).
    stored: bool,
}

impl<'a> Iterator for NodeIter<'a> {
    type Item = (StreamId, &'a Listpack);
    fn next(&mut self) -> Option<Self::Item> {
        let (k, lp) = self.it.next()?;
        Some((StreamId::from_be_bytes(k).unwrap_or(StreamId::MIN), if self.stored { lp } else { lp.view() }))
    }
}

/// An entry found by a [`RangeIter`].
#[derive(Clone, Copy)]
pub struct Entry<'a> {
    lp: &'a Listpack,
    master: Master,
    pos: EntryPos,
    /// The master ID of the node holding the entry (its key in the tree).
    node: StreamId,
}

impl<'a> Entry<'a> {
    pub fn id(&self) -> StreamId {
        self.pos.id
    }
    pub fn is_deleted(&self) -> bool {
        self.pos.flags & FLAG_DELETED != 0
    }
    /// Number of field-value pairs.
    pub fn numfields(&self) -> usize {
        self.pos.numfields
    }
    /// Calls `f(field, value)` for each pair, in order.
    pub fn for_each_field(&self, f: impl FnMut(Value<'a>, Value<'a>)) {
        node::for_each_field(self.lp, &self.master, &self.pos, f)
    }
    /// The pairs as owned byte strings (tests and slow paths).
    pub fn fields(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::with_capacity(self.pos.numfields);
        self.for_each_field(|f, v| {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            f.write_to(&mut a);
            v.write_to(&mut b);
            out.push((a, b));
        });
        out
    }
}

/// Range iteration over entries (streamIteratorStart / streamIteratorGetID).
pub struct RangeIter<'a> {
    /// The tree's address: which stream the nodes it decompresses belong to.
    owner: usize,
    nodes: NodeWalk<'a>,
    /// The current node, its master ID and master entry.
    cur: Option<(&'a Listpack, StreamId, Master)>,
    /// Forward: offset of the next entry's flags. Backward: offset of the next
    /// (previous in ID order) entry's lp-count element.
    pos: Option<usize>,
    /// Whether `nodes` has yielded its sought element yet.
    start: StreamId,
    end: StreamId,
    rev: bool,
    skip_tombstones: bool,
    done: bool,
}

/// A node of the tree with its key copied out (a node's key is its master ID, 16 bytes; any
/// other length reads as the zero ID, as `StreamId::from_be_bytes` would): on the stack, so
/// that opening a read allocates nothing.
#[inline(always)]
fn node_entry<'a>((k, lp): (&[u8], &'a Listpack)) -> ([u8; 16], &'a Listpack) {
    (<[u8; 16]>::try_from(k).unwrap_or([0; 16]), lp)
}

impl<'a> RangeIter<'a> {
    fn new(rax: &'a Nodes, start: StreamId, end: StreamId, rev: bool, skip_tombstones: bool) -> Self {
        // Position on the node that may hold the first element, as the built-in:
        // seek "<=" the bound, or the first/last node when none is below it.
        let (bound, edge) = if rev { (end, SeekOp::Last) } else { (start, SeekOp::First) };
        let mut nodes;
        let mut first = None;
        if !bound.is_zero() {
            nodes = rax.seek(SeekOp::Le, &bound.to_be_bytes());
            first = if rev { nodes.prev() } else { nodes.next() }.map(node_entry);
            if first.is_none() {
                nodes = rax.seek(edge, &[]);
            }
        } else {
            nodes = rax.seek(edge, &[]);
        }
        if first.is_none() {
            first = if rev { nodes.prev() } else { nodes.next() }.map(node_entry);
        }
        let owner = rax as *const Nodes as usize;
        let mut it = RangeIter { owner, nodes, cur: None, pos: None, start, end, rev, skip_tombstones, done: false };
        match first {
            Some((k, lp)) => it.enter(&k, lp),
            None => it.done = true,
        }
        it
    }

    fn enter(&mut self, key: &[u8], lp: &'a Listpack) {
        if lp.is_packed() {
            touch(self.owner, key);
        }
        let lp = lp.view();
        let master_id = StreamId::from_be_bytes(key).unwrap_or(StreamId::MIN);
        let m = node::master(lp);
        self.pos = if self.rev { lp.last() } else { m.first_entry };
        self.cur = Some((lp, master_id, m));
    }

    fn advance_node(&mut self) -> bool {
        let next = if self.rev { self.nodes.prev() } else { self.nodes.next() };
        match next.map(node_entry) {
            Some((k, lp)) => {
                self.enter(&k, lp);
                true
            }
            None => {
                self.done = true;
                self.cur = None;
                false
            }
        }
    }

    /// The key of the node the iterator stands in (None: the read is over).
    pub fn node(&self) -> Option<StreamId> {
        self.cur.map(|(_, master, _)| master)
    }

    /// Reads, without moving this iterator, the nodes that the rest of a read of `count` live
    /// entries (0: all) may read: what [`Stream::probe`] runs before a read replies (nodes on
    /// disk, `xstream.tier-dir`). The current node (read when the iterator entered it), then
    /// those after it in the read's direction:
    /// - until their live entries reach `count`. The current node counts only when all of its
    ///   entries are on the read's side of where it starts (a read from `-` or `+`, or from a
    ///   node's edge): a tail read of COUNT entries that the tail node holds reads no other
    ///   node and moves no cursor over the tree. Backwards, a node counts only when none of its
    ///   entries is above `end`.
    /// - or until the read's far bound: forwards the first node whose key is above `end`,
    ///   backwards the node after the first whose key is at most `start`; and, as the read
    ///   only stops at a live entry, on over nodes without one.
    pub fn read_ahead(&self, count: u64) {
        let Some((mut lp, mut master, _)) = self.cur else { return };
        if self.done {
            return;
        }
        let mut left = if count == 0 { u64::MAX } else { count };
        // Backwards from a node above `end` (no node is at or below it: the read starts from the
        // last one): any node's entries may be above `end`, and the read stops only at a live
        // entry at or below it.
        let fallback = self.rev && master > self.end;
        // The far bound is passed: the read goes on only over nodes without a live entry.
        let mut past = false;
        let mut first = true;
        let mut nodes = None;
        loop {
            let live = node::counts(lp).0.max(0) as u64;
            if past {
                if live > 0 {
                    return;
                }
            } else if !self.rev && !first && master > self.end {
                // Forwards, the first node past `end`: the read stops at its first live entry.
                if live > 0 {
                    return;
                }
                past = true;
            } else {
                let whole = if self.rev {
                    (!first && !fallback) || self.end == StreamId::MAX || node::last_entry_id(lp, master).is_some_and(|last| last <= self.end)
                } else {
                    !first || master >= self.start
                };
                if whole {
                    left = left.saturating_sub(live);
                    if left == 0 {
                        return;
                    }
                }
                // Backwards, the node holding `start`: the read stops in it, or in the next one
                // holding a live entry. (From a node above `end` it stops only at a live entry
                // at or below `end`: it may read every node.)
                past = self.rev && !fallback && master <= self.start;
            }
            first = false;
            let nodes = nodes.get_or_insert_with(|| self.nodes.clone());
            let Some((k, next)) = (if self.rev { nodes.prev() } else { nodes.next() }) else { return };
            master = StreamId::from_be_bytes(k).unwrap_or(StreamId::MIN);
            if next.is_packed() {
                touch(self.owner, k);
            }
            lp = next.view();
        }
    }

    /// The next entry in range, or `None` at the end.
    pub fn next_entry(&mut self) -> Option<Entry<'a>> {
        while !self.done {
            let Some((lp, master_id, m)) = self.cur else {
                if !self.advance_node() {
                    return None;
                }
                continue;
            };
            let (flags_off, elements_max) = if self.rev {
                let Some(count_off) = self.pos else {
                    self.advance_node();
                    continue;
                };
                match node::entry_start_from_lp_count(lp, count_off) {
                    Some(f) => f,
                    None => {
                        self.advance_node();
                        continue;
                    }
                }
            } else {
                match self.pos {
                    Some(f) => (f, usize::MAX),
                    None => {
                        self.advance_node();
                        continue;
                    }
                }
            };
            let e = node::entry_within(lp, &m, master_id, flags_off, elements_max);
            self.pos = if self.rev { lp.prev(flags_off) } else { e.next_off };
            let live = !self.skip_tombstones || e.flags & FLAG_DELETED == 0;
            if !self.rev {
                if e.id >= self.start && live {
                    if e.id > self.end {
                        self.done = true;
                        return None;
                    }
                    return Some(Entry { lp, master: m, pos: e, node: master_id });
                }
            } else if e.id <= self.end && live {
                if e.id < self.start {
                    self.done = true;
                    return None;
                }
                return Some(Entry { lp, master: m, pos: e, node: master_id });
            }
        }
        None
    }
}

impl<'a> Iterator for RangeIter<'a> {
    type Item = Entry<'a>;
    fn next(&mut self) -> Option<Entry<'a>> {
        self.next_entry()
    }
}

#[cfg(test)]
mod policy_tests;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod timelist_tests;
