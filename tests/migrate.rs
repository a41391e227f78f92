//! Migration between the built-in stream type and the module's: `XS.IMPORT key` (built-in ->
//! module, reply: the number of entries) and `XS.EXPORT key` (back).
//!
//! - `import_export_fixed`: hand-made built-in streams with everything a stream can hold
//!   (groups, consumers with and without pending entries, delivery counts > 1 and old delivery
//!   times from XCLAIM, PEL entries whose data was deleted, a NOACK consumer, entries-read
//!   unknown, tombstones, XSETID metadata, several nodes, binary values, IDs near the maximum,
//!   empty streams with and without groups, a TTL). After XS.IMPORT, `XS.INFO STREAM k FULL COUNT
//!   0` must be byte-identical to the `XINFO STREAM k FULL COUNT 0` taken before (RESP2 and
//!   RESP3), XS.RANGE to XRANGE, PEXPIRETIME kept; after XS.EXPORT, XINFO, XRANGE, PEXPIRETIME
//!   and even the DUMP payload are the original's.
//! - `import_then_same_behaviour`: an imported stream answers the next commands exactly like a
//!   COPY of the original left built-in (XADD, XREADGROUP, XCLAIM, XAUTOCLAIM, XPENDING...).
//! - `import_export_random`: random built-in streams (random node limits, random group
//!   activity), round trip compared the same way.
//! - `import_export_errors`: missing keys, wrong types, double import / export, arity; the key is
//!   untouched after every error.
//! - `import_export_replicated`: IMPORT / EXPORT on a primary with a replica (`WAIT 1 5000`): the
//!   replica ends identical (TYPE, XINFO FULL, DEBUG DIGEST-VALUE, PEXPIRETIME).
//! - `takeover_builtin_key`: in takeover mode with `adopt no` (adoption: tests/adopt.rs) a built-in stream (from RESTORE of a built-in DUMP,
//!   or from an RDB written by a server without the module) answers every stream command with the
//!   `WRONGTYPE ... XS.IMPORT` error; after XS.IMPORT the standard commands serve it, and the
//!   contents are the built-in's.
//!
//! Env: XSTREAM_SEED, XSTREAM_MIGRATE_KEYS (random keys, default 24).

mod common;

use common::groups::{now_ms, Normalizer};
use common::*;
use std::time::Duration;

const TAKEOVER_WRONGTYPE: &str =
    "WRONGTYPE this key holds a built-in Redis stream; convert it with XS.IMPORT <key> to use it while xstream serves the stream commands";

fn ok(c: &mut Conn, line: &str) -> Reply {
    let args = args(line);
    let r = c.cmd(&args);
    assert!(!r.is_error(), "{line}: {r}");
    r
}

fn args(line: &str) -> Vec<String> {
    line.split(' ').filter(|t| !t.is_empty()).map(|t| t.replace("{sp}", " ")).collect()
}

/// IDs of the PEL of `group` (optionally of one consumer).
fn pel_ids(c: &mut Conn, key: &str, group: &str, consumer: Option<&str>) -> Vec<String> {
    let mut a = vec!["XPENDING", key, group, "-", "+", "1000"];
    if let Some(x) = consumer {
        a.push(x);
    }
    match c.cmd(&a) {
        Reply::Array(v) => v.iter().map(|e| e.as_array()[0].text()).collect(),
        _ => Vec::new(),
    }
}

/// Built-in streams covering every feature. Uses the built-in commands (`c` must not be in
/// takeover mode).
fn build_fixed(c: &mut Conn) -> Vec<&'static str> {
    // rich: groups, consumers, PEL with counts > 1 and old delivery times, deleted pending
    // entries, NOACK, entries-read unknown, consumers without PEL, metadata, TTL.
    for i in 1..=40u64 {
        let n = (i % 3) + 1;
        let mut a = vec!["XADD".to_string(), "rich".into(), format!("{i}-{}", i % 2)];
        for j in 0..n {
            a.push(format!("field{j}"));
            a.push(match (i + j) % 4 {
                0 => i.to_string(),
                1 => format!("value-{i}-{j}"),
                2 => "-12345678901".into(),
                _ => "".into(),
            });
        }
        c.cmd(&a);
    }
    for l in [
        "XDEL rich 3-1 5-1 6-0",
        "XGROUP CREATE rich g1 0",
        "XGROUP CREATE rich g2 $ ENTRIESREAD 5",
        "XGROUP CREATE rich g3 0",
        "XGROUP SETID rich g3 10-0",
        "XREADGROUP GROUP g1 alice COUNT 6 STREAMS rich >",
        "XREADGROUP GROUP g1 bob COUNT 5 STREAMS rich >",
        "XREADGROUP GROUP g1 carol NOACK COUNT 3 STREAMS rich >",
        "XREADGROUP GROUP g3 alice COUNT 2 STREAMS rich >",
    ] {
        ok(c, l);
    }
    let alice = pel_ids(c, "rich", "g1", Some("alice"));
    let bob = pel_ids(c, "rich", "g1", Some("bob"));
    ok(c, &format!("XCLAIM rich g1 bob 0 {} {}", alice[0], alice[1]));
    ok(c, &format!("XCLAIM rich g1 bob 0 {} {} RETRYCOUNT 7 TIME 1600000000000", alice[0], alice[1]));
    ok(c, &format!("XCLAIM rich g1 dave 0 {} IDLE 172800000", alice[2]));
    ok(c, &format!("XREADGROUP GROUP g1 alice STREAMS rich {}", "0"));
    ok(c, &format!("XACK rich g1 {}", bob[0]));
    ok(c, &format!("XDEL rich {}", alice[3]));
    ok(c, &format!("XDEL rich {}", bob[1]));
    for l in [
        "XGROUP CREATECONSUMER rich g1 erin",
        "XGROUP CREATECONSUMER rich g2 frank",
        "XAUTOCLAIM rich g3 zed 0 0-0 COUNT 1",
        "XSETID rich 1000-0 ENTRIESADDED 5000 MAXDELETEDID 999-0",
        "PEXPIRE rich 86400000",
    ] {
        ok(c, l);
    }
    // nodes: many nodes (small node limits), long and binary values, tombstones in nodes.
    ok(c, "CONFIG SET stream-node-max-entries 5");
    for i in 1..=60u64 {
        let mut a: Vec<Vec<u8>> = vec![b"XADD".to_vec(), b"nodes".to_vec(), format!("{}-0", i * 1000).into_bytes()];
        a.push(b"payload".to_vec());
        a.push(match i % 5 {
            0 => vec![b'x'; 5000],
            1 => (0..=255u8).collect(),
            2 => b"\r\n\0 binary".to_vec(),
            3 => i.pow(7).to_string().into_bytes(),
            _ => format!("v{i}").into_bytes(),
        });
        if i % 7 == 0 {
            a.push(b"extra".to_vec());
            a.push(b"1".to_vec());
        }
        c.cmd(&a);
    }
    for i in (3..=60u64).step_by(4) {
        ok(c, &format!("XDEL nodes {}-0", i * 1000));
    }
    ok(c, "XTRIM nodes MINID 5000-0");
    ok(c, "CONFIG SET stream-node-max-entries 100");
    // emptied: every entry deleted, a group left; empty-mk: created by XGROUP ... MKSTREAM;
    // bare: XADD + XTRIM MAXLEN 0 (no group).
    for l in [
        "XADD emptied 1-1 f v",
        "XADD emptied 2-1 f v",
        "XGROUP CREATE emptied g 0",
        "XREADGROUP GROUP g c STREAMS emptied >",
        "XDEL emptied 1-1 2-1",
        "XGROUP CREATE empty-mk g $ MKSTREAM",
        "XGROUP CREATECONSUMER empty-mk g lonely",
        "XADD bare 5-5 f v",
        "XTRIM bare MAXLEN 0",
        // maxid: IDs at the top of the range.
        "XADD maxid 18446744073709551615-18446744073709551614 f v",
        "XADD maxid 18446744073709551615-18446744073709551615 f w",
        "XGROUP CREATE maxid g 0 ENTRIESREAD 0",
        "XREADGROUP GROUP g c COUNT 1 STREAMS maxid >",
        // ttl-only: a plain stream with a TTL, no groups.
        "XADD ttl 1-1 a 1",
        "PEXPIREAT ttl 99999999999999",
    ] {
        ok(c, l);
    }
    vec!["rich", "nodes", "emptied", "empty-mk", "bare", "maxid", "ttl"]
}

/// What must survive a round trip: FULL info (RESP2 and RESP3), the entries, the expire time.
#[derive(Debug, PartialEq)]
struct View {
    info2: Vec<u8>,
    info3: Vec<u8>,
    range: Vec<u8>,
    expire: Vec<u8>,
    len: Vec<u8>,
}

/// The view of `key` through the built-in commands (`module == false`) or the module's.
fn view(port: u16, key: &str, module: bool) -> View {
    let mut c = Conn::connect(port);
    let x = |n: &str| xcmd(module, n);
    let info2 = c.raw(&[&x("XINFO"), "STREAM", key, "FULL", "COUNT", "0"]);
    let range = c.raw(&[&x("XRANGE"), key, "-", "+"]);
    let expire = c.raw(&["PEXPIRETIME", key]);
    let len = c.raw(&[&x("XLEN"), key]);
    c.hello3();
    let info3 = c.raw(&[&x("XINFO"), "STREAM", key, "FULL", "COUNT", "0"]);
    View { info2, info3, range, expire, len }
}

/// Two PEXPIRETIME replies: both without expire (`-1`), or within a second of each other.
fn expire_close(x: &[u8], y: &[u8]) -> bool {
    let v = |b: &[u8]| -> i64 { std::str::from_utf8(&b[1..b.len() - 2]).unwrap().parse().unwrap() };
    let (a, b) = (v(x), v(y));
    if a < 0 || b < 0 {
        a == b
    } else {
        (a - b).abs() <= 1000
    }
}

fn diff_views(what: &str, a: &View, b: &View) -> Option<String> {
    let mut d = Vec::new();
    for (name, x, y) in [
        ("XINFO STREAM FULL COUNT 0 (RESP2)", &a.info2, &b.info2),
        ("XINFO STREAM FULL COUNT 0 (RESP3)", &a.info3, &b.info3),
        ("XRANGE - +", &a.range, &b.range),
        ("PEXPIRETIME", &a.expire, &b.expire),
        ("XLEN", &a.len, &b.len),
    ] {
        if name == "PEXPIRETIME" {
            // Checked to the millisecond by `ttl_kept_exactly`; here: kept within a second.
            if !expire_close(x, y) {
                d.push(format!("  PEXPIRETIME: before {} after {}", groups::show(x, 100), groups::show(y, 100)));
            }
        } else if x != y {
            d.push(format!("  {name}\n    before: {}\n    after:  {}", groups::show(x, 2500), groups::show(y, 2500)));
        }
    }
    if d.is_empty() {
        None
    } else {
        Some(format!("{what}:\n{}", d.join("\n")))
    }
}

use common::groups;

/// IMPORT then EXPORT of `key` on `srv` (module loaded, not in takeover mode): every view
/// identical; returns the differences found (empty: none).
fn round_trip(srv: &Server, key: &str) -> Vec<String> {
    let mut c = srv.conn();
    let mut out = Vec::new();
    let before = view(srv.port(), key, false);
    let dump_before = c.raw(&["DUMP", key]);
    let len = match c.cmd(&["XLEN", key]) {
        Reply::Int(n) => n,
        r => panic!("XLEN {key}: {r}"),
    };
    let r = c.cmd(&["XS.IMPORT", key]);
    if r != Reply::Int(len) {
        out.push(format!("{key}: XS.IMPORT replied {r}, want (integer) {len}"));
        return out;
    }
    let t = c.cmd(&["TYPE", key]);
    if t != Reply::Simple("xs-stream".into()) {
        out.push(format!("{key}: TYPE after XS.IMPORT: {t}"));
    }
    let imported = view(srv.port(), key, true);
    if let Some(d) = diff_views(&format!("{key}: built-in before vs module after XS.IMPORT"), &before, &imported) {
        out.push(d);
    }
    // The module's own persistence of the imported stream: DEBUG RELOAD keeps it.
    let r = c.cmd(&["XS.EXPORT", key]);
    if r != Reply::Int(len) {
        out.push(format!("{key}: XS.EXPORT replied {r}, want (integer) {len}"));
        return out;
    }
    let t = c.cmd(&["TYPE", key]);
    if t != Reply::Simple("stream".into()) {
        out.push(format!("{key}: TYPE after XS.EXPORT: {t}"));
    }
    let exported = view(srv.port(), key, false);
    if let Some(d) = diff_views(&format!("{key}: built-in before vs built-in after XS.IMPORT + XS.EXPORT"), &before, &exported) {
        out.push(d);
    }
    let dump_after = c.raw(&["DUMP", key]);
    if dump_after != dump_before {
        out.push(format!("{key}: DUMP payload after the round trip differs from the original ({} vs {} bytes)", dump_before.len(), dump_after.len()));
    }
    out
}

fn module_server() -> Server {
    Server::start()
}

#[test]
fn import_export_fixed() {
    let srv = module_server();
    let mut c = srv.conn();
    let keys = build_fixed(&mut c);
    // Sanity: the fixture has what it claims.
    let info = c.cmd(&["XINFO", "STREAM", "rich", "FULL"]);
    let s = format!("{info}");
    assert!(s.contains("(integer) 7"), "no delivery count 7 in rich: {s}");
    assert!(s.contains("1600000000000"), "no old delivery time in rich: {s}");
    let mut failures = Vec::new();
    for k in &keys {
        failures.extend(round_trip(&srv, k));
    }
    // Twice in a row: IMPORT/EXPORT are repeatable.
    for k in &keys {
        failures.extend(round_trip(&srv, k));
    }
    assert!(failures.is_empty(), "{} difference(s):\n{}", failures.len(), failures.join("\n"));
    // DEBUG RELOAD with imported streams (the module's RDB form of imported data).
    let before: Vec<View> = keys.iter().map(|k| view(srv.port(), k, false)).collect();
    for k in &keys {
        c.cmd(&["XS.IMPORT", k]);
    }
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
    for (k, b) in keys.iter().zip(before.iter()) {
        let v = view(srv.port(), k, true);
        if let Some(d) = diff_views(&format!("{k}: built-in vs imported after DEBUG RELOAD"), b, &v) {
            failures.push(d);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// An imported stream behaves exactly like a COPY of the original that stayed built-in.
#[test]
fn import_then_same_behaviour() {
    let srv = module_server();
    let mut c = srv.conn();
    build_fixed(&mut c);
    for k in ["rich", "emptied", "maxid"] {
        let r = format!("{k}-ref");
        ok(&mut c, &format!("COPY {k} {r}"));
        ok(&mut c, &format!("XS.IMPORT {k}"));
    }
    let norm = Normalizer {
        key_pairs: ["rich", "emptied", "maxid"].iter().map(|k| (k.as_bytes().to_vec(), format!("{k}-ref").into_bytes())).collect(),
        loose_names: true,
    };
    let script = [
        "XADD @rich 2000-0 f explicit",
        "XREADGROUP GROUP g1 alice COUNT 3 STREAMS @rich >",
        "XREADGROUP GROUP g1 alice STREAMS @rich 0",
        "XREADGROUP GROUP g3 bob STREAMS @rich >",
        "XREADGROUP GROUP g2 frank STREAMS @rich >",
        "XPENDING @rich g1",
        "XPENDING @rich g1 - + 100",
        "XPENDING @rich g1 IDLE 100000000 - + 100",
        "XAUTOCLAIM @rich g1 zoe 0 0-0 COUNT 100",
        "XAUTOCLAIM @rich g1 zoe 0 0-0 COUNT 100 JUSTID",
        "XCLAIM @rich g1 yan 0 2-0 4-0 7-1 RETRYCOUNT 3",
        "XACK @rich g1 1-1 2-0 4-0",
        "XINFO GROUPS @rich",
        "XINFO CONSUMERS @rich g1",
        "XGROUP DELCONSUMER @rich g1 erin",
        "XGROUP SETID @rich g2 0 ENTRIESREAD 0",
        "XINFO GROUPS @rich",
        "XTRIM @rich MAXLEN ~ 10",
        "XTRIM @rich MAXLEN 10",
        "XDEL @rich 40-0",
        "XRANGE @rich - +",
        "XREVRANGE @rich + - COUNT 3",
        "XINFO STREAM @rich FULL",
        "XREADGROUP GROUP g c STREAMS @emptied 0",
        "XADD @emptied 3-1 f v",
        "XREADGROUP GROUP g c STREAMS @emptied >",
        "XINFO STREAM @emptied FULL",
        "XADD @maxid * f v",
        "XREADGROUP GROUP g c STREAMS @maxid >",
        "XINFO STREAM @maxid FULL",
    ];
    let mut diffs = Vec::new();
    for line in script {
        let side = |module: bool| -> Vec<String> {
            args(line)
                .into_iter()
                .enumerate()
                .map(|(i, t)| {
                    if i == 0 {
                        xcmd(module, &t)
                    } else if let Some(k) = t.strip_prefix('@') {
                        if module {
                            k.to_string()
                        } else {
                            format!("{k}-ref")
                        }
                    } else {
                        t
                    }
                })
                .collect()
        };
        let (ca, cb) = (side(false), side(true));
        let ra = c.raw(&ca);
        let rb = c.raw(&cb);
        let now = now_ms();
        let na = norm.normalize(&ca, &ra, 0, now);
        let nb = norm.normalize(&cb, &rb, 1, now);
        if na != nb {
            diffs.push(format!("  {line}\n    built-in copy: {}\n    imported:      {}", groups::show(&ra, 1500), groups::show(&rb, 1500)));
        }
    }
    assert!(diffs.is_empty(), "imported stream vs built-in copy: {} difference(s):\n{}", diffs.len(), diffs.join("\n"));
}

/// Random built-in streams: random node limits, entries, deletions, trims, XSETID, groups with
/// random reads, claims, acks and deletions of pending entries.
fn build_random(c: &mut Conn, rng: &mut Rng, key: &str) {
    let e = *rng.pick(&[1u64, 2, 3, 5, 10, 100]);
    let b = *rng.pick(&[0u64, 0, 64, 200, 4096]);
    set_node_limits(c, e, b, false);
    let ops = rng.range(1, 120) as usize;
    explicit_workload(c, rng, false, key, ops);
    if c.cmd(&["EXISTS", key]) != Reply::Int(1) {
        return;
    }
    let ngroups = rng.below(4);
    let consumers = ["c1", "c2", "c3", "c4"];
    for gi in 0..ngroups {
        let g = format!("g{gi}");
        let start = *rng.pick(&["0", "$", "0-0"]);
        let mut a = vec!["XGROUP".to_string(), "CREATE".into(), key.into(), g.clone(), start.into()];
        if rng.pct(30) {
            a.push("ENTRIESREAD".into());
            a.push(rng.below(50).to_string());
        }
        c.cmd(&a);
        if rng.pct(20) {
            c.cmd(&["XGROUP", "SETID", key, &g, "0"]);
        }
        for _ in 0..rng.range(0, 12) {
            let who = *rng.pick(&consumers);
            let count = rng.range(1, 10).to_string();
            match rng.below(10) {
                0..=5 => {
                    let mut a = vec!["XREADGROUP", "GROUP", &g, who, "COUNT", &count];
                    if rng.pct(15) {
                        a.push("NOACK");
                    }
                    a.extend(["STREAMS", key, ">"]);
                    c.cmd(&a);
                }
                6 => {
                    let ids = pel_ids(c, key, &g, None);
                    if !ids.is_empty() {
                        let id = &ids[rng.below(ids.len() as u64) as usize];
                        let rc = rng.range(2, 9).to_string();
                        let t = (now_ms() - rng.range(0, 100_000_000) as i64).to_string();
                        c.cmd(&["XCLAIM", key, &g, who, "0", id, "RETRYCOUNT", &rc, "TIME", &t]);
                    }
                }
                7 => {
                    c.cmd(&["XAUTOCLAIM", key, &g, who, "0", "0-0", "COUNT", &count]);
                }
                8 => {
                    let ids = pel_ids(c, key, &g, None);
                    if !ids.is_empty() {
                        let id = &ids[rng.below(ids.len() as u64) as usize];
                        let cmd = if rng.pct(50) { "XACK" } else { "XDEL" };
                        if cmd == "XACK" {
                            c.cmd(&["XACK", key, &g, id]);
                        } else {
                            c.cmd(&["XDEL", key, id]);
                        }
                    }
                }
                _ => {
                    c.cmd(&["XGROUP", "CREATECONSUMER", key, &g, who]);
                }
            }
        }
    }
    if rng.pct(30) {
        c.cmd(&["PEXPIRE", key, &rng.range(1_000_000, 100_000_000).to_string()]);
    }
}

#[test]
fn import_export_random() {
    let srv = module_server();
    let mut c = srv.conn();
    let mut rng = Rng::from_env("import_export_random");
    let seed = rng.seed();
    let n = env_usize("XSTREAM_MIGRATE_KEYS", 24);
    let mut failures = Vec::new();
    let mut stats = (0usize, 0i64, 0usize);
    for i in 0..n {
        let key = format!("rnd{i}");
        build_random(&mut c, &mut rng, &key);
        if c.cmd(&["EXISTS", &key]) != Reply::Int(1) {
            continue;
        }
        stats.0 += 1;
        stats.1 += c.cmd(&["XLEN", &key]).as_int();
        if let Reply::Array(g) = c.cmd(&["XINFO", "GROUPS", &key]) {
            stats.2 += g.len();
        }
        failures.extend(round_trip(&srv, &key));
    }
    report(&format!("import_export_random: {} streams, {} entries, {} groups round-tripped (seed {seed})", stats.0, stats.1, stats.2));
    assert!(failures.is_empty(), "seed {seed}: {} difference(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn import_export_errors() {
    let srv = module_server();
    let mut c = srv.conn();
    ok(&mut c, "XADD bi 1-1 f v");
    ok(&mut c, "XS.ADD mod 1-1 f v");
    ok(&mut c, "SET str x");
    ok(&mut c, "LPUSH list a");
    let snap = |c: &mut Conn| -> Vec<Vec<u8>> {
        ["bi", "mod", "str", "list", "nokey"].iter().flat_map(|k| [c.raw(&["TYPE", k]), c.raw(&["DUMP", k])]).collect()
    };
    let before = snap(&mut c);
    let cases: &[(&str, &str)] = &[
        ("XS.IMPORT nokey", "ERR no such key"),
        ("XS.EXPORT nokey", "ERR no such key"),
        ("XS.IMPORT str", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("XS.IMPORT list", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("XS.EXPORT str", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("XS.EXPORT list", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("XS.IMPORT mod", "ERR the key already holds an xstream stream"),
        ("XS.EXPORT bi", "ERR the key already holds a built-in stream"),
        ("XS.IMPORT", "ERR wrong number of arguments for 'xs.import' command"),
        ("XS.IMPORT bi extra", "ERR wrong number of arguments for 'xs.import' command"),
        ("XS.EXPORT", "ERR wrong number of arguments for 'xs.export' command"),
        // XS.EXPORT key [DROPPOLICIES] (queue policies, issue 16).
        ("XS.EXPORT mod extra", "ERR syntax error"),
    ];
    let mut bad = Vec::new();
    for (line, want) in cases {
        let r = c.cmd(&args(line));
        if r != Reply::Error(want.to_string()) {
            bad.push(format!("  {line}: got {r}, want (error) {want}"));
        }
    }
    assert!(bad.is_empty(), "error replies:\n{}", bad.join("\n"));
    assert_eq!(before, snap(&mut c), "a key changed after a refused IMPORT/EXPORT");
    // Double import: the second is refused, the data stays.
    assert_eq!(c.cmd(&["XS.IMPORT", "bi"]), Reply::Int(1));
    let after_one = snap(&mut c);
    assert!(c.cmd(&["XS.IMPORT", "bi"]).is_error());
    assert_eq!(after_one, snap(&mut c));
    assert_eq!(c.cmd(&["XS.EXPORT", "bi"]), Reply::Int(1));
    assert!(c.cmd(&["XS.EXPORT", "bi"]).is_error());
    assert_eq!(before, snap(&mut c));
    // In MULTI and from a script: the same replies.
    ok(&mut c, "MULTI");
    assert_eq!(c.cmd(&["XS.IMPORT", "bi"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["XS.IMPORT", "bi"]), Reply::Simple("QUEUED".into()));
    let r = c.cmd(&["EXEC"]);
    assert_eq!(r, Reply::Array(vec![Reply::Int(1), Reply::Error("ERR the key already holds an xstream stream".into())]), "MULTI XS.IMPORT x2: {r}");
    let r = c.cmd(&["EVAL", "return redis.call('XS.EXPORT', KEYS[1])", "1", "bi"]);
    assert_eq!(r, Reply::Int(1), "EVAL XS.EXPORT: {r}");
    assert_eq!(c.cmd(&["TYPE", "bi"]), Reply::Simple("stream".into()));
    // A volatile key keeps its absolute expire time both ways.
    ok(&mut c, "PEXPIREAT bi 99999999999999");
    ok(&mut c, "XS.IMPORT bi");
    assert_eq!(c.cmd(&["PEXPIRETIME", "bi"]), Reply::Int(99999999999999));
    ok(&mut c, "XS.EXPORT bi");
    assert_eq!(c.cmd(&["PEXPIRETIME", "bi"]), Reply::Int(99999999999999));
    // An already expired key (lazy expiry): no such key.
    ok(&mut c, "XADD soon 1-1 f v");
    ok(&mut c, "PEXPIRE soon 1");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.cmd(&["XS.IMPORT", "soon"]), Reply::Error("ERR no such key".into()));
}

fn wait_replica(p: &mut Conn, r: &mut Conn) {
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    // WAIT acknowledges the offset; the replica applies in order, so a PING round trip on the
    // replica afterwards sees the data.
    assert!(r.ping());
}

/// Whether `key` holds a module stream: TYPE says `xs-stream`, or (takeover mode, where TYPE says
/// `stream` for both kinds) OBJECT ENCODING says `raw` (a module value; `stream` for the built-in).
fn is_module_stream(c: &mut Conn, key: &str) -> bool {
    match c.cmd(&["TYPE", key]) {
        Reply::Simple(t) if t == "xs-stream" => true,
        Reply::Simple(t) if t == "stream" => c.cmd(&["OBJECT", "ENCODING", key]) == Reply::Bulk(b"raw".to_vec()),
        _ => false,
    }
}

/// Everything a replica must have identical: TYPE, the FULL info (module or built-in names
/// as the type says), XRANGE, DIGEST-VALUE, PEXPIRETIME.
fn replica_view(c: &mut Conn, key: &str) -> Vec<(String, Vec<u8>)> {
    let module = is_module_stream(c, key);
    let x = |n: &str| xcmd(module, n);
    vec![
        ("TYPE".into(), c.raw(&["TYPE", key])),
        ("XINFO FULL".into(), c.raw(&[&x("XINFO"), "STREAM", key, "FULL", "COUNT", "0"])),
        ("XRANGE".into(), c.raw(&[&x("XRANGE"), key, "-", "+"])),
        ("DIGEST-VALUE".into(), c.raw(&["DEBUG", "DIGEST-VALUE", key])),
        ("PEXPIRETIME".into(), c.raw(&["PEXPIRETIME", key])),
    ]
}

fn compare_replica(what: &str, p: &mut Conn, r: &mut Conn, keys: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for k in keys {
        let (vp, vr) = (replica_view(p, k), replica_view(r, k));
        for ((l, x), (_, y)) in vp.iter().zip(vr.iter()) {
            // The exact expire time: `ttl_kept_exactly`.
            let same = if l == "PEXPIRETIME" { expire_close(x, y) } else { x == y };
            if !same {
                out.push(format!("{what}: {k} {l}\n    primary: {}\n    replica: {}", groups::show(x, 1500), groups::show(y, 1500)));
            }
        }
    }
    out
}

/// The absolute expire time survives IMPORT and EXPORT to the millisecond, also for a stream
/// large enough that the conversion takes a while (100k entries).
#[test]
fn ttl_kept_exactly() {
    let srv = module_server();
    let mut c = srv.conn();
    let r = c.cmd(&["EVAL", "for i=1,100000 do redis.call('XADD', KEYS[1], '*', 'field', tostring(i), 'other', 'value') end return 1", "1", "big"]);
    assert_eq!(r, Reply::Int(1));
    ok(&mut c, "PEXPIRE big 100000000");
    ok(&mut c, "XADD small 1-1 f v");
    ok(&mut c, "PEXPIRE small 100000000");
    let mut bad = Vec::new();
    for k in ["big", "small"] {
        let t0 = c.cmd(&["PEXPIRETIME", k]).as_int();
        let i0 = std::time::Instant::now();
        assert_eq!(c.cmd(&["XS.IMPORT", k]).is_error(), false);
        let di = i0.elapsed();
        let t1 = c.cmd(&["PEXPIRETIME", k]).as_int();
        let e0 = std::time::Instant::now();
        assert_eq!(c.cmd(&["XS.EXPORT", k]).is_error(), false);
        let de = e0.elapsed();
        let t2 = c.cmd(&["PEXPIRETIME", k]).as_int();
        if t1 != t0 || t2 != t0 {
            bad.push(format!(
                "  {k}: PEXPIRETIME {t0}, after XS.IMPORT {t1} ({:+} ms; the import took {di:?}), after XS.EXPORT {t2} ({:+} ms; the export took {de:?})",
                t1 - t0,
                t2 - t1
            ));
        }
    }
    // On a replica: the replica's expire time must be the primary's.
    let r = Server::replica_of(&srv);
    let mut cr = r.conn();
    let t0 = c.cmd(&["PEXPIRETIME", "big"]).as_int();
    for cmd in ["XS.IMPORT", "XS.EXPORT"] {
        assert!(!c.cmd(&[cmd, "big"]).is_error());
        assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
        let (tp, tr) = (c.cmd(&["PEXPIRETIME", "big"]).as_int(), cr.cmd(&["PEXPIRETIME", "big"]).as_int());
        if tp != t0 || tr != t0 {
            bad.push(format!(
                "  big after {cmd} with a replica: PEXPIRETIME was {t0}, primary {tp} ({:+} ms), replica {tr} ({:+} ms)",
                tp - t0,
                tr - t0
            ));
        }
    }
    assert!(bad.is_empty(), "the expire time moves (a TTL carried as a relative time?):\n{}", bad.join("\n"));
}

/// IMPORT and EXPORT on a primary with a replica: the replica ends identical. The streams are
/// built before the replica attaches (the full sync copies them exactly, seen-times included).
#[test]
fn import_export_replicated() {
    for takeover in [false, true] {
        // `adopt no`: the built-in keys must stay built-in until XS.IMPORT (with adoption the
        // comparisons below would convert them: tests/adopt.rs).
        let builder = if takeover { Server::builder().module_args(&["takeover", "yes", "adopt", "no"]) } else { Server::builder() };
        // Build the built-in streams on a server without takeover, then move them with
        // DUMP/RESTORE (in takeover mode the standard names would reach the module).
        let src = module_server();
        let mut cs = src.conn();
        let keys = build_fixed(&mut cs);
        let p = builder.start();
        let mut cp = p.conn();
        for k in &keys {
            let d = cs.cmd(&["DUMP", k]);
            let ttl = cs.cmd(&["PTTL", k]).as_int().max(0).to_string();
            let r = cp.cmd(&[b"RESTORE".as_slice(), k.as_bytes(), ttl.as_bytes(), d.as_bytes().unwrap()]);
            assert_eq!(r, Reply::Simple("OK".into()), "RESTORE {k}: {r}");
        }
        let r = Server::replica_of(&p);
        let mut cr = r.conn();
        let tag = if takeover { "takeover" } else { "no takeover" };
        let mut failures = compare_replica(&format!("{tag}, after the full sync"), &mut cp, &mut cr, &keys);
        for k in &keys {
            let n = cp.cmd(&["XS.IMPORT", k]);
            assert!(matches!(n, Reply::Int(_)), "XS.IMPORT {k}: {n}");
        }
        wait_replica(&mut cp, &mut cr);
        failures.extend(compare_replica(&format!("{tag}, after XS.IMPORT"), &mut cp, &mut cr, &keys));
        for k in &keys {
            assert!(is_module_stream(&mut cr, k), "{tag}: replica: {k} is not a module stream");
        }
        // Writes after the import replicate too.
        let add = if takeover { "XADD" } else { "XS.ADD" };
        cp.cmd(&[add, "rich", "5000-0", "after", "import"]);
        for k in &keys {
            let n = cp.cmd(&["XS.EXPORT", k]);
            assert!(matches!(n, Reply::Int(_)), "XS.EXPORT {k}: {n}");
        }
        wait_replica(&mut cp, &mut cr);
        failures.extend(compare_replica(&format!("{tag}, after XS.EXPORT"), &mut cp, &mut cr, &keys));
        for k in &keys {
            assert_eq!(cr.cmd(&["TYPE", k]), Reply::Simple("stream".into()), "{tag}: replica TYPE {k}");
        }
        assert_eq!(cp.raw(&["DEBUG", "DIGEST"]), cr.raw(&["DEBUG", "DIGEST"]), "{tag}: DEBUG DIGEST");
        assert!(failures.is_empty(), "{} difference(s):\n{}", failures.len(), failures.join("\n"));
    }
}

/// The 15 standard stream commands, each on key `k` (a built-in stream in the tests below).
fn standard_commands(k: &str) -> Vec<Vec<String>> {
    [
        "XADD @ * f v",
        "XLEN @",
        "XRANGE @ - +",
        "XREVRANGE @ + -",
        "XREAD STREAMS @ 0",
        "XREAD COUNT 1 STREAMS other @ 0 0",
        "XREADGROUP GROUP g c STREAMS @ >",
        "XGROUP CREATE @ g2 0",
        "XGROUP CREATECONSUMER @ g c2",
        "XACK @ g 1-1",
        "XPENDING @ g",
        "XCLAIM @ g c 0 1-1",
        "XAUTOCLAIM @ g c 0 0-0",
        "XINFO STREAM @",
        "XINFO GROUPS @",
        "XINFO CONSUMERS @ g",
        "XDEL @ 1-1",
        "XTRIM @ MAXLEN 0",
        "XSETID @ 999-0",
        "xrange @ - +",
        "XREAD BLOCK 0 STREAMS @ $",
    ]
    .iter()
    .map(|l| args(&l.replace('@', k)))
    .collect()
}

/// In takeover mode with `adopt no` a built-in stream answers every stream command with the
/// WRONGTYPE ... XS.IMPORT error (never data, never a silent write), from MULTI and scripts too; after
/// XS.IMPORT the standard names serve it with the built-in's content.
#[test]
fn takeover_builtin_key() {
    // The reference built-in streams, on a plain server.
    let plain = Server::start_plain();
    let mut cp = plain.conn();
    ok(&mut cp, "XADD k 1-1 f v");
    ok(&mut cp, "XADD k 2-1 f w");
    ok(&mut cp, "XGROUP CREATE k g 0");
    ok(&mut cp, "XREADGROUP GROUP g c COUNT 1 STREAMS k >");
    ok(&mut cp, "XADD other 1-1 f v");
    let reference: Vec<Vec<u8>> = ["XRANGE k - +", "XINFO STREAM k FULL COUNT 0", "XPENDING k g - + 10"].iter().map(|l| cp.raw(&args(l))).collect();
    let dump = cp.cmd(&["DUMP", "k"]);

    // 1. A key created by RESTORE of a built-in DUMP.
    let b = Server::builder().module_args(&["takeover", "yes", "adopt", "no"]).start();
    let mut cb = b.conn();
    let r = cb.cmd(&[b"RESTORE".as_slice(), b"k", b"0", dump.as_bytes().unwrap()]);
    assert_eq!(r, Reply::Simple("OK".into()));
    assert_eq!(cb.cmd(&["TYPE", "k"]), Reply::Simple("stream".into()));
    ok(&mut cb, "XADD other 1-1 f v");
    let mut bad = Vec::new();
    let want = Reply::Error(TAKEOVER_WRONGTYPE.into());
    for a in standard_commands("k") {
        let r = cb.cmd(&a);
        if r != want {
            bad.push(format!("  {}: {r}", fmt_cmd(&a)));
        }
    }
    // From MULTI and from a script.
    ok(&mut cb, "MULTI");
    cb.cmd(&["XRANGE", "k", "-", "+"]);
    let r = cb.cmd(&["EXEC"]);
    if r != Reply::Array(vec![want.clone()]) {
        bad.push(format!("  MULTI XRANGE k: {r}"));
    }
    let r = cb.cmd(&["EVAL", "return redis.pcall('XRANGE', KEYS[1], '-', '+')", "1", "k"]);
    if r != want {
        bad.push(format!("  EVAL pcall XRANGE k: {r}"));
    }
    assert!(bad.is_empty(), "takeover, built-in key: replies other than `{TAKEOVER_WRONGTYPE}`:\n{}", bad.join("\n"));
    // Nothing changed on the key.
    assert_eq!(cb.cmd(&["DUMP", "k"]), dump, "the built-in key changed");
    // XS.IMPORT, then the standard names serve it with the same content.
    assert_eq!(cb.cmd(&["XS.IMPORT", "k"]), Reply::Int(2));
    let now: Vec<Vec<u8>> = ["XRANGE k - +", "XINFO STREAM k FULL COUNT 0", "XPENDING k g - + 10"].iter().map(|l| cb.raw(&args(l))).collect();
    let t = now_ms();
    let n = Normalizer::default();
    for ((l, x), y) in ["XRANGE", "XINFO STREAM FULL", "XPENDING"].iter().zip(reference.iter()).zip(now.iter()) {
        let cmd = args(match *l {
            "XRANGE" => "XRANGE k - +",
            "XPENDING" => "XPENDING k g - + 10",
            _ => "XINFO STREAM k FULL COUNT 0",
        });
        assert_eq!(groups::show(&n.normalize(&cmd, x, 0, t), 3000), groups::show(&n.normalize(&cmd, y, 0, t), 3000), "after XS.IMPORT: {l}");
    }
    assert_eq!(cb.cmd(&["XADD", "k", "3-1", "f", "x"]), Reply::Bulk(b"3-1".to_vec()));
    assert!(is_module_stream(&mut cb, "k"));
    // XS.EXPORT in takeover mode: built-in again, refused again by the standard names.
    assert_eq!(cb.cmd(&["XS.EXPORT", "k"]), Reply::Int(3));
    assert_eq!(cb.cmd(&["XRANGE", "k", "-", "+"]), want);
    assert_eq!(cb.cmd(&["XS.IMPORT", "k"]), Reply::Int(3));

    // 2. Keys from an RDB written by a server without the module, loaded by a takeover server.
    ok(&mut cp, "SAVE");
    let rdb = plain.dir().join("dump.rdb");
    let mut b2 = Server::builder().module_args(&["takeover", "yes", "adopt", "no"]).start();
    std::fs::copy(&rdb, b2.dir().join("dump.rdb")).unwrap();
    b2.restart();
    let mut c2 = b2.conn();
    assert_eq!(c2.cmd(&["DBSIZE"]), Reply::Int(2));
    for k in ["k", "other"] {
        assert_eq!(c2.cmd(&["XRANGE", k, "-", "+"]), want, "RDB key {k}");
        assert_eq!(c2.cmd(&["XLEN", k]), want, "RDB key {k}");
    }
    assert_eq!(c2.cmd(&["XS.IMPORT", "k"]), Reply::Int(2));
    assert_eq!(c2.raw(&["XRANGE", "k", "-", "+"]), reference[0]);
    // One key imported, the other not: a read over both is refused.
    assert_eq!(c2.cmd(&["XREAD", "STREAMS", "k", "other", "0", "0"]), want);
    assert_eq!(c2.cmd(&["XS.IMPORT", "other"]), Reply::Int(1));
    let r = c2.cmd(&["XREAD", "STREAMS", "k", "other", "0", "0"]);
    assert!(!r.is_error(), "XREAD after importing both: {r}");
}
