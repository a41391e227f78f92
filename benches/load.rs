//! Criterion benches of loading: the deep validation every node of an RDB or
//! RESTORE payload passes (listpack walk + stream node structure), per entry, and
//! the shallow check RDB loading does under `sanitize-dump-payload no`.
//! `cargo bench --bench load`.

#![allow(clippy::expect_used, reason = "bench set-up on fixed inputs: a failure is a bug of the bench, and it should stop")]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use xstream::listpack;
use xstream::stream::validate::validate_node;
use xstream::stream::{IdSpec, NodeLimits, Stream, StreamId};

/// As the RDB workload of bench/xbench.py: one field `f`, the value the decimal
/// entry number, ten entries per millisecond, default node limits.
const ENTRIES: u64 = 100_000;

fn filled() -> Stream {
    let mut s = Stream::new();
    for i in 0..ENTRIES {
        // Values as at the middle of the 5M-entry bench stream (24-bit integers).
        let v = (2_500_000 + i).to_string();
        let id = StreamId::new(1_000_000_000_000 + i / 10, i % 10);
        s.append(&[b"f", v.as_bytes()], IdSpec::Explicit(id), 0, NodeLimits::default()).expect("increasing IDs");
    }
    s
}

fn bench(c: &mut Criterion) {
    let s = filled();
    // The nodes as loading holds them before the check (a Listpack over the loaded
    // buffer, header checked): what is timed is the check alone.
    let nodes: Vec<(StreamId, listpack::Listpack)> =
        s.nodes().map(|(k, lp)| (k, listpack::Listpack::from_vec(lp.as_bytes().to_vec(), false).expect("valid"))).collect();
    let mut g = c.benchmark_group("load");
    g.throughput(Throughput::Elements(ENTRIES));
    g.bench_function("deep validation (every listpack element + node structure), per entry", |b| {
        b.iter(|| {
            let mut prev = None;
            let mut live = 0u64;
            for (k, lp) in &nodes {
                // (one pass: validate_node checks every listpack element itself)
                live += validate_node(*k, lp, prev).expect("valid").live;
                prev = Some(*k);
            }
            black_box(live)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
