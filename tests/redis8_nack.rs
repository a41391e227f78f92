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

/// Removes every `name` pair from the flat arrays / maps of `r` (recursively): fields a host
/// shows or not (7.2's active-time).
fn strip_field(r: &mut Reply, name: &str) {
    match r {
        Reply::Array(v) => {
            let is_pairs = v.len() % 2 == 0 && v.chunks(2).all(|c| matches!(c[0], Reply::Bulk(_) | Reply::Simple(_)));
            if is_pairs && v.chunks(2).any(|c| c[0].as_bytes() == Some(name.as_bytes())) {
                let mut out = Vec::new();
                for c in v.chunks(2) {
                    if c[0].as_bytes() != Some(name.as_bytes()) {
                        out.extend(c.iter().cloned());
                    }
                }
                *v = out;
            }
            v.iter_mut().for_each(|x| strip_field(x, name));
        }
        Reply::Map(kv) => {
            kv.retain(|(k, _)| k.as_bytes() != Some(name.as_bytes()));
            kv.iter_mut().for_each(|(_, x)| strip_field(x, name));
        }
        _ => {}
    }
}

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
