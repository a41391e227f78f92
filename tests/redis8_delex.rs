//! Redis 8.2's XDELEX / XACKDEL and the KEEPREF / DELREF / ACKED policies of XADD / XTRIM
//! (REDIS8.md §3), on the module's commands, on whatever host runs this. Each [VT] example of
//! the spec is a test here (named after it), run in RESP2 and in RESP3 (the replies are integers
//! and arrays of integers: the same bytes in both, checked). No built-in to compare with on the
//! hosts of the matrix (8.2 is the first release with these commands): the expected replies are
//! the spec's, which real 8.2+ servers gave.

mod common;

use common::*;
use std::time::Duration;

fn ints(v: &[i64]) -> Reply {
    Reply::Array(v.iter().map(|&i| Reply::Int(i)).collect())
}

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

/// A server at `xstream.compat latest`: the [VT] examples of the approximate DELREF / ACKED
/// trims are the later releases' (REDIS8.md 3.5). Redis 8.2.3 answers otherwise (its `~` walk
/// stops before any entry under DELREF / ACKED), and so does the module at level 8.2, the level
/// `compat host` picks on 8.2 hosts: [`approx_ref_trims_at_level_8_2`].
fn spec_level() -> Server {
    Server::builder().module_args(&["compat", "latest"]).start()
}

/// XADD of `n` entries `1-0 .. n-0`.
fn add_n(c: &mut Conn, key: &str, n: u64) {
    for i in 1..=n {
        let id = format!("{i}-0");
        assert_eq!(c.cmd(&["XS.ADD", key, &id, "f", "v"]).text(), id);
    }
}

fn xlen(c: &mut Conn, key: &str) -> i64 {
    c.cmd(&["XS.LEN", key]).as_int()
}

/// The number of pending entries of a group (XPENDING summary).
fn pending(c: &mut Conn, key: &str, g: &str) -> i64 {
    c.cmd(&["XS.PENDING", key, g]).as_array()[0].as_int()
}

/// The IDs of the entries of a stream.
fn ids(c: &mut Conn, key: &str) -> Vec<String> {
    c.cmd(&["XS.RANGE", key, "-", "+"]).as_array().iter().map(|e| e.as_array()[0].text()).collect()
}

/// g1 and g2 both read 1-0 and 2-0 (nothing acked).
fn two_groups_read_both(c: &mut Conn) {
    add_n(c, "s", 2);
    for g in ["g1", "g2"] {
        assert_eq!(c.cmd(&["XS.GROUP", "CREATE", "s", g, "0"]), ok());
        let r = c.cmd(&["XS.READGROUP", "GROUP", g, "c", "STREAMS", "s", ">"]);
        assert!(!r.is_nil(), "{r}");
    }
}

// ---- XDELEX ----------------------------------------------------------------------------------

#[test]
fn xdelex_option_errors() {
    let s = Server::start();
    both(&s, |c| {
        add_n(c, "s", 1);
        // Only one policy.
        assert_eq!(c.cmd(&["XS.DELEX", "s", "KEEPREF", "DELREF", "IDS", "1", "1-1"]), err("ERR syntax error"));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "IDS", "1", "1-0", "ACKED", "acked"]), err("ERR syntax error"));
        for n in ["abc", "0", "-5", "9223372036854775808"] {
            assert_eq!(c.cmd(&["XS.DELEX", "s", "IDS", n, "1-0"]), err("ERR Number of IDs must be a positive integer"), "IDS {n}");
        }
        assert_eq!(c.cmd(&["XS.DELEX", "s", "IDS", "3", "1-0", "2-0"]), err("ERR The `numids` parameter must match the number of arguments"));
        // A count far beyond the arguments (nothing is sized by it).
        for n in ["9223372036854775807", "4294967297"] {
            assert_eq!(c.cmd(&["XS.DELEX", "s", "IDS", n, "1-0"]), err("ERR The `numids` parameter must match the number of arguments"));
            assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g", "IDS", n, "1-0"]), err("ERR The `numids` parameter must match the number of arguments"));
            assert_eq!(c.cmd(&["XS.DELEX", "missing", "IDS", n, "1-0"]), err("ERR The `numids` parameter must match the number of arguments"));
        }
        // A surplus ID is read as an option.
        assert_eq!(c.cmd(&["XS.DELEX", "s", "IDS", "1", "1-0", "2-0"]), err("ERR syntax error"));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "FOO", "IDS", "1", "1-0"]), err("ERR syntax error"));
        // IDS without a count is no IDS block.
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "KEEPREF", "IDS"]), err("ERR syntax error"));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "KEEPREF", "DELREF"]), err("ERR syntax error"));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "acked", "x"]), err("ERR syntax error"));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "bogus", "x"]), err("ERR syntax error"));
        // Arity -5.
        let r = c.cmd(&["XS.DELEX", "s", "IDS", "1"]);
        assert_eq!(r, err("ERR wrong number of arguments for 'xs.delex' command"));
        // Strict IDs, all parsed before anything is deleted.
        assert_eq!(c.cmd(&["XS.DELEX", "s", "IDS", "2", "1-0", "-"]), err("ERR Invalid stream ID specified as stream command argument"));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "IDS", "2", "1-0", "x"]), err("ERR Invalid stream ID specified as stream command argument"));
        assert_eq!(xlen(c, "s"), 1);
        // Tokens in any order, any case; the policy after the IDS block.
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ids", "2", "1-0", "1", "delref"]), ints(&[1, -1]));
        // WRONGTYPE comes first, then option errors, then the missing key.
        c.cmd(&["SET", "str", "x"]);
        assert_eq!(c.cmd(&["XS.DELEX", "str", "BOGUS", "IDS", "1", "1-0"]), err("WRONGTYPE Operation against a key holding the wrong kind of value"));
        assert_eq!(c.cmd(&["XS.DELEX", "missing", "BOGUS", "IDS", "1", "1-0"]), err("ERR syntax error"));
    });
}

/// [VT] a missing key answers -1 per ID without parsing the IDs.
#[test]
fn xdelex_missing_key() {
    let s = Server::start();
    both(&s, |c| {
        assert_eq!(c.cmd(&["XS.DELEX", "missing", "IDS", "2", "1-1", "2-2"]), ints(&[-1, -1]));
        assert_eq!(c.cmd(&["XS.DELEX", "missing", "IDS", "1", "garbage"]), ints(&[-1]));
        assert_eq!(c.cmd(&["EXISTS", "missing"]), Reply::Int(0));
    });
}

/// KEEPREF (the default) deletes and leaves the PEL alone; duplicates give 1 then -1.
#[test]
fn xdelex_keepref_and_duplicates() {
    let s = Server::start();
    both(&s, |c| {
        two_groups_read_both(c);
        add_n_more(c, 3, 4);
        assert_eq!(c.cmd(&["XS.DELEX", "s", "IDS", "4", "1-0", "1-0", "9-0", "3-0"]), ints(&[1, -1, -1, 1]));
        assert_eq!(ids(c, "s"), ["2-0", "4-0"]);
        // The PELs still hold 1-0, which now reads as [1-0, nil].
        assert_eq!(pending(c, "s", "g1"), 2);
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g1", "c", "STREAMS", "s", "0"]);
        let entries = r.field("s").cloned().unwrap_or_else(|| r.as_array()[0].as_array()[1].clone());
        assert_eq!(entries.as_array()[0], Reply::Array(vec![Reply::Bulk(b"1-0".to_vec()), Reply::Nil]));
        // max-deleted-entry-id and first-entry follow the deletions, as XDEL.
        let info = c.cmd(&["XS.INFO", "STREAM", "s"]);
        assert_eq!(info.field("max-deleted-entry-id").unwrap().text(), "3-0");
        assert_eq!(info.field("recorded-first-entry-id").unwrap().text(), "2-0");
    });
}

fn add_n_more(c: &mut Conn, from: u64, to: u64) {
    for i in from..=to {
        let id = format!("{i}-0");
        assert_eq!(c.cmd(&["XS.ADD", "s", &id, "f", "v"]).text(), id);
    }
}

/// [VT] two groups have read 1-0 and 2-0: ACKED keeps both (2, 2) while a group still holds
/// them; once the only group holding them is destroyed, they are deleted (1, 1).
#[test]
fn xdelex_acked_two_groups() {
    let s = Server::start();
    both(&s, |c| {
        two_groups_read_both(c);
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "2", "1-0", "2-0"]), ints(&[2, 2]));
        assert_eq!(c.cmd(&["XS.ACK", "s", "g1", "1-0", "2-0"]), Reply::Int(2));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "2", "1-0", "2-0"]), ints(&[2, 2]));
        assert_eq!(xlen(c, "s"), 2);
        assert_eq!(c.cmd(&["XS.GROUP", "DESTROY", "s", "g2"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "2", "1-0", "2-0"]), ints(&[1, 1]));
        assert_eq!(xlen(c, "s"), 0);
    });
}

/// [VT] groups at last IDs 1-0 and 3-0 with empty PELs: 1-0 is delivered to both (deleted),
/// 2-0 not to the first (kept, 2); destroying the group at 1-0 (the minimum) lets 2-0 go. A
/// non-existent ID ahead of a group's last ID is "referenced" too (checked before existence).
#[test]
fn xdelex_acked_min_group_last_id() {
    let s = Server::start();
    both(&s, |c| {
        add_n(c, "s", 3);
        assert_eq!(c.cmd(&["XS.GROUP", "CREATE", "s", "low", "1-0"]), ok());
        assert_eq!(c.cmd(&["XS.GROUP", "CREATE", "s", "high", "3-0"]), ok());
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "1", "1-0"]), ints(&[1]));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "1", "2-0"]), ints(&[2]));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "1", "99-0"]), ints(&[2]));
        assert_eq!(c.cmd(&["XS.GROUP", "DESTROY", "s", "low"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "2", "2-0", "99-0"]), ints(&[1, 2]));
        // The cached minimum follows SETID both ways.
        assert_eq!(c.cmd(&["XS.GROUP", "SETID", "s", "high", "0"]), ok());
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "1", "3-0"]), ints(&[2]));
        assert_eq!(c.cmd(&["XS.GROUP", "SETID", "s", "high", "$"]), ok());
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "1", "3-0"]), ints(&[1]));
        // Without groups nothing is referenced.
        c.cmd(&["XS.ADD", "s", "4-0", "f", "v"]);
        assert_eq!(c.cmd(&["XS.GROUP", "DESTROY", "s", "high"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "2", "4-0", "99-0"]), ints(&[1, -1]));
    });
}

/// [VT] a new group created at 0 makes entries every other group has acked referenced again.
#[test]
fn xdelex_acked_new_group_at_zero() {
    let s = Server::start();
    both(&s, |c| {
        add_n(c, "s", 2);
        c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
        assert_eq!(c.cmd(&["XS.ACK", "s", "g", "1-0", "2-0"]), Reply::Int(2));
        assert_eq!(c.cmd(&["XS.GROUP", "CREATE", "s", "late", "0"]), ok());
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "2", "1-0", "2-0"]), ints(&[2, 2]));
        assert_eq!(c.cmd(&["XS.GROUP", "DESTROY", "s", "late"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "2", "1-0", "2-0"]), ints(&[1, 1]));
    });
}

/// DELREF removes the ID from every PEL, even when the entry is already gone.
#[test]
fn xdelex_delref_cleans_every_pel() {
    let s = Server::start();
    both(&s, |c| {
        two_groups_read_both(c);
        assert_eq!(c.cmd(&["XS.DEL", "s", "2-0"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.DELEX", "s", "DELREF", "IDS", "2", "1-0", "2-0"]), ints(&[1, -1]));
        assert_eq!(pending(c, "s", "g1"), 0);
        assert_eq!(pending(c, "s", "g2"), 0);
        let consumers = c.cmd(&["XS.INFO", "CONSUMERS", "s", "g1"]);
        assert_eq!(consumers.as_array()[0].field("pending"), Some(&Reply::Int(0)));
    });
}

// ---- XACKDEL ---------------------------------------------------------------------------------

#[test]
fn xackdel_option_errors_and_missing() {
    let s = Server::start();
    both(&s, |c| {
        two_groups_read_both(c);
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g1", "KEEPREF", "ACKED", "IDS", "1", "1-0"]), err("ERR syntax error"));
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g1", "IDS", "0", "1-0"]), err("ERR Number of IDs must be a positive integer"));
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g1", "IDS", "2", "1-0"]), err("ERR The `numids` parameter must match the number of arguments"));
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g1", "IDS", "1", "1-0", "2-0"]), err("ERR syntax error"));
        let r = c.cmd(&["XS.ACKDEL", "s", "g1", "IDS", "1"]);
        assert_eq!(r, err("ERR wrong number of arguments for 'xs.ackdel' command"));
        // [VT] a missing key or group: -1 per ID, IDs not parsed.
        assert_eq!(c.cmd(&["XS.ACKDEL", "missing", "g1", "IDS", "2", "1-0", "2-0"]), ints(&[-1, -1]));
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "nogroup", "IDS", "2", "1-0", "junk"]), ints(&[-1, -1]));
        // Option errors come before the missing key; WRONGTYPE before both.
        assert_eq!(c.cmd(&["XS.ACKDEL", "missing", "g1", "NOPE", "IDS", "1", "1-0"]), err("ERR syntax error"));
        c.cmd(&["SET", "str", "x"]);
        assert_eq!(
            c.cmd(&["XS.ACKDEL", "str", "g1", "NOPE", "IDS", "1", "1-0"]),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
        // Strict IDs, nothing done on a bad one.
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g1", "IDS", "2", "1-0", "+"]), err("ERR Invalid stream ID specified as stream command argument"));
        assert_eq!(pending(c, "s", "g1"), 2);
    });
}

/// [VT PY] an existing entry that is not pending in the group: -1, not deleted.
#[test]
fn xackdel_not_pending_is_minus_one() {
    let s = Server::start();
    both(&s, |c| {
        c.cmd(&["XS.ADD", "s", "999999-0", "f", "v"]);
        c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]);
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g", "KEEPREF", "IDS", "1", "999999-0"]), ints(&[-1]));
        assert_eq!(xlen(c, "s"), 1);
    });
}

/// [VT] ACKED: g1's acks keep the entries while g2 holds them; g2's acks delete them.
#[test]
fn xackdel_acked_two_groups() {
    let s = Server::start();
    both(&s, |c| {
        two_groups_read_both(c);
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g1", "ACKED", "IDS", "2", "1-0", "2-0"]), ints(&[2, 2]));
        assert_eq!(xlen(c, "s"), 2);
        assert_eq!(pending(c, "s", "g1"), 0);
        assert_eq!(pending(c, "s", "g2"), 2);
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g2", "ACKED", "IDS", "2", "1-0", "2-0"]), ints(&[1, 1]));
        assert_eq!(xlen(c, "s"), 0);
        assert_eq!(pending(c, "s", "g2"), 0);
    });
}

/// [VT] DELREF: g1's XACKDEL empties g2's PEL too; g2's later XACKDEL finds nothing pending.
#[test]
fn xackdel_delref_two_groups() {
    let s = Server::start();
    both(&s, |c| {
        two_groups_read_both(c);
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g1", "DELREF", "IDS", "2", "1-0", "2-0"]), ints(&[1, 1]));
        assert_eq!(xlen(c, "s"), 0);
        assert_eq!(pending(c, "s", "g2"), 0);
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g2", "DELREF", "IDS", "2", "1-0", "2-0"]), ints(&[-1, -1]));
    });
}

/// [VT] KEEPREF: the entries are deleted, g2's PEL keeps both; g2 can still XACKDEL them (1,
/// though the entries are gone).
#[test]
fn xackdel_keepref_two_groups() {
    let s = Server::start();
    both(&s, |c| {
        two_groups_read_both(c);
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g1", "KEEPREF", "IDS", "2", "1-0", "2-0"]), ints(&[1, 1]));
        assert_eq!(xlen(c, "s"), 0);
        assert_eq!(pending(c, "s", "g1"), 0);
        assert_eq!(pending(c, "s", "g2"), 2);
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g2", "IDS", "2", "2-0", "1-0"]), ints(&[1, 1]));
        assert_eq!(pending(c, "s", "g2"), 0);
    });
}

/// [VT] 50 IDs (more than the built-in's 8-slot static vector, CVE-2025-62507), and 5000.
#[test]
fn xackdel_many_ids() {
    let s = Server::start();
    both(&s, |c| {
        for n in [50u64, 5000] {
            c.cmd(&["DEL", "s"]);
            let mut add: Vec<String> = Vec::new();
            for i in 1..=n {
                add.clear();
                add.extend(["XS.ADD".into(), "s".into(), format!("{i}-0"), "f".into(), "v".into()]);
                c.cmd(&add);
            }
            c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]);
            c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
            let mut cmd: Vec<String> = vec!["XS.ACKDEL".into(), "s".into(), "g".into(), "IDS".into(), n.to_string()];
            cmd.extend((1..=n).map(|i| format!("{i}-0")));
            let want: Vec<i64> = vec![1; n as usize];
            assert_eq!(c.cmd(&cmd), ints(&want));
            assert_eq!(xlen(c, "s"), 0);
            let mut cmd: Vec<String> = vec!["XS.DELEX".into(), "s".into(), "IDS".into(), n.to_string()];
            cmd.extend((1..=n).map(|i| format!("{i}-0")));
            assert_eq!(c.cmd(&cmd), ints(&vec![-1; n as usize]));
        }
    });
}

// ---- XADD / XTRIM with a policy ----------------------------------------------------------------

/// [VT] XADD with ACKED trimming: nothing deletable while the group has read nothing; after
/// one read and ack, only that entry goes; after acking everything, down to the MAXLEN.
#[test]
fn xadd_acked_trim() {
    let s = Server::start();
    both(&s, |c| {
        add_n(c, "s", 5);
        c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]);
        assert_eq!(c.cmd(&["XS.ADD", "s", "MAXLEN", "=", "1", "ACKED", "6-0", "f", "v"]).text(), "6-0");
        assert_eq!(xlen(c, "s"), 6);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">"]);
        assert_eq!(c.cmd(&["XS.ACK", "s", "g", "1-0"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.ADD", "s", "MAXLEN", "=", "1", "ACKED", "7-0", "f", "v"]).text(), "7-0");
        assert_eq!(xlen(c, "s"), 6);
        assert_eq!(ids(c, "s")[0], "2-0");
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
        let all: Vec<String> = ids(c, "s");
        let mut ack = vec!["XS.ACK".to_string(), "s".into(), "g".into()];
        ack.extend(all);
        assert_eq!(c.cmd(&ack), Reply::Int(6));
        let id = c.cmd(&["XS.ADD", "s", "MAXLEN", "=", "1", "ACKED", "*", "f", "v"]).text();
        assert_eq!(xlen(c, "s"), 1);
        assert_eq!(ids(c, "s"), [id]);
    });
}

/// The policy may stand anywhere among XADD's options, once; a second one is read as the ID.
#[test]
fn xadd_policy_position_and_repeats() {
    let s = Server::start();
    both(&s, |c| {
        assert_eq!(c.cmd(&["XS.ADD", "s", "KEEPREF", "1-0", "f", "v"]).text(), "1-0");
        assert_eq!(c.cmd(&["XS.ADD", "s", "delref", "NOMKSTREAM", "MAXLEN", "5", "2-0", "f", "v"]).text(), "2-0");
        assert_eq!(c.cmd(&["XS.ADD", "s", "MAXLEN", "~", "5", "Acked", "LIMIT", "10", "3-0", "f", "v"]).text(), "3-0");
        assert!(!c.cmd(&["XS.ADD", "s", "ACKED", "*", "f", "v"]).is_error());
        let bad = err("ERR Invalid stream ID specified as stream command argument");
        assert_eq!(c.cmd(&["XS.ADD", "s", "ACKED", "KEEPREF", "9-0", "f", "v"]), bad);
        assert_eq!(c.cmd(&["XS.ADD", "s", "ACKED", "acked", "9-0", "f", "v"]), bad);
        // NOMKSTREAM with a policy on a missing key: nil.
        assert_eq!(c.cmd(&["XS.ADD", "nokey", "NOMKSTREAM", "ACKED", "*", "f", "v"]), Reply::Nil);
        assert_eq!(xlen(c, "s"), 4);
    });
}

/// XTRIM's policy: after the strategy or before it, once; still needs a strategy.
#[test]
fn xtrim_policy_parsing() {
    let s = Server::start();
    both(&s, |c| {
        add_n(c, "s", 4);
        assert_eq!(c.cmd(&["XS.TRIM", "s", "ACKED", "LIMIT", "0"]), err("ERR syntax error, XTRIM must be called with a trimming strategy"));
        assert_eq!(c.cmd(&["XS.TRIM", "s", "MAXLEN", "2", "ACKED", "DELREF"]), err("ERR syntax error"));
        assert_eq!(c.cmd(&["XS.TRIM", "s", "KEEPREF", "MAXLEN", "2", "KEEPREF"]), err("ERR syntax error"));
        assert_eq!(
            c.cmd(&["XS.TRIM", "s", "MAXLEN", "1", "DELREF", "LIMIT", "1"]),
            err("ERR syntax error, LIMIT cannot be used without the special ~ option")
        );
        assert_eq!(c.cmd(&["XS.TRIM", "s", "DELREF", "MAXLEN", "3"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.TRIM", "missing", "ACKED", "MAXLEN", "3"]), Reply::Int(0));
    });
}

/// [VT PY] XTRIM MAXLEN 2 with each policy on 4 entries and no groups: 2 each time.
#[test]
fn xtrim_policies_without_groups() {
    let s = Server::start();
    both(&s, |c| {
        for p in ["KEEPREF", "DELREF", "ACKED"] {
            c.cmd(&["DEL", "s"]);
            add_n(c, "s", 4);
            assert_eq!(c.cmd(&["XS.TRIM", "s", "MAXLEN", "2", p]), Reply::Int(2), "{p}");
            assert_eq!(ids(c, "s"), ["3-0", "4-0"], "{p}");
        }
    });
}

/// Five entries in nodes of two (1-0 2-0 | 3-0 4-0 | 5-0), all delivered to one group.
fn five_in_nodes_of_two(c: &mut Conn, read: &str) {
    set_node_limits(c, 2, 0, true);
    add_n(c, "s", 5);
    c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "COUNT", read, "STREAMS", "s", ">"]);
}

/// [VT] nodes of two, all read, 1-0 2-0 4-0 acked: `MINID ~ 6-0 ACKED` deletes 3 (the walk
/// goes on past the partly kept node 3-0 4-0), leaving 3-0 and 5-0.
#[test]
fn xtrim_minid_approx_acked() {
    let s = spec_level();
    both(&s, |c| {
        five_in_nodes_of_two(c, "5");
        assert_eq!(c.cmd(&["XS.ACK", "s", "g", "1-0", "2-0", "4-0"]), Reply::Int(3));
        assert_eq!(c.cmd(&["XS.TRIM", "s", "MINID", "~", "6-0", "ACKED"]), Reply::Int(3));
        assert_eq!(ids(c, "s"), ["3-0", "5-0"]);
        assert_eq!(pending(c, "s", "g"), 2);
        let info = c.cmd(&["XS.INFO", "STREAM", "s"]);
        assert_eq!(info.field("radix-tree-keys"), Some(&Reply::Int(2)));
        set_node_limits(c, 100, 4096, true);
    });
}

/// [VT] nodes of two, 1-0..4-0 read and pending: `MINID ~ 5-0 DELREF` deletes the two eligible
/// nodes' 4 entries and their PEL entries (XPENDING summary `0 nil nil nil`).
#[test]
fn xtrim_minid_approx_delref() {
    let s = spec_level();
    both(&s, |c| {
        five_in_nodes_of_two(c, "4");
        assert_eq!(c.cmd(&["XS.TRIM", "s", "MINID", "~", "5-0", "DELREF"]), Reply::Int(4));
        assert_eq!(ids(c, "s"), ["5-0"]);
        assert_eq!(c.cmd(&["XS.PENDING", "s", "g"]), Reply::Array(vec![Reply::Int(0), Reply::Nil, Reply::Nil, Reply::Nil]));
        set_node_limits(c, 100, 4096, true);
    });
}

/// KEEPREF keeps the 7.x walk: `~` stops at the first node it cannot drop whole; ACKED with an
/// exact MAXLEN skips a referenced entry and deletes a newer one.
#[test]
fn xtrim_keepref_and_exact_acked() {
    let s = Server::start();
    both(&s, |c| {
        five_in_nodes_of_two(c, "5");
        assert_eq!(c.cmd(&["XS.TRIM", "s", "MINID", "~", "4-0", "KEEPREF"]), Reply::Int(2));
        assert_eq!(ids(c, "s"), ["3-0", "4-0", "5-0"]);
        assert_eq!(pending(c, "s", "g"), 5);
        // 3-0 pending, 4-0 and 5-0 acked: MAXLEN = 2 ACKED deletes 4-0, keeps 3-0.
        assert_eq!(c.cmd(&["XS.ACK", "s", "g", "4-0", "5-0"]), Reply::Int(2));
        assert_eq!(c.cmd(&["XS.TRIM", "s", "MAXLEN", "=", "2", "ACKED"]), Reply::Int(1));
        assert_eq!(ids(c, "s"), ["3-0", "5-0"]);
        set_node_limits(c, 100, 4096, true);
    });
}

/// [VT] ACKED still works after DEBUG RELOAD (the references come from the loaded PELs).
#[test]
fn acked_after_debug_reload() {
    let s = Server::start();
    both(&s, |c| {
        two_groups_read_both(c);
        assert_eq!(c.cmd(&["XS.ACK", "s", "g1", "1-0", "2-0"]), Reply::Int(2));
        assert_eq!(c.cmd(&["XS.ACK", "s", "g2", "1-0"]), Reply::Int(1));
        assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), ok());
        assert_eq!(c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "2", "1-0", "2-0"]), ints(&[1, 2]));
        assert_eq!(c.cmd(&["XS.TRIM", "s", "MAXLEN", "0", "ACKED"]), Reply::Int(0));
        assert_eq!(c.cmd(&["XS.ACKDEL", "s", "g2", "ACKED", "IDS", "1", "2-0"]), ints(&[1]));
        assert_eq!(xlen(c, "s"), 0);
    });
}

// ---- events, propagation, persistence ----------------------------------------------------------

/// Keyspace events: XDELEX / XACKDEL `xdel` only when something was deleted; XADD / XTRIM with a
/// policy `xadd` and `xtrim` as without.
#[test]
fn policy_keyspace_events() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]), ok());
    let mut sub = s.conn();
    sub.cmd(&["SUBSCRIBE", "done"]);
    sub.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    two_groups_read_both(&mut c);
    c.cmd(&["XS.ACKDEL", "s", "g1", "ACKED", "IDS", "1", "1-0"]); // ack only
    c.cmd(&["XS.DELEX", "s", "ACKED", "IDS", "1", "1-0"]); // referenced: nothing
    c.cmd(&["XS.DELEX", "s", "IDS", "1", "7-0"]); // not found
    c.cmd(&["XS.ACKDEL", "s", "g2", "ACKED", "IDS", "1", "1-0"]); // deleted
    c.cmd(&["XS.DELEX", "s", "DELREF", "IDS", "1", "2-0"]); // deleted
    c.cmd(&["XS.ADD", "s", "ACKED", "MAXLEN", "0", "3-0", "f", "v"]); // xadd; 3-0 not yet delivered
    c.cmd(&["XS.TRIM", "s", "MAXLEN", "0", "ACKED"]); // still referenced: nothing
    c.cmd(&["XS.TRIM", "s", "MAXLEN", "0", "DELREF"]); // xtrim
    c.cmd(&["PUBLISH", "done", "1"]);
    let events: Vec<String> =
        read_events_until_message(&mut sub).into_iter().map(|(ch, _)| ch.trim_start_matches("__keyevent@0__:").to_string()).collect();
    let relevant: Vec<&str> = events.iter().map(String::as_str).filter(|e| ["xdel", "xadd", "xtrim"].contains(e)).collect();
    // two_groups_read_both's two XADDs, then ours.
    assert_eq!(relevant, ["xadd", "xadd", "xdel", "xdel", "xadd", "xtrim"], "all events: {events:?}");
}

fn digest(c: &mut Conn, key: &str) -> Vec<u8> {
    c.raw(&["DEBUG", "DIGEST-VALUE", key])
}

/// A workload of every policy command on a primary: the replica (live stream), an AOF restart,
/// DEBUG RELOAD and DUMP/RESTORE end with the same digests and group state.
#[test]
fn policies_replicate_and_persist() {
    let mut primary = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "no").start();
    let replica = Server::replica_of(&primary);
    let mut c = primary.conn();
    let mut rng = Rng::from_env("policies_replicate_and_persist");
    let keys = ["p0", "p1", "p2"];
    for key in keys {
        for i in 1..=60u64 {
            let policy = *rng.pick(&["KEEPREF", "DELREF", "ACKED"]);
            let r = c.cmd(&["XS.ADD", key, policy, "MAXLEN", "~", "40", &format!("{i}-1"), "f", &i.to_string()]);
            assert!(!r.is_error(), "{r}");
        }
        for g in ["ga", "gb", "gc"] {
            c.cmd(&["XS.GROUP", "CREATE", key, g, "0"]);
        }
        for round in 0..30 {
            let g = *rng.pick(&["ga", "gb", "gc"]);
            let count = rng.range(1, 6).to_string();
            c.cmd(&["XS.READGROUP", "GROUP", g, "c1", "COUNT", &count, "STREAMS", key, ">"]);
            let id = format!("{}-1", rng.range(1, 61));
            let id2 = format!("{}-1", rng.range(1, 61));
            let policy = *rng.pick(&["KEEPREF", "DELREF", "ACKED"]);
            let r = match round % 4 {
                0 => c.cmd(&["XS.ACKDEL", key, g, policy, "IDS", "2", &id, &id2]),
                1 => c.cmd(&["XS.DELEX", key, policy, "IDS", "2", &id, &id2]),
                2 => c.cmd(&["XS.ACK", key, g, &id, &id2]),
                _ => c.cmd(&["XS.TRIM", key, "MAXLEN", "=", &rng.range(20, 40).to_string(), policy]),
            };
            assert!(!r.is_error(), "{r}");
        }
    }
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    // Per key: the snapshot, and per group its last ID, entries-read and the pending IDs of
    // entries still in the stream: what an AOF rewrite (which rebuilds nodes and consumers, and,
    // as the built-in's, drops PEL entries whose entry is gone: XCLAIM FORCE skips them) keeps.
    let groups_of = |c: &mut Conn, k: &str| -> Vec<String> {
        let mut out = Vec::new();
        for g in c.cmd(&["XS.INFO", "GROUPS", k]).as_array() {
            for f in ["name", "last-delivered-id", "entries-read"] {
                out.push(format!("{f}={}", g.field(f).map_or("?".into(), |v| if v.is_nil() { "nil".into() } else { v.text() })));
            }
        }
        for g in ["ga", "gb", "gc"] {
            if let Reply::Array(v) = c.cmd(&["XS.PENDING", k, g, "-", "+", "10000"]) {
                for e in v {
                    let id = e.as_array()[0].text();
                    if c.cmd(&["XS.RANGE", k, &id, &id]).as_array().len() == 1 {
                        out.push(format!("{g} pending {id}"));
                    }
                }
            }
        }
        out
    };
    let snaps: Vec<(KeySnap, Vec<String>)> = keys.iter().map(|k| (snap(&mut c, true, k), groups_of(&mut c, k))).collect();
    let mut rc = replica.conn();
    for (k, (sn, _)) in keys.iter().zip(&snaps) {
        assert_eq!(digest(&mut rc, k), sn.digest, "replica digest of {k}");
        assert_eq!(snap(&mut rc, true, k), *sn, "replica snapshot of {k}");
    }
    // DUMP / RESTORE.
    for (k, (sn, _)) in keys.iter().zip(&snaps) {
        let payload = match c.cmd(&["DUMP", k]) {
            Reply::Bulk(b) => b,
            other => panic!("DUMP {k}: {other}"),
        };
        let copy = format!("restored-{k}");
        assert_eq!(c.cmd(&[b"RESTORE".as_slice(), copy.as_bytes(), b"0", &payload]), ok());
        assert_eq!(digest(&mut c, &copy), sn.digest, "RESTORE of {k}");
        c.cmd(&["DEL", &copy]);
    }
    // DEBUG RELOAD.
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), ok());
    for (k, (sn, _)) in keys.iter().zip(&snaps) {
        assert_eq!(snap(&mut c, true, k), *sn, "DEBUG RELOAD of {k}");
    }
    // The AOF (commands as propagated, no RDB preamble) replayed at restart.
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    drop(c);
    primary.restart();
    let mut c = primary.conn();
    for (k, (sn, _)) in keys.iter().zip(&snaps) {
        assert_eq!(snap(&mut c, true, k), *sn, "AOF restart of {k}");
    }
    // An AOF rewrite (no RDB preamble: the module's own rewrite commands) and a restart.
    assert!(!c.cmd(&["BGREWRITEAOF"]).is_error());
    wait_persistence_idle(&mut c, Duration::from_secs(60));
    assert!(c.cmd(&["INFO", "persistence"]).text().contains("aof_last_bgrewrite_status:ok"));
    drop(c);
    primary.restart();
    let mut c = primary.conn();
    for (k, (sn, groups)) in keys.iter().zip(&snaps) {
        let after = snap(&mut c, true, k);
        // A rewrite rebuilds the nodes (and so the digest and XINFO's radix-tree counters).
        assert_eq!((&after.range, &after.len), (&sn.range, &sn.len), "AOF rewrite of {k}");
        assert_eq!(&groups_of(&mut c, k), groups, "AOF rewrite of {k}: groups and PELs");
    }
}

// ---- command table and takeover ----------------------------------------------------------------

/// COMMAND INFO: arity, flags, first/last/step and key specs as xdelex.json / xackdel.json
/// (XACKDEL's `RW UPDATE DELETE` is `RW DELETE` for a module: the module API allows only one of
/// INSERT / UPDATE / DELETE; the ACL permission is the same).
#[test]
fn command_info_of_the_new_commands() {
    let s = Server::start();
    let mut c = s.conn();
    for (name, arity) in [("xs.delex", -5), ("xs.ackdel", -6)] {
        let info = c.cmd(&["COMMAND", "INFO", name]);
        let row = info.as_array()[0].as_array();
        assert_eq!(row[0].text(), name);
        assert_eq!(row[1], Reply::Int(arity), "{name} arity");
        let flags: Vec<String> = row[2].as_array().iter().map(|f| f.text()).collect();
        assert!(flags.contains(&"write".to_string()) && flags.contains(&"fast".to_string()), "{name}: {flags:?}");
        assert!(!flags.contains(&"denyoom".to_string()), "{name}: {flags:?}");
        assert_eq!(&row[3..6], &[Reply::Int(1), Reply::Int(1), Reply::Int(1)], "{name} key positions");
        let specs = format!("{}", row[8]);
        assert!(specs.contains("RW") && specs.to_lowercase().contains("delete"), "{name} key specs: {specs}");
        let keys = c.cmd(&["COMMAND", "GETKEYS", name, "k", "g", "IDS", "1", "1-0"]);
        assert_eq!(keys, Reply::Array(vec![Reply::Bulk(b"k".to_vec())]));
    }
}

/// In takeover mode XDELEX / XACKDEL reach the module on every host (also where the built-in
/// lacks them), their errors name the standard command, and they replicate to a replica as the
/// module's commands.
#[test]
fn takeover_serves_xdelex_and_xackdel() {
    let primary = Server::builder().module_args(&["takeover", "yes"]).start();
    let replica = Server::replica_of(&primary);
    let mut c = primary.conn();
    let has_builtin = matches!(c.cmd(&["COMMAND", "INFO", "xdelex"]).as_array().first(), Some(Reply::Array(_)));
    for proto in [2, 3] {
        if proto == 3 {
            c.hello3();
        }
        c.cmd(&["FLUSHALL"]);
        for i in 1..=3 {
            c.cmd(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
        }
        assert_eq!(c.cmd(&["TYPE", "s"]), Reply::Simple("stream".into()));
        c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
        c.cmd(&["XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">"]);
        assert_eq!(c.cmd(&["xdelex", "s", "ACKED", "IDS", "3", "1-0", "3-0", "9-0"]), ints(&[2, 2, 2]));
        assert_eq!(c.cmd(&["XAckDel", "s", "g", "ACKED", "IDS", "2", "1-0", "3-0"]), ints(&[1, -1]));
        assert_eq!(c.cmd(&["XDELEX", "s", "DELREF", "IDS", "1", "2-0"]), ints(&[1]));
        assert_eq!(c.cmd(&["XLEN", "s"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XTRIM", "s", "MAXLEN", "0", "ACKED"]), Reply::Int(0));
        assert_eq!(c.cmd(&["XADD", "s", "KEEPREF", "MAXLEN", "0", "4-0", "f", "v"]).text(), "4-0");
        assert_eq!(c.cmd(&["XLEN", "s"]), Reply::Int(0));
        // The arity error: Redis checks the arity of the command the filter chose. Where the
        // host has no XDELEX, that is XS.DELEX, so the text names it (docs/redis8.md).
        let want = if has_builtin { "xdelex" } else { "xs.delex" };
        assert_eq!(c.cmd(&["XDELEX", "s", "IDS", "1"]), err(&format!("ERR wrong number of arguments for '{want}' command")));
        // In MULTI and from a script too.
        c.cmd(&["XADD", "t", "1-0", "f", "v"]);
        c.cmd(&["MULTI"]);
        c.cmd(&["XDELEX", "t", "IDS", "1", "1-0"]);
        assert_eq!(c.cmd(&["EXEC"]), Reply::Array(vec![ints(&[1])]));
        c.cmd(&["XADD", "t", "2-0", "f", "v"]);
        let r = c.cmd(&["EVAL", "return redis.call('XDELEX', KEYS[1], 'IDS', '1', '2-0')", "1", "t"]);
        assert_eq!(r, ints(&[1]));
    }
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    c.hello2();
    let mut rc = replica.conn();
    assert_eq!(digest(&mut rc, "s"), digest(&mut c, "s"));
    assert_eq!(rc.cmd(&["XINFO", "GROUPS", "s"]), c.cmd(&["XINFO", "GROUPS", "s"]));
    assert_eq!(rc.cmd(&["EXISTS", "t"]), c.cmd(&["EXISTS", "t"]));
}

/// DELREF / ACKED trims delete what the node layout lets them reach (`~` works by nodes; an
/// exact ACKED MAXLEN stops after the first node it cannot drop), and node limits are not
/// replicated: the primary sends the exact trim that deletes the same entries on any layout. A
/// replica with other node limits ends with the same entries and PELs.
#[test]
fn policy_trims_replicate_across_node_layouts() {
    let primary = spec_level();
    let replica = Server::replica_of(&primary);
    let mut c = primary.conn();
    let mut rc = replica.conn();
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.node-max-entries", "3"]), ok());
    assert_eq!(rc.cmd(&["CONFIG", "SET", "xstream.node-max-entries", "7"]), ok());
    // Nodes of three on the primary: 1-0 2-0 3-0 | 4-0 5-0 6-0, one node on the replica. With
    // 2-0 pending, `MINID ~ 7-0 ACKED` deletes 1-0 3-0 4-0 5-0 6-0 on the primary, whose first
    // entry is then the tombstone 1-0: sent as `MINID = 1-0 ACKED` it would delete nothing.
    for i in 1..=6 {
        c.cmd(&["XS.ADD", "fixed", &format!("{i}-0"), "f", "v"]);
    }
    c.cmd(&["XS.GROUP", "CREATE", "fixed", "g", "0"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "fixed", ">"]);
    assert_eq!(c.cmd(&["XS.ACK", "fixed", "g", "1-0", "3-0", "4-0", "5-0", "6-0"]), Reply::Int(5));
    assert_eq!(c.cmd(&["XS.TRIM", "fixed", "MINID", "~", "7-0", "ACKED"]), Reply::Int(5));
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_eq!(rc.raw(&["XS.RANGE", "fixed", "-", "+"]), c.raw(&["XS.RANGE", "fixed", "-", "+"]));
    assert_eq!(rc.cmd(&["XS.LEN", "fixed"]), Reply::Int(1));
    let mut rng = Rng::from_env("policy_trims_replicate_across_node_layouts");
    let mut next = 1u64;
    for round in 0..400 {
        let key = if round % 2 == 0 { "a" } else { "b" };
        let policy = *rng.pick(&["DELREF", "ACKED", "ACKED"]);
        let approx = if rng.pct(60) { "~" } else { "=" };
        let trim: Vec<String> = if rng.pct(50) {
            vec!["MAXLEN".into(), approx.into(), rng.range(0, 30).to_string()]
        } else {
            vec!["MINID".into(), approx.into(), format!("{}-0", next.saturating_sub(rng.range(0, 40)))]
        };
        match rng.below(6) {
            0 | 1 => {
                let mut cmd: Vec<String> = vec!["XS.ADD".into(), key.into()];
                if rng.pct(40) {
                    cmd.push(policy.into());
                    cmd.extend(trim);
                    if approx == "~" && rng.pct(30) {
                        cmd.extend(["LIMIT".into(), rng.range(1, 10).to_string()]);
                    }
                }
                cmd.extend([format!("{next}-0"), "f".into(), "v".into()]);
                next += 1;
                let r = c.cmd(&cmd);
                assert!(!r.is_error(), "{r}");
            }
            2 => {
                let mut cmd: Vec<String> = vec!["XS.TRIM".into(), key.into()];
                cmd.extend(trim);
                cmd.push(policy.into());
                let r = c.cmd(&cmd);
                assert!(!r.is_error(), "{} -> {r}", cmd.join(" "));
            }
            3 => {
                if c.cmd(&["EXISTS", key]) == Reply::Int(1) {
                    let g = *rng.pick(&["g1", "g2"]);
                    c.cmd(&["XS.GROUP", "CREATE", key, g, "0"]);
                    c.cmd(&["XS.READGROUP", "GROUP", g, "c", "COUNT", &rng.range(1, 8).to_string(), "STREAMS", key, ">"]);
                }
            }
            _ => {
                let g = *rng.pick(&["g1", "g2"]);
                let p = c.cmd(&["XS.PENDING", key, g, "-", "+", "5"]);
                if let Reply::Array(v) = p {
                    for e in v.iter().filter(|_| rng.pct(70)) {
                        c.cmd(&["XS.ACK", key, g, &e.as_array()[0].text()]);
                    }
                }
            }
        }
    }
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    for key in ["a", "b"] {
        assert_eq!(rc.raw(&["XS.RANGE", key, "-", "+"]), c.raw(&["XS.RANGE", key, "-", "+"]), "entries of {key}");
        for g in ["g1", "g2"] {
            // (ID, consumer, delivery count) of every pending entry: not the idle time, which
            // the two servers are asked at different moments (comparing the raw replies' lengths
            // failed when one idle time had a digit more than the other's).
            let ids = |c: &mut Conn| -> Vec<(String, String, i64)> {
                match c.cmd(&["XS.PENDING", key, g, "-", "+", "10000"]) {
                    Reply::Array(v) => v.iter().map(|e| (e.as_array()[0].text(), e.as_array()[1].text(), e.as_array()[3].as_int())).collect(),
                    _ => Vec::new(),
                }
            };
            assert_eq!(ids(&mut rc), ids(&mut c), "PEL of {g} on {key}");
        }
        assert_eq!(rc.raw(&["XS.INFO", "GROUPS", key]), c.raw(&["XS.INFO", "GROUPS", key]), "groups of {key}");
        assert_ne!(rc.cmd(&["XS.INFO", "STREAM", key]).field("radix-tree-keys"), None,);
    }
}

/// Level 8.2 (what `compat host` selects on Redis 8.2.x) answers the approximate DELREF / ACKED
/// trims of the two [VT] examples above as Redis 8.2.3's built-in does (measured on 8.2.3:
/// `MINID ~ 6-0 ACKED` and `MINID ~ 5-0 DELREF` delete nothing; the exact form deletes); where
/// the host is 8.2 itself, the same commands go to its built-in and the replies must agree.
#[test]
fn approx_ref_trims_at_level_8_2() {
    let s = Server::builder().module_args(&["compat", "8.2"]).start();
    let native = s.conn().cmd(&["COMMAND", "INFO", "XDELEX"]).as_array().first().is_some_and(|r| !r.is_nil());
    both(&s, |c| {
        let run = |c: &mut Conn, p: &str| -> Vec<Reply> {
            let cmd = |n: &str| format!("{p}{n}");
            let mut out = Vec::new();
            set_node_limits(c, 2, 0, true);
            for i in 1..=5 {
                c.cmd(&[&cmd("ADD"), "a", &format!("{i}-0"), "f", "v"]);
                c.cmd(&[&cmd("ADD"), "d", &format!("{i}-0"), "f", "v"]);
            }
            for (k, n) in [("a", "5"), ("d", "4")] {
                c.cmd(&[&cmd("GROUP"), "CREATE", k, "g", "0"]);
                c.cmd(&[&cmd("READGROUP"), "GROUP", "g", "c", "COUNT", n, "STREAMS", k, ">"]);
            }
            out.push(c.cmd(&[&cmd("ACK"), "a", "g", "1-0", "2-0", "4-0"]));
            out.push(c.cmd(&[&cmd("TRIM"), "a", "MINID", "~", "6-0", "ACKED"]));
            out.push(c.cmd(&[&cmd("LEN"), "a"]));
            out.push(c.cmd(&[&cmd("TRIM"), "d", "MINID", "~", "5-0", "DELREF"]));
            out.push(c.cmd(&[&cmd("LEN"), "d"]));
            out.push(c.cmd(&[&cmd("TRIM"), "d", "MINID", "=", "5-0", "DELREF"]));
            out.push(c.cmd(&[&cmd("PENDING"), "d", "g"]));
            out.push(c.cmd(&[&cmd("TRIM"), "a", "MINID", "=", "6-0", "ACKED"]));
            out.push(c.cmd(&[&cmd("RANGE"), "a", "-", "+"]).as_array().len().try_into().map(Reply::Int).unwrap_or(Reply::Nil));
            c.cmd(&["DEL", "a", "d"]);
            set_node_limits(c, 100, 4096, true);
            out
        };
        let module = run(c, "XS.");
        let pend0 = Reply::Array(vec![Reply::Int(0), Reply::Nil, Reply::Nil, Reply::Nil]);
        let want = [3, 0, 5, 0, 5, 4].map(Reply::Int).into_iter().chain([pend0, Reply::Int(3), Reply::Int(2)]).collect::<Vec<_>>();
        assert_eq!(module, want);
        if native {
            assert_eq!(run(c, "X"), module, "the host's built-in");
        }
    });
}
