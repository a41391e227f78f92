//! Nodes whose block is on disk: read back exactly, written back by a write, released when
//! freed; faults keep every node readable or report it, never another node's bytes.

use super::*;
use crate::listpack::{Codec, Listpack};
use crate::stream::tests::{seed, Rng};

/// A fresh directory, removed when dropped; the store of this test's thread closed first.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("xstream-cold-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        STORE.with(|s| *s.borrow_mut() = None);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A listpack like a node: integers and strings, compressible or not.
fn node(rng: &mut Rng) -> Listpack {
    let mut lp = Listpack::new();
    for i in 0..(4 + rng.below(200)) {
        if rng.below(3) == 0 {
            lp.append_int(rng.next() as i64 >> rng.below(60));
        } else {
            let s: Vec<u8> = (0..rng.below(40)).map(|j| if rng.below(4) == 0 { rng.next() as u8 } else { b'a' + ((i + j) % 26) as u8 }).collect();
            lp.append_str(&s);
        }
    }
    lp
}

fn live() -> u64 {
    stats().map_or(0, |(st, _)| st.live_records)
}

#[test]
fn cold_nodes_read_back_exactly_and_give_their_records_back() {
    let dir = TempDir::new("exact");
    assert!(!is_open());
    open(&dir.0, 64 << 10).unwrap();
    let mut rng = Rng::new(seed());
    let mut nodes: Vec<(Listpack, Vec<u8>)> = Vec::new();
    for i in 0..300 {
        let mut lp = node(&mut rng);
        let bytes = lp.as_bytes().to_vec();
        match i % 3 {
            0 => {}
            1 => drop(lp.pack(Codec::Lz4)),
            _ => drop(lp.pack(Codec::Zstd)),
        }
        let codec = if i % 2 == 0 { Codec::Lz4 } else { Codec::Zstd };
        let cold = lp.tier_out(codec).unwrap();
        assert_eq!(cold, lp.is_cold());
        nodes.push((lp, bytes));
    }
    let cold = nodes.iter().filter(|(lp, _)| lp.is_cold()).count() as u64;
    assert!(cold >= 290, "{cold} of 300 on disk");
    assert_eq!(live(), cold);
    let (st, _) = stats().unwrap();
    assert!(st.segments > 3, "segments of 64 KB: {}", st.segments);
    // Read back, as many times as asked, through the slot and without it.
    for (lp, bytes) in nodes.iter_mut() {
        assert_eq!(lp.as_bytes(), &bytes[..]);
        assert_eq!(lp.view().iter().count(), Listpack::from_vec(bytes.clone(), true).unwrap().len());
        lp.release_cache(false);
        assert_eq!(lp.as_bytes(), &bytes[..]);
        lp.release_cache(true);
        if let Some(r) = lp.unpacked_copy() {
            assert_eq!(r.unwrap().as_bytes(), &bytes[..]);
        }
        // A copy holds its block in RAM: it is a new node.
        let copy = lp.clone();
        assert!(!copy.is_cold());
        assert_eq!(copy.as_bytes(), &bytes[..]);
    }
    assert_eq!(live(), cold);
    let (_, c) = stats().unwrap();
    assert_eq!(c.faults, 0);
    assert!(c.reads >= 3 * cold, "{c:?}");
    // A write brings a node back to RAM for good: its record is released.
    let (mut w, bytes) = nodes.pop().unwrap();
    let was_cold = w.is_cold();
    w.unpack();
    assert!(!w.is_packed() && !w.is_cold());
    assert_eq!(w.as_bytes(), &bytes[..]);
    assert_eq!(live(), cold - u64::from(was_cold));
    // Tiered again: a new record.
    assert!(w.tier_out(Codec::Lz4).unwrap());
    assert_eq!(live(), cold - u64::from(was_cold) + 1);
    assert_eq!(w.into_vec(), bytes);
    // Freed: every record released, every sealed segment deleted (the active one stays).
    drop(nodes);
    assert_eq!(live(), 0);
    let (st, _) = stats().unwrap();
    assert_eq!(st.segments, 1);
    let files = std::fs::read_dir(&dir.0).unwrap().count();
    assert_eq!(files, 2, "LOCK and the active segment");
    assert!(close());
    assert!(!is_open());
}

#[test]
fn faults_keep_nodes_in_ram_or_are_reported() {
    let dir = TempDir::new("faults");
    let mut rng = Rng::new(seed());
    // Without a store nothing moves.
    let mut lp = node(&mut rng);
    assert!(!lp.tier_out(Codec::Lz4).unwrap());
    open(&dir.0, 1 << 20).unwrap();
    // A write that fails (a full disk) leaves the node as it was, in RAM.
    let bytes = lp.as_bytes().to_vec();
    assert!(inject(super::super::segment::Faults { writes: 1, reads: 0, reads_after: 0 }));
    assert!(lp.tier_out(Codec::Zstd).is_err());
    assert!(!lp.is_cold() && !lp.is_packed());
    assert_eq!(lp.as_bytes(), &bytes[..]);
    assert_eq!(stats().unwrap().1.write_faults, 1);
    assert_eq!(live(), 0);
    assert!(lp.tier_out(Codec::Zstd).unwrap());
    assert_eq!(lp.as_bytes(), &bytes[..]);
    lp.release_cache(false);
    // A read that fails is a fault: counted, logged; try_view says so, view() ends the
    // command (a panic the entry point's fence turns into an error reply), never other
    // bytes; the next read succeeds.
    inject(super::super::segment::Faults { writes: 0, reads: 1, reads_after: 0 });
    assert!(lp.try_view().is_none() && lp.is_cold());
    inject(super::super::segment::Faults { writes: 0, reads: 1, reads_after: 0 });
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lp.as_bytes().to_vec()));
    assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&crate::listpack::COLD_READ_PANIC));
    assert_eq!(crate::listpack::cache_fills(), 0, "nothing filled");
    // A write to it ends the same way, the node as it was.
    inject(super::super::segment::Faults { writes: 0, reads: 1, reads_after: 0 });
    assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lp.unpack())).is_err());
    assert!(lp.is_cold());
    assert_eq!(stats().unwrap().1.faults, 3);
    take_faults();
    inject(super::super::segment::Faults { writes: 0, reads: 1, reads_after: 0 });
    assert!(!lp.readable());
    let texts = take_faults();
    assert_eq!(texts.len(), 1);
    assert!(texts[0].contains("injected"), "{texts:?}");
    assert!(take_faults().is_empty());
    assert_eq!(lp.as_bytes(), &bytes[..]);
    lp.release_cache(false);
    // Saving a node whose record cannot be read is an error, not other bytes.
    inject(super::super::segment::Faults { writes: 0, reads: 1, reads_after: 0 });
    assert!(matches!(lp.packed_parts(), Some(Err(_))));
    // A damaged record: the checksum says so.
    let seg = segment_path(1).unwrap();
    let mut f = std::fs::read(&seg).unwrap();
    let last = f.len() - 1;
    f[last] ^= 0x40;
    std::fs::write(&seg, &f).unwrap();
    assert!(lp.try_view().is_none());
    assert!(lp.try_view().is_none(), "a damaged record stays damaged");
    assert_eq!(stats().unwrap().0.checksum_errors, 2);
    // The directory cannot change while a node is on disk; once it is freed, it can.
    assert!(!close());
    assert!(open(&dir.0, 1 << 20).is_err());
    drop(lp);
    assert!(close());
}

#[test]
fn records_freed_on_another_thread_come_back_at_the_next_use() {
    let dir = TempDir::new("freed");
    open(&dir.0, 1 << 20).unwrap();
    let mut rng = Rng::new(seed());
    let mut nodes = Vec::new();
    for _ in 0..20 {
        let mut lp = node(&mut rng);
        assert!(lp.tier_out(Codec::Lz4).unwrap());
        nodes.push(lp);
    }
    assert_eq!(live(), 20);
    // Redis's lazy free drops values on its own thread, which has no store.
    std::thread::spawn(move || drop(nodes)).join().unwrap();
    assert!(FREED_ANY.load(Ordering::Relaxed));
    assert_eq!(live(), 0);
    assert!(close());
}

/// Every live entry of `s`, in order.
type Entries = Vec<(crate::stream::StreamId, Vec<(Vec<u8>, Vec<u8>)>)>;

fn entries(s: &crate::stream::Stream) -> Entries {
    let mut out = Vec::new();
    let mut it = s.range(crate::stream::StreamId::MIN, crate::stream::StreamId::MAX, false);
    while let Some(e) = it.next_entry() {
        out.push((e.id(), e.fields()));
    }
    out
}

fn cold_reads() -> u64 {
    stats().map_or(0, |(_, c)| c.reads)
}

/// Trims of a stream whose sealed nodes are on disk remove whole nodes by their notes (counts
/// and last ID kept in RAM), unread: only the node a trim cuts or stops at is read, and the
/// result is an untiered copy's. Under DELREF the trim walks the entries of what it removes:
/// those are read.
#[test]
fn trims_remove_cold_nodes_by_their_notes() {
    use crate::stream::{IdSpec, NodeLimits, RefPolicy, Stream, StreamId, Trim, TrimStrategy};
    let dir = TempDir::new("notes");
    open(&dir.0, 1 << 20).unwrap();
    let mut rng = Rng::new(seed());
    let limits = NodeLimits { entries_max: 10, bytes_max: 0 };
    let (mut unread_nodes, mut reads_total) = (0u64, 0u64);
    for case in 0..60 {
        let (mut hot, mut cold) = (Stream::new(), Stream::new());
        let n = 100 + rng.below(1500);
        for i in 1..=n {
            let v = format!("value-{i}-{}", rng.below(1000));
            for s in [&mut hot, &mut cold] {
                s.append(&[b"f", v.as_bytes()], IdSpec::Explicit(StreamId::new(i, 0)), 0, limits).unwrap();
            }
        }
        for _ in 0..rng.below(n / 4) {
            let id = StreamId::new(1 + rng.below(n), 0);
            assert_eq!(hot.delete(id), cold.delete(id));
        }
        let masters: Vec<StreamId> = cold.stored_nodes().map(|(m, _)| m).collect();
        for m in masters {
            cold.tier_node(m).unwrap();
        }
        assert_eq!(cold.tiered().0 as usize, cold.rax_keys() - 1, "case {case}: every sealed node on disk");
        let strategy =
            if rng.below(2) == 0 { TrimStrategy::MaxLen(rng.below(n + 5)) } else { TrimStrategy::MinId(StreamId::new(rng.below(n + 5), 0)) };
        let t = Trim { strategy, approx: rng.below(2) == 0, limit: if rng.below(3) == 0 { rng.below(400) as i64 } else { 0 } };
        let policy = if rng.below(4) == 0 { RefPolicy::DelRef } else { RefPolicy::KeepRef };
        let nodes_before = cold.rax_keys();
        let r0 = cold_reads();
        cold.read_trimmed_nodes(&t, policy == RefPolicy::KeepRef);
        let (a, b) = (hot.trim_with(&t, policy), cold.trim_with(&t, policy));
        let reads = cold_reads() - r0;
        assert_eq!(a.deleted, b.deleted, "case {case}: {t:?} {policy:?}");
        assert_eq!((hot.length, hot.first_id), (cold.length, cold.first_id), "case {case}: {t:?}");
        assert_eq!(entries(&hot), entries(&cold), "case {case}: {t:?}");
        // Every node on disk, rewritten by the deletes and the trim or not, is at or below
        // `cold_max` (what lets a forward read above it skip its read-first walk).
        assert_eq!(hot.cold_max(), None);
        assert!(cold.stored_nodes().filter(|(_, lp)| lp.is_cold()).all(|(k, _)| Some(k) <= cold.cold_max()), "case {case}");
        let removed = nodes_before - cold.rax_keys();
        if policy == RefPolicy::KeepRef {
            // The node cut or stopped at, and the first node left (its first ID).
            assert!(reads <= 2, "case {case}: {reads} nodes read to trim {t:?} ({removed} removed)");
            unread_nodes += removed as u64;
        }
        reads_total += reads;
    }
    assert!(unread_nodes > 100, "{unread_nodes} cold nodes removed unread");
    eprintln!("trims by notes: {unread_nodes} cold nodes removed unread, {reads_total} nodes read");
}
