//! Compaction (issue 18): `xstream.compact-deleted`, the on-write step, XS.COMPACT, XS.INFO
//! STREAM `deleted-entries`, INFO xstream's counters, and what replicas and the AOF get.
//! The logical content is compared with a built-in stream given the same commands.

mod common;

use common::*;
use std::time::Duration;

fn adds(cmd: &str, key: &str, n: u64) -> Vec<Vec<String>> {
    (1..=n).map(|i| vec![cmd.into(), key.into(), format!("{i}-0"), "f".into(), format!("v{i}"), "g".into(), "x".into()]).collect()
}

fn dels(cmd: &str, key: &str, ids: &[u64]) -> Vec<Vec<String>> {
    ids.iter().map(|i| vec![cmd.into(), key.into(), format!("{i}-0")]).collect()
}

/// XINFO STREAM without the node-layout fields (and the module's deleted-entries).
fn logical_info(c: &mut Conn, cmd: &str, key: &str) -> Reply {
    let mut r = c.cmd(&[cmd, "STREAM", key]);
    r.set_field("radix-tree-keys", Reply::Int(0));
    r.set_field("radix-tree-nodes", Reply::Int(0));
    r.remove_field("deleted-entries");
    r
}

fn info_field(c: &mut Conn, name: &str) -> i64 {
    let info = c.cmd(&["INFO", "xstream"]).text();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("xstream_{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {info}"))
}

#[test]
fn config_auto_and_info_field() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compact-deleted"]).as_array()[1].text(), "-1");
    assert!(c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "101"]).is_error());
    assert!(c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "-2"]).is_error());
    pipeline(&mut c, &adds("XS.ADD", "s", 4));
    // auto at a host level: off, and XS.INFO STREAM is the built-in's (10 fields).
    let r = c.cmd(&["XS.INFO", "STREAM", "s"]);
    assert_eq!(r.as_array().len(), 20);
    assert!(r.field("deleted-entries").is_none());
    c.cmd(&["XS.DEL", "s", "1-0", "2-0"]);
    assert_eq!(c.cmd(&["XS.INFO", "STREAM", "s"]).field("radix-tree-keys"), Some(&Reply::Int(1)));
    // auto at `latest`: off too (8.x compacts nothing; the 8.8 layout of 16 pairs).
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compat", "latest"]), Reply::Simple("OK".into()));
    let r = c.cmd(&["XS.INFO", "STREAM", "s"]);
    assert_eq!(r.as_array().len(), 32);
    assert!(r.field("deleted-entries").is_none());
    // Opting in at `latest`: the field shows the tombstones left (none: 2 of 4 compacted).
    c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "50"]);
    c.cmd(&["XS.DEL", "s", "3-0"]);
    assert_eq!(c.cmd(&["XS.INFO", "STREAM", "s"]).field("deleted-entries"), Some(&Reply::Int(0)));
    // An explicit 0 turns it off at `latest` too; an explicit value applies at host levels.
    c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "0"]);
    assert!(c.cmd(&["XS.INFO", "STREAM", "s"]).field("deleted-entries").is_none());
    c.cmd(&["CONFIG", "SET", "xstream.compat", "host"]);
    c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "25"]);
    assert_eq!(c.cmd(&["XS.INFO", "STREAM", "s", "FULL"]).field("deleted-entries"), Some(&Reply::Int(0)));
    assert_eq!(c.cmd(&["XS.LEN", "s"]), Reply::Int(1));
}

/// XDEL of every other entry of 1000 with the default node limits (100 entries): each node is
/// rewritten once half of it is deleted and merged with its compacted neighbour; the content
/// and XINFO (minus layout) stay the built-in's.
#[test]
fn every_other_deleted_matches_the_builtin() {
    let s = Server::start();
    let mut c = s.conn();
    c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "50"]);
    pipeline(&mut c, &adds("XADD", "b", 1000));
    pipeline(&mut c, &adds("XS.ADD", "m", 1000));
    let ids: Vec<u64> = (1..=1000).step_by(2).collect();
    let rb = pipeline(&mut c, &dels("XDEL", "b", &ids));
    let rm = pipeline(&mut c, &dels("XS.DEL", "m", &ids));
    assert_eq!(rb, rm);
    assert_eq!(c.cmd(&["XINFO", "STREAM", "b"]).field("radix-tree-keys"), Some(&Reply::Int(10)));
    let im = c.cmd(&["XS.INFO", "STREAM", "m"]);
    assert_eq!(im.field("radix-tree-keys"), Some(&Reply::Int(5)));
    assert_eq!(im.field("deleted-entries"), Some(&Reply::Int(0)));
    assert_eq!(logical_info(&mut c, "XINFO", "b"), logical_info(&mut c, "XS.INFO", "m"));
    assert_eq!(c.cmd(&["XRANGE", "b", "-", "+"]), c.cmd(&["XS.RANGE", "m", "-", "+"]));
    assert_eq!(c.cmd(&["XREVRANGE", "b", "+", "-", "COUNT", "7"]), c.cmd(&["XS.REVRANGE", "m", "+", "-", "COUNT", "7"]));
    assert_eq!(info_field(&mut c, "nodes_compacted"), 15);
    assert_eq!(info_field(&mut c, "nodes_merged"), 5);
    assert!(info_field(&mut c, "compacted_bytes_freed") > 0);
    // Appends after the merged tail, exact trims and groups go on as with the built-in.
    for (cmd, key) in [("XADD", "b"), ("XS.ADD", "m")] {
        c.cmd(&[cmd, key, "2000-0", "f", "z"]);
    }
    assert_eq!(c.cmd(&["XTRIM", "b", "MAXLEN", "=", "120"]), c.cmd(&["XS.TRIM", "m", "MAXLEN", "=", "120"]));
    assert_eq!(c.cmd(&["XRANGE", "b", "-", "+"]), c.cmd(&["XS.RANGE", "m", "-", "+"]));
    assert_eq!(logical_info(&mut c, "XINFO", "b"), logical_info(&mut c, "XS.INFO", "m"));
}

#[test]
fn xs_compact_replies_and_errors() {
    let s = Server::start();
    let mut c = s.conn();
    c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "0"]);
    pipeline(&mut c, &adds("XS.ADD", "m", 1000));
    pipeline(&mut c, &adds("XADD", "b", 1000));
    c.cmd(&["XS.GROUP", "CREATE", "m", "g", "0"]);
    c.cmd(&["XGROUP", "CREATE", "b", "g", "0"]);
    let rm = c.cmd(&["XS.READGROUP", "GROUP", "g", "alice", "COUNT", "300", "STREAMS", "m", ">"]);
    let rb = c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "300", "STREAMS", "b", ">"]);
    assert_eq!(rm.as_array()[0].as_array()[1], rb.as_array()[0].as_array()[1]);
    let ids: Vec<u64> = (1..=1000).filter(|i| i % 10 != 0).collect();
    pipeline(&mut c, &dels("XS.DEL", "m", &ids));
    pipeline(&mut c, &dels("XDEL", "b", &ids));
    assert_eq!(c.cmd(&["XS.INFO", "STREAM", "m"]).field("radix-tree-keys"), Some(&Reply::Int(10)));
    // LIMIT 2: two nodes rewritten into one.
    let first = c.cmd(&["XS.COMPACT", "m", "LIMIT", "2"]).as_int();
    // Bytes of node allocations: 2 sealed nodes of 100 entries (10 live each) became one node.
    assert_eq!(first, 2974);
    assert_eq!(c.cmd(&["XS.INFO", "STREAM", "m"]).field("radix-tree-keys"), Some(&Reply::Int(9)));
    let rest = c.cmd(&["XS.COMPACT", "m"]).as_int();
    // (The tail node, full but not sealed, holds the room its appends grew it to.)
    assert_eq!(rest, 12622);
    assert_eq!(c.cmd(&["XS.INFO", "STREAM", "m"]).field("radix-tree-keys"), Some(&Reply::Int(1)));
    assert_eq!(c.cmd(&["XS.COMPACT", "m"]), Reply::Int(0));
    assert_eq!(c.cmd(&["XS.COMPACT", "m", "LIMIT", "0"]), Reply::Int(0));
    // INFO xstream's totals follow the new layout.
    assert_eq!(info_field(&mut c, "nodes"), 1);
    assert_eq!(info_field(&mut c, "entries"), 100);
    assert_eq!(info_field(&mut c, "nodes_compacted"), 2 + 9);
    assert_eq!(info_field(&mut c, "nodes_merged"), 9);
    assert_eq!(info_field(&mut c, "compacted_bytes_freed"), 2974 + 12622);
    assert_eq!(c.cmd(&["XS.COMPACT", "missing"]), Reply::Int(0));
    // Content, metadata, groups and PELs untouched.
    assert_eq!(c.cmd(&["XRANGE", "b", "-", "+"]), c.cmd(&["XS.RANGE", "m", "-", "+"]));
    assert_eq!(logical_info(&mut c, "XINFO", "b"), logical_info(&mut c, "XS.INFO", "m"));
    assert_eq!(c.cmd(&["XPENDING", "b", "g", "-", "+", "1000"]).as_array().len(), 300);
    let strip_idle = |r: Reply| -> Vec<(String, String, i64)> {
        r.as_array().iter().map(|e| (e.as_array()[0].text(), e.as_array()[1].text(), e.as_array()[3].as_int())).collect()
    };
    assert_eq!(strip_idle(c.cmd(&["XPENDING", "b", "g", "-", "+", "1000"])), strip_idle(c.cmd(&["XS.PENDING", "m", "g", "-", "+", "1000"])));
    assert_eq!(c.cmd(&["XINFO", "GROUPS", "b"]), c.cmd(&["XS.INFO", "GROUPS", "m"]));
    // Errors.
    c.cmd(&["SET", "str", "x"]);
    assert_eq!(c.cmd(&["XS.COMPACT", "str"]), Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into()));
    assert_eq!(c.cmd(&["XS.COMPACT"]), Reply::Error("ERR wrong number of arguments for 'xs.compact' command".into()));
    assert_eq!(c.cmd(&["XS.COMPACT", "m", "LIMIT"]), Reply::Error("ERR syntax error".into()));
    assert_eq!(c.cmd(&["XS.COMPACT", "m", "FOO", "1"]), Reply::Error("ERR syntax error".into()));
    assert_eq!(c.cmd(&["XS.COMPACT", "m", "LIMIT", "x"]), Reply::Error("ERR value is not an integer or out of range".into()));
    assert_eq!(c.cmd(&["XS.COMPACT", "m", "LIMIT", "-1"]), Reply::Error("ERR The LIMIT argument must be >= 0.".into()));
}

fn digests(c: &mut Conn, keys: &[&str]) -> Vec<Reply> {
    keys.iter().map(|k| c.cmd(&["DEBUG", "DIGEST-VALUE", k])).collect()
}

fn offset(c: &mut Conn) -> String {
    let info = c.cmd(&["INFO", "replication"]).text();
    info.lines().find(|l| l.starts_with("master_repl_offset:")).map(|l| l.trim().to_string()).unwrap_or_default()
}

/// The on-write step runs on the primary (compact-deleted 30) and not on the replica (0);
/// XS.COMPACT is propagated. Digests (layout-independent) agree on the primary, the replica
/// and after DEBUG LOADAOF; the replica's nodes are compacted by the propagated XS.COMPACT.
#[test]
fn compaction_and_replicas() {
    let primary = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "no").start();
    let replica = Server::replica_of(&primary);
    let mut c = primary.conn();
    let mut rc = replica.conn();
    c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "30"]);
    rc.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "0"]);
    let mut rng = Rng::from_env("compaction_and_replicas");
    let keys = ["k1", "k2"];
    for k in keys {
        pipeline(&mut c, &adds("XS.ADD", k, 3000));
        c.cmd(&["XS.GROUP", "CREATE", k, "g", "0"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "COUNT", "500", "STREAMS", k, ">"]);
        let ids: Vec<u64> = (1..=3000).filter(|_| rng.pct(70)).collect();
        pipeline(&mut c, &dels("XS.DEL", k, &ids));
    }
    c.cmd(&["XS.TRIM", "k1", "MAXLEN", "=", "500"]);
    c.cmd(&["XS.COMPACT", "k2"]);
    assert_eq!(c.cmd(&["WAIT", "1", "10000"]), Reply::Int(1));
    let t0 = std::time::Instant::now();
    while offset(&mut c) != offset(&mut rc) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let on_primary = digests(&mut c, &keys);
    assert!(on_primary.iter().all(|d| !d.is_nil() && !d.is_error()), "{on_primary:?}");
    assert_eq!(on_primary, digests(&mut rc, &keys));
    // k2 was compacted on the replica by XS.COMPACT: no tombstone left, as on the primary.
    rc.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "1"]);
    assert_eq!(rc.cmd(&["XS.INFO", "STREAM", "k2"]).field("deleted-entries"), Some(&Reply::Int(0)));
    assert!(rc.cmd(&["XS.INFO", "STREAM", "k1"]).field("deleted-entries").unwrap().as_int() > 0);
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), Reply::Simple("OK".into()));
    assert_eq!(on_primary, digests(&mut c, &keys));
    // And through an RDB round trip.
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
    assert_eq!(on_primary, digests(&mut c, &keys));
}

#[test]
fn compacted_stream_round_trips_through_dump_and_export() {
    let s = Server::start();
    let mut c = s.conn();
    c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "50"]);
    pipeline(&mut c, &adds("XS.ADD", "m", 500));
    pipeline(&mut c, &adds("XADD", "b", 500));
    let ids: Vec<u64> = (1..=500).filter(|i| i % 3 != 0).collect();
    pipeline(&mut c, &dels("XS.DEL", "m", &ids));
    pipeline(&mut c, &dels("XDEL", "b", &ids));
    let d = c.cmd(&["DUMP", "m"]);
    c.cmd(&["DEL", "m2"]);
    let payload = d.as_bytes().unwrap().to_vec();
    assert_eq!(c.cmd(&[b"RESTORE".as_slice(), b"m2", b"0", &payload]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["XS.RANGE", "m2", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    assert!(!c.cmd(&["XS.EXPORT", "m"]).is_error());
    assert_eq!(c.cmd(&["XRANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    assert_eq!(logical_info(&mut c, "XINFO", "m"), logical_info(&mut c, "XINFO", "b"));
}

/// A JSON-like event of 150-300 bytes, from a fixed seed.
fn event(rng: &mut Rng, i: u64) -> String {
    let actions = ["click", "view", "purchase", "login", "logout", "add_to_cart", "search"];
    let pages = ["/home", "/product/42", "/cart", "/search?q=shoes", "/account/settings", "/checkout"];
    let a = actions[rng.below(actions.len() as u64) as usize];
    let p = pages[rng.below(pages.len() as u64) as usize];
    let extra: String = (0..rng.below(4)).map(|k| format!(",\"tag{k}\":\"t{}\"", rng.below(50))).collect();
    format!(
        "{{\"user\":\"user-{}\",\"action\":\"{a}\",\"ts\":{},\"props\":{{\"page\":\"{p}\",\"ref\":\"campaign-{}\",\"device\":\"{}\",\"ms\":{}{extra}}}}}",
        rng.below(5000),
        1_700_000_000_000u64 + i * 37,
        rng.below(20),
        if rng.pct(60) { "mobile" } else { "desktop" },
        rng.below(2000)
    )
}

/// MEMORY USAGE of `key` once it is below `limit` (the background step compresses sealed
/// nodes a few ms after they are sealed); panics after 5 s.
fn wait_memory_below(c: &mut Conn, key: &str, limit: i64) -> i64 {
    let t0 = std::time::Instant::now();
    loop {
        let m = c.cmd(&["MEMORY", "USAGE", key]).as_int();
        if m < limit {
            return m;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "MEMORY USAGE {key}: {m}, never below {limit}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn events(cmd: &str, key: &str, n: u64, seed: u64) -> Vec<Vec<String>> {
    let mut rng = Rng::new(seed);
    (1..=n).map(|i| vec![cmd.into(), key.into(), format!("{i}-0"), "event".into(), event(&mut rng, i)]).collect()
}

/// The background step (src/ffi/pack_timer.rs): XS.ADD does not compress the node it seals;
/// the step does shortly after, without writes. Keys deleted, renamed, moved, swapped or
/// flushed while their nodes are queued are skipped or followed, never a crash; the contents
/// stay the built-in's.
#[test]
fn background_step_compresses_sealed_nodes() {
    let s = Server::start();
    let mut c = s.conn();
    c.cmd(&["CONFIG", "SET", "xstream.compression", "lz4"]);
    pipeline(&mut c, &events("XADD", "b", 3000, 5));
    let mb = c.cmd(&["MEMORY", "USAGE", "b"]).as_int();
    // One pipeline: the commands after the appends run before the step's first tick.
    let mut cmds = events("XS.ADD", "s", 3000, 5);
    cmds.push(vec!["RENAME".into(), "s".into(), "s2".into()]);
    cmds.extend(events("XS.ADD", "d", 3000, 5));
    cmds.push(vec!["DEL".into(), "d".into()]);
    cmds.push(vec!["SET".into(), "d".into(), "string".into()]);
    cmds.extend(events("XS.ADD", "w", 3000, 5));
    cmds.push(vec!["SWAPDB".into(), "0".into(), "1".into()]);
    cmds.extend(events("XS.ADD", "w", 3000, 5));
    cmds.push(vec!["MOVE".into(), "w".into(), "2".into()]);
    pipeline(&mut c, &cmds);
    c.cmd(&["SWAPDB", "0", "1"]);
    // db 0 again: s2, d (a string), w (the first one); db 2: the second w.
    let ms2 = wait_memory_below(&mut c, "s2", mb * 6 / 10);
    assert!(ms2 > 0);
    wait_memory_below(&mut c, "w", mb * 6 / 10);
    assert_eq!(c.cmd(&["GET", "d"]), Reply::Bulk(b"string".to_vec()));
    for k in ["s2", "w"] {
        assert_eq!(c.cmd(&["XS.RANGE", k, "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    }
    c.cmd(&["SELECT", "2"]);
    wait_memory_below(&mut c, "w", mb * 6 / 10);
    assert_eq!(c.cmd(&["XS.LEN", "w"]), Reply::Int(3000));
    // Flushed while queued.
    let mut cmds = events("XS.ADD", "f", 3000, 5);
    cmds.push(vec!["FLUSHALL".into()]);
    cmds.extend(events("XS.ADD", "g", 3000, 5));
    cmds.push(vec!["FLUSHDB".into()]);
    pipeline(&mut c, &cmds);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(0));
    // Turned off while nodes are queued: those not compressed yet stay plain (how many
    // depends on the ticks that ran during the pipeline); reads are unchanged.
    c.cmd(&["SELECT", "0"]);
    let mut cmds = events("XS.ADD", "o", 3000, 5);
    cmds.push(vec!["CONFIG".into(), "SET".into(), "xstream.compression".into(), "off".into()]);
    pipeline(&mut c, &cmds);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd(&["XS.LEN", "o"]), Reply::Int(3000));
    let first = c.cmd(&["XS.RANGE", "o", "-", "+", "COUNT", "1"]);
    assert_eq!(first.as_array()[0].as_array()[0], Reply::Bulk(b"1-0".to_vec()));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

/// SWAPDB while nodes are queued: the queue follows the key to its new database (it kept the
/// old one: the step found no key there, dropped it, and the swapped stream stayed plain for
/// good; a CI run failed on it through `background_step_compresses_sealed_nodes`).
#[test]
fn swapdb_keeps_queued_nodes_with_their_key() {
    let s = Server::start();
    let mut c = s.conn();
    c.cmd(&["CONFIG", "SET", "xstream.compression", "lz4"]);
    pipeline(&mut c, &events("XADD", "b", 3000, 5));
    let mb = c.cmd(&["MEMORY", "USAGE", "b"]).as_int();
    // One transaction: every node is queued and SWAPDB runs before the step's first tick.
    let mut cmds = vec![vec!["MULTI".to_string()]];
    cmds.extend(events("XS.ADD", "w", 3000, 5));
    cmds.push(vec!["SWAPDB".into(), "0".into(), "1".into()]);
    cmds.push(vec!["EXEC".into()]);
    pipeline(&mut c, &cmds);
    wait_queue_empty(&mut c);
    c.cmd(&["SELECT", "1"]);
    wait_memory_below(&mut c, "w", mb * 6 / 10);
    // b was swapped along with w.
    assert_eq!(c.cmd(&["XS.RANGE", "w", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
}

/// `xstream.compression lz4`: sealed nodes are stored compressed; every read, deletion, group
/// read, reload, DUMP / RESTORE and XS.EXPORT gives what the built-in gives.
#[test]
fn compressed_nodes_read_as_the_builtin() {
    compressed_nodes_read_as_the_builtin_with("lz4");
}

/// The same with zstd; then nodes of both codecs in one stream (the setting changed midway).
#[test]
fn zstd_nodes_read_as_the_builtin_and_mix_with_lz4() {
    compressed_nodes_read_as_the_builtin_with("zstd");
    let s = Server::start();
    let mut c = s.conn();
    c.cmd(&["CONFIG", "SET", "xstream.compression", "lz4"]);
    let m = events("XS.ADD", "m", 3000, 8);
    let b = events("XADD", "b", 3000, 8);
    pipeline(&mut c, &m[..1500]);
    wait_queue_empty(&mut c);
    let lz4_half = c.cmd(&["MEMORY", "USAGE", "m"]).as_int();
    c.cmd(&["CONFIG", "SET", "xstream.compression", "zstd"]);
    pipeline(&mut c, &m[1500..]);
    pipeline(&mut c, &b);
    wait_queue_empty(&mut c);
    let mixed = c.cmd(&["MEMORY", "USAGE", "m"]).as_int();
    // zstd packs the second half tighter than LZ4 packed the first.
    assert!(mixed < lz4_half * 2, "{mixed} vs {lz4_half}");
    let check = |c: &mut Conn| {
        assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
        for start in ["1", "1490", "1510", "2999"] {
            assert_eq!(c.cmd(&["XS.RANGE", "m", start, "+", "COUNT", "100"]), c.cmd(&["XRANGE", "b", start, "+", "COUNT", "100"]));
            assert_eq!(c.cmd(&["XS.REVRANGE", "m", start, "-", "COUNT", "100"]), c.cmd(&["XREVRANGE", "b", start, "-", "COUNT", "100"]));
        }
    };
    check(&mut c);
    let ids: Vec<u64> = (1..=3000).filter(|i| i % 5 == 0).collect();
    assert_eq!(pipeline(&mut c, &dels("XS.DEL", "m", &ids)), pipeline(&mut c, &dels("XDEL", "b", &ids)));
    check(&mut c);
    for conf in ["off", "lz4"] {
        c.cmd(&["CONFIG", "SET", "xstream.compression", conf]);
        assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
        check(&mut c);
        assert!(c.cmd(&["MEMORY", "USAGE", "m"]).as_int() < mixed * 11 / 10);
    }
}

fn compressed_nodes_read_as_the_builtin_with(codec: &str) {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compression"]).as_array()[1].text(), "off");
    assert!(c.cmd(&["CONFIG", "SET", "xstream.compression", "zip"]).is_error());
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compression", codec]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compression"]).as_array()[1].text(), codec);
    let mut rng = Rng::new(18);
    let cmds = |cmd: &str, key: &str, rng: &mut Rng| -> Vec<Vec<String>> {
        (1..=3000u64).map(|i| vec![cmd.into(), key.into(), format!("{i}-0"), "event".into(), event(rng, i), "v".into(), "1".into()]).collect()
    };
    let m = cmds("XS.ADD", "m", &mut rng);
    let mut rng = Rng::new(18);
    let b = cmds("XADD", "b", &mut rng);
    pipeline(&mut c, &m);
    pipeline(&mut c, &b);
    let mb = c.cmd(&["MEMORY", "USAGE", "b"]).as_int();
    // Sealed nodes are compressed by the background step, shortly after. Memory falls below
    // the limit before the step has compressed the last queued nodes: wait for the queue too,
    // or the step's later work would show as a change made by the reads.
    wait_memory_below(&mut c, "m", mb * 6 / 10);
    wait_queue_empty(&mut c);
    let mm = c.cmd(&["MEMORY", "USAGE", "m"]).as_int();
    let check = |c: &mut Conn| {
        assert_eq!(c.cmd(&["XRANGE", "b", "-", "+"]), c.cmd(&["XS.RANGE", "m", "-", "+"]));
        for start in ["1", "777", "1500-0", "2999"] {
            assert_eq!(c.cmd(&["XRANGE", "b", start, "+", "COUNT", "100"]), c.cmd(&["XS.RANGE", "m", start, "+", "COUNT", "100"]));
            assert_eq!(c.cmd(&["XREVRANGE", "b", start, "-", "COUNT", "100"]), c.cmd(&["XS.REVRANGE", "m", start, "-", "COUNT", "100"]));
        }
        assert_eq!(logical_info(c, "XINFO", "b"), logical_info(c, "XS.INFO", "m"));
    };
    check(&mut c);
    // Reads leave no decompressed copies behind: memory is what it was.
    assert_eq!(c.cmd(&["MEMORY", "USAGE", "m"]).as_int(), mm);
    let ids: Vec<u64> = (1..=3000).filter(|i| i % 7 == 0).collect();
    assert_eq!(pipeline(&mut c, &dels("XS.DEL", "m", &ids)), pipeline(&mut c, &dels("XDEL", "b", &ids)));
    check(&mut c);
    c.cmd(&["XS.GROUP", "CREATE", "m", "g", "0"]);
    c.cmd(&["XGROUP", "CREATE", "b", "g", "0"]);
    let rm = c.cmd(&["XS.READGROUP", "GROUP", "g", "a", "COUNT", "500", "STREAMS", "m", ">"]);
    let rb = c.cmd(&["XREADGROUP", "GROUP", "g", "a", "COUNT", "500", "STREAMS", "b", ">"]);
    assert_eq!(rm.as_array()[0].as_array()[1], rb.as_array()[0].as_array()[1]);
    let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "m"]);
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "m"]), digest);
    check(&mut c);
    let after = c.cmd(&["MEMORY", "USAGE", "m"]).as_int();
    assert!(after * 10 < mb * 6, "after reload: {after} vs {mb}");
    let payload = c.cmd(&["DUMP", "m"]).as_bytes().unwrap().to_vec();
    assert_eq!(c.cmd(&[b"RESTORE".as_slice(), b"m2", b"0", &payload]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["XS.RANGE", "m2", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    // Compaction and compression together.
    c.cmd(&["CONFIG", "SET", "xstream.compact-deleted", "50"]);
    let ids: Vec<u64> = (1..=3000).filter(|i| i % 7 != 0 && i % 2 == 0).collect();
    assert_eq!(pipeline(&mut c, &dels("XS.DEL", "m", &ids)), pipeline(&mut c, &dels("XDEL", "b", &ids)));
    assert!(c.cmd(&["XS.COMPACT", "m"]).as_int() >= 0);
    check(&mut c);
    assert!(!c.cmd(&["XS.EXPORT", "m"]).is_error());
    assert_eq!(c.cmd(&["XRANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    c.cmd(&["CONFIG", "SET", "xstream.compression", "off"]);
}

/// The codecs of `xstream.compression` (besides `off`).
const CODECS: &[&str] = &["lz4", "zstd"];

fn wait_queue_empty(c: &mut Conn) {
    let t0 = std::time::Instant::now();
    while info_field(c, "compression_queued_keys") != 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "queued nodes never compressed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// RDB encoding 6: compressed nodes are saved compressed (with their codec tag) and loaded
/// without recompression, through DEBUG RELOAD, DUMP / RESTORE, a replica's full sync and an
/// AOF with an RDB preamble; the memory stays that of the compressed stream and every read is
/// the built-in's. Loaded with compression off, they stay compressed.
#[test]
fn compressed_nodes_persist_compressed() {
    for codec in CODECS {
        let p = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "yes").arg("--xstream.compression", codec).start();
        let mut c = p.conn();
        assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compression"]).as_array()[1].text(), *codec);
        pipeline(&mut c, &events("XS.ADD", "m", 3000, 6));
        pipeline(&mut c, &events("XADD", "b", 3000, 6));
        c.cmd(&["XS.GROUP", "CREATE", "m", "g", "0"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "a", "COUNT", "10", "STREAMS", "m", ">"]);
        wait_queue_empty(&mut c);
        let mb = c.cmd(&["MEMORY", "USAGE", "b"]).as_int();
        let mm = c.cmd(&["MEMORY", "USAGE", "m"]).as_int();
        assert!(mm * 10 < mb * 6, "{codec}: {mm} vs {mb}");
        let digest = c.cmd(&["DEBUG", "DIGEST-VALUE", "m"]);
        let check = |c: &mut Conn, key: &str, what: &str| {
            assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", key]), digest, "{codec} {what}: digest");
            assert_eq!(c.cmd(&["XS.RANGE", key, "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]), "{codec} {what}");
            assert_eq!(c.cmd(&["XS.REVRANGE", key, "+", "1500", "COUNT", "100"]), c.cmd(&["XREVRANGE", "b", "+", "1500", "COUNT", "100"]));
            let m = c.cmd(&["MEMORY", "USAGE", key]).as_int();
            // Compressed as it was (the tail node and allocator rounding aside).
            assert!(m * 10 < mb * 6 && m * 10 < mm * 11, "{codec} {what}: {m} vs {mm} (built-in {mb})");
        };
        check(&mut c, "m", "written");
        assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
        check(&mut c, "m", "DEBUG RELOAD");
        let payload = c.cmd(&["DUMP", "m"]).as_bytes().unwrap().to_vec();
        assert_eq!(c.cmd(&[b"RESTORE".as_slice(), b"m2", b"0", &payload]), Reply::Simple("OK".into()));
        check(&mut c, "m2", "RESTORE");
        c.cmd(&["DEL", "m2"]);
        c.cmd(&["BGREWRITEAOF"]);
        wait_persistence_idle(&mut c, Duration::from_secs(20));
        assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), Reply::Simple("OK".into()));
        check(&mut c, "m", "AOF with an RDB preamble");
        // A replica with compression off: the full sync brings the nodes compressed, as saved.
        let r = Server::builder().arg("--xstream.compression", "off").start();
        let mut rc = r.conn();
        rc.cmd(&["REPLICAOF", "127.0.0.1", &p.port().to_string()]);
        let t0 = std::time::Instant::now();
        while rc.cmd(&["DBSIZE"]).as_int() != 2 || !rc.cmd(&["INFO", "replication"]).text().contains("master_link_status:up") {
            assert!(t0.elapsed() < Duration::from_secs(20), "replica never synced");
            std::thread::sleep(Duration::from_millis(20));
        }
        check(&mut rc, "m", "replica full sync");
        // XS.EXPORT writes the built-in's format: plain listpacks.
        assert_eq!(c.cmd(&["XS.EXPORT", "m"]), Reply::Int(3000));
        assert_eq!(c.cmd(&["TYPE", "m"]), Reply::Simple("stream".into()));
        assert_eq!(c.cmd(&["XRANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]));
    }
}

/// A file of encoding 4 (tests/fixtures/stream_encver4.rdb, saved by the build before
/// encoding 6: a 100-entry stream `m` with nodes of 10 entries, a group with 7 delivered, 3-0
/// deleted, a MAXAGE; `b` the built-in twin) loads with compression on (its sealed nodes
/// packed at load), and saves again in this build's encoding.
#[test]
fn encver4_fixture_loads_with_compression() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stream_encver4.rdb");
    let mut s = Server::builder().arg("--xstream.compression", "lz4").start();
    std::fs::copy(&fixture, s.dir().join("dump.rdb")).unwrap();
    s.restart();
    let mut c = s.conn();
    let check = |c: &mut Conn, what: &str| {
        assert_eq!(c.cmd(&["XS.RANGE", "m", "-", "+"]), c.cmd(&["XRANGE", "b", "-", "+"]), "{what}");
        assert_eq!(c.cmd(&["XS.LEN", "m"]), Reply::Int(99), "{what}");
        assert_eq!(c.cmd(&["XS.PENDING", "m", "g"]).to_string(), c.cmd(&["XPENDING", "b", "g"]).to_string(), "{what}");
        assert_eq!(c.cmd(&["XS.INFO", "STREAM", "m"]).field("max-age"), Some(&Reply::Int(999999999999999)), "{what}");
    };
    check(&mut c, "encoding 4 loaded");
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
    check(&mut c, "reloaded in this build's encoding");
}

/// XS.COMPACT's reply (and INFO's `compacted_bytes_freed`) is what MEMORY USAGE loses, within
/// 10%, with compression off, lz4 and zstd: it counted the plain size of compressed nodes
/// (issue 35: 97,511 for a drop of 21,268 with lz4).
#[test]
fn compact_reply_is_the_memory_freed() {
    let s = Server::start();
    each_protocol(&s, |c, resp3| compact_reply_case(c, resp3));
}

fn compact_reply_case(c: &mut Conn, resp3: bool) {
    let proto = if resp3 { "RESP3" } else { "RESP2" };
    let info_freed = |c: &mut Conn| -> i64 {
        let text = c.cmd(&["INFO", "xstream"]).text();
        text.lines().find_map(|l| l.strip_prefix("xstream_compacted_bytes_freed:")).and_then(|v| v.trim().parse().ok()).unwrap_or(-1)
    };
    for codec in ["off", "lz4", "zstd"] {
        c.cmd(&["FLUSHALL"]);
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compression", codec, "xstream.compact-deleted", "0"]), Reply::Simple("OK".into()));
        pipeline(c, &events("XS.ADD", "s", 2000, 9));
        let dels: Vec<Vec<String>> = (1..=2000u64).filter(|i| i % 10 != 0).map(|i| vec!["XS.DEL".into(), "s".into(), format!("{i}-0")]).collect();
        pipeline(c, &dels);
        // The background step has compressed every sealed node.
        let t0 = std::time::Instant::now();
        while c
            .cmd(&["INFO", "xstream"])
            .text()
            .lines()
            .any(|l| l.starts_with("xstream_compression_queued_keys:") && l.trim_end() != "xstream_compression_queued_keys:0")
        {
            assert!(t0.elapsed() < Duration::from_secs(10), "{codec}: compression never finished");
            std::thread::sleep(Duration::from_millis(20));
        }
        let before = c.cmd(&["MEMORY", "USAGE", "s", "SAMPLES", "0"]).as_int();
        let info_before = info_freed(c);
        let reply = c.cmd(&["XS.COMPACT", "s"]).as_int();
        let after = c.cmd(&["MEMORY", "USAGE", "s", "SAMPLES", "0"]).as_int();
        let drop = before - after;
        assert!(drop > 0, "{codec}: MEMORY USAGE {before} -> {after}");
        assert!((reply - drop).abs() * 10 <= drop, "{codec}: XS.COMPACT {reply}, MEMORY USAGE {before} -> {after} (drop {drop})");
        assert_eq!(info_freed(c) - info_before, reply, "{codec}: INFO compacted_bytes_freed");
        report(&format!("compact_reply_is_the_memory_freed: {proto} {codec}: XS.COMPACT {reply}, MEMORY USAGE {before} -> {after} (drop {drop})"));
        assert_eq!(c.cmd(&["XS.LEN", "s"]), Reply::Int(200));
    }
    c.cmd(&["CONFIG", "SET", "xstream.compression", "off", "xstream.compact-deleted", "-1"]);
}

/// The counters of the decoded-node cache: (hits, misses, nodes, bytes).
fn cache_counters(c: &mut Conn) -> [i64; 4] {
    ["hits", "misses", "nodes", "bytes"].map(|f| info_field(c, &format!("compression_cache_{f}")))
}

/// Waits (5 s at most) until the decoded-node cache holds nothing: nodes freed by Redis's
/// lazy-free thread leave it at its next use, which INFO is.
fn wait_cache_empty(c: &mut Conn, what: &str) {
    let t0 = std::time::Instant::now();
    while cache_counters(c)[2..] != [0, 0] {
        assert!(t0.elapsed() < Duration::from_secs(5), "{what}: {:?}", cache_counters(c));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `xstream.compression-cache` (src/listpack/decoded.rs): a node that one command decoded is
/// served to the next from the cache (a hit), never after a write changed it; the cache stays
/// within its budget; 0 keeps nothing; freed nodes leave it. Replies are the built-in's
/// throughout, with each codec.
#[test]
fn decoded_nodes_are_cached_between_commands() {
    for codec in CODECS {
        let s = Server::start();
        let mut c = s.conn();
        assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compression-cache"]).as_array()[1].text(), "1048576");
        c.cmd(&["CONFIG", "SET", "xstream.compression", codec]);
        pipeline(&mut c, &events("XS.ADD", "m", 3000, 5));
        pipeline(&mut c, &events("XADD", "b", 3000, 5));
        wait_queue_empty(&mut c);
        let same = |c: &mut Conn, start: &str, count: &str| {
            assert_eq!(c.cmd(&["XS.RANGE", "m", start, "+", "COUNT", count]), c.cmd(&["XRANGE", "b", start, "+", "COUNT", count]), "{codec} {start}");
        };
        // Entry 100 is in a sealed (compressed) node; one entry read decodes one node.
        let [h, m, _, _] = cache_counters(&mut c);
        same(&mut c, "100", "1");
        assert_eq!(cache_counters(&mut c)[..3], [h, m + 1, 1], "{codec}: first read decodes");
        let bytes = cache_counters(&mut c)[3];
        assert!(bytes > 160 && bytes <= 4096 + 160, "{codec}: {bytes}");
        same(&mut c, "100", "1");
        same(&mut c, "101", "1");
        assert_eq!(cache_counters(&mut c), [h + 2, m + 1, 1, bytes], "{codec}: rereads are hits");
        // A write to the node takes its decoded form (a hit) and packs it anew: the next read
        // cannot be served the bytes from before the write.
        assert_eq!(c.cmd(&["XS.DEL", "m", "100-0"]), c.cmd(&["XDEL", "b", "100-0"]));
        let [h, m, _, _] = cache_counters(&mut c);
        same(&mut c, "99", "3");
        assert_eq!(cache_counters(&mut c)[..2], [h, m + 1], "{codec}: the rewritten node is decoded again");
        same(&mut c, "99", "3");
        assert_eq!(cache_counters(&mut c)[..2], [h + 1, m + 1], "{codec}");
        // A scan keeps only the node it stopped in (and the one it served); the nodes it passed
        // through once are kept the second time they are decoded. Within the budget always.
        same(&mut c, "-", "3000");
        let [_, _, nodes, _] = cache_counters(&mut c);
        assert!(nodes <= 3, "{codec}: {nodes} nodes kept after one scan");
        same(&mut c, "-", "3000");
        let [_, _, nodes, bytes] = cache_counters(&mut c);
        assert!(bytes <= 1 << 20 && nodes > 100, "{codec}: {nodes} nodes, {bytes} bytes");
        let [h, m, _, _] = cache_counters(&mut c);
        same(&mut c, "-", "3000");
        let [h2, m2, _, _] = cache_counters(&mut c);
        assert_eq!(m2, m, "{codec}: the third scan decodes nothing");
        assert!(h2 - h > 100, "{codec}");
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compression-cache", "10000"]), Reply::Simple("OK".into()));
        assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compression-cache"]).as_array()[1].text(), "10000");
        let [_, _, nodes, bytes] = cache_counters(&mut c);
        assert!(bytes <= 10_000 && (1..=2).contains(&nodes), "{codec}: {nodes} nodes, {bytes} bytes");
        for start in ["1", "500", "1000", "2500"] {
            same(&mut c, start, "200");
            assert!(cache_counters(&mut c)[3] <= 10_000);
        }
        // 0: nothing kept, every read decodes.
        c.cmd(&["CONFIG", "SET", "xstream.compression-cache", "0"]);
        assert_eq!(cache_counters(&mut c)[2..], [0, 0]);
        let [h, m, _, _] = cache_counters(&mut c);
        same(&mut c, "100", "1");
        same(&mut c, "100", "1");
        assert_eq!(cache_counters(&mut c), [h, m + 2, 0, 0], "{codec}: no cache");
        // Freed nodes leave the cache: DEBUG RELOAD and FLUSHALL free every node.
        c.cmd(&["CONFIG", "SET", "xstream.compression-cache", "1mb"]);
        assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compression-cache"]).as_array()[1].text(), "1048576");
        same(&mut c, "-", "3000");
        same(&mut c, "-", "3000");
        assert!(cache_counters(&mut c)[2] > 100);
        assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
        wait_cache_empty(&mut c, &format!("{codec}: after DEBUG RELOAD"));
        same(&mut c, "-", "3000");
        same(&mut c, "-", "3000");
        assert!(cache_counters(&mut c)[2] > 100);
        c.cmd(&["FLUSHALL"]);
        wait_cache_empty(&mut c, &format!("{codec}: after FLUSHALL"));
        // Freed on Redis's lazy-free thread (FLUSHALL ASYNC; the default flush on Redis 8 and
        // Valkey): the entries go too.
        same(&mut c, "-", "3000");
        same(&mut c, "-", "3000");
        assert_eq!(cache_counters(&mut c)[2], 0, "{codec}: the streams are gone");
        pipeline(&mut c, &events("XS.ADD", "m", 3000, 5));
        wait_queue_empty(&mut c);
        c.cmd(&["XS.RANGE", "m", "-", "+"]);
        c.cmd(&["XS.RANGE", "m", "-", "+"]);
        assert!(cache_counters(&mut c)[2] > 100);
        c.cmd(&["FLUSHALL", "ASYNC"]);
        wait_cache_empty(&mut c, &format!("{codec}: after FLUSHALL ASYNC"));
        assert!(c.cmd(&["CONFIG", "SET", "xstream.compression-cache", "-1"]).is_error());
    }
}
