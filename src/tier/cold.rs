//! The process's segment store, as the nodes use it: one [`Store`] on the thread that runs
//! commands (Redis's main thread; configs are set there too), opened by `xstream.tier-dir`.
//!
//! A node whose block is on disk ([`crate::listpack::Listpack::tier_out`]) reads it back
//! through [`get`] and gives its record back through [`release`] when it is freed or
//! rewritten. Freed on another thread (Redis's lazy free), its location waits in a shared list
//! that the main thread empties at its next use of the store: the store itself is never
//! touched off the main thread, so a fork child (which inherits only the forking thread)
//! never finds it locked. A fork child reads the segment files through the descriptors it
//! inherited: a file its parent deletes meanwhile stays readable to it, and records are never
//! rewritten in place, so the child's snapshot of the index stays true for its whole life.
//!
//! A failed read is a *fault*: counted here, its text kept for the log ([`take_faults`]).

#![forbid(unsafe_code)]

use super::segment::{Loc, RewriteError, Stats, Store, TierError};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

thread_local! {
    static STORE: RefCell<Option<Store>> = const { RefCell::new(None) };
    static COLD: Cell<ColdStats> = const { Cell::new(ColdStats::ZERO) };
    static FAULTS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Records released on a thread without the store, waiting for the main thread.
static FREED: Mutex<Vec<Loc>> = Mutex::new(Vec::new());
static FREED_ANY: AtomicBool = AtomicBool::new(false);

/// Faults kept for the log at most (the count goes on).
const FAULT_TEXTS_MAX: usize = 16;

/// Reads of cold blocks, as INFO shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ColdStats {
    /// Blocks read back from the store (decoded-node cache misses of cold nodes).
    pub reads: u64,
    /// Their total time, in µs.
    pub read_us: u64,
    /// The slowest, in µs.
    pub read_us_max: u64,
    /// Reads that failed (I/O error, checksum, missing segment).
    pub faults: u64,
    /// Blocks written to the store.
    pub writes: u64,
    /// Writes that failed (the node stayed in RAM).
    pub write_faults: u64,
    /// Records written anew by compaction (their sparse segments emptied).
    pub moved: u64,
}

impl ColdStats {
    const ZERO: ColdStats = ColdStats { reads: 0, read_us: 0, read_us_max: 0, faults: 0, writes: 0, write_faults: 0, moved: 0 };
}

fn bump(f: impl FnOnce(&mut ColdStats)) {
    COLD.with(|c| {
        let mut s = c.get();
        f(&mut s);
        c.set(s);
    });
}

fn with_store<R>(f: impl FnOnce(&mut Store) -> R) -> Option<R> {
    STORE.try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.as_mut().map(f))).ok().flatten()
}

/// Opens the store in `dir` (this thread's; a store already open is replaced only when no
/// record of it is live: see [`close`]).
pub fn open(dir: &Path, segment_bytes: u64) -> Result<(), TierError> {
    if busy() {
        return Err(TierError::Io(std::io::Error::other("nodes are on disk in the current tier directory")));
    }
    // The current store stays until the new one is open (a refused directory changes nothing).
    let st = Store::open(dir, segment_bytes)?;
    STORE.with(|s| *s.borrow_mut() = Some(st));
    Ok(())
}

/// Does the open store hold a live record (a node on disk)?
pub fn busy() -> bool {
    adopt_freed();
    STORE.with(|s| s.borrow().as_ref().is_some_and(|st| st.stats().live_records > 0))
}

/// Closes the store unless a record is live (a node still on disk); returns whether it is
/// closed (true when none was open).
pub fn close() -> bool {
    if busy() {
        return false;
    }
    STORE.with(|s| *s.borrow_mut() = None);
    true
}

/// Is any node on disk (a record live)? What a command checks first: only then may one of its
/// reads fail, and its replies are held back until it is done.
#[inline]
pub fn has_cold() -> bool {
    STORE.try_with(|s| s.try_borrow().is_ok_and(|s| s.as_ref().is_some_and(|st| st.stats().live_records > 0))).unwrap_or(false)
}

thread_local! {
    /// During a load with tiering on: the bytes of sealed nodes it may keep in RAM, and those
    /// it kept so far.
    static LOAD_BUDGET: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// A load (RDB, AOF preamble, full sync) starts with tiering on and `budget` bytes of sealed
/// nodes to keep in RAM (Some), or ends (None): past the budget, sealed nodes go to disk as
/// newer ones are read (src/rdb.rs), so a load never needs a whole stream in RAM.
pub fn set_load_budget(budget: Option<u64>) {
    LOAD_BUDGET.with(|t| t.set(budget.map(|b| (b, 0))));
}

/// Is a load tiering (a budget set and a store open)?
pub fn tier_on_load() -> bool {
    LOAD_BUDGET.with(|t| t.get()).is_some() && is_open()
}

/// The bytes of sealed nodes the load may still keep in RAM (0 without a load's budget).
pub fn load_budget_left() -> u64 {
    LOAD_BUDGET.with(|t| t.get().map_or(0, |(budget, kept)| budget.saturating_sub(kept)))
}

/// A stream loaded keeps `bytes` of sealed nodes in RAM: counted against the load's budget.
pub fn load_kept(bytes: u64) {
    LOAD_BUDGET.with(|t| {
        if let Some((budget, kept)) = t.get() {
            t.set(Some((budget, kept.saturating_add(bytes))));
        }
    });
}

/// Is a store open on this thread?
pub fn is_open() -> bool {
    STORE.try_with(|s| s.try_borrow().is_ok_and(|s| s.is_some())).unwrap_or(false)
}

/// Writes a block; None without a store. A failure is counted (the caller keeps the block).
pub fn put(block: &[u8]) -> Option<Result<Loc, TierError>> {
    adopt_freed();
    let r = with_store(|st| st.put(block))?;
    bump(|c| if r.is_ok() { c.writes += 1 } else { c.write_faults += 1 });
    Some(r)
}

/// Reads a block back, checked; a failure is a fault (counted, its text kept for the log).
pub fn get(loc: Loc) -> Result<Vec<u8>, TierError> {
    let t = Instant::now();
    let r = with_store(|st| st.get(loc)).unwrap_or(Err(TierError::NoSegment(loc.seg)));
    let us = t.elapsed().as_micros() as u64;
    match &r {
        Ok(_) => bump(|c| {
            c.reads += 1;
            c.read_us += us;
            c.read_us_max = c.read_us_max.max(us);
        }),
        Err(e) => fault(format!("reading a cold node: {e}")),
    }
    r
}

/// Sealed segments that at most half their bytes are live in, sparsest first (none while the
/// store is pinned: nothing could be reclaimed before the unpin).
pub fn sparse() -> Vec<u32> {
    adopt_freed();
    with_store(|st| if st.pinned() { Vec::new() } else { st.sparse() }).unwrap_or_default()
}

/// Compaction: the record at `loc` written anew (read back checked, appended, the old one
/// released); its new place. A failed read is a fault, a failed write counted as any write:
/// either way the record stays where it was.
pub fn rewrite(loc: Loc) -> Result<Loc, TierError> {
    match with_store(|st| st.rewrite(loc)).unwrap_or(Err(RewriteError::Read(TierError::NoSegment(loc.seg)))) {
        Ok(moved) => {
            bump(|c| c.moved += 1);
            Ok(moved)
        }
        Err(RewriteError::Write(e)) => {
            bump(|c| c.write_faults += 1);
            Err(e)
        }
        Err(RewriteError::Read(e)) => {
            fault(format!("compacting a segment: {e}"));
            Err(e)
        }
    }
}

/// A fault: counted, and its text kept for the log.
pub fn fault(text: String) {
    bump(|c| c.faults += 1);
    let _ = FAULTS.try_with(|f| {
        if let Ok(mut f) = f.try_borrow_mut() {
            if f.len() < FAULT_TEXTS_MAX {
                f.push(text);
            }
        }
    });
}

/// The texts of the faults since the last call (at most [`FAULT_TEXTS_MAX`]).
pub fn take_faults() -> Vec<String> {
    FAULTS.try_with(|f| f.try_borrow_mut().map(|mut f| std::mem::take(&mut *f)).unwrap_or_default()).unwrap_or_default()
}

/// A record is no longer needed: released now on the store's thread, or queued for it.
pub fn release(loc: Loc) {
    if with_store(|st| st.release(loc)).is_none() {
        let mut f = FREED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f.push(loc);
        FREED_ANY.store(true, Ordering::Relaxed);
    }
}

/// Releases the records freed on other threads (never waits for the list's lock: a fork
/// child may inherit it held).
fn adopt_freed() {
    if !FREED_ANY.load(Ordering::Relaxed) || !is_open() {
        return;
    }
    let locs = match FREED.try_lock() {
        Ok(mut f) => std::mem::take(&mut *f),
        Err(_) => return,
    };
    FREED_ANY.store(false, Ordering::Relaxed);
    with_store(|st| locs.into_iter().for_each(|l| st.release(l)));
}

/// The store's figures and the reads', None without a store.
pub fn stats() -> Option<(Stats, ColdStats)> {
    adopt_freed();
    let st = with_store(|st| st.stats())?;
    Some((st, COLD.with(|c| c.get())))
}

/// Injects faults into the store (tests, and `XS.DEBUG TIER-FAULTS` of test builds).
pub fn inject(f: super::segment::Faults) -> bool {
    with_store(|st| st.inject(f)).is_some()
}

/// Seals segments at `n` bytes from now on (`XS.DEBUG-TIER-FAULTS SEGMENT-BYTES n` of test
/// builds); false without a store.
pub fn set_segment_bytes(n: u64) -> bool {
    with_store(|st| st.set_segment_bytes(n)).is_some()
}

/// The path of segment `n` (tests: to damage it).
pub fn segment_path(n: u32) -> Option<std::path::PathBuf> {
    with_store(|st| st.segment_path(n).map(Path::to_path_buf)).flatten()
}

#[cfg(test)]
#[path = "cold_tests.rs"]
mod tests;
