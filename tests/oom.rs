//! Memory limits (issue 8): with `maxmemory` just under current use (noeviction), the deny-oom
//! commands (XS.ADD, XS.GROUP CREATE / CREATECONSUMER, XS.SETID) get exactly the built-in's
//! -OOM, also inside MULTI and from a script, while trims, deletes, ACKs, group reads, claims and
//! reads keep working with the built-in's replies. The built-in stream lives in DB 0, the
//! module's in DB 1, same key names (see common/twin.rs).

mod common;
#[path = "common/twin.rs"]
mod twin;

use common::*;
use twin::*;

fn fill(t: &mut Twin, key: &str, n: usize) {
    let pad = "p".repeat(100);
    for side in [false, true] {
        let c = if side { &mut t.m } else { &mut t.b };
        let add = xcmd(side, "XADD");
        let mut cmds = Vec::new();
        for i in 1..=n {
            cmds.push(vec![add.clone(), key.to_string(), format!("{i}-1"), "f".into(), i.to_string(), "pad".into(), pad.clone()]);
        }
        let mut buf = Vec::new();
        for a in &cmds {
            buf.extend_from_slice(&Conn::encode(a));
        }
        c.send_bytes(&buf).unwrap();
        for _ in &cmds {
            let (r, _) = c.read_reply().unwrap();
            assert!(!r.is_error(), "{add}: {r}");
        }
    }
    t.same(&["XGROUP", "CREATE", key, "g", "0"]);
    t.same(&["XGROUP", "CREATE", key, "g2", "0"]);
    t.same_masked(&["XREADGROUP", "GROUP", "g", "c", "COUNT", "500", "STREAMS", key, ">"], mask_times);
}

#[test]
fn oom_deny_and_allowed_commands() {
    let mut t = Twin::with(Server::builder().arg("--maxmemory-policy", "noeviction"));
    fill(&mut t, "k", 20_000);
    // Ballast in DB 2 so that the commands below cannot bring memory back under the limit.
    let mut admin = t.s.conn();
    admin.cmd(&["SELECT", "2"]);
    admin.cmd(&["SET", "ballast", &"b".repeat(8 << 20)]);
    let used = used_memory(&mut admin);
    let limit = used - (4 << 20);
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]), Reply::Simple("OK".into()));
    let oom = Reply::Error("OOM command not allowed when used memory > 'maxmemory'.".into());

    // deny-oom: -OOM on both sides, the stream unchanged.
    let before = (t.same(&["XLEN", "k"]), t.same(&["XINFO", "STREAM", "k"]));
    let deny: &[&[&str]] = &[
        &["XADD", "k", "*", "f", "v"],
        &["XADD", "k", "99999-1", "f", "v"],
        &["XADD", "k", "MAXLEN", "10", "*", "f", "v"],
        &["XADD", "new", "*", "f", "v"],
        &["XADD", "new", "NOMKSTREAM", "*", "f", "v"],
        &["XGROUP", "CREATE", "k", "g3", "$"],
        &["XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"],
        &["XGROUP", "CREATECONSUMER", "k", "g", "c9"],
        &["XSETID", "k", "99999-1"],
        &["XSETID", "k", "20000-1", "ENTRIESADDED", "30000", "MAXDELETEDID", "1-1"],
    ];
    for c in deny {
        let r = t.same(c);
        if r != oom {
            t.diff(format!("{}: expected -OOM on both sides, got {r}", fmt_cmd(c)));
        }
    }
    // Errors that the built-in reports before the OOM check? (wrong arity is checked first.)
    t.same(&["XADD", "k"]);
    t.same(&["XGROUP", "CREATE", "k"]);
    // Inside MULTI: queued commands are refused, EXEC aborts.
    for c in [&mut t.b, &mut t.m] {
        assert_eq!(c.cmd(&["MULTI"]), Reply::Simple("OK".into()));
    }
    t.same(&["XLEN", "k"]);
    t.same(&["XADD", "k", "*", "f", "v"]);
    t.same(&["EXEC"]);
    // From a script (the command name differs; the error text must not).
    let (rb, rm) = (
        t.b.cmd(&["EVAL", "return redis.call('XADD', KEYS[1], '*', 'f', 'v')", "1", "k"]),
        normalize(t.m.cmd(&["EVAL", "return redis.call('XS.ADD', KEYS[1], '*', 'f', 'v')", "1", "k"])),
    );
    // The script SHAs differ (the scripts do): drop them.
    let unsha = |r: Reply| match r {
        Reply::Error(e) => Reply::Error(match e.find("script: ") {
            Some(i) if e.len() >= i + 48 => format!("{}{}", &e[..i + 8], &e[i + 48..]),
            _ => e,
        }),
        other => other,
    };
    let (rb, rm) = (unsha(rb), unsha(rm));
    if rb != rm {
        t.diff(format!("EVAL XADD under OOM:\n      built-in: {rb}\n      module:   {rm}"));
    }
    let after = (t.same(&["XLEN", "k"]), t.same(&["XINFO", "STREAM", "k"]));
    assert_eq!(before, after, "a refused command changed the stream");

    // Not deny-oom: the same replies as the built-in (still over the limit).
    let m0 = used_memory(&mut admin);
    let allowed: &[&[&str]] = &[
        &["XLEN", "k"],
        &["XRANGE", "k", "-", "+", "COUNT", "3"],
        &["XREVRANGE", "k", "+", "-", "COUNT", "3"],
        &["XREAD", "COUNT", "2", "STREAMS", "k", "0"],
        &["XINFO", "GROUPS", "k"],
        &["XPENDING", "k", "g"],
        &["XACK", "k", "g", "1-1", "2-1", "3-1", "99999-1"],
        &["XDEL", "k", "4-1", "5-1", "600-1"],
        &["XTRIM", "k", "MAXLEN", "=", "19000"],
        &["XTRIM", "k", "MINID", "=", "1500-1"],
        &["XTRIM", "k", "MAXLEN", "~", "10000"],
        &["XGROUP", "SETID", "k", "g2", "15000-1"],
        &["XGROUP", "DELCONSUMER", "k", "g", "nobody"],
        &["XGROUP", "DESTROY", "k", "g2"],
        &["XLEN", "k"],
        &["XINFO", "STREAM", "k"],
    ];
    for c in allowed {
        let r = t.same(c);
        if r == oom {
            t.diff(format!("{}: -OOM for a command that is not deny-oom", fmt_cmd(c)));
        }
    }
    let masked: &[&[&str]] = &[
        &["XREADGROUP", "GROUP", "g", "c", "COUNT", "5", "STREAMS", "k", ">"],
        // A new consumer is created by XREADGROUP even over the limit.
        &["XREADGROUP", "GROUP", "g", "newc", "COUNT", "5", "STREAMS", "k", ">"],
        &["XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "k", "0"],
        &["XCLAIM", "k", "g", "claimer", "0", "12000-1", "12001-1", "JUSTID"],
        &["XCLAIM", "k", "g", "c", "0", "12002-1"],
        &["XAUTOCLAIM", "k", "g", "auto", "0", "0-0", "COUNT", "5", "JUSTID"],
        &["XPENDING", "k", "g", "-", "+", "5"],
        &["XINFO", "CONSUMERS", "k", "g"],
    ];
    for c in masked {
        let r = if c[0] == "XPENDING" { t.same_masked(c, mask_pending) } else { t.same_masked(c, mask_times) };
        if r == oom {
            t.diff(format!("{}: -OOM for a command that is not deny-oom", fmt_cmd(c)));
        }
    }
    let m1 = used_memory(&mut admin);
    assert!(m1 < m0, "trims and deletes under OOM did not free memory: {m0} -> {m1}");
    assert!(m1 > limit, "the test expected to stay over the limit ({m1} <= {limit}); raise the ballast");
    // Still refused, then accepted once memory is back under the limit.
    t.same(&["XADD", "k", "*", "f", "v"]);
    admin.cmd(&["DEL", "ballast"]);
    t.same(&["XTRIM", "k", "MAXLEN", "0"]);
    let m2 = used_memory(&mut admin);
    assert!(m2 < limit, "still over the limit after freeing: {m2} >= {limit}");
    t.same(&["XADD", "k", "99999-1", "f", "v"]);
    t.same(&["XGROUP", "CREATE", "k", "g3", "$"]);
    t.same(&["XGROUP", "CREATECONSUMER", "k", "g3", "c9"]);
    t.same(&["XSETID", "k", "99999-5"]);
    report(&format!(
        "oom: maxmemory {limit} (used {used}): {} deny-oom commands -OOM as the built-in (MULTI, EVAL too); {} others answered as the built-in; trims freed {} bytes; writes accepted again after DEL",
        deny.len(),
        allowed.len() + masked.len(),
        m0 - m1
    ));
    t.finish("OOM");
}
