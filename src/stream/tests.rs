//! Model tests: the stream log against a plain `Vec` of entries.

use super::*;

/// splitmix64: small, deterministic, good enough for test inputs.
pub(crate) struct Rng(u64);
impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

pub(crate) fn seed() -> u64 {
    let s = std::env::var("XSTREAM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1));
    eprintln!("seed: XSTREAM_SEED={s}");
    s
}

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Default)]
struct Model {
    entries: Vec<(StreamId, Fields)>,
    last_id: StreamId,
    max_deleted: StreamId,
    added: u64,
}

fn flat(f: &Fields) -> Vec<&[u8]> {
    let mut v = Vec::new();
    for (a, b) in f {
        v.push(a.as_slice());
        v.push(b.as_slice());
    }
    v
}

fn random_fields(r: &mut Rng, prev: &Option<Fields>) -> Fields {
    if let Some(p) = prev {
        if r.below(3) > 0 {
            // Same field names, new values: exercises SAMEFIELDS.
            return p.iter().map(|(f, _)| (f.clone(), random_value(r))).collect();
        }
    }
    let n = 1 + r.below(4) as usize;
    (0..n).map(|i| (format!("f{}", r.below(3) + i as u64).into_bytes(), random_value(r))).collect()
}

fn random_value(r: &mut Rng) -> Vec<u8> {
    match r.below(6) {
        0 => r.below(1000).to_string().into_bytes(),
        1 => (r.next() as i64).to_string().into_bytes(),
        2 => b"007".to_vec(),
        3 => vec![b'x'; r.below(300) as usize],
        4 => Vec::new(),
        _ => format!("v{}", r.below(100)).into_bytes(),
    }
}

fn check(s: &Stream, m: &Model) {
    validate::validate_stream(s).unwrap_or_else(|e| panic!("invalid stream: {e}"));
    assert_eq!(s.length, m.entries.len() as u64);
    assert_eq!(s.last_id, m.last_id);
    assert_eq!(s.max_deleted_entry_id, m.max_deleted);
    assert_eq!(s.entries_added, m.added);
    assert_eq!(s.first_id, m.entries.first().map(|e| e.0).unwrap_or(StreamId::MIN));
}

fn range_model(m: &Model, start: StreamId, end: StreamId, rev: bool, count: usize) -> Vec<(StreamId, Fields)> {
    let mut v: Vec<_> = m.entries.iter().filter(|e| e.0 >= start && e.0 <= end).cloned().collect();
    if rev {
        v.reverse();
    }
    if count > 0 {
        v.truncate(count);
    }
    v
}

fn range_stream(s: &Stream, start: StreamId, end: StreamId, rev: bool, count: usize) -> Vec<(StreamId, Fields)> {
    let mut out = Vec::new();
    for e in s.range(start, end, rev) {
        out.push((e.id(), e.fields()));
        if count > 0 && out.len() == count {
            break;
        }
    }
    out
}

fn random_id(r: &mut Rng, m: &Model) -> StreamId {
    match r.below(4) {
        0 if !m.entries.is_empty() => m.entries[r.below(m.entries.len() as u64) as usize].0,
        1 => StreamId::new(r.below(m.last_id.ms + 3), r.below(4)),
        2 => StreamId::new(m.last_id.ms, r.below(m.last_id.seq.saturating_add(3))),
        _ => StreamId::new(r.below(60), r.below(3)),
    }
}

fn run_model(seed: u64, ops: usize) {
    run_model_with(seed, ops, false)
}

/// The model run; with `compact`, deletions and trims are followed by the on-write
/// compaction step (random thresholds) and XS.COMPACT runs now and then.
pub(crate) fn run_model_with(seed: u64, ops: usize, compact: bool) {
    let mut r = Rng::new(seed);
    let limits = NodeLimits { entries_max: [0, 1, 2, 3, 5, 10, 100][r.below(7) as usize], bytes_max: [0, 30, 100, 500, 4096][r.below(5) as usize] };
    let mut s = Stream::new();
    let mut m = Model::default();
    let mut prev_fields = None;
    let mut clock = 1u64;
    for _ in 0..ops {
        match r.below(10) {
            0..=3 => {
                let f = random_fields(&mut r, &prev_fields);
                let spec = match r.below(4) {
                    0 => IdSpec::Auto,
                    1 => IdSpec::AutoSeq(m.last_id.ms + r.below(2)),
                    _ => IdSpec::Explicit(StreamId::new(m.last_id.ms + r.below(3), r.below(5))),
                };
                if r.below(5) == 0 {
                    clock += r.below(3);
                }
                let got = s.append(&flat(&f), spec, clock, limits);
                let want = match spec {
                    IdSpec::Auto => {
                        if clock > m.last_id.ms {
                            StreamId::new(clock, 0)
                        } else {
                            m.last_id.next().unwrap()
                        }
                    }
                    IdSpec::AutoSeq(ms) => {
                        if ms == m.last_id.ms {
                            StreamId::new(ms, m.last_id.seq + 1)
                        } else {
                            StreamId::new(ms, 0)
                        }
                    }
                    IdSpec::Explicit(id) => id,
                };
                if matches!(spec, IdSpec::AutoSeq(ms) if ms == m.last_id.ms && m.last_id.seq == u64::MAX) {
                    assert_eq!(got, Err(AddError::IdNotGreater));
                } else if want > m.last_id {
                    assert_eq!(got, Ok(want));
                    m.entries.push((want, f.clone()));
                    m.last_id = want;
                    m.added += 1;
                    prev_fields = Some(f);
                } else {
                    assert_eq!(got, Err(AddError::IdNotGreater));
                }
            }
            4 | 5 => {
                let a = random_id(&mut r, &m);
                let b = random_id(&mut r, &m);
                let rev = r.below(2) == 0;
                let count = r.below(5) as usize;
                assert_eq!(range_stream(&s, a, b, rev, count), range_model(&m, a, b, rev, count));
            }
            6 => {
                let n = 1 + r.below(3);
                let ids: Vec<_> = (0..n).map(|_| random_id(&mut r, &m)).collect();
                let mut want = 0;
                for id in &ids {
                    if let Some(i) = m.entries.iter().position(|e| e.0 == *id) {
                        m.entries.remove(i);
                        m.max_deleted = m.max_deleted.max(*id);
                        want += 1;
                    }
                }
                assert_eq!(s.delete_ids(&ids), want);
                if compact {
                    let pct = [1u8, 10, 50, 90, 100][r.below(5) as usize];
                    for id in &ids {
                        s.compact_at(*id, pct, limits);
                    }
                }
            }
            7 => {
                let approx = r.below(2) == 0;
                let limit = if approx && r.below(2) == 0 { r.below(20) as i64 } else { 0 };
                let strategy = if r.below(2) == 0 {
                    TrimStrategy::MaxLen(r.below(m.entries.len() as u64 + 2))
                } else {
                    TrimStrategy::MinId(random_id(&mut r, &m))
                };
                let before = m.entries.len();
                let removed = s.trim(&Trim { strategy, approx, limit }) as usize;
                if !approx {
                    let keep: Vec<_> = match strategy {
                        TrimStrategy::MaxLen(n) => {
                            let n = n as usize;
                            m.entries.split_off(before.saturating_sub(n))
                        }
                        TrimStrategy::MinId(id) => m.entries.iter().filter(|e| e.0 >= id).cloned().collect(),
                    };
                    assert_eq!(removed, before - keep.len());
                    m.entries = keep;
                } else {
                    // Whole nodes only: a prefix goes, never past the target.
                    assert!(removed <= before);
                    if limit > 0 {
                        assert!(removed as i64 <= limit);
                    }
                    match strategy {
                        TrimStrategy::MaxLen(n) => assert!(before - removed >= (n as usize).min(before)),
                        TrimStrategy::MinId(id) => assert!(m.entries[..removed].iter().all(|e| e.0 < id)),
                    }
                    m.entries.drain(..removed);
                }
                if compact {
                    s.compact_at(s.first_id, [1u8, 50][r.below(2) as usize], limits);
                }
            }
            8 if compact && r.below(3) == 0 => {
                let nodes = s.rax_keys();
                let done = s.compact_all(r.below(4), limits);
                assert_eq!(s.rax_keys() as u64, nodes as u64 - done.nodes_merged);
            }
            8 => {
                let id = random_id(&mut r, &m);
                assert_eq!(s.contains(id), m.entries.iter().any(|e| e.0 == id));
            }
            _ => {
                let want_last = m.entries.last().map(|e| e.0).unwrap_or(StreamId::MIN);
                assert_eq!(s.last_valid_id(), want_last);
                assert_eq!(s.edge_id(true, true), m.entries.first().map(|e| e.0).unwrap_or(StreamId::MAX));
            }
        }
        check(&s, &m);
        if compression() {
            // The background step, between commands.
            s.pack_queued(3, || true);
            // What the module does when a command is done with the key.
            s.release_caches();
            assert_eq!(crate::listpack::cache_fills(), 0);
        }
    }
    // Full walks both ways at the end.
    assert_eq!(range_stream(&s, StreamId::MIN, StreamId::MAX, false, 0), range_model(&m, StreamId::MIN, StreamId::MAX, false, 0));
    assert_eq!(range_stream(&s, StreamId::MIN, StreamId::MAX, true, 0), range_model(&m, StreamId::MIN, StreamId::MAX, true, 0));
    s.release_caches();
}

#[test]
fn model_random_ops() {
    let base = seed();
    for i in 0..40 {
        run_model(base.wrapping_add(i), 600);
    }
}

#[test]
fn same_fields_node_layout_matches_builtin_sizes() {
    // One node, default limits: XADD 1-1 a 1, 1-2 a 2 gives these exact bytes in
    // Redis 7.0 (master: 1 0 1 "a" 0 | entry: 2 0 0 1 3 | entry: 2 0 1 2 3).
    let mut s = Stream::new();
    s.append(&[b"a", b"1"], IdSpec::Explicit(StreamId::new(1, 1)), 0, NodeLimits::default()).unwrap();
    s.append(&[b"a", b"2"], IdSpec::Explicit(StreamId::new(1, 2)), 0, NodeLimits::default()).unwrap();
    let (_, lp) = s.nodes().next().unwrap();
    let vals: Vec<i64> = lp.iter().map(|v| v.as_int().unwrap_or(-999)).collect();
    assert_eq!(vals, vec![2, 0, 1, -999, 0, 2, 0, 0, 1, 4, 2, 0, 1, 2, 4]);
}

#[test]
fn sequence_overflow_errors() {
    let mut s = Stream::new();
    let l = NodeLimits::default();
    s.append(&[b"a", b"1"], IdSpec::Explicit(StreamId::new(1, u64::MAX)), 0, l).unwrap();
    assert_eq!(s.append(&[b"a", b"1"], IdSpec::AutoSeq(1), 0, l), Err(AddError::IdNotGreater));
    s.append(&[b"a", b"1"], IdSpec::Explicit(StreamId::MAX), 0, l).unwrap();
    assert_eq!(s.append(&[b"a", b"1"], IdSpec::Auto, 5, l), Err(AddError::IdNotGreater));
}

#[test]
fn clock_going_back_never_lowers_ids() {
    let mut s = Stream::new();
    let l = NodeLimits::default();
    assert_eq!(s.append(&[b"a", b"1"], IdSpec::Auto, 100, l), Ok(StreamId::new(100, 0)));
    assert_eq!(s.append(&[b"a", b"1"], IdSpec::Auto, 50, l), Ok(StreamId::new(100, 1)));
    assert_eq!(s.append(&[b"a", b"1"], IdSpec::Auto, 101, l), Ok(StreamId::new(101, 0)));
}

/// RESTORE fuzz findings 17964 / 18286 / 18594 (XS.LEN above what XS.RANGE returns): an exact
/// MINID trim leaves the tail node holding only tombstones, XSETID (7.0: below a deleted ID)
/// lowers the last ID under the node's key, appends go into that node below its key until it is
/// full, and an append of the node's key itself then made a new node under the same key,
/// replacing the old one and its live entries while the length counted them.
#[test]
fn append_of_an_existing_node_key_keeps_that_node() {
    let mut s = Stream::new();
    let l = NodeLimits { entries_max: 3, bytes_max: 0 };
    let add = |s: &mut Stream, ms: u64, v: &[u8]| s.append(&[b"f", v], IdSpec::Explicit(StreamId::new(ms, 0)), 0, l);
    add(&mut s, 200, b"a").unwrap();
    add(&mut s, 201, b"b").unwrap();
    assert_eq!(s.delete_ids(&[StreamId::new(201, 0)]), 1);
    assert_eq!(s.trim(&Trim { strategy: TrimStrategy::MinId(StreamId::new(201, 0)), approx: false, limit: 0 }), 1);
    assert_eq!(s.length, 0);
    // The node 200-0 is left with two tombstones; XSETID 100-0 (7.0 allows it).
    s.last_id = StreamId::new(100, 0);
    add(&mut s, 150, b"c").unwrap(); // into node 200-0, which is full now (1 live + 2 deleted)
    add(&mut s, 200, b"d").unwrap(); // the key of that node
    add(&mut s, 300, b"e").unwrap(); // a new node
    assert_eq!(s.length, 3);
    let ids: Vec<StreamId> = s.range(StreamId::MIN, StreamId::MAX, false).map(|e| e.id()).collect();
    assert_eq!(ids, vec![StreamId::new(150, 0), StreamId::new(200, 0), StreamId::new(300, 0)]);
    let rev: Vec<StreamId> = s.range(StreamId::MIN, StreamId::MAX, true).map(|e| e.id()).collect();
    assert_eq!(rev, vec![StreamId::new(300, 0), StreamId::new(200, 0), StreamId::new(150, 0)]);
    assert_eq!(crate::stream::validate::validate_stream(&s), Ok(()));
}

/// The walk a read runs before it replies while nodes are on disk (`RangeIter::read_ahead`,
/// src/commands/range.rs) reads every node the read itself reads, in the same order (the read's
/// nodes are a prefix of the walk's), whatever the bounds, COUNT, direction and deleted
/// entries; and a tail read of no more than the tail node holds reads no sealed node. Sealed
/// nodes are compressed here: a read of one is recorded (`touch`), as a read of one on disk.
#[test]
fn read_ahead_reads_every_node_the_read_reads() {
    let mut r = Rng::new(seed());
    set_compression(true);
    let l = NodeLimits { entries_max: 1 + r.below(12) as i64, bytes_max: 0 };
    let mut s = Stream::new();
    let mut ids = Vec::new();
    let mut ms = 0;
    for _ in 0..(20 + r.below(300)) {
        ms += 1 + r.below(3);
        let id = StreamId::new(ms, r.below(2));
        ids.push(s.append(&[b"field", b"a value that compresses, a value that compresses"], IdSpec::Explicit(id), 0, l).unwrap());
    }
    for _ in 0..r.below(ids.len() as u64) {
        s.delete(ids[r.below(ids.len() as u64) as usize]);
    }
    assert!(s.pack_sealed() > 0);
    let touched = || TOUCHED.with(|t| t.borrow_mut().drain(..).map(|(_, k)| k).collect::<Vec<_>>());
    let bound = |r: &mut Rng| match r.below(5) {
        0 => StreamId::MIN,
        1 => StreamId::MAX,
        _ => StreamId::new(r.below(ms + 3), r.below(3)),
    };
    for _ in 0..3000 {
        let (a, b) = (bound(&mut r), bound(&mut r));
        let (start, end) = if a > b && r.below(5) != 0 { (b, a) } else { (a, b) };
        let count = [0, 1, 2, 3, 10, 50, 1000][r.below(7) as usize];
        let rev = r.below(2) == 0;
        touched();
        s.range(start, end, rev).read_ahead(count);
        let walked = touched();
        let n = s.range(start, end, rev).take(if count == 0 { usize::MAX } else { count as usize }).count();
        let read = touched();
        assert!(walked.starts_with(&read), "{start}..{end} COUNT {count} rev {rev}: {n} entries; read {read:?}, walked {walked:?}");
    }
    // The tail read of what the tail node holds: no sealed node.
    let tail_live = s.rax.seek(SeekOp::Last, &[]).next().map_or(0, |(_, lp)| node::counts(lp.view()).0) as u64;
    for count in 1..=tail_live {
        touched();
        s.range(StreamId::MIN, StreamId::MAX, true).read_ahead(count);
        assert_eq!(touched(), Vec::<[u8; 16]>::new(), "COUNT {count} of {tail_live} in the tail");
    }
    set_compression(false);
}

/// A stream of one entry holds what it needs: the stream record in jemalloc's 320-byte size
/// class (was 448: the tree's buffers, the compression and tiering state and the retention
/// setting inline), and a first node with room for its entry, where the built-in
/// preallocates 4 KB. Appends then grow the node geometrically, and sealing it trims it.
/// Each node costs the tree a 16-byte value slot.
#[test]
fn a_small_stream_takes_little() {
    assert!(std::mem::size_of::<Stream>() <= 320, "{}", std::mem::size_of::<Stream>());
    assert!(std::mem::size_of::<super::Nodes>() <= 176, "{}", std::mem::size_of::<super::Nodes>());
    // A node's handle, its slot in the tree's value slab: 16 bytes (the built-in's is an
    // 8-byte pointer; a Vec and the packed form's pointer took 32).
    assert_eq!(std::mem::size_of::<Listpack>(), 16);
    let mut s = Stream::new();
    let limits = NodeLimits::default();
    s.append(&[b"temperature", b"21.5"], IdSpec::Explicit(StreamId::new(1, 1)), 0, limits).unwrap();
    let (_, lp) = s.stored_nodes().next().unwrap();
    assert!(lp.bytes_len() <= lp.alloc_bytes() && lp.alloc_bytes() <= 96, "{} of {}", lp.bytes_len(), lp.alloc_bytes());
    // A node filled to its entry cap, then sealed by the next append, holds its bytes only.
    for i in 2..=101 {
        s.append(&[b"temperature", b"21.5"], IdSpec::Explicit(StreamId::new(1, i)), 0, limits).unwrap();
    }
    let nodes: Vec<_> = s.stored_nodes().map(|(_, lp)| (lp.bytes_len(), lp.alloc_bytes())).collect();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0].0, nodes[0].1);
    assert!(nodes[1].1 <= 96, "{nodes:?}");
    assert_eq!(s.range(StreamId::MIN, StreamId::MAX, false).count(), 101);
}

/// A stream's node tree keeps its listpacks as their own value slots: a removed node leaves its
/// slot vacant, which the value walks skip and the next node reuses.
#[test]
fn node_slots_left_vacant_are_skipped_and_reused() {
    let mut t = super::Nodes::default();
    for k in 0..10u8 {
        let mut lp = Listpack::new();
        lp.append_int(i64::from(k));
        t.insert(&[k], lp);
    }
    for k in (0..10u8).step_by(2) {
        assert_eq!(t.remove(&[k]).map(|lp| lp.iter().next().and_then(|v| v.as_int())), Some(Some(i64::from(k))));
    }
    assert!(t.remove(&[0]).is_none());
    let mut left: Vec<i64> = t.values().map(|lp| lp.iter().next().and_then(|v| v.as_int()).unwrap()).collect();
    left.sort_unstable();
    assert_eq!(left, [1, 3, 5, 7, 9]);
    let mut lp = Listpack::new();
    lp.append_int(20);
    assert!(t.insert(&[20], lp).is_none());
    assert_eq!((t.len(), t.values().count()), (6, 6));
    assert_eq!(t.get(&[20]).and_then(|lp| lp.iter().next()).and_then(|v| v.as_int()), Some(20));
}
