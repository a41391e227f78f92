//! XS.GROUP REDRIVE dlq-key source-key [COUNT n] (issue 31): dead letters back to their source
//! stream as new entries with a `redrives` count, deleted from the dead-letter stream; other
//! sources and entries not in the dead-letter form stay; replicas and the AOF end identical;
//! a dead-letter stream of 10,000 entries is redriven whole; errors and key specs.

mod common;

use common::*;

fn ok(r: Reply) {
    assert_eq!(r, Reply::Simple("OK".into()));
}

fn strs(r: &Reply) -> Vec<String> {
    r.as_array().iter().map(Reply::text).collect()
}

/// Each entry of an XS.RANGE reply: (ID, fields as text).
fn entries(r: &Reply) -> Vec<(String, Vec<String>)> {
    r.as_array()
        .iter()
        .map(|e| {
            let e = e.as_array();
            (e[0].text(), strs(&e[1]))
        })
        .collect()
}

/// `n` entries of `src` (IDs 1-0 .. n-0, field `job` = i) dead-lettered into `dlq` through a
/// MAXDELIVERIES 1 policy of group `g` (read once, then re-read: the second delivery is the
/// dead letter's).
fn dead_letter(c: &mut Conn, src: &str, dlq: &str, n: usize) {
    let mut p = Vec::new();
    for i in 1..=n {
        p.push(vec!["XS.ADD".to_string(), src.to_string(), format!("{i}-0"), "job".into(), i.to_string()]);
    }
    for r in pipeline(c, &p) {
        assert!(!r.is_error(), "{r}");
    }
    ok(c.cmd(&["XS.GROUP", "CREATE", src, "g", "0"]));
    ok(c.cmd(&["XS.GROUP", "SETPOLICY", src, "g", "MAXDELIVERIES", "1", "DEADLETTER", dlq]));
    c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", src, ">"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", src, "0"]);
}

#[test]
fn redrive_moves_dead_letters_back() {
    let s = Server::start();
    let mut c = s.conn();
    dead_letter(&mut c, "{q}a", "{q}dead", 3);
    dead_letter(&mut c, "{q}b", "{q}dead", 2);
    // A hand-added entry in the dead-letter stream, not in the dead-letter form: left alone.
    c.cmd(&["XS.ADD", "{q}dead", "*", "note", "by hand"]);
    assert_eq!(c.cmd(&["XS.LEN", "{q}dead"]), Reply::Int(6));
    assert_eq!(c.cmd(&["XS.PENDING", "{q}a", "g"]).as_array()[0], Reply::Int(0), "dead letters are acknowledged");

    // COUNT: the oldest of {q}a's first.
    assert_eq!(c.cmd(&["XS.GROUP", "REDRIVE", "{q}dead", "{q}a", "COUNT", "2"]), Reply::Int(2));
    let back = entries(&c.cmd(&["XS.RANGE", "{q}a", "4-0", "+"]));
    assert_eq!(back.len(), 2);
    assert_eq!(back[0].1, ["job", "1", "redrives", "1"]);
    assert_eq!(back[1].1, ["job", "2", "redrives", "1"]);
    // The source's group delivers them as new entries.
    let got = c.cmd(&["XS.READGROUP", "GROUP", "g", "w2", "STREAMS", "{q}a", ">"]);
    assert_eq!(entries(&got.as_array()[0].as_array()[1]).len(), 2, "{got}");
    // Only {q}a's dead letters went: 1 of {q}a's, 2 of {q}b's and the hand-added one remain.
    let left = entries(&c.cmd(&["XS.RANGE", "{q}dead", "-", "+"]));
    let sources: Vec<&str> = left.iter().map(|(_, f)| f[1].as_str()).collect();
    assert_eq!(sources, ["{q}a", "{q}b", "{q}b", "by hand"]);

    // Without COUNT: the rest of {q}a's; then none.
    assert_eq!(c.cmd(&["XS.GROUP", "REDRIVE", "{q}dead", "{q}a"]), Reply::Int(1));
    assert_eq!(c.cmd(&["XS.GROUP", "REDRIVE", "{q}dead", "{q}a"]), Reply::Int(0));
    assert_eq!(c.cmd(&["XS.LEN", "{q}dead"]), Reply::Int(3));

    // A redriven entry dead-lettered again and redriven again counts 2.
    c.cmd(&["XS.READGROUP", "GROUP", "g", "w2", "STREAMS", "{q}a", "0"]);
    let dead_again = entries(&c.cmd(&["XS.RANGE", "{q}dead", "-", "+"]));
    assert_eq!(dead_again.len(), 5, "{dead_again:?}");
    assert_eq!(c.cmd(&["XS.GROUP", "REDRIVE", "{q}dead", "{q}a", "COUNT", "1"]), Reply::Int(1));
    let last = entries(&c.cmd(&["XS.REVRANGE", "{q}a", "+", "-", "COUNT", "1"]));
    assert_eq!(last[0].1, ["job", "1", "redrives", "2"]);

    // A source that no longer exists is created.
    c.cmd(&["DEL", "{q}b"]);
    assert_eq!(c.cmd(&["XS.GROUP", "REDRIVE", "{q}dead", "{q}b"]), Reply::Int(2));
    assert_eq!(strs(&c.cmd(&["XS.RANGE", "{q}b", "-", "+"]).as_array()[0].as_array()[1]), ["job", "1", "redrives", "1"]);
    let info = c.cmd(&["INFO", "xstream"]).text();
    assert!(info.contains("xstream_entries_redriven:6"), "{info}");
}

#[test]
fn redrive_errors_and_key_specs() {
    let s = Server::start();
    let mut c = s.conn();
    // A missing dead-letter key moves nothing.
    assert_eq!(c.cmd(&["XS.GROUP", "REDRIVE", "nodlq", "src"]), Reply::Int(0));
    assert_eq!(c.cmd(&["EXISTS", "src"]), Reply::Int(0));
    let e = |c: &mut Conn, args: &[&str]| c.cmd(args).text();
    assert_eq!(e(&mut c, &["XS.GROUP", "REDRIVE", "d"]), "ERR wrong number of arguments for 'xs.group|redrive' command");
    assert_eq!(e(&mut c, &["XS.GROUP", "REDRIVE", "d", "s", "COUNT"]), "ERR syntax error");
    assert_eq!(e(&mut c, &["XS.GROUP", "REDRIVE", "d", "s", "COUNT", "0"]), "ERR COUNT must be a positive integer");
    assert_eq!(e(&mut c, &["XS.GROUP", "REDRIVE", "d", "s", "LIMIT", "1"]), "ERR syntax error");
    assert_eq!(e(&mut c, &["XS.GROUP", "REDRIVE", "d", "d"]), "ERR the dead-letter key and the source key are the same key");
    c.cmd(&["SET", "str", "x"]);
    dead_letter(&mut c, "src", "dlq", 1);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(e(&mut c, &["XS.GROUP", "REDRIVE", "str", "src"]), wrongtype);
    assert_eq!(e(&mut c, &["XS.GROUP", "REDRIVE", "dlq", "str"]), wrongtype);
    assert_eq!(c.cmd(&["XS.LEN", "dlq"]), Reply::Int(1), "nothing moved on an error");
    // Both keys are keys of the command (ACL, cluster slots).
    assert_eq!(strs(&c.cmd(&["COMMAND", "GETKEYS", "XS.GROUP", "REDRIVE", "dlq", "src", "COUNT", "5"])), ["dlq", "src"]);
    c.cmd(&["ACL", "SETUSER", "r", "on", "nopass", "+@all", "~dlq"]);
    let mut u = s.conn();
    ok(u.cmd(&["AUTH", "r", "x"]));
    assert!(u.cmd(&["XS.GROUP", "REDRIVE", "dlq", "src"]).text().starts_with("NOPERM"), "the source key needs permission too");
    let docs = c.cmd(&["COMMAND", "DOCS", "XS.GROUP"]).to_string();
    assert!(docs.contains("redrive") && docs.contains("source-key"), "{docs}");
}

/// Replicas and the AOF get ordinary writes: the replica's and the reloaded AOF's digests are
/// the primary's, after a dead-letter stream of 10,000 entries is redriven whole.
#[test]
fn redrive_replicates_and_scales() {
    let n = 10_000usize;
    let s = Server::builder().arg("--appendonly", "yes").start();
    let replica = Server::replica_of(&s);
    let mut c = s.conn();
    dead_letter(&mut c, "src", "dlq", n);
    assert_eq!(c.cmd(&["XS.LEN", "dlq"]), Reply::Int(n as i64));
    let mut moved = 0i64;
    while moved < n as i64 {
        let got = c.cmd(&["XS.GROUP", "REDRIVE", "dlq", "src", "COUNT", "3000"]).as_int();
        assert!(got > 0, "moved {moved} of {n}");
        moved += got;
    }
    assert_eq!(moved, n as i64);
    assert_eq!(c.cmd(&["XS.LEN", "dlq"]), Reply::Int(0));
    assert_eq!(c.cmd(&["XS.LEN", "src"]), Reply::Int(2 * n as i64));
    let got = c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "COUNT", "20000", "STREAMS", "src", ">"]);
    assert_eq!(got.as_array()[0].as_array()[1].as_array().len(), n, "every redriven entry is new work");
    assert_eq!(c.cmd(&["WAIT", "1", "10000"]), Reply::Int(1));
    let mut r = replica.conn();
    let digest = c.raw(&["DEBUG", "DIGEST"]);
    assert_eq!(r.raw(&["DEBUG", "DIGEST"]), digest, "replica");
    ok(c.cmd(&["DEBUG", "LOADAOF"]));
    assert_eq!(c.raw(&["DEBUG", "DIGEST"]), digest, "after DEBUG LOADAOF");
    report(&format!("redrive: {n} dead letters redriven; replica and AOF digests equal"));
}
