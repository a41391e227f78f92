//! Redis 8.8's XNACK as XS.NACK, the per-group delivery-time order and its NACK zone
//! (REDIS8.md §4.2, §6), on the module's commands, on whatever host runs this. Each [VT]
//! example of §6 is a test here, run in RESP2 and in RESP3. No built-in to compare with on the
//! hosts of the matrix (8.8 is the first release with XNACK): the expected replies are the
//! spec's, which real 8.8 servers gave.
//!
//! Also: the encoding-1 fixture (tests/fixtures/groups_encver1.rdb, saved by the build before
//! the time list existed) loads exactly with the current build.

mod common;

use common::*;

fn info_full(c: &mut Conn, key: &str) -> String {
    let mut r = c.cmd(&["XS.INFO", "STREAM", key, "FULL"]);
    strip_field(&mut r, "active-time");
    r.to_string()
}

// ---- the encoding-1 fixture ------------------------------------------------------------------

const FIXTURE_S1: &str = concat!(
    r#"["length", (integer) 8, "radix-tree-keys", (integer) 1, "radix-tree-nodes", (integer) 2, "#,
    r#""last-generated-id", "10-1", "max-deleted-entry-id", "9-0", "entries-added", (integer) 11, "#,
    r#""recorded-first-entry-id", "1-0", "entries", ["#,
    r#"["1-0", ["f", "v1", "n", "1"]], ["2-0", ["f", "v2", "n", "2"]], ["3-0", ["f", "v3", "n", "3"]], "#,
    r#"["4-0", ["f", "v4", "n", "4"]], ["6-0", ["f", "v6", "n", "6"]], ["7-0", ["f", "v7", "n", "7"]], "#,
    r#"["10-0", ["f", "v10", "n", "10"]], ["10-1", ["other", "field"]]], "#,
    r#""groups", [["name", "g1", "last-delivered-id", "8-0", "entries-read", (integer) 8, "lag", (nil), "#,
    r#""pel-count", (integer) 7, "pending", ["#,
    r#"["1-0", "alice", (integer) 1700000000300, (integer) 3], "#,
    r#"["3-0", "bob", (integer) 1700000000100, (integer) 1], "#,
    r#"["4-0", "bob", (integer) 1700000000200, (integer) 2], "#,
    r#"["5-0", "bob", (integer) 1796156128138, (integer) 1], "#,
    r#"["6-0", "alice", (integer) 1700000000100, (integer) 5], "#,
    r#"["7-0", "bob", (integer) 1700000000050, (integer) 1], "#,
    r#"["8-0", "alice", (integer) 1700000000000, (integer) 4]], "#,
    r#""consumers", ["#,
    r#"["name", "alice", "seen-time", (integer) 1796156128169, "pel-count", (integer) 3, "pending", ["#,
    r#"["1-0", (integer) 1700000000300, (integer) 3], ["6-0", (integer) 1700000000100, (integer) 5], "#,
    r#"["8-0", (integer) 1700000000000, (integer) 4]]], "#,
    r#"["name", "bob", "seen-time", (integer) 1796156128166, "pel-count", (integer) 4, "pending", ["#,
    r#"["3-0", (integer) 1700000000100, (integer) 1], ["4-0", (integer) 1700000000200, (integer) 2], "#,
    r#"["5-0", (integer) 1796156128138, (integer) 1], ["7-0", (integer) 1700000000050, (integer) 1]]], "#,
    r#"["name", "idle", "seen-time", (integer) 1796156128129, "pel-count", (integer) 0, "pending", []]]], "#,
    r#"["name", "g2", "last-delivered-id", "10-1", "entries-read", (nil), "lag", (integer) 0, "#,
    r#""pel-count", (integer) 0, "pending", [], "consumers", []]]]"#,
);

const FIXTURE_S3: &str = concat!(
    r#"["length", (integer) 1, "radix-tree-keys", (integer) 1, "radix-tree-nodes", (integer) 2, "#,
    r#""last-generated-id", "5-5", "max-deleted-entry-id", "0-0", "entries-added", (integer) 1, "#,
    r#""recorded-first-entry-id", "5-5", "entries", [["5-5", ["a", "b"]]], "#,
    r#""groups", [["name", "g", "last-delivered-id", "5-5", "entries-read", (integer) 1, "lag", (integer) 0, "#,
    r#""pel-count", (integer) 1, "pending", [["5-5", "c", (integer) 1600000000000, (integer) 7]], "#,
    r#""consumers", [["name", "c", "seen-time", (integer) 1796156128193, "pel-count", (integer) 1, "pending", "#,
    r#"[["5-5", (integer) 1600000000000, (integer) 7]]]]]]]"#,
);

const FIXTURE_S2: &str = concat!(
    r#"["length", (integer) 1, "radix-tree-keys", (integer) 1, "radix-tree-nodes", (integer) 2, "#,
    r#""last-generated-id", "1-1", "max-deleted-entry-id", "0-0", "entries-added", (integer) 1, "#,
    r#""recorded-first-entry-id", "1-1", "entries", [["1-1", ["a", "b"]]], "groups", []]"#,
);

/// The fixture was written by the module at encoding 1 (7f2f0f3) on Redis 7.0.15: s1 with
/// groups g1 (consumers alice, bob and idle; PEL entries claimed at explicit times out of ID
/// order; 2-0 acked; 5-0 and 8-0 deleted after delivery: ghosts) and g2 (empty); s2 without
/// groups; s3 with one pending entry. Loaded by this build, everything reads back exactly,
/// a DEBUG RELOAD (encoding 2 now) keeps it, and so does a DUMP / RESTORE.
#[test]
fn encver1_fixture_loads_exactly() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/groups_encver1.rdb");
    let mut s = Server::start();
    std::fs::copy(&fixture, s.dir().join("dump.rdb")).unwrap();
    s.restart();
    let mut c = s.conn();
    let check = |c: &mut Conn, what: &str| {
        assert_eq!(c.cmd(&["DBSIZE"]).as_int(), 3, "{what}");
        assert_eq!(info_full(c, "s1"), FIXTURE_S1, "{what}");
        assert_eq!(info_full(c, "s2"), FIXTURE_S2, "{what}");
        assert_eq!(info_full(c, "s3"), FIXTURE_S3, "{what}");
        let p = c.cmd(&["XS.PENDING", "s1", "g1"]);
        assert_eq!(p.to_string(), r#"[(integer) 7, "1-0", "8-0", [["alice", "3"], ["bob", "4"]]]"#, "{what}");
    };
    check(&mut c, "loaded");
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
    check(&mut c, "reloaded");
    for k in ["s1", "s2", "s3"] {
        let dump = c.cmd(&["DUMP", k]);
        let Reply::Bulk(payload) = dump else { panic!("DUMP {k}: {dump}") };
        assert_eq!(c.cmd(&[b"RESTORE".as_slice(), k.as_bytes(), b"0", &payload, b"REPLACE"]), Reply::Simple("OK".into()));
    }
    check(&mut c, "restored");
}

// ---- helpers ---------------------------------------------------------------------------------

use std::time::Duration;

fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

/// Runs `f` on a fresh database in RESP2, then again in RESP3.
fn both(s: &Server, f: impl Fn(&mut Conn)) {
    each_protocol(s, |c, _| f(c));
}

/// `s` with entries 1-0 .. n-0, group `g` at 0, and the first `read` of them delivered to
/// consumer `c` (count 1 each).
fn setup(c: &mut Conn, n: u64, read: u64) {
    for i in 1..=n {
        let id = format!("{i}-0");
        assert_eq!(c.cmd(&["XS.ADD", "s", &id, "f", &format!("v{i}")]).text(), id);
    }
    assert_eq!(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]), ok());
    if read > 0 {
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "COUNT", &read.to_string(), "STREAMS", "s", ">"]);
        assert!(!r.is_nil() && !r.is_error(), "{r}");
    }
}

fn nack(c: &mut Conn, args: &[&str]) -> Reply {
    let mut v = vec!["XS.NACK"];
    v.extend_from_slice(args);
    c.cmd(&v)
}

/// XS.PENDING s g - + 100 as text.
fn pending(c: &mut Conn) -> String {
    c.cmd(&["XS.PENDING", "s", "g", "-", "+", "100"]).to_string()
}

/// A pending row of an unowned entry: [id, "", -1, count].
fn unowned_row(id: &str, count: &str) -> String {
    format!(r#"["{id}", "", (integer) -1, (integer) {count}]"#)
}

/// The rows of XS.PENDING (id, owner, count), idle left out.
fn rows(c: &mut Conn) -> Vec<(String, String, i64)> {
    c.cmd(&["XS.PENDING", "s", "g", "-", "+", "100"])
        .as_array()
        .iter()
        .map(|r| {
            let r = r.as_array();
            (r[0].text(), r[1].text(), r[3].as_int())
        })
        .collect()
}

// ---- §6.1 parsing and errors -----------------------------------------------------------------

/// REDIS8.md §6.1 [VT TCG]: arity, then WRONGTYPE, NOGROUP before the mode, the mode, the
/// options in any order, then the IDs; one `ERR` prefix.
#[test]
fn xnack_parsing_and_errors() {
    let s = Server::start();
    both(&s, |c| {
        assert_eq!(nack(c, &["k", "g", "FAIL", "RETRYCOUNT"]), err("ERR wrong number of arguments for 'xs.nack' command"));
        // Missing key or group: NOGROUP, before the mode is looked at.
        assert_eq!(nack(c, &["nokey", "g", "BADMODE", "IDS", "1", "1-0"]), err("NOGROUP No such key 'nokey' or consumer group 'g'"));
        assert_eq!(c.cmd(&["SET", "str", "x"]), ok());
        assert_eq!(nack(c, &["str", "g", "BADMODE", "IDS", "1", "1-0"]), err("WRONGTYPE Operation against a key holding the wrong kind of value"));
        setup(c, 3, 1);
        assert_eq!(nack(c, &["s", "nog", "BADMODE", "IDS", "1", "1-0"]), err("NOGROUP No such key 's' or consumer group 'nog'"));
        // The mode (case-insensitive).
        assert_eq!(nack(c, &["s", "g", "BAD", "IDS", "1", "1-0"]), err("ERR mode must be SILENT, FAIL, or FATAL"));
        assert_eq!(nack(c, &["s", "g", "IDS", "1", "1-0", "FAIL"]), err("ERR mode must be SILENT, FAIL, or FATAL"));
        assert_eq!(nack(c, &["s", "g", "BAD", "IDS", "0", "x"]), err("ERR mode must be SILENT, FAIL, or FATAL"));
        for n in ["0", "-1", "abc", "2147483648", "1.5"] {
            assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", n, "1-0"]), err("ERR numids must be a positive integer"), "IDS {n}");
        }
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "3", "1-0", "2-0"]), err("ERR number of IDs doesn't match numids"));
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "2147483647", "1-0"]), err("ERR number of IDs doesn't match numids"));
        // Fewer IDs than arguments: the surplus is read as an option.
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "1-0", "2-0"]), err("ERR Unrecognized XNACK option '2-0'"));
        assert_eq!(nack(c, &["s", "g", "FAIL", "RETRYCOUNT", "x", "IDS", "1", "1-0"]), err("ERR value is not an integer or out of range"));
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "-1"]), err("ERR Invalid RETRYCOUNT value, must be >= 0"));
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "1-0", "RETRYCOUNT"]), err("ERR Unrecognized XNACK option 'RETRYCOUNT'"));
        assert_eq!(nack(c, &["s", "g", "FAIL", "RETRYCOUNT", "1", "IDS"]), err("ERR Unrecognized XNACK option 'IDS'"));
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "1-0", "FATAL"]), err("ERR Unrecognized XNACK option 'FATAL'"));
        assert_eq!(nack(c, &["s", "g", "FAIL", "NOTIDS", "1", "1-0"]), err("ERR Unrecognized XNACK option 'NOTIDS'"));
        assert_eq!(nack(c, &["s", "g", "FAIL", "FORCE", "FORCE", "FORCE"]), err("ERR syntax error, expected IDS keyword"));
        // Option errors come before ID errors; the IDs are all parsed before anything changes.
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "abc", "FOO"]), err("ERR Unrecognized XNACK option 'FOO'"));
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "2", "1-0", "abc"]), err("ERR Invalid stream ID specified as stream command argument"));
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "-"]), err("ERR Invalid stream ID specified as stream command argument"));
        assert_eq!(rows(c), [("1-0".to_string(), "c".to_string(), 1)], "nothing changed");
        // A second IDS block overrides the first (whose IDs are then never parsed).
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "abc", "IDS", "1", "2-0"]), Reply::Int(0));
        // Options in any order, lower case.
        assert_eq!(nack(c, &["s", "g", "fail", "force", "retrycount", "2", "ids", "1", "3-0"]), Reply::Int(1));
        assert_eq!(rows(c), [("1-0".to_string(), "c".to_string(), 1), ("3-0".to_string(), "".to_string(), 2)]);
    });
}

// ---- §6.2 semantics --------------------------------------------------------------------------

/// REDIS8.md §6.2 [VT TCG]: after one read, SILENT / FAIL / FATAL give counts 0 / 1 / LLONG_MAX,
/// the entry unowned with idle -1.
#[test]
fn xnack_modes() {
    let s = Server::start();
    for (mode, count) in [("SILENT", "0"), ("FAIL", "1"), ("FATAL", "9223372036854775807")] {
        both(&s, |c| {
            setup(c, 1, 1);
            assert_eq!(nack(c, &["s", "g", mode, "IDS", "1", "1-0"]), Reply::Int(1), "{mode}");
            assert_eq!(pending(c), format!("[{}]", unowned_row("1-0", count)), "{mode}");
            // Again: SILENT floors at 0, FAIL keeps, FATAL stays at LLONG_MAX.
            assert_eq!(nack(c, &["s", "g", mode, "IDS", "1", "1-0"]), Reply::Int(1), "{mode}");
            assert_eq!(pending(c), format!("[{}]", unowned_row("1-0", count)), "{mode} twice");
        });
    }
}

/// REDIS8.md §6.2 [VT TCG]: IDs not pending are skipped and not counted; duplicates count each
/// time; RETRYCOUNT overrides the mode, the last one wins.
#[test]
fn xnack_counts_and_duplicates() {
    let s = Server::start();
    both(&s, |c| {
        setup(c, 3, 3);
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "5", "1-0", "9-9", "2-0", "8-8", "3-0"]), Reply::Int(3));
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "2", "1-0", "1-0"]), Reply::Int(2));
        assert_eq!(nack(c, &["s", "g", "FATAL", "RETRYCOUNT", "4", "IDS", "1", "2-0", "RETRYCOUNT", "6"]), Reply::Int(1));
        assert_eq!(pending(c), format!("[{}, {}, {}]", unowned_row("1-0", "1"), unowned_row("2-0", "6"), unowned_row("3-0", "1")));
        // The consumer is neither deleted nor emptied of anything else.
        let consumers = c.cmd(&["XS.INFO", "CONSUMERS", "s", "g"]);
        assert_eq!(consumers.as_array().len(), 1, "{consumers}");
        assert_eq!(consumers.as_array()[0].field("pending"), Some(&Reply::Int(0)));
        // A consumer is not created by XNACK.
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "1-0"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.INFO", "CONSUMERS", "s", "g"]).as_array().len(), 1);
    });
}

/// REDIS8.md §6.2 [VT TCG]: FORCE creates an unowned entry for an existing, never-read entry
/// (count 0 before the rule), skips a missing one, and on an owned entry takes the normal path.
#[test]
fn xnack_force() {
    let s = Server::start();
    both(&s, |c| {
        setup(c, 4, 0);
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "7", "FORCE"]), Reply::Int(1));
        assert_eq!(pending(c), format!("[{}]", unowned_row("1-0", "7")));
        assert_eq!(nack(c, &["s", "g", "SILENT", "FORCE", "IDS", "1", "2-0"]), Reply::Int(1));
        assert_eq!(nack(c, &["s", "g", "FATAL", "FORCE", "IDS", "1", "3-0"]), Reply::Int(1));
        // Without FORCE a never-read entry is skipped; with FORCE a missing one too.
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "4-0"]), Reply::Int(0));
        assert_eq!(nack(c, &["s", "g", "FAIL", "FORCE", "IDS", "2", "9-0", "0-1"]), Reply::Int(0));
        assert_eq!(pending(c), format!("[{}, {}, {}]", unowned_row("1-0", "7"), unowned_row("2-0", "0"), unowned_row("3-0", "9223372036854775807")));
        // FORCE on an owned entry: the normal path (FAIL keeps its count 1).
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
        assert_eq!(rows(c).last(), Some(&("4-0".to_string(), "c".to_string(), 1)));
        assert_eq!(nack(c, &["s", "g", "FAIL", "FORCE", "IDS", "1", "4-0"]), Reply::Int(1));
        assert_eq!(rows(c).last(), Some(&("4-0".to_string(), "".to_string(), 1)));
    });
}

/// REDIS8.md §6.2: one change per NACK, propagation only when > 0 (dirty unchanged at 0), and no
/// keyspace event.
#[test]
fn xnack_dirty_and_no_event() {
    let s = Server::start();
    let mut c = s.conn();
    setup(&mut c, 3, 3);
    assert_eq!(c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]), ok());
    let mut sub = s.conn();
    sub.cmd(&["SUBSCRIBE", "done"]);
    sub.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    let d0 = dirty(&mut c);
    assert_eq!(nack(&mut c, &["s", "g", "FAIL", "IDS", "3", "1-0", "2-0", "3-0"]), Reply::Int(3));
    assert_eq!(dirty(&mut c) - d0, 3);
    assert_eq!(nack(&mut c, &["s", "g", "FAIL", "IDS", "1", "7-0"]), Reply::Int(0));
    assert_eq!(dirty(&mut c) - d0, 3);
    c.cmd(&["PUBLISH", "done", "1"]);
    let events = read_events_until_message(&mut sub);
    assert!(events.is_empty(), "events: {events:?}");
}

// ---- §6.3 effects on other commands ---------------------------------------------------------

/// REDIS8.md §6.3 [VT]: XPENDING shows unowned entries with owner "" and idle -1; the IDLE
/// filter never excludes them; the summary counts them but lists no owner for them; a
/// consumer's own form leaves them out.
#[test]
fn xpending_with_nacked_entries() {
    let s = Server::start();
    both(&s, |c| {
        setup(c, 3, 3);
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "2-0"]), Reply::Int(1));
        let summary = c.cmd(&["XS.PENDING", "s", "g"]);
        assert_eq!(summary.to_string(), r#"[(integer) 3, "1-0", "3-0", [["c", "2"]]]"#);
        let idle = c.cmd(&["XS.PENDING", "s", "g", "IDLE", "99999999", "-", "+", "10"]);
        assert_eq!(idle.to_string(), format!("[{}]", unowned_row("2-0", "1")));
        let own = c.cmd(&["XS.PENDING", "s", "g", "-", "+", "10", "c"]);
        assert_eq!(own.as_array().iter().map(|r| r.as_array()[0].text()).collect::<Vec<_>>(), ["1-0", "3-0"]);
        // Owned rows keep an idle >= 0.
        for r in c.cmd(&["XS.PENDING", "s", "g", "-", "+", "10"]).as_array() {
            let r = r.as_array();
            if r[1].text() == "c" {
                assert!(r[2].as_int() >= 0, "{}", r[2]);
            }
        }
        // Everything NACKed: the summary has no consumer row (nil in RESP2 would be for an
        // empty PEL only: here an empty array).
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "2", "1-0", "3-0"]), Reply::Int(2));
        assert_eq!(c.cmd(&["XS.PENDING", "s", "g"]).to_string(), r#"[(integer) 3, "1-0", "3-0", []]"#);
    });
}

/// REDIS8.md §6.3 / §9 [VT]: XINFO STREAM FULL shows a NACKed entry as [id, "", 0, count]; at
/// `compat latest` each group has `nacked-count` after `pel-count` (8 fields); at the host's
/// level (7.0 here) the group keeps its 7 fields.
#[test]
fn xinfo_full_nacked() {
    let s = Server::start();
    for latest in [false, true] {
        s.conn().cmd(&["CONFIG", "SET", "xstream.compat", if latest { "latest" } else { "host" }]);
        both(&s, |c| {
            setup(c, 3, 2);
            assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "2-0", "RETRYCOUNT", "5"]), Reply::Int(1));
            assert_eq!(nack(c, &["s", "g", "FAIL", "FORCE", "IDS", "1", "3-0"]), Reply::Int(1));
            let full = c.cmd(&["XS.INFO", "STREAM", "s", "FULL"]);
            let groups = full.field("groups").unwrap().as_array();
            let g = &groups[0];
            let names: Vec<String> = match g {
                Reply::Map(kv) => kv.iter().map(|(k, _)| k.text()).collect(),
                Reply::Array(v) => v.chunks(2).map(|c| c[0].text()).collect(),
                other => panic!("{other}"),
            };
            let mut want = vec!["name", "last-delivered-id", "entries-read", "lag", "pel-count"];
            if latest {
                want.push("nacked-count");
            }
            want.extend(["pending", "consumers"]);
            assert_eq!(names, want, "latest {latest}");
            if latest {
                assert_eq!(g.field("nacked-count"), Some(&Reply::Int(2)));
            }
            assert_eq!(g.field("pel-count"), Some(&Reply::Int(3)));
            let p = g.field("pending").unwrap().as_array();
            assert_eq!(p[1].to_string(), r#"["2-0", "", (integer) 0, (integer) 5]"#);
            assert_eq!(p[2].to_string(), r#"["3-0", "", (integer) 0, (integer) 0]"#);
            assert_eq!(p[0].as_array()[1].text(), "c");
            // The consumer's own pending list holds only 1-0.
            let cons = g.field("consumers").unwrap().as_array();
            assert_eq!(cons[0].field("pel-count"), Some(&Reply::Int(1)));
        });
    }
    s.conn().cmd(&["CONFIG", "SET", "xstream.compat", "host"]);
}

/// nacked-count as XINFO (latest) shows it.
fn nacked_count(c: &mut Conn) -> i64 {
    let full = c.cmd(&["XS.INFO", "STREAM", "s", "FULL"]);
    full.field("groups").unwrap().as_array()[0].field("nacked-count").unwrap().as_int()
}

/// REDIS8.md §6.3 [VT]: XCLAIM and XAUTOCLAIM skip the min-idle test for NACKed entries (99999
/// succeeds); claiming takes the entry out of the zone.
#[test]
fn xclaim_and_xautoclaim_take_nacked_entries() {
    let s = Server::start();
    s.conn().cmd(&["CONFIG", "SET", "xstream.compat", "latest"]);
    both(&s, |c| {
        setup(c, 3, 3);
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "3", "1-0", "2-0", "3-0"]), Reply::Int(3));
        assert_eq!(nacked_count(c), 3);
        let r = c.cmd(&["XS.CLAIM", "s", "g", "c2", "99999", "2-0", "JUSTID"]);
        assert_eq!(r.to_string(), r#"["2-0"]"#);
        assert_eq!(nacked_count(c), 2);
        // An owned entry still obeys min-idle.
        assert_eq!(c.cmd(&["XS.CLAIM", "s", "g", "c3", "99999", "2-0", "JUSTID"]).to_string(), "[]");
        let r = c.cmd(&["XS.AUTOCLAIM", "s", "g", "c3", "99999", "0", "JUSTID"]);
        assert_eq!(r.to_string(), r#"["0-0", ["1-0", "3-0"], []]"#);
        assert_eq!(nacked_count(c), 0);
        assert_eq!(
            rows(c),
            [("1-0".to_string(), "c3".to_string(), 1), ("2-0".to_string(), "c2".to_string(), 1), ("3-0".to_string(), "c3".to_string(), 1)]
        );
        // Without JUSTID the count goes up (from the NACKed count).
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "4"]), Reply::Int(1));
        let r = c.cmd(&["XS.CLAIM", "s", "g", "c2", "99999", "1-0"]);
        assert_eq!(r.as_array().len(), 1);
        assert_eq!(rows(c)[0], ("1-0".to_string(), "c2".to_string(), 5));
    });
    s.conn().cmd(&["CONFIG", "SET", "xstream.compat", "host"]);
}

/// REDIS8.md §6.3 [VS; VT]: a NACKed entry whose stream entry was deleted (XDEL and XTRIM leave
/// it, KEEPREF): XCLAIM removes it and returns nothing, XAUTOCLAIM lists it among the deleted IDs.
#[test]
fn deleted_nacked_entries() {
    let s = Server::start();
    both(&s, |c| {
        setup(c, 4, 4);
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "4", "1-0", "2-0", "3-0", "4-0"]), Reply::Int(4));
        assert_eq!(c.cmd(&["XS.DEL", "s", "1-0", "2-0"]), Reply::Int(2));
        assert_eq!(c.cmd(&["XS.TRIM", "s", "MINID", "4-0", "KEEPREF"]), Reply::Int(1));
        assert_eq!(rows(c).len(), 4, "the ghosts stay pending");
        // A ghost can be NACKed again (moves to the end of the zone).
        assert_eq!(nack(c, &["s", "g", "SILENT", "IDS", "1", "1-0"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.CLAIM", "s", "g", "c2", "0", "1-0", "4-0", "JUSTID"]).to_string(), r#"["4-0"]"#);
        assert_eq!(
            rows(c),
            [("2-0".to_string(), "".to_string(), 1), ("3-0".to_string(), "".to_string(), 1), ("4-0".to_string(), "c2".to_string(), 1)]
        );
        let r = c.cmd(&["XS.AUTOCLAIM", "s", "g", "c2", "0", "0", "JUSTID"]);
        assert_eq!(r.to_string(), r#"["0-0", ["4-0"], ["2-0", "3-0"]]"#);
        assert_eq!(rows(c), [("4-0".to_string(), "c2".to_string(), 1)]);
    });
}

/// REDIS8.md §6.3 [VT]: XACK removes NACKed entries; XGROUP DELCONSUMER removes only the
/// consumer's own (its reply counts those), NACKed ones survive; XGROUP DESTROY removes all.
#[test]
fn xack_delconsumer_destroy() {
    let s = Server::start();
    both(&s, |c| {
        setup(c, 4, 4);
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "2", "1-0", "2-0"]), Reply::Int(2));
        assert_eq!(c.cmd(&["XS.ACK", "s", "g", "1-0"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.GROUP", "DELCONSUMER", "s", "g", "c"]), Reply::Int(2));
        assert_eq!(rows(c), [("2-0".to_string(), "".to_string(), 1)]);
        assert_eq!(c.cmd(&["XS.GROUP", "DESTROY", "s", "g"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]), ok());
        assert_eq!(rows(c), []);
    });
}

/// REDIS8.md §6.3 [VT]: a history read (`XREADGROUP ... 0`) returns only the consumer's own
/// pending entries: NACKed ones are excluded.
#[test]
fn history_read_excludes_nacked() {
    let s = Server::start();
    both(&s, |c| {
        setup(c, 3, 3);
        assert_eq!(nack(c, &["s", "g", "FAIL", "IDS", "1", "2-0"]), Reply::Int(1));
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", "0"]);
        let ids: Vec<String> = match &r {
            Reply::Map(kv) => kv[0].1.as_array().iter().map(|e| e.as_array()[0].text()).collect(),
            Reply::Array(v) => v[0].as_array()[1].as_array().iter().map(|e| e.as_array()[0].text()).collect(),
            other => panic!("{other}"),
        };
        assert_eq!(ids, ["1-0", "3-0"]);
        // The re-read counted as deliveries of 1-0 and 3-0 only.
        assert_eq!(
            rows(c),
            [("1-0".to_string(), "c".to_string(), 2), ("2-0".to_string(), "".to_string(), 1), ("3-0".to_string(), "c".to_string(), 2)]
        );
    });
}

/// REDIS8.md §6.3 [VS]: at `compat latest` every path that increments a delivery count stops at
/// LLONG_MAX (history re-read, XCLAIM, XAUTOCLAIM). Below it the count wraps as the hosts'
/// built-ins' uint64_t does (the differential runners compare that).
#[test]
fn delivery_counts_saturate() {
    let s = Server::start();
    both(&s, |c| {
        setup(c, 1, 1);
        c.cmd(&["XS.CLAIM", "s", "g", "c", "0", "1-0", "RETRYCOUNT", "9223372036854775807"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", "0"]);
        assert_eq!(rows(c), [("1-0".to_string(), "c".to_string(), i64::MIN)], "host level: wraps");
    });
    s.conn().cmd(&["CONFIG", "SET", "xstream.compat", "latest"]);
    both(&s, |c| {
        setup(c, 1, 1);
        let max = "9223372036854775807";
        assert_eq!(nack(c, &["s", "g", "FATAL", "IDS", "1", "1-0"]), Reply::Int(1));
        c.cmd(&["XS.CLAIM", "s", "g", "c", "0", "1-0"]);
        assert_eq!(rows(c), [("1-0".to_string(), "c".to_string(), i64::MAX)]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", "0"]);
        assert_eq!(rows(c), [("1-0".to_string(), "c".to_string(), i64::MAX)]);
        c.cmd(&["XS.AUTOCLAIM", "s", "g", "c", "0", "0"]);
        assert_eq!(rows(c), [("1-0".to_string(), "c".to_string(), i64::MAX)]);
        c.cmd(&["XS.CLAIM", "s", "g", "c", "0", "1-0", "RETRYCOUNT", "9223372036854775806"]);
        c.cmd(&["XS.CLAIM", "s", "g", "c", "0", "1-0"]);
        c.cmd(&["XS.CLAIM", "s", "g", "c", "0", "1-0"]);
        assert_eq!(rows(c)[0].2.to_string(), max);
    });
    s.conn().cmd(&["CONFIG", "SET", "xstream.compat", "host"]);
}

/// REDIS8.md §6.2 / §4.5: XS.NACK signals the key: a blocked XS.READGROUP `>` re-runs, finds
/// nothing new and stays blocked (no reply), then an XS.ADD serves it.
#[test]
fn xnack_wakes_blocked_readers_which_block_again() {
    let s = Server::start();
    let mut c = s.conn();
    setup(&mut c, 2, 2);
    let mut b = s.conn();
    b.send(&["XS.READGROUP", "GROUP", "g", "c2", "BLOCK", "5000", "STREAMS", "s", ">"]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(nack(&mut c, &["s", "g", "FAIL", "IDS", "1", "1-0"]), Reply::Int(1));
    b.set_timeout(Duration::from_millis(300));
    assert!(b.read_reply().is_err(), "a reply after XS.NACK");
    assert_eq!(c.cmd(&["XS.ADD", "s", "3-0", "f", "v"]).text(), "3-0");
    b.set_timeout(Duration::from_secs(5));
    let (r, _) = b.read_reply().unwrap();
    assert!(r.to_string().contains("3-0"), "{r}");
    assert!(!r.to_string().contains("1-0"), "{r}");
}

// ---- order, persistence, replication ---------------------------------------------------------

/// The commands of the AOF files of `s` (base and increments), as argument vectors.
fn aof_commands(s: &Server) -> Vec<Vec<String>> {
    let mut files: Vec<_> = std::fs::read_dir(s.dir().join("appendonlydir"))
        .expect("appendonlydir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| !p.to_string_lossy().ends_with(".manifest"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let data = std::fs::read(&f).unwrap();
        let mut i = 0;
        let line = |i: &mut usize| -> String {
            let start = *i;
            while *i + 1 < data.len() && &data[*i..*i + 2] != b"\r\n" {
                *i += 1;
            }
            let l = String::from_utf8_lossy(&data[start..*i]).into_owned();
            *i += 2;
            l
        };
        while i < data.len() {
            let head = line(&mut i);
            let Some(n) = head.strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) else { continue };
            let mut cmd = Vec::new();
            for _ in 0..n {
                let len: usize = line(&mut i).trim_start_matches('$').parse().unwrap();
                cmd.push(String::from_utf8_lossy(&data[i..i + len]).into_owned());
                i += len + 2;
            }
            out.push(cmd);
        }
    }
    out
}

/// REDIS8.md §4.2 / §6.4: the NACK zone is FIFO in XNACK order (a re-NACK moves an entry to its
/// end) and sits before the time order. An AOF rewrite emits the owned entries as XS.CLAIM in
/// time order, then the zone in order as `XS.NACK key group FAIL IDS n ... RETRYCOUNT c FORCE`
/// batches of at most 64 IDs with the same count; NACKed ghosts are not emitted. The restart
/// from that AOF gives the same digest (order included) and pending entries, ghosts excepted.
#[test]
fn zone_order_and_aof_rewrite() {
    let mut s = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "no").start();
    let mut c = s.conn();
    setup(&mut c, 200, 10);
    // Owned entries at explicit times out of ID order: 3-0 oldest, then 1-0, then 2-0.
    for (id, t) in [("1-0", "1700000000200"), ("2-0", "1700000000300"), ("3-0", "1700000000100")] {
        assert_eq!(c.cmd(&["XS.CLAIM", "s", "g", "c", "0", id, "TIME", t, "JUSTID"]).to_string(), format!(r#"["{id}"]"#));
    }
    // The zone: 5-0, 4-0 (RETRYCOUNT 2), 6-0 .. 9-0 then 5-0 again (to the end), 11-0 .. 150-0
    // by FORCE (count 0), 10-0 NACKed then deleted (a ghost).
    nack(&mut c, &["s", "g", "FAIL", "IDS", "1", "5-0"]);
    nack(&mut c, &["s", "g", "FAIL", "IDS", "1", "4-0", "RETRYCOUNT", "2"]);
    nack(&mut c, &["s", "g", "FAIL", "IDS", "5", "6-0", "7-0", "8-0", "9-0", "5-0"]);
    nack(&mut c, &["s", "g", "FAIL", "IDS", "1", "10-0"]);
    let forced: Vec<String> = (11..=150).map(|i| format!("{i}-0")).collect();
    let mut args: Vec<&str> = vec!["s", "g", "SILENT", "FORCE", "IDS", "140"];
    args.extend(forced.iter().map(String::as_str));
    assert_eq!(nack(&mut c, &args), Reply::Int(140));
    assert_eq!(c.cmd(&["XS.DEL", "s", "10-0"]), Reply::Int(1));
    // What the rewrite must give back: the same state without the ghost (COPY, then XS.ACK of it).
    assert_eq!(c.cmd(&["COPY", "s", "want"]), Reply::Int(1));
    assert_eq!(c.cmd(&["XS.ACK", "want", "g", "10-0"]), Reply::Int(1));
    let want = c.raw(&["DEBUG", "DIGEST-VALUE", "want"]);
    assert_ne!(want, c.raw(&["DEBUG", "DIGEST-VALUE", "s"]));
    let want_rows = all_rows(&mut c, "want");
    assert_eq!(c.cmd(&["DEL", "want"]), Reply::Int(1));
    assert!(!c.cmd(&["BGREWRITEAOF"]).is_error());
    wait_persistence_idle(&mut c, Duration::from_secs(60));
    let cmds = aof_commands(&s);
    let claims: Vec<String> = cmds.iter().filter(|v| v[0] == "XS.CLAIM").map(|v| v[5].clone()).collect();
    assert_eq!(claims, ["3-0", "1-0", "2-0"]);
    let nacks: Vec<&Vec<String>> = cmds.iter().filter(|v| v[0] == "XS.NACK").collect();
    let shape: Vec<(String, usize, String)> = nacks.iter().map(|v| (v[6].clone(), v[5].parse().unwrap(), v[v.len() - 2].clone())).collect();
    assert_eq!(
        shape,
        [
            ("4-0".into(), 1, "2".into()),
            ("6-0".into(), 5, "1".into()),
            ("11-0".into(), 64, "0".into()),
            ("75-0".into(), 64, "0".into()),
            ("139-0".into(), 12, "0".into())
        ]
    );
    for v in &nacks {
        assert_eq!(
            (&v[1][..], &v[2][..], &v[3][..], &v[4][..], &v[v.len() - 3][..], &v[v.len() - 1][..]),
            ("s", "g", "FAIL", "IDS", "RETRYCOUNT", "FORCE")
        );
    }
    assert_eq!(nacks[1][6..11], ["6-0", "7-0", "8-0", "9-0", "5-0"]);
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(c.raw(&["DEBUG", "DIGEST-VALUE", "s"]), want, "order, counts, owners after the rewrite");
    let got = all_rows(&mut c, "s");
    assert_eq!(got, want_rows);
    assert_eq!(got.len(), 3 + 6 + 140);
}

/// (id, owner, count) of every pending entry of `key`'s group g.
fn all_rows(c: &mut Conn, key: &str) -> Vec<(String, String, i64)> {
    c.cmd(&["XS.PENDING", key, "g", "-", "+", "100000"])
        .as_array()
        .iter()
        .map(|r| {
            let r = r.as_array();
            (r[0].text(), r[1].text(), r[3].as_int())
        })
        .collect()
}

/// The IDs pending in group `g` of `key` whose stream entry is gone.
fn ghosts(c: &mut Conn, key: &str, g: &str) -> Vec<String> {
    let mut out = Vec::new();
    for r in c.cmd(&["XS.PENDING", key, g, "-", "+", "100000"]).as_array() {
        let id = r.as_array()[0].text();
        if c.cmd(&["XS.RANGE", key, &id, &id]).as_array().is_empty() {
            out.push(id);
        }
    }
    out
}

/// REDIS8.md §6.4 [VT]: a random workload of deliveries, XS.NACK (every mode, RETRYCOUNT,
/// FORCE, duplicates, ghosts), claims at now and at explicit times, XS.AUTOCLAIM, acks,
/// deletions, trims, consumer deletions and SETID re-deliveries (also in MULTI and
/// from EVAL) on a primary: the replica, DUMP / RESTORE, COPY, DEBUG RELOAD and an AOF restart
/// end with the same digests (which cover the NACK zone and the time order) and pending
/// entries; an AOF rewrite too, ghosts excepted (they are dropped, see docs/redis8.md).
#[test]
fn nack_workload_replicates_and_persists() {
    // At `compat latest` (8.8: delivery counts saturate). Below it they wrap past LLONG_MAX as
    // the hosts' built-ins do, and a wrapped count reaches a replica as a negative RETRYCOUNT
    // (streamPropagateXCLAIM's long long), which XCLAIM JUSTID reads as "keep": the built-in's
    // own divergence, left out here.
    let mut primary = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "no").module_args(&["compat", "latest"]).start();
    let replica = Server::replica_of(&primary);
    let mut c = primary.conn();
    let mut rng = Rng::from_env("nack_workload_replicates_and_persists");
    let keys = ["n0", "n1", "n2"];
    let groups = ["ga", "gb"];
    let consumers = ["c1", "c2", "c3"];
    let mut next_id = [0u64; 3];
    for (k, key) in keys.iter().enumerate() {
        for _ in 0..40 {
            next_id[k] += 1;
            c.cmd(&["XS.ADD", key, &format!("{}-0", next_id[k]), "f", "v"]);
        }
        for g in groups {
            c.cmd(&["XS.GROUP", "CREATE", key, g, "0"]);
        }
    }
    let ops = env_usize("XSTREAM_NACK_OPS", 1500);
    for _ in 0..ops {
        let k = rng.below(3) as usize;
        let key = keys[k];
        let g = *rng.pick(&groups);
        let cons = *rng.pick(&consumers);
        // Mostly the live tail (trims keep 20-45 entries): with IDs drawn from the whole history,
        // a long run's NACKs, claims and acks would mostly miss (15,000 ops ended with 10 NACKed).
        let id = |rng: &mut Rng| {
            let lo = if rng.pct(80) { next_id[k].saturating_sub(60).max(1) } else { 1 };
            format!("{}-0", rng.range(lo, next_id[k] + 3))
        };
        // Op 6, a history re-read, has weight 0: as the built-in's
        // (streamReplyWithRangeFromConsumerPEL), it is not propagated, so a replica's counts
        // and time order differ after one.
        let r = match rng.weighted(&[14, 22, 12, 5, 8, 8, 0, 6, 3, 3, 3, 3, 2, 2]) {
            0 => c.cmd(&["XS.READGROUP", "GROUP", g, cons, "COUNT", &rng.range(1, 4).to_string(), "STREAMS", key, ">"]),
            1 => {
                let mode = *rng.pick(&["SILENT", "FAIL", "FATAL"]);
                let n = rng.range(1, 4);
                let mut args: Vec<String> = vec![key.into(), g.into(), mode.into(), "IDS".into(), n.to_string()];
                for _ in 0..n {
                    args.push(id(&mut rng));
                }
                if rng.pct(30) {
                    args.push("RETRYCOUNT".into());
                    args.push(rng.below(5).to_string());
                }
                if rng.pct(40) {
                    args.push("FORCE".into());
                }
                let a: Vec<&str> = args.iter().map(String::as_str).collect();
                nack(&mut c, &a)
            }
            2 => {
                let mut args: Vec<String> = vec!["XS.CLAIM".into(), key.into(), g.into(), cons.into()];
                args.push(if rng.pct(50) { "0".into() } else { "99999".into() });
                for _ in 0..rng.range(1, 3) {
                    args.push(id(&mut rng));
                }
                match rng.below(4) {
                    0 => args.extend(["IDLE".into(), rng.below(5000).to_string()]),
                    1 => args.extend(["TIME".into(), (common::groups::now_ms() - rng.below(5000) as i64).to_string()]),
                    _ => {}
                }
                if rng.pct(30) {
                    args.push("JUSTID".into());
                }
                if rng.pct(20) {
                    args.push("FORCE".into());
                }
                c.cmd(&args)
            }
            3 => c.cmd(&["XS.AUTOCLAIM", key, g, cons, if rng.pct(50) { "0" } else { "99999" }, "0", "COUNT", &rng.range(1, 6).to_string()]),
            4 => c.cmd(&["XS.ACK", key, g, &id(&mut rng), &id(&mut rng)]),
            5 => c.cmd(&["XS.DEL", key, &id(&mut rng)]),
            6 => c.cmd(&["XS.READGROUP", "GROUP", g, cons, "COUNT", &rng.range(1, 4).to_string(), "STREAMS", key, "0"]),
            7 => {
                next_id[k] += 1;
                c.cmd(&["XS.ADD", key, &format!("{}-0", next_id[k]), "f", "v"])
            }
            8 => c.cmd(&["XS.GROUP", "DELCONSUMER", key, g, cons]),
            9 => c.cmd(&["XS.GROUP", "SETID", key, g, &format!("{}-0", rng.below(next_id[k]))]),
            10 => c.cmd(&["XS.TRIM", key, "MAXLEN", "=", &rng.range(20, 45).to_string()]),
            11 => {
                c.cmd(&["MULTI"]);
                nack(&mut c, &[key, g, "FAIL", "FORCE", "IDS", "1", &id(&mut rng)]);
                c.cmd(&["XS.READGROUP", "GROUP", g, cons, "COUNT", "1", "STREAMS", key, ">"]);
                c.cmd(&["EXEC"])
            }
            12 => {
                c.cmd(&["EVAL", "return redis.call('XS.NACK', KEYS[1], ARGV[1], 'FATAL', 'IDS', '2', ARGV[2], ARGV[2])", "1", key, g, &id(&mut rng)])
            }
            _ => c.cmd(&["XS.CLAIM", key, g, cons, "0", &id(&mut rng), "RETRYCOUNT", "9223372036854775807"]),
        };
        assert!(!r.is_error(), "{r}");
        if std::env::var("XSTREAM_NACK_STEPCHECK").is_ok() {
            assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
            let mut rc = replica.conn();
            for k in keys {
                let a = c.raw(&["DEBUG", "DIGEST-VALUE", k]);
                let b2 = rc.raw(&["DEBUG", "DIGEST-VALUE", k]);
                if a != b2 {
                    let f1 = c.cmd(&["XS.INFO", "STREAM", k, "FULL"]);
                    let f2 = rc.cmd(&["XS.INFO", "STREAM", k, "FULL"]);
                    panic!("step: last reply {r}\nprimary {}\nreplica {}", f1.field("groups").unwrap(), f2.field("groups").unwrap());
                }
            }
        }
    }
    // The end state must hold NACKed entries for the checks below to mean something: a run
    // whose random steps left few (seed 529982386932 left 8) NACKs a few owned ones more, as
    // one more step of the workload (replicated and persisted like the others).
    for key in keys {
        for g in groups {
            let owned: Vec<String> = c
                .cmd(&["XS.PENDING", key, g, "-", "+", "100000"])
                .as_array()
                .iter()
                .filter(|r| !r.as_array()[1].text().is_empty())
                .take(2)
                .map(|r| r.as_array()[0].text())
                .collect();
            for id in owned {
                assert!(!c.cmd(&["XS.NACK", key, g, "FAIL", "IDS", "1", &id]).is_error());
            }
        }
    }
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    let state = |c: &mut Conn, key: &str| -> (Vec<u8>, Vec<Vec<(String, String, i64)>>) {
        let d = c.raw(&["DEBUG", "DIGEST-VALUE", key]);
        let rows = groups
            .iter()
            .map(|g| {
                c.cmd(&["XS.PENDING", key, g, "-", "+", "100000"])
                    .as_array()
                    .iter()
                    .map(|r| {
                        let r = r.as_array();
                        (r[0].text(), r[1].text(), r[3].as_int())
                    })
                    .collect()
            })
            .collect();
        (d, rows)
    };
    let want: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    let nacked: usize = want.iter().flat_map(|(_, g)| g.iter()).flatten().filter(|r| r.1.is_empty()).count();
    let mut ghost_count = 0;
    for k in keys {
        for g in groups {
            ghost_count += ghosts(&mut c, k, g).len();
        }
    }
    assert!(nacked > 10, "only {nacked} NACKed entries at the end");
    let mut rc = replica.conn();
    for (k, w) in keys.iter().zip(&want) {
        assert_eq!(&state(&mut rc, k), w, "replica: {k}");
    }
    for (k, w) in keys.iter().zip(&want) {
        let Reply::Bulk(payload) = c.cmd(&["DUMP", k]) else { panic!("DUMP {k}") };
        assert_eq!(c.cmd(&[b"RESTORE".as_slice(), b"restored", b"0", &payload, b"REPLACE"]), ok());
        assert_eq!(&state(&mut c, "restored"), w, "RESTORE of {k}");
        assert_eq!(c.cmd(&["COPY", k, "copied", "REPLACE"]), Reply::Int(1));
        assert_eq!(&state(&mut c, "copied"), w, "COPY of {k}");
        c.cmd(&["DEL", "restored", "copied"]);
    }
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), ok());
    for (k, w) in keys.iter().zip(&want) {
        assert_eq!(&state(&mut c, k), w, "DEBUG RELOAD: {k}");
    }
    // The AOF as propagated, replayed at restart.
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    drop(c);
    primary.restart();
    let mut c = primary.conn();
    for (k, w) in keys.iter().zip(&want) {
        assert_eq!(&state(&mut c, k), w, "AOF restart: {k}");
    }
    // An AOF rewrite drops the ghosts: compare with the state after acking them.
    let mut want_rw = Vec::new();
    for k in keys {
        for g in groups {
            for id in ghosts(&mut c, k, g) {
                assert_eq!(c.cmd(&["XS.ACK", k, g, &id]), Reply::Int(1));
            }
        }
        want_rw.push(state(&mut c, k));
    }
    assert!(!c.cmd(&["BGREWRITEAOF"]).is_error());
    wait_persistence_idle(&mut c, Duration::from_secs(60));
    drop(c);
    primary.restart();
    let mut c = primary.conn();
    for (k, w) in keys.iter().zip(&want_rw) {
        assert_eq!(&state(&mut c, k), w, "AOF rewrite: {k}");
    }
    report(&format!(
        "nack workload: {ops} ops, {nacked} NACKed and {ghost_count} ghost entries at the end; equal on replica, RESTORE, COPY, \
         DEBUG RELOAD, AOF restart, AOF rewrite (ghosts acked first)"
    ));
}

/// XNACK in takeover mode: the standard name reaches XS.NACK (the hosts have no XNACK: the
/// arity error names `xs.nack`), in MULTI and from scripts too, and replicas follow.
#[test]
fn xnack_in_takeover_mode() {
    let s = Server::builder().module_args(&["takeover", "yes"]).start();
    let replica = Server::replica_of(&s);
    let mut c = s.conn();
    for i in 1..=3 {
        c.cmd(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
    assert_eq!(c.cmd(&["xnack", "s", "g", "FAIL", "IDS", "1", "1-0"]), Reply::Int(1));
    assert_eq!(c.cmd(&["XNACK", "s", "g", "FAIL", "RETRYCOUNT"]), err("ERR wrong number of arguments for 'xs.nack' command"));
    assert_eq!(c.cmd(&["XNACK", "s", "g", "BAD", "IDS", "1", "1-0"]), err("ERR mode must be SILENT, FAIL, or FATAL"));
    c.cmd(&["MULTI"]);
    c.cmd(&["XNACK", "s", "g", "FATAL", "IDS", "1", "2-0"]);
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(vec![Reply::Int(1)]));
    let r = c.cmd(&["EVAL", "return redis.call('XNACK', KEYS[1], 'g', 'SILENT', 'IDS', '1', '3-0')", "1", "s"]);
    assert_eq!(r, Reply::Int(1));
    let p = c.cmd(&["XPENDING", "s", "g", "-", "+", "10"]).to_string();
    assert_eq!(p, format!("[{}, {}, {}]", unowned_row("1-0", "1"), unowned_row("2-0", "9223372036854775807"), unowned_row("3-0", "0")));
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    let mut rc = replica.conn();
    assert_eq!(rc.cmd(&["XPENDING", "s", "g", "-", "+", "10"]).to_string(), p);
    assert_eq!(rc.raw(&["DEBUG", "DIGEST-VALUE", "s"]), c.raw(&["DEBUG", "DIGEST-VALUE", "s"]));
}

/// REDIS8.md §6.1 [VS JX]: arity -7, WRITE FAST (not denyoom), one key at 1 with RW UPDATE.
#[test]
fn command_info_of_xs_nack() {
    let s = Server::start();
    let mut c = s.conn();
    let info = c.cmd(&["COMMAND", "INFO", "xs.nack"]);
    let row = info.as_array()[0].as_array();
    assert_eq!(row[0].text(), "xs.nack");
    assert_eq!(row[1], Reply::Int(-7));
    let flags: Vec<String> = row[2].as_array().iter().map(|f| f.text()).collect();
    assert!(flags.contains(&"write".to_string()) && flags.contains(&"fast".to_string()), "{flags:?}");
    assert!(!flags.contains(&"denyoom".to_string()), "{flags:?}");
    assert_eq!(&row[3..6], &[Reply::Int(1), Reply::Int(1), Reply::Int(1)]);
    let specs = format!("{}", row[8]);
    assert!(specs.contains("RW") && specs.to_lowercase().contains("update"), "{specs}");
    let keys = c.cmd(&["COMMAND", "GETKEYS", "xs.nack", "k", "g", "FAIL", "IDS", "1", "1-0"]);
    assert_eq!(keys, Reply::Array(vec![Reply::Bulk(b"k".to_vec())]));
}

/// REDIS8.md §6.3 / §10: what goes to replicas and the AOF. XS.NACK verbatim when it NACKed
/// something (not when it did not); an XCLAIM or XAUTOCLAIM that meets a deleted NACKed entry
/// propagates `XS.ACK key group id` (an owned one still goes as an XS.CLAIM naming its owner).
#[test]
fn xnack_propagation() {
    let s = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "no").start();
    let mut c = s.conn();
    setup(&mut c, 5, 5);
    assert_eq!(nack(&mut c, &["s", "g", "FAIL", "IDS", "3", "1-0", "2-0", "3-0"]), Reply::Int(3));
    assert_eq!(nack(&mut c, &["s", "g", "FAIL", "IDS", "1", "9-0"]), Reply::Int(0));
    assert_eq!(c.cmd(&["XS.DEL", "s", "1-0", "2-0", "4-0"]), Reply::Int(3));
    assert_eq!(c.cmd(&["XS.CLAIM", "s", "g", "c2", "0", "1-0", "JUSTID"]).to_string(), "[]");
    let r = c.cmd(&["XS.AUTOCLAIM", "s", "g", "c2", "0", "0", "JUSTID"]);
    assert_eq!(r.to_string(), r#"["0-0", ["3-0", "5-0"], ["2-0", "4-0"]]"#);
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    let cmds: Vec<Vec<String>> = aof_commands(&s).into_iter().filter(|v| ["XS.NACK", "XS.ACK", "XS.CLAIM"].contains(&v[0].as_str())).collect();
    let show: Vec<String> = cmds.iter().map(|v| v[..v.len().min(6)].join(" ")).collect();
    assert_eq!(
        show,
        [
            // The delivery of 1-0 .. 5-0 (one XS.CLAIM for them all).
            "XS.CLAIM s g c 0 1-0",
            "XS.NACK s g FAIL IDS 3",
            "XS.ACK s g 1-0",
            "XS.ACK s g 2-0",
            "XS.CLAIM s g c2 0 3-0",
            "XS.CLAIM s g c 0 4-0",
            "XS.CLAIM s g c2 0 5-0",
        ],
        "{cmds:?}"
    );
}

/// XS.EXPORT refuses a stream with NACKed entries (pending, unowned), which the built-in
/// streams before 8.8 cannot hold (their loader refuses an unowned PEL entry, or keeps one whose
/// consumer is NULL): the exact error, the key unchanged; once the NACKed entries are claimed by
/// a consumer, the same stream exports.
#[test]
fn xs_export_refuses_nacked_entries() {
    let s = Server::start();
    let mut c = s.conn();
    setup(&mut c, 3, 3);
    assert_eq!(nack(&mut c, &["s", "g", "FAIL", "IDS", "1", "2-0"]), Reply::Int(1));
    let before = c.cmd(&["DEBUG", "DIGEST-VALUE", "s"]);
    assert_eq!(
        c.cmd(&["XS.EXPORT", "s"]),
        err("ERR XS.EXPORT: the stream has NACKed entries (XS.NACK), which a built-in stream of this server cannot hold")
    );
    assert_eq!(c.cmd(&["TYPE", "s"]), Reply::Simple("xs-stream".into()));
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "s"]), before);
    assert_eq!(c.cmd(&["XS.CLAIM", "s", "g", "c", "0", "2-0", "JUSTID"]).to_string(), r#"["2-0"]"#);
    assert_eq!(c.cmd(&["XS.EXPORT", "s"]), Reply::Int(3));
    assert_eq!(c.cmd(&["TYPE", "s"]), Reply::Simple("stream".into()));
    assert_eq!(c.cmd(&["XPENDING", "s", "g"]).as_array()[0], Reply::Int(3));
}
