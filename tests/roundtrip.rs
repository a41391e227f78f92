//! Persistence and replication round trips of module streams.
//!
//! Every test fills module streams (`m*`) and, with the very same commands, built-in streams (`n*`)
//! on one server, snapshots them (DEBUG DIGEST-VALUE, XRANGE - +, XINFO STREAM, XLEN: exact reply
//! bytes), applies a transformation (DEBUG RELOAD, SAVE + restart, DUMP/RESTORE, COPY, AOF rewrite +
//! restart, replication) and snapshots again. Required:
//!  - the module stream's digest, XRANGE and XLEN are unchanged;
//!  - its XINFO STREAM is unchanged, unless the built-in stream's XINFO changed by the same
//!    transformation (AOF rewrite without preamble rebuilds nodes): then it must equal the
//!    built-in's new XINFO.

mod common;

use common::*;
use std::time::Duration;

/// The keys each test fills: (suffix, ops). Small node limits give many nodes.
const KEYS: &[(&str, usize)] = &[("big", 700), ("small", 25), ("one", 1)];

struct Filled {
    keys: Vec<String>,
}

/// Fills `n<suffix>` (built-in) and `m<suffix>` (module) with the same workload, plus special
/// cases: an empty stream with a last ID (XADD MAXLEN 0), a stream whose entries are all deleted.
fn fill(c: &mut Conn, rng: &mut Rng) -> Filled {
    let e = *rng.pick(&[2u64, 5, 10, 100]);
    let b = *rng.pick(&[0u64, 256, 1024, 4096]);
    set_node_limits(c, e, b, true);
    report(&format!("  node limits entries={e} bytes={b}"));
    let mut keys = Vec::new();
    for (suffix, ops) in KEYS {
        let seed = rng.next_u64();
        for module in [false, true] {
            let key = format!("{}{suffix}", if module { "m" } else { "n" });
            let mut r = Rng::new(seed);
            explicit_workload(c, &mut r, module, &key, *ops);
        }
        keys.push(suffix.to_string());
    }
    for module in [false, true] {
        let p = if module { "m" } else { "n" };
        let add = xcmd(module, "XADD");
        c.cmd(&[&add, &format!("{p}empty"), "MAXLEN", "0", "5-5", "f", "v"]);
        for i in 1..=5 {
            c.cmd(&[&add, &format!("{p}alldel"), &format!("{i}-1"), "f", &i.to_string()]);
        }
        c.cmd(&[&xcmd(module, "XDEL"), &format!("{p}alldel"), "1-1", "2-1", "3-1", "4-1", "5-1"]);
    }
    keys.push("empty".into());
    keys.push("alldel".into());
    Filled { keys }
}

type Snaps = Vec<(KeySnap, KeySnap)>; // (built-in, module) per key

fn snap_all(c: &mut Conn, f: &Filled, prefix: (&str, &str)) -> Snaps {
    f.keys.iter().map(|k| (snap(c, false, &format!("{}{k}", prefix.0)), snap(c, true, &format!("{}{k}", prefix.1)))).collect()
}

fn show(b: &[u8]) -> String {
    let s = escape(b);
    if s.len() > 1500 {
        format!("{}...({} bytes)", &s[..1500], s.len())
    } else {
        s
    }
}

/// Checks `after` against `before` (see the file comment). `what` names the transformation.
fn check(what: &str, keys: &[String], before: &Snaps, after: &Snaps) {
    let mut problems = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let ((nb, mb), (na, ma)) = (&before[i], &after[i]);
        if mb.digest.starts_with(b"-") {
            problems.push(format!("{k}: DEBUG DIGEST-VALUE before: {}", show(&mb.digest)));
        }
        for (name, x, y) in [("digest", &mb.digest, &ma.digest), ("XRANGE - +", &mb.range, &ma.range), ("XLEN", &mb.len, &ma.len)] {
            if x != y {
                problems.push(format!("{k}: {name} changed\n    before: {}\n    after:  {}", show(x), show(y)));
            }
        }
        let expected = if nb.info == na.info { &mb.info } else { &na.info };
        if &ma.info != expected {
            problems.push(format!(
                "{k}: XS.INFO STREAM after {what}\n    got:      {}\n    expected: {} ({})\n    module before: {}",
                show(&ma.info),
                show(expected),
                if nb.info == na.info { "module's own before" } else { "built-in's after, which changed" },
                show(&mb.info)
            ));
        }
    }
    if !problems.is_empty() {
        panic!("{what}: {} problem(s):\n  {}", problems.len(), problems.join("\n  "));
    }
    report(&format!("roundtrip {what}: {} keys identical", keys.len()));
}

#[test]
fn roundtrip_debug_reload() {
    let s = Server::start();
    let mut c = s.conn();
    let mut rng = Rng::from_env("roundtrip_debug_reload");
    let f = fill(&mut c, &mut rng);
    let before = snap_all(&mut c, &f, ("n", "m"));
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()), "log:\n{}", s.log_tail(30));
    let after = snap_all(&mut c, &f, ("n", "m"));
    check("DEBUG RELOAD", &f.keys, &before, &after);
}

#[test]
fn roundtrip_save_restart() {
    let mut s = Server::start();
    let mut c = s.conn();
    let mut rng = Rng::from_env("roundtrip_save_restart");
    let f = fill(&mut c, &mut rng);
    let before = snap_all(&mut c, &f, ("n", "m"));
    assert_eq!(c.cmd(&["SAVE"]), Reply::Simple("OK".into()));
    drop(c);
    s.restart();
    let mut c = s.conn();
    let after = snap_all(&mut c, &f, ("n", "m"));
    check("SAVE + restart", &f.keys, &before, &after);
}

#[test]
fn roundtrip_dump_restore_copy() {
    let s = Server::start();
    let mut c = s.conn();
    let mut rng = Rng::from_env("roundtrip_dump_restore_copy");
    let f = fill(&mut c, &mut rng);
    let before = snap_all(&mut c, &f, ("n", "m"));
    for k in &f.keys {
        for p in ["n", "m"] {
            let src = format!("{p}{k}");
            let payload = match c.cmd(&["DUMP", &src]) {
                Reply::Bulk(b) => b,
                other => panic!("DUMP {src}: {other}"),
            };
            assert!(dump_split(&payload).is_some(), "DUMP {src}: our crc64 does not match the payload footer");
            let r = c.cmd(&[b"RESTORE".as_slice(), format!("r{p}{k}").as_bytes(), b"0", &payload]);
            assert_eq!(r, Reply::Simple("OK".into()), "RESTORE r{p}{k}: {r}");
            let r = c.cmd(&["COPY", &src, &format!("c{p}{k}")]);
            assert_eq!(r, Reply::Int(1), "COPY {src}: {r}");
        }
    }
    let restored = snap_all(&mut c, &f, ("rn", "rm"));
    check("DUMP + RESTORE", &f.keys, &before, &restored);
    let copied = snap_all(&mut c, &f, ("cn", "cm"));
    check("COPY", &f.keys, &before, &copied);
    // Originals untouched, and copies independent of their source.
    let again = snap_all(&mut c, &f, ("n", "m"));
    check("(sources after DUMP/COPY)", &f.keys, &before, &again);
    c.cmd(&["XS.ADD", "cmbig", "*", "extra", "1"]);
    let again = snap_all(&mut c, &f, ("n", "m"));
    check("(source after writing to its copy)", &f.keys, &before, &again);
}

fn aof_roundtrip(preamble: &str) {
    let mut s = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", preamble).start();
    let mut c = s.conn();
    let what = format!("roundtrip_aof_preamble_{preamble}");
    let mut rng = Rng::from_env(&what);
    let f = fill(&mut c, &mut rng);
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    let r = c.cmd(&["BGREWRITEAOF"]);
    assert!(!r.is_error(), "BGREWRITEAOF: {r}");
    wait_persistence_idle(&mut c, Duration::from_secs(60));
    assert!(c.cmd(&["INFO", "persistence"]).text().contains("aof_last_bgrewrite_status:ok"), "AOF rewrite failed; log:\n{}", s.log_tail(40));
    // The rewrite really went through the module: without preamble the base file holds commands.
    let aofdir = s.dir().join("appendonlydir");
    let base: Vec<u8> = std::fs::read_dir(&aofdir)
        .unwrap_or_else(|e| panic!("{}: {e}", aofdir.display()))
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".base."))
        .flat_map(|e| std::fs::read(e.path()).unwrap_or_default())
        .collect();
    if preamble == "no" {
        assert!(base.windows(3).any(|w| w.eq_ignore_ascii_case(b"XS.")), "the rewritten base AOF holds no XS.* command ({} bytes)", base.len());
    } else {
        // The RDB magic: "REDIS", or "VALKEY" from Valkey 9 (its RDB version 80).
        assert!(base.starts_with(b"REDIS") || base.starts_with(b"VALKEY"), "the rewritten base AOF is not an RDB preamble");
    }
    // More writes after the rewrite: they go to the incremental AOF as XS.* commands.
    for module in [false, true] {
        let key = format!("{}small", if module { "m" } else { "n" });
        c.cmd(&[&xcmd(module, "XADD"), &key, "999999999-1", "after", "rewrite"]);
        c.cmd(&[&xcmd(module, "XTRIM"), &key, "MAXLEN", "~", "5"]);
    }
    let before = snap_all(&mut c, &f, ("n", "m"));
    drop(c);
    s.restart();
    let mut c = s.conn();
    let after = snap_all(&mut c, &f, ("n", "m"));
    check(&format!("BGREWRITEAOF (aof-use-rdb-preamble {preamble}) + restart"), &f.keys, &before, &after);
}

#[test]
fn roundtrip_aof_preamble_yes() {
    aof_roundtrip("yes");
}

#[test]
fn roundtrip_aof_preamble_no() {
    aof_roundtrip("no");
}

/// A replica fed by a random workload with auto IDs and approximate trims ends identical.
#[test]
fn roundtrip_replica() {
    let primary = Server::start();
    let replica = Server::replica_of(&primary);
    let mut c = primary.conn();
    let mut rng = Rng::from_env("roundtrip_replica");
    let e = *rng.pick(&[3u64, 10, 100]);
    let b = *rng.pick(&[0u64, 512, 4096]);
    // Configs are not replicated: set the same limits on both (the module must propagate trims
    // as exact ones anyway, so the replica's content does not depend on them).
    set_node_limits(&mut c, e, b, true);
    set_node_limits(&mut replica.conn(), e, b, true);
    let keys = ["a", "b"];
    let mut ids: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 4];
    for i in 0..1500 {
        let ki = rng.below(keys.len() as u64) as usize;
        for module in [false, true] {
            let key = format!("{}{}", if module { "m" } else { "n" }, keys[ki]);
            let slot = ki * 2 + module as usize;
            let mut args: Vec<Vec<u8>> = Vec::new();
            let mut r = Rng::new(rng.seed() ^ (i as u64) << 8 ^ ki as u64);
            match r.weighted(&[70, 10, 8, 4, 1]) {
                0 => {
                    args.push(xcmd(module, "XADD").into_bytes());
                    args.push(key.clone().into_bytes());
                    if r.pct(25) {
                        args.extend([b"MAXLEN".to_vec(), b"~".to_vec(), r.range(10, 120).to_string().into_bytes()]);
                        if r.pct(30) {
                            args.extend([b"LIMIT".to_vec(), r.range(1, 40).to_string().into_bytes()]);
                        }
                    } else if r.pct(5) && !ids[slot].is_empty() {
                        let id = ids[slot][r.below(ids[slot].len() as u64) as usize].clone();
                        args.extend([b"MINID".to_vec(), b"~".to_vec(), id]);
                    }
                    args.push(b"*".to_vec());
                    for f in 0..r.range(1, 3) {
                        args.push(format!("f{f}").into_bytes());
                        args.push(random_value(&mut r));
                    }
                }
                1 if !ids[slot].is_empty() => {
                    args.push(xcmd(module, "XDEL").into_bytes());
                    args.push(key.clone().into_bytes());
                    for _ in 0..r.range(1, 3) {
                        args.push(ids[slot][r.below(ids[slot].len() as u64) as usize].clone());
                    }
                }
                2 => {
                    args.push(xcmd(module, "XTRIM").into_bytes());
                    args.push(key.clone().into_bytes());
                    args.extend([b"MAXLEN".to_vec(), b"~".to_vec(), r.range(20, 150).to_string().into_bytes()]);
                }
                3 if !ids[slot].is_empty() => {
                    args.push(xcmd(module, "XTRIM").into_bytes());
                    args.push(key.clone().into_bytes());
                    let id = ids[slot][r.below(ids[slot].len() as u64) as usize].clone();
                    args.extend([b"MINID".to_vec(), if r.pct(50) { b"~".to_vec() } else { b"=".to_vec() }, id]);
                }
                4 if !ids[slot].is_empty() => {
                    // Move the last ID forward a bit (by ms), with metadata.
                    let last = parse_id(ids[slot].last().unwrap()).unwrap();
                    let id = fmt_id((last.0 + 2, 0));
                    args.push(xcmd(module, "XSETID").into_bytes());
                    args.push(key.clone().into_bytes());
                    args.push(id.into_bytes());
                    args.extend([b"ENTRIESADDED".to_vec(), b"100000".to_vec()]);
                }
                _ => {
                    args.push(xcmd(module, "XLEN").into_bytes());
                    args.push(key.clone().into_bytes());
                }
            }
            let rep = c.cmd(&args);
            if let Reply::Bulk(id) = rep {
                ids[slot].push(id);
            }
        }
    }
    let w = c.cmd(&["WAIT", "1", "5000"]);
    assert_eq!(w, Reply::Int(1), "WAIT 1 5000: {w}; replica log:\n{}", replica.log_tail(30));
    let mut rc = replica.conn();
    // Offsets equal.
    let off = |c: &mut Conn| -> String {
        let info = c.cmd(&["INFO", "replication"]).text();
        info.lines().find(|l| l.starts_with("master_repl_offset:")).map(|l| l.trim().to_string()).unwrap_or_default()
    };
    let t0 = std::time::Instant::now();
    while off(&mut c) != off(&mut rc) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(off(&mut c), off(&mut rc), "replication offsets differ");
    let mut problems = Vec::new();
    for k in keys {
        let (pn, pm) = (snap(&mut c, false, &format!("n{k}")), snap(&mut c, true, &format!("m{k}")));
        let (rn, rm) = (snap(&mut rc, false, &format!("n{k}")), snap(&mut rc, true, &format!("m{k}")));
        for (name, x, y) in [("digest", &pm.digest, &rm.digest), ("XRANGE", &pm.range, &rm.range), ("XLEN", &pm.len, &rm.len)] {
            if x != y {
                problems.push(format!("m{k}: {name} differs\n    primary: {}\n    replica: {}", show(x), show(y)));
            }
        }
        if pn.info == rn.info && pm.info != rm.info {
            problems.push(format!(
                "m{k}: XS.INFO STREAM differs (the built-in's does not)\n    primary: {}\n    replica: {}",
                show(&pm.info),
                show(&rm.info)
            ));
        }
        if pn.info != rn.info {
            report(&format!("  note: built-in n{k} XINFO differs between primary and replica (layout), not compared"));
        }
    }
    if !problems.is_empty() {
        panic!("replica differs from primary:\n  {}", problems.join("\n  "));
    }
    let lens: Vec<String> = keys.iter().map(|k| c.cmd(&["XS.LEN", &format!("m{k}")]).to_string()).collect();
    report(&format!("roundtrip replica: identical (module lengths {})", lens.join(", ")));
}
