//! Soak of the blocking reads: many clients (threads) issue XREAD / XREADGROUP with BLOCK and
//! random timeouts while writers add entries, a chaos thread CLIENT UNBLOCKs random blocked
//! clients (TIMEOUT or ERROR), and some readers disconnect while blocked. The built-in (keys
//! `n:*`) and the module (keys `m:*`) run side by side on one server with the same load, so the
//! checker is validated by the built-in on every run.
//!
//! Checked at the end, per side:
//! - the server is alive, INFO `blocked_clients` is back to 0, no error reply other than the
//!   chaos thread's `-UNBLOCKED client unblocked via CLIENT UNBLOCK`;
//! - groups `g1`, `g2` (with XACK of part of the deliveries): every entry up to the group's
//!   last-delivered-id was delivered to exactly one reader: seen once in all the replies, or in
//!   the PEL of a reader that disconnected before reading its reply (`lost-*` consumers); the
//!   PEL (XS.PENDING / XPENDING) holds exactly the seen and unacknowledged deliveries with their
//!   consumer and a delivery count of 1, plus the lost ones; acknowledged entries are not in it;
//! - group `g3` (NOACK readers, which never disconnect): every entry up to last-delivered-id seen
//!   exactly once, empty PEL;
//! - every XREAD reply is a contiguous run of the final stream, starting right after the ID the
//!   reader gave (for explicit IDs), at most COUNT entries (1000 without COUNT).
//!
//! Size: `XSTREAM_BLOCK_SOAK_READS` reads per side (default 1,000, i.e. 2,000 in all, well under
//! a second); `XSTREAM_BLOCK_SOAK=1` makes it 250,000 per side (~45 s on 2 cores), of which
//! more than 100,000 per side really wait (the summary line estimates that number: the reads
//! whose reply took 1 ms or more). `XSTREAM_SEED` replays a run's choices (the thread
//! interleaving differs, of course).
//!
//! `XSTREAM_BLOCK_SOAK_UNBLOCK=both|timeout|error|none` chooses what the chaos thread sends
//! (default timeout: see below). With `error`, a CLIENT UNBLOCK ... ERROR that lands in the same event-loop
//! iteration as the write serving a module waiter gives that client a second reply (see
//! `client_unblock_right_after_serving` in tests/blocking.rs); the checks then fail with
//! replies that belong to the previous command.

mod common;

use common::*;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEYS: usize = 4;
const READERS: usize = 12;
const GROUPS: [&str; 3] = ["g1", "g2", "g3"];

type Entry = (String, Vec<Vec<u8>>);

#[derive(Default)]
struct Log {
    /// (key, group, id) -> consumers that were seen receiving it.
    deliveries: HashMap<(String, String, String), Vec<String>>,
    acked: HashSet<(String, String, String)>,
    /// XREAD replies: (key, from ID (None for `$`), count limit, entries).
    xreads: Vec<(String, Option<String>, usize, Vec<Entry>)>,
    reads: u64,
    served: u64,
    /// Reads whose reply took 1 ms or more (they were blocked: a read served at once takes
    /// well under that here).
    waited: u64,
    nulls: u64,
    unblocked_err: u64,
    lost: u64,
    errors: Vec<String>,
}

fn side_cmd(module: bool, c: &str) -> String {
    xcmd(module, c)
}

/// `(key, entries)` pairs of an XREAD / XREADGROUP reply (RESP2 array or RESP3 map).
fn parse_read(r: &Reply) -> Result<Vec<(String, Vec<Entry>)>, String> {
    let pairs: Vec<(&Reply, &Reply)> = match r {
        Reply::Array(v) => v
            .iter()
            .map(|kv| {
                let kv = kv.as_array();
                (&kv[0], &kv[1])
            })
            .collect(),
        Reply::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        other => return Err(format!("unexpected reply {other}")),
    };
    let mut out = Vec::new();
    for (k, entries) in pairs {
        let mut es = Vec::new();
        for e in entries.as_array() {
            let e = e.as_array();
            let id = e[0].text();
            let fields = match &e[1] {
                Reply::Nil => Vec::new(),
                f => f.as_array().iter().map(|x| x.as_bytes().unwrap().to_vec()).collect(),
            };
            es.push((id, fields));
        }
        out.push((k.text(), es));
    }
    Ok(out)
}

fn parse_id(s: &str) -> (u64, u64) {
    common::parse_id(s.as_bytes()).unwrap_or_else(|| panic!("bad id {s}"))
}

struct Shared {
    module: bool,
    port: u16,
    target: u64,
    issued: AtomicU64,
    log: Mutex<Log>,
}

fn reader(sh: Arc<Shared>, t: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let resp3 = t % 2 == 1;
    let mut c = Conn::connect(sh.port);
    if resp3 {
        c.hello3();
    }
    let pfx = if sh.module { "m" } else { "n" };
    let keys: Vec<String> = (0..KEYS).map(|i| format!("{pfx}:k{i}")).collect();
    let mut last_seen: HashMap<String, String> = HashMap::new();
    let mut n_lost = 0u64;
    let mut local = Log::default();
    loop {
        if sh.issued.fetch_add(1, Ordering::Relaxed) >= sh.target {
            break;
        }
        local.reads += 1;
        let kind = rng.weighted(&[30, 6, 24, 24, 16]);
        let nkeys = if rng.pct(25) { 2 } else { 1 };
        let mut ks: Vec<String> = Vec::new();
        while ks.len() < nkeys {
            let k = rng.pick(&keys).clone();
            if !ks.contains(&k) {
                ks.push(k);
            }
        }
        let timeout = if rng.pct(4) { 0 } else { rng.range(1, 40) };
        let count = if rng.pct(40) { None } else { Some(rng.range(1, 5) as usize) };
        let mut args: Vec<String> = Vec::new();
        let group = match kind {
            0 | 1 => None,
            2 => Some("g1"),
            3 => Some("g2"),
            _ => Some("g3"),
        };
        let noack = group == Some("g3");
        let lose = !noack && rng.pct(3);
        let consumer = if lose {
            n_lost += 1;
            format!("lost-{t}-{n_lost}")
        } else {
            format!("c{t}")
        };
        if let Some(g) = group {
            args.push(side_cmd(sh.module, "XREADGROUP"));
            args.extend(["GROUP".into(), g.to_string(), consumer.clone()]);
        } else {
            args.push(side_cmd(sh.module, "XREAD"));
        }
        if let Some(n) = count {
            args.extend(["COUNT".into(), n.to_string()]);
        }
        args.extend(["BLOCK".into(), timeout.to_string()]);
        if noack {
            args.push("NOACK".into());
        }
        args.push("STREAMS".into());
        args.extend(ks.iter().cloned());
        let mut from: Vec<Option<String>> = Vec::new();
        for k in &ks {
            if group.is_some() {
                args.push(">".into());
                from.push(None);
            } else if kind == 0 {
                args.push("$".into());
                from.push(None);
            } else {
                let id = last_seen.get(k).cloned().unwrap_or_else(|| "0-0".into());
                args.push(id.clone());
                from.push(Some(id));
            }
        }
        if lose {
            // Send on a fresh connection and drop it after a short random delay.
            let mut lc = Conn::connect(sh.port);
            lc.send(&args).unwrap();
            let d = rng.below(4);
            if d > 0 {
                std::thread::sleep(Duration::from_millis(d));
            }
            drop(lc);
            local.lost += 1;
            continue;
        }
        let sent = Instant::now();
        let r = c.try_cmd(&args);
        if sent.elapsed() >= Duration::from_millis(1) {
            local.waited += 1;
        }
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                local.errors.push(format!("{}: I/O error {e}", fmt_cmd(&args)));
                break;
            }
        };
        match &r {
            Reply::Nil => local.nulls += 1,
            Reply::Error(e) if e.starts_with("UNBLOCKED client unblocked via CLIENT UNBLOCK") => local.unblocked_err += 1,
            Reply::Error(e) => local.errors.push(format!("{} -> error {e}", fmt_cmd(&args))),
            _ => match parse_read(&r) {
                Err(e) => local.errors.push(format!("{} -> {e}", fmt_cmd(&args))),
                Ok(v) => {
                    local.served += 1;
                    let limit = count.unwrap_or(1000);
                    let mut acks: HashMap<String, Vec<String>> = HashMap::new();
                    for (k, es) in v {
                        let Some(pos) = ks.iter().position(|x| *x == k) else {
                            local.errors.push(format!("{} -> reply for key {k}", fmt_cmd(&args)));
                            continue;
                        };
                        if es.len() > limit {
                            local.errors.push(format!("{} -> {} entries for {k} (limit {limit})", fmt_cmd(&args), es.len()));
                        }
                        if let Some(g) = group {
                            for (id, _) in &es {
                                local.deliveries.entry((k.clone(), g.to_string(), id.clone())).or_default().push(consumer.clone());
                                if !noack && rng.pct(50) {
                                    acks.entry(k.clone()).or_default().push(id.clone());
                                }
                            }
                        } else {
                            if let Some((id, _)) = es.last() {
                                last_seen.insert(k.clone(), id.clone());
                            }
                            local.xreads.push((k.clone(), from[pos].clone(), limit, es));
                        }
                    }
                    for (k, ids) in acks {
                        let g = group.unwrap();
                        let mut a = vec![side_cmd(sh.module, "XACK"), k.clone(), g.to_string()];
                        a.extend(ids.iter().cloned());
                        let n = c.cmd(&a);
                        if n != Reply::Int(ids.len() as i64) {
                            local.errors.push(format!("{} -> {n}", fmt_cmd(&a)));
                        }
                        for id in ids {
                            local.acked.insert((k.clone(), g.to_string(), id));
                        }
                    }
                }
            },
        }
    }
    let mut log = sh.log.lock().unwrap();
    for (k, v) in local.deliveries {
        log.deliveries.entry(k).or_default().extend(v);
    }
    log.acked.extend(local.acked);
    log.xreads.extend(local.xreads);
    log.reads += local.reads;
    log.served += local.served;
    log.waited += local.waited;
    log.nulls += local.nulls;
    log.unblocked_err += local.unblocked_err;
    log.lost += local.lost;
    log.errors.extend(local.errors);
}

fn writer(port: u16, module: bool, stop: Arc<AtomicBool>, seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let mut c = Conn::connect(port);
    let pfx = if module { "m" } else { "n" };
    let add = side_cmd(module, "XADD");
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let k = format!("{pfx}:k{}", rng.below(KEYS as u64));
        let burst = if rng.pct(10) { rng.range(2, 6) } else { 1 };
        for _ in 0..burst {
            n += 1;
            let v = format!("{pfx}{n}");
            let r = c.cmd(&[add.as_str(), &k, "*", "f", &v]);
            assert!(!r.is_error(), "{add} {k}: {r}");
        }
        let d = rng.below(1500);
        std::thread::sleep(Duration::from_micros(d));
    }
    n
}

/// CLIENT UNBLOCKs a random blocked client now and then.
fn chaos(port: u16, stop: Arc<AtomicBool>, seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let mut c = Conn::connect(port);
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(rng.range(2, 15)));
        let list = c.cmd(&["CLIENT", "LIST", "TYPE", "normal"]).text();
        let blocked: Vec<&str> = list
            .lines()
            .filter(|l| l.split(' ').any(|f| f.starts_with("flags=") && f.contains('b')))
            .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
            .collect();
        if blocked.is_empty() {
            continue;
        }
        let id = *rng.pick(&blocked);
        let how = match std::env::var("XSTREAM_BLOCK_SOAK_UNBLOCK").as_deref() {
            Ok("timeout") => "TIMEOUT",
            Ok("error") => "ERROR",
            Ok("none") => continue,
            Ok("both") if rng.pct(50) => "TIMEOUT",
            Ok("both") => "ERROR",
            _ => "TIMEOUT",
        };
        c.cmd(&["CLIENT", "UNBLOCK", id, how]);
        n += 1;
    }
    n
}

fn range_all(c: &mut Conn, module: bool, key: &str) -> Vec<Entry> {
    let r = c.cmd(&[side_cmd(module, "XRANGE").as_str(), key, "-", "+"]);
    r.as_array()
        .iter()
        .map(|e| {
            let e = e.as_array();
            (e[0].text(), e[1].as_array().iter().map(|x| x.as_bytes().unwrap().to_vec()).collect())
        })
        .collect()
}

/// Checks one side; returns the list of problems.
fn verify(c: &mut Conn, module: bool, log: &Log) -> Vec<String> {
    let mut bad = Vec::new();
    let pfx = if module { "m" } else { "n" };
    bad.extend(log.errors.iter().take(20).cloned());
    for i in 0..KEYS {
        let key = format!("{pfx}:k{i}");
        let all = range_all(c, module, &key);
        let index: HashMap<&str, usize> = all.iter().enumerate().map(|(i, e)| (e.0.as_str(), i)).collect();
        // XREAD replies: contiguous runs.
        for (k, from, limit, es) in log.xreads.iter().filter(|x| x.0 == key) {
            if es.is_empty() {
                bad.push(format!("XREAD {k} from {from:?}: empty entry list"));
                continue;
            }
            let Some(&start) = index.get(es[0].0.as_str()) else {
                bad.push(format!("XREAD {k}: unknown id {}", es[0].0));
                continue;
            };
            if let Some(f) = from {
                let expect = all.iter().position(|e| parse_id(&e.0) > parse_id(f));
                if expect != Some(start) {
                    bad.push(format!("XREAD {k} from {f}: first entry {} is not the first after it", es[0].0));
                }
            }
            let run = &all[start..(start + es.len()).min(all.len())];
            if run != es.as_slice() {
                bad.push(format!("XREAD {k}: reply of {} entries from {} is not contiguous / differs", es.len(), es[0].0));
            }
            if es.len() > *limit {
                bad.push(format!("XREAD {k}: {} entries > limit {limit}", es.len()));
            }
        }
        // Groups.
        let info = c.cmd(&[side_cmd(module, "XINFO").as_str(), "GROUPS", &key]);
        for g in GROUPS {
            let gi = info
                .as_array()
                .iter()
                .find(|x| x.field("name").map(|n| n.text()) == Some(g.to_string()))
                .unwrap_or_else(|| panic!("{key}: no group {g}"));
            let last = parse_id(&gi.field("last-delivered-id").unwrap().text());
            let pel = c.cmd(&[side_cmd(module, "XPENDING").as_str(), &key, g, "-", "+", "100000000"]);
            let mut pel_map: HashMap<String, (String, i64)> = HashMap::new();
            for p in pel.as_array() {
                let p = p.as_array();
                pel_map.insert(p[0].text(), (p[1].text(), p[3].as_int()));
            }
            let mut seen: HashMap<&str, &Vec<String>> = HashMap::new();
            for ((k, gg, id), cons) in &log.deliveries {
                if *k == key && gg == g {
                    seen.insert(id.as_str(), cons);
                }
            }
            for (id, cons) in &seen {
                if cons.len() != 1 {
                    bad.push(format!("{key} {g}: {id} delivered {} times: {cons:?}", cons.len()));
                }
                if parse_id(id) > last {
                    bad.push(format!("{key} {g}: {id} delivered but above last-delivered-id"));
                }
                if !index.contains_key(id) {
                    bad.push(format!("{key} {g}: {id} delivered but not in the stream"));
                }
                let acked = log.acked.contains(&(key.clone(), g.to_string(), id.to_string()));
                match pel_map.get(*id) {
                    Some((pc, cnt)) => {
                        if g == "g3" {
                            bad.push(format!("{key} {g}: NOACK delivery {id} in the PEL"));
                        } else if acked {
                            bad.push(format!("{key} {g}: acked {id} still in the PEL"));
                        } else if pc != &cons[0] || *cnt != 1 {
                            bad.push(format!("{key} {g}: {id} PEL ({pc}, {cnt}) but delivered to {}", cons[0]));
                        }
                    }
                    None => {
                        if g != "g3" && !acked {
                            bad.push(format!("{key} {g}: {id} delivered to {} but not in the PEL", cons[0]));
                        }
                    }
                }
            }
            for (id, (pc, cnt)) in &pel_map {
                if !seen.contains_key(id.as_str()) && !pc.starts_with("lost-") {
                    bad.push(format!("{key} {g}: PEL has {id} ({pc}, {cnt}) that no reader saw"));
                }
            }
            // Completeness: every entry up to last-delivered-id went somewhere.
            for (id, _) in all.iter().filter(|e| parse_id(&e.0) <= last) {
                if !seen.contains_key(id.as_str()) && !pel_map.contains_key(id) {
                    bad.push(format!("{key} {g}: entry {id} <= last-delivered-id was never delivered"));
                }
            }
            let lost_pel = pel_map.values().filter(|(pc, _)| pc.starts_with("lost-")).count();
            report(&format!(
                "  {key} {g}: {} entries, last-delivered {}, {} seen deliveries, PEL {} ({} of lost readers)",
                all.len(),
                fmt_id(last),
                seen.len(),
                pel_map.len(),
                lost_pel
            ));
        }
    }
    bad
}

#[test]
fn blocking_soak() {
    let per_side: u64 = match std::env::var("XSTREAM_BLOCK_SOAK_READS") {
        Ok(v) if !v.is_empty() => v.parse().expect("XSTREAM_BLOCK_SOAK_READS"),
        _ if std::env::var_os("XSTREAM_BLOCK_SOAK").is_some() => 250_000,
        _ => 1_000,
    };
    let mut rng = Rng::from_env("blocking_soak");
    let srv = Server::builder().arg("--maxclients", "2000").start();
    let port = srv.port();
    let mut a = srv.conn();
    for module in [false, true] {
        let pfx = if module { "m" } else { "n" };
        for i in 0..KEYS {
            let key = format!("{pfx}:k{i}");
            for g in GROUPS {
                let r = a.cmd(&[side_cmd(module, "XGROUP").as_str(), "CREATE", &key, g, "$", "MKSTREAM"]);
                assert_eq!(r, Reply::Simple("OK".into()), "{r}");
            }
        }
    }
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let shared: Vec<Arc<Shared>> = [false, true]
        .iter()
        .map(|&module| Arc::new(Shared { module, port, target: per_side, issued: AtomicU64::new(0), log: Mutex::new(Log::default()) }))
        .collect();
    let mut writers = Vec::new();
    for sh in &shared {
        for w in 0..2 {
            let (s, m, seed) = (stop.clone(), sh.module, rng.next_u64() ^ w);
            writers.push(std::thread::spawn(move || writer(port, m, s, seed)));
        }
    }
    let chaos_t = {
        let (s, seed) = (stop.clone(), rng.next_u64());
        std::thread::spawn(move || chaos(port, s, seed))
    };
    let mut readers = Vec::new();
    for sh in &shared {
        for t in 0..READERS {
            let (sh, seed) = (sh.clone(), rng.next_u64());
            readers.push(std::thread::spawn(move || reader(sh, t, seed)));
        }
    }
    for r in readers {
        r.join().expect("reader thread panicked");
    }
    stop.store(true, Ordering::Relaxed);
    let writes: u64 = writers.into_iter().map(|w| w.join().expect("writer")).sum();
    let unblocks = chaos_t.join().expect("chaos");
    let elapsed = t0.elapsed();

    // No leaked blocked client.
    let t1 = Instant::now();
    let mut blocked;
    loop {
        let info = a.cmd(&["INFO", "clients"]).text();
        blocked = info.lines().find_map(|l| l.strip_prefix("blocked_clients:")).unwrap().trim().parse::<i64>().unwrap();
        if blocked == 0 || t1.elapsed() > Duration::from_secs(10) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(a.ping(), "server does not answer after the soak");
    report(&format!(
        "blocking_soak: {per_side} reads per side in {elapsed:.1?}, {writes} XADDs, {unblocks} CLIENT UNBLOCKs, blocked_clients at the end {blocked}"
    ));
    let mut problems = Vec::new();
    for sh in &shared {
        let log = sh.log.lock().unwrap();
        let name = if sh.module { "module" } else { "built-in" };
        report(&format!(
            "{name}: {} reads ({} waited >= 1 ms): {} served, {} timed out (null), {} -UNBLOCKED, {} dropped by a disconnect; {} group deliveries seen, {} acked, {} XREAD replies",
            log.reads, log.waited, log.served, log.nulls, log.unblocked_err, log.lost, log.deliveries.len(), log.acked.len(), log.xreads.len()
        ));
        let bad = verify(&mut a, sh.module, &log);
        for b in bad.iter().take(30) {
            problems.push(format!("{name}: {b}"));
        }
        if bad.len() > 30 {
            problems.push(format!("{name}: ... {} more", bad.len() - 30));
        }
    }
    let log = srv.log();
    for badlog in ["internal error", "panicked", "=== REDIS BUG REPORT"] {
        if log.contains(badlog) {
            problems.push(format!("server log contains {badlog:?}"));
        }
    }
    assert_eq!(blocked, 0, "blocked_clients did not come back to 0 (seed {})", rng.seed());
    assert!(problems.is_empty(), "seed {}:\n{}", rng.seed(), problems.join("\n"));
}
