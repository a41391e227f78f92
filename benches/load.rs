//! Criterion benches of loading: the deep validation every node of an RDB or
//! RESTORE payload passes (listpack walk + stream node structure), per entry, and
//! the shallow check RDB loading does under `sanitize-dump-payload no`.
//! `cargo bench --bench load`.

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
        let v = i.to_string();
        let id = StreamId::new(1_000_000_000_000 + i / 10, i % 10);
        s.append(&[b"f", v.as_bytes()], IdSpec::Explicit(id), 0, NodeLimits::default()).expect("increasing IDs");
    }
    s
}

fn bench(c: &mut Criterion) {
    let s = filled();
    let nodes: Vec<(StreamId, Vec<u8>)> = s.nodes().map(|(k, lp)| (k, lp.as_bytes().to_vec())).collect();
    let mut g = c.benchmark_group("load");
    g.throughput(Throughput::Elements(ENTRIES));
    g.bench_function("deep validation (listpack + node structure), per entry", |b| {
        b.iter(|| {
            let mut prev = None;
            let mut live = 0u64;
            for (k, bytes) in &nodes {
                // (validate_node checks every listpack element too, in the same pass.)
                let lp = listpack::Listpack::from_vec(bytes.clone(), false).expect("valid");
                live += validate_node(*k, &lp, prev).expect("valid").live;
                prev = Some(*k);
            }
            black_box(live)
        })
    });
    g.bench_function("copy only (the clone the deep bench includes), per entry", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for (_, bytes) in &nodes {
                let lp = listpack::Listpack::from_vec(bytes.clone(), false).expect("valid");
                n += lp.bytes_len();
            }
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
