//! The consumer-group differential on ONE server (generator: `tests/common/gen_groups.rs`): the
//! built-in commands on keys `n{i}` against the module's `XS.*` on keys `m{i}`, normalised reply
//! bytes and the dirty counter compared per op. `differential_groups_aa` runs the same generator
//! built-in vs built-in (keys `n{i}` vs `a{i}`): 0 differences prove that the generator and the
//! normalisation make comparable sequences.
//!
//! Env: XSTREAM_GDIFF_OPS / XSTREAM_GDIFF_OPS3 (RESP2 / RESP3 ops, default 14000 / 7000),
//! XSTREAM_GDIFF_AA_OPS / XSTREAM_GDIFF_AA_OPS3 (A/A, default 4000 / 2000),
//! XSTREAM_GDIFF_SEGMENTS (default 6), XSTREAM_DIFF_STRICT_NAMES=1 (compare the names Redis
//! formats into error texts too); the generator's own in its doc.

mod common;
#[path = "common/gen_groups.rs"]
mod gen_groups;

use common::diff::{Opts, Pair, TIER_INFO_FIELDS};
use common::*;

fn opts(what: &'static str, ops: &str, ops3: &str, n2: usize, n3: usize) -> Opts {
    Opts {
        what,
        label: "differential_groups",
        replay: "--test differential_groups",
        n2: env_usize(ops, n2),
        n3: env_usize(ops3, n3),
        segments: env_usize("XSTREAM_GDIFF_SEGMENTS", 6),
        layout_free: false,
    }
}

/// Built-in vs built-in (different keys).
#[test]
fn differential_groups_aa() {
    let server = Server::start_plain();
    let o = opts("differential_groups A/A (built-in vs built-in)", "XSTREAM_GDIFF_AA_OPS", "XSTREAM_GDIFF_AA_OPS3", 4000, 2000);
    let n = gen_groups::run(Pair::same(&server, false), &o);
    assert!(n >= 1000);
}

/// Built-in vs module, with the group histograms kept (`xstream.group-stats yes`: they change
/// no reply), compared at every periodic check with the groups the module's streams hold.
#[test]
fn differential_groups_module() {
    let server = Server::builder().module_args(&["group-stats", "yes"]).start();
    let list = format!("{}", server.conn().cmd(&["MODULE", "LIST"]));
    assert!(list.contains("xstream"), "module xstream not loaded: {list}");
    assert!(server.conn().cmd(&["INFO", "xstream"]).text().contains("groups_by_lag"), "group-stats on");
    // The keyspace log on (7.2+), logging every notification of both sides: it changes no reply
    // either (its entries go to a key of its own; their propagation moves the dirty counter of
    // both sides alike).
    let mut c = server.conn();
    let logged = keyspace_log_on(&mut c);
    let o = opts("differential_groups built-in vs xstream", "XSTREAM_GDIFF_OPS", "XSTREAM_GDIFF_OPS3", 14000, 7000);
    let n = gen_groups::run(Pair::same(&server, true), &o);
    assert!(n >= 20000 || o.n2 + o.n3 < 20000);
    if logged {
        let appended = keyspace_log_appended(&mut c);
        assert!(appended >= n / 4, "the keyspace log logged {appended} entries for {n} ops");
    }
}

/// Built-in vs module with sealed nodes compressed (lz4 or zstd by the seed) and a 16 KB
/// decoded-node cache, as in `differential::differential_module_compressed`: group reads
/// (`>`, history, CLAIM, XAUTOCLAIM with their entries) through compressed nodes change no
/// reply. Shorter than the main run (XSTREAM_GDIFF_Z_OPS / _OPS3, default 6000 / 3000).
#[test]
fn differential_groups_module_compressed() {
    let server = Server::start();
    let mut c = server.conn();
    let seed = std::env::var("XSTREAM_SEED").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let codec = ["zstd", "lz4"][(seed % 2) as usize];
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compression", codec, "xstream.compression-cache", "16kb"]).to_string(), "+OK");
    let o = opts("differential_groups built-in vs xstream, compression on", "XSTREAM_GDIFF_Z_OPS", "XSTREAM_GDIFF_Z_OPS3", 6000, 3000);
    let n = gen_groups::run(Pair::same(&server, true), &o);
    assert!(n >= 5000 || o.n2 + o.n3 < 9000);
    let reads = info_xstream(&mut c, "compression_cache_hits") + info_xstream(&mut c, "compression_cache_misses");
    eprintln!("compression {codec}: {reads} reads of compressed nodes");
    // Seeds 1-12: 111-802 reads of compressed nodes.
    assert!(reads >= 10, "few compressed nodes were read");
}

/// Built-in vs module with every sealed node on disk (`xstream.tier-dir`, a budget of 0),
/// compression lz4 or off by the seed: group reads (`>`, history, CLAIM, XAUTOCLAIM with their
/// entries) through cold nodes change no reply.
#[test]
fn differential_groups_module_tiered() {
    let server = Server::start();
    let mut c = server.conn();
    let seed = std::env::var("XSTREAM_SEED").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let codec = ["lz4", "off"][(seed % 2) as usize];
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
    let o = opts("differential_groups built-in vs xstream, sealed nodes on disk", "XSTREAM_GDIFF_T_OPS", "XSTREAM_GDIFF_T_OPS3", 6000, 3000);
    let mut pair = Pair::same(&server, true);
    pair.strip_fields = TIER_INFO_FIELDS;
    let n = gen_groups::run(pair, &o);
    assert!(n >= 5000 || o.n2 + o.n3 < 9000);
    let cold = info_xstream(&mut c, "tier_cold_reads");
    let writes = info_xstream(&mut c, "tier_writes");
    eprintln!("tiering, compression {codec}: {writes} nodes written to disk, {cold} cold reads");
    assert_eq!(info_xstream(&mut c, "tier_read_errors") + info_xstream(&mut c, "tier_write_errors"), 0);
    // The workload's size is the seed's: under the short run's 2 segments, 4-276 cold reads
    // (XSTREAM_SEED=282423945624: 4). Some must have gone and been read back.
    assert!(writes > 0 && cold > 0, "no cold node was read: {writes} written, {cold} read");
}
