//! Rax benchmarks: `cargo bench --bench rax`.
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use xstream::rax::{Rax, SeekOp};

const N: u64 = 100_000;

/// A 16-byte big-endian stream ID key.
fn id(ms: u64, seq: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&ms.to_be_bytes());
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

fn key(i: u64) -> [u8; 16] {
    id(1_700_000_000_000 + i / 4, i % 4)
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn filled() -> Rax<u64> {
    let mut r = Rax::new();
    for i in 0..N {
        r.insert(&key(i), i);
    }
    r
}

fn bench_insert(c: &mut Criterion) {
    let mut g = c.benchmark_group("rax_insert");
    g.throughput(Throughput::Elements(N));
    g.bench_function("sequential_16B_100k", |b| {
        b.iter_batched(
            Rax::<u64>::new,
            |mut r| {
                for i in 0..N {
                    r.insert(&key(i), i);
                }
                r
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn bench_lookup(c: &mut Criterion) {
    let r = filled();
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let keys: Vec<[u8; 16]> = (0..4096).map(|_| key(xorshift(&mut s) % N)).collect();
    let mut g = c.benchmark_group("rax_lookup");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function("random_get_100k", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for k in &keys {
                sum = sum.wrapping_add(*r.get(black_box(k)).unwrap_or(&0));
            }
            sum
        })
    });
    g.finish();
}

fn bench_seek(c: &mut Criterion) {
    let r = filled();
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    // Seek targets between existing keys (seq 7 never exists), so Ge has to move on.
    let targets: Vec<[u8; 16]> = (0..1024).map(|_| id(1_700_000_000_000 + (xorshift(&mut s) % N) / 4, 7)).collect();
    let mut g = c.benchmark_group("rax_seek");
    g.throughput(Throughput::Elements(targets.len() as u64));
    g.bench_function("ge_then_10_next_100k", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for t in &targets {
                let mut it = r.seek(SeekOp::Ge, black_box(t));
                for _ in 0..10 {
                    match it.next() {
                        Some((_, v)) => sum = sum.wrapping_add(*v),
                        None => break,
                    }
                }
            }
            sum
        })
    });
    g.bench_function("le_seek_mut_100k", |b| {
        let mut r = filled();
        let mut out = Vec::with_capacity(16);
        b.iter(|| {
            let mut sum = 0u64;
            for t in &targets {
                if let Some(v) = r.seek_mut(SeekOp::Le, black_box(t), &mut out) {
                    sum = sum.wrapping_add(*v);
                }
            }
            sum
        })
    });
    g.finish();
}

criterion_group!(benches, bench_insert, bench_lookup, bench_seek);
criterion_main!(benches);
