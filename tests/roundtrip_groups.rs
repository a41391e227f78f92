//! Persistence round trips of consumer groups: module streams (`m*`) and built-in streams (`n*`)
//! get the same group workload (groups at 0 / $ / an ID, ENTRIESREAD, XREADGROUP with and without
//! NOACK, XACK, XCLAIM with TIME / RETRYCOUNT / FORCE, XAUTOCLAIM, CREATECONSUMER, pending
//! entries whose data was deleted, a stream with groups and no entries, a group on an empty
//! MKSTREAM stream), then DEBUG RELOAD, SAVE + restart, DUMP + RESTORE, COPY, BGREWRITEAOF
//! (with and without RDB preamble) + restart, and a replica's full sync.
//!
//! Snapshot of a key: DEBUG DIGEST-VALUE, XRANGE - +, XINFO STREAM FULL COUNT 0, XINFO GROUPS,
//! and per group XPENDING (summary, and extended with idle times normalised) and XINFO
//! CONSUMERS (idle normalised). The module's snapshot must be unchanged byte for byte; only
//! where the built-in's own snapshot changed too (an AOF rewrite without preamble recreates
//! consumers, so their seen-time is the load time, and rebuilds nodes) is it compared with
//! `seen-time` and the radix-tree counters masked.

mod common;

use common::groups::*;
use common::*;
use std::time::Duration;

const SUFFIXES: &[&str] = &["big", "small", "noentries", "mkstream"];

type Snap = Vec<(String, Vec<u8>)>;

fn x(module: bool, c: &str) -> String {
    xcmd(module, c)
}

/// PEL IDs of `g` on `key` (this side's own commands).
fn pel(c: &mut Conn, module: bool, key: &str, g: &str) -> Vec<Vec<u8>> {
    match c.cmd(&[&x(module, "XPENDING"), key, g, "-", "+", "1000"]) {
        Reply::Array(v) => v.iter().map(|e| e.as_array()[0].as_bytes().unwrap().to_vec()).collect(),
        _ => Vec::new(),
    }
}

fn run<A: AsRef<[u8]>>(c: &mut Conn, args: &[A]) -> Reply {
    let r = c.cmd(args);
    assert!(!r.is_error(), "{} -> {r}", fmt_cmd(args));
    r
}

/// The same group workload on `key` for one side; `seed` makes both sides identical.
fn fill_key(c: &mut Conn, seed: u64, module: bool, key: &str, suffix: &str) {
    let mut rng = Rng::new(seed);
    let add = x(module, "XADD");
    let grp = x(module, "XGROUP");
    if suffix == "mkstream" {
        run(c, &[&grp, "CREATE", key, "g0", "$", "MKSTREAM"]);
        run(c, &[&grp, "CREATECONSUMER", key, "g0", "lonely"]);
        return;
    }
    let n = if suffix == "big" { 400 } else { 12 };
    let mut ms = rng.range(1, 100);
    for i in 0..n {
        ms += rng.range(0, 2);
        let id = format!("{ms}-{i}");
        let mut a: Vec<Vec<u8>> = vec![add.clone().into_bytes(), key.as_bytes().to_vec(), id.into_bytes()];
        for f in 0..rng.range(1, 3) {
            a.push(format!("f{f}").into_bytes());
            a.push(random_value(&mut rng));
        }
        run(c, &a);
    }
    run(c, &[&grp, "CREATE", key, "g0", "0"]);
    run(c, &[&grp, "CREATE", key, "g1", "0", "ENTRIESREAD", "0"]);
    run(c, &[&grp, "CREATE", key, "g2", "$"]);
    let rg = x(module, "XREADGROUP");
    for round in 0..(n / 6).max(2) {
        for (g, cons) in [("g0", "alice"), ("g0", "bob"), ("g1", "carol"), ("g0", "dave")] {
            let count = rng.range(1, 8).to_string();
            let mut a = vec![rg.clone(), "GROUP".into(), g.into(), cons.into(), "COUNT".into(), count];
            if round % 3 == 2 && cons == "carol" {
                a.push("NOACK".into());
            }
            a.extend(["STREAMS".into(), key.into(), ">".into()]);
            run(c, &a);
        }
    }
    // Ack about half of g0's PEL, claim some to another consumer with explicit TIME and counts.
    let p = pel(c, module, key, "g0");
    let mut ack = vec![x(module, "XACK").into_bytes(), key.as_bytes().to_vec(), b"g0".to_vec()];
    for id in &p {
        if rng.pct(50) {
            ack.push(id.clone());
        }
    }
    if ack.len() > 3 {
        run(c, &ack);
    }
    let p = pel(c, module, key, "g0");
    let mut claim: Vec<Vec<u8>> =
        vec![x(module, "XCLAIM").into_bytes(), key.as_bytes().to_vec(), b"g0".to_vec(), b"dead-letter".to_vec(), b"0".to_vec()];
    for id in p.iter().take(p.len() / 3 + 1) {
        claim.push(id.clone());
    }
    claim.extend([b"TIME".to_vec(), b"1600000000000".to_vec(), b"RETRYCOUNT".to_vec(), b"7".to_vec(), b"JUSTID".to_vec()]);
    run(c, &claim);
    // FORCE: g2 (created at $) gets PEL entries for entries it never read.
    let first = c.cmd(&[&x(module, "XRANGE"), key, "-", "+", "COUNT", "2"]);
    for e in first.as_array() {
        let id = e.as_array()[0].text();
        run(c, &[&x(module, "XCLAIM"), key, "g2", "forced", "0", &id, "FORCE", "TIME", "1000"]);
    }
    run(c, &[&x(module, "XAUTOCLAIM"), key, "g1", "erin", "0", "0-0", "COUNT", "3"]);
    run(c, &[&grp, "CREATECONSUMER", key, "g0", "idle-one"]);
    run(c, &[&grp, "SETID", key, "g1", "$", "ENTRIESREAD", &n.to_string()]);
    // Delete some pending entries: the PEL keeps referencing them.
    let p = pel(c, module, key, "g0");
    let mut del = vec![x(module, "XDEL").into_bytes(), key.as_bytes().to_vec()];
    for id in p.iter().step_by(3) {
        del.push(id.clone());
    }
    if del.len() > 2 {
        run(c, &del);
    }
    if suffix == "noentries" {
        // Every entry gone, groups and PELs stay.
        let all = c.cmd(&[&x(module, "XRANGE"), key, "-", "+"]);
        let mut del = vec![x(module, "XDEL").into_bytes(), key.as_bytes().to_vec()];
        for e in all.as_array() {
            del.push(e.as_array()[0].as_bytes().unwrap().to_vec());
        }
        if del.len() > 2 {
            run(c, &del);
        }
    }
}

fn fill(c: &mut Conn, rng: &mut Rng) {
    let e = *rng.pick(&[2u64, 5, 10, 100]);
    let b = *rng.pick(&[0u64, 256, 4096]);
    set_node_limits(c, e, b, true);
    report(&format!("  node limits entries={e} bytes={b}"));
    for s in SUFFIXES {
        let seed = rng.next_u64();
        for module in [false, true] {
            let key = format!("{}{s}", if module { "m" } else { "n" });
            fill_key(c, seed, module, &key, s);
        }
    }
}

fn snap(c: &mut Conn, module: bool, key: &str) -> Snap {
    let now = now_ms();
    let mut out: Snap = vec![
        ("DEBUG DIGEST-VALUE".into(), c.raw(&["DEBUG", "DIGEST-VALUE", key])),
        ("XRANGE - +".into(), c.raw(&[&x(module, "XRANGE"), key, "-", "+"])),
        ("XINFO STREAM FULL COUNT 0".into(), c.raw(&[&x(module, "XINFO"), "STREAM", key, "FULL", "COUNT", "0"])),
        ("XINFO GROUPS".into(), c.raw(&[&x(module, "XINFO"), "GROUPS", key])),
    ];
    if let Reply::Array(gs) = c.cmd(&[&x(module, "XINFO"), "GROUPS", key]) {
        for g in gs {
            let name = g.field("name").unwrap().text();
            out.push((format!("XPENDING {name}"), c.raw(&[&x(module, "XPENDING"), key, &name])));
            let mut n = Node::parse(&c.raw(&[&x(module, "XPENDING"), key, &name, "-", "+", "1000"]));
            norm_pending_ext(&mut n, now);
            out.push((format!("XPENDING {name} - + 1000"), n.to_bytes()));
            let mut n = Node::parse(&c.raw(&[&x(module, "XINFO"), "CONSUMERS", key, &name]));
            norm_info_consumers(&mut n, now);
            out.push((format!("XINFO CONSUMERS {name}"), n.to_bytes()));
        }
    }
    out
}

/// seen-time and the radix-tree counters masked (see the file comment).
fn loosen_snap(s: &Snap) -> Snap {
    let now = now_ms();
    s.iter()
        .map(|(w, raw)| {
            if w.starts_with("XINFO STREAM FULL") {
                let mut n = Node::parse(raw);
                if !n.is_error() {
                    norm_seen_times(&mut n, now);
                    for f in ["radix-tree-keys", "radix-tree-nodes"] {
                        if let Some(v) = n.field_mut(f) {
                            v.mark("MASKED".into());
                        }
                    }
                }
                (w.clone(), n.to_bytes())
            } else {
                (w.clone(), raw.clone())
            }
        })
        .collect()
}

/// For comparing a module snapshot with a built-in one: no digest (different algorithms), every
/// clock field normalised.
fn cross(s: &Snap) -> Snap {
    let now = now_ms();
    s.iter()
        .filter(|(w, _)| !w.starts_with("DEBUG"))
        .map(|(w, raw)| {
            if w.starts_with("XINFO STREAM FULL") {
                let mut n = Node::parse(raw);
                if !n.is_error() {
                    norm_info_full(&mut n, now);
                }
                (w.clone(), n.to_bytes())
            } else {
                (w.clone(), raw.clone())
            }
        })
        .collect()
}

struct Snaps {
    /// (built-in, module) per suffix.
    keys: Vec<(Snap, Snap)>,
}

fn snap_all(c: &mut Conn, prefix: (&str, &str)) -> Snaps {
    Snaps { keys: SUFFIXES.iter().map(|s| (snap(c, false, &format!("{}{s}", prefix.0)), snap(c, true, &format!("{}{s}", prefix.1)))).collect() }
}

/// Every item that differs, as one (names, first before, first after) triple.
fn first_diff(a: &Snap, b: &Snap) -> Option<(String, Vec<u8>, Vec<u8>)> {
    let mut names = Vec::new();
    let mut first: Option<(Vec<u8>, Vec<u8>)> = None;
    for ((w, x), (_, y)) in a.iter().zip(b.iter()) {
        if x != y {
            names.push(w.clone());
            // Show the most telling one: anything but the digest.
            if first.is_none() || (names.len() == 2 && names[0].starts_with("DEBUG")) {
                first = Some((x.clone(), y.clone()));
            }
        }
    }
    if a.len() != b.len() {
        names.push("number of groups".into());
    }
    if names.is_empty() {
        return None;
    }
    let (x, y) = first.unwrap_or_default();
    Some((names.join(", "), x, y))
}

/// The two replies around their first difference.
fn around_diff(x: &[u8], y: &[u8]) -> (String, String) {
    let i = x.iter().zip(y.iter()).take_while(|(a, b)| a == b).count();
    let lo = i.saturating_sub(400);
    let cut = |v: &[u8]| {
        let hi = (i + 600).min(v.len());
        format!("[{} bytes, first difference at {i}] ...{}...", v.len(), escape(&v[lo.min(v.len())..hi]))
    };
    (cut(x), cut(y))
}

fn check(what: &str, before: &Snaps, after: &Snaps) {
    let mut problems = Vec::new();
    let mut loose = Vec::new();
    let mut inherited = Vec::new();
    for (i, s) in SUFFIXES.iter().enumerate() {
        let ((nb, mb), (na, ma)) = (&before.keys[i], &after.keys[i]);
        if mb[0].1.starts_with(b"-") || mb[2].1.starts_with(b"-") {
            problems.push(format!("m{s}: snapshot is an error: {}", show(&mb[2].1, 300)));
            continue;
        }
        let Some((w, x, y)) = first_diff(mb, ma) else {
            continue;
        };
        let builtin_changed = first_diff(nb, na).is_some();
        if builtin_changed {
            if first_diff(&loosen_snap(mb), &loosen_snap(ma)).is_none() {
                loose.push(format!("m{s}"));
            } else if let Some((w2, x2, y2)) = first_diff(&cross(na), &cross(ma)) {
                let (a, b) = around_diff(&x2, &y2);
                problems.push(format!(
                    "m{s}: {w} changed, and differently from the built-in's n{s} ({w2})\n    built-in after: {a}\n    module after:   {b}"
                ));
            } else {
                let (wn, _, _) = first_diff(nb, na).unwrap();
                inherited.push(format!("m{s} ({wn})"));
            }
        } else {
            let (a, b) = around_diff(&x, &y);
            problems.push(format!("m{s}: {w} changed (the built-in's did not)\n    before: {a}\n    after:  {b}"));
        }
    }
    if !problems.is_empty() {
        panic!("{what}: {} problem(s):\n  {}", problems.len(), problems.join("\n  "));
    }
    if !inherited.is_empty() {
        report(&format!(
            "roundtrip_groups {what}: changed like the built-in's (same replies after, clock fields normalised): {}",
            inherited.join("; ")
        ));
    }
    report(&format!(
        "roundtrip_groups {what}: {} of {} keys identical{}",
        SUFFIXES.len() - inherited.len(),
        SUFFIXES.len(),
        if loose.is_empty() { String::new() } else { format!(" ({} with seen-time / radix counters masked, like the built-in's)", loose.join(", ")) }
    ));
}

#[test]
fn roundtrip_groups_debug_reload() {
    let s = Server::start();
    let mut c = s.conn();
    let mut rng = Rng::from_env("roundtrip_groups_debug_reload");
    fill(&mut c, &mut rng);
    let before = snap_all(&mut c, ("n", "m"));
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()), "log:\n{}", s.log_tail(30));
    let after = snap_all(&mut c, ("n", "m"));
    check("DEBUG RELOAD", &before, &after);
}

#[test]
fn roundtrip_groups_save_restart() {
    let mut s = Server::start();
    let mut c = s.conn();
    let mut rng = Rng::from_env("roundtrip_groups_save_restart");
    fill(&mut c, &mut rng);
    let before = snap_all(&mut c, ("n", "m"));
    assert_eq!(c.cmd(&["SAVE"]), Reply::Simple("OK".into()));
    drop(c);
    s.restart();
    let mut c = s.conn();
    let after = snap_all(&mut c, ("n", "m"));
    check("SAVE + restart", &before, &after);
}

#[test]
fn roundtrip_groups_dump_restore_copy() {
    let s = Server::start();
    let mut c = s.conn();
    let mut rng = Rng::from_env("roundtrip_groups_dump_restore_copy");
    fill(&mut c, &mut rng);
    let before = snap_all(&mut c, ("n", "m"));
    for k in SUFFIXES {
        for p in ["n", "m"] {
            let src = format!("{p}{k}");
            let payload = match c.cmd(&["DUMP", &src]) {
                Reply::Bulk(b) => b,
                other => panic!("DUMP {src}: {other}"),
            };
            let r = c.cmd(&[b"RESTORE".as_slice(), format!("r{p}{k}").as_bytes(), b"0", &payload]);
            assert_eq!(r, Reply::Simple("OK".into()), "RESTORE r{p}{k}: {r}");
            let r = c.cmd(&["COPY", &src, &format!("c{p}{k}")]);
            assert_eq!(r, Reply::Int(1), "COPY {src}: {r}");
        }
    }
    let restored = snap_all(&mut c, ("rn", "rm"));
    check("DUMP + RESTORE", &before, &restored);
    let copied = snap_all(&mut c, ("cn", "cm"));
    check("COPY", &before, &copied);
    // The copy's groups are independent of the source's.
    c.cmd(&["XS.GROUP", "DESTROY", "cmbig", "g0"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g2", "x", "STREAMS", "cmsmall", ">"]);
    let again = snap_all(&mut c, ("n", "m"));
    check("(sources after writing to their copies)", &before, &again);
}

fn aof_roundtrip(preamble: &str) {
    let mut s = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", preamble).start();
    let mut c = s.conn();
    let mut rng = Rng::from_env(&format!("roundtrip_groups_aof_preamble_{preamble}"));
    fill(&mut c, &mut rng);
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    let r = c.cmd(&["BGREWRITEAOF"]);
    assert!(!r.is_error(), "BGREWRITEAOF: {r}");
    wait_persistence_idle(&mut c, Duration::from_secs(60));
    assert!(c.cmd(&["INFO", "persistence"]).text().contains("aof_last_bgrewrite_status:ok"), "AOF rewrite failed; log:\n{}", s.log_tail(40));
    // Group writes after the rewrite go to the incremental AOF. Each delivers or claims an
    // entry: since 7.2 a read or claim that delivers nothing still creates its consumer, and
    // the built-in propagates that creation to neither replicas nor the AOF (ours does). The
    // read is NOACK: a 7.2 built-in `>` read propagates no entries-read (7.4 does; ours too).
    for module in [false, true] {
        let key = format!("{}small", if module { "m" } else { "n" });
        c.cmd(&[&x(module, "XADD"), &key, "999-1", "f", "late"]);
        c.cmd(&[&x(module, "XREADGROUP"), "GROUP", "g2", "late", "NOACK", "STREAMS", &key, ">"]);
        c.cmd(&[&x(module, "XCLAIM"), &key, "g0", "late", "0", "999-1", "FORCE"]);
    }
    let before = snap_all(&mut c, ("n", "m"));
    drop(c);
    s.restart();
    let mut c = s.conn();
    let after = snap_all(&mut c, ("n", "m"));
    check(&format!("BGREWRITEAOF (aof-use-rdb-preamble {preamble}) + restart"), &before, &after);
}

#[test]
fn roundtrip_groups_aof_preamble_yes() {
    aof_roundtrip("yes");
}

#[test]
fn roundtrip_groups_aof_preamble_no() {
    aof_roundtrip("no");
}

/// A replica attached after the fill (full sync through an RDB) has the same groups.
#[test]
fn roundtrip_groups_replica_full_sync() {
    let primary = Server::start();
    let mut c = primary.conn();
    let mut rng = Rng::from_env("roundtrip_groups_replica_full_sync");
    fill(&mut c, &mut rng);
    let before = snap_all(&mut c, ("n", "m"));
    let replica = Server::replica_of(&primary);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    let mut rc = replica.conn();
    let after = snap_all(&mut rc, ("n", "m"));
    check("replica full sync", &before, &after);
}
