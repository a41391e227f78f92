//! Retention by age (issue 17, docs/retention.md): XS.CFGSET key MAXAGE ms [EXACT], inline
//! `XS.ADD / XS.TRIM key MAXAGE [=|~] ms [LIMIT n]`, trimming on every write to a retained
//! stream and by the primary's timer on idle ones, propagated as `XS.TRIM key MINID = <id>`;
//! XS.INFO STREAM `max-age`, INFO xstream `entries_expired`; RDB, AOF (replay and rewrite),
//! COPY / DUMP / RESTORE, replicas (digest-identical, never trimming on their own clock).
//! Each [VT] example of docs/retention.md is a test here, run in RESP2 and RESP3 where it
//! answers differently.

mod common;

use common::*;
use std::time::{Duration, Instant};

fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn ids(c: &mut Conn, key: &str) -> Vec<String> {
    c.cmd(&["XS.RANGE", key, "-", "+"]).as_array().iter().map(|e| e.as_array()[0].text()).collect()
}

fn len(c: &mut Conn, key: &str) -> i64 {
    c.cmd(&["XS.LEN", key]).as_int()
}

fn expired(c: &mut Conn) -> u64 {
    let info = c.cmd(&["INFO", "xstream"]).text();
    info.lines()
        .find_map(|l| l.trim().strip_prefix("xstream_entries_expired:").or_else(|| l.trim().strip_prefix("entries_expired:")))
        .and_then(|v| v.parse().ok())
        .expect("entries_expired in INFO xstream")
}

/// `n` entries with IDs 1-0 .. n-0 (1970: older than any age).
fn old_entries(c: &mut Conn, key: &str, n: u64) {
    for i in 1..=n {
        assert_eq!(c.cmd(&["XS.ADD", key, &format!("{i}-0"), "f", "v"]).text(), format!("{i}-0"));
    }
}

/// A server that takes writes but whose timer never acts: a replica of nothing, writable.
fn idle_timer_server() -> Server {
    let s = Server::builder().module_args(&["node-max-entries", "4"]).start();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["CONFIG", "SET", "replica-read-only", "no"]), ok());
    assert_eq!(c.cmd(&["REPLICAOF", "127.0.0.1", "1"]), ok());
    s
}

// ---- [VT] XS.CFGSET MAXAGE ---------------------------------------------------------------------

/// [VT] `XS.CFGSET s MAXAGE 60000` -> OK, XS.INFO STREAM shows `max-age 60000`; `MAXAGE 0`
/// removes it (the field goes); errors keep the IDMP options' order.
#[test]
fn cfgset_maxage_sets_shows_and_removes() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "5"]), err("ERR no such key"));
        c.cmd(&["XS.ADD", "s", "*", "f", "v"]);
        let plain = c.cmd(&["XS.INFO", "STREAM", "s"]);
        assert!(plain.field("max-age").is_none());
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "-1"]), err("ERR MAXAGE must be >= 0 milliseconds"));
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "x"]), err("ERR value is not an integer or out of range"));
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "5", "MAXAGE", "6"]), err("ERR MAXAGE specified multiple times"));
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE"]), err("ERR syntax error"));
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "5", "NOPE"]), err("ERR syntax error"));
        // Left to right: the IDMP option's error comes first.
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "IDMP-DURATION", "0", "MAXAGE", "-1"]), err("ERR IDMP-DURATION must be between 1 and 86400 seconds"));
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "-1", "IDMP-DURATION", "0"]), err("ERR MAXAGE must be >= 0 milliseconds"));
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "60000"]), ok());
        let info = c.cmd(&["XS.INFO", "STREAM", "s"]);
        assert_eq!(info.field("max-age"), Some(&Reply::Int(60000)));
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "60000", "EXACT", "IDMP-MAXSIZE", "5"]), ok());
        assert_eq!(c.cmd(&["XS.INFO", "STREAM", "s"]).field("max-age"), Some(&Reply::Int(60000)));
        assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "0"]), ok());
        let info = c.cmd(&["XS.INFO", "STREAM", "s"]);
        assert!(info.field("max-age").is_none());
        assert_eq!(len(c, "s"), 1);
    });
}

/// A stream without MAXAGE answers XS.INFO STREAM and DEBUG DIGEST-VALUE as before: setting and
/// removing MAXAGE leaves the same digest.
#[test]
fn no_maxage_no_change() {
    let s = Server::start();
    let mut c = s.conn();
    old_entries(&mut c, "s", 3);
    let d = c.cmd(&["DEBUG", "DIGEST-VALUE", "s"]);
    let info = c.cmd(&["XS.INFO", "STREAM", "s"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "0"]), ok());
    assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", "s"]), d);
    // (A MAXAGE on a replica-like server that does not trim: the digest changes while set.)
    let s2 = idle_timer_server();
    let mut c2 = s2.conn();
    old_entries(&mut c2, "s", 3);
    assert_eq!(c2.cmd(&["DEBUG", "DIGEST-VALUE", "s"]), d);
    assert_eq!(c2.cmd(&["XS.CFGSET", "s", "MAXAGE", "1000"]), ok());
    assert_ne!(c2.cmd(&["DEBUG", "DIGEST-VALUE", "s"]), d);
    assert_eq!(c2.cmd(&["XS.CFGSET", "s", "MAXAGE", "0"]), ok());
    assert_eq!(c2.cmd(&["DEBUG", "DIGEST-VALUE", "s"]), d);
    assert_eq!(c2.cmd(&["XS.INFO", "STREAM", "s"]), info);
}

// ---- [VT] inline MAXAGE --------------------------------------------------------------------------

/// [VT] `XS.TRIM s MAXAGE ~ 5000` removes whole nodes of entries older than 5 s; `MAXAGE 5000`
/// (or `=`) every such entry; `XS.ADD s MAXAGE 5000 * ...` trims after the append.
#[test]
fn inline_maxage_trims_like_minid_on_the_server_clock() {
    let s = Server::builder().module_args(&["node-max-entries", "4"]).start();
    each_protocol(&s, |c, _| {
        old_entries(c, "t", 6);
        let recent = c.cmd(&["XS.ADD", "t", "*", "f", "v"]).text(); // nodes [1..4] [5 6 *]
        let before = expired(c);
        assert_eq!(c.cmd(&["XS.TRIM", "t", "MAXAGE", "~", "5000"]), Reply::Int(4));
        assert_eq!(ids(c, "t"), ["5-0".to_string(), "6-0".to_string(), recent.clone()]);
        assert_eq!(c.cmd(&["XS.TRIM", "t", "MAXAGE", "=", "5000"]), Reply::Int(2));
        assert_eq!(ids(c, "t"), [recent.clone()]);
        c.cmd(&["DEL", "t"]);
        old_entries_from(c, "t", 7, 9);
        assert_eq!(c.cmd(&["XS.TRIM", "t", "MAXAGE", "5000"]), Reply::Int(3));
        old_entries_from(c, "t", 10, 12);
        let id = c.cmd(&["XS.ADD", "t", "MAXAGE", "5000", "*", "f", "v"]).text();
        assert_eq!(ids(c, "t"), [id.clone()]);
        assert_eq!(expired(c), before + 12);
        // An age reaching before the epoch, and IDs in the future, are never aged.
        assert_eq!(c.cmd(&["XS.TRIM", "t", "MAXAGE", "999999999999999"]), Reply::Int(0));
        let future = format!("{}-0", now_ms() + 3_600_000);
        std::thread::sleep(Duration::from_millis(5));
        c.cmd(&["XS.ADD", "t", &future, "f", "v"]);
        assert_eq!(c.cmd(&["XS.TRIM", "t", "MAXAGE", "0"]), Reply::Int(1));
        assert_eq!(ids(c, "t"), [future.clone()]);
        // LIMIT bounds an approximate MAXAGE as it does MINID ~.
        old_entries_from(c, "u", 1, 12);
        assert_eq!(c.cmd(&["XS.TRIM", "u", "MAXAGE", "~", "1000", "LIMIT", "4"]), Reply::Int(4));
        assert_eq!(len(c, "u"), 8);
        // Errors.
        assert_eq!(c.cmd(&["XS.TRIM", "u", "MAXAGE", "-1"]), err("ERR The MAXAGE argument must be >= 0."));
        assert_eq!(c.cmd(&["XS.TRIM", "u", "MAXAGE", "x"]), err("ERR value is not an integer or out of range"));
        assert_eq!(c.cmd(&["XS.TRIM", "u", "MAXAGE", "5", "MINID", "0"]), err("ERR syntax error, MAXAGE cannot be used with MAXLEN or MINID"));
        assert_eq!(
            c.cmd(&["XS.ADD", "u", "MAXLEN", "5", "MAXAGE", "5", "*", "f", "v"]),
            err("ERR syntax error, MAXAGE cannot be used with MAXLEN or MINID")
        );
        assert_eq!(
            c.cmd(&["XS.TRIM", "u", "MAXAGE", "5", "LIMIT", "10"]),
            err("ERR syntax error, LIMIT cannot be used without the special ~ option")
        );
        assert_eq!(len(c, "u"), 8);
    });
}

fn old_entries_from(c: &mut Conn, key: &str, from: u64, to: u64) {
    for i in from..=to {
        c.cmd(&["XS.ADD", key, &format!("{i}-0"), "f", "v"]);
    }
}

// ---- [VT] stored MAXAGE, written streams ---------------------------------------------------------

/// [VT] With `XS.CFGSET s MAXAGE 5000`, every XS.ADD trims whole nodes older than 5 s; with
/// `EXACT`, every entry older than 5 s. (A writable replica of nothing: no timer acts, the
/// write alone trims.)
#[test]
fn stored_maxage_trims_on_every_write() {
    let s = idle_timer_server();
    each_protocol(&s, |c, _| {
        // Approximate: nodes [1..4] [5 6 *]: the first node goes.
        old_entries(c, "a", 6);
        assert_eq!(c.cmd(&["XS.CFGSET", "a", "MAXAGE", "5000"]), ok());
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(len(c, "a"), 6, "no timer on a replica");
        let id = c.cmd(&["XS.ADD", "a", "*", "f", "v"]).text();
        assert_eq!(ids(c, "a"), ["5-0".to_string(), "6-0".to_string(), id]);
        // Exact.
        old_entries(c, "e", 6);
        assert_eq!(c.cmd(&["XS.CFGSET", "e", "MAXAGE", "5000", "EXACT"]), ok());
        let id = c.cmd(&["XS.ADD", "e", "*", "f", "v"]).text();
        assert_eq!(ids(c, "e"), [id.clone()]);
        // Recent entries stay; MAXAGE 0 stops the trimming.
        let id2 = c.cmd(&["XS.ADD", "e", "*", "f", "v"]).text();
        assert_eq!(ids(c, "e"), [id, id2]);
        old_entries(c, "z", 3);
        assert_eq!(c.cmd(&["XS.CFGSET", "z", "MAXAGE", "5000", "EXACT"]), ok());
        assert_eq!(c.cmd(&["XS.CFGSET", "z", "MAXAGE", "0"]), ok());
        c.cmd(&["XS.ADD", "z", "*", "f", "v"]);
        assert_eq!(len(c, "z"), 4);
    });
}

// ---- [VT] idle streams: the primary's timer, replicas, AOF, RDB --------------------------------

/// [VT] A stream nobody writes to is trimmed by the primary's timer (exact and whole-node); the
/// trims reach the replica and the AOF as `XS.TRIM key MINID = <id>`: digest-identical on the
/// replica, after DEBUG LOADAOF, after an AOF rewrite, after DEBUG RELOAD; COPY, DUMP / RESTORE
/// and RENAME keep the MAXAGE (and the renamed stream keeps being trimmed).
#[test]
fn idle_streams_trimmed_by_the_primary_timer_replicated_and_persisted() {
    let primary = Server::builder().arg("--appendonly", "yes").module_args(&["node-max-entries", "4"]).start();
    let replica = Server::replica_of(&primary);
    let (mut c, mut rc) = (primary.conn(), replica.conn());
    let before = expired(&mut c);
    // Nodes [1..4] [5..8] [9 10 *].
    for k in ["x", "a", "r"] {
        old_entries(&mut c, k, 10);
        c.cmd(&["XS.ADD", k, "*", "f", "v"]);
    }
    old_entries(&mut c, "keep", 2);
    c.cmd(&["XS.ADD", "keep", "*", "f", "v"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "x", "MAXAGE", "700", "EXACT"]), ok());
    assert_eq!(c.cmd(&["XS.CFGSET", "a", "MAXAGE", "700"]), ok());
    assert_eq!(c.cmd(&["XS.CFGSET", "r", "MAXAGE", "700", "EXACT"]), ok());
    assert_eq!(c.cmd(&["RENAME", "r", "r2"]), ok());
    assert_eq!(c.cmd(&["XS.CFGSET", "keep", "MAXAGE", "3600000", "EXACT"]), ok());
    // First tick: the 1970 entries go (exact: all ten; whole nodes: two nodes).
    wait_until("the first trims", Duration::from_secs(3), || len(&mut c, "x") == 1 && len(&mut c, "a") == 3 && len(&mut c, "r2") == 1);
    assert_eq!(len(&mut c, "keep"), 1);
    wait_synced(&mut c, &mut rc);
    for k in ["x", "a", "r2", "keep"] {
        assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", k]), rc.cmd(&["DEBUG", "DIGEST-VALUE", k]), "{k}");
    }
    // Then the recent entries age out with no write.
    wait_until("the recent entries to age", Duration::from_secs(5), || len(&mut c, "x") == 0 && len(&mut c, "a") == 0 && len(&mut c, "r2") == 0);
    // x, a, r2: 10 old + 1 recent each; keep: its 2 entries of 1970.
    assert_eq!(expired(&mut c), before + 35);
    // Written again after emptying: indexed again.
    c.cmd(&["XS.ADD", "x", "*", "f", "v"]);
    wait_until("the new entry to age", Duration::from_secs(5), || len(&mut c, "x") == 0);
    wait_synced(&mut c, &mut rc);
    assert_eq!(rc.cmd(&["XS.INFO", "STREAM", "x"]).field("max-age"), Some(&Reply::Int(700)));
    let d = c.cmd(&["DEBUG", "DIGEST"]);
    assert_eq!(rc.cmd(&["DEBUG", "DIGEST"]), d);
    // The AOF (its propagated trims), a rewrite of it, the RDB.
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), ok());
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), d);
    c.cmd(&["BGREWRITEAOF"]);
    wait_rewrite(&mut c);
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), ok());
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), d);
    assert_eq!(c.cmd(&["XS.INFO", "STREAM", "keep"]).field("max-age"), Some(&Reply::Int(3600000)));
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), ok());
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), d);
    // COPY and DUMP / RESTORE carry the MAXAGE (digest-identical).
    assert_eq!(c.cmd(&["COPY", "keep", "k2"]), Reply::Int(1));
    let dump = c.cmd(&["DUMP", "keep"]);
    assert_eq!(c.cmd(&[&b"RESTORE"[..], b"k3", b"0", dump.as_bytes().unwrap()]), ok());
    let dk = c.cmd(&["DEBUG", "DIGEST-VALUE", "keep"]);
    for k in ["k2", "k3"] {
        assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", k]), dk, "{k}");
    }
    // After the reload, the loaded streams are indexed: a restored copy of an aged stream is trimmed.
    c.cmd(&["XS.ADD", "a", "*", "f", "v"]);
    let dump = c.cmd(&["DUMP", "a"]);
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), ok());
    wait_until("the reloaded stream to age", Duration::from_secs(5), || len(&mut c, "a") == 0);
    assert_eq!(c.cmd(&[&b"RESTORE"[..], b"a2", b"0", dump.as_bytes().unwrap()]), ok());
    wait_until("the restored stream to age", Duration::from_secs(5), || len(&mut c, "a2") == 0);
    wait_synced(&mut c, &mut rc);
    assert_eq!(rc.cmd(&["DEBUG", "DIGEST"]), c.cmd(&["DEBUG", "DIGEST"]));
}

/// [VT] A replica never trims by its own clock: cut from its primary before the entries age,
/// its retained stream keeps them past their age; promoted, its timer trims them.
#[test]
fn a_replica_never_ages_on_its_own_clock() {
    let mut primary = Server::start();
    let replica = Server::replica_of(&primary);
    let (mut c, mut rc) = (primary.conn(), replica.conn());
    let t0 = Instant::now();
    c.cmd(&["XS.ADD", "s", "*", "f", "v"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "8000", "EXACT"]), ok());
    c.cmd(&["XS.ADD", "s", "*", "f", "v"]);
    wait_synced(&mut c, &mut rc);
    drop(c);
    primary.kill9();
    assert!(t0.elapsed() < Duration::from_millis(7000), "the primary outlived the age");
    std::thread::sleep(Duration::from_millis(9000).saturating_sub(t0.elapsed()));
    assert_eq!(len(&mut rc, "s"), 2, "a replica does not trim on its own clock");
    assert_eq!(rc.cmd(&["REPLICAOF", "NO", "ONE"]), ok());
    wait_until("the promoted replica to trim", Duration::from_secs(5), || len(&mut rc, "s") == 0);
}

/// [VT] Written streams on a primary: a stored MAXAGE trims on each XS.ADD (sent as `XS.TRIM key
/// MINID = <id>` after it), inline MAXAGE is sent as `MINID = <id>`: the replica and the AOF
/// end digest-identical, in RESP2 and RESP3 clients alike (replies do not depend on it).
#[test]
fn written_streams_replicate_and_replay_identically() {
    let primary = Server::builder().arg("--appendonly", "yes").module_args(&["node-max-entries", "4"]).start();
    let replica = Server::replica_of(&primary);
    let (mut c, mut rc) = (primary.conn(), replica.conn());
    for (k, exact) in [("se", true), ("sa", false)] {
        old_entries(&mut c, k, 3);
        let mut cfg = vec!["XS.CFGSET", k, "MAXAGE", "40"];
        if exact {
            cfg.push("EXACT");
        }
        assert_eq!(c.cmd(&cfg), ok());
    }
    let mut rng = Rng::from_env("retention");
    for i in 0..600 * wave2_scale() {
        let k = ["se", "sa", "ie", "ia", "il"][rng.below(5) as usize];
        let cmd: Vec<&str> = match k {
            "ie" => vec!["XS.ADD", k, "MAXAGE", "30", "*", "f", "v"],
            "ia" => vec!["XS.ADD", k, "MAXAGE", "~", "30", "*", "f", "v"],
            "il" => vec!["XS.ADD", k, "MAXAGE", "~", "30", "LIMIT", "4", "*", "f", "v"],
            _ => vec!["XS.ADD", k, "*", "f", "v"],
        };
        assert!(!c.cmd(&cmd).is_error(), "{cmd:?}");
        if i % 50 == 0 {
            assert!(!c.cmd(&["XS.TRIM", "ie", "MAXAGE", "=", "20"]).is_error());
            assert!(!c.cmd(&["XS.TRIM", "ia", "MAXAGE", "~", "20", "LIMIT", "8"]).is_error());
        }
        if i % 20 == 0 {
            std::thread::sleep(Duration::from_millis(7));
        }
    }
    for k in ["se", "sa", "ie", "ia"] {
        assert!(len(&mut c, k) < 300, "{k} was trimmed");
    }
    // Idle from here: the timer empties the retained streams, then nothing changes.
    wait_until("se and sa to empty", Duration::from_secs(5), || len(&mut c, "se") == 0 && len(&mut c, "sa") == 0);
    wait_synced(&mut c, &mut rc);
    for k in ["se", "sa", "ie", "ia", "il"] {
        assert_eq!(c.cmd(&["DEBUG", "DIGEST-VALUE", k]), rc.cmd(&["DEBUG", "DIGEST-VALUE", k]), "{k}");
    }
    let d = c.cmd(&["DEBUG", "DIGEST"]);
    assert_eq!(rc.cmd(&["DEBUG", "DIGEST"]), d);
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]), ok());
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), d);
}

/// XS.EXPORT refuses a stream with a MAXAGE (a built-in stream cannot hold it) unless
/// DROPPOLICIES is given, which converts it without it.
#[test]
fn export_refuses_or_drops_the_retention() {
    let s = Server::start();
    let mut c = s.conn();
    c.cmd(&["XS.ADD", "s", "*", "f", "v"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "3600000"]), ok());
    assert_eq!(
        c.cmd(&["XS.EXPORT", "s"]),
        err("ERR XS.EXPORT: the stream has a retention by age (XS.CFGSET MAXAGE), which a built-in stream cannot hold; XS.EXPORT key DROPPOLICIES converts it without it")
    );
    assert_eq!(c.cmd(&["XS.EXPORT", "s", "DROPPOLICIES"]), Reply::Int(1));
    assert_eq!(c.cmd(&["TYPE", "s"]), Reply::Simple("stream".into()));
    assert_eq!(c.cmd(&["XLEN", "s"]), Reply::Int(1));
}

fn cpu_seconds(c: &mut Conn) -> f64 {
    let info = c.cmd(&["INFO", "cpu"]).text();
    ["used_cpu_user:", "used_cpu_sys:"]
        .iter()
        .filter_map(|k| info.lines().find_map(|l| l.trim().strip_prefix(k)).and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

/// The timer armed far ahead (an hour: nothing to trim) keeps the server idle. The event loop
/// reschedules a module timer with an `int` period in ms times 1000: a period past ~35 min
/// overflowed and the server spun at 100% of a core (the timers now re-arm every 10 min at
/// most). The same for the IDMP expiry timer, with a stream whose IDMP-DURATION is an hour next
/// to one whose iids expire first.
#[test]
fn far_timers_keep_the_server_idle() {
    let s = Server::start();
    let mut c = s.conn();
    c.cmd(&["XS.ADD", "s", "*", "f", "v"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "s", "MAXAGE", "3600000"]), ok());
    c.cmd(&["XS.ADD", "i", "*", "f", "v"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "i", "IDMP-DURATION", "3600"]), ok());
    c.cmd(&["XS.ADD", "i", "IDMP", "p", "a", "*", "f", "v"]);
    c.cmd(&["XS.ADD", "j", "*", "f", "v"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "j", "IDMP-DURATION", "1"]), ok());
    c.cmd(&["XS.ADD", "j", "IDMP", "p", "a", "*", "f", "v"]);
    std::thread::sleep(Duration::from_millis(2500));
    let (c0, t0) = (cpu_seconds(&mut c), Instant::now());
    std::thread::sleep(Duration::from_millis(2000));
    let used = (cpu_seconds(&mut c) - c0) / t0.elapsed().as_secs_f64();
    assert!(used < 0.2, "the server used {:.0}% of a core while idle", used * 100.0);
    assert_eq!(len(&mut c, "s"), 1);
}

/// SWAPDB: the time-driven indexes follow their keys into the other database. A retained
/// stream and a stream with an iid (IDMP-DURATION 1) move from db 0 to db 1, and plain
/// streams of the same names from db 1 to db 0: the retained stream still ages and the iid
/// still expires, under db 1, and db 0's streams are left alone. (Before the indexes followed
/// SWAPDB, the timers looked in db 0, found streams without MAXAGE / iids, and forgot both.)
#[test]
fn timers_follow_their_keys_through_swapdb() {
    let s = Server::builder().start();
    let mut c = s.conn();
    c.cmd(&["XS.ADD", "x", "*", "f", "v"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "x", "MAXAGE", "800", "EXACT"]), ok());
    c.cmd(&["XS.ADD", "i", "*", "f", "v"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "i", "IDMP-DURATION", "1"]), ok());
    let id1 = c.cmd(&["XS.ADD", "i", "IDMP", "p", "r", "*", "f", "v"]).text();
    assert_eq!(c.cmd(&["SELECT", "1"]), ok());
    c.cmd(&["XS.ADD", "x", "*", "f", "v"]);
    c.cmd(&["XS.ADD", "i", "*", "f", "v"]);
    assert_eq!(c.cmd(&["SWAPDB", "0", "1"]), ok());
    assert_eq!((len(&mut c, "x"), len(&mut c, "i")), (1, 2), "db 1 now holds db 0's streams");
    wait_until("the retained stream to age in db 1", Duration::from_secs(5), || len(&mut c, "x") == 0);
    wait_until("the iid to expire in db 1", Duration::from_secs(5), || c.cmd(&["XS.ADD", "i", "IDMP", "p", "r", "*", "f", "v"]).text() != id1);
    assert_eq!(len(&mut c, "i"), 3);
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    assert_eq!((len(&mut c, "x"), len(&mut c, "i")), (1, 1), "db 0's streams (db 1's before) untouched");
}

/// The time-driven work waits while clients are paused (`CLIENT PAUSE WRITE`, the first step of
/// a failover): with a replica and an AOF, a MAXAGE trim, an IDMP expiry, a CONSUMERTTL expiry
/// and an ACKTIMEOUT wake-up of a blocked reader all fell due during the pause, and the first
/// of them aborted the server (`propagatePendingCommands` asserts that nothing is propagated
/// while clients are paused). Nothing acts during the pause; after it everything does, and the
/// replica and an AOF restart agree with the primary.
#[test]
fn time_driven_work_waits_while_clients_are_paused() {
    // compat latest: XS.INFO STREAM shows `iids-tracked` (8.6's fields) on any host.
    let mut primary = Server::builder().arg("--appendonly", "yes").module_args(&["compat", "latest"]).start();
    let replica = Server::replica_of(&primary);
    let (mut c, mut rc) = (primary.conn(), replica.conn());
    // Everything falls due 0.8 to 1 s from now, inside the pause (from about 0.2 s to 2.7 s).
    let t0 = Instant::now();
    // MAXAGE: a fresh entry that ages out 800 ms from now.
    c.cmd(&["XS.ADD", "age", "*", "f", "v"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "age", "MAXAGE", "800", "EXACT"]), ok());
    // IDMP: an iid that expires 1 s from now.
    c.cmd(&["XS.ADD", "idmp", "*", "f", "v"]);
    assert_eq!(c.cmd(&["XS.CFGSET", "idmp", "IDMP-DURATION", "1"]), ok());
    let r = c.cmd(&["XS.ADD", "idmp", "IDMP", "p1", "i1", "*", "f", "v"]);
    assert!(!r.is_error(), "{r}");
    // CONSUMERTTL 800: consumer `gone` read one entry and goes silent.
    c.cmd(&["XS.ADD", "ttl", "1-0", "f", "v"]);
    c.cmd(&["XS.GROUP", "CREATE", "ttl", "g", "0"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "gone", "STREAMS", "ttl", ">"]);
    assert_eq!(c.cmd(&["XS.GROUP", "SETPOLICY", "ttl", "g", "CONSUMERTTL", "800"]), ok());
    // ACKTIMEOUT 800: the entry `w1` took comes back to a blocked reader.
    c.cmd(&["XS.ADD", "ack", "1-0", "f", "v"]);
    c.cmd(&["XS.GROUP", "CREATE", "ack", "g", "0"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "w1", "STREAMS", "ack", ">"]);
    assert_eq!(c.cmd(&["XS.GROUP", "SETPOLICY", "ack", "g", "ACKTIMEOUT", "800"]), ok());
    let mut reader = primary.conn();
    reader.set_timeout(Duration::from_secs(10));
    reader.send(&["XS.READGROUP", "GROUP", "g", "w2", "BLOCK", "0", "STREAMS", "ack", ">"]).unwrap();
    let idmp_info = |c: &mut Conn| c.cmd(&["XS.INFO", "STREAM", "idmp"]).field("iids-tracked").cloned();
    let tracked = idmp_info(&mut c);
    assert_eq!(c.cmd(&["CLIENT", "PAUSE", "2500", "WRITE"]), ok());
    let paused_at = t0.elapsed();
    assert!(paused_at < Duration::from_millis(700), "the set-up took {paused_at:?}: the work fell due before the pause");
    std::thread::sleep(Duration::from_millis(1800).saturating_sub(paused_at));
    assert!(c.ping(), "the server died during the pause:\n{}", primary.log_tail(30));
    assert_eq!(len(&mut c, "age"), 1, "trimmed during the pause");
    assert_eq!(idmp_info(&mut c), tracked, "iids expired during the pause");
    assert_eq!(c.cmd(&["XS.INFO", "CONSUMERS", "ttl", "g"]).as_array().len(), 1, "consumer expired during the pause");
    assert_eq!(c.cmd(&["CLIENT", "UNPAUSE"]), ok());
    // After it, everything acts.
    let (r, _) = reader.read_reply().expect("the blocked reader is served after the pause");
    assert!(r.to_string().contains("1-0"), "{r}");
    wait_until("the work after the pause", Duration::from_secs(5), || {
        len(&mut c, "age") == 0 && idmp_info(&mut c) != tracked && c.cmd(&["XS.INFO", "CONSUMERS", "ttl", "g"]).as_array().is_empty()
    });
    wait_synced(&mut c, &mut rc);
    let keys = ["age", "idmp", "ttl", "ack"];
    let digests = |c: &mut Conn| -> Vec<Reply> { keys.iter().map(|k| c.cmd(&["DEBUG", "DIGEST-VALUE", k])).collect() };
    let want = digests(&mut c);
    assert_eq!(digests(&mut rc), want, "replica");
    drop(c);
    primary.restart();
    // The restarted server acts as a primary again: compare at once, before its timers run.
    let mut c = primary.conn();
    assert_eq!(c.cmd(&["XS.LEN", "age"]), Reply::Int(0));
    assert_eq!(digests(&mut c)[2..], want[2..], "AOF restart");
}
