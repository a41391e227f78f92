//! One RDB fixture per encoding version (issue 32, docs/rdb.md "Fixtures"): each file under
//! tests/fixtures/ named `encverN.rdb` was saved by the build that introduced encoding N (the
//! first commit of main's first-parent history with `ENCVER = N`, built by
//! tests/fixtures/make_fixtures.sh), after [`populate`] ran the commands that build knew.
//! Next to it, `encverN.expect` holds what that build answered to [`checks`] right before the
//! SAVE. This build loads the file and must answer every check byte for byte as the writer
//! did (XS.INFO STREAM FULL, the entries, DEBUG DIGEST-VALUE, the policies, the IDMP state),
//! then again after a DEBUG RELOAD (saved in this build's encoding) and a DUMP / RESTORE.
//!
//! A value of an encoding newer than this build's is refused: RESTORE answers the built-in's
//! "Bad data format", an RDB holding one does not load, and the log names the version.
//!
//! `write_fixture` (ignored; run by make_fixtures.sh with XSTREAM_MODULE set to the old build
//! and XSTREAM_FIXTURE_VERSION to N) writes the pair.

mod common;

use common::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The encodings with a fixture written by this file's writer (encoding 1's is
/// groups_encver1.rdb, checked by redis8_nack.rs: it predates the writer).
const VERSIONS: [u32; 6] = [2, 3, 4, 5, 6, 7];

fn fixture(v: u32, ext: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/encver{v}.{ext}"))
}

fn ok(c: &mut Conn, args: &[&str]) {
    let r = c.cmd(args);
    assert_eq!(r, Reply::Simple("OK".into()), "{args:?}");
}

/// The state of a fixture: what encoding `v`'s build could hold, with every section of the
/// format non-trivial. Deterministic but for the IDs of IDMP and delayed entries (`*`) and the
/// consumers' seen times, which the expect file records as the writer saw them.
/// Returns whether the build could set queue policies (the build that wrote encoding 3 last,
/// 9ec9791, does not register SETPOLICY / GETPOLICY / DEADLETTER on Redis 7.0.15: no 7.0 file
/// of encoding 3 holds a policy; the encoding 4 and 5 fixtures hold them).
fn populate(c: &mut Conn, v: u32) -> bool {
    if v >= 6 {
        ok(c, &["CONFIG", "SET", "xstream.compression", "lz4"]);
    }
    // 250 entries over three nodes, two field layouts; deletions inside nodes.
    for i in 1..=250u32 {
        let id = format!("{i}-{}", i % 3);
        let r = if i % 7 == 0 {
            c.cmd(&["XS.ADD", "s", &id, "other", &format!("{{\"event\":\"e{i}\",\"n\":{i}}}")])
        } else {
            c.cmd(&["XS.ADD", "s", &id, "f", &format!("value-{i}"), "n", &i.to_string()])
        };
        assert_eq!(r, Reply::Bulk(id.clone().into_bytes()));
    }
    for id in ["5-2", "17-2", "100-1", "101-2", "102-0", "240-0"] {
        assert_eq!(c.cmd(&["XS.DEL", "s", id]), Reply::Int(1), "XS.DEL {id}");
    }
    // A stream without groups, one with a single entry and an empty one.
    c.cmd(&["XS.ADD", "t", "7-7", "a", "b"]);
    c.cmd(&["XS.ADD", "e", "1-1", "x", "y"]);
    c.cmd(&["XS.DEL", "e", "1-1"]);
    // Groups: g1 with three consumers (one idle), deliveries at explicit times out of ID
    // order, acknowledgements, a pending entry deleted from the stream; g2 at the end.
    ok(c, &["XS.GROUP", "CREATE", "s", "g1", "0"]);
    ok(c, &["XS.GROUP", "CREATE", "s", "g2", "$", "ENTRIESREAD", "244"]);
    assert_eq!(c.cmd(&["XS.GROUP", "CREATECONSUMER", "s", "g1", "idle"]), Reply::Int(1));
    c.cmd(&["XS.READGROUP", "GROUP", "g1", "alice", "COUNT", "40", "STREAMS", "s", ">"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g1", "bob", "COUNT", "30", "STREAMS", "s", ">"]);
    for (i, id) in ["3-0", "9-0", "20-2", "33-0", "50-2", "61-1", "62-2"].iter().enumerate() {
        let t = (1_700_000_000_000u64 + 1000 * (7 - i as u64)).to_string();
        let owner = if i % 2 == 0 { "bob" } else { "alice" };
        c.cmd(&["XS.CLAIM", "s", "g1", owner, "0", id, "TIME", &t, "RETRYCOUNT", &(i + 2).to_string()]);
    }
    let acked = c.cmd(&["XS.ACK", "s", "g1", "1-1", "2-2", "4-1", "6-0", "40-1", "41-2"]);
    assert_eq!(acked, Reply::Int(6));
    assert_eq!(c.cmd(&["XS.DEL", "s", "8-2"]), Reply::Int(1));
    if v >= 2 {
        // The NACK zone (unowned, at the head of the time order) and IDMP state. An entry in
        // 2096 first: the `*` IDs after it (IDMP, delayed) are later still, so that the IDMP
        // records, which expire by their IDs' time, outlive the fixture.
        c.cmd(&["XS.ADD", "s", "4000000000000-0", "f", "future"]);
        assert_eq!(c.cmd(&["XS.NACK", "s", "g1", "FAIL", "IDS", "2", "10-1", "11-2"]), Reply::Int(2));
        for (pid, iid) in [("p1", "i1"), ("p1", "i2"), ("p2", "i1")] {
            c.cmd(&["XS.ADD", "s", "IDMP", pid, iid, "*", "f", &format!("{pid}-{iid}")]);
        }
        c.cmd(&["XS.ADD", "s", "IDMPAUTO", "p3", "*", "f", "auto"]);
    }
    let policy = [
        "XS.GROUP",
        "SETPOLICY",
        "s",
        "g1",
        "MAXDELIVERIES",
        "50",
        "DEADLETTER",
        "dlq",
        // The longest times a policy takes (31 years): nothing in the fixture falls due, and
        // the primary's CONSUMERTTL timer expires no consumer of it.
        "ACKTIMEOUT",
        "1000000000000",
        "BACKOFF",
        "2",
        "MAXBACKOFF",
        "1000000000000",
        "CONSUMERTTL",
        "1000000000000",
    ];
    let policies = v >= 3 && {
        let r = c.cmd(&policy);
        assert!(r == Reply::Simple("OK".into()) || r.to_string().contains("unknown subcommand"), "{r}");
        r == Reply::Simple("OK".into())
    };
    if policies {
        ok(c, &["XS.GROUP", "SETPOLICY", "s", "g2", "MAXDELIVERIES", "3", "DROP"]);
        assert_eq!(c.cmd(&["XS.GROUP", "DEADLETTER", "s", "g1", "12-0"]), Reply::Int(1));
    }
    if v >= 4 {
        // An age no entry reaches (its threshold lies before the epoch).
        ok(c, &["XS.CFGSET", "t", "MAXAGE", "999999999999999"]);
    }
    if v >= 5 {
        // Entries not due until 2100: g2's `>` read passes over them into its schedule.
        c.cmd(&["XS.ADD", "s", "NOTBEFORE", "4102444800000", "*", "f", "later"]);
        c.cmd(&["XS.ADD", "s", "DELAY", "3000000000000", "*", "f", "much-later"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g2", "carol", "STREAMS", "s", ">"]);
    }
    if v >= 7 {
        // Encoding 7 packs a group's records into strings of 1,024 PEL records / 2,048 IDs:
        // "big" has 2,500 pending entries (a consumer with 1,600), 417 of them NACKed, 300
        // claimed at explicit times out of ID order.
        for i in 1..=2500u32 {
            c.cmd(&["XS.ADD", "big", &format!("{i}-0"), "n", &i.to_string()]);
        }
        ok(c, &["XS.GROUP", "CREATE", "big", "g", "0"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "a", "COUNT", "1600", "STREAMS", "big", ">"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "b", "STREAMS", "big", ">"]);
        for chunk in (1..=2500u32).step_by(6).collect::<Vec<_>>().chunks(100) {
            let mut a: Vec<String> = ["XS.NACK", "big", "g", "FAIL", "IDS", &chunk.len().to_string()].iter().map(|x| x.to_string()).collect();
            a.extend(chunk.iter().map(|i| format!("{i}-0")));
            let r = c.cmd(&a.iter().map(String::as_str).collect::<Vec<_>>());
            assert_eq!(r, Reply::Int(chunk.len() as i64));
        }
        for i in (2..=2500u32).step_by(8).take(300) {
            let t = (1_700_000_000_000u64 + 7919 * u64::from(i % 97)).to_string();
            c.cmd(&["XS.CLAIM", "big", "g", "b", "0", &format!("{i}-0"), "TIME", &t, "RETRYCOUNT", &(i % 5).to_string()]);
        }
    }
    if v >= 6 {
        // Every sealed node compressed by the background step.
        let t0 = Instant::now();
        while !c.cmd(&["INFO", "xstream"]).text().lines().any(|l| l.trim_end() == "xstream_compression_queued_keys:0") {
            assert!(t0.elapsed() < Duration::from_secs(10), "compression never finished");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    policies
}

/// What the writer records and this build must answer the same. Read-only commands first;
/// the IDMP duplicates (which count a duplicate) last.
fn checks(v: u32, policies: bool) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<&str>> = vec![vec!["DBSIZE"]];
    for k in keys(v, policies) {
        out.push(vec!["XS.INFO", "STREAM", k, "FULL"]);
        out.push(vec!["XS.INFO", "STREAM", k]);
        out.push(vec!["XS.RANGE", k, "-", "+"]);
        out.push(vec!["DEBUG", "DIGEST-VALUE", k]);
    }
    if v >= 7 {
        out.push(vec!["XS.PENDING", "big", "g"]);
        out.push(vec!["XS.INFO", "STREAM", "big", "FULL", "COUNT", "3000"]);
    }
    if policies {
        out.push(vec!["XS.GROUP", "GETPOLICY", "s", "g1"]);
        out.push(vec!["XS.GROUP", "GETPOLICY", "s", "g2"]);
    }
    if v >= 2 {
        for (pid, iid) in [("p1", "i1"), ("p1", "i2"), ("p2", "i1")] {
            out.push(vec!["XS.ADD", "s", "IDMP", pid, iid, "*", "f", "again"]);
        }
        out.push(vec!["XS.ADD", "s", "IDMPAUTO", "p3", "*", "f", "auto"]);
    }
    out.into_iter().map(|a| a.into_iter().map(String::from).collect()).collect()
}

/// The keys of a fixture of encoding `v`.
fn keys(v: u32, policies: bool) -> Vec<&'static str> {
    let mut k = vec!["s", "t", "e"];
    if policies {
        k.push("dlq");
    }
    if v >= 7 {
        k.push("big");
    }
    k
}

/// The first line of an expect file: whether the writer set policies.
fn header(policies: bool) -> String {
    format!("# policies {}", if policies { "yes" } else { "no" })
}

/// The checks' replies as the expect file holds them after its header: a line each, `args`
/// joined by spaces, a tab, the reply as [`Reply`] prints it (one line: bytes are escaped).
/// XS.INFO STREAM FULL without the groups' `scheduled` (added to the reply by 11912ec, after
/// the builds of encodings 5 and 6; the schedule is in the digest, which every build computes
/// the same).
fn answers(c: &mut Conn, v: u32, policies: bool) -> Vec<String> {
    checks(v, policies)
        .iter()
        .map(|a| {
            let mut r = c.cmd(a);
            if a.last().is_some_and(|l| l == "FULL") {
                strip_field(&mut r, "scheduled");
            }
            format!("{}\t{}", a.join(" "), r)
        })
        .collect()
}

/// Writes tests/fixtures/encverN.{rdb,expect} with the module XSTREAM_MODULE names (the build of
/// encoding N): run by tests/fixtures/make_fixtures.sh, not by `make test`.
#[test]
#[ignore]
fn write_fixture() {
    let v: u32 = std::env::var("XSTREAM_FIXTURE_VERSION").expect("XSTREAM_FIXTURE_VERSION").parse().expect("a version");
    let s = Server::start();
    let mut c = s.conn();
    let policies = populate(&mut c, v);
    // Saved before the checks: the IDMP ones count duplicates, and the test runs them on what
    // was saved.
    ok(&mut c, &["SAVE"]);
    let mut expect = vec![header(policies)];
    expect.extend(answers(&mut c, v, policies));
    std::fs::copy(s.dir().join("dump.rdb"), fixture(v, "rdb")).expect("copy dump.rdb");
    std::fs::write(fixture(v, "expect"), expect.join("\n") + "\n").expect("write expect");
    report(&format!("rdb_fixtures: encver{v}.rdb and .expect written ({} checks)", expect.len()));
}

/// Each fixture loads exactly: this build answers every check as the writer did, after the
/// load, after a DEBUG RELOAD (this build's encoding) and after a DUMP / RESTORE of each key.
#[test]
fn every_encoding_loads_exactly() {
    // The writers ran on Debian's 7.0.15 and the expect files hold its reply layouts (a 7.2+
    // host adds active-time and more to XS.INFO STREAM FULL).
    if !is_host_7_0() {
        report("rdb_fixtures: every_encoding_loads_exactly skipped (the fixtures' answers are Redis 7.0's)");
        return;
    }
    for v in VERSIONS {
        let expect = std::fs::read_to_string(fixture(v, "expect")).unwrap_or_else(|e| panic!("encver{v}.expect: {e}"));
        let mut lines = expect.lines();
        let policies = match lines.next() {
            Some(h) if h == header(true) => true,
            Some(h) if h == header(false) => false,
            h => panic!("encver{v}.expect: header {h:?}"),
        };
        let expect: Vec<&str> = lines.collect();
        // Each pass from the file again: the IDMP checks count duplicates.
        for pass in ["loaded", "reloaded in this build's encoding", "restored"] {
            let mut s = Server::start();
            std::fs::copy(fixture(v, "rdb"), s.dir().join("dump.rdb")).expect("copy fixture");
            s.restart();
            let mut c = s.conn();
            match pass {
                "loaded" => {}
                "restored" => {
                    for &k in &keys(v, policies) {
                        let Reply::Bulk(payload) = c.cmd(&["DUMP", k]) else { panic!("DUMP {k}") };
                        let r = c.cmd(&[b"RESTORE".as_slice(), k.as_bytes(), b"0", &payload, b"REPLACE"]);
                        assert_eq!(r, Reply::Simple("OK".into()), "RESTORE {k}");
                    }
                }
                _ => ok(&mut c, &["DEBUG", "RELOAD"]),
            }
            let got = answers(&mut c, v, policies);
            assert_eq!(got.len(), expect.len(), "encoding {v}, {pass}: check count");
            for (g, e) in got.iter().zip(&expect) {
                assert_eq!(g, e, "encoding {v}, {pass}");
            }
        }
    }
    report(&format!("rdb_fixtures: encodings {VERSIONS:?} load exactly (loaded, reloaded, restored)"));
}

fn is_host_7_0() -> bool {
    let s = Server::start();
    let info = s.conn().cmd(&["INFO", "server"]).text();
    info.lines().any(|l| l.starts_with("redis_version:7.0.")) && !info.contains("valkey")
}

/// A DUMP payload re-tagged with encoding 8, one more than this build writes, and its CRC
/// recomputed: RESTORE refuses it as the built-in refuses a bad payload, and the log names the
/// version; an RDB holding such a value does not load (the server does not start), and its log
/// names the version too.
#[test]
fn a_newer_encoding_is_refused() {
    let mut s = Server::start();
    let mut c = s.conn();
    c.cmd(&["XS.ADD", "s", "1-1", "f", "v"]);
    let Reply::Bulk(payload) = c.cmd(&["DUMP", "s"]) else { panic!("DUMP") };
    let bumped = with_module_encver(&payload, 8);
    let r = c.cmd(&[b"RESTORE".as_slice(), b"n", b"0", &bumped]);
    assert_eq!(r, Reply::Error("ERR Bad data format".into()));
    assert!(s.log_tail(50).contains("encoding version 8"), "{}", s.log_tail(20));
    // The same value in an RDB: saved by this build, then its type's encoding rewritten.
    ok(&mut c, &["SAVE"]);
    let rdb = std::fs::read(s.dir().join("dump.rdb")).expect("dump.rdb");
    std::fs::write(s.dir().join("dump.rdb"), rewrite_rdb_encver(&rdb, module_id(&payload), 8)).expect("write");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.restart()));
    assert!(r.is_err(), "a server loaded an RDB of encoding 8");
    let log = s.log_tail(200);
    assert!(log.contains("xstream: refusing stream payload: encoding version 8 is newer than this build's (7)"), "{log}");
    report("rdb_fixtures: encoding 8 refused by RESTORE and at RDB load, the log names the version");
}

/// The module type ID of a DUMP payload of ours: type byte 7 (RDB_TYPE_MODULE_2), then the ID
/// as a 64-bit length (0x81 + 8 bytes big-endian): the type's name signature and, in its low 10
/// bits, the encoding version.
fn module_id(payload: &[u8]) -> u64 {
    assert_eq!(&payload[..2], &[7, 0x81], "a module value's DUMP");
    u64::from_be_bytes(payload[2..10].try_into().unwrap())
}

/// The payload with its encoding version set to `v` and its CRC recomputed.
fn with_module_encver(payload: &[u8], v: u64) -> Vec<u8> {
    let (body, ver) = dump_split(payload).expect("a valid DUMP payload");
    let mut body = body.to_vec();
    let id = (module_id(payload) & !1023) | v;
    body[2..10].copy_from_slice(&id.to_be_bytes());
    dump_build(&body, ver)
}

/// An RDB file with every value of module type `id` (the type's ID as a 64-bit length: 0x81 +
/// 8 bytes big-endian) re-tagged with encoding `v`, its checksum
/// (the last 8 bytes, CRC-64 of the rest) recomputed.
fn rewrite_rdb_encver(rdb: &[u8], id: u64, v: u64) -> Vec<u8> {
    // In an RDB the type byte comes before the key's name, the ID opens the value.
    let mut from = vec![0x81u8];
    from.extend_from_slice(&id.to_be_bytes());
    let mut out = rdb[..rdb.len() - 8].to_vec();
    let mut found = 0;
    let mut i = 0;
    while i + from.len() <= out.len() {
        if out[i..i + from.len()] == from[..] {
            out[i + 1..i + 9].copy_from_slice(&((id & !1023) | v).to_be_bytes());
            found += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(found > 0, "no value of the type in the RDB");
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}
