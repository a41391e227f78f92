//! `INFO xstream` (src/ffi/stats.rs): the section is there, and after a known workload its
//! totals and counters are exactly what the workload implies. Totals follow every way a stream
//! is born, changed or freed: writes, COPY, DEL, DEBUG RELOAD, FLUSHALL, RESTORE (refused
//! payloads counted), XS.IMPORT / XS.EXPORT, and adoption in takeover mode.

mod common;

use common::*;
use std::collections::HashMap;

fn info(c: &mut Conn) -> HashMap<String, String> {
    let text = c.cmd(&["INFO", "xstream"]).text();
    assert!(text.contains("# xstream"), "no xstream section: {text}");
    text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim_start_matches("xstream_").to_string(), v.trim().to_string())).collect()
}

fn int(m: &HashMap<String, String>, k: &str) -> i64 {
    m.get(k).unwrap_or_else(|| panic!("no field {k} in {m:?}")).parse().unwrap_or_else(|_| panic!("{k} not an integer"))
}

/// (streams, entries, nodes, groups, consumers, pending)
fn totals(c: &mut Conn) -> [i64; 6] {
    let m = info(c);
    ["streams", "entries", "nodes", "groups", "consumers", "pending"].map(|k| int(&m, k))
}

/// Waits (10 s at most) until the server's lazy-free thread has nothing pending: Valkey 8.1+
/// empties the old dataset of a DEBUG RELOAD there (lazyfree-lazy-user-flush yes), and a
/// stream is uncounted when it is freed. Under load the thread was seen behind the next INFO
/// (a rehearsal on Valkey 9.1.2, and 9 of 25 runs with two busy loops beside: the old streams
/// and the reloaded ones both counted).
fn lazyfree_done(c: &mut Conn) {
    let t0 = std::time::Instant::now();
    loop {
        let info = c.cmd(&["INFO", "memory"]).text();
        let pending = info.lines().find_map(|l| l.strip_prefix("lazyfree_pending_objects:")).map(|v| v.trim().to_string());
        if pending.as_deref().is_none_or(|v| v == "0") {
            return;
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(10), "lazyfree_pending_objects {pending:?} after 10 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn counters(c: &mut Conn) -> Vec<(String, i64)> {
    let m = info(c);
    [
        "entries_added",
        "entries_deleted",
        "entries_trimmed",
        "entries_delivered",
        "entries_redelivered",
        "entries_acked",
        "entries_claimed",
        "streams_imported",
        "streams_exported",
        "restore_rejected",
    ]
    .iter()
    .map(|k| (k.to_string(), int(&m, k)))
    .collect()
}

#[test]
fn info_xstream_after_a_known_workload() {
    let s = Server::start();
    let mut c = s.conn();
    let m = info(&mut c);
    assert_eq!(m.get("version").map(String::as_str), Some("0.1.0"), "{m:?}");
    let server = c.cmd(&["INFO", "server"]).text();
    let version = server.lines().find_map(|l| l.strip_prefix("redis_version:")).unwrap().trim().to_string();
    let valkey = server.lines().find_map(|l| l.strip_prefix("valkey_version:")).map(|v| v.trim().to_string());
    let host = match valkey {
        Some(v) => format!("valkey {v}"),
        None => format!("redis {version}"),
    };
    assert_eq!(m.get("host"), Some(&host));
    assert_eq!(m.get("compat").map(String::as_str), Some("host"));
    assert!(m.get("reply_level").is_some_and(|l| !l.is_empty()), "{m:?}");
    assert_eq!(m.get("takeover").map(String::as_str), Some("no"));
    assert_eq!(totals(&mut c), [0, 0, 0, 0, 0, 0]);
    let bytes_empty = int(&info(&mut c), "bytes");
    assert!(bytes_empty > 0, "the module's own state is counted");
    // The section is in INFO everything too.
    assert!(c.cmd(&["INFO", "everything"]).text().contains("# xstream"));

    for i in 1..=10 {
        c.cmd(&["XS.ADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    assert_eq!(c.cmd(&["XS.ADD", "s", "MAXLEN", "8", "11-0", "f", "v"]).text(), "11-0"); // trims 3
    assert_eq!(c.cmd(&["XS.DEL", "s", "11-0", "99-0"]).as_int(), 1);
    c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "c1", "COUNT", "3", "STREAMS", "s", ">"]); // 4-0 5-0 6-0
    c.cmd(&["XS.READGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"]); // the same 3 again
    assert_eq!(c.cmd(&["XS.ACK", "s", "g", "4-0"]).as_int(), 1);
    assert_eq!(c.cmd(&["XS.CLAIM", "s", "g", "c2", "0", "5-0", "6-0", "JUSTID"]).as_array().len(), 2);
    c.cmd(&["XS.AUTOCLAIM", "s", "g", "c1", "0", "0", "COUNT", "1"]); // 5-0 back to c1
    assert_eq!(c.cmd(&["XS.TRIM", "s", "MINID", "5-0"]).as_int(), 1);
    assert_eq!(c.cmd(&["XS.TRIM", "s", "MINID", "6-0"]).as_int(), 1);
    // Entries 6..10 (5), one node, one group, c1 and c2, 5-0 (trimmed since) and 6-0 pending.
    assert_eq!(totals(&mut c), [1, 5, 1, 1, 2, 2]);
    let expected: Vec<(String, i64)> = [
        ("entries_added", 11),
        ("entries_deleted", 1),
        ("entries_trimmed", 5),
        ("entries_delivered", 3),
        ("entries_redelivered", 3),
        ("entries_acked", 1),
        ("entries_claimed", 3),
        ("streams_imported", 0),
        ("streams_exported", 0),
        ("restore_rejected", 0),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), *v))
    .collect();
    assert_eq!(counters(&mut c), expected);

    // COPY, DEL, DEBUG RELOAD, RESTORE.
    c.cmd(&["COPY", "s", "s2"]);
    assert_eq!(totals(&mut c), [2, 10, 2, 2, 4, 4]);
    assert_eq!(c.cmd(&["DEL", "s2"]).as_int(), 1);
    assert_eq!(totals(&mut c), [1, 5, 1, 1, 2, 2]);
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]).text(), "OK");
    lazyfree_done(&mut c);
    assert_eq!(totals(&mut c), [1, 5, 1, 1, 2, 2]);
    let dump = c.cmd(&["DUMP", "s"]);
    let payload = dump.as_bytes().unwrap().to_vec();
    let r = c.cmd(&[b"RESTORE".as_slice(), b"s3", b"0", &payload]);
    assert_eq!(r.text(), "OK");
    assert_eq!(totals(&mut c), [2, 10, 2, 2, 4, 4]);
    let (body, ver) = dump_split(&payload).expect("a valid payload");
    // Cut inside the module's own data (the last bytes are the EOF opcode Redis reads after it).
    let bad = dump_build(&body[..body.len() - 20], ver);
    assert!(c.cmd(&[b"RESTORE".as_slice(), b"s4", b"0", &bad]).is_error());
    assert_eq!(int(&info(&mut c), "restore_rejected"), 1);
    assert_eq!(totals(&mut c), [2, 10, 2, 2, 4, 4]);

    // XS.EXPORT / XS.IMPORT: the stream leaves the module's totals and comes back.
    assert_eq!(c.cmd(&["XS.EXPORT", "s3"]).as_int(), 5);
    assert_eq!(totals(&mut c), [1, 5, 1, 1, 2, 2]);
    assert_eq!(c.cmd(&["XS.IMPORT", "s3"]).as_int(), 5);
    assert_eq!(totals(&mut c), [2, 10, 2, 2, 4, 4]);
    let m = info(&mut c);
    assert_eq!((int(&m, "streams_exported"), int(&m, "streams_imported")), (1, 1));

    // FLUSHALL (synchronous and lazy) frees everything.
    c.cmd(&["FLUSHALL", "ASYNC"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while totals(&mut c) != [0, 0, 0, 0, 0, 0] && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(totals(&mut c), [0, 0, 0, 0, 0, 0]);

    // bytes follows the data: 20,000 entries of 100 bytes, then nothing.
    let big = "x".repeat(100);
    for i in 0..20_000 {
        c.send(&["XS.ADD", "big", "*", "f", &big]).unwrap();
        if i % 1000 == 999 {
            for _ in 0..1000 {
                c.read_reply().unwrap();
            }
        }
    }
    let full = int(&info(&mut c), "bytes");
    assert!(full - bytes_empty > 1_000_000, "bytes {full} (empty {bytes_empty})");
    // SYNC: Valkey 8.1+ flushes lazily by default (lazyfree-lazy-user-flush yes).
    c.cmd(&["FLUSHALL", "SYNC"]);
    let after = int(&info(&mut c), "bytes");
    assert!(after - bytes_empty < 200_000, "bytes {after} after FLUSHALL (empty {bytes_empty})");
}

#[test]
fn info_xstream_counts_adoptions_in_takeover_mode() {
    let s = Server::builder().module_args(&["takeover", "yes"]).start();
    let mut c = s.conn();
    assert_eq!(info(&mut c).get("takeover").map(String::as_str), Some("yes"));
    c.cmd(&["XADD", "s", "1-0", "f", "v"]);
    // XS.EXPORT makes it a built-in stream; the next stream command adopts it back.
    assert_eq!(c.cmd(&["XS.EXPORT", "s"]).as_int(), 1);
    assert_eq!(totals(&mut c), [0, 0, 0, 0, 0, 0]);
    assert_eq!(c.cmd(&["XLEN", "s"]).as_int(), 1);
    let m = info(&mut c);
    assert_eq!(int(&m, "streams_adopted"), 1, "{m:?}");
    assert_eq!(totals(&mut c), [1, 1, 1, 0, 0, 0]);
}

/// The running totals against a walk of the keyspace after a random workload of every kind of
/// write, key deletion, COPY, RENAME, MOVE and SWAPDB.
#[test]
fn info_totals_match_a_walk_after_random_operations() {
    let s = Server::start();
    let replica = Server::replica_of(&s);
    let mut c = s.conn();
    let seed = env_usize("XSTREAM_SEED", 7) as u64;
    let mut rng = Rng::new(seed);
    let keys = ["a", "b", "c", "d", "e", "f"];
    let groups = ["g1", "g2"];
    let consumers = ["c1", "c2", "c3"];
    let mut id = 0u64;
    for step in 0..4000 {
        if step == 1000 {
            // The histograms switched on with streams and groups in place (a rescan counts
            // them), the replica's too.
            assert!(!info(&mut c).contains_key("groups_by_lag"), "off by default");
            for conn in [&mut c, &mut replica.conn()] {
                assert_eq!(conn.cmd(&["CONFIG", "SET", "xstream.group-stats", "yes"]).text(), "OK");
            }
        }
        let k = *rng.pick(&keys);
        let g = *rng.pick(&groups);
        let cn = *rng.pick(&consumers);
        let r = match rng.below(16) {
            0..=4 => {
                id += 1;
                c.cmd(&["XS.ADD", k, &format!("{id}-0"), "f", "v"])
            }
            5 => c.cmd(&[
                "XS.ADD",
                k,
                "MAXLEN",
                "~",
                &rng.below(30).to_string(),
                &format!("{}-0", {
                    id += 1;
                    id
                }),
                "f",
                "v",
            ]),
            6 => c.cmd(&["XS.DEL", k, &format!("{}-0", rng.range(1, id + 1))]),
            7 => c.cmd(&["XS.TRIM", k, "MAXLEN", &rng.below(40).to_string()]),
            8 => c.cmd(&["XS.GROUP", "CREATE", k, g, "0", "MKSTREAM"]),
            9 => c.cmd(&["XS.READGROUP", "GROUP", g, cn, "COUNT", "3", "STREAMS", k, ">"]),
            10 => c.cmd(&["XS.ACK", k, g, &format!("{}-0", rng.range(1, id + 1))]),
            11 => c.cmd(&["XS.AUTOCLAIM", k, g, cn, "0", "0", "COUNT", "2"]),
            12 => c.cmd(&["XS.GROUP", "DELCONSUMER", k, g, cn]),
            13 => match rng.below(6) {
                0 => c.cmd(&["DEL", k]),
                1 => c.cmd(&["COPY", k, *rng.pick(&keys), "REPLACE"]),
                2 => c.cmd(&["RENAME", k, *rng.pick(&keys)]),
                3 => c.cmd(&["XS.GROUP", "DESTROY", k, g]),
                4 => c.cmd(&["MOVE", k, "1"]),
                _ => c.cmd(&["SWAPDB", "0", "1"]),
            },
            14 if rng.below(3) == 0 => match rng.below(3) {
                // Lags of every kind: read counters set, unknown, a last ID moved.
                0 => c.cmd(&["XS.GROUP", "SETID", k, g, &format!("{}-0", rng.range(0, id + 1)), "ENTRIESREAD", &rng.below(id + 1).to_string()]),
                1 => c.cmd(&["XS.GROUP", "SETID", k, g, &format!("{}-0", rng.range(0, id + 1))]),
                _ => {
                    id += rng.below(3);
                    c.cmd(&["XS.SETID", k, &format!("{id}-0"), "ENTRIESADDED", &(id + rng.below(5)).to_string()])
                }
            },
            14 => c.cmd(&["XS.ACKDEL", k, g, "DELREF", "IDS", "1", &format!("{}-0", rng.range(1, id + 1))]),
            _ => c.cmd(&["XS.DELEX", k, "DELREF", "IDS", "1", &format!("{}-0", rng.range(1, id + 1))]),
        };
        let _ = r;
    }
    let (walked, hist) = walk(&mut c);
    assert!(walked[0] > 0 && walked[1] > 0 && walked[5] > 0, "a workload that leaves nothing proves nothing: {walked:?}");
    assert!(hist.1.len() >= 2, "lags of one bucket prove little: {hist:?}");
    assert_eq!(totals(&mut c), walked, "INFO xstream totals vs a walk of the keyspace (seed {seed})");
    assert_eq!(info_group_histograms(&mut c), hist, "INFO xstream histograms vs a walk of the keyspace (seed {seed})");
    // The replica keeps its own, from what the primary sent; DEBUG RELOAD and FLUSHALL ASYNC
    // (the values freed in the lazyfree thread) start them over.
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    let mut rc = replica.conn();
    assert_eq!(walk(&mut rc).1, hist, "the replica's keyspace");
    assert_eq!(info_group_histograms(&mut rc), hist, "the replica's INFO");
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]).text(), "OK");
    lazyfree_done(&mut c);
    assert_eq!(info_group_histograms(&mut c), hist, "after DEBUG RELOAD");
    // Off: no fields, nothing kept; on again: counted afresh.
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.group-stats", "no"]).text(), "OK");
    assert!(!info(&mut c).contains_key("groups_by_pel_size"));
    c.cmd(&["XS.ADD", "a", "*", "f", "v"]);
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.group-stats", "yes"]).text(), "OK");
    let (_, hist) = walk(&mut c);
    assert_eq!(info_group_histograms(&mut c), hist, "switched off and on");
    // Other lag rules (8.0's: a group behind the first entry lags by the length, ...): every
    // stream counted again under them.
    for level in ["8.0", "valkey-8.1", "host"] {
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compat", level]).text(), "OK");
        let (_, hist) = walk(&mut c);
        assert_eq!(info_group_histograms(&mut c), hist, "xstream.compat {level}");
    }
    assert_eq!(c.cmd(&["FLUSHALL", "ASYNC"]).text(), "OK");
    let t = std::time::Instant::now();
    while info_group_histograms(&mut c) != Default::default() && t.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(info_group_histograms(&mut c), Default::default(), "after FLUSHALL ASYNC");
    report(&format!("info_section: {} groups, by PEL size {:?}, by lag {:?}", walked[3], hist.0, hist.1));
}

/// The totals and the histograms from a walk of every key of databases 0 and 1.
fn walk(c: &mut Conn) -> ([i64; 6], GroupHistograms) {
    let mut walked = [0i64; 6];
    let mut hist = GroupHistograms::default();
    for db in ["0", "1"] {
        c.cmd(&["SELECT", db]);
        for k in c.cmd(&["KEYS", "*"]).as_array().iter().map(|r| r.text()) {
            let full = c.cmd(&["XS.INFO", "STREAM", &k, "FULL", "COUNT", "1"]);
            if full.is_error() {
                continue;
            }
            walked[0] += 1;
            walked[1] += full.field("length").unwrap().as_int();
            walked[2] += full.field("radix-tree-keys").unwrap().as_int();
            let gs = full.field("groups").unwrap().as_array().to_vec();
            walked[3] += gs.len() as i64;
            for g in &gs {
                walked[4] += g.field("consumers").unwrap().as_array().len() as i64;
                walked[5] += g.field("pel-count").unwrap().as_int();
                count_group(&mut hist, g);
            }
        }
    }
    c.cmd(&["SELECT", "0"]);
    (walked, hist)
}
