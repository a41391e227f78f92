//! MAXCOUNT / MAXSIZE of Redis 8.10 on XS.READ and XS.READGROUP (REDIS8.md §7), on whatever
//! host runs this, RESP2 and RESP3. The [VT] examples (redis-py and predis against real 8.10
//! servers) are tests here; the rest pins the decisions of docs/redis8.md.

mod common;

use common::*;
use std::time::Duration;

fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

fn add(c: &mut Conn, key: &str, ids: &[&str]) {
    for id in ids {
        assert_eq!(c.cmd(&["XS.ADD", key, id, "field", "value"]).text(), *id);
    }
}

/// The (stream, [entry IDs]) of an XREAD / XREADGROUP reply, in order (RESP2 array or RESP3
/// map); nil is no stream.
fn streams(r: &Reply) -> Vec<(String, Vec<String>)> {
    let pairs: Vec<(Reply, Reply)> = match r {
        Reply::Nil => return Vec::new(),
        Reply::Map(kv) => kv.clone(),
        Reply::Array(v) => v.iter().map(|p| (p.as_array()[0].clone(), p.as_array()[1].clone())).collect(),
        other => panic!("not a read reply: {other}"),
    };
    pairs.iter().map(|(k, v)| (k.text(), v.as_array().iter().map(|e| e.as_array()[0].text()).collect())).collect()
}

fn owned(v: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    v.iter().map(|(k, ids)| (k.to_string(), ids.iter().map(|s| s.to_string()).collect())).collect()
}

#[test]
fn maxcount_maxsize_errors() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "a", &["1-1"]);
        for cmd in [&["XS.READ"][..], &["XS.READGROUP", "GROUP", "g", "c"][..]] {
            let run = |c: &mut Conn, opts: &[&str]| {
                let mut v: Vec<&str> = cmd.to_vec();
                v.extend(opts);
                v.extend(["STREAMS", "a", if cmd.len() > 1 { ">" } else { "0" }]);
                c.cmd(&v)
            };
            c.cmd(&["XS.GROUP", "CREATE", "a", "g", "0"]);
            for bad in ["0", "-1", "abc", "1.5"] {
                assert_eq!(run(c, &["MAXCOUNT", bad]), err("ERR MAXCOUNT must be a positive integer"), "MAXCOUNT {bad}");
                assert_eq!(run(c, &["MAXSIZE", bad]), err("ERR MAXSIZE must be a positive integer"), "MAXSIZE {bad}");
            }
            assert_eq!(run(c, &["COUNT", "5", "MAXCOUNT", "4"]), err("ERR MAXCOUNT must be greater than or equal to COUNT"));
            assert_eq!(run(c, &["MAXCOUNT", "4", "COUNT", "5"]), err("ERR MAXCOUNT must be greater than or equal to COUNT"));
            // COUNT 0 (all) does not conflict; MAXCOUNT = COUNT is fine.
            assert!(!run(c, &["COUNT", "0", "MAXCOUNT", "4"]).is_error());
            assert!(!run(c, &["COUNT", "4", "MAXCOUNT", "4", "MAXSIZE", "1"]).is_error());
            // A keyword without its value is a syntax error, as every option's.
            let mut v: Vec<&str> = cmd.to_vec();
            v.extend(["COUNT", "1", "MAXCOUNT"]);
            assert_eq!(c.cmd(&v), err("ERR syntax error"));
        }
    });
}

/// [VT PY] two streams of 3 entries, COUNT 3 MAXCOUNT 4: all of the first, one of the second.
#[test]
fn maxcount_across_streams() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s1", &["1-1", "2-1", "3-1"]);
        add(c, "s2", &["1-2", "2-2", "3-2"]);
        let r = c.cmd(&["XS.READ", "COUNT", "3", "MAXCOUNT", "4", "STREAMS", "s1", "s2", "0", "0"]);
        assert_eq!(streams(&r), owned(&[("s1", &["1-1", "2-1", "3-1"]), ("s2", &["1-2"])]));
        // Once the cap is reached, later streams do not appear.
        let r = c.cmd(&["XS.READ", "MAXCOUNT", "3", "STREAMS", "s1", "s2", "0", "0"]);
        assert_eq!(streams(&r), owned(&[("s1", &["1-1", "2-1", "3-1"])]));
        // A stream with nothing to serve uses none of the cap.
        let r = c.cmd(&["XS.READ", "MAXCOUNT", "2", "STREAMS", "s1", "s2", "3-1", "2-2"]);
        assert_eq!(streams(&r), owned(&[("s2", &["3-2"])]));
        // `+` gives one entry, within the cap.
        let r = c.cmd(&["XS.READ", "MAXCOUNT", "2", "STREAMS", "s1", "s2", "+", "0"]);
        assert_eq!(streams(&r), owned(&[("s1", &["3-1"]), ("s2", &["1-2"])]));
    });
}

/// [VT PY] MAXCOUNT without COUNT: MAXCOUNT 2 over 5 entries gives 2.
#[test]
fn maxcount_without_count() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &["1-1", "2-1", "3-1", "4-1", "5-1"]);
        let r = c.cmd(&["XS.READ", "MAXCOUNT", "2", "STREAMS", "s", "0"]);
        assert_eq!(streams(&r), owned(&[("s", &["1-1", "2-1"])]));
    });
}

/// [VT PY] MAXSIZE 1 gives exactly one entry (the first always goes out, however large), and a
/// budget gives fewer entries than no budget but at least one; the entry that crosses it goes
/// out whole, the next stream does not appear.
#[test]
fn maxsize_soft_budget() {
    let s = Server::start();
    each_protocol(&s, |c, resp3| {
        let big = "x".repeat(1000);
        for i in 1..=10 {
            c.cmd(&["XS.ADD", "s", &format!("{i}-1"), "f", &big]);
            c.cmd(&["XS.ADD", "t", &format!("{i}-1"), "f", "v"]);
        }
        let r = c.cmd(&["XS.READ", "MAXSIZE", "1", "STREAMS", "s", "t", "0", "0"]);
        assert_eq!(streams(&r), owned(&[("s", &["1-1"])]));
        let r = c.cmd(&["XS.READ", "MAXSIZE", "3000", "STREAMS", "s", "t", "0", "0"]);
        let got = streams(&r);
        assert_eq!(got.len(), 1, "{got:?}");
        let n = got[0].1.len();
        assert!((1..10).contains(&n), "{got:?}");
        // Each entry of s is about 1030 bytes in the reply: the budget of 3000 is crossed by
        // the third entry, which still goes out.
        assert_eq!(n, 3, "{got:?}");
        // The small stream t: an entry is `*2 $3 1-1 *2 $1 f $1 v` = 31 bytes (RESP2 and RESP3
        // alike); the name of t is `*2 $1 t` (11 bytes) in RESP2, `$1 t` (7) in RESP3. After 3
        // entries: 104 bytes (RESP2), 100 (RESP3).
        let r = c.cmd(&["XS.READ", "MAXSIZE", "100", "STREAMS", "t", "0"]);
        assert_eq!(streams(&r)[0].1.len(), 3);
        let r = c.cmd(&["XS.READ", "MAXSIZE", "104", "STREAMS", "t", "0"]);
        assert_eq!(streams(&r)[0].1.len(), if resp3 { 4 } else { 3 });
        let r = c.cmd(&["XS.READ", "MAXSIZE", "105", "STREAMS", "t", "0"]);
        assert_eq!(streams(&r)[0].1.len(), 4);
        // Both options: whichever stops first.
        let r = c.cmd(&["XS.READ", "MAXCOUNT", "2", "MAXSIZE", "100000", "STREAMS", "t", "s", "0", "0"]);
        assert_eq!(streams(&r), owned(&[("t", &["1-1", "2-1"])]));
    });
}

/// XREADGROUP `>`: entries withheld by either cap are not delivered (no PEL entry, the group's
/// last ID stays), the next read gets them; history reads obey the caps too.
#[test]
fn readgroup_withheld_entries_not_delivered() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s1", &["1-1", "2-1", "3-1"]);
        add(c, "s2", &["1-2", "2-2"]);
        for k in ["s1", "s2"] {
            c.cmd(&["XS.GROUP", "CREATE", k, "g", "0"]);
        }
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "MAXCOUNT", "2", "STREAMS", "s1", "s2", ">", ">"]);
        assert_eq!(streams(&r), owned(&[("s1", &["1-1", "2-1"])]));
        assert_eq!(c.cmd(&["XS.PENDING", "s1", "g"]).as_array()[0], Reply::Int(2));
        assert_eq!(c.cmd(&["XS.PENDING", "s2", "g"]).as_array()[0], Reply::Int(0));
        let groups = c.cmd(&["XS.INFO", "GROUPS", "s1"]);
        assert_eq!(groups.as_array()[0].field("last-delivered-id").unwrap().text(), "2-1");
        assert_eq!(groups.as_array()[0].field("entries-read"), Some(&Reply::Int(2)));
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "COUNT", "1", "MAXCOUNT", "2", "STREAMS", "s1", "s2", ">", ">"]);
        assert_eq!(streams(&r), owned(&[("s1", &["3-1"]), ("s2", &["1-2"])]));
        // MAXSIZE 1 on a history read: one entry, its delivery count alone goes up.
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "MAXSIZE", "1", "STREAMS", "s1", "s2", "0", "0"]);
        assert_eq!(streams(&r), owned(&[("s1", &["1-1"])]));
        let p = c.cmd(&["XS.PENDING", "s1", "g", "-", "+", "10"]);
        let counts: Vec<i64> = p.as_array().iter().map(|e| e.as_array()[3].as_int()).collect();
        assert_eq!(counts, [2, 1, 1]);
        // NOACK with MAXCOUNT: the group's last ID moves only over what was served.
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "NOACK", "MAXCOUNT", "5", "STREAMS", "s2", ">"]);
        assert_eq!(streams(&r), owned(&[("s2", &["2-2"])]));
    });
}

/// A blocked reader is served within its caps: several entries added in one transaction, the
/// reader gets MAXCOUNT of them; a blocked group reader leaves the rest undelivered.
#[test]
fn blocked_reads_obey_the_caps() {
    let s = Server::start();
    for level in ["host", "7.0", "latest"] {
        let mut admin = s.conn();
        assert_eq!(admin.cmd(&["CONFIG", "SET", "xstream.compat", level]), ok());
        admin.cmd(&["FLUSHALL"]);
        admin.cmd(&["XS.GROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        let mut reader = s.conn();
        let mut greader = s.conn();
        reader.send(&["XS.READ", "MAXCOUNT", "2", "BLOCK", "0", "STREAMS", "s", "$"]).unwrap();
        greader.send(&["XS.READGROUP", "GROUP", "g", "c", "MAXSIZE", "1", "BLOCK", "0", "STREAMS", "s", ">"]).unwrap();
        assert!(wait_blocked_clients(&mut admin, 2), "not blocked");
        admin.cmd(&["MULTI"]);
        for id in ["1-1", "2-1", "3-1"] {
            admin.cmd(&["XS.ADD", "s", id, "f", "v"]);
        }
        admin.cmd(&["EXEC"]);
        reader.set_timeout(Duration::from_secs(5));
        greader.set_timeout(Duration::from_secs(5));
        let (r, _) = reader.read_reply().expect("served");
        assert_eq!(streams(&r), owned(&[("s", &["1-1", "2-1"])]), "compat {level}");
        let (r, _) = greader.read_reply().expect("served");
        assert_eq!(streams(&r), owned(&[("s", &["1-1"])]), "compat {level}");
        assert_eq!(admin.cmd(&["XS.PENDING", "s", "g"]).as_array()[0], Reply::Int(1), "compat {level}");
    }
    s.conn().cmd(&["CONFIG", "SET", "xstream.compat", "host"]);
}

/// The deliveries of a capped group read reach a replica as they happened.
#[test]
fn capped_group_read_replicates() {
    let primary = Server::start();
    let replica = Server::replica_of(&primary);
    let mut c = primary.conn();
    add(&mut c, "s", &["1-1", "2-1", "3-1", "4-1"]);
    c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "MAXCOUNT", "3", "STREAMS", "s", ">"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "d", "NOACK", "MAXSIZE", "1", "STREAMS", "s", ">"]);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    let mut rc = replica.conn();
    // The digest covers entries, groups, PELs with delivery times and counts (not the
    // consumers' seen-times, which replicas set when they apply the commands).
    let groups = |c: &mut Conn| c.raw(&["XS.INFO", "GROUPS", "s"]);
    assert_eq!(groups(&mut rc), groups(&mut c));
    assert_eq!(rc.raw(&["DEBUG", "DIGEST-VALUE", "s"]), c.raw(&["DEBUG", "DIGEST-VALUE", "s"]));
}
