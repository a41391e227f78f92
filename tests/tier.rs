//! Tiering (issue 30, `xstream.tier-dir` / `xstream.tier-memory`): sealed nodes moved to the
//! segment store read back as they were, through every way a stream leaves and comes back
//! (DEBUG RELOAD, DUMP / RESTORE, COPY, BGSAVE in a fork child and a restart, an AOF rewrite
//! with and without an RDB preamble, a replica's full sync), with the built-in's replies.

mod common;

use common::*;
use std::time::Duration;

/// Entries `i-0` with a JSON-like event of ~200 bytes.
fn events(cmd: &str, key: &str, n: u64) -> Vec<Vec<String>> {
    let mut rng = Rng::new(7);
    (1..=n)
        .map(|i| {
            let v = format!(
                "{{\"user\":\"user-{}\",\"action\":\"click\",\"ts\":{},\"page\":\"/p/{}\",\"ref\":\"campaign-{}\",\"ms\":{}}}",
                rng.below(5000),
                1_700_000_000_000u64 + i * 37,
                rng.below(300),
                rng.below(20),
                rng.below(2000)
            );
            vec![cmd.into(), key.into(), format!("{i}-0"), "event".into(), v]
        })
        .collect()
}

/// The nodes of `key` but its tail, from XS.INFO STREAM.
fn sealed_nodes(c: &mut Conn, key: &str) -> i64 {
    match c.cmd(&["XS.INFO", "STREAM", key]).field("radix-tree-keys") {
        Some(Reply::Int(n)) => n - 1,
        other => panic!("radix-tree-keys of {key}: {other:?}"),
    }
}

/// Waits (10 s at most) until `n` nodes are on disk and nothing waits in the tiering queue.
fn wait_tiered(c: &mut Conn, n: i64, what: &str) {
    let t0 = std::time::Instant::now();
    while info_xstream(c, "tier_disk_nodes") != n || info_xstream(c, "tier_resident_queued_nodes") != 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{what}: {} nodes on disk, {} queued; {n} expected",
            info_xstream(c, "tier_disk_nodes"),
            info_xstream(c, "tier_resident_queued_nodes")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn tiered_nodes_read_back_through_every_round_trip() {
    for codec in ["off", "zstd"] {
        let mut p = Server::builder()
            .arg("--appendonly", "yes")
            .arg("--aof-use-rdb-preamble", "yes")
            .arg("--xstream.compression", codec)
            .arg("--xstream.tier-dir", "tier")
            .arg("--xstream.tier-memory", "1gb")
            .start();
        let mut c = p.conn();
        assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.tier-dir"]).as_array()[1].text(), "tier");
        pipeline(&mut c, &events("XS.ADD", "m", 3000));
        pipeline(&mut c, &events("XADD", "b", 3000));
        for (x, k) in [("XS.", "m"), ("X", "b")] {
            c.cmd(&[&format!("{x}GROUP"), "CREATE", k, "g", "0"]);
            c.cmd(&[&format!("{x}READGROUP"), "GROUP", "g", "a", "COUNT", "10", "STREAMS", k, ">"]);
        }
        // Within the budget: nothing on disk. The digest and memory of the stream in RAM.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(info_xstream(&mut c, "tier_disk_nodes"), 0, "{codec}");
        let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "m"]);
        let in_ram = c.cmd(&["MEMORY", "USAGE", "m"]).as_int();
        let sealed = sealed_nodes(&mut c, "m");
        assert!(sealed > 20, "{codec}: {sealed} sealed nodes");
        // A budget of 0: every sealed node goes, the tail stays.
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.tier-memory", "0"]), Reply::Simple("OK".into()));
        wait_tiered(&mut c, sealed, codec);
        let tiered = c.cmd(&["MEMORY", "USAGE", "m"]).as_int();
        assert!(tiered * 3 < in_ram, "{codec}: MEMORY USAGE {tiered} tiered, {in_ram} in RAM");
        let check = |c: &mut Conn, key: &str, what: &str| {
            assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", key]), digest, "{codec} {what}: digest");
            assert_eq!(c.cmd(&["XS.RANGE", key, "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]), "{codec} {what}");
            assert_eq!(
                c.cmd(&["XS.REVRANGE", key, "+", "1500", "COUNT", "100"]),
                c.cmd(&["XREVRANGE", "b", "+", "1500", "COUNT", "100"]),
                "{codec} {what}"
            );
            for start in ["1", "777", "2999"] {
                assert_eq!(c.cmd(&["XS.RANGE", key, start, "+", "COUNT", "3"]), c.cmd(&["XRANGE", "b", start, "+", "COUNT", "3"]), "{codec} {what}");
            }
            assert_eq!(c.cmd(&["XS.PENDING", key, "g"]), c.cmd(&["XPENDING", "b", "g"]), "{codec} {what}");
        };
        let reads = info_xstream(&mut c, "tier_cold_reads");
        check(&mut c, "m", "tiered");
        assert!(info_xstream(&mut c, "tier_cold_reads") > reads, "{codec}: reads of cold nodes");
        assert_eq!(info_xstream(&mut c, "tier_read_errors"), 0);
        let payload = c.cmd(&["DUMP", "m"]).as_bytes().unwrap().to_vec();
        assert_eq!(c.cmd(&[b"RESTORE".as_slice(), b"m2", b"0", &payload]), Reply::Simple("OK".into()));
        check(&mut c, "m2", "RESTORE");
        assert_eq!(c.cmd(&["COPY", "m", "m3"]), Reply::Int(1));
        check(&mut c, "m3", "COPY");
        wait_tiered(&mut c, 3 * sealed, &format!("{codec}: the copies tiered"));
        c.cmd(&["DEL", "m2", "m3"]);
        wait_tiered(&mut c, sealed, &format!("{codec}: the copies' records released"));
        assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
        wait_tiered(&mut c, sealed, &format!("{codec}: after DEBUG RELOAD"));
        check(&mut c, "m", "DEBUG RELOAD");
        // A fork child reads the cold nodes (BGSAVE), and a restart loads its file.
        c.cmd(&["BGSAVE"]);
        wait_persistence_idle(&mut c, Duration::from_secs(20));
        assert_eq!(c.cmd(&["CONFIG", "SET", "appendonly", "no"]), Reply::Simple("OK".into()));
        drop(c);
        p.restart();
        let mut c = p.conn();
        // (Started with the arguments of the first start: a budget of 1gb.) Each node is queued
        // once: at the end of the load, or by the compression step for the nodes that the AOF's
        // commands sealed (zstd: a few ticks after the load).
        let t0 = std::time::Instant::now();
        while info_xstream(&mut c, "compression_queued_keys") != 0 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(info_xstream(&mut c, "tier_resident_queued_nodes"), sealed, "{codec}: queued once after the load");
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.tier-memory", "0"]), Reply::Simple("OK".into()));
        wait_tiered(&mut c, sealed, &format!("{codec}: after a restart from the RDB"));
        check(&mut c, "m", "restart from the RDB");
        // AOF rewrites, with and without an RDB preamble, in a fork child.
        for preamble in ["yes", "no"] {
            c.cmd(&["CONFIG", "SET", "aof-use-rdb-preamble", preamble]);
            assert_eq!(c.cmd(&["CONFIG", "SET", "appendonly", "yes"]), Reply::Simple("OK".into()));
            wait_persistence_idle(&mut c, Duration::from_secs(20));
            c.cmd(&["BGREWRITEAOF"]);
            wait_persistence_idle(&mut c, Duration::from_secs(20));
            assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), Reply::Simple("OK".into()));
            wait_tiered(&mut c, sealed, &format!("{codec}: after DEBUG LOADAOF, preamble {preamble}"));
            check(&mut c, "m", &format!("AOF, preamble {preamble}"));
        }
        // A replica tiers on its own budget, in its own directory; two servers never share one.
        let r = Server::builder().arg("--xstream.tier-dir", "tier").arg("--xstream.tier-memory", "0").start();
        let mut rc = r.conn();
        let theirs = p.dir().join("tier");
        let refused = rc.cmd(&["CONFIG", "SET", "xstream.tier-dir", theirs.to_str().unwrap()]);
        assert!(refused.is_error() && refused.to_string().contains("in use by another server"), "{refused}");
        rc.cmd(&["REPLICAOF", "127.0.0.1", &p.port().to_string()]);
        let t0 = std::time::Instant::now();
        while rc.cmd(&["DBSIZE"]).as_int() != 2 || !rc.cmd(&["INFO", "replication"]).text().contains("master_link_status:up") {
            assert!(t0.elapsed() < Duration::from_secs(20), "replica never synced");
            std::thread::sleep(Duration::from_millis(20));
        }
        wait_tiered(&mut rc, sealed, &format!("{codec}: the replica"));
        check(&mut rc, "m", "replica full sync");
        // Writes to cold nodes: an entry deleted, an exact trim inside a node, more appends.
        for (x, k) in [("XS.", "m"), ("X", "b")] {
            c.cmd(&[&format!("{x}DEL"), k, "100-0", "1001-0"]);
            c.cmd(&[&format!("{x}TRIM"), k, "MINID", "=", "555"]);
        }
        pipeline(&mut c, &events("XS.ADD", "m", 4000).split_off(3000));
        pipeline(&mut c, &events("XADD", "b", 4000).split_off(3000));
        assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]), "{codec}: after writes");
        let sealed = sealed_nodes(&mut c, "m");
        wait_tiered(&mut c, sealed, &format!("{codec}: after writes"));
        assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]), "{codec}: after writes, tiered");
        let t0 = std::time::Instant::now();
        while rc.cmd(&["XS.LEN", "m"]) != c.cmd(&["XLEN", "b"]) {
            assert!(t0.elapsed() < Duration::from_secs(10), "replica never caught up");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(rc.cmd(&["DEBUG", "DIGEST-VALUE", "m"]), c.cmd(&["DEBUG", "DIGEST-VALUE", "m"]), "{codec}: the replica's copy");
        // The directory cannot change while nodes are on disk; FLUSHALL frees them all.
        assert!(c.cmd(&["CONFIG", "SET", "xstream.tier-dir", ""]).is_error());
        c.cmd(&["FLUSHALL"]);
        let t0 = std::time::Instant::now();
        while info_xstream(&mut c, "tier_disk_nodes") != 0 {
            assert!(t0.elapsed() < Duration::from_secs(5), "{codec}: records never released after FLUSHALL");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.tier-dir", ""]), Reply::Simple("OK".into()));
        assert_eq!(info_xstream(&mut c, "tier_segments"), 0);
    }
}

/// A server with every sealed node on disk and no decoded-node cache (each read of a node goes
/// to the store).
fn tiered() -> ServerBuilder {
    Server::builder().arg("--xstream.tier-dir", "tier").arg("--xstream.tier-memory", "0").arg("--xstream.compression-cache", "0")
}

/// `n` events in `m` (the module's) and in `b` (the built-in's), every sealed node of `m` on
/// disk: how many.
fn fill_tiered(c: &mut Conn, n: u64, what: &str) -> i64 {
    pipeline(c, &events("XS.ADD", "m", n));
    pipeline(c, &events("XADD", "b", n));
    let sealed = sealed_nodes(c, "m");
    wait_tiered(c, sealed, what);
    sealed
}

/// [`tiered`] with the test-hooks build (XS.DEBUG-TIER-FAULTS); None, the test reported
/// skipped, without that build.
fn faults_server(test: &str) -> Option<Server> {
    let Some(so) = test_hooks_module_path() else {
        report(&format!("{test}: SKIPPED (set XSTREAM_TEST_HOOKS_MODULE to a `--features test-hooks` build; `make test` does)"));
        return None;
    };
    Some(tiered().module(&so).start())
}

const COLD_ERR: &str = "ERR xstream: a node of this stream could not be read back from disk (xstream.tier-dir; see the server log)";

/// A read of a node on disk that fails (an I/O error injected by XS.DEBUG-TIER-FAULTS of the
/// test-hooks build, or a damaged record) turns the whole reply into an error, with nothing of
/// the reply before it; a write that needed the node changes nothing; the next read after a
/// transient error is the built-in's again. A write to disk that fails keeps the node in RAM. A
/// fork child that cannot read a node fails its save. The server never stops.
#[test]
fn cold_read_faults_are_error_replies() {
    let Some(s) = faults_server("cold_read_faults_are_error_replies") else { return };
    let mut c = s.conn();
    pipeline(&mut c, &events("XS.ADD", "m", 3000));
    pipeline(&mut c, &events("XADD", "b", 3000));
    for (x, k) in [("XS.", "m"), ("X", "b")] {
        c.cmd(&[&format!("{x}GROUP"), "CREATE", k, "g", "0"]);
        c.cmd(&[&format!("{x}GROUP"), "CREATE", k, "g2", "0"]);
        c.cmd(&[&format!("{x}READGROUP"), "GROUP", "g", "a", "COUNT", "300", "STREAMS", k, ">"]);
    }
    let sealed = sealed_nodes(&mut c, "m");
    wait_tiered(&mut c, sealed, "faults");
    let err = Reply::Error(COLD_ERR.into());
    // Each read: an error while a read of its nodes fails (the first node it needs, or one half
    // way through), then the built-in's reply.
    let reads: [(&[&str], &[&str]); 6] = [
        (&["XS.RANGE", "m", "-", "+", "COUNT", "300"], &["XRANGE", "b", "-", "+", "COUNT", "300"]),
        (&["XS.REVRANGE", "m", "1500", "-", "COUNT", "50"], &["XREVRANGE", "b", "1500", "-", "COUNT", "50"]),
        (&["XS.RANGE", "m", "100", "2000"], &["XRANGE", "b", "100", "2000"]),
        (&["XS.READ", "COUNT", "40", "STREAMS", "m", "10"], &["XREAD", "COUNT", "40", "STREAMS", "b", "10"]),
        (&["XS.INFO", "STREAM", "m"], &["XINFO", "STREAM", "b"]),
        (&["XS.CLAIM", "m", "g", "a", "0", "5-0", "250-0", "JUSTID"], &["XCLAIM", "b", "g", "a", "0", "5-0", "250-0", "JUSTID"]),
    ];
    for (m, b) in reads {
        // The first node read fails, then one half way through the reply (after 3 good ones).
        for after in ["0", "3"] {
            assert_eq!(c.cmd(&["XS.DEBUG-TIER-FAULTS", "0", "1", after]), Reply::Simple("OK".into()));
            let r = c.cmd(m);
            // (A command that reads fewer than 4 cold nodes does not reach the fault.)
            if after == "0" || r.is_error() {
                assert_eq!(r, err, "{m:?}, a fault after {after} reads");
            }
        }
        c.cmd(&["XS.DEBUG-TIER-FAULTS", "0", "0"]);
        let (rm, rb) = (c.cmd(m), c.cmd(b));
        if m[0] == "XS.INFO" {
            assert_eq!(rm.field("length"), rb.field("length"));
            assert_eq!(rm.field("first-entry"), rb.field("first-entry"), "{m:?}");
        } else if m[0] == "XS.READ" {
            // (The key's name differs.)
            assert_eq!(rm.as_array()[0].as_array()[1], rb.as_array()[0].as_array()[1], "{m:?}");
        } else {
            assert_eq!(rm, rb, "{m:?} after the fault");
        }
    }
    // Writes that need a cold node: nothing changes, an error; then as the built-in.
    for (m, b) in [
        (&["XS.DEL", "m", "500-0", "501-0"][..], &["XDEL", "b", "500-0", "501-0"][..]),
        (&["XS.TRIM", "m", "MINID", "=", "700"][..], &["XTRIM", "b", "MINID", "=", "700"][..]),
        (
            &["XS.READGROUP", "GROUP", "g", "a", "COUNT", "20", "STREAMS", "m", "0"][..],
            &["XREADGROUP", "GROUP", "g", "a", "COUNT", "20", "STREAMS", "b", "0"][..],
        ),
        (
            &["XS.READGROUP", "GROUP", "g2", "a", "COUNT", "500", "STREAMS", "m", ">"][..],
            &["XREADGROUP", "GROUP", "g2", "a", "COUNT", "500", "STREAMS", "b", ">"][..],
        ),
    ] {
        let len = c.cmd(&["XS.LEN", "m"]);
        // The PELs, each group's last ID and entries read, and its consumers (from 7.2 on a
        // group read creates its consumer before it reads: a read that fails reads first).
        let groups = |c: &mut Conn| {
            let info = c.cmd(&["XS.INFO", "GROUPS", "m"]);
            let last: Vec<_> = info.as_array().iter().map(|g| (g.field("last-delivered-id").cloned(), g.field("entries-read").cloned())).collect();
            let consumers: Vec<_> = ["g", "g2"]
                .iter()
                .map(|g| {
                    c.cmd(&["XS.INFO", "CONSUMERS", "m", g])
                        .as_array()
                        .iter()
                        .map(|x| (x.field("name").cloned(), x.field("pending").cloned()))
                        .collect::<Vec<_>>()
                })
                .collect();
            (c.cmd(&["XS.PENDING", "m", "g"]), c.cmd(&["XS.PENDING", "m", "g2"]), last, consumers)
        };
        let pending = groups(&mut c);
        c.cmd(&["XS.DEBUG-TIER-FAULTS", "0", "1"]);
        assert_eq!(c.cmd(m), err, "{m:?}");
        assert_eq!(c.cmd(&["XS.LEN", "m"]), len, "{m:?} changed nothing");
        assert_eq!(groups(&mut c), pending, "{m:?} changed nothing");
        assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]), "{m:?} changed nothing");
        let (rm, rb) = (c.cmd(m), c.cmd(b));
        if m[0] == "XS.READGROUP" {
            assert_eq!(rm.as_array()[0].as_array()[1], rb.as_array()[0].as_array()[1], "{m:?}");
        } else {
            assert_eq!(rm, rb, "{m:?}");
        }
    }
    // A group read of two streams, the first in RAM, the second failing on a cold node: an error,
    // and nothing changed on either (no consumer created, nothing delivered on the first).
    c.cmd(&["XS.ADD", "r", "1-1", "f", "v"]);
    c.cmd(&["XS.GROUP", "CREATE", "r", "g2", "0"]);
    let pending = (c.cmd(&["XS.PENDING", "m", "g2"]), c.cmd(&["XS.INFO", "CONSUMERS", "m", "g2"]).as_array().len());
    c.cmd(&["XS.DEBUG-TIER-FAULTS", "0", "1"]);
    assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g2", "z", "COUNT", "600", "STREAMS", "r", "m", ">", ">"]), err);
    assert_eq!(c.cmd(&["XS.INFO", "CONSUMERS", "r", "g2"]), Reply::Array(vec![]), "no consumer on the stream read first");
    assert_eq!(c.cmd(&["XS.PENDING", "r", "g2"]).as_array()[0], Reply::Int(0), "nothing delivered on the stream read first");
    assert_eq!((c.cmd(&["XS.PENDING", "m", "g2"]), c.cmd(&["XS.INFO", "CONSUMERS", "m", "g2"]).as_array().len()), pending);
    let served = c.cmd(&["XS.READGROUP", "GROUP", "g2", "z", "COUNT", "600", "STREAMS", "r", "m", ">", ">"]);
    assert_eq!(served.as_array().len(), 2, "then both are served");
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    let faults = info_xstream(&mut c, "tier_read_errors");
    assert!(faults >= 9, "{faults} read errors counted");
    assert!(s.log().contains("injected: input/output error"), "the faults are logged");
    // Writes to disk that fail: the node stays in RAM, counted, and the step pauses (1 s) before
    // it tries that node again; the stream reads the same meanwhile, and once the writes
    // succeed again every node is on disk.
    c.cmd(&["XS.DEBUG-TIER-FAULTS", "3", "0"]);
    let on_disk = info_xstream(&mut c, "tier_disk_nodes");
    pipeline(&mut c, &events("XS.ADD", "m", 4000).split_off(3000));
    pipeline(&mut c, &events("XADD", "b", 4000).split_off(3000));
    let sealed = sealed_nodes(&mut c, "m");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(info_xstream(&mut c, "tier_write_errors"), 1, "one failed write, then a pause");
    assert_eq!(info_xstream(&mut c, "tier_disk_nodes"), on_disk);
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    wait_tiered(&mut c, sealed, "three failed writes, then the same nodes again");
    assert_eq!(info_xstream(&mut c, "tier_write_errors"), 3);
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    // A fork child that cannot read a node fails its save; the next save succeeds.
    c.cmd(&["XS.DEBUG-TIER-FAULTS", "0", "1"]);
    c.cmd(&["BGSAVE"]);
    wait_persistence_idle(&mut c, Duration::from_secs(20));
    assert!(c.cmd(&["INFO", "persistence"]).text().contains("rdb_last_bgsave_status:err"));
    c.cmd(&["XS.DEBUG-TIER-FAULTS", "0", "0"]);
    c.cmd(&["BGSAVE"]);
    wait_persistence_idle(&mut c, Duration::from_secs(20));
    assert!(c.cmd(&["INFO", "persistence"]).text().contains("rdb_last_bgsave_status:ok"));
    // A damaged record: every read of its node is an error (and logged), the others are not.
    let seg = s.dir().join("tier").join("seg-00000001.xst");
    let mut f = std::fs::read(&seg).unwrap();
    let mid = f.len() / 2;
    f[mid] ^= 0x5a;
    std::fs::write(&seg, &f).unwrap();
    let whole = c.cmd(&["XS.RANGE", "m", "-", "+"]);
    assert_eq!(whole, err);
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), err, "a damaged record stays damaged");
    assert!(info_xstream(&mut c, "tier_checksum_errors") >= 2);
    assert!(s.log().contains("checksum mismatch"));
    assert_eq!(c.cmd(&["XS.RANGE", "m", "3990", "+"]), c.cmd(&["XRANGE", "b", "3990", "+"]), "the tail reads");
    assert!(c.ping());
}

/// Segment records damaged at random (a byte flipped, a run zeroed, the file cut short),
/// `XSTREAM_TIER_FUZZ_CASES` cases (default 10,000), each followed by a read over the damaged
/// part and the file put back: every reply is the built-in's or the cold-read error, never
/// other bytes; the server never stops, and with the file whole again every read is the
/// built-in's.
#[test]
fn damaged_records_are_errors_never_wrong_replies() {
    let cases = env_usize("XSTREAM_TIER_FUZZ_CASES", 10_000);
    let s = tiered().start();
    let mut c = s.conn();
    fill_tiered(&mut c, 3000, "fuzz");
    let seg = s.dir().join("tier").join("seg-00000001.xst");
    let whole = std::fs::read(&seg).unwrap();
    let mut rng = Rng::from_env("damaged_records");
    let err = Reply::Error(COLD_ERR.into());
    let (mut errors, mut same) = (0usize, 0usize);
    for case in 0..cases {
        let mut f = whole.clone();
        let at = rng.below(f.len() as u64) as usize;
        match rng.below(3) {
            0 => f[at] ^= 1 << rng.below(8),
            1 => {
                let end = (at + 1 + rng.below(64) as usize).min(f.len());
                f[at..end].iter_mut().for_each(|b| *b = 0);
            }
            _ => f.truncate(at),
        }
        std::fs::write(&seg, &f).unwrap();
        // The entries around the damage (records follow the stream's order).
        let first = (3000 * at / whole.len()).saturating_sub(150).max(1);
        let count = (1 + rng.below(300)).to_string();
        let (start, cmd) = (first.to_string(), if rng.below(2) == 0 { "RANGE" } else { "REVRANGE" });
        // The far bound open (`+`, `-`) or an ID: a read that ends at a node's last entry reads
        // the next node too (it stops at a live entry past the bound).
        let far = if rng.below(2) == 0 { None } else { Some(rng.below(300) as usize) };
        let (m, b) = if cmd == "RANGE" {
            let end = far.map_or("+".to_string(), |d| (first + d).to_string());
            (c.cmd(&["XS.RANGE", "m", &start, &end, "COUNT", &count]), c.cmd(&["XRANGE", "b", &start, &end, "COUNT", &count]))
        } else {
            let end = (first + 300).to_string();
            let low = far.map_or("-".to_string(), |d| (first + d).to_string());
            (c.cmd(&["XS.REVRANGE", "m", &end, &low, "COUNT", &count]), c.cmd(&["XREVRANGE", "b", &end, &low, "COUNT", &count]))
        };
        if m == err {
            errors += 1;
        } else {
            assert_eq!(m, b, "case {case}: damage at {at} of {}: XS.{cmd} {start} {far:?} COUNT {count}", whole.len());
            same += 1;
        }
    }
    std::fs::write(&seg, &whole).unwrap();
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]), "the file whole again");
    report(&format!("damaged_records: {cases} cases: {errors} error replies, {same} replies the built-in's, 0 other"));
    assert!(errors > cases / 4 && same > cases / 20, "{errors} errors, {same} same: the damage must be met and missed");
    assert!(c.ping());
}

/// A load (DEBUG RELOAD here; a restart, a full sync) with tiering on keeps the newest
/// `tier-memory` bytes of sealed nodes in RAM and sends the older ones to disk as newer ones are
/// read, so it never holds a whole stream in RAM: seen in the INFO sent in the same pipeline as DEBUG RELOAD (before any timer
/// of the tiering step can run).
#[test]
fn loads_tier_as_they_read() {
    let s = Server::builder().arg("--xstream.tier-dir", "tier").arg("--xstream.tier-memory", "1gb").start();
    let mut c = s.conn();
    pipeline(&mut c, &events("XS.ADD", "m", 3000));
    pipeline(&mut c, &events("XADD", "b", 3000));
    let sealed = sealed_nodes(&mut c, "m");
    // (Nodes written to disk by the load, not nodes on disk: on hosts that free the old dataset
    // on the lazy-free thread (Valkey 9.1) its records are released a moment later.)
    let after_reload = |c: &mut Conn| -> (i64, i64) {
        let writes = info_xstream(c, "tier_writes");
        let r = pipeline(c, &[vec!["DEBUG".into(), "RELOAD".into()], vec!["INFO".into(), "xstream".into()]]);
        assert_eq!(r[0], Reply::Simple("OK".into()));
        let info = r[1].text();
        let field = |f: &str| info.lines().find_map(|l| l.strip_prefix(&format!("xstream_{f}:"))).and_then(|v| v.trim().parse::<i64>().ok()).unwrap();
        (field("tier_writes") - writes, field("tier_resident_queued_nodes"))
    };
    // Within the budget: all in RAM, queued at the end of the load.
    assert_eq!(after_reload(&mut c), (0, sealed));
    // A budget of 0: every sealed node went to disk while loading.
    c.cmd(&["CONFIG", "SET", "xstream.tier-memory", "0"]);
    wait_tiered(&mut c, sealed, "budget 0");
    assert_eq!(after_reload(&mut c), (sealed, 0));
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    // A budget of about a third of the stream: the first third loaded stays, the rest went.
    let bytes = info_xstream(&mut c, "tier_disk_bytes");
    c.cmd(&["CONFIG", "SET", "xstream.tier-memory", &(bytes / 3).to_string()]);
    let (disk, queued) = after_reload(&mut c);
    assert!(disk > sealed / 2 && disk < sealed && queued == sealed - disk, "{disk} on disk, {queued} queued of {sealed}");
    // Those kept are the newest, as the background step keeps them: a read next to the tail
    // reads nothing from disk, one of the oldest entries does.
    let reads = info_xstream(&mut c, "tier_cold_reads");
    assert_eq!(c.cmd(&["XS.REVRANGE", "m", "+", "-", "COUNT", "500"]), c.cmd(&["XREVRANGE", "b", "+", "-", "COUNT", "500"]));
    assert_eq!(info_xstream(&mut c, "tier_cold_reads"), reads, "the newest sealed nodes stayed in RAM");
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+", "COUNT", "10"]), c.cmd(&["XRANGE", "b", "-", "+", "COUNT", "10"]));
    assert!(info_xstream(&mut c, "tier_cold_reads") > reads, "the oldest went to disk");
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
}

/// MIGRATE (what a cluster slot move sends, key by key) of a stream whose sealed nodes are on
/// disk, to a server that tiers in its own directory: the target holds every entry (the
/// source's digest), tiers it on its own budget, and reads it as the built-in's.
#[test]
fn migrate_carries_a_tiered_stream() {
    let a = Server::builder().arg("--xstream.tier-dir", "tier").arg("--xstream.tier-memory", "0").start();
    let b = Server::builder().arg("--xstream.tier-dir", "tier").arg("--xstream.tier-memory", "0").start();
    let (mut ca, mut cb) = (a.conn(), b.conn());
    pipeline(&mut ca, &events("XS.ADD", "m", 3000));
    pipeline(&mut ca, &events("XADD", "n", 3000));
    ca.cmd(&["XS.GROUP", "CREATE", "m", "g", "0"]);
    ca.cmd(&["XS.READGROUP", "GROUP", "g", "c", "COUNT", "700", "STREAMS", "m", ">"]);
    let sealed = sealed_nodes(&mut ca, "m");
    wait_tiered(&mut ca, sealed, "source");
    let digest = ca.cmd(&["DEBUG", "DIGEST-VALUE", "m"]);
    let port = b.port().to_string();
    assert_eq!(ca.cmd(&["MIGRATE", "127.0.0.1", &port, "m", "0", "10000"]), Reply::Simple("OK".into()));
    assert_eq!(ca.cmd(&["MIGRATE", "127.0.0.1", &port, "n", "0", "10000"]), Reply::Simple("OK".into()));
    assert_eq!(ca.cmd(&["EXISTS", "m"]), Reply::Int(0));
    wait_tiered(&mut ca, 0, "the source's records released");
    assert_eq!(cb.cmd(&["DEBUG", "DIGEST-VALUE", "m"]), digest);
    wait_tiered(&mut cb, sealed, "target");
    assert_eq!(cb.cmd(&["XS.RANGE", "m", "-", "+"]), cb.cmd(&["XRANGE", "n", "-", "+"]));
    assert_eq!(cb.cmd(&["DEBUG", "DIGEST-VALUE", "m"]), digest);
}

/// A tmpfs mounted for one test, unmounted when dropped (after the server that uses it: declare
/// it first). None where mounting is refused (not root, no CAP_SYS_ADMIN).
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("xstream-tmpfs-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "xstream-test"])
            .arg(&p)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::fs::remove_dir(&p);
            return None;
        }
        Some(Tmpfs(p))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A full disk (an 8 MB tmpfs, 6 MB of it taken by another file): the nodes that do not fit
/// stay in RAM, the write errors are counted and logged, every reply is the built-in's; once
/// the other file is deleted, tiering resumes by itself and every sealed node goes to disk.
#[test]
fn a_full_disk_keeps_nodes_in_ram_until_space_comes_back() {
    let Some(fs) = Tmpfs::mount("8m") else {
        report("a_full_disk_keeps_nodes_in_ram_until_space_comes_back: SKIPPED (mount -t tmpfs refused: needs root or CAP_SYS_ADMIN)");
        return;
    };
    let filler = fs.0.join("filler");
    std::fs::write(&filler, vec![0x55u8; 6 << 20]).unwrap();
    let s = Server::builder().arg("--xstream.tier-dir", fs.0.to_str().unwrap()).arg("--xstream.tier-memory", "0").start();
    let mut c = s.conn();
    // ~12 MB of events: over 2 MB even packed with LZ4.
    pipeline(&mut c, &events("XS.ADD", "m", 60_000));
    pipeline(&mut c, &events("XADD", "b", 60_000));
    let t0 = std::time::Instant::now();
    while info_xstream(&mut c, "tier_write_errors") == 0 {
        assert!(t0.elapsed() < Duration::from_secs(20), "the disk never filled: {} nodes on disk", info_xstream(&mut c, "tier_disk_nodes"));
        std::thread::sleep(Duration::from_millis(20));
    }
    let sealed = sealed_nodes(&mut c, "m");
    let on_disk = info_xstream(&mut c, "tier_disk_nodes");
    assert!(on_disk > 0 && on_disk < sealed, "{on_disk} of {sealed} sealed nodes on disk");
    assert!(s.log_contains("No space left on device"), "the write error is logged");
    // XS.INFO STREAM shows the stream's share on disk (the only stream there).
    let info = c.cmd(&["XS.INFO", "STREAM", "m"]);
    assert_eq!(info.field("tiered-nodes"), Some(&Reply::Int(on_disk)));
    assert_eq!(info.field("tiered-bytes"), Some(&Reply::Int(info_xstream(&mut c, "tier_disk_bytes"))));
    assert_eq!(c.cmd(&["XS.INFO", "STREAM", "m", "FULL", "COUNT", "1"]).field("tiered-nodes"), Some(&Reply::Int(on_disk)));
    let whole = c.cmd(&["XRANGE", "b", "-", "+"]);
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), whole);
    assert_eq!(c.cmd(&["XS.REVRANGE", "m", "+", "-", "COUNT", "7"]), c.cmd(&["XREVRANGE", "b", "+", "-", "COUNT", "7"]));
    assert_eq!(c.cmd(&["XS.LEN", "m"]), Reply::Int(60_000));
    // The step retries once a second, not once a tick.
    std::thread::sleep(Duration::from_millis(1500));
    let errors = info_xstream(&mut c, "tier_write_errors");
    assert!(errors <= 4, "{errors} write errors in ~2 s");
    report(&format!("full disk: {on_disk} of {sealed} sealed nodes on disk, {errors} write errors counted"));
    // Space comes back: everything goes to disk, nothing changed.
    std::fs::remove_file(&filler).unwrap();
    wait_tiered(&mut c, sealed, "after the disk had room again");
    assert_eq!(c.cmd(&["XS.INFO", "STREAM", "m"]).field("tiered-nodes"), Some(&Reply::Int(sealed)));
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), whole);
    c.cmd(&["DEBUG", "RELOAD"]);
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), whole);
    drop(c);
    drop(s);
    drop(fs);
}

/// Group reads and XS.NACK that meet, half way, a node they cannot read back: the error, and
/// nothing changed. Their passes (CLAIM's, MAXDELIVERIES' dead letters, FORCE) change entries
/// one by one and propagate at their end, so their reads come first: a change made before the
/// failure would stay on the primary and never reach the replica.
#[test]
fn group_passes_read_their_nodes_first() {
    let Some(p) = faults_server("group_passes_read_their_nodes_first") else { return };
    let r = Server::replica_of(&p);
    let (mut c, mut rc) = (p.conn(), r.conn());
    pipeline(&mut c, &events("XS.ADD", "m", 3000));
    // Every entry pending in each group: a `>` read has nothing new, only the passes read.
    for g in ["gc", "gp", "gn"] {
        c.cmd(&["XS.GROUP", "CREATE", "m", g, "0"]);
        c.cmd(&["XS.READGROUP", "GROUP", g, "a", "COUNT", "3000", "STREAMS", "m", ">"]);
    }
    assert_eq!(c.cmd(&["XS.GROUP", "SETPOLICY", "m", "gp", "MAXDELIVERIES", "1", "DEADLETTER", "dead"]), Reply::Simple("OK".into()));
    let sealed = sealed_nodes(&mut c, "m");
    wait_tiered(&mut c, sealed, "group passes");
    let err = Reply::Error(COLD_ERR.into());
    // The PELs, the dead letters, each group's last ID and entries read. (Not the consumers:
    // from 7.2 on a group read creates its consumer before it reads, as the built-in does,
    // propagated as made.)
    let state = |c: &mut Conn| {
        let pels: Vec<Reply> = ["gc", "gp", "gn"].iter().map(|g| c.cmd(&["XS.PENDING", "m", g])).collect();
        let info = c.cmd(&["XS.INFO", "GROUPS", "m"]);
        let last: Vec<_> = info.as_array().iter().map(|g| (g.field("last-delivered-id").cloned(), g.field("entries-read").cloned())).collect();
        (pels, c.cmd(&["EXISTS", "dead"]), last)
    };
    // (The command, the number of entries it replies or its integer reply once reads succeed.)
    let cases: [(&[&str], i64); 3] = [
        // CLAIM's pass: claims 600 entries of some 18 nodes.
        (&["XS.READGROUP", "GROUP", "gc", "b", "COUNT", "600", "CLAIM", "0", "STREAMS", "m", ">"], 600),
        // The purge before it: 1,000 entries over MAXDELIVERIES to the dead letters (its cap;
        // the read then serves nothing of this stream: nil).
        (&["XS.READGROUP", "GROUP", "gp", "b", "COUNT", "10", "CLAIM", "0", "STREAMS", "m", ">"], 0),
        // FORCE looks up each ID (those are pending: a NACK takes them from their owner).
        (&["XS.NACK", "m", "gn", "FAIL", "IDS", "8", "5-0", "400-0", "800-0", "1200-0", "1600-0", "2000-0", "2400-0", "2800-0", "FORCE"], 8),
    ];
    for (m, _) in &cases {
        let before = state(&mut c);
        // The seventh node read fails: past the first candidates' nodes (a pass that read as
        // it went would have changed entries of six nodes by then).
        c.cmd(&["XS.DEBUG-TIER-FAULTS", "0", "1", "6"]);
        assert_eq!(c.cmd(m), err, "{m:?}");
        assert_eq!(state(&mut c), before, "{m:?} changed nothing");
        c.cmd(&["XS.DEBUG-TIER-FAULTS", "0", "0"]);
    }
    for (m, n) in &cases {
        let got = match c.cmd(m) {
            Reply::Int(i) => i,
            Reply::Nil => 0,
            r @ Reply::Array(_) => r.as_array()[0].as_array()[1].as_array().len() as i64,
            r => panic!("{m:?}: {r}"),
        };
        assert_eq!(got, *n, "{m:?}");
    }
    assert_eq!(c.cmd(&["XS.LEN", "dead"]), Reply::Int(1000), "the purge after the fault");
    wait_synced(&mut c, &mut rc);
    for k in ["m", "dead"] {
        assert_eq!(rc.cmd(&["DEBUG", "DIGEST-VALUE", k]), c.cmd(&["DEBUG", "DIGEST-VALUE", k]), "{k}: the replica's copy");
    }
    assert_eq!(state(&mut rc).0, state(&mut c).0);
}

/// SWAPDB while nodes wait in the tiering queue: they follow their stream to its new database
/// and go to disk there. (A failed write pauses the step for a second with every node queued:
/// the SWAPDB comes within that pause.)
#[test]
fn swapdb_carries_the_tiering_queue() {
    let Some(s) = faults_server("swapdb_carries_the_tiering_queue") else { return };
    let mut c = s.conn();
    c.cmd(&["XS.DEBUG-TIER-FAULTS", "1", "0"]);
    pipeline(&mut c, &events("XS.ADD", "m", 3000));
    pipeline(&mut c, &events("XADD", "b", 3000));
    let sealed = sealed_nodes(&mut c, "m");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(info_xstream(&mut c, "tier_write_errors"), 1);
    assert_eq!(info_xstream(&mut c, "tier_disk_nodes"), 0);
    assert_eq!(info_xstream(&mut c, "tier_resident_queued_nodes"), sealed, "every sealed node waits in the queue");
    assert_eq!(c.cmd(&["SWAPDB", "0", "1"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["XS.LEN", "m"]), Reply::Int(0), "m is in database 1 now");
    c.cmd(&["SELECT", "1"]);
    wait_tiered(&mut c, sealed, "after SWAPDB");
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
}

/// Trims of a stream on disk remove whole nodes by what is kept of them in RAM (their counts
/// and last ID): a node is read only where a trim cuts or stops, whatever it removes.
#[test]
fn trims_remove_cold_nodes_unread() {
    let s = tiered().start();
    let mut c = s.conn();
    fill_tiered(&mut c, 20_000, "trims");
    let trims: [(&[&str], &[&str]); 4] = [
        (&["XS.TRIM", "m", "MAXLEN", "~", "15000"], &["XTRIM", "b", "MAXLEN", "~", "15000"]),
        (&["XS.TRIM", "m", "MINID", "8000"], &["XTRIM", "b", "MINID", "8000"]),
        (&["XS.TRIM", "m", "MAXLEN", "=", "9999"], &["XTRIM", "b", "MAXLEN", "=", "9999"]),
        (&["XS.ADD", "m", "MAXLEN", "~", "2000", "20001-0", "f", "v"], &["XADD", "b", "MAXLEN", "~", "2000", "20001-0", "f", "v"]),
    ];
    let mut removed = 0;
    for (m, b) in trims {
        let (keys, reads) = (sealed_nodes(&mut c, "m"), info_xstream(&mut c, "tier_cold_reads"));
        assert_eq!(c.cmd(m), c.cmd(b), "{m:?}");
        let reads = info_xstream(&mut c, "tier_cold_reads") - reads;
        let gone = keys - sealed_nodes(&mut c, "m");
        assert!(gone > 10, "{m:?}: {gone} nodes removed");
        assert!(reads <= 2, "{m:?}: {reads} nodes read to remove {gone}");
        removed += gone;
    }
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    let info = c.cmd(&["XS.INFO", "STREAM", "m"]);
    assert_eq!(info.field("first-entry"), c.cmd(&["XINFO", "STREAM", "b"]).field("first-entry"));
    report(&format!("trims on disk: {removed} nodes removed, at most 2 read per trim"));
}

/// Compaction: deletes leave segments sparse (an XDEL rewrites its node, whose record goes to
/// the end of the store, the old one released); the live records are written anew at the end of the store and the sparse
/// segments go, so that the files hold about the live bytes again. A write that fails on the
/// way (a full disk) leaves its record where it was and compaction resumes. The stream reads
/// back from its records' new places as the built-in's, before and after a DEBUG RELOAD.
#[test]
fn sparse_segments_are_compacted() {
    let Some(so) = test_hooks_module_path() else {
        report("sparse_segments_are_compacted: SKIPPED (set XSTREAM_TEST_HOOKS_MODULE to a `--features test-hooks` build; `make test` does)");
        return;
    };
    // Nodes of 10 entries: node k holds the IDs 10k+1 .. 10k+10.
    let s = tiered().arg("--xstream.node-max-entries", "10").module(&so).start();
    let mut c = s.conn();
    const SEG: i64 = 8 * 1024;
    assert_eq!(c.cmd(&["XS.DEBUG-TIER-FAULTS", "SEGMENT-BYTES", &SEG.to_string()]), Reply::Simple("OK".into()));
    let sealed = fill_tiered(&mut c, 6000, "compaction");
    let (files, segments) = (info_xstream(&mut c, "tier_file_bytes"), info_xstream(&mut c, "tier_segments"));
    assert!(segments > 10, "{segments} segments");
    // A fork child runs meanwhile (a BGSAVE of 1 s a key): compaction waits for its end.
    assert_eq!(c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["BGSAVE"]), Reply::Simple("Background saving started".into()));
    // An entry deleted in two nodes of every three: each is read back, rewritten and written
    // anew at the end of the store (the old record released).
    let dels: Vec<(Vec<String>, Vec<String>)> = (0..sealed)
        .filter(|k| k % 3 != 0)
        .map(|k| {
            let id = format!("{}-0", 10 * k + 1);
            (vec!["XS.DEL".into(), "m".into(), id.clone()], vec!["XDEL".into(), "b".into(), id])
        })
        .collect();
    let (dm, db): (Vec<_>, Vec<_>) = dels.into_iter().unzip();
    assert_eq!(pipeline(&mut c, &dm), pipeline(&mut c, &db));
    let kept = info_xstream(&mut c, "tier_disk_nodes");
    assert_eq!(kept, sealed, "nodes on disk");
    let live = info_xstream(&mut c, "tier_disk_bytes");
    let sparse = info_xstream(&mut c, "tier_file_bytes");
    assert!(sparse > live + live / 2, "before: {sparse} bytes in files, {live} live");
    std::thread::sleep(Duration::from_millis(300));
    assert!(c.cmd(&["INFO", "persistence"]).text().contains("rdb_bgsave_in_progress:1"), "the fork child still runs");
    assert_eq!(info_xstream(&mut c, "tier_records_moved"), 0, "no record moved while the fork child runs");
    // Then the next write to disk fails: compaction's first.
    assert_eq!(c.cmd(&["XS.DEBUG-TIER-FAULTS", "1", "0"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]), Reply::Simple("OK".into()));
    let reads = info_xstream(&mut c, "tier_cold_reads");
    let t0 = std::time::Instant::now();
    while info_xstream(&mut c, "tier_file_bytes") > live + live / 10 + SEG {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "compaction: {} bytes in files, {live} live, {} records moved",
            info_xstream(&mut c, "tier_file_bytes"),
            info_xstream(&mut c, "tier_records_moved")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let moved = info_xstream(&mut c, "tier_records_moved");
    assert!(moved > 0, "{moved} records moved");
    assert_eq!(info_xstream(&mut c, "tier_write_errors"), 1);
    assert_eq!((info_xstream(&mut c, "tier_disk_bytes"), info_xstream(&mut c, "tier_disk_nodes")), (live, kept));
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    assert!(info_xstream(&mut c, "tier_cold_reads") >= reads + kept, "the read went to disk");
    assert_eq!(info_xstream(&mut c, "tier_read_errors"), 0);
    let after = (info_xstream(&mut c, "tier_file_bytes"), info_xstream(&mut c, "tier_segments"));
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    report(&format!(
        "compaction: {files} bytes in {segments} segments; after XDELs in 2 of 3 nodes {sparse} bytes, {live} live; \
         {moved} records moved, {} bytes in {} segments after",
        after.0, after.1
    ));
}
