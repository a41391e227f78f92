//! `xstream.compat latest` on whatever host runs this (a 7.0 host by default): the [VT]
//! examples of REDIS8.md §1 (7.2 consumer times, lag and entries-read as of 8.2.2) and §2
//! (XREAD `+`, 7.4 and the later fix), RESP2 and RESP3. Where a scenario's upstream test was not
//! available word for word, the expected values are those the §1.4 rules give, step by step (the
//! comments show the rule that fires).

mod common;

use common::*;
use std::time::Duration;

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

/// A server at `compat latest`; `f` runs on a fresh database in RESP2, then in RESP3.
fn latest(f: impl Fn(&mut Conn, bool)) {
    let s = Server::start();
    assert_eq!(s.conn().cmd(&["CONFIG", "SET", "xstream.compat", "latest"]), ok());
    each_protocol(&s, f);
}

/// (entries-read, lag) of group number `i` in XINFO STREAM FULL (None = nil).
fn read_lag(c: &mut Conn, key: &str, i: usize) -> (Option<i64>, Option<i64>) {
    let full = c.cmd(&["XS.INFO", "STREAM", key, "FULL"]);
    let g = &full.field("groups").expect("groups").as_array()[i];
    let int = |r: &Reply| if r.is_nil() { None } else { Some(r.as_int()) };
    let from_groups = c.cmd(&["XS.INFO", "GROUPS", key]);
    let g2 = &from_groups.as_array()[i];
    let pair = (int(g.field("entries-read").unwrap()), int(g.field("lag").unwrap()));
    // XINFO GROUPS says the same.
    assert_eq!(pair, (int(g2.field("entries-read").unwrap()), int(g2.field("lag").unwrap())));
    pair
}

fn add(c: &mut Conn, key: &str, ids: &[&str]) {
    for id in ids {
        assert_eq!(c.cmd(&["XS.ADD", key, id, "data", "x"]).text(), *id);
    }
}

// ---- §1.4 ENTRIESREAD clamp (8.2.2) --------------------------------------------------------------

/// [VT] 3 entries, `XGROUP CREATE s g 0 ENTRIESREAD 7`: entries-read 3 (clamped), lag 3 (the
/// group is behind the first entry with no tombstone: the length).
#[test]
fn entries_read_clamped_on_create() {
    latest(|c, _| {
        add(c, "s", &["1-0", "2-0", "3-0"]);
        assert_eq!(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "7"]), ok());
        assert_eq!(read_lag(c, "s", 0), (Some(3), Some(3)));
    });
}

/// [VT] 2 entries, `XGROUP SETID s g <first> ENTRIESREAD 5`: entries-read 2, lag 0; the range
/// error; 0 is accepted.
#[test]
fn entries_read_clamped_on_setid() {
    latest(|c, _| {
        add(c, "s", &["1-0", "2-0"]);
        assert_eq!(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]), ok());
        assert_eq!(c.cmd(&["XS.GROUP", "SETID", "s", "g", "1-0", "ENTRIESREAD", "5"]), ok());
        assert_eq!(read_lag(c, "s", 0), (Some(2), Some(0)));
        assert_eq!(
            c.cmd(&["XS.GROUP", "SETID", "s", "g", "1-0", "ENTRIESREAD", "-3"]),
            Reply::Error("ERR value for ENTRIESREAD must be positive or -1".into())
        );
        assert_eq!(c.cmd(&["XS.GROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "0"]), ok());
        assert_eq!(read_lag(c, "s", 0), (Some(0), Some(2)));
        // MKSTREAM: nothing added yet, so 0.
        assert_eq!(c.cmd(&["XS.GROUP", "CREATE", "e", "g", "$", "MKSTREAM", "ENTRIESREAD", "4"]), ok());
        assert_eq!(read_lag(c, "e", 0), (Some(0), Some(0)));
    });
}

/// #15489 (docs/redis8.md): XSETID ENTRIESADDED below a group's entries-read clamps it, so the
/// lag stays >= 0.
#[test]
fn xsetid_entries_added_clamps_entries_read() {
    latest(|c, _| {
        add(c, "s", &["1-0", "2-0", "3-0"]);
        c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
        assert_eq!(read_lag(c, "s", 0), (Some(3), Some(0)));
        c.cmd(&["XS.DEL", "s", "1-0"]);
        assert_eq!(c.cmd(&["XS.SETID", "s", "3-0", "ENTRIESADDED", "2"]), ok());
        assert_eq!(read_lag(c, "s", 0), (Some(2), Some(0)));
        // And it survives a reload.
        assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), ok());
        assert_eq!(read_lag(c, "s", 0), (Some(2), Some(0)));
    });
}

// ---- §1.4 lag scenarios ------------------------------------------------------------------------

/// [VT "Consumer group read counter and lag in empty streams"].
#[test]
fn lag_in_empty_streams() {
    latest(|c, _| {
        assert_eq!(c.cmd(&["XS.GROUP", "CREATE", "x", "g1", "0", "MKSTREAM"]), ok());
        let full = c.cmd(&["XS.INFO", "STREAM", "x", "FULL"]);
        assert_eq!(full.field("max-deleted-entry-id").unwrap().text(), "0-0");
        assert_eq!(full.field("entries-added"), Some(&Reply::Int(0)));
        assert_eq!(read_lag(c, "x", 0), (None, Some(0))); // rule 1
        add(c, "x", &["1-0"]);
        c.cmd(&["XS.DEL", "x", "1-0"]);
        let full = c.cmd(&["XS.INFO", "STREAM", "x", "FULL"]);
        assert_eq!(full.field("max-deleted-entry-id").unwrap().text(), "1-0");
        assert_eq!(full.field("entries-added"), Some(&Reply::Int(1)));
        assert_eq!(read_lag(c, "x", 0), (None, Some(0))); // rule 2
    });
}

/// [VT "Consumer group lag with XDELs"].
#[test]
fn lag_with_xdels() {
    latest(|c, _| {
        add(c, "x", &["1-0", "2-0", "3-0", "4-0", "5-0"]);
        c.cmd(&["XS.DEL", "x", "3-0"]);
        c.cmd(&["XS.GROUP", "CREATE", "x", "g1", "0"]);
        c.cmd(&["XS.GROUP", "CREATE", "x", "g2", "0"]);
        // A tombstone (3-0) after the groups' last ID: unknown.
        assert_eq!(read_lag(c, "x", 0), (None, None));
        for _ in 0..3 {
            c.cmd(&["XS.READGROUP", "GROUP", "g1", "c11", "COUNT", "1", "STREAMS", "x", ">"]);
            assert_eq!(read_lag(c, "x", 0), (None, None));
        }
        // 5-0 is the last ID: its counter is entries-added.
        c.cmd(&["XS.READGROUP", "GROUP", "g1", "c11", "COUNT", "1", "STREAMS", "x", ">"]);
        assert_eq!(read_lag(c, "x", 0), (Some(5), Some(0)));
        add(c, "x", &["6-0"]);
        assert_eq!(read_lag(c, "x", 0), (Some(5), Some(1)));
        // g2 is behind the first entry with every tombstone before it: the length (rule 3).
        c.cmd(&["XS.TRIM", "x", "MINID", "=", "3-0"]);
        assert_eq!(read_lag(c, "x", 0), (Some(5), Some(1)));
        assert_eq!(read_lag(c, "x", 1), (None, Some(3)));
        c.cmd(&["XS.TRIM", "x", "MINID", "=", "5-0"]);
        assert_eq!(read_lag(c, "x", 0), (Some(5), Some(1)));
        assert_eq!(read_lag(c, "x", 1), (None, Some(2)));
    });
}

/// [VT "Consumer group lag with XTRIM"], with the 8.2 read counter (#13958): a group behind the
/// first entry gets its counter estimated again instead of incremented.
#[test]
fn lag_with_xtrim() {
    latest(|c, _| {
        c.cmd(&["XS.GROUP", "CREATE", "x", "mygroup", "$", "MKSTREAM"]);
        add(c, "x", &["1-0", "2-0", "3-0", "4-0", "5-0"]);
        c.cmd(&["XS.READGROUP", "GROUP", "mygroup", "alice", "COUNT", "1", "STREAMS", "x", ">"]);
        assert_eq!(read_lag(c, "x", 0), (Some(1), Some(4)));
        c.cmd(&["XS.TRIM", "x", "MAXLEN", "1"]);
        // Behind the first entry (5-0), no tombstone: the length (rule 3).
        assert_eq!(read_lag(c, "x", 0), (Some(1), Some(1)));
        add(c, "x", &["6-0"]);
        assert_eq!(read_lag(c, "x", 0), (Some(1), Some(2)));
        c.cmd(&["XS.READGROUP", "GROUP", "mygroup", "alice", "COUNT", "1", "STREAMS", "x", ">"]);
        // 5-0 is the first entry: entries-added - length + 1 = 5 (an increment would say 2).
        assert_eq!(read_lag(c, "x", 0), (Some(5), Some(1)));
    });
}

/// [VT "… tombstone after the last_id of consume group"].
#[test]
fn lag_with_tombstone_after_last_id() {
    latest(|c, _| {
        c.cmd(&["XS.GROUP", "CREATE", "x", "g1", "$", "MKSTREAM"]);
        add(c, "x", &["1-0"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g1", "alice", "STREAMS", "x", ">"]);
        add(c, "x", &["2-0", "3-0"]);
        c.cmd(&["XS.DEL", "x", "2-0"]);
        // The tombstone 2-0 lies after the group's last ID 1-0: unknown.
        assert_eq!(read_lag(c, "x", 0), (Some(1), None));
        c.cmd(&["XS.DEL", "x", "1-0"]);
        // Now behind the first entry (3-0) with the tombstone before it: the length (rule 3).
        assert_eq!(read_lag(c, "x", 0), (Some(1), Some(1)));
        c.cmd(&["XS.READGROUP", "GROUP", "g1", "alice", "STREAMS", "x", ">"]);
        assert_eq!(read_lag(c, "x", 0), (Some(3), Some(0)));
    });
}

// ---- §1.1-1.3 consumers ------------------------------------------------------------------------

/// [VT "Consumer seen-time and active-time"]: a consumer whose only read found nothing shows
/// `inactive` -1 and a growing `idle`; a delivery sets active-time.
#[test]
fn consumer_seen_and_active_time() {
    latest(|c, resp3| {
        c.cmd(&["XS.GROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
        assert!(r.is_nil(), "{r}");
        std::thread::sleep(Duration::from_millis(30));
        let cons = c.cmd(&["XS.INFO", "CONSUMERS", "s", "g"]);
        let c0 = &cons.as_array()[0];
        if resp3 {
            assert!(matches!(c0, Reply::Map(_)));
        }
        let names: Vec<String> = match c0 {
            Reply::Map(kv) => kv.iter().map(|(k, _)| k.text()).collect(),
            other => other.as_array().iter().step_by(2).map(|k| k.text()).collect(),
        };
        assert_eq!(names, ["name", "pending", "idle", "inactive"]);
        assert_eq!(c0.field("inactive"), Some(&Reply::Int(-1)));
        assert!(c0.field("idle").unwrap().as_int() >= 25, "{c0}");
        let full = c.cmd(&["XS.INFO", "STREAM", "s", "FULL"]);
        let fc = &full.field("groups").unwrap().as_array()[0].field("consumers").unwrap().as_array()[0];
        assert_eq!(fc.field("active-time"), Some(&Reply::Int(-1)));
        let seen = fc.field("seen-time").unwrap().as_int();
        add(c, "s", &["1-0"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
        let full = c.cmd(&["XS.INFO", "STREAM", "s", "FULL"]);
        let fc = &full.field("groups").unwrap().as_array()[0].field("consumers").unwrap().as_array()[0];
        let active = fc.field("active-time").unwrap().as_int();
        assert!(active >= seen + 25, "active {active} seen {seen}");
        assert_eq!(fc.field("seen-time").unwrap().as_int(), active);
        // DUMP / RESTORE and COPY keep both times.
        let payload = c.cmd(&["DUMP", "s"]).as_bytes().unwrap().to_vec();
        assert_eq!(c.cmd(&[b"RESTORE".as_slice(), b"r", b"0", &payload]), ok());
        assert_eq!(c.cmd(&["COPY", "s", "k"]), Reply::Int(1));
        for key in ["r", "k"] {
            let full = c.cmd(&["XS.INFO", "STREAM", key, "FULL"]);
            let fc = &full.field("groups").unwrap().as_array()[0].field("consumers").unwrap().as_array()[0];
            assert_eq!(fc.field("active-time").unwrap().as_int(), active, "{key}");
            assert_eq!(fc.field("seen-time").unwrap().as_int(), active, "{key}");
        }
    });
}

/// [VT "XREADGROUP from PEL does not change dirty"]: a history read of an existing consumer
/// counts no change; one that creates its consumer counts one.
#[test]
fn history_read_dirty() {
    latest(|c, _| {
        add(c, "s", &["1-0"]);
        c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
        let d0 = dirty(c);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", "0"]);
        assert_eq!(dirty(c) - d0, 0);
        let d0 = dirty(c);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "newcomer", "STREAMS", "s", "0"]);
        assert_eq!(dirty(c) - d0, 1);
    });
}

/// A legacy (Redis 7.0) built-in stream converted with XS.IMPORT: active-time = seen-time, as
/// 7.2 loads an RDB older than v11 ([VT "Loading from legacy (Redis <= v7.0.x, rdb_ver < 11)"]).
/// Only where the host's own DUMP is the 7.0 format.
#[test]
fn legacy_import_active_time_is_seen_time() {
    let s = Server::start();
    let mut c = s.conn();
    if redis_version(&mut c) >= (7, 2) {
        report("legacy_import_active_time_is_seen_time: the host dumps type 21 (with active-times); skipped");
        return;
    }
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compat", "latest"]), ok());
    c.cmd(&["XADD", "b", "1-0", "f", "v"]);
    c.cmd(&["XGROUP", "CREATE", "b", "g", "0"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "b", ">"]);
    c.cmd(&["XGROUP", "CREATECONSUMER", "b", "g", "idle"]);
    assert_eq!(c.cmd(&["XS.IMPORT", "b"]), Reply::Int(1));
    let full = c.cmd(&["XS.INFO", "STREAM", "b", "FULL"]);
    for fc in full.field("groups").unwrap().as_array()[0].field("consumers").unwrap().as_array() {
        assert_eq!(fc.field("active-time"), fc.field("seen-time"), "{fc}");
    }
}

/// [VT] 7.2 re-executes a blocked XREADGROUP: its key deleted, flushed or swapped away gives
/// NOGROUP, replaced by another type WRONGTYPE.
#[test]
fn blocked_group_reader_reexecuted() {
    let s = Server::start();
    let mut admin = s.conn();
    assert_eq!(admin.cmd(&["CONFIG", "SET", "xstream.compat", "latest"]), ok());
    let nogroup = "NOGROUP No such key 'k' or consumer group 'g' in XREADGROUP with GROUP option";
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for (how, want) in [("DEL", nogroup), ("FLUSHDB", nogroup), ("SWAPDB", nogroup), ("SET", wrongtype)] {
        let r = blocked_group_reader_after(&s, &mut admin, |a| {
            match how {
                "DEL" => a.cmd(&["DEL", "k"]),
                "FLUSHDB" => a.cmd(&["FLUSHDB"]),
                "SWAPDB" => a.cmd(&["SWAPDB", "0", "1"]),
                _ => a.cmd(&["SET", "k", "x"]),
            };
        });
        assert_eq!(r, Reply::Error(want.into()), "{how}");
    }
}

// ---- §2 XREAD + ------------------------------------------------------------------------------------

/// [VT] `+` reads the last entry whatever COUNT says; the last live one after an XDEL; only
/// non-empty streams appear; a missing, empty or MKSTREAM stream is nil.
#[test]
fn xread_plus() {
    latest(|c, _| {
        add(c, "s", &["1-0", "2-0", "3-0"]);
        let ids = |r: &Reply| -> Vec<(String, Vec<String>)> {
            let pairs: Vec<(Reply, Reply)> = match r {
                Reply::Map(kv) => kv.clone(),
                Reply::Array(v) => v.iter().map(|p| (p.as_array()[0].clone(), p.as_array()[1].clone())).collect(),
                _ => Vec::new(),
            };
            pairs.iter().map(|(k, v)| (k.text(), v.as_array().iter().map(|e| e.as_array()[0].text()).collect())).collect()
        };
        let r = c.cmd(&["XS.READ", "COUNT", "3", "STREAMS", "s", "+"]);
        assert_eq!(ids(&r), [("s".to_string(), vec!["3-0".to_string()])]);
        add(c, "d", &["1-0", "2-0"]);
        c.cmd(&["XS.DEL", "d", "2-0"]);
        let r = c.cmd(&["XS.READ", "STREAMS", "d", "+"]);
        assert_eq!(ids(&r), [("d".to_string(), vec!["1-0".to_string()])]);
        c.cmd(&["XS.GROUP", "CREATE", "mk", "g", "$", "MKSTREAM"]);
        assert!(c.cmd(&["XS.READ", "STREAMS", "missing", "+"]).is_nil());
        assert!(c.cmd(&["XS.READ", "STREAMS", "mk", "+"]).is_nil());
        let r = c.cmd(&["XS.READ", "STREAMS", "missing", "s", "mk", "d", "+", "+", "+", "+"]);
        assert_eq!(ids(&r), [("s".to_string(), vec!["3-0".to_string()]), ("d".to_string(), vec!["1-0".to_string()])]);
        // BLOCK with an entry there: answered at once.
        let r = c.cmd(&["XS.READ", "BLOCK", "0", "STREAMS", "s", "+"]);
        assert_eq!(ids(&r), [("s".to_string(), vec!["3-0".to_string()])]);
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "mk", "+"]);
        assert_eq!(r, Reply::Error("ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would just return an empty result set.".into()));
        let r = c.cmd(&["XS.READ", "STREAMS", "s", "d", "+"]);
        assert_eq!(r, Reply::Error("ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified.".into()));
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", "d", ">"]);
        assert_eq!(r, Reply::Error("ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified.".into()));
    });
}

/// [VT "XREAD last element …"]: `+` on a missing or MKSTREAM stream with BLOCK waits, and the
/// next XADD answers it with that entry.
#[test]
fn xread_plus_blocks_until_an_entry() {
    let s = Server::start();
    let mut admin = s.conn();
    assert_eq!(admin.cmd(&["CONFIG", "SET", "xstream.compat", "latest"]), ok());
    admin.cmd(&["XS.GROUP", "CREATE", "mk", "g", "$", "MKSTREAM"]);
    for key in ["missing", "mk"] {
        let mut waiter = s.conn();
        waiter.send(&["XS.READ", "BLOCK", "0", "STREAMS", key, "+"]).unwrap();
        assert!(wait_blocked_clients(&mut admin, 1), "not blocked");
        admin.cmd(&["XS.ADD", key, "7-7", "f", "v"]);
        waiter.set_timeout(Duration::from_secs(5));
        let (r, _) = waiter.read_reply().expect("answered");
        let entries = &r.as_array()[0].as_array()[1];
        assert_eq!(entries.as_array()[0].as_array()[0].text(), "7-7", "{key}: {r}");
        assert_eq!(entries.as_array().len(), 1);
    }
}
