//! Hostile inputs from COMPAT.md §6 (issue 8), each compared with the built-in twin on the
//! same server: the built-in runs in DB 0, the module in DB 1, with the same key names, so the
//! replies must be byte-identical (after mapping `xs.add` -> `xadd` in error texts), except for
//! clock-dependent fields (idle times, delivery and seen times), which are masked.
//! Each test also checks that PING answers and that `INFO memory` stays bounded.
//!
//! Sizes (env): `XSTREAM_HOSTILE_FIELDS` (field pairs in one XS.ADD, default 1,000,000),
//! `XSTREAM_HOSTILE_GROUPS` (groups and consumers, default 100,000),
//! `XSTREAM_HOSTILE_NAME_MB` (consumer / group name size, default 64; `make soak`: 512).

mod common;
#[path = "common/twin.rs"]
mod twin;

use common::*;
use std::time::{Duration, Instant};
use twin::*;

/// Fills `k` on both sides: `n` entries `1-1 .. n-1` with two fields, a group `g` that has read
/// everything with consumer `c` (all in the PEL).
fn fill(t: &mut Twin, k: &str, n: usize) {
    for i in 1..=n {
        t.same(&["XADD", k, &format!("{i}-1"), "f", &i.to_string(), "g", "x"]);
    }
    t.same(&["XGROUP", "CREATE", k, "g", "0"]);
    t.same(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", k, ">"]);
}

// =============================================================================================

#[test]
fn autoclaim_count_overflow() {
    let mut t = Twin::start();
    fill(&mut t, "k", 20);
    let r = t.same(&["XAUTOCLAIM", "k", "g", "c2", "0", "0-0", "COUNT", "8070450532247928833"]);
    assert_eq!(r, Reply::Error("ERR COUNT must be > 0".into()));
    for count in [
        "0",
        "-1",
        "1",
        "3",
        "922337203685477580",
        "922337203685477581",
        "8070450532247928833",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "18446744073709551615",
        "1.5",
        "abc",
        "",
    ] {
        t.same(&["XAUTOCLAIM", "k", "g", "c2", "0", "0-0", "COUNT", count]);
        t.same(&["XAUTOCLAIM", "k", "g", "c2", "0", "0-0", "COUNT", count, "JUSTID"]);
    }
    t.finish("XAUTOCLAIM COUNT");
    report("hostile_inputs: XAUTOCLAIM COUNT 8070450532247928833 -> ERR COUNT must be > 0 (as the built-in), 28 COUNT variants identical");
}

#[test]
fn autoclaim_deleted_ids_exceed_count() {
    let mut t = Twin::start();
    fill(&mut t, "k", 300);
    // Delete most entries still in the PEL: one XAUTOCLAIM call meets far more deleted IDs
    // than COUNT.
    let mut del = vec!["XDEL".to_string(), "k".to_string()];
    for i in 1..=300 {
        if i % 10 != 0 {
            del.push(format!("{i}-1"));
        }
    }
    t.same(&del);
    let mut calls = 0;
    for (count, justid) in [("1", false), ("7", true), ("10", false), ("100", false)] {
        let mut cursor = "0-0".to_string();
        loop {
            let mut a = vec!["XAUTOCLAIM", "k", "g", "c2", "0", &cursor, "COUNT", count];
            if justid {
                a.push("JUSTID");
            }
            let r = t.same(&a);
            calls += 1;
            let v = r.as_array().to_vec();
            assert_eq!(v.len(), 3, "XAUTOCLAIM reply {r}");
            let n: usize = count.parse().unwrap();
            assert!(v[1].as_array().len() <= n, "more claimed than COUNT: {r}");
            assert!(v[2].as_array().len() <= 10 * n, "more deleted IDs than 10 x COUNT: {r}");
            cursor = v[0].text();
            if cursor == "0-0" || calls > 2000 {
                break;
            }
        }
        // Put the PEL back for the next round (everything was claimed or dropped).
        t.same(&["XGROUP", "DESTROY", "k", "g"]);
        t.same(&["XGROUP", "CREATE", "k", "g", "0"]);
        t.same(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "k", ">"]);
        t.same(&del);
        t.same_masked(&["XPENDING", "k", "g", "-", "+", "1000"], mask_pending);
    }
    t.finish("XAUTOCLAIM deleted");
    report(&format!("hostile_inputs: XAUTOCLAIM with 270 deleted PEL IDs and COUNT 1/7/10/100: {calls} calls identical to the built-in"));
}

#[test]
fn wrong_types() {
    let mut t = Twin::start();
    // A string key in both DBs, and each side's stream key seen by the other side's commands.
    t.b.cmd(&["SET", "str", "x"]);
    t.m.cmd(&["SET", "str", "x"]);
    t.b.cmd(&["XADD", "bstream", "1-1", "f", "v"]);
    t.m.cmd(&["XS.ADD", "bstream", "1-1", "f", "v"]);
    let cmds: &[&[&str]] = &[
        &["XGROUP", "CREATE", "str", "g", "$"],
        &["XGROUP", "CREATE", "str", "g", "$", "MKSTREAM"],
        &["XGROUP", "CREATECONSUMER", "str", "g", "c"],
        &["XGROUP", "DELCONSUMER", "str", "g", "c"],
        &["XGROUP", "DESTROY", "str", "g"],
        &["XGROUP", "SETID", "str", "g", "0"],
        &["XADD", "str", "*", "f", "v"],
        &["XADD", "str", "NOMKSTREAM", "*", "f", "v"],
        &["XLEN", "str"],
        &["XRANGE", "str", "-", "+"],
        &["XREVRANGE", "str", "+", "-"],
        &["XDEL", "str", "1-1"],
        &["XTRIM", "str", "MAXLEN", "0"],
        &["XSETID", "str", "5-5"],
        &["XINFO", "STREAM", "str"],
        &["XINFO", "STREAM", "str", "FULL"],
        &["XINFO", "GROUPS", "str"],
        &["XINFO", "CONSUMERS", "str", "g"],
        &["XREAD", "STREAMS", "str", "0"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "str", ">"],
        &["XACK", "str", "g", "1-1"],
        &["XPENDING", "str", "g"],
        &["XCLAIM", "str", "g", "c", "0", "1-1"],
        &["XAUTOCLAIM", "str", "g", "c", "0", "0"],
    ];
    for c in cmds {
        let r = t.same(c);
        assert!(matches!(&r, Reply::Error(e) if e.starts_with("WRONGTYPE")), "{}: {r}", fmt_cmd(c));
    }
    // Built-in commands on a module stream and module commands on a built-in stream.
    let mut cross = 0;
    for c in cmds {
        let mut a: Vec<String> = c.iter().map(|s| s.replace("str", "bstream")).collect();
        let rb = t.m.cmd(&a); // built-in command, module key (DB 1)
        a[0] = xcmd(true, &a[0]);
        let rm = t.b.cmd(&a); // module command, built-in key (DB 0)
        for (who, r) in [("built-in on a module stream", &rb), ("module on a built-in stream", &rm)] {
            assert!(matches!(r, Reply::Error(e) if e.starts_with("WRONGTYPE")), "{who}: {}: {r}", fmt_cmd(&a));
        }
        cross += 2;
    }
    assert_eq!(t.b.cmd(&["GET", "str"]), Reply::Bulk(b"x".to_vec()));
    assert_eq!(t.m.cmd(&["TYPE", "bstream"]), Reply::Simple("xs-stream".into()));
    t.finish("WRONGTYPE");
    report(&format!("hostile_inputs: {} commands on a string key: WRONGTYPE as the built-in; {cross} cross-type calls WRONGTYPE", cmds.len()));
}

#[test]
fn id_overflow() {
    let mut t = Twin::start();
    let seqs: &[&[&[&str]]] = &[
        &[
            &["XADD", "a", "18446744073709551615-18446744073709551615", "f", "v"],
            &["XADD", "a", "*", "f", "v"],
            &["XADD", "a", "18446744073709551615-*", "f", "v"],
            &["XADD", "a", "18446744073709551615-18446744073709551615", "f", "v"],
            &["XSETID", "a", "18446744073709551615-18446744073709551615"],
            &["XRANGE", "a", "-", "+"],
            &["XINFO", "STREAM", "a"],
        ],
        &[
            &["XADD", "b", "1-18446744073709551615", "f", "v"],
            &["XADD", "b", "1-*", "f", "v"],
            &["XADD", "b", "2-*", "f", "v"],
            &["XADD", "b", "*", "f", "v"],
            &["XRANGE", "b", "1", "1"],
        ],
        &[
            &["XADD", "c", "0-0", "f", "v"],
            &["XADD", "c", "0-*", "f", "v"],
            &["XADD", "c", "0-*", "f", "v"],
            &["XADD", "c", "0-0", "f", "v"],
            &["XADD", "c", "0-1", "f", "v"],
            &["XRANGE", "c", "-", "+"],
        ],
        &[
            &["XADD", "d", "0-*", "f", "v"],
            &["XADD", "d", "18446744073709551616-0", "f", "v"],
            &["XADD", "d", "1-18446744073709551616", "f", "v"],
            &["XADD", "d", "-1-1", "f", "v"],
            &["XADD", "d", "1--1", "f", "v"],
            &["XADD", "d", "1-", "f", "v"],
            &["XADD", "d", "-", "f", "v"],
            &["XADD", "d", "+", "f", "v"],
            &["XADD", "d", "18446744073709551615", "f", "v"],
            &["XADD", "d", "*", "f", "v"],
            &["XSETID", "d", "0-0"],
            &[
                "XSETID",
                "d",
                "18446744073709551615-18446744073709551615",
                "ENTRIESADDED",
                "9223372036854775807",
                "MAXDELETEDID",
                "18446744073709551615-18446744073709551615",
            ],
            &["XADD", "d", "*", "f", "v"],
            &["XADD", "d", "18446744073709551615-*", "f", "v"],
            &["XLEN", "d"],
        ],
        &[
            // Ranges and groups at the edges.
            &["XADD", "e", "18446744073709551615-18446744073709551614", "f", "v"],
            &["XRANGE", "e", "(18446744073709551615-18446744073709551615", "+"],
            &["XRANGE", "e", "-", "(0-0"],
            &["XREVRANGE", "e", "(0-0", "-"],
            &["XRANGE", "e", "(18446744073709551615-18446744073709551614", "+"],
            &["XGROUP", "CREATE", "e", "g", "18446744073709551615-18446744073709551615"],
            &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "e", ">"],
            &["XGROUP", "SETID", "e", "g", "0"],
            &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "e", ">"],
            &["XREAD", "STREAMS", "e", "18446744073709551615-18446744073709551615"],
            &["XREAD", "STREAMS", "e", "18446744073709551615-18446744073709551614"],
            &["XAUTOCLAIM", "e", "g", "c", "0", "18446744073709551615-18446744073709551615"],
            &["XAUTOCLAIM", "e", "g", "c", "0", "(18446744073709551615-18446744073709551615"],
            &["XPENDING", "e", "g", "(18446744073709551615-18446744073709551615", "+", "10"],
            &["XPENDING", "e", "g", "-", "(0-0", "10"],
        ],
    ];
    let mut n = 0;
    for seq in seqs {
        for c in *seq {
            if c[0] == "XPENDING" {
                t.same_masked(c, mask_pending);
            } else if c[0] == "XADD" && c[2] == "*" {
                // A clock ID: the two sides may straddle a millisecond. Same kind of reply, and
                // for IDs the same shape within a few milliseconds.
                let (b, m) = t.run(c);
                let ms = |r: &Reply| match r {
                    Reply::Bulk(x) => String::from_utf8_lossy(x).split('-').next().and_then(|p| p.parse::<u64>().ok()),
                    _ => None,
                };
                let close = matches!((ms(&b), ms(&m)), (Some(x), Some(y)) if x.abs_diff(y) <= 5);
                if b != m && !close {
                    t.diff(format!("  {}:\n      built-in: {b}\n      module:   {m}", c.join(" ")));
                }
            } else if c[0] == "XADD" && c[2].ends_with("-*") {
                // `<ms>-*` when the last ID is `<ms>-18446744073709551615`: Redis 7.0 returns
                // C_ERR without setting errno and picks its error text from a stale errno, so
                // either text may come from it; the module gives the meaningful one.
                let (b, m) = t.run(c);
                let ok = |r: &Reply| match r {
                    Reply::Error(e) => {
                        e == "ERR Elements are too large to be stored"
                            || e == "ERR The ID specified in XADD is equal or smaller than the target stream top item"
                    }
                    _ => false,
                };
                if b != m && !(ok(&b) && ok(&m)) {
                    t.diff(format!("  {}:\n      built-in: {b}\n      module:   {m}", c.join(" ")));
                }
            } else {
                t.same(c);
            }
            n += 1;
        }
    }
    t.finish("ID overflow");
    report(&format!("hostile_inputs: {n} ID-overflow commands identical to the built-in"));
}

#[test]
fn count_and_limit_extremes() {
    let mut t = Twin::start();
    fill(&mut t, "k", 50);
    let m0 = used_memory(&mut t.m);
    const BIG: &[&str] =
        &["9223372036854775807", "9223372036854775806", "-1", "-9223372036854775808", "0", "9223372036854775808", "4294967296", "2147483648", "abc"];
    let mut n = 0;
    for (vi, v) in BIG.iter().enumerate() {
        // Explicit IDs (a `*` on each side could straddle a millisecond and differ).
        let ids: Vec<String> = (0..3).map(|j| format!("{}-0", 1_000_000 + vi * 3 + j)).collect();
        let cmds: Vec<Vec<&str>> = vec![
            vec!["XRANGE", "k", "-", "+", "COUNT", v],
            vec!["XREVRANGE", "k", "+", "-", "COUNT", v],
            vec!["XREAD", "COUNT", v, "STREAMS", "k", "0"],
            vec!["XINFO", "STREAM", "k", "FULL", "COUNT", v],
            vec!["XADD", "k", "MAXLEN", "~", v, "LIMIT", v, &ids[0], "f", "v"],
            vec!["XADD", "k", "MAXLEN", v, &ids[1], "f", "v"],
            vec!["XADD", "k", "MINID", "~", "0", "LIMIT", v, &ids[2], "f", "v"],
            vec!["XTRIM", "k", "MAXLEN", "~", "10000", "LIMIT", v],
            vec!["XTRIM", "k", "MAXLEN", "=", "10000", "LIMIT", v],
            vec!["XTRIM", "k", "MAXLEN", "~", v],
            vec!["XTRIM", "k", "MINID", "~", "0", "LIMIT", v],
            vec!["XGROUP", "CREATE", "k", "g2", "0", "ENTRIESREAD", v],
            vec!["XGROUP", "SETID", "k", "g2", "0", "ENTRIESREAD", v],
            vec!["XGROUP", "DESTROY", "k", "g2"],
            vec!["XSETID", "k", "18446744073709551615-1", "ENTRIESADDED", v],
            vec!["XCLAIM", "k", "g", "c", v, "1-1"],
            vec!["XCLAIM", "k", "g", "c", "0", "1-1", "RETRYCOUNT", v, "JUSTID"],
            vec!["XCLAIM", "k", "g", "c", "0", "2-1", "IDLE", v, "JUSTID"],
            vec!["XCLAIM", "k", "g", "c", "0", "3-1", "TIME", v, "JUSTID"],
            vec!["XAUTOCLAIM", "k", "g", "c", v, "0-0", "COUNT", "5", "JUSTID"],
        ];
        for c in &cmds {
            if c[0] == "XINFO" {
                // FULL shows seen / delivery times.
                t.same_masked(c, mask_times);
            } else {
                t.same(c);
            }
            n += 1;
        }
        // Clock-dependent replies.
        t.same_masked(&["XPENDING", "k", "g", "-", "+", v], mask_pending);
        t.same_masked(&["XPENDING", "k", "g", "IDLE", v, "-", "+", "10"], mask_pending);
        t.same_masked(&["XREADGROUP", "GROUP", "g", "c3", "COUNT", v, "STREAMS", "k", "0"], mask_times);
        t.same_masked(&["XREADGROUP", "GROUP", "g", "c3", "COUNT", v, "STREAMS", "k", ">"], mask_times);
        n += 4;
    }
    t.same(&["XADD", "k", "MAXLEN", "~", "10", "LIMIT", "0", "*", "f", "v"]);
    t.same(&["XTRIM", "k", "MAXLEN", "~", "0", "LIMIT", "0"]);
    t.same(&["XTRIM", "k", "MINID", "~", "18446744073709551615-18446744073709551615", "LIMIT", "0"]);
    t.same(&["XTRIM", "k", "MAXLEN", "=", "0", "LIMIT", "0"]);
    t.same(&["XLEN", "k"]);
    let m1 = used_memory(&mut t.m);
    assert!(m1 - m0 < 8 << 20, "used_memory grew by {} bytes", m1 - m0);
    t.finish("COUNT extremes");
    report(&format!("hostile_inputs: {n} COUNT / LIMIT / ENTRIESREAD extremes identical to the built-in; used_memory {m0} -> {m1}"));
}

/// `*N\r\n$len\r\ncmd\r\n$1\r\nk\r\n$3\r\n1-1\r\n` + N field/value pairs, built in one buffer.
fn big_add(cmd: &str, key: &str, id: &str, pairs: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(pairs * 24 + 64);
    out.extend_from_slice(format!("*{}\r\n", 3 + 2 * pairs).as_bytes());
    for a in [cmd, key, id] {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    for i in 0..pairs {
        let f = format!("f{i}");
        out.extend_from_slice(format!("${}\r\n{f}\r\n$1\r\nv\r\n", f.len()).as_bytes());
    }
    out
}

#[test]
fn million_field_pairs() {
    let pairs = env_usize("XSTREAM_HOSTILE_FIELDS", 1_000_000);
    let mut t = Twin::start();
    let mut times = Vec::new();
    let mut mems = Vec::new();
    for (c, cmd) in [(&mut t.b, "XADD"), (&mut t.m, "XS.ADD")] {
        let m0 = used_memory(c);
        let t0 = Instant::now();
        for id in ["1-1", "1-2"] {
            c.send_bytes(&big_add(cmd, "k", id, pairs)).expect("send");
            let (r, _) = c.read_reply().unwrap_or_else(|e| panic!("{cmd} with {pairs} pairs: {e}"));
            assert_eq!(r, Reply::Bulk(id.as_bytes().to_vec()), "{cmd} {pairs} pairs");
        }
        times.push(t0.elapsed());
        mems.push(used_memory(c) - m0);
    }
    // The entries read back identically (byte for byte, ~2 x 15 MB).
    let rb = t.b.raw(&["XRANGE", "k", "-", "+"]);
    let rm = t.m.raw(&["XS.RANGE", "k", "-", "+"]);
    assert!(rb == rm, "XRANGE of a {pairs}-pair entry differs ({} vs {} bytes)", rb.len(), rm.len());
    t.same(&["XLEN", "k"]);
    t.same(&["XINFO", "STREAM", "k"]);
    t.same(&["XREVRANGE", "k", "+", "-", "COUNT", "1"]);
    t.same(&["XDEL", "k", "1-1"]);
    t.same(&["XTRIM", "k", "MAXLEN", "0"]);
    assert!(
        // (1.83x before the listpack reserved exactly for large entries; 1.17x after.)
        mems[1] <= mems[0].max(1 << 20) * 4 / 3 + (4 << 20),
        "module used {} bytes for two {pairs}-pair entries, the built-in {}",
        mems[1],
        mems[0]
    );
    assert!(times[1] < Duration::from_secs(60), "XS.ADD of {pairs} pairs took {:?}", times[1]);
    t.finish("1M fields");
    report(&format!(
        "hostile_inputs: 2 entries of {pairs} field pairs: built-in {:?} / {} bytes, module {:?} / {} bytes; XRANGE identical ({} bytes)",
        times[0],
        mems[0],
        times[1],
        mems[1],
        rb.len()
    ));
}

/// `*N` + `head` + the IDs `1-1 .. ids-1` as one RESP command, built in one buffer.
fn big_ids(head: &[&str], ids: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids * 18 + 128);
    out.extend_from_slice(format!("*{}\r\n", head.len() + ids).as_bytes());
    for a in head {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    for i in 1..=ids {
        let id = format!("{i}-1");
        out.extend_from_slice(format!("${}\r\n{id}\r\n", id.len()).as_bytes());
    }
    out
}

/// One command of `head` + `ids` IDs on a connection: its reply in raw bytes.
fn send_ids(c: &mut Conn, head: &[&str], ids: usize) -> Vec<u8> {
    c.send_bytes(&big_ids(head, ids)).expect("send");
    c.read_reply().unwrap_or_else(|e| panic!("{head:?} with {ids} IDs: {e}")).1
}

/// A million IDs in one call of every command that takes an ID list (issue 32; Redis 8.2.3
/// fixed a stack overflow in XACKDEL's list, CVE-2025-62507): XS.CLAIM, XS.ACK, XS.ACKDEL and
/// XS.DELEX against the built-in's replies on the same server where the host has the command,
/// XS.NACK by its count; the server stays up and its memory bounded. Lists are sized by the
/// arguments, on the heap (`make test-asan` runs this under AddressSanitizer).
#[test]
fn million_ids() {
    let ids = env_usize("XSTREAM_HOSTILE_IDS", 1_000_000);
    let n = 1000;
    let mut t = Twin::start();
    for k in ["k", "a", "d"] {
        fill(&mut t, k, n);
    }
    let m0 = used_memory(&mut t.m);
    let has = |c: &mut Conn, cmd: &str| c.cmd(&["COMMAND", "INFO", cmd]).as_array().first().is_some_and(|r| *r != Reply::Nil);
    let (ackdel, delex) = (has(&mut t.b, "XACKDEL"), has(&mut t.b, "XDELEX"));
    let t0 = Instant::now();
    let compare = |t: &mut Twin, b_head: &[&str], m_head: &[&str], builtin: bool, expect_len: usize| {
        let rm = send_ids(&mut t.m, m_head, ids);
        if builtin {
            let rb = send_ids(&mut t.b, b_head, ids);
            assert!(rb == rm, "{m_head:?} with {ids} IDs differs from the built-in ({} vs {} bytes)", rb.len(), rm.len());
        }
        assert!(rm.len() >= expect_len, "{m_head:?}: a {}-byte reply", rm.len());
    };
    // Every pending entry claimed (1,000 IDs replied), the rest not pending.
    compare(&mut t, &["XCLAIM", "k", "g", "c2", "0"], &["XS.CLAIM", "k", "g", "c2", "0"], true, 0);
    let nack = send_ids(&mut t.m, &["XS.NACK", "k", "g", "FAIL", "IDS", &ids.to_string()], ids);
    assert_eq!(nack, format!(":{n}\r\n").into_bytes(), "XS.NACK of {ids} IDs");
    compare(&mut t, &["XACK", "a", "g"], &["XS.ACK", "a", "g"], true, 0);
    t.same(&["XPENDING", "a", "g"]);
    let count = ids.to_string();
    // One reply element per ID: 1 for the first n (pending: acknowledged and deleted), -1 for
    // the rest.
    compare(&mut t, &["XACKDEL", "k", "g", "KEEPREF", "IDS", &count], &["XS.ACKDEL", "k", "g", "KEEPREF", "IDS", &count], ackdel, ids * 3);
    compare(&mut t, &["XDELEX", "d", "DELREF", "IDS", &count], &["XS.DELEX", "d", "DELREF", "IDS", &count], delex, ids * 3);
    let took = t0.elapsed();
    if ackdel && delex {
        t.same(&["XLEN", "k"]);
        t.same(&["XLEN", "d"]);
    }
    assert_eq!(t.m.cmd(&["XS.LEN", "k"]), Reply::Int(0));
    assert_eq!(t.m.cmd(&["XS.LEN", "d"]), Reply::Int(0));
    let m1 = used_memory(&mut t.m);
    assert!(m1 - m0 < 64 << 20, "used_memory grew {} bytes", m1 - m0);
    t.alive("million IDs");
    t.finish("million IDs");
    report(&format!(
        "hostile_inputs: {ids} IDs in one XS.CLAIM / XS.NACK / XS.ACK / XS.ACKDEL / XS.DELEX ({}), {took:?}",
        if ackdel { "compared with the built-in's XACKDEL / XDELEX too" } else { "XACKDEL / XDELEX not on this host" }
    ));
}

#[test]
fn many_groups_and_consumers() {
    let n = env_usize("XSTREAM_HOSTILE_GROUPS", 100_000);
    let mut t = Twin::start();
    t.same(&["XADD", "k", "1-1", "f", "v"]);
    t.same(&["XADD", "k", "2-1", "f", "v"]);
    let mut stats = Vec::new();
    for module in [false, true] {
        let c = if module { &mut t.m } else { &mut t.b };
        let g = xcmd(module, "XGROUP");
        let m0 = used_memory(c);
        let t0 = Instant::now();
        let creates: Vec<Vec<String>> = (0..n).map(|i| vec![g.clone(), "CREATE".into(), "k".into(), format!("group:{i}"), "0".into()]).collect();
        let r = pipeline(c, &creates);
        assert!(r.iter().all(|x| *x == Reply::Simple("OK".into())), "{g} CREATE x {n}: {:?}", r.iter().find(|x| **x != Reply::Simple("OK".into())));
        let consumers: Vec<Vec<String>> =
            (0..n).map(|i| vec![g.clone(), "CREATECONSUMER".into(), "k".into(), "group:0".into(), format!("consumer:{i}")]).collect();
        let r = pipeline(c, &consumers);
        assert!(r.iter().all(|x| *x == Reply::Int(1)), "{g} CREATECONSUMER x {n}");
        let t_create = t0.elapsed();
        let m1 = used_memory(c);
        stats.push((t_create, m1 - m0));
    }
    // The listings agree (idle times masked).
    let t1 = Instant::now();
    t.same(&["XINFO", "GROUPS", "k"]);
    t.same_masked(&["XINFO", "CONSUMERS", "k", "group:0"], mask_times);
    t.same_masked(&["XINFO", "STREAM", "k", "FULL", "COUNT", "100"], mask_times);
    t.same(&["XINFO", "STREAM", "k"]);
    t.same_masked(&["XREADGROUP", "GROUP", "group:0", "consumer:77", "STREAMS", "k", ">"], mask_times);
    t.same_masked(&["XREADGROUP", "GROUP", &format!("group:{}", n - 1), "consumer:77", "STREAMS", "k", ">"], mask_times);
    t.same(&["XPENDING", "k", "group:0"]);
    let t_list = t1.elapsed();
    // Tear down: half by DESTROY / DELCONSUMER, the rest with the key.
    for module in [false, true] {
        let c = if module { &mut t.m } else { &mut t.b };
        let g = xcmd(module, "XGROUP");
        let d: Vec<Vec<String>> = (0..n / 2).map(|i| vec![g.clone(), "DESTROY".into(), "k".into(), format!("group:{}", i + 1)]).collect();
        assert!(pipeline(c, &d).iter().all(|x| *x == Reply::Int(1)));
        let d: Vec<Vec<String>> =
            (0..n / 2).map(|i| vec![g.clone(), "DELCONSUMER".into(), "k".into(), "group:0".into(), format!("consumer:{i}")]).collect();
        assert!(pipeline(c, &d).iter().all(|x| matches!(x, Reply::Int(_))));
    }
    t.same(&["XINFO", "STREAM", "k"]);
    let before_del = used_memory(&mut t.m);
    t.m.cmd(&["DEL", "k"]);
    let after_del = used_memory(&mut t.m);
    let (tb, mb) = stats[0];
    let (tm, mm) = stats[1];
    // Bounded: linear in the number of groups and consumers. The module uses several times the
    // built-in's memory per group / consumer (reported, not failed, up to 10x).
    assert!(mm <= 10 * mb + (8 << 20), "module: {mm} bytes for {n} groups + {n} consumers, built-in {mb}");
    if mm > 2 * mb {
        report(&format!(
            "hostile_inputs: NOTE: {n} groups + {n} consumers take {:.1}x the built-in's memory ({mm} vs {mb} bytes)",
            mm as f64 / mb as f64
        ));
    }
    assert!(tm < Duration::from_secs(60) && t_list < Duration::from_secs(60), "too slow: {tm:?}, listings {t_list:?}");
    t.finish("many groups");
    report(&format!(
        "hostile_inputs: {n} groups + {n} consumers: built-in {tb:?} / {mb} bytes, module {tm:?} / {mm} bytes; listings {t_list:?}; DEL freed {} bytes",
        before_del - after_del
    ));
}

#[test]
fn huge_names() {
    let mb = env_usize("XSTREAM_HOSTILE_NAME_MB", 64);
    let size = mb << 20;
    // proto-max-bulk-len: at least the name plus slack (512 MB is the default maximum).
    let limit = (size + (1 << 20)).max(512 << 20).to_string();
    let qbuf = (size * 2 + (64 << 20)).max(1 << 30).to_string();
    let s = Server::builder().arg("--proto-max-bulk-len", &limit).arg("--client-query-buffer-limit", &qbuf).start();
    let name: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
    let mut name2 = name.clone();
    *name2.last_mut().unwrap() = b'#';
    // A consumer created by XREADGROUP, one by CREATECONSUMER (different last byte), a group
    // with the long name, the listings, a claim, and everything deleted again; then a field name
    // of that size. `N` / `M` stand for the two names (borrowed, never copied: at 512 MB copies
    // add up).
    let script: Vec<(&str, Option<fn(&mut Reply)>)> = vec![
        ("XREADGROUP GROUP g N COUNT 1 STREAMS k >", None),
        ("XGROUP CREATECONSUMER k g M", None),
        ("XGROUP CREATE k N $", None),
        ("XPENDING k g - + 10", Some(mask_pending)),
        ("XPENDING k g", None),
        ("XINFO CONSUMERS k g", Some(mask_times)),
        ("XINFO GROUPS k", None),
        ("XCLAIM k g M 0 1-1 JUSTID", None),
        ("XINFO STREAM k FULL", Some(mask_times)),
        ("XGROUP DELCONSUMER k g N", None),
        ("XGROUP DELCONSUMER k g M", None),
        ("XGROUP DESTROY k N", None),
        ("XADD k 3-1 N v", None),
        ("XLEN k", None),
        ("XDEL k 3-1", None),
        ("XTRIM k MAXLEN 0", None),
    ];
    let mut replies: Vec<Vec<Reply>> = Vec::new();
    let mut mem = Vec::new();
    // Each side in turn, with its own connection (closed before measuring: the query and reply
    // buffers of a connection that moved 64 MB arguments are part of used_memory).
    for module in [true, false] {
        let mut c = s.conn();
        c.cmd(&["SELECT", if module { "1" } else { "0" }]);
        for setup in [&["XADD", "k", "1-1", "f", "v"][..], &["XADD", "k", "2-1", "f", "v"], &["XGROUP", "CREATE", "k", "g", "0"]] {
            let r = if module { c.cmd(&module_args(setup)) } else { c.cmd(setup) };
            assert!(!r.is_error(), "{}: {r}", fmt_cmd(setup));
        }
        let base = used_memory(&mut s.conn());
        let t0 = Instant::now();
        let mut peak = 0;
        let mut out = Vec::new();
        for (i, (line, mask)) in script.iter().enumerate() {
            let words: Vec<&str> = line.split(' ').collect();
            let cmd0 = if module { xcmd(true, words[0]) } else { words[0].to_string() };
            let mut a: Vec<&[u8]> = vec![cmd0.as_bytes()];
            for w in &words[1..] {
                a.push(match *w {
                    "N" => &name[..],
                    "M" => &name2[..],
                    w => w.as_bytes(),
                });
            }
            let mut r = match c.try_cmd(&a) {
                Ok(r) => normalize(r),
                Err(e) => panic!("{line} (module {module}): I/O error {e}; alive: {}\n{}", s.conn().ping(), s.log_tail(30)),
            };
            if let Some(m) = mask {
                m(&mut r);
            }
            if i == 8 {
                peak = used_memory(&mut c);
            }
            out.push(r);
        }
        let elapsed = t0.elapsed();
        drop(c);
        std::thread::sleep(Duration::from_millis(300));
        let mut probe = s.conn();
        assert!(probe.ping(), "no PONG after the {mb} MB names");
        let end = used_memory(&mut probe);
        mem.push((base, peak, end, elapsed));
        replies.push(out);
    }
    drop(name);
    drop(name2);
    let mut diffs = Vec::new();
    for (i, (line, _)) in script.iter().enumerate() {
        if replies[0][i] != replies[1][i] {
            diffs.push(format!(
                "{line} (N, M: {mb} MB names):\n      built-in: {}\n      module:   {}",
                trunc(&replies[1][i].to_string(), 300),
                trunc(&replies[0][i].to_string(), 300)
            ));
        }
    }
    let (base, peak, end, el) = mem[0];
    let (bbase, bpeak, bend, bel) = mem[1];
    report(&format!(
        "hostile_inputs: {mb} MB names: module {el:?}, used_memory +{} at peak, +{} after; built-in {bel:?}, +{} at peak, +{} after",
        peak - base,
        end - base,
        bpeak - bbase,
        bend - bbase
    ));
    assert!(diffs.is_empty(), "{} difference(s) with the built-in:\n  {}", diffs.len(), diffs.join("\n  "));
    assert!(end - base < 8 << 20, "after deleting the {mb} MB names, used_memory is {} bytes above the start", end - base);
    assert!(peak - base < (6 * size) as i64 + (16 << 20), "module peak {} bytes for {mb} MB names", peak - base);
}

/// States the built-in reaches with ordinary commands and can DUMP / RESTORE (and save and load):
/// the module's value must reload too, or the next restart refuses the whole RDB / AOF.
#[test]
fn edge_states_reload() {
    let mut t = Twin::start();
    let seqs: &[(&str, &[&[&str]])] = &[
        (
            // An exact MINID trim keeps a node holding only tombstones; XSETID may then go below
            // that node's master ID (the stream is empty) and the next XADD lands in the node
            // with an ID below its master ID.
            "a",
            &[
                &["XADD", "a", "99999999999999-1", "f", "v"],
                &["XADD", "a", "99999999999999-2", "f", "v"],
                &["XDEL", "a", "99999999999999-2"],
                &["XTRIM", "a", "MINID", "=", "99999999999999-2"],
                &["XSETID", "a", "1-1"],
                &["XADD", "a", "5-5", "f", "v"],
                &["XRANGE", "a", "-", "+"],
            ],
        ),
        (
            // XSETID ENTRIESADDED takes up to LLONG_MAX; one XADD more and a group's
            // entries-read (a signed counter) follows it past LLONG_MAX.
            "b",
            &[
                &["XADD", "b", "1-1", "f", "v"],
                &["XSETID", "b", "1-1", "ENTRIESADDED", "9223372036854775807"],
                &["XGROUP", "CREATE", "b", "g", "$"],
                &["XADD", "b", "2-1", "f", "v"],
                &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "b", ">"],
                &["XINFO", "GROUPS", "b"],
            ],
        ),
    ];
    let mut refused = Vec::new();
    for (key, seq) in seqs {
        for c in *seq {
            t.same_masked(c, mask_times);
        }
        t.same_masked(&["XINFO", "STREAM", key, "FULL"], mask_times);
        let mut restored = Vec::new();
        for (module, c) in [(false, &mut t.b), (true, &mut t.m)] {
            let d = c.cmd(&["DUMP", key]);
            let p = d.as_bytes().expect("DUMP").to_vec();
            let r = c.cmd(&[b"RESTORE".as_slice(), format!("{key}2").as_bytes(), b"0", &p]);
            restored.push(r.clone());
            if module && r.is_error() {
                let why = t.s.log().lines().rev().find(|l| l.contains("refusing")).unwrap_or("").to_string();
                refused.push(format!(
                    "{}: DUMP/RESTORE of the module value -> {r} ({why})",
                    seq.iter().map(|c| fmt_cmd(c)).collect::<Vec<_>>().join("; ")
                ));
            }
        }
        assert_eq!(restored[0], Reply::Simple("OK".into()), "the built-in refused its own DUMP of {key}");
        if restored[1] == Reply::Simple("OK".into()) {
            t.same_masked(&["XINFO", "STREAM", &format!("{key}2"), "FULL"], mask_times);
        }
    }
    for r in &refused {
        report(&format!("hostile_inputs: FINDING: {r}"));
    }
    assert!(
        refused.is_empty(),
        "{} module value(s) that the built-in reloads are refused at load (a restart would refuse the whole dataset):\n  {}",
        refused.len(),
        refused.join("\n  ")
    );
    t.finish("edge states");
}
