//! Criterion benches of the stream log: append, range read per entry, point
//! lookup, trim. `cargo bench --bench stream`.

#![allow(clippy::expect_used, reason = "bench set-up on fixed inputs: a failure is a bug of the bench, and it should stop")]

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use xstream::stream::{IdSpec, NodeLimits, Stream, StreamId, Trim, TrimStrategy};

const ENTRIES: u64 = 100_000;

fn filled(n: u64) -> Stream {
    let mut s = Stream::new();
    for i in 1..=n {
        s.append(&[b"sensor", b"42", b"value", b"1234"], IdSpec::Explicit(StreamId::new(i, 0)), 0, NodeLimits::default()).expect("increasing IDs");
    }
    s
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("stream");
    g.throughput(Throughput::Elements(1));
    g.bench_function("append (2 fields, same as master)", |b| {
        let mut s = Stream::new();
        let mut id = 0u64;
        b.iter(|| {
            id += 1;
            s.append(&[b"sensor", b"42", b"value", b"1234"], IdSpec::Explicit(StreamId::new(id, 0)), 0, NodeLimits::default())
                .expect("increasing IDs")
        })
    });
    let s = filled(ENTRIES);
    g.bench_function("point lookup (random ID)", |b| {
        let mut x = 12345u64;
        b.iter(|| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let id = StreamId::new(1 + (x >> 33) % ENTRIES, 0);
            black_box(s.range(id, id, false).next().map(|e| e.id()))
        })
    });
    g.throughput(Throughput::Elements(100));
    g.bench_function("range forward, 100 entries with fields", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for e in s.range(StreamId::new(50_000, 0), StreamId::MAX, false).take(100) {
                e.for_each_field(|f, v| n += f.as_int().is_some() as usize + v.as_int().is_some() as usize);
            }
            black_box(n)
        })
    });
    g.bench_function("range backward, 100 entries with fields", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for e in s.range(StreamId::MIN, StreamId::new(50_000, 0), true).take(100) {
                e.for_each_field(|f, v| n += f.as_int().is_some() as usize + v.as_int().is_some() as usize);
            }
            black_box(n)
        })
    });
    g.throughput(Throughput::Elements(ENTRIES / 2));
    g.bench_function("trim MAXLEN = half of 100k", |b| {
        b.iter_batched(
            || s.clone(),
            |mut t| t.trim(&Trim { strategy: TrimStrategy::MaxLen(ENTRIES / 2), approx: false, limit: 0 }),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
