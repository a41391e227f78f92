//! Fixed sequences found by fuzzing or by reading t_stream.c, each run against the built-in
//! (DB 0) and the module (DB 1) on one server, in RESP2 and RESP3: every reply compared
//! byte for byte, and the dirty counter (`rdb_changes_since_last_save`, what `save <s> <n>`
//! counts) compared after every command.
//!
//! - An explicit maximal ID in XREADGROUP is `>` (the built-in stores `>` as
//!   UINT64_MAX-UINT64_MAX and tells them apart by value only).
//! - XDEL of an entry that follows a tombstone with a higher ID in its node (XSETID below a
//!   deleted ID, allowed by 7.0): the built-in's iterator passes over tombstones.
//! - The dirty counter of every stream command on Redis 7.0: one change per XREADGROUP stream
//!   served and per consumer created, per entry deleted (XDEL, XTRIM), acknowledged (XACK) or
//!   claimed (XCLAIM, XAUTOCLAIM).
//!
//! Clock fields never appear: no XINFO CONSUMERS, STREAM FULL or extended XPENDING here.

mod common;

use common::*;

const MAX: &str = "18446744073709551615-18446744073709551615";

/// Runs `steps` (built-in spelling) in DB 0 with the built-in commands and in DB 1 with the
/// module's (the same key names on both sides, so replies that name keys compare as they are),
/// comparing the replies and how much each step moves the server's dirty counter.
fn same_on_both(server: &Server, title: &str, steps: &[&str]) {
    for resp3 in [false, true] {
        let mut sides = [server.conn(), server.conn()];
        for (db, c) in sides.iter_mut().enumerate() {
            if resp3 {
                c.hello3();
            }
            assert_eq!(c.cmd(&["SELECT", &db.to_string()]), Reply::Simple("OK".into()));
            c.cmd(&["FLUSHDB"]);
        }
        let resp = if resp3 { 3 } else { 2 };
        for step in steps {
            let mut replies = Vec::new();
            let mut moves = Vec::new();
            for (module, c) in [false, true].into_iter().zip(sides.iter_mut()) {
                let args: Vec<String> =
                    step.split(' ').enumerate().map(|(i, a)| if i == 0 && a.starts_with('X') { xcmd(module, a) } else { a.to_string() }).collect();
                let before = dirty(c);
                let raw = c.raw(&args);
                moves.push(dirty(c) - before);
                replies.push(raw);
            }
            assert_eq!(escape(&replies[0]), escape(&replies[1]), "{title} (RESP{resp}): `{step}`: built-in vs module");
            assert_eq!(
                moves[0], moves[1],
                "{title} (RESP{resp}): `{step}`: dirty counter moved +{} on the built-in, +{} on the module",
                moves[0], moves[1]
            );
        }
    }
}

fn server() -> Server {
    let s = Server::start();
    let mut c = s.conn();
    set_node_limits(&mut c, 4, 4096, true);
    s
}

#[test]
fn xreadgroup_maximal_id_is_new_entries() {
    let s = server();
    let max_read = format!("XREADGROUP GROUP g3 c2 COUNT 10 NOACK STREAMS k {MAX}");
    same_on_both(
        &s,
        "reproducer 1 (nothing new: nil, no consumer)",
        &["XADD k MINID = 15-6 18-1 f1 v90 f3 v45 f1 v49", "XGROUP CREATE k g3 $ ENTRIESREAD -1", &max_read, "XINFO GROUPS k"],
    );
    let max_read = format!("XREADGROUP GROUP g3 c2 COUNT 3 STREAMS k {MAX}");
    same_on_both(
        &s,
        "reproducer 2 (new entries delivered)",
        &["XADD k 90 f2 v67", "XGROUP CREATE k g3 0", &max_read, "XINFO GROUPS k", "XPENDING k g3", "XADD k 91 f2 v68", &max_read, "XPENDING k g3"],
    );
    // The maximal ID written with a missing sequence, or as ms-max, is a history read.
    same_on_both(
        &s,
        "near-maximal IDs stay history reads",
        &[
            "XADD k 1 a 1",
            "XGROUP CREATE k g 0",
            "XREADGROUP GROUP g c STREAMS k >",
            "XREADGROUP GROUP g c STREAMS k 18446744073709551615",
            "XREADGROUP GROUP g c STREAMS k 18446744073709551615-18446744073709551614",
            "XREADGROUP GROUP g c STREAMS k 0-0",
            "XREADGROUP GROUP g c STREAMS k 18446744073709551614-18446744073709551615",
        ],
    );
}

#[test]
fn dirty_counter_matches_the_builtin() {
    let s = server();
    same_on_both(
        &s,
        "XREADGROUP",
        &[
            "XADD k 1-1 a 1",
            "XADD k 1-2 b 2",
            "XADD k 1-3 c 3",
            "XGROUP CREATE k g 0",
            // A new consumer, two entries delivered.
            "XREADGROUP GROUP g alice COUNT 2 STREAMS k >",
            // An existing consumer, one entry.
            "XREADGROUP GROUP g alice COUNT 2 STREAMS k >",
            // Nothing new: not served.
            "XREADGROUP GROUP g alice STREAMS k >",
            // History reads, existing consumer and a new one.
            "XREADGROUP GROUP g alice STREAMS k 0",
            "XREADGROUP GROUP g bob STREAMS k 0",
            // A history read that finds a deleted entry.
            "XDEL k 1-2",
            "XREADGROUP GROUP g alice STREAMS k 0",
            // NOACK, new consumer and existing one.
            "XADD k 2-1 d 4",
            "XADD k 2-2 e 5",
            "XREADGROUP GROUP g carol NOACK COUNT 1 STREAMS k >",
            "XREADGROUP GROUP g carol NOACK STREAMS k >",
            "XINFO STREAM k",
        ],
    );
    same_on_both(
        &s,
        "XACK, XCLAIM, XAUTOCLAIM, XGROUP",
        &[
            "XADD k 1-1 a 1",
            "XADD k 1-2 b 2",
            "XADD k 1-3 c 3",
            "XADD k 1-4 d 4",
            "XGROUP CREATE k g 0",
            "XREADGROUP GROUP g alice STREAMS k >",
            "XACK k g 1-1 1-2 9-9",
            "XACK k g 1-1",
            // Claimed by a consumer that does not exist yet: created, 2 claimed.
            "XCLAIM k g dave 0 1-3 1-4 JUSTID",
            // LASTID moves the group without claiming anything.
            "XCLAIM k g dave 0 7-7 LASTID 9-9",
            "XDEL k 1-4",
            "XAUTOCLAIM k g erin 0 0 COUNT 10",
            "XAUTOCLAIM k g erin 0 0 COUNT 10",
            "XGROUP CREATECONSUMER k g frank",
            "XGROUP CREATECONSUMER k g frank",
            "XGROUP DELCONSUMER k g frank",
            "XGROUP DELCONSUMER k g nobody",
            "XGROUP SETID k g 0 ENTRIESREAD 0",
            "XGROUP CREATE k g2 $",
            "XGROUP DESTROY k g2",
            "XGROUP DESTROY k g2",
            "XGROUP CREATE k2 g $ MKSTREAM",
            "XINFO STREAM k",
        ],
    );
    same_on_both(
        &s,
        "XADD, XDEL, XTRIM, XSETID",
        &[
            "XADD k 1-1 a 1",
            "XADD k 1-2 a 1",
            "XADD k 1-3 a 1",
            "XADD k 1-4 a 1",
            "XADD k 1-5 a 1",
            "XADD k 1-6 a 1",
            "XADD k 1-7 a 1",
            "XADD k 1-8 a 1",
            "XADD k 1-9 a 1",
            "XADD k MAXLEN = 7 2-1 a 1",
            "XADD k NOMKSTREAM 2-2 a 1",
            "XADD k 0-1 a 1",
            "XDEL k 1-4 1-5 1-6 1-1",
            "XDEL k 1-4",
            "XTRIM k MAXLEN = 2",
            "XTRIM k MAXLEN ~ 0",
            "XTRIM k MINID = 9",
            "XSETID k 5-5",
            "XLEN k",
        ],
    );
}

#[test]
fn xdel_after_xsetid_below_a_tombstone() {
    let s = server();
    same_on_both(
        &s,
        "XDEL past an out-of-order tombstone",
        &[
            "XADD k 0-1 f a",
            "XADD k 3-* f 12",
            "XDEL k 3-0",
            "XSETID k 1-0 ENTRIESADDED 1",
            "XADD k 1-3 f x",
            "XADD k 2-18446744073709551615 g 256",
            "XRANGE k - +",
            "XDEL k 1-0 2-18446744073709551615",
            "XRANGE k - +",
            "XDEL k 1-3",
            "XINFO STREAM k",
            "XDEL k 0-1",
            "XLEN k",
        ],
    );
}

/// One command adds at most 32 changes beyond its propagation (each costs a command lookup
/// through the module API: see `Ctx::add_dirty`), so a trim of 1,000 entries counts 1 + 32 on
/// the module where the built-in counts 1,000. Documented in the README.
#[test]
fn dirty_counter_saturates_on_huge_deletions() {
    let s = server();
    let mut c = s.conn();
    for (add, trim, key, expect) in [("XADD", "XTRIM", "n", 1000), ("XS.ADD", "XS.TRIM", "m", 33)] {
        for i in 1..=1000 {
            c.cmd(&[add, key, &format!("{i}-1"), "f", "v"]);
        }
        let before = dirty(&mut c);
        assert_eq!(c.cmd(&[trim, key, "MAXLEN", "=", "0"]), Reply::Int(1000));
        assert_eq!(dirty(&mut c) - before, expect, "{trim}");
    }
}
