//! Adoption of built-in streams in takeover mode (`takeover yes`, `xstream.adopt yes`, the
//! default): a server switched to takeover on an existing dataset serves its streams.
//!
//! - `rdb_from_plain_server`: a plain redis-server writes an RDB with streams in two DBs
//!   (tombstones, several nodes, groups, consumers, PELs with XCLAIMed delivery counts and an
//!   old delivery time, a NOACK group, a group with unknown entries-read, empty streams with
//!   groups, TTLs). A takeover server loading it adopts every stream at the end of loading (log
//!   line with the exact counts; `OBJECT ENCODING` is `raw`, the module type's, before any
//!   stream command ran). XINFO STREAM [FULL], XRANGE, XREVRANGE, XLEN, XINFO GROUPS, XPENDING
//!   (summary) and PEXPIRETIME are byte-identical to the plain server's, RESP2 and RESP3; only
//!   the idle times of XPENDING extended / XINFO CONSUMERS are compared by class (they are
//!   `now - stored time` on two clocks); TTL within 2 s. Then the same writes on both (XADD,
//!   XREADGROUP, XACK, XCLAIM, XDEL, XTRIM) give the same replies and the same state.
//! - `restore_stock_payload`: RESTORE of a plain server's DUMP into a takeover server (with a
//!   takeover replica attached): the next command, read-only or not, adopts it; the key then
//!   answers like the plain server's; the primary propagated `XS.IMPORT` before the command, so
//!   the replica holds the same module stream (XINFO FULL, digest, PEXPIRETIME). A WATCH on a
//!   key adopted by another client's read stays valid (the content did not change).
//! - `replica_of_plain_primary`: a takeover replica of a plain primary (disk and diskless swapdb
//!   load) adopts every stream after the full sync; later XADD / XREADGROUP / XACK / XCLAIM /
//!   XDEL on the primary reach the adopted keys; XINFO STREAM FULL equal but for seen-time.
//! - `replayed_import_on_adopted_key`: a takeover primary with `adopt no` keeps a built-in key
//!   that its takeover replica adopted at its own load end; the primary's `XS.IMPORT` reaches
//!   the replica as a no-op success (the replica stays in sync) while a user's XS.IMPORT on a
//!   module key keeps its error.
//! - `aof_restart_after_adoption`: appendonly with and without RDB preamble: keys RESTOREd,
//!   one adopted by a write, one by a read, one after an AOF rewrite, one never touched;
//!   restart: same contents (DEBUG DIGEST-VALUE, XINFO STREAM FULL), every key ours.
//! - `adopt_no`: `adopt no` keeps the WRONGTYPE ... XS.IMPORT error (RDB and RESTORE); without
//!   takeover, `XS.*` commands on a built-in stream stay plain WRONGTYPE.
//! - `many_keys_many_dbs`: 1,800 keys of three types in DBs 0, 5 and 15: the 600 streams are
//!   adopted, the strings and hashes are untouched.
//! - `invalid_payload_left_alone`: a built-in stream that the plain server accepted (shallow
//!   RESTORE check) but our validation refuses stays built-in at the load end and on the fly,
//!   with a log line; the other keys are adopted and the server lives.
//! - `measure_adoption_1m` (ignored: run by hand): load time of a 1,000,000-entry built-in
//!   stream on a plain server vs load + adoption on a takeover server.

mod common;

use common::groups::{self, now_ms, ClockKind, Node};
use common::*;
use std::time::{Duration, Instant};

const TAKEOVER_WRONGTYPE: &str =
    "WRONGTYPE this key holds a built-in Redis stream; convert it with XS.IMPORT <key> to use it while xstream serves the stream commands";

fn args(line: &str) -> Vec<String> {
    line.split(' ').filter(|t| !t.is_empty()).map(|t| t.to_string()).collect()
}

fn ok(c: &mut Conn, line: &str) -> Reply {
    let r = c.cmd(&args(line));
    assert!(!r.is_error(), "{line}: {r}");
    r
}

fn takeover() -> ServerBuilder {
    Server::builder().module_args(&["takeover", "yes"])
}

/// `OBJECT ENCODING`: `raw` for the module type, `stream` for the built-in (the command does
/// not go through the stream commands, so it adopts nothing).
fn encoding(c: &mut Conn, key: &str) -> String {
    c.cmd(&["OBJECT", "ENCODING", key]).text()
}

/// The numbers of the adoption line at the end of loading: (keys, entries), the last one.
fn adoption_line(s: &Server) -> Option<(u64, u64)> {
    let log = s.log();
    let line = log.lines().rev().find(|l| l.contains("xstream: adopted "))?;
    let rest = &line[line.find("xstream: adopted ")? + "xstream: adopted ".len()..];
    let keys: u64 = rest.split(' ').next()?.parse().ok()?;
    let entries: u64 = rest[rest.find('(')? + 1..].split(' ').next()?.parse().ok()?;
    Some((keys, entries))
}

/// Waits for the adoption line (the end-of-load event runs before the server answers, but a
/// replica's full sync is asynchronous).
fn wait_adoption_line(s: &Server, lines_before: usize) -> (u64, u64) {
    let t0 = Instant::now();
    loop {
        let log = s.log();
        let n = log.lines().filter(|l| l.contains("xstream: adopted ")).count();
        if n > lines_before {
            return adoption_line(s).unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no adoption line in the log:\n{}", s.log_tail(40));
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn adoption_lines(s: &Server) -> usize {
    s.log().lines().filter(|l| l.contains("xstream: adopted ")).count()
}

/// A key of a DB with its groups (and their consumers) for the comparisons.
struct K {
    db: &'static str,
    key: &'static str,
    groups: &'static [&'static str],
}

/// The dataset written by the plain server: every kind of state a stream can hold.
const KEYS: &[K] = &[
    K { db: "0", key: "s1", groups: &["g1", "g2", "g3", "g4"] },
    K { db: "0", key: "empty-deleted", groups: &["eg"] },
    K { db: "0", key: "empty-mk", groups: &["g"] },
    K { db: "0", key: "ttl", groups: &[] },
    K { db: "1", key: "s1", groups: &["other"] },
    K { db: "1", key: "bin", groups: &[] },
];

/// Builds the dataset (stream-node-max-entries 4 on the server: several nodes).
fn build_dataset(c: &mut Conn) -> u64 {
    ok(c, "CONFIG SET stream-node-max-entries 4");
    ok(c, "SELECT 0");
    for i in 1..=30 {
        ok(c, &format!("XADD s1 {i}-1 f v{i} g w{i} h x"));
    }
    for id in ["3-1", "7-1", "8-1", "16-1", "30-1"] {
        ok(c, &format!("XDEL s1 {id}"));
    }
    ok(c, "XGROUP CREATE s1 g1 0");
    ok(c, "XGROUP CREATE s1 g2 $");
    ok(c, "XGROUP CREATE s1 g3 0");
    // g4: entries-read unknown (created at an ID inside the stream, after deletions).
    ok(c, "XGROUP CREATE s1 g4 12-1");
    ok(c, "XREADGROUP GROUP g1 c1 COUNT 6 STREAMS s1 >");
    ok(c, "XREADGROUP GROUP g1 c2 COUNT 4 STREAMS s1 >");
    ok(c, "XACK s1 g1 2-1 5-1");
    // Delivery counts > 1 and an old delivery time.
    ok(c, "XCLAIM s1 g1 c3 0 1-1 4-1");
    ok(c, "XCLAIM s1 g1 c3 0 6-1 TIME 1600000000000 RETRYCOUNT 7");
    ok(c, "XREADGROUP GROUP g1 c2 COUNT 1 STREAMS s1 0");
    // A PEL entry whose data is deleted afterwards.
    ok(c, "XDEL s1 9-1");
    ok(c, "XGROUP CREATECONSUMER s1 g1 idle-one");
    ok(c, "XGROUP CREATECONSUMER s1 g2 nobody");
    ok(c, "XREADGROUP GROUP g3 n1 NOACK COUNT 3 STREAMS s1 >");
    ok(c, "XREADGROUP GROUP g4 z COUNT 2 STREAMS s1 >");
    ok(c, "XSETID s1 30-1 ENTRIESADDED 40 MAXDELETEDID 30-1");
    // An empty stream with a tombstone and a group, and one created empty by MKSTREAM.
    ok(c, "XADD empty-deleted 5-5 a b");
    ok(c, "XGROUP CREATE empty-deleted eg 0");
    ok(c, "XREADGROUP GROUP eg ec STREAMS empty-deleted >");
    ok(c, "XDEL empty-deleted 5-5");
    ok(c, "XGROUP CREATE empty-mk g $ MKSTREAM");
    // A key with a TTL (absolute time, far enough not to expire during the test).
    ok(c, "XADD ttl 1-1 k v");
    ok(c, "XADD ttl 2-1 k w");
    let at = now_ms() + 3_600_000;
    ok(c, &format!("PEXPIREAT ttl {at}"));
    ok(c, "SET plain-string hello");
    ok(c, "SELECT 1");
    for i in 1..=9 {
        ok(c, &format!("XADD s1 100-{i} only-in db1"));
    }
    ok(c, "XGROUP CREATE s1 other 0");
    ok(c, "XREADGROUP GROUP other o COUNT 5 STREAMS s1 >");
    let bin: &[&[u8]] = &[b"XADD", b"bin", b"1-1", b"\x00\xff\r\n", b"\x01 2 3", b"-17", b"12345678901234567890"];
    assert!(!c.cmd(bin).is_error());
    ok(c, "SELECT 0");
    // Live entries in all streams (the adoption line counts them): s1 30 - 6 deleted, ttl 2,
    // db1 s1 9, bin 1.
    24 + 2 + 9 + 1
}

/// A reply to `cmd` in comparable form: idle times (XPENDING extended, XINFO CONSUMERS) by
/// class; XINFO STREAM FULL exact unless `full_clock` (then delivery and seen times by class).
fn view(c: &mut Conn, cmd: &[String], full_clock: bool) -> String {
    let raw = c.raw(cmd);
    let mut n = Node::parse(&raw);
    let kind = groups::clock_kind(cmd);
    if kind != ClockKind::InfoFull || full_clock {
        groups::norm_clock(&mut n, kind, now_ms());
    }
    groups::show(&n.to_bytes(), 4000)
}

/// The commands compared for one key.
fn key_commands(k: &K) -> Vec<Vec<String>> {
    let key = k.key;
    let mut v: Vec<Vec<String>> = [
        format!("XINFO STREAM {key} FULL"),
        format!("XINFO STREAM {key} FULL COUNT 2"),
        format!("XINFO STREAM {key}"),
        format!("XRANGE {key} - +"),
        format!("XREVRANGE {key} + - COUNT 3"),
        format!("XLEN {key}"),
        format!("XINFO GROUPS {key}"),
        format!("PEXPIRETIME {key}"),
    ]
    .iter()
    .map(|l| args(l))
    .collect();
    for g in k.groups {
        v.push(args(&format!("XPENDING {key} {g}")));
        v.push(args(&format!("XPENDING {key} {g} - + 100")));
        v.push(args(&format!("XPENDING {key} {g} IDLE 0 - + 100")));
        v.push(args(&format!("XINFO CONSUMERS {key} {g}")));
    }
    v
}

/// Every comparable reply of every key (RESP2 on `c2`, RESP3 on `c3`), by command line.
fn snapshot(c2: &mut Conn, c3: &mut Conn, full_clock: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for k in KEYS {
        for c in [&mut *c2, &mut *c3] {
            ok(c, &format!("SELECT {}", k.db));
        }
        for cmd in key_commands(k) {
            let line = format!("db{} {}", k.db, fmt_cmd(&cmd));
            out.push((format!("{line} (RESP2)"), view(c2, &cmd, full_clock)));
            out.push((format!("{line} (RESP3)"), view(c3, &cmd, full_clock)));
        }
    }
    for c in [c2, c3] {
        ok(c, "SELECT 0");
    }
    out
}

fn diff(what: &str, a: &[(String, String)], b: &[(String, String)]) -> Vec<String> {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).filter(|((_, x), (_, y))| x != y).map(|((l, x), (_, y))| format!("{what}: {l}\n    plain:    {x}\n    takeover: {y}")).collect()
}

fn conns(s: &Server) -> (Conn, Conn) {
    let c2 = s.conn();
    let mut c3 = s.conn();
    c3.hello3();
    (c2, c3)
}

/// Writes sent to both servers after the load, with the replies compared.
const WRITES: &[&str] = &[
    "XADD s1 31-1 f new",
    "XREADGROUP GROUP g1 c1 COUNT 3 STREAMS s1 >",
    "XREADGROUP GROUP g2 c9 STREAMS s1 >",
    "XACK s1 g1 1-1 10-1 31-1",
    "XCLAIM s1 g1 c2 0 4-1 6-1 JUSTID",
    "XCLAIM s1 g1 c2 0 9-1",
    "XAUTOCLAIM s1 g1 c4 0 0 COUNT 3",
    "XDEL s1 12-1",
    "XTRIM s1 MAXLEN 20",
    "XADD empty-deleted 6-1 a b",
    "XREADGROUP GROUP eg ec STREAMS empty-deleted >",
    "XADD empty-mk 1-1 x y",
    "XGROUP SETID s1 g4 0",
    "XSETID ttl 9-9",
];

#[test]
fn rdb_from_plain_server() {
    let plain = Server::start_plain();
    let (mut p2, mut p3) = conns(&plain);
    let entries = build_dataset(&mut p2);
    ok(&mut p2, "SAVE");
    let want = snapshot(&mut p2, &mut p3, false);

    let mut t = takeover().arg("--stream-node-max-entries", "4").start();
    std::fs::copy(plain.dir().join("dump.rdb"), t.dir().join("dump.rdb")).unwrap();
    t.restart();
    let (mut t2, mut t3) = conns(&t);
    // Adopted at the end of loading: before any stream command ran.
    assert_eq!(adoption_line(&t), Some((6, entries)), "log:\n{}", t.log_tail(20));
    for k in KEYS {
        ok(&mut t2, &format!("SELECT {}", k.db));
        assert_eq!(encoding(&mut t2, k.key), "raw", "db{} {}: not adopted", k.db, k.key);
        assert!(!t2.cmd(&["XS.EXPORT", k.key]).is_error());
        assert_eq!(encoding(&mut t2, k.key), "stream");
        assert!(!t2.cmd(&["XS.IMPORT", k.key]).is_error());
    }
    ok(&mut t2, "SELECT 0");
    assert_eq!(t2.cmd(&["GET", "plain-string"]), Reply::Bulk(b"hello".to_vec()));
    let got = snapshot(&mut t2, &mut t3, false);
    let mut bad = diff("after load", &want, &got);
    for k in KEYS {
        ok(&mut p2, &format!("SELECT {}", k.db));
        ok(&mut t2, &format!("SELECT {}", k.db));
        let (a, b) = (p2.cmd(&["TTL", k.key]).as_int(), t2.cmd(&["TTL", k.key]).as_int());
        let (pa, pb) = (p2.cmd(&["PTTL", k.key]).as_int(), t2.cmd(&["PTTL", k.key]).as_int());
        if (a - b).abs() > 2 || (pa < 0) != (pb < 0) || (pa - pb).abs() > 2000 {
            bad.push(format!("db{} {}: TTL {a} vs {b}, PTTL {pa} vs {pb}", k.db, k.key));
        }
    }
    ok(&mut p2, "SELECT 0");
    ok(&mut t2, "SELECT 0");

    // The same writes on both.
    for w in WRITES {
        let (a, b) = (p2.cmd(&args(w)), t2.cmd(&args(w)));
        if a != b {
            bad.push(format!("{w}\n    plain:    {a}\n    takeover: {b}"));
        }
    }
    let want = snapshot(&mut p2, &mut p3, true);
    let got = snapshot(&mut t2, &mut t3, true);
    bad.extend(diff("after the writes", &want, &got));
    assert!(bad.is_empty(), "{} differences:\n{}", bad.len(), bad.join("\n"));
}

/// Many keys of every kind in several DBs (RM_Scan runs in many steps): every built-in stream
/// is adopted, nothing else is touched.
#[test]
fn many_keys_many_dbs() {
    let plain = Server::start_plain();
    let mut p = plain.conn();
    let mut streams = 0u64;
    for db in ["0", "5", "15"] {
        ok(&mut p, &format!("SELECT {db}"));
        let mut buf = Vec::new();
        for i in 0..600 {
            let k = format!("k{i}");
            match i % 3 {
                0 => buf.extend(Conn::encode(&["XADD", &k, "1-1", "f", "v"])),
                1 => buf.extend(Conn::encode(&["SET", &k, "v"])),
                _ => buf.extend(Conn::encode(&["HSET", &k, "f", "v"])),
            }
        }
        p.send_bytes(&buf).unwrap();
        for _ in 0..600 {
            assert!(!p.read_reply().unwrap().0.is_error());
        }
        streams += 200;
    }
    ok(&mut p, "SAVE");
    let mut t = takeover().start();
    std::fs::copy(plain.dir().join("dump.rdb"), t.dir().join("dump.rdb")).unwrap();
    t.restart();
    assert_eq!(adoption_line(&t), Some((streams, streams)));
    let mut c = t.conn();
    for db in ["0", "5", "15"] {
        ok(&mut c, &format!("SELECT {db}"));
        for i in 0..600 {
            let want = match i % 3 {
                0 => "raw",
                1 => "embstr",
                _ => "listpack",
            };
            assert_eq!(encoding(&mut c, &format!("k{i}")), want, "db {db} k{i}");
        }
    }
}

/// A plain server's key, its DUMP payload and its views.
fn plain_key(c: &mut Conn, key: &str, n: usize, with_ttl: bool) -> Vec<u8> {
    for i in 1..=n {
        ok(c, &format!("XADD {key} {i}-0 field value{i}"));
    }
    ok(c, &format!("XDEL {key} 2-0"));
    ok(c, &format!("XGROUP CREATE {key} g 0"));
    ok(c, &format!("XREADGROUP GROUP g alice COUNT 3 STREAMS {key} >"));
    ok(c, &format!("XCLAIM {key} g bob 0 3-0 TIME 1600000000000 RETRYCOUNT 4"));
    if with_ttl {
        ok(c, &format!("PEXPIREAT {key} {}", now_ms() + 7_200_000));
    }
    c.cmd(&["DUMP", key]).as_bytes().unwrap().to_vec()
}

fn restore(c: &mut Conn, key: &str, payload: &[u8], abs_ttl: Option<i64>) {
    let ttl = abs_ttl.unwrap_or(0).to_string();
    let mut a: Vec<&[u8]> = vec![b"RESTORE", key.as_bytes(), ttl.as_bytes(), payload];
    if abs_ttl.is_some() {
        a.push(b"ABSTTL");
    }
    assert_eq!(c.cmd(&a), Reply::Simple("OK".into()), "RESTORE {key}");
}

fn pexpiretime(c: &mut Conn, key: &str) -> Option<i64> {
    match c.cmd(&["PEXPIRETIME", key]).as_int() {
        t if t < 0 => None,
        t => Some(t),
    }
}

#[test]
fn restore_stock_payload() {
    let plain = Server::start_plain();
    let mut p = plain.conn();
    let mut payloads = Vec::new();
    for (k, ttl) in [("w", false), ("r", true), ("multi", false), ("script", false)] {
        let d = plain_key(&mut p, k, 12, ttl);
        payloads.push((k, d, pexpiretime(&mut p, k)));
    }
    let t = takeover().start();
    let replica = Server::replica_of(&t);
    let mut c = t.conn();
    let mut rc = replica.conn();
    for (k, d, ttl) in &payloads {
        restore(&mut c, k, d, *ttl);
        assert_eq!(encoding(&mut c, k), "stream");
    }
    // A write adopts it: equal to the plain server's after the same write.
    let full = |c: &mut Conn, k: &str| view(c, &args(&format!("XINFO STREAM {k} FULL")), false);
    let want_w = full(&mut p, "w");
    for c in [&mut p, &mut c] {
        assert_eq!(c.cmd(&["XADD", "w", "100-0", "new", "entry"]), Reply::Bulk(b"100-0".to_vec()));
    }
    assert_eq!(encoding(&mut c, "w"), "raw");
    // A read adopts it too (the read's key is opened for writing for the conversion).
    let want_r = full(&mut p, "r");
    assert_eq!(c.raw(&["XRANGE", "r", "-", "+"]), p.raw(&["XRANGE", "r", "-", "+"]));
    assert_eq!(encoding(&mut c, "r"), "raw");
    assert_eq!(full(&mut c, "r"), want_r);
    assert_eq!(pexpiretime(&mut c, "r"), payloads[1].2);
    // From MULTI and from a script.
    ok(&mut c, "MULTI");
    c.cmd(&["XLEN", "multi"]);
    c.cmd(&["XADD", "multi", "200-0", "a", "b"]);
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(vec![Reply::Int(11), Reply::Bulk(b"200-0".to_vec())]));
    let r = c.cmd(&["EVAL", "return redis.call('XINFO', 'STREAM', KEYS[1], 'FULL')", "1", "script"]);
    assert!(!r.is_error(), "{r}");
    assert_eq!(encoding(&mut c, "script"), "raw");
    // The conversion does not change the content: a WATCH on the key stays valid.
    restore(&mut c, "watched", &payloads[0].1, None);
    let mut other = t.conn();
    ok(&mut other, "WATCH watched");
    assert_eq!(c.cmd(&["XLEN", "watched"]), Reply::Int(11));
    assert_eq!(encoding(&mut c, "watched"), "raw");
    ok(&mut other, "MULTI");
    other.cmd(&["XLEN", "watched"]);
    assert_eq!(other.cmd(&["EXEC"]), Reply::Array(vec![Reply::Int(11)]));
    // Same state as the plain server after the same commands.
    assert_eq!(full(&mut c, "w"), full(&mut p, "w"));
    assert_ne!(full(&mut c, "w"), want_w);
    ok(&mut p, "XADD multi 200-0 a b");
    for k in ["w", "r", "multi", "script"] {
        for cmd in [format!("XINFO STREAM {k} FULL"), format!("XRANGE {k} - +"), format!("XPENDING {k} g - + 10")] {
            let cmd = args(&cmd);
            assert_eq!(view(&mut c, &cmd, false), view(&mut p, &cmd, false), "{}", fmt_cmd(&cmd));
        }
    }
    // The replica followed: XS.IMPORT went ahead of each write ("w", "multi"). The keys only
    // read ("r", "script", "watched") propagated nothing (see read_adoption_while_writes_are_paused): the
    // replica's copies are built-in until a read there converts them, which the first view does.
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert!(rc.ping());
    for k in ["w", "multi"] {
        assert_eq!(encoding(&mut rc, k), "raw", "replica {k}");
    }
    for k in ["r", "script", "watched"] {
        assert_eq!(encoding(&mut rc, k), "stream", "replica {k}");
    }
    for k in ["w", "r", "multi", "script", "watched"] {
        for cmd in [args(&format!("XINFO STREAM {k} FULL")), args(&format!("DEBUG DIGEST-VALUE {k}")), args(&format!("PEXPIRETIME {k}"))] {
            assert_eq!(c.raw(&cmd), rc.raw(&cmd), "replica: {}", fmt_cmd(&cmd));
        }
    }
    assert_eq!(c.raw(&["DEBUG", "DIGEST"]), rc.raw(&["DEBUG", "DIGEST"]));
    assert!(!replica.log_contains("CRITICAL"), "{}", replica.log_tail(30));
}

#[test]
fn replica_of_plain_primary() {
    for load in ["disabled", "swapdb"] {
        let plain = Server::start_plain();
        let (mut p2, mut p3) = conns(&plain);
        let entries = build_dataset(&mut p2);
        let r = takeover().arg("--stream-node-max-entries", "4").arg("--repl-diskless-load", load).start();
        let before = adoption_lines(&r);
        let mut rc = r.conn();
        ok(&mut rc, &format!("REPLICAOF 127.0.0.1 {}", plain.port()));
        r.wait_link_up(Duration::from_secs(30));
        assert_eq!(wait_adoption_line(&r, before), (6, entries), "{load}");
        for k in KEYS {
            ok(&mut rc, &format!("SELECT {}", k.db));
            assert_eq!(encoding(&mut rc, k.key), "raw", "{load}: db{} {}", k.db, k.key);
        }
        ok(&mut rc, "SELECT 0");
        let (mut r2, mut r3) = conns(&r);
        let mut bad = diff(&format!("{load}, after the sync"), &snapshot(&mut p2, &mut p3, false), &snapshot(&mut r2, &mut r3, false));
        // A plain replica of the same primary: what a 7.0 replica holds after the writes (the
        // replicated XCLAIM ... LASTID does not carry entries-read, so the primary's own
        // entries-read / lag can differ from any replica's).
        let plain_replica = Server::replica_of(&plain);
        let mut pr = plain_replica.conn();
        for w in WRITES {
            ok(&mut p2, w);
        }
        ok(&mut p2, "XGROUP CREATECONSUMER s1 g2 late");
        ok(&mut p2, "XGROUP DELCONSUMER s1 g1 idle-one");
        assert_eq!(p2.cmd(&["WAIT", "2", "5000"]), Reply::Int(2));
        assert!(r2.ping() && pr.ping());
        // Seen-times are each server's clock on 7.0 (not replicated); delivery times are.
        for k in KEYS {
            for c in [&mut p2, &mut r2, &mut pr] {
                ok(c, &format!("SELECT {}", k.db));
            }
            for cmd in [
                args(&format!("XINFO STREAM {} FULL", k.key)),
                args(&format!("XRANGE {} - +", k.key)),
                args(&format!("XINFO GROUPS {} ", k.key)),
                args(&format!("PEXPIRETIME {}", k.key)),
            ] {
                let norm = |c: &mut Conn, group_counters: bool| {
                    let mut n = Node::parse(&c.raw(&cmd));
                    groups::norm_seen_times(&mut n, now_ms());
                    if group_counters {
                        mark_group_counters(&mut n);
                    }
                    groups::show(&n.to_bytes(), 4000)
                };
                let (a, b, p) = (norm(&mut pr, false), norm(&mut r2, false), norm(&mut p2, true));
                if a != b {
                    bad.push(format!("{load}: db{} {}\n    plain replica:    {a}\n    takeover replica: {b}", k.db, fmt_cmd(&cmd)));
                }
                let b = norm(&mut r2, true);
                if p != b {
                    bad.push(format!("{load}: db{} {}\n    primary: {p}\n    replica: {b}", k.db, fmt_cmd(&cmd)));
                }
            }
        }
        assert!(bad.is_empty(), "{} differences:\n{}", bad.len(), bad.join("\n"));
        assert!(!r.log_contains("cannot adopt"), "{}", r.log_tail(30));
    }
}

/// Replaces the groups' `entries-read` and `lag` (XINFO STREAM FULL, XINFO GROUPS) by a marker.
fn mark_group_counters(n: &mut Node) {
    let list = if n.field("groups").is_some() { n.field_mut("groups").unwrap() } else { n };
    let groups: Vec<&mut Node> = if list.t == b'*' { list.kids.iter_mut().collect() } else { Vec::new() };
    for g in groups {
        for f in ["entries-read", "lag"] {
            if let Some(v) = g.field_mut(f) {
                *v = Node::parse(b"+COUNTER\r\n");
            }
        }
    }
}

#[test]
fn replayed_import_on_adopted_key() {
    let plain = Server::start_plain();
    let mut p = plain.conn();
    let d = plain_key(&mut p, "k", 10, false);
    let primary = Server::builder().module_args(&["takeover", "yes", "adopt", "no"]).start();
    let mut c = primary.conn();
    restore(&mut c, "k", &d, None);
    assert_eq!(c.cmd(&["XLEN", "k"]), Reply::Error(TAKEOVER_WRONGTYPE.into()));
    // The replica adopts at the end of its full sync.
    let r = takeover().start();
    let mut rc = r.conn();
    ok(&mut rc, &format!("REPLICAOF 127.0.0.1 {}", primary.port()));
    r.wait_link_up(Duration::from_secs(30));
    assert_eq!(wait_adoption_line(&r, 0), (1, 9));
    assert_eq!(encoding(&mut rc, "k"), "raw");
    assert_eq!(encoding(&mut c, "k"), "stream");
    // The primary's XS.IMPORT reaches a key already ours on the replica: a no-op success.
    assert_eq!(c.cmd(&["XS.IMPORT", "k"]), Reply::Int(9));
    ok(&mut c, "XADD k 50-0 after import");
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert!(rc.ping());
    for cmd in [args("XINFO STREAM k FULL"), args("DEBUG DIGEST-VALUE k"), args("XRANGE k - +")] {
        assert_eq!(c.raw(&cmd), rc.raw(&cmd), "{}", fmt_cmd(&cmd));
    }
    assert!(!r.log_contains("CRITICAL"), "{}", r.log_tail(30));
    // A user's XS.IMPORT on a module key keeps its error.
    assert_eq!(c.cmd(&["XS.IMPORT", "k"]), Reply::Error("ERR the key already holds an xstream stream".into()));
}

#[test]
fn aof_restart_after_adoption() {
    for preamble in ["yes", "no"] {
        let plain = Server::start_plain();
        let mut p = plain.conn();
        let keys = ["by-write", "by-read", "after-rewrite", "untouched"];
        let payloads: Vec<(&str, Vec<u8>, Option<i64>)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let d = plain_key(&mut p, k, 8 + i, i % 2 == 1);
                let t = pexpiretime(&mut p, k);
                (*k, d, t)
            })
            .collect();
        let mut t = takeover().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", preamble).start();
        let mut c = t.conn();
        for (k, d, ttl) in &payloads[..2] {
            restore(&mut c, k, d, *ttl);
        }
        // A rewrite while the keys are built-in: the base holds them as the built-in writes
        // them (RDB preamble, or XADD ... commands replayed by the built-in without the filter).
        ok(&mut c, "BGREWRITEAOF");
        wait_persistence_idle(&mut c, Duration::from_secs(30));
        for (k, d, ttl) in &payloads[2..] {
            restore(&mut c, k, d, *ttl);
        }
        // Adopted on the fly, through the standard names (XS.IMPORT logged ahead of the writes).
        ok(&mut c, "XADD by-write 100-0 f v");
        ok(&mut c, "XREADGROUP GROUP g carol COUNT 2 STREAMS by-write >");
        ok(&mut c, "XACK by-write g 1-0");
        ok(&mut c, "XRANGE by-read - +");
        ok(&mut c, "XADD after-rewrite 100-0 f v");
        assert_eq!(encoding(&mut c, "untouched"), "stream");
        let state = |c: &mut Conn| -> Vec<(String, String)> {
            // Not `untouched`: a command would adopt it now.
            keys[..3]
                .iter()
                .flat_map(|k| [args(&format!("DEBUG DIGEST-VALUE {k}")), args(&format!("XINFO STREAM {k} FULL")), args(&format!("PEXPIRETIME {k}"))])
                .map(|cmd| {
                    let mut n = Node::parse(&c.raw(&cmd));
                    // Deliveries replay as XCLAIM ... TIME (exact); seen-time is the replay's clock.
                    groups::norm_seen_times(&mut n, now_ms());
                    (fmt_cmd(&cmd), groups::show(&n.to_bytes(), 4000))
                })
                .collect()
        };
        // `untouched` is compared with the plain server's after the restart.
        let untouched_plain = view(&mut p, &args("XINFO STREAM untouched FULL"), false);
        let before = state(&mut c);
        t.restart();
        let mut c = t.conn();
        for k in keys {
            assert_eq!(encoding(&mut c, k), "raw", "preamble {preamble}: {k} after restart");
        }
        let after = state(&mut c);
        assert_eq!(before, after, "preamble {preamble}: contents after the restart");
        assert_eq!(view(&mut c, &args("XINFO STREAM untouched FULL"), false), untouched_plain);
        assert_eq!(pexpiretime(&mut c, "untouched"), payloads[3].2);
        assert!(!t.log_contains("cannot adopt"), "{}", t.log_tail(30));
        // `untouched` (10 entries) and `by-read` (8: a read converts without logging XS.IMPORT)
        // came back built-in from the AOF and were adopted at the end of loading.
        assert_eq!(adoption_line(&t), Some((2, 18)), "preamble {preamble}:\n{}", t.log_tail(20));
    }
}

#[test]
fn adopt_no() {
    let plain = Server::start_plain();
    let mut p = plain.conn();
    let d = plain_key(&mut p, "k", 5, false);
    ok(&mut p, "SAVE");
    let want = Reply::Error(TAKEOVER_WRONGTYPE.into());

    let mut t = Server::builder().module_args(&["takeover", "yes", "adopt", "no"]).start();
    let mut c = t.conn();
    assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.adopt"]), Reply::Array(vec![Reply::Bulk(b"xstream.adopt".to_vec()), Reply::Bulk(b"no".to_vec())]));
    restore(&mut c, "r", &d, None);
    for l in ["XADD r * a b", "XRANGE r - +", "XLEN r", "XINFO STREAM r FULL"] {
        assert_eq!(c.cmd(&args(l)), want, "{l}");
    }
    assert_eq!(encoding(&mut c, "r"), "stream");
    std::fs::copy(plain.dir().join("dump.rdb"), t.dir().join("dump.rdb")).unwrap();
    t.restart();
    let mut c = t.conn();
    assert_eq!(adoption_line(&t), None);
    assert_eq!(c.cmd(&["XRANGE", "k", "-", "+"]), want);
    assert_eq!(encoding(&mut c, "k"), "stream");
    // Switched on at run time: the next command adopts.
    ok(&mut c, "CONFIG SET xstream.adopt yes");
    assert_eq!(c.raw(&["XRANGE", "k", "-", "+"]), p.raw(&["XRANGE", "k", "-", "+"]));
    assert_eq!(encoding(&mut c, "k"), "raw");

    // Without takeover: the default `adopt yes` does nothing.
    let m = Server::builder().start();
    let mut c = m.conn();
    assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.adopt"]).as_array()[1], Reply::Bulk(b"yes".to_vec()));
    restore(&mut c, "k", &d, None);
    assert_eq!(c.cmd(&["XS.RANGE", "k", "-", "+"]), Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into()));
    assert_eq!(encoding(&mut c, "k"), "stream");
}

/// A built-in DUMP payload whose first node's master entry claims 5 live entries for 1: the
/// built-in's RESTORE (shallow check) takes it, our validation does not.
fn lying_payload(p: &mut Conn) -> Vec<u8> {
    ok(p, "XADD liar 1-1 a 1");
    let d = p.cmd(&["DUMP", "liar"]).as_bytes().unwrap().to_vec();
    ok(p, "DEL liar");
    let (body, ver) = dump_split(&d).unwrap();
    let master: &[u8] = &[0x01, 0x01, 0x00, 0x01, 0x01, 0x01, 0x81, b'a', 0x02, 0x00, 0x01];
    let at = body.windows(master.len()).position(|w| w == master).expect("master entry");
    let mut body = body.to_vec();
    body[at] = 0x05;
    dump_build(&body, ver)
}

#[test]
fn invalid_payload_left_alone() {
    let plain = Server::start_plain();
    let mut p = plain.conn();
    let bad = lying_payload(&mut p);
    p.cmd(&["CONFIG", "SET", "sanitize-dump-payload", "no"]);
    let r = p.cmd(&[b"RESTORE".as_slice(), b"liar", b"0", &bad]);
    if r.is_error() {
        // A host whose own RESTORE refuses the payload even unsanitized (Valkey 9.1.2): such a
        // stream cannot reach its keyspace through RESTORE, so there is nothing to adopt here.
        report(&format!("invalid_payload_left_alone: the host refuses the payload itself ({r}); not applicable"));
        return;
    }
    ok(&mut p, "XADD fine 1-1 a b");
    ok(&mut p, "SAVE");
    let mut t = takeover().start();
    std::fs::copy(plain.dir().join("dump.rdb"), t.dir().join("dump.rdb")).unwrap();
    t.restart();
    let mut c = t.conn();
    assert_eq!(adoption_line(&t), Some((1, 1)), "{}", t.log_tail(20));
    assert!(t.log_contains("cannot adopt the built-in stream at key 'liar' (db 0)"), "{}", t.log_tail(20));
    assert!(t.log_contains("1 left built-in"));
    assert_eq!(encoding(&mut c, "liar"), "stream");
    assert_eq!(encoding(&mut c, "fine"), "raw");
    assert_eq!(c.cmd(&["XLEN", "liar"]), Reply::Error(TAKEOVER_WRONGTYPE.into()));
    let r = c.cmd(&["XS.IMPORT", "liar"]);
    assert!(r.text().starts_with("ERR XS.IMPORT: unexpected stream payload"), "{r}");
    // On the fly too (RESTORE after loading).
    restore(&mut c, "liar2", &bad, None);
    assert_eq!(c.cmd(&["XRANGE", "liar2", "-", "+"]), Reply::Error(TAKEOVER_WRONGTYPE.into()));
    assert!(t.log_contains("cannot adopt the built-in stream at key 'liar2'"));
    assert_eq!(c.cmd(&["DUMP", "liar2"]).as_bytes(), Some(bad.as_slice()));
    assert!(c.ping());
}

/// Seconds of "DB loaded from disk: X seconds" (the last one in the log).
fn loaded_seconds(s: &Server) -> f64 {
    let log = s.log();
    let line = log.lines().rev().find(|l| l.contains("DB loaded from disk:")).expect("load line");
    let rest = &line[line.find("DB loaded from disk: ").unwrap() + 21..];
    rest.split(' ').next().unwrap().parse().unwrap()
}

fn adoption_ms(s: &Server) -> u64 {
    let log = s.log();
    let line = log.lines().rev().find(|l| l.contains("xstream: adopted ")).expect("adoption line");
    let rest = &line[line.rfind(" in ").unwrap() + 4..];
    rest.split(' ').next().unwrap().parse().unwrap()
}

/// User + system CPU time of the server process so far (10 ms resolution): the wall times in the
/// log also count time the process waited for a core (a shared machine).
fn cpu_ms(s: &Server) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", s.pid().unwrap())).unwrap();
    // Fields after the command name (which is in parentheses): state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks * 10
}

/// Not a timed test: prints the figures. `cargo test --release --test adopt measure -- --ignored
/// --nocapture`. XSTREAM_MEASURE_ENTRIES (default 1,000,000), XSTREAM_MEASURE_RUNS (default 3).
#[test]
#[ignore]
fn measure_adoption_1m() {
    let n: usize = std::env::var("XSTREAM_MEASURE_ENTRIES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let runs: usize = std::env::var("XSTREAM_MEASURE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let plain = Server::start_plain();
    let mut p = plain.conn();
    let t0 = Instant::now();
    let batch = 10_000;
    let mut i = 0;
    while i < n {
        let m = batch.min(n - i);
        let mut buf = Vec::new();
        for j in i..i + m {
            let v = format!("{j}");
            buf.extend(Conn::encode(&["XADD", "big", "*", "sensor", "temp-7", "value", &v, "unit", "celsius"]));
        }
        p.send_bytes(&buf).unwrap();
        for _ in 0..m {
            p.read_reply().unwrap();
        }
        i += m;
    }
    ok(&mut p, "XGROUP CREATE big g 0");
    ok(&mut p, "XREADGROUP GROUP g c COUNT 1000 STREAMS big >");
    ok(&mut p, "SAVE");
    let size = std::fs::metadata(plain.dir().join("dump.rdb")).unwrap().len();
    report(&format!("built {n} entries in {:?}; RDB {size} bytes", t0.elapsed()));
    let mut a = Server::start_plain();
    let mut b = takeover().start();
    for run in 0..runs {
        for s in [&mut a, &mut b] {
            std::fs::copy(plain.dir().join("dump.rdb"), s.dir().join("dump.rdb")).unwrap();
            s.restart();
        }
        let (la, lb, adopt) = (loaded_seconds(&a), loaded_seconds(&b), adoption_ms(&b));
        let (ca, cb) = (cpu_ms(&a), cpu_ms(&b));
        assert_eq!(b.conn().cmd(&["OBJECT", "ENCODING", "big"]).text(), "raw");
        if run == 0 {
            // The adopted stream is the same stream.
            for cmd in [args("XRANGE big - +"), args("XINFO STREAM big FULL COUNT 10"), args("XPENDING big g")] {
                let (x, y) = (a.conn().raw(&cmd), b.conn().raw(&cmd));
                assert!(x == y, "{} differs ({} and {} bytes)", fmt_cmd(&cmd), x.len(), y.len());
            }
        }
        report(&format!(
            "wall (log): plain load {la:.3} s; takeover load {lb:.3} s of which adoption {adopt} ms | \
             CPU of the process since start (load included): plain {ca} ms, takeover {cb} ms"
        ));
    }
}

/// The master replication offset (INFO replication).
fn repl_offset_of(c: &mut Conn) -> i64 {
    let info = c.cmd(&["INFO", "replication"]).text();
    info.lines().find_map(|l| l.strip_prefix("master_repl_offset:")).and_then(|v| v.trim().parse().ok()).unwrap_or(-1)
}

/// Issue 35: a read that adopts a built-in stream while writes are paused (`CLIENT PAUSE
/// WRITE`, the failover sequence) aborted the server (`propagatePendingCommands` asserts that
/// nothing is propagated during a pause), and a read-only script adopted and propagated too. A
/// read now adopts without propagating; the first write to the key propagates `XS.IMPORT` ahead
/// of itself. A takeover replica, a replica without takeover and an AOF restart all end with the
/// primary's content; the replicas' copies become ours at that first write.
#[test]
fn read_adoption_while_writes_are_paused() {
    for resp3 in [false, true] {
        read_adoption_while_paused(resp3);
    }
}

/// The reads during the pause on a RESP2 or a RESP3 connection (compared with the plain
/// server's on the same protocol).
fn read_adoption_while_paused(resp3: bool) {
    let plain = Server::start_plain();
    let mut p = plain.conn();
    let keys = ["k0", "k1", "k2", "k3", "k4"];
    let payloads: Vec<Vec<u8>> = keys.iter().map(|k| plain_key(&mut p, k, 6, false)).collect();
    let mut t = takeover().arg("--appendonly", "yes").start();
    let replica = Server::replica_of(&t);
    let plain_replica = Server::start();
    let mut pr = plain_replica.conn();
    assert!(!pr.cmd(&["REPLICAOF", "127.0.0.1", &t.port().to_string()]).is_error());
    plain_replica.wait_link_up(Duration::from_secs(30));
    let mut c = t.conn();
    for (k, d) in keys.iter().zip(&payloads) {
        restore(&mut c, k, d, None);
    }
    assert_eq!(c.cmd(&["WAIT", "2", "5000"]), Reply::Int(2));
    let before = repl_offset_of(&mut c);
    ok(&mut c, "CLIENT PAUSE 5000 WRITE");
    let (mut r, mut p3) = (t.conn(), plain.conn());
    if resp3 {
        r.hello3();
        p3.hello3();
    }
    assert_eq!(r.cmd(&["XLEN", "k0"]), Reply::Int(5));
    assert_eq!(r.raw(&["XRANGE", "k1", "-", "+"]), p3.raw(&["XRANGE", "k1", "-", "+"]));
    let info = r.cmd(&["XINFO", "STREAM", "k2", "FULL"]);
    assert!(!info.is_error() && info.field("entries").is_some(), "{info}");
    assert_eq!(r.cmd(&["EVAL_RO", "return redis.call('XLEN', KEYS[1])", "1", "k3"]), Reply::Int(5));
    let script = "#!lua flags=no-writes\nreturn redis.call('XRANGE', KEYS[1], '-', '+')";
    assert_eq!(r.raw(&["EVAL", script, "1", "k4"]), p3.raw(&["EVAL", script, "1", "k4"]));
    assert_eq!(repl_offset_of(&mut r), before, "a read propagated");
    ok(&mut c, "CLIENT UNPAUSE");
    assert!(r.ping() && t.conn().ping(), "{}", t.log_tail(30));
    for k in keys {
        assert_eq!(encoding(&mut c, k), "raw", "{k}");
    }
    // Writes, the same on the plain server: each propagates XS.IMPORT first (not k4).
    for conn in [&mut p, &mut c] {
        ok(conn, "XADD k0 100-0 f v");
        ok(conn, "XREADGROUP GROUP g carol COUNT 2 STREAMS k1 >");
        ok(conn, "XACK k2 g 1-0");
        ok(conn, "XTRIM k3 MAXLEN 2");
    }
    assert_eq!(c.cmd(&["WAIT", "2", "5000"]), Reply::Int(2));
    // `x` names the commands: `X` (the standard names) or `XS.` (a server without takeover
    // whose key is ours).
    let views_as = |c: &mut Conn, x: &str, k: &str| -> Vec<String> {
        [format!("{x}INFO STREAM {k} FULL"), format!("{x}RANGE {k} - +"), format!("{x}PENDING {k} g - + 10")]
            .iter()
            .map(|cmd| view(c, &args(cmd), true))
            .collect()
    };
    let views = |c: &mut Conn, k: &str| views_as(c, "X", k);
    for k in keys {
        let want = views(&mut p, k);
        assert_eq!(views(&mut c, k), want, "primary {k}");
        let mut rc = replica.conn();
        assert_eq!(views(&mut rc, k), want, "takeover replica {k}");
        let x = if k == "k4" { "X" } else { "XS." };
        assert_eq!(views_as(&mut pr, x, k), want, "replica without takeover {k}");
    }
    // The written keys are ours on both replicas (XS.IMPORT ran there), with the primary's digest.
    for k in &keys[..4] {
        let d = c.raw(&["DEBUG", "DIGEST-VALUE", k]);
        assert_eq!(encoding(&mut pr, k), "raw", "replica without takeover {k}");
        assert_eq!(pr.raw(&["DEBUG", "DIGEST-VALUE", k]), d, "replica without takeover {k}");
        assert_eq!(replica.conn().raw(&["DEBUG", "DIGEST-VALUE", k]), d, "takeover replica {k}");
    }
    // k4 (only read) is still built-in on the replica without takeover: its own reads answer
    // the same (above), and its next write converts it.
    assert_eq!(encoding(&mut pr, "k4"), "stream");
    ok(&mut c, "XADD k4 100-0 f v");
    assert_eq!(c.cmd(&["WAIT", "2", "5000"]), Reply::Int(2));
    assert_eq!(encoding(&mut pr, "k4"), "raw");
    assert_eq!(pr.raw(&["DEBUG", "DIGEST-VALUE", "k4"]), c.raw(&["DEBUG", "DIGEST-VALUE", "k4"]));
    // The AOF: the same content after a restart.
    let state: Vec<Vec<String>> = keys.iter().map(|k| views(&mut c, k)).collect();
    drop(c);
    t.restart();
    let mut c = t.conn();
    let after: Vec<Vec<String>> = keys.iter().map(|k| views(&mut c, k)).collect();
    assert_eq!(after, state, "after an AOF restart");
    assert!(!t.log_contains("cannot adopt"), "{}", t.log_tail(30));
}

/// `MODULE LOAD ... takeover yes` at run time, with clients blocked on a built-in stream and a
/// MULTI queued before the load (issue 35, README "loading at run time"): the blocked
/// XREADGROUP is answered an error (`UNBLOCKED ...` on 7.0, `WRONGTYPE ...` since 7.2), the
/// blocked XREAD times out, the transaction fails
/// with WRONGTYPE; nothing crashes, and each client's next call is served by the module.
#[test]
fn runtime_load_with_blocked_and_queued_clients() {
    for resp3 in [false, true] {
        runtime_load_case(resp3);
    }
}

/// The blocked and queued clients on RESP2 or RESP3 connections.
fn runtime_load_case(resp3: bool) {
    let s = Server::builder().no_module().start();
    let module = module_path().expect("the module");
    let mut admin = s.conn();
    ok(&mut admin, "XADD s 1-0 f v");
    ok(&mut admin, "XGROUP CREATE s g $");
    let (mut group_reader, mut reader, mut tx) = (s.conn(), s.conn(), s.conn());
    if resp3 {
        for c in [&mut group_reader, &mut reader, &mut tx] {
            c.hello3();
        }
    }
    group_reader.set_timeout(Duration::from_secs(10));
    group_reader.send(&["XREADGROUP", "GROUP", "g", "a", "BLOCK", "5000", "STREAMS", "s", ">"]).unwrap();
    reader.set_timeout(Duration::from_secs(10));
    reader.send(&["XREAD", "BLOCK", "1500", "STREAMS", "s", "$"]).unwrap();
    ok(&mut tx, "MULTI");
    assert_eq!(tx.cmd(&["XADD", "s", "5-0", "f", "v"]), Reply::Simple("QUEUED".into()));
    assert_eq!(tx.cmd(&["XLEN", "s"]), Reply::Simple("QUEUED".into()));
    let t0 = Instant::now();
    while admin.cmd(&["INFO", "clients"]).text().lines().all(|l| l.trim() != "blocked_clients:2") {
        assert!(t0.elapsed() < Duration::from_secs(5), "the readers never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    let path = module.to_string_lossy().to_string();
    assert_eq!(admin.cmd(&["MODULE", "LOAD", &path, "takeover", "yes"]), Reply::Simple("OK".into()));
    assert_eq!(admin.cmd(&["XADD", "s", "2-0", "f", "v"]), Reply::Bulk(b"2-0".to_vec()));
    // 7.0 answers a blocked XREADGROUP whose key changed type UNBLOCKED; 7.2+ (and Valkey) run
    // it again, and the built-in XREADGROUP then meets the module's value.
    let (r, _) = group_reader.read_reply().unwrap();
    let wrongtype = Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into());
    assert!(r == Reply::Error("UNBLOCKED the stream key no longer exists".into()) || r == wrongtype, "blocked XREADGROUP: {r}");
    let (r, _) = reader.read_reply().unwrap();
    assert!(r.is_nil(), "blocked XREAD: {r}");
    let r = tx.cmd(&["EXEC"]);
    assert_eq!(r, Reply::Array(vec![wrongtype.clone(), wrongtype]), "EXEC");
    // The next calls are the module's.
    assert_eq!(encoding(&mut admin, "s"), "raw");
    let r = group_reader.cmd(&["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
    let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let entries = Reply::Array(vec![Reply::Array(vec![bulk("2-0"), Reply::Array(vec![bulk("f"), bulk("v")])])]);
    let want = if resp3 { Reply::Map(vec![(bulk("s"), entries)]) } else { Reply::Array(vec![Reply::Array(vec![bulk("s"), entries])]) };
    assert_eq!(r, want);
    assert_eq!(reader.cmd(&["XLEN", "s"]), Reply::Int(2));
    assert_eq!(tx.cmd(&["XADD", "s", "5-0", "f", "v"]), Reply::Bulk(b"5-0".to_vec()));
    assert!(admin.ping(), "{}", s.log_tail(30));
}
