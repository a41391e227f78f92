//! The decoded-node cache: plain forms of packed listpacks kept between commands.
//!
//! A command that reads a packed node decompresses it into the node's own slot
//! (`Packed::cache`), and the slot is emptied when the command is done with the key
//! (`Stream::release_caches`). Without this cache the next command decompresses the node
//! again: a consumer reading 10 entries at a time decompresses each 4 KB node about three
//! times, one reading 1 at a time about twenty times. Here the emptied slot's bytes are kept
//! instead, up to a budget in bytes (`xstream.compression-cache`), least recently kept first
//! out, and the next fill of the same node takes them back without decoding. What is kept:
//! the node a reader stopped in (its next read starts there), a node the cache served, and a
//! node decoded a second time while the cache still remembers the first (a *ghost*: its id
//! without its bytes). The nodes a read passed through once are not: a scan would otherwise
//! push out what readers come back to.
//!
//! ```text
//!   command reads node 7      view(): slot empty -> take(7) from here, or decode
//!   command done              release_cache(last): slot -> offer(7) here (kept or a ghost)
//!   write to node 7           unpack(): take(7) from here, or decode; node 7 is plain now
//!   node 7 freed              forget(7)
//! ```
//!
//! Keyed by an id given to each packed form when it is made and never reused: a write to
//! a node makes it plain (and a later compression makes a new packed form with a new id),
//! so a cached entry can only ever be the bytes its id was made from. The cache lives per
//! thread (the server's main thread runs every command); a node freed on another thread
//! (Redis's lazy free) leaves its id in a shared list, and the main thread's cache drops
//! those entries at its next use (see [`freed`]). Until then they are only memory: an id is
//! never asked for again.

#![forbid(unsafe_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes charged per cached node besides its buffer: its table entry (id, age, buffer: 40
/// bytes and a control byte, in a table at most 7/8 full whose size doubles: 47-94 bytes per
/// entry), its place in the age queue (16 bytes, up to twice over with the entries taken
/// since, in a queue whose size doubles: up to 64). Measured (`used_memory` with the cache
/// full, against empty): 1 MB held 1,082,640 bytes and 4 MB 4,198,400 at 128; hence 160.
pub const ENTRY_OVERHEAD: usize = 160;

/// The default budget (`xstream.compression-cache`): 1 MB, about 250 decoded nodes of 4 KB.
pub const DEFAULT_BUDGET: usize = 1 << 20;

/// The bytes an allocation of `n` takes from jemalloc (Redis's allocator): its size class,
/// four classes per doubling above 64 bytes (3,584 and 4,096 between 2 and 4 KB, then 5,120,
/// 6,144...). Other allocators round less, so the budget holds with them too. Without it a
/// 1 MB cache of 4 KB nodes measured 1.10 MB of `used_memory`.
pub fn alloc_class(n: usize) -> usize {
    if n <= 64 {
        return n.next_multiple_of(16);
    }
    // n in (2^k, 2^(k+1)]: classes every 2^(k-2).
    let k = usize::BITS - 1 - (n - 1).leading_zeros();
    let step = 1usize << (k - 2);
    n.next_multiple_of(step)
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A new id for a packed form.
pub fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// What INFO xstream shows of the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes held (each buffer's [`alloc_class`] plus [`ENTRY_OVERHEAD`]; a ghost, the
    /// overhead alone).
    pub bytes: usize,
    /// Nodes whose bytes are kept (ghosts not counted).
    pub nodes: usize,
    /// Fills served from the cache (a decode saved).
    pub hits: u64,
    /// Fills that decoded.
    pub misses: u64,
}

/// Hashes an id (ids are consecutive integers): one multiplication by the golden ratio,
/// whose high bits (which the table's control bytes use) then differ from id to id. The
/// cache sits on the read path of every packed node, where SipHash's cost showed (perf).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<IdHasher>>;

/// The cache's state: a budget, the buffers by id (each with the age it was put at) and
/// the ids in the order they were put. An id taken or forgotten stays in `order` until
/// eviction reaches it and finds its age changed (or the queue is compacted).
#[derive(Debug, Default)]
pub struct Decoded {
    budget: usize,
    age: u64,
    /// id -> (age, bytes); no bytes: a *ghost*, a node decoded recently and not kept.
    by_id: IdMap<(u64, Option<Vec<u8>>)>,
    order: VecDeque<(u64, u64)>,
    stats: Stats,
}

impl std::fmt::Debug for IdHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdHasher")
    }
}

impl Decoded {
    pub fn new(budget: usize) -> Decoded {
        let mut d = Decoded::default();
        d.budget = budget;
        d
    }

    fn cost(buf: Option<&Vec<u8>>) -> usize {
        buf.map_or(0, |b| alloc_class(b.len())) + ENTRY_OVERHEAD
    }

    /// The plain bytes of packed form `id`, taken out of the cache (a hit), or None (a miss:
    /// the caller decodes; a ghost of `id` stays, to admit it when it is offered back).
    pub fn take(&mut self, id: u64) -> Option<Vec<u8>> {
        if let Some((_, Some(_))) = self.by_id.get(&id) {
            self.stats.hits += 1;
            return self.remove(id).flatten();
        }
        self.stats.misses += 1;
        None
    }

    /// A command is done with the plain bytes of packed form `id`. They are kept when
    /// `wanted` (the caller's rule: the node a reader stopped in, where the same reader's next
    /// read starts, or one the cache served this time) or when the node was decoded recently
    /// already (its ghost is still here); otherwise only a ghost is kept and the bytes go
    /// back to the allocator at once. Without this rule, reads from random places in a
    /// stream larger than the cache put every node they pass and evict as many: measured,
    /// XS.RANGE COUNT 100 at random starts took 8% longer with a 1 MB cache than without one
    /// (each evicted buffer is cold in the CPU's caches when the allocator hands it to the
    /// next decode).
    pub fn offer(&mut self, id: u64, buf: Vec<u8>, wanted: bool) {
        let ghost = matches!(self.by_id.get(&id), Some((_, None)));
        self.insert(id, (wanted || ghost).then_some(buf));
    }

    /// Keeps the plain bytes of packed form `id` (dropped at once when they alone exceed the
    /// budget), evicting the least recently put entries to stay within it.
    pub fn put(&mut self, id: u64, buf: Vec<u8>) {
        self.insert(id, Some(buf));
    }

    fn insert(&mut self, id: u64, buf: Option<Vec<u8>>) {
        self.remove(id);
        let cost = Decoded::cost(buf.as_ref());
        if cost > self.budget {
            return;
        }
        self.evict_to(self.budget - cost);
        self.age += 1;
        self.order.push_back((self.age, id));
        ENTRIES.fetch_add(1, Ordering::Relaxed);
        self.stats.bytes += cost;
        if buf.is_some() {
            self.stats.nodes += 1;
        }
        self.by_id.insert(id, (self.age, buf));
        if self.order.len() > 2 * self.by_id.len() + 64 {
            // Mostly ids taken since: keep the live ones, in order.
            let by_id = &self.by_id;
            self.order.retain(|(age, id)| by_id.get(id).is_some_and(|(a, _)| a == age));
        }
    }

    /// Drops the entry of packed form `id` (the node was freed), not counted as a miss.
    pub fn forget(&mut self, id: u64) {
        if !self.by_id.is_empty() {
            self.remove(id);
        }
    }

    /// Removes `id`'s entry: None if there was none, Some(None) for a ghost.
    fn remove(&mut self, id: u64) -> Option<Option<Vec<u8>>> {
        let (_, buf) = self.by_id.remove(&id)?;
        ENTRIES.fetch_sub(1, Ordering::Relaxed);
        self.stats.bytes -= Decoded::cost(buf.as_ref());
        if buf.is_some() {
            self.stats.nodes -= 1;
        }
        Some(buf)
    }

    /// Evicts the least recently put entries until at most `limit` bytes are held.
    fn evict_to(&mut self, limit: usize) {
        while self.stats.bytes > limit {
            let Some((age, id)) = self.order.pop_front() else { break };
            if self.by_id.get(&id).is_some_and(|(a, _)| *a == age) {
                self.remove(id);
            }
        }
    }

    /// A new budget in bytes (0 = no cache); evicts down to it at once.
    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        self.evict_to(budget);
        if self.by_id.is_empty() {
            // Give the tables' memory back too.
            self.by_id = IdMap::default();
            self.order = VecDeque::new();
        }
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Entries in the age queue, live or not (tests: it stays bounded).
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.order.len()
    }
}

impl Drop for Decoded {
    fn drop(&mut self) {
        ENTRIES.fetch_sub(self.by_id.len(), Ordering::Relaxed);
    }
}

thread_local! {
    static CACHE: std::cell::RefCell<Decoded> = std::cell::RefCell::new(Decoded::new(0));
}

/// Entries (kept bytes or ghosts) in all threads' caches: a node freed on a thread whose
/// own cache is empty can have an entry elsewhere only while this is not 0.
static ENTRIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Nodes freed on a thread without a cache (Redis's lazy free: FLUSHALL ASYNC, the default
/// of `lazyfree-lazy-user-flush` on Redis 8; DEL of a large stream), whose entries the main
/// thread's cache drops at its next use. Past [`ORPHANS_MAX`] ids it drops everything instead.
struct Orphans {
    ids: Vec<u64>,
    all: bool,
}

static ORPHANS: std::sync::Mutex<Orphans> = std::sync::Mutex::new(Orphans { ids: Vec::new(), all: false });
static ORPHANED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
const ORPHANS_MAX: usize = 4096;

/// Runs `f` on this thread's cache, after dropping the entries of nodes freed elsewhere; None
/// during the thread's teardown (a node freed then simply is not cached).
pub(super) fn with<R>(f: impl FnOnce(&mut Decoded) -> R) -> Option<R> {
    CACHE
        .try_with(|c| {
            c.try_borrow_mut().ok().map(|mut c| {
                if ORPHANED.load(Ordering::Relaxed) && !c.by_id.is_empty() {
                    adopt_orphans(&mut c);
                }
                f(&mut c)
            })
        })
        .ok()
        .flatten()
}

#[cold]
fn adopt_orphans(c: &mut Decoded) {
    ORPHANED.store(false, Ordering::Relaxed);
    // Never waits for the list's lock: a fork child (which reads nodes to save them) may
    // inherit it held by the lazy-free thread, which the child does not have.
    let (ids, all) = match ORPHANS.try_lock() {
        Ok(mut o) => (std::mem::take(&mut o.ids), std::mem::replace(&mut o.all, false)),
        Err(std::sync::TryLockError::Poisoned(p)) => {
            let mut o = p.into_inner();
            (std::mem::take(&mut o.ids), std::mem::replace(&mut o.all, false))
        }
        Err(std::sync::TryLockError::WouldBlock) => {
            ORPHANED.store(true, Ordering::Relaxed);
            return;
        }
    };
    if all {
        let budget = c.budget;
        c.set_budget(0);
        c.budget = budget;
    } else {
        for id in ids {
            c.forget(id);
        }
    }
}

/// A packed node was freed: its entry goes, from this thread's cache or (freed on another
/// thread) from the one that has it.
pub(super) fn freed(id: u64) {
    let here = with(|c| {
        if c.by_id.is_empty() {
            false
        } else {
            c.forget(id);
            true
        }
    });
    if here != Some(true) && ENTRIES.load(Ordering::Relaxed) > 0 {
        let mut o = ORPHANS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !o.all {
            if o.ids.len() < ORPHANS_MAX {
                o.ids.push(id);
            } else {
                o.ids = Vec::new();
                o.all = true;
            }
        }
        ORPHANED.store(true, Ordering::Relaxed);
    }
}

/// Sets this thread's budget (the module: `xstream.compression-cache`; 0 until set).
pub fn set_budget(bytes: usize) {
    with(|c| c.set_budget(bytes));
}

pub fn budget() -> usize {
    with(|c| c.budget()).unwrap_or(0)
}

/// This thread's cache figures.
pub fn stats() -> Stats {
    with(|c| c.stats()).unwrap_or_default()
}

/// Tests that fill their thread's cache hold this: nodes freed on other threads go to
/// whichever thread's cache is not empty next, so two at once could take each other's.
#[cfg(test)]
pub static TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(n: usize, b: u8) -> Vec<u8> {
        vec![b; n]
    }

    #[test]
    fn take_after_put_is_a_hit_once() {
        let mut c = Decoded::new(10_000);
        assert_eq!(c.take(1), None);
        c.put(1, buf(100, 7));
        assert_eq!(c.stats(), Stats { bytes: 112 + ENTRY_OVERHEAD, nodes: 1, hits: 0, misses: 1 });
        assert_eq!(c.take(1), Some(buf(100, 7)));
        assert_eq!(c.take(1), None);
        assert_eq!(c.stats(), Stats { bytes: 0, nodes: 0, hits: 1, misses: 2 });
    }

    #[test]
    fn least_recently_put_goes_first() {
        let cost = 1024 + ENTRY_OVERHEAD;
        let mut c = Decoded::new(3 * cost);
        for id in 1..=3 {
            c.put(id, buf(1000, id as u8));
        }
        // 1 is taken and put back: now the most recent.
        let b = c.take(1).unwrap();
        c.put(1, b);
        c.put(4, buf(1000, 4));
        assert_eq!(c.stats().nodes, 3);
        assert_eq!(c.stats().bytes, 3 * cost);
        assert_eq!(c.take(2), None, "2 was the least recently put");
        assert_eq!(c.take(3), Some(buf(1000, 3)));
        assert_eq!(c.take(1), Some(buf(1000, 1)));
        assert_eq!(c.take(4), Some(buf(1000, 4)));
    }

    #[test]
    fn budget_bounds_bytes_and_zero_keeps_nothing() {
        let mut c = Decoded::new(0);
        c.put(1, buf(10, 1));
        assert_eq!(c.stats().nodes, 0);
        c.set_budget(5_000);
        for id in 0..100 {
            c.put(id, buf(400 + id as usize, 0));
            assert!(c.stats().bytes <= 5_000);
        }
        // Larger than the budget alone: not kept, and it does not empty the cache.
        let before = c.stats().nodes;
        c.put(1000, buf(6_000, 0));
        assert_eq!(c.stats().nodes, before);
        assert_eq!(c.take(1000), None);
        c.set_budget(1_000);
        assert!(c.stats().bytes <= 1_000);
        assert_eq!(c.stats().nodes, 1);
        c.set_budget(0);
        assert_eq!(c.stats().bytes, 0);
        assert_eq!(c.stats().nodes, 0);
    }

    #[test]
    fn forget_is_not_a_miss_and_put_twice_keeps_one() {
        let mut c = Decoded::new(10_000);
        c.put(5, buf(50, 1));
        c.put(5, buf(60, 2));
        assert_eq!(c.stats().nodes, 1);
        assert_eq!(c.stats().bytes, 64 + ENTRY_OVERHEAD);
        c.forget(5);
        c.forget(6);
        assert_eq!(c.stats(), Stats::default());
    }

    #[test]
    fn the_age_queue_stays_bounded_when_entries_are_taken() {
        let mut c = Decoded::new(1 << 20);
        for round in 0..10_000u64 {
            c.put(round % 7, buf(10, 0));
            let _ = c.take(round % 7);
            c.put(100 + round % 3, buf(10, 0));
        }
        assert!(c.queued() <= 2 * c.stats().nodes + 65, "{} queued for {} nodes", c.queued(), c.stats().nodes);
        assert_eq!(c.stats().nodes, 3);
    }

    #[test]
    fn offers_keep_wanted_nodes_and_the_second_decode_of_others() {
        let mut c = Decoded::new(1 << 20);
        c.offer(1, buf(1000, 1), false);
        assert_eq!(c.stats(), Stats { bytes: ENTRY_OVERHEAD, nodes: 0, hits: 0, misses: 0 }, "a ghost only");
        assert_eq!(c.take(1), None, "a ghost serves nothing");
        c.offer(1, buf(1000, 1), false);
        assert_eq!(c.stats().nodes, 1, "decoded again while its ghost was here: kept");
        assert_eq!(c.take(1), Some(buf(1000, 1)));
        c.offer(2, buf(1000, 2), true);
        assert_eq!(c.take(2), Some(buf(1000, 2)), "wanted: kept at once");
        // Ghosts age out like entries: a small cache forgets them.
        let mut c = Decoded::new(2 * (1024 + ENTRY_OVERHEAD));
        c.offer(7, buf(1000, 7), false);
        for id in 100..110 {
            c.offer(id, buf(1000, 0), true);
        }
        c.offer(7, buf(1000, 7), false);
        assert_eq!(c.take(7), None, "its ghost was evicted: a ghost again, not kept");
        assert!(c.stats().bytes <= 2 * (1024 + ENTRY_OVERHEAD));
    }

    #[test]
    fn costs_are_jemalloc_size_classes() {
        let classes: Vec<usize> =
            [1, 16, 17, 64, 65, 80, 81, 128, 129, 160, 2049, 2560, 2561, 3585, 4096, 4097, 8193].into_iter().map(alloc_class).collect();
        assert_eq!(classes, [16, 16, 32, 64, 80, 80, 96, 128, 160, 160, 2560, 2560, 3072, 4096, 4096, 5120, 10240]);
    }

    #[test]
    fn nodes_freed_on_another_thread_leave_this_threads_cache() {
        let _serial = TEST_LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        set_budget(1 << 20);
        with(|c| {
            c.put(next_id(), buf(100, 1));
            c.put(next_id(), buf(100, 2));
        });
        let ids: Vec<u64> = with(|c| c.by_id.keys().copied().collect()).unwrap();
        let first = ids[0];
        std::thread::spawn(move || freed(first)).join().unwrap();
        assert_eq!(stats().nodes, 1, "the orphan was dropped at the next use");
        // Past ORPHANS_MAX ids freed elsewhere, the whole cache goes.
        std::thread::spawn(move || {
            for id in 0..=ORPHANS_MAX as u64 {
                freed(u64::MAX - id);
            }
        })
        .join()
        .unwrap();
        assert_eq!(stats().nodes, 0);
        assert_eq!(budget(), 1 << 20, "the budget stays");
        set_budget(0);
    }

    #[test]
    fn ids_are_never_reused() {
        let a = next_id();
        let b = next_id();
        assert!(b > a);
    }
}
