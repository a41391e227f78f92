//! Listpack micro-benchmarks: the stream hot paths (appending a small entry's
//! elements to a node, scanning a node forward for XRANGE and backward for
//! XREVRANGE).
//!
//! Run: cargo bench --bench listpack

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use xstream::listpack::{Codec, Listpack, Value};

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

/// A stream node of JSON events as bench/compression.py makes them (about 4 KB, the default
/// node size), packed with `codec`.
fn json_node(codec: Codec) -> Listpack {
    let pages = ["/home", "/product/42", "/cart", "/search?q=shoes", "/checkout", "/blog/how-to-pick-running-shoes"];
    let mut lp = Listpack::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..18u64 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let ev = format!(
            r#"{{"user":"user-{}","action":"view","ts":{},"props":{{"page":"{}","ref":"campaign-{}","device":"mobile","country":"FR","ms":{},"session":"{:016x}"}}}}"#,
            (x >> 20) % 50_000,
            1_700_000_000_000 + i * 37,
            pages[(x >> 8) as usize % pages.len()],
            (x >> 40) % 40,
            (x >> 33) % 5000,
            x
        );
        lp.append_int(0);
        lp.append_int(i as i64);
        lp.append_int(0);
        lp.append_str(ev.as_bytes());
        lp.append_int(4);
    }
    assert!(lp.pack(codec), "the node packs");
    lp
}

/// Decoding a packed node for a read and releasing it (what a compressed read pays per node).
fn unpack_node(c: &mut Criterion) {
    for (name, codec) in [("lz4", Codec::Lz4), ("zstd", Codec::Zstd)] {
        let mut lp = json_node(codec);
        c.bench_function(&format!("listpack/unpack_json_node_{name}"), |b| {
            b.iter(|| {
                black_box(lp.view().bytes_len());
                lp.release_cache(false)
            });
        });
    }
}

criterion_group!(benches, append_100, iterate_forward, iterate_backward, unpack_node);
criterion_main!(benches);
