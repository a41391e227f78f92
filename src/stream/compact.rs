//! Compaction: nodes rewritten without their deleted entries, and neighbouring
//! nodes merged while they fit the node limits.
//!
//! ```text
//!  before:  [m | e x e x e x]  [m | x e x e]  [m | e e e]      x = tombstone
//!  after:   [m | e e e e e]                   [m | e e e]      (one node, same master key)
//! ```
//!
//! Only the node layout changes: every entry keeps its ID, fields and values;
//! length, first / last / max-deleted IDs, entries-added and the groups (PELs,
//! counters) are not touched. A rebuilt node keeps the master ID (its key) and
//! master fields of the first node of the run; the entries of the following
//! nodes are re-encoded against them (deltas, SAMEFIELDS). Since the nodes of a
//! run are neighbours, the order of entries, and what a seek finds, stay the same.
//!
//! What changes is what depends on the layout: XINFO's radix-tree-keys / -nodes,
//! where the tail node is full, and what an approximate (`~`) trim removes, since
//! it removes whole nodes.

use super::node::{self, FLAG_DELETED, FLAG_SAMEFIELDS};
use super::{NodeLimits, Stream, StreamId, NODE_BYTES_MAX};
use crate::listpack::{Listpack, Value};
use crate::rax::SeekOp;

/// What a compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compacted {
    /// Nodes read and rewritten (the source nodes of every rebuild).
    pub nodes_rewritten: u64,
    /// Nodes that disappeared by being merged into their predecessor.
    pub nodes_merged: u64,
    /// Tombstones dropped.
    pub tombstones_dropped: u64,
    /// Bytes of node allocations freed (before minus after).
    pub bytes_freed: u64,
}

impl Compacted {
    pub fn add(&mut self, o: Compacted) {
        self.nodes_rewritten += o.nodes_rewritten;
        self.nodes_merged += o.nodes_merged;
        self.tombstones_dropped += o.tombstones_dropped;
        self.bytes_freed += o.bytes_freed;
    }
}

/// Is a node with these counts past the threshold (a percentage of its entries,
/// live and deleted, that are deleted; 0 = never)?
pub fn over_threshold(count: i64, deleted: i64, pct: u8) -> bool {
    if pct == 0 || deleted <= 0 {
        return false;
    }
    let total = count.max(0).saturating_add(deleted) as i128;
    (deleted as i128) * 100 >= (pct.min(100) as i128) * total
}

/// The byte cap a rebuilt node must stay under (as `Stream::append` sees it).
fn bytes_cap(limits: NodeLimits) -> usize {
    if limits.bytes_max <= 0 || limits.bytes_max as u64 > NODE_BYTES_MAX {
        NODE_BYTES_MAX as usize
    } else {
        limits.bytes_max as usize
    }
}

/// Same string form (listpack values of one element may be Int or Str).
fn same_value(a: Value<'_>, b: Value<'_>) -> bool {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Int(_), Value::Str(s)) => a.eq_bytes(s),
        (Value::Str(s), Value::Int(_)) => b.eq_bytes(s),
    }
}

/// A node being built: master ID and fields of the run's first node.
struct Builder {
    lp: Listpack,
    master_id: StreamId,
    /// Offsets of the master fields in `lp` (stable: only appends follow them).
    master_fields: Vec<usize>,
    live: i64,
}

impl Builder {
    fn new(src: &Listpack, master_id: StreamId) -> Builder {
        let m = node::master(src);
        let mut lp = Listpack::with_capacity(src.bytes_len());
        // count (rewritten at the end), deleted, num-fields, fields, terminator.
        lp.append_int(0);
        lp.append_int(0);
        lp.append_int(m.fields_count as i64);
        let mut master_fields = Vec::with_capacity(m.fields_count);
        let mut p = Some(m.fields_off);
        for _ in 0..m.fields_count {
            let Some(o) = p else { break };
            master_fields.push(lp.bytes_len() - 1);
            let (v, next) = src.get_next(o);
            lp.append(v);
            p = next;
        }
        // A node not deep-checked may end early: keep the master consistent.
        if master_fields.len() != m.fields_count {
            let first = lp.first().and_then(|f| lp.next(f)).and_then(|d| lp.next(d));
            if let Some(o) = first {
                lp.replace_int(o, master_fields.len() as i64);
            }
            master_fields.clear();
            let mut p = lp.first().and_then(|f| lp.next(f)).and_then(|d| lp.next(d)).and_then(|n| lp.next(n));
            while let Some(o) = p {
                master_fields.push(o);
                p = lp.next(o);
            }
        }
        lp.append_int(0);
        Builder { lp, master_id, master_fields, live: 0 }
    }

    /// Appends the live entries of `src` (master ID `src_id`), re-encoded against
    /// this node's master. Returns the tombstones skipped.
    fn push_node(&mut self, src: &Listpack, src_id: StreamId) -> Result<u64, ()> {
        let m = node::master(src);
        let mut p = m.first_entry;
        let mut dropped = 0u64;
        let mut vals: Vec<Value<'_>> = Vec::new();
        while let Some(off) = p {
            let e = node::entry_at(src, &m, src_id, off);
            p = e.next_off;
            if e.flags & FLAG_DELETED != 0 {
                dropped += 1;
                continue;
            }
            vals.clear();
            node::for_each_field(src, &m, &e, |f, v| {
                vals.push(f);
                vals.push(v);
            });
            let same = e.numfields == self.master_fields.len()
                && (0..e.numfields).all(|i| same_value(vals.get(i * 2).copied().unwrap_or(Value::Int(0)), self.lp.get(self.master_fields[i])));
            let flags = if same { FLAG_SAMEFIELDS } else { 0 };
            let head = [
                Value::Int(flags),
                Value::Int(e.id.ms.wrapping_sub(self.master_id.ms) as i64),
                Value::Int(e.id.seq.wrapping_sub(self.master_id.seq) as i64),
            ];
            let r = if same {
                let values = vals.iter().skip(1).step_by(2).copied();
                let lp_count = Value::Int(e.numfields as i64 + 3);
                self.lp.try_append_all(head.into_iter().chain(values).chain([lp_count]))
            } else {
                let lp_count = Value::Int(2 * e.numfields as i64 + 4);
                self.lp.try_append_all(head.into_iter().chain([Value::Int(e.numfields as i64)]).chain(vals.iter().copied()).chain([lp_count]))
            };
            r.map_err(|_| ())?;
            self.live += 1;
        }
        Ok(dropped)
    }

    fn finish(mut self) -> Listpack {
        if let Some(first) = self.lp.first() {
            let _ = self.lp.try_replace(first, Value::Int(self.live));
        }
        self.lp.shrink_to_fit();
        self.lp
    }
}

impl Stream {
    /// Tombstones still held by the nodes (XS.INFO STREAM `deleted-entries`).
    pub fn deleted_entries(&self) -> u64 {
        self.rax.values().map(|lp| node::counts(lp.view()).1.max(0) as u64).sum()
    }

    /// Rebuilds the run of nodes starting at `keys[0]` into one node, taking the
    /// following keys while the result fits the limits. Does nothing (returns 1
    /// consumed, nothing changed) when the first node has no tombstone and the
    /// second does not fit. Returns (nodes consumed, what was done).
    fn rebuild_run(&mut self, keys: &[StreamId], limits: NodeLimits) -> (usize, Compacted) {
        let Some(&first) = keys.first() else { return (0, Compacted::default()) };
        let Some(lp0) = self.rax.get(&first.to_be_bytes()) else { return (1, Compacted::default()) };
        // Cold nodes (`xstream.tier-dir`) are not rewritten: a rebuild would bring them back
        // to RAM, and one that cannot be read back must never be rebuilt from what it reads as.
        if lp0.is_cold() {
            return (1, Compacted::default());
        }
        // What the nodes hold in memory as stored (compressed nodes: their block), not the size
        // of the plain view the rebuild reads.
        let mut freed_from = lp0.stored_bytes();
        let lp0 = lp0.view();
        let (_, deleted0) = node::counts(lp0);
        let cap = bytes_cap(limits);
        let mut b = Builder::new(lp0, first);
        let Ok(mut dropped) = b.push_node(lp0, first) else { return (1, Compacted::default()) };
        let mut consumed = 1usize;
        let owner = &self.rax as *const super::Nodes as usize;
        for &k in &keys[1..] {
            let Some(lp) = self.rax.get(&k.to_be_bytes()) else { break };
            if lp.is_cold() {
                break;
            }
            if lp.is_packed() {
                super::touch(owner, &k.to_be_bytes());
            }
            let stored = lp.stored_bytes();
            let lp = lp.view();
            let (count, _) = node::counts(lp);
            if limits.entries_max > 0 && b.live.saturating_add(count.max(0)) > limits.entries_max {
                break;
            }
            let mut trial = Builder { lp: b.lp.clone(), master_id: b.master_id, master_fields: b.master_fields.clone(), live: b.live };
            match trial.push_node(lp, k) {
                Ok(d) if trial.lp.bytes_len() < cap && (limits.entries_max <= 0 || trial.live <= limits.entries_max) => {
                    dropped += d;
                    freed_from += stored;
                    b = trial;
                    consumed += 1;
                }
                _ => break,
            }
        }
        if consumed == 1 && deleted0 <= 0 {
            return (1, Compacted::default());
        }
        let mut new = b.finish();
        // Sealed (not the last node): compressed like any sealed node.
        let last_consumed = keys[consumed - 1].to_be_bytes();
        if let Some(codec) = super::codec() {
            if self.rax.seek(SeekOp::Gt, &last_consumed).next().is_some() {
                new.pack(codec);
            }
        }
        let after = new.stored_bytes();
        for &k in &keys[1..consumed] {
            self.rax.remove(&k.to_be_bytes());
        }
        self.rax.insert(&first.to_be_bytes(), new);
        let done = Compacted {
            nodes_rewritten: consumed as u64,
            nodes_merged: consumed as u64 - 1,
            tombstones_dropped: dropped,
            bytes_freed: freed_from.saturating_sub(after) as u64,
        };
        (consumed, done)
    }

    /// The on-write step: if the node holding `id` is past the threshold, rewrites
    /// it without its tombstones, merged with its predecessor and / or successor
    /// when they fit together. Bounded: at most three nodes are read.
    pub fn compact_at(&mut self, id: StreamId, pct: u8, limits: NodeLimits) -> Compacted {
        if pct == 0 {
            return Compacted::default();
        }
        let bound = id.to_be_bytes();
        let owner = &self.rax as *const super::Nodes as usize;
        let (k, over) = {
            // (prev(): a Le / Lt seek that finds nothing ends there, next() would restart at the first key.)
            let mut it = self.rax.seek(SeekOp::Le, &bound);
            let Some((k, lp)) = it.prev() else { return Compacted::default() };
            if lp.is_packed() {
                super::touch(owner, k);
            }
            let (count, deleted) = node::counts(lp.view());
            (StreamId::from_be_bytes(k).unwrap_or(StreamId::MIN), over_threshold(count, deleted, pct))
        };
        if !over {
            return Compacted::default();
        }
        let kb = k.to_be_bytes();
        let prev = self.rax.seek(SeekOp::Lt, &kb).prev().map(|(p, lp)| {
            if lp.is_packed() {
                super::touch(owner, p);
            }
            (StreamId::from_be_bytes(p).unwrap_or(StreamId::MIN), node::counts(lp.view()).0)
        });
        let next = self.rax.seek(SeekOp::Gt, &kb).next().map(|(n, _)| StreamId::from_be_bytes(n).unwrap_or(StreamId::MIN));
        let mut keys: Vec<StreamId> = Vec::with_capacity(3);
        if let Some((p, pcount)) = prev {
            let kcount = self.rax.get(&kb).map_or(0, |lp| node::counts(lp.view()).0);
            if limits.entries_max <= 0 || pcount.saturating_add(kcount) <= limits.entries_max {
                keys.push(p);
            }
        }
        keys.push(k);
        if let Some(n) = next {
            keys.push(n);
        }
        let mut total = Compacted::default();
        let (consumed, done) = self.rebuild_run(&keys, limits);
        total.add(done);
        // The predecessor was tried first: if it did not take `k`, rebuild from `k`.
        if keys[0] != k && consumed == 1 {
            let (_, done) = self.rebuild_run(&keys[1..], limits);
            total.add(done);
        }
        total
    }

    /// XS.COMPACT: walks the nodes in order, rewriting each one holding tombstones
    /// and merging neighbours that fit together. `max_nodes` (0 = no limit) bounds
    /// the nodes rewritten; nodes left as they are cost a header read.
    pub fn compact_all(&mut self, max_nodes: u64, limits: NodeLimits) -> Compacted {
        let keys: Vec<StreamId> = self.stored_nodes().map(|(k, _)| k).collect();
        let cap = bytes_cap(limits);
        let mut total = Compacted::default();
        // Nodes read by rebuilds, changed or not: what the limit bounds.
        let mut spent = 0u64;
        let mut i = 0;
        while i < keys.len() {
            if max_nodes != 0 && spent >= max_nodes {
                break;
            }
            let Some(lp) = self.rax.get(&keys[i].to_be_bytes()) else {
                i += 1;
                continue;
            };
            let lp = lp.view();
            let (count, deleted) = node::counts(lp);
            // Could the next node join? (entries exact, bytes estimated from the live share)
            let joins = keys.get(i + 1).and_then(|n| self.rax.get(&n.to_be_bytes())).is_some_and(|nlp| {
                let nlp = nlp.view();
                let (ncount, ndel) = node::counts(nlp);
                let live_bytes = |l: &Listpack, c: i64, d: i64| {
                    let total = (c.max(0) + d.max(0)).max(1) as usize;
                    l.bytes_len() / total * c.max(0) as usize
                };
                (limits.entries_max <= 0 || count.saturating_add(ncount) <= limits.entries_max)
                    && live_bytes(lp, count, deleted) + live_bytes(nlp, ncount, ndel) < cap
            });
            if deleted <= 0 && !joins {
                i += 1;
                continue;
            }
            let end = if max_nodes == 0 {
                keys.len()
            } else {
                let left = (max_nodes - spent) as usize;
                keys.len().min(i.saturating_add(left.max(1)))
            };
            let (consumed, done) = self.rebuild_run(&keys[i..end], limits);
            // A run that changed nothing still cost a read: count it against the limit.
            spent += consumed.max(1) as u64;
            total.add(done);
            i += consumed.max(1);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::tests::{run_model_with, seed};
    use crate::stream::{IdSpec, RefPolicy};

    #[test]
    fn model_random_ops_with_compaction() {
        let base = seed();
        for i in 0..60 {
            run_model_with(base.wrapping_add(i), 600, true);
        }
    }

    fn filled(n: u64, limits: NodeLimits) -> Stream {
        let mut s = Stream::new();
        for i in 1..=n {
            let v = format!("value-{i}");
            let f: [&[u8]; 4] = [b"a", v.as_bytes(), b"b", b"x"];
            s.append(&f, IdSpec::Explicit(StreamId::new(i, 0)), 0, limits).unwrap();
        }
        s
    }

    type Entries = Vec<(StreamId, Vec<(Vec<u8>, Vec<u8>)>)>;

    fn dump(s: &Stream) -> Entries {
        s.range(StreamId::MIN, StreamId::MAX, false).map(|e| (e.id(), e.fields())).collect()
    }

    #[test]
    fn model_random_ops_with_compaction_and_zstd() {
        crate::stream::set_codec(Some(crate::listpack::Codec::Zstd));
        let base = seed();
        for i in 0..10 {
            run_model_with(base.wrapping_add(3000 + i), 600, true);
        }
        crate::stream::set_codec(None);
        assert_eq!(crate::listpack::cache_fills(), 0);
    }

    #[test]
    fn model_random_ops_with_compaction_and_compression() {
        crate::stream::set_compression(true);
        let base = seed();
        for i in 0..40 {
            run_model_with(base.wrapping_add(1000 + i), 600, true);
        }
        crate::stream::set_compression(false);
        assert_eq!(crate::listpack::cache_fills(), 0);
    }

    #[test]
    fn sealed_nodes_are_packed_and_read_back() {
        crate::stream::set_compression(true);
        let limits = NodeLimits::default();
        let mut s = Stream::new();
        let mut plain = Stream::new();
        for i in 1..=1000u64 {
            let v = format!("{{\"user\":\"u{}\",\"action\":\"click\",\"ts\":{}}}", i % 13, 1700000000000u64 + i);
            let f: [&[u8]; 4] = [b"data", v.as_bytes(), b"kind", b"event"];
            s.append(&f, IdSpec::Explicit(StreamId::new(i, 0)), 0, limits).unwrap();
            crate::stream::set_compression(false);
            plain.append(&f, IdSpec::Explicit(StreamId::new(i, 0)), 0, limits).unwrap();
            crate::stream::set_compression(true);
        }
        assert_eq!(s.rax_keys(), plain.rax_keys());
        let sealed = s.rax_keys() as u64 - 1;
        // Appends queue the nodes they seal; the background step packs them.
        assert_eq!(s.packed_nodes(), 0);
        assert_eq!(s.pack_queue().len() as u64, sealed);
        let mut ticks = 0;
        while !s.pack_queue().is_empty() {
            s.pack_queued(4, || true);
            ticks += 1;
        }
        assert_eq!(ticks, sealed.div_ceil(4));
        assert_eq!(s.packed_nodes(), sealed);
        assert!(s.mem_bytes() * 2 < plain.mem_bytes(), "{} vs {}", s.mem_bytes(), plain.mem_bytes());
        assert_eq!(dump(&s), dump(&plain));
        assert_eq!(
            s.range(StreamId::new(500, 0), StreamId::MAX, true).take(3).map(|e| e.id()).collect::<Vec<_>>(),
            vec![StreamId::new(1000, 0), StreamId::new(999, 0), StreamId::new(998, 0)]
        );
        s.release_caches();
        assert_eq!(crate::listpack::cache_fills(), 0);
        // A deletion in a packed node leaves it packed.
        assert_eq!(s.delete_ids(&[StreamId::new(5, 0)]), 1);
        assert_eq!(s.packed_nodes(), sealed);
        s.release_caches();
        assert_eq!(crate::listpack::cache_fills(), 0);
        crate::stream::validate::validate_stream(&s).unwrap();
        s.release_caches();
        assert_eq!(crate::listpack::cache_fills(), 0);
        crate::stream::set_compression(false);
    }

    #[test]
    fn threshold() {
        assert!(!over_threshold(10, 0, 1));
        assert!(!over_threshold(10, 10, 0));
        assert!(over_threshold(10, 10, 50));
        assert!(!over_threshold(11, 10, 50));
        assert!(over_threshold(0, 1, 100));
        assert!(!over_threshold(1, 99, 100));
    }

    #[test]
    fn every_other_deleted_halves_the_nodes() {
        let limits = NodeLimits::default();
        let mut s = filled(1000, limits);
        assert_eq!(s.rax_keys(), 10);
        let before_mem = s.mem_bytes();
        let ids: Vec<StreamId> = (1..=1000).step_by(2).map(|i| StreamId::new(i, 0)).collect();
        for id in &ids {
            s.delete_ids(&[*id]);
            s.compact_at(*id, 50, limits);
        }
        crate::stream::validate::validate_stream(&s).unwrap();
        assert_eq!(s.length, 500);
        assert_eq!(s.deleted_entries(), 0);
        assert_eq!(s.rax_keys(), 5);
        assert!(s.mem_bytes() * 100 < before_mem * 60, "{} vs {}", s.mem_bytes(), before_mem);
        let want: Vec<u64> = (2..=1000).step_by(2).collect();
        assert_eq!(dump(&s).iter().map(|e| e.0.ms).collect::<Vec<_>>(), want);
        assert_eq!(s.first_id, StreamId::new(2, 0));
        assert_eq!(s.max_deleted_entry_id, StreamId::new(999, 0));
        assert_eq!(s.entries_added, 1000);
        // Appends go on after the merged tail.
        s.append(&[b"a", b"z"], IdSpec::Explicit(StreamId::new(2000, 0)), 0, limits).unwrap();
        assert_eq!(s.last_valid_id(), StreamId::new(2000, 0));
        crate::stream::validate::validate_stream(&s).unwrap();
    }

    #[test]
    fn compact_all_is_bounded_and_keeps_groups() {
        let limits = NodeLimits::default();
        let mut s = filled(2000, limits);
        assert!(s.create_group(b"g", StreamId::MIN, 0));
        let slot = s.group_mut(b"g").unwrap().create_consumer(b"c", 0).unwrap();
        s.read_group_new(b"g", slot, StreamId::MIN, 300, false, 5, crate::stream::LagRules::Redis7, None, |_, _, _| true);
        let mut r = crate::stream::tests::Rng::new(7);
        let ids: Vec<StreamId> = (1..=2000).filter(|_| r.below(10) < 9).map(|i| StreamId::new(i, 0)).collect();
        let out = s.delete_ex(&ids, RefPolicy::KeepRef);
        let want = dump(&s);
        let pel: Vec<Vec<u8>> = {
            let g = s.group(b"g").unwrap();
            let mut it = g.pel().iter();
            let mut v = Vec::new();
            while let Some((k, _)) = it.next() {
                v.push(k.to_vec());
            }
            v
        };
        let meta = (s.length, s.first_id, s.last_id, s.max_deleted_entry_id, s.entries_added);
        assert_eq!(s.deleted_entries(), out.deleted);
        let nodes = s.rax_keys();
        let d = s.compact_all(3, limits);
        assert_eq!(d.nodes_rewritten, 3);
        assert_eq!(s.rax_keys(), nodes - 2);
        let d2 = s.compact_all(0, limits);
        assert_eq!(s.deleted_entries(), 0);
        assert_eq!(d.tombstones_dropped + d2.tombstones_dropped, out.deleted);
        assert!(d2.bytes_freed > 0);
        assert!(s.rax_keys() <= 3, "{}", s.rax_keys());
        // A second pass has nothing to do.
        assert_eq!(s.compact_all(0, limits), Compacted::default());
        crate::stream::validate::validate_stream(&s).unwrap();
        assert_eq!(dump(&s), want);
        assert_eq!((s.length, s.first_id, s.last_id, s.max_deleted_entry_id, s.entries_added), meta);
        let g = s.group(b"g").unwrap();
        let mut it = g.pel().iter();
        let mut v = Vec::new();
        while let Some((k, _)) = it.next() {
            v.push(k.to_vec());
        }
        assert_eq!(v, pel);
        assert_eq!(g.entries_read, 300);
    }

    #[test]
    fn byte_limit_is_kept_when_merging() {
        let limits = NodeLimits { entries_max: 0, bytes_max: 500 };
        let mut s = filled(300, limits);
        let ids: Vec<StreamId> = (1..=300).filter(|i| i % 3 != 0).map(|i| StreamId::new(i, 0)).collect();
        s.delete_ids(&ids);
        s.compact_all(0, limits);
        for (_, lp) in s.nodes() {
            assert!(lp.bytes_len() < 500);
        }
        assert_eq!(dump(&s).len(), 100);
        crate::stream::validate::validate_stream(&s).unwrap();
    }

    #[test]
    fn merged_entries_with_other_fields_are_reencoded() {
        let limits = NodeLimits { entries_max: 2, bytes_max: 4096 };
        let mut s = Stream::new();
        s.append(&[b"a", b"1"], IdSpec::Explicit(StreamId::new(1, 0)), 0, limits).unwrap();
        s.append(&[b"a", b"2"], IdSpec::Explicit(StreamId::new(2, 0)), 0, limits).unwrap();
        s.append(&[b"b", b"3", b"c", b"4"], IdSpec::Explicit(StreamId::new(3, 5)), 0, limits).unwrap();
        s.append(&[b"a", b"5"], IdSpec::Explicit(StreamId::new(4, 0)), 0, limits).unwrap();
        s.delete_ids(&[StreamId::new(2, 0), StreamId::new(4, 0)]);
        let want = dump(&s);
        let d = s.compact_all(0, limits);
        assert_eq!(d.nodes_merged, 1);
        assert_eq!(s.rax_keys(), 1);
        assert_eq!(dump(&s), want);
        crate::stream::validate::validate_stream(&s).unwrap();
    }
}
