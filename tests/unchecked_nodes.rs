//! Nodes loaded without the deep check (RDB loading under `sanitize-dump-payload
//! no`, `rdb::Check::Shallow`) cannot crash or hang the module: thousands of
//! corrupted nodes whose listpack header is valid and whose body is not, each
//! loaded with the header check only and run through every path of the core
//! (tests/unchecked/ops.rs: ranges both ways, group reads, claims, acks, deletes,
//! trims, appends, DUMP/RESTORE, export, copy...).
//!
//! Required: every corrupted node either is refused by the shallow load or loads;
//! then 0 panics (not even caught ones: the core is total) and every case ends
//! before a deadline (a hang fails the test with its case number and seed).
//! `XSTREAM_UNCHECKED_CASES` (default 12000), `XSTREAM_SEED` to replay.
//! The server side (commands on such nodes, `sanitize-dump-payload yes` refusing
//! them) is tests/rdb_sanitize.rs.

#[path = "unchecked/ops.rs"]
mod ops;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use xstream::listpack::{Listpack, Value};
use xstream::rdb::{self, Check, VecIo, VecItem};
use xstream::stream::{IdSpec, NodeLimits, Stream, StreamId};

/// A case running longer than this is a hang (the slowest seen take a few ms).
const DEADLINE: Duration = Duration::from_secs(20);

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// A valid stream of varied shape: node sizes, same and other fields, integer,
/// short, 12-bit and 32-bit-length strings, tombstones, groups with PELs.
/// Encoding 6 without its codec tags (all 0 here: plain nodes) is encoding 4, whose item
/// positions these tests patch.
fn strip_codecs(io: &mut VecIo, nodes: usize) {
    for i in (0..nodes).rev() {
        assert_eq!(io.items[2 + 3 * i], VecItem::U64(0));
        io.items.remove(2 + 3 * i);
    }
}

fn base_stream(r: &mut Rng) -> Stream {
    let mut s = Stream::new();
    let limits = NodeLimits { entries_max: 2 + r.below(12) as i64, bytes_max: 0 };
    let n = 5 + r.below(60);
    let long = vec![b'L'; 70 + r.below(200) as usize];
    let huge = vec![b'H'; 4100];
    for i in 0..n {
        let v = match r.below(6) {
            0 => (i * 7919).to_string().into_bytes(),
            1 => format!("v{i}").into_bytes(),
            2 => long.clone(),
            3 if r.below(20) == 0 => huge.clone(),
            4 => (-(i as i64) * 1_000_003).to_string().into_bytes(),
            _ => i.to_string().into_bytes(),
        };
        let fields: Vec<&[u8]> = match r.below(4) {
            0 => vec![b"f", &v, b"g", b"2"],
            1 => vec![b"other", &v],
            _ => vec![b"f", &v],
        };
        let id = StreamId::new(1000 + i / 3, i % 3);
        s.append(&fields, IdSpec::Explicit(id), 0, limits).expect("increasing IDs");
    }
    let dels: Vec<StreamId> = (0..r.below(6))
        .map(|_| {
            let i = r.below(n);
            StreamId::new(1000 + i / 3, i % 3)
        })
        .collect();
    s.delete_ids(&dels);
    if r.below(3) != 0 {
        s.create_group(b"g", StreamId::MIN, 0);
        let g = s.group_mut(b"g").expect("created");
        let a = g.create_consumer(b"alice", 1).expect("new");
        let b = g.create_consumer(b"bob", 1).expect("new");
        for i in 0..r.below(10) {
            let id = StreamId::new(1000 + i, 0);
            g.deliver_new(id, if i % 2 == 0 { a } else { b }, 100 + i as i64);
        }
    }
    s
}

const SPECIAL_BYTES: &[u8] = &[0x00, 0x01, 0x7F, 0x80, 0xBF, 0xC0, 0xDF, 0xE0, 0xEF, 0xF0, 0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xFE, 0xFF];
const SPECIAL_INTS: &[i64] = &[0, 1, -1, 2, 3, 4, 5, 127, 128, 4095, 65535, 1 << 31, i64::MAX, i64::MIN, -4096];

/// Offset just past the first element (kept intact: the shallow check reads it).
fn first_end(b: &[u8]) -> usize {
    let lp = Listpack::from_vec(b.to_vec(), false).expect("valid header");
    let first = lp.first().expect("a node has elements");
    first + lp.entry_size(first).expect("first element checked")
}

fn rebuild(elems: &[Value<'_>]) -> Vec<u8> {
    let mut lp = Listpack::new();
    for v in elems {
        lp.append(*v);
    }
    lp.into_vec()
}

/// One corruption of a valid node, with a label; the result keeps a valid
/// header (total bytes, terminator, first element) unless the label says so.
fn corrupt(node: &[u8], r: &mut Rng) -> (Vec<u8>, &'static str) {
    let mut b = node.to_vec();
    let lo = first_end(&b);
    let hi = b.len() - 1; // the terminator stays
    let body = hi.saturating_sub(lo);
    let pick = |r: &mut Rng| lo + r.below(body as u64) as usize;
    match r.below(7) {
        _ if body == 0 => (b, "none (empty body)"),
        0 => {
            for _ in 0..1 + r.below(4) {
                let at = pick(r);
                b[at] ^= 1 << r.below(8);
            }
            (b, "bit flips")
        }
        1 => {
            for _ in 0..1 + r.below(3) {
                let at = pick(r);
                b[at] = SPECIAL_BYTES[r.below(SPECIAL_BYTES.len() as u64) as usize];
            }
            (b, "special bytes")
        }
        2 => {
            let at = pick(r);
            let n = (1 + r.below(16) as usize).min(hi - at);
            for x in &mut b[at..at + n] {
                *x = r.next() as u8;
            }
            (b, "random window")
        }
        3 => {
            // The body cut short: a valid header over fewer bytes.
            let keep = pick(r);
            let mut c = b[..keep].to_vec();
            c.push(0xFF);
            let total = c.len() as u32;
            c[..4].copy_from_slice(&total.to_le_bytes());
            (c, "truncated body")
        }
        4 => {
            // The header count: never read by the shallow check.
            let n = r.next() as u16;
            b[4..6].copy_from_slice(&n.to_le_bytes());
            let at = pick(r);
            b[at] ^= 1 << r.below(8);
            (b, "header count + bit flip")
        }
        _ => {
            // Structure-aware: the elements of the node, one replaced, dropped or
            // duplicated, rebuilt as a deep-valid listpack (the node structure is
            // what breaks: counts, flags, deltas, lp-counts...).
            let lp = Listpack::from_vec(b.clone(), true).expect("a saved node is valid");
            let mut elems: Vec<Value<'_>> = lp.iter().collect();
            let i = 1 + r.below(elems.len() as u64 - 1) as usize;
            let s = [b"" as &[u8], b"x", b"garbage-string-0123456789"];
            let label = match r.below(4) {
                0 => {
                    elems.remove(i);
                    "element dropped"
                }
                1 => {
                    let e = elems[i];
                    elems.insert(i, e);
                    "element duplicated"
                }
                2 => {
                    elems[i] = Value::Str(s[r.below(3) as usize]);
                    "element -> string"
                }
                _ => {
                    elems[i] = Value::Int(SPECIAL_INTS[r.below(SPECIAL_INTS.len() as u64) as usize]);
                    "element -> special integer"
                }
            };
            (rebuild(&elems), label)
        }
    }
}

/// Puts `node` in place of node `k` of the saved items and makes the length
/// agree with the nodes' counts (as a corruption of the body alone would leave it;
/// the caller sometimes puts any length instead).
fn patched(items: &[VecItem], k: usize, node: Vec<u8>) -> Vec<VecItem> {
    let mut m = items.to_vec();
    m[2 + 2 * k] = VecItem::Bytes(node);
    let VecItem::U64(nodes) = m[0] else { panic!("node count first") };
    let mut length = 0i64;
    for j in 0..nodes as usize {
        if let VecItem::Bytes(b) = &m[2 + 2 * j] {
            if let Ok(lp) = Listpack::from_vec(b.clone(), false) {
                length = length.wrapping_add(lp.first().and_then(|o| lp.try_get_int(o)).unwrap_or(0));
            }
        }
    }
    m[1 + 2 * nodes as usize] = VecItem::U64(length as u64);
    m
}

#[test]
fn unchecked_nodes_never_panic_or_hang() {
    let cases: usize = std::env::var("XSTREAM_UNCHECKED_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12_000);
    let seed: u64 = std::env::var("XSTREAM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1));
    println!("seed: XSTREAM_SEED={seed} cases: {cases}");
    let (tx, rx) = mpsc::channel::<(usize, Option<String>)>();
    let worker = std::thread::spawn(move || {
        let mut r = Rng(seed);
        let mut stats = std::collections::BTreeMap::<String, usize>::new();
        let (mut loaded, mut refused, mut slowest) = (0usize, 0usize, Duration::ZERO);
        let mut slowest_case = String::new();
        for case in 0..cases {
            let mut s = base_stream(&mut r);
            while s.rax_keys() == 0 {
                s = base_stream(&mut r);
            }
            let mut io = VecIo::default();
            rdb::save(&s, &mut io);
            strip_codecs(&mut io, s.rax_keys());
            let k = r.below(s.rax_keys() as u64) as usize;
            let VecItem::Bytes(node) = io.items[2 + 2 * k].clone() else { panic!("node item") };
            let (bad, label) = corrupt(&node, &mut r);
            let mut items = patched(&io.items, k, bad.clone());
            if r.below(8) == 0 {
                // The length is not checked either (as the built-in): any value.
                let at = 1 + 2 * s.rax_keys();
                items[at] = VecItem::U64(r.next() >> r.below(64));
            }
            let probes: Vec<StreamId> = (0..6).map(|_| StreamId::new(999 + r.below(30), r.below(4))).collect();
            let t0 = Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| match rdb::load(4, &mut VecIo { items: items.clone(), pos: 0 }, Check::Shallow) {
                Ok(t) => {
                    ops::exercise(&t, &probes);
                    true
                }
                Err(_) => false,
            }));
            if t0.elapsed() > slowest {
                slowest = t0.elapsed();
                slowest_case = format!("case {case} ({label}, node of {} bytes)", bad.len());
            }
            match outcome {
                Ok(true) => loaded += 1,
                Ok(false) => refused += 1,
                Err(p) => {
                    let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                    let _ = tx.send((case, Some(format!("panic ({label}): {msg:?}; node {k}: {bad:02x?}"))));
                    return;
                }
            }
            *stats.entry(label.to_string()).or_default() += 1;
            let _ = tx.send((case, None));
        }
        println!(
            "{cases} corrupted nodes: {loaded} loaded with the header check and run through {} paths, {refused} refused by it; 0 panics, 0 hangs; slowest {slowest:?}: {slowest_case}; by corruption: {stats:?}",
            ops::PATHS.len()
        );
    });
    let mut done = 0;
    while done < cases {
        match rx.recv_timeout(DEADLINE) {
            Ok((_, Some(err))) => panic!("seed {seed}: case {done}: {err}"),
            Ok((_, None)) => done += 1,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("seed {seed}: case {done} still running after {DEADLINE:?}: a hang"),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    worker.join().expect("worker");
    assert_eq!(done, cases);
}

/// Nodes built to make a walk quadratic if it could be: a master entry with
/// tens of thousands of fields followed by entries that claim all of them
/// (SAMEFIELDS) but hold none, lp-counts pointing far back, field counts near
/// 2^63. Every path must stay linear in the node's size (about 200 KB here: a
/// quadratic walk would take minutes).
#[test]
fn adversarial_large_nodes_stay_linear() {
    let shapes: [(&str, fn(&mut Listpack)); 4] = [
        ("master with 20000 fields, 20000 entries claiming them", |lp| {
            lp.append_int(20000);
            lp.append_int(0);
            lp.append_int(20000);
            for _ in 0..20000 {
                lp.append_str(b"f");
            }
            lp.append_int(0);
            for i in 0..20000 {
                lp.append_int(2);
                lp.append_int(i);
                lp.append_int(0);
                lp.append_int(3);
            }
        }),
        ("lp-counts pointing 60000 elements back", |lp| {
            lp.append_int(30000);
            lp.append_int(0);
            lp.append_int(1);
            lp.append_str(b"f");
            lp.append_int(0);
            for i in 0..30000 {
                lp.append_int(2);
                lp.append_int(i);
                lp.append_int(0);
                lp.append_str(b"v");
                lp.append_int(60000);
            }
        }),
        ("field counts near 2^63 with no fields", |lp| {
            lp.append_int(40000);
            lp.append_int(0);
            lp.append_int(1);
            lp.append_str(b"f");
            lp.append_int(0);
            for i in 0..40000 {
                lp.append_int(0);
                lp.append_int(i);
                lp.append_int(0);
                lp.append_int(i64::MAX);
                lp.append_int(4);
            }
        }),
        ("counters near 2^63, entries of strings", |lp| {
            lp.append_int(i64::MAX);
            lp.append_int(i64::MAX);
            lp.append_int(i64::MAX);
            for _ in 0..60000 {
                lp.append_str(b"xy");
            }
        }),
    ];
    for (what, build) in shapes {
        let mut lp = Listpack::new();
        build(&mut lp);
        let count = lp.first().and_then(|o| lp.try_get_int(o)).unwrap_or(0);
        let mut s = Stream::new();
        s.append(&[b"f", b"1"], IdSpec::Explicit(StreamId::new(1, 0)), 0, NodeLimits::default()).expect("first");
        let mut io = VecIo::default();
        rdb::save(&s, &mut io);
        strip_codecs(&mut io, s.rax_keys());
        let items = patched(&io.items, 0, lp.into_vec());
        let mut items = items;
        items[3] = VecItem::U64(count as u64);
        let t0 = Instant::now();
        let t = rdb::load(4, &mut VecIo { items, pos: 0 }, Check::Shallow).expect("header-valid node loads");
        ops::exercise(&t, &[StreamId::new(1, 0), StreamId::new(500, 0), StreamId::new(20000, 0)]);
        let took = t0.elapsed();
        println!("{what}: every path in {took:?}");
        assert!(took < Duration::from_secs(10), "{what}: {took:?}");
    }
}

/// The fuzz target rdb_load's first finding (fuzz/fuzz_targets/rdb_load.rs, issue 32): a valid
/// stream whose group has NACKed entries, which tests/unchecked/ops.rs then exported to the
/// built-in's DUMP encoding, which refuses an unowned PEL entry. XS.EXPORT refuses such a stream
/// (`Stream::has_nacked`); the paths of the core now do as it does. The input, as the target reads
/// it: the encoding version, then the value as Redis frames it.
#[test]
fn rdb_load_fuzz_finding_nacked_export() {
    let input = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/rdb-load-fuzz-nacked.bin")).expect("fixture");
    let (&v, body) = input.split_first().expect("a version byte");
    let s = rdb::load(i32::from(v % 8), &mut xstream::native::ModuleValue::new(body), Check::Deep).expect("it loads");
    assert!(s.has_nacked(), "the finding's stream has NACKed entries");
    let last = s.last_id;
    ops::exercise(&s, &[StreamId::MIN, StreamId::new(last.ms, last.seq), StreamId::MAX]);
}
