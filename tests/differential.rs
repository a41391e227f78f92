//! The basic differential on ONE server (generator: `tests/common/gen_basic.rs`): the built-in
//! stream commands on keys `n{i}` against the module's `XS.*` on keys `m{i}`, reply bytes and the
//! dirty counter compared per op. `differential_aa` runs the same generator built-in vs
//! built-in (keys `n{i}` vs `a{i}`): 0 differences prove the sequences are comparable.
//!
//! Env: XSTREAM_DIFF_OPS (RESP2 ops, default 8000), XSTREAM_DIFF_OPS3 (RESP3 ops, default 2500),
//! XSTREAM_DIFF_SEGMENTS (default 4); the generator's own (XSTREAM_SEED, XSTREAM_DIFF_LOG,
//! XSTREAM_DIFF_STATS, XSTREAM_DIFF_STRICT_NAMES, XSTREAM_DIFF_MAX) in its doc.

mod common;
#[path = "common/gen_basic.rs"]
mod gen_basic;

use common::diff::{Opts, Pair, TIER_INFO_FIELDS};
use common::*;

fn opts(what: &'static str) -> Opts {
    Opts {
        what,
        label: "differential",
        replay: "--test differential",
        n2: env_usize("XSTREAM_DIFF_OPS", 8000),
        n3: env_usize("XSTREAM_DIFF_OPS3", 2500),
        segments: env_usize("XSTREAM_DIFF_SEGMENTS", 4),
        layout_free: false,
    }
}

/// Built-in vs built-in (different keys): proves the generator is deterministic-comparable.
#[test]
fn differential_aa() {
    let server = Server::start_plain();
    let o = opts("differential A/A (built-in vs built-in)");
    let n = gen_basic::run(Pair::same(&server, false), &o);
    assert!(n >= 5000);
}

/// Built-in vs module, with the keyspace log on (7.2+: it changes no reply).
#[test]
fn differential_module() {
    let server = Server::start();
    let list = format!("{}", server.conn().cmd(&["MODULE", "LIST"]));
    assert!(list.contains("xstream"), "module xstream not loaded: {list}");
    let mut c = server.conn();
    let logged = keyspace_log_on(&mut c);
    let o = opts("differential built-in vs xstream");
    let n = gen_basic::run(Pair::same(&server, true), &o);
    assert!(n >= 5000);
    if logged {
        let appended = keyspace_log_appended(&mut c);
        assert!(appended >= n / 4, "the keyspace log logged {appended} entries for {n} ops");
    }
}

/// Built-in vs module with compaction on (`xstream.compact-deleted`, a threshold picked by the
/// seed): the logical content must be the built-in's, only the node layout differs (exact trims
/// only, XINFO STREAM compared without radix-tree counts and `deleted-entries`).
#[test]
fn differential_module_compacting() {
    let server = Server::start();
    let mut c = server.conn();
    let seed = std::env::var("XSTREAM_SEED").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let pct = [1, 10, 30, 50, 90][(seed % 5) as usize].to_string();
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", &pct]).to_string(), "+OK");
    let mut o = opts("differential built-in vs xstream, compaction on");
    o.layout_free = true;
    let n = gen_basic::run(Pair::same(&server, true), &o);
    assert!(n >= 5000);
    let info = String::from_utf8_lossy(c.cmd(&["INFO", "xstream"]).as_bytes().unwrap_or_default()).to_string();
    eprintln!("compact-deleted {pct}: {}", info.lines().filter(|l| l.contains("compact") || l.contains("merged")).collect::<Vec<_>>().join(" "));
    assert!(!info.contains("nodes_compacted:0"), "{info}");
}

/// Built-in vs module with sealed nodes compressed (`xstream.compression zstd`) by the
/// background step between the generator's commands, and a decoded-node cache of 16 KB
/// (`xstream.compression-cache`: a few nodes, so that nodes come and go, ghosts included):
/// compression changes no reply, and the cache never serves a node as it was before a write.
/// zstd, not lz4: this generator's streams are short and their nodes small, and lz4 keeps few
/// of them compressed (it must save an eighth): one CI run read a compressed node once. The
/// group runner, whose nodes compress either way, takes lz4 or zstd by the seed.
#[test]
fn differential_module_compressed() {
    let server = Server::start();
    let mut c = server.conn();
    let codec = "zstd";
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compression", codec, "xstream.compression-cache", "16kb"]).to_string(), "+OK");
    let o = opts("differential built-in vs xstream, compression on");
    let n = gen_basic::run(Pair::same(&server, true), &o);
    assert!(n >= 5000);
    let info = String::from_utf8_lossy(c.cmd(&["INFO", "xstream"]).as_bytes().unwrap_or_default()).to_string();
    let field = |name: &str| -> i64 {
        info.lines().find_map(|l| l.strip_prefix(&format!("xstream_{name}:"))).and_then(|v| v.trim().parse().ok()).unwrap_or(-1)
    };
    eprintln!(
        "compression {codec}: cache hits {} misses {} nodes {}",
        field("compression_cache_hits"),
        field("compression_cache_misses"),
        field("compression_cache_nodes")
    );
    // Seeds 1, 3 and 8 others read compressed nodes 480-1,250 times.
    assert!(field("compression_cache_misses") + field("compression_cache_hits") >= 10, "few compressed nodes were read: {info}");
}

/// Built-in vs module with every sealed node tiered to disk (`xstream.tier-dir`, a budget of
/// 0) between the generator's commands, compression off or zstd by the seed, and a 16 KB
/// decoded-node cache: cold nodes read back (and are rewritten by XDEL and trims) with the
/// built-in's replies.
#[test]
fn differential_module_tiered() {
    let server = Server::start();
    let mut c = server.conn();
    let seed = std::env::var("XSTREAM_SEED").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let codec = ["off", "zstd"][(seed % 2) as usize];
    let set = c.cmd(&[
        "CONFIG",
        "SET",
        "xstream.compression",
        codec,
        "xstream.compression-cache",
        "16kb",
        "xstream.tier-dir",
        "tier",
        "xstream.tier-memory",
        "0",
    ]);
    assert_eq!(set.to_string(), "+OK");
    let o = opts("differential built-in vs xstream, sealed nodes on disk");
    let mut pair = Pair::same(&server, true);
    pair.strip_fields = TIER_INFO_FIELDS;
    let n = gen_basic::run(pair, &o);
    assert!(n >= 5000);
    let cold = info_xstream(&mut c, "tier_cold_reads");
    let writes = info_xstream(&mut c, "tier_writes");
    eprintln!("tiering, compression {codec}: {writes} nodes written to disk, {cold} cold reads");
    assert_eq!(info_xstream(&mut c, "tier_read_errors") + info_xstream(&mut c, "tier_write_errors"), 0);
    // The workload's size is the seed's: under the short run's 2 segments, 5-350 cold reads
    // (XSTREAM_SEED=6: 5 nodes written, 5 read). Some must have gone and been read back.
    assert!(writes > 0 && cold > 0, "no cold node was read: {writes} written, {cold} read");
}
