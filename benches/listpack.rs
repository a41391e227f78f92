//! Listpack micro-benchmarks: the stream hot paths (appending a small entry's
//! elements to a node, scanning a node forward for XRANGE and backward for
//! XREVRANGE).
//!
//! Run: cargo bench --bench listpack

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use xstream::listpack::{Listpack, Value};

/// 100 small elements shaped like stream entries: flags, ms-diff, seq-diff,
/// short field values, lp-count.
fn build_100() -> Listpack {
    let mut lp = Listpack::new();
    for i in 0..20i64 {
        lp.append_int(0); // flags
        lp.append_int(i * 3); // ms-diff
        lp.append_int(0); // seq-diff
        lp.append_str(b"value-abc"); // a short string value
        lp.append_int(4); // lp-count
    }
    lp
}

fn append_100(c: &mut Criterion) {
    c.bench_function("listpack/append_100_small", |b| {
        b.iter(|| black_box(build_100()));
    });
}

fn sum(v: Value) -> u64 {
    match v {
        Value::Int(i) => i as u64,
        Value::Str(s) => s.len() as u64,
    }
}

fn iterate_forward(c: &mut Criterion) {
    let lp = build_100();
    c.bench_function("listpack/iter_forward_100", |b| {
        b.iter(|| black_box(&lp).iter().map(sum).sum::<u64>());
    });
}

fn iterate_backward(c: &mut Criterion) {
    let lp = build_100();
    c.bench_function("listpack/iter_backward_100", |b| {
        b.iter(|| black_box(&lp).iter().rev().map(sum).sum::<u64>());
    });
}

criterion_group!(benches, append_100, iterate_forward, iterate_backward);
criterion_main!(benches);
