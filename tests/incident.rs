//! The production incident from the seed material (seeds 003/004: a stream used as an order queue,
//! consumers that die after reading, the PEL growing without bound, XPENDING to diagnose,
//! XCLAIM to a dead-letter consumer, XTRIM MINID to cap the backlog, a bulk XACK to clean up),
//! replayed step by step on the built-in commands (key `incident:n:orders`) and on the module's
//! (`incident:m:orders`) on one server. Every step's replies must be identical after the clock
//! normalisation of tests/common/groups.rs; a few hard asserts check the story itself.
//!
//! The scenario runs once in RESP2 and once in RESP3 (fresh keys). Explicit IDs everywhere; the
//! dead consumers' deliveries are back-dated with `XCLAIM ... TIME 1600000000000 JUSTID` (their
//! owner unchanged) so that "idle for more than an hour" is deterministic.

mod common;

use common::groups::*;
use common::*;

/// Orders are produced at ms T0 + i.
const T0: u64 = 1_700_000_000_000;
const OLD_TIME: &str = "1600000000000";

struct Duo {
    conn: Conn,
    keys: [String; 2],
    module: bool,
    norm: Normalizer,
    transcript: Vec<String>,
    steps: usize,
    resp: &'static str,
}

impl Duo {
    /// Runs one command on both sides (`{k}` is the stream key, the command name is the
    /// built-in's), asserts identical normalised replies, returns side A's parsed reply.
    fn run(&mut self, args: &[&str]) -> Reply {
        let render = |side: usize| -> Vec<Vec<u8>> {
            args.iter()
                .enumerate()
                .map(|(i, a)| {
                    if i == 0 && side == 1 && self.module && a.starts_with('X') {
                        format!("XS.{}", &a[1..]).into_bytes()
                    } else if *a == "{k}" {
                        self.keys[side].clone().into_bytes()
                    } else {
                        a.as_bytes().to_vec()
                    }
                })
                .collect()
        };
        let ca = render(0);
        let cb = render(1);
        let (ra, ba) = self.conn.cmd_raw(&ca);
        let (_, bb) = self.conn.cmd_raw(&cb);
        let now = now_ms();
        let na = self.norm.normalize(&ca, &ba, 0, now);
        let nb = self.norm.normalize(&cb, &bb, 1, now);
        self.steps += 1;
        self.transcript.push(format!("#{} {} -> {}", self.steps, fmt_cmd(&ca), show(&ba, 300)));
        if na != nb {
            let tail: Vec<&String> = self.transcript.iter().rev().take(15).rev().collect();
            panic!(
                "incident ({}): step #{} differs\n  A: {}\n  B: {}\n  A reply: {}\n  B reply: {}\n  A normalised: {}\n  B normalised: {}\n  transcript (side A):\n    {}",
                self.resp,
                self.steps,
                fmt_cmd(&ca),
                fmt_cmd(&cb),
                show(&ba, 4000),
                show(&bb, 4000),
                show(&na, 4000),
                show(&nb, 4000),
                tail.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n    ")
            );
        }
        ra
    }

    fn runv(&mut self, args: &[String]) -> Reply {
        let v: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        self.run(&v)
    }

    fn pending_count(&mut self) -> i64 {
        let r = self.run(&["XPENDING", "{k}", "billing"]);
        r.as_array()[0].as_int()
    }

    /// Pending IDs (side A) of the group, optionally of one consumer.
    fn pending_ids(&mut self, consumer: Option<&str>) -> Vec<String> {
        let mut a = vec!["XPENDING", "{k}", "billing", "-", "+", "10000"];
        if let Some(c) = consumer {
            a.push(c);
        }
        let r = self.run(&a);
        r.as_array().iter().map(|e| e.as_array()[0].text()).collect()
    }

    /// XREADGROUP > for one consumer; returns the delivered IDs.
    fn read(&mut self, consumer: &str, count: usize) -> Vec<String> {
        let c = count.to_string();
        let r = self.run(&["XREADGROUP", "GROUP", "billing", consumer, "COUNT", &c, "STREAMS", "{k}", ">"]);
        entry_ids(&r)
    }

    fn ack(&mut self, ids: &[String]) -> i64 {
        if ids.is_empty() {
            return 0;
        }
        let mut a: Vec<String> = vec!["XACK".into(), "{k}".into(), "billing".into()];
        a.extend(ids.iter().cloned());
        self.runv(&a).as_int()
    }
}

/// The entry IDs of an XREADGROUP/XREAD reply (one stream), RESP2 or RESP3; `[id, nil]` included.
fn entry_ids(r: &Reply) -> Vec<String> {
    let entries = match r {
        Reply::Nil => return Vec::new(),
        Reply::Array(v) => v[0].as_array()[1].clone(),
        Reply::Map(kv) => kv[0].1.clone(),
        o => panic!("unexpected read reply {o}"),
    };
    entries.as_array().iter().map(|e| e.as_array()[0].text()).collect()
}

/// How many `[id, nil]` entries a read reply has.
fn nil_entries(r: &Reply) -> usize {
    let entries = match r {
        Reply::Nil => return 0,
        Reply::Array(v) => v[0].as_array()[1].clone(),
        Reply::Map(kv) => kv[0].1.clone(),
        o => panic!("unexpected read reply {o}"),
    };
    entries.as_array().iter().filter(|e| e.as_array()[1].is_nil()).count()
}

fn order_id(i: u64) -> String {
    format!("{}-0", T0 + i)
}

fn produce(d: &mut Duo, from: u64, to: u64) {
    for i in from..to {
        let id = order_id(i);
        let oid = format!("ord-{i:05}");
        let amount = format!("{}.{:02}", 10 + i * 7 % 90, i % 100);
        let user = format!("u{}", i % 13);
        let r = d.run(&["XADD", "{k}", &id, "order_id", &oid, "amount", &amount, "user", &user, "status", "created"]);
        assert_eq!(r, Reply::Bulk(id.clone().into_bytes()));
    }
}

fn scenario(server: &Server, module: bool, resp3: bool) -> usize {
    let mut conn = server.conn();
    set_node_limits(&mut conn, 16, 0, module);
    if resp3 {
        conn.hello3();
    }
    let resp = if resp3 { "RESP3" } else { "RESP2" };
    let sfx = if resp3 { "3" } else { "2" };
    let keys = [format!("incident:n:orders{sfx}"), format!("incident:{}:orders{sfx}", if module { "m" } else { "a" })];
    let norm = Normalizer { key_pairs: vec![(keys[1].clone().into_bytes(), keys[0].clone().into_bytes())], loose_names: true };
    let mut d = Duo { conn, keys, module, norm, transcript: Vec::new(), steps: 0, resp };

    // --- Day 0: the queue is set up; three workers share the group "billing". -----------------
    assert_eq!(d.run(&["XGROUP", "CREATE", "{k}", "billing", "$", "MKSTREAM"]), Reply::Simple("OK".into()));
    // A second group (auditing) that reads everything from the start, for lag / entries-read.
    d.run(&["XGROUP", "CREATE", "{k}", "audit", "0", "ENTRIESREAD", "0"]);
    for w in ["worker-1", "worker-2", "worker-3"] {
        assert_eq!(d.run(&["XGROUP", "CREATECONSUMER", "{k}", "billing", w]), Reply::Int(1));
    }
    produce(&mut d, 0, 60);
    d.run(&["XINFO", "GROUPS", "{k}"]);
    d.run(&["XINFO", "STREAM", "{k}"]);

    // Normal operation: every worker reads 10, worker-1 and worker-2 ack, worker-3 crashes after
    // reading (its process died between XREADGROUP and XACK).
    let mut expected_pending = 0i64;
    let mut max_pending = 0i64;
    let mut stale: Vec<String> = Vec::new(); // delivered to dead workers, never acked
    for round in 0..2 {
        for w in ["worker-1", "worker-2", "worker-3"] {
            let ids = d.read(w, 10);
            assert_eq!(ids.len(), 10, "round {round}: {w} got {ids:?}");
            expected_pending += 10;
            if w != "worker-3" {
                assert_eq!(d.ack(&ids), 10);
                expected_pending -= 10;
            } else {
                stale.extend(ids);
            }
            assert_eq!(d.pending_count(), expected_pending);
        }
    }
    assert_eq!(expected_pending, 20);

    // --- The incident: traffic spike, worker-2 starts dying after reading too. ---------------
    produce(&mut d, 60, 260);
    for round in 0..6 {
        for w in ["worker-1", "worker-2"] {
            let ids = d.read(w, 15);
            assert_eq!(ids.len(), 15, "spike round {round}: {w}");
            expected_pending += 15;
            if w == "worker-1" && round % 2 == 0 {
                assert_eq!(d.ack(&ids), 15);
                expected_pending -= 15;
            } else if w == "worker-2" {
                stale.extend(ids);
            } else {
                // worker-1 is slow: these stay pending (but fresh) until it catches up.
            }
            let p = d.pending_count();
            assert_eq!(p, expected_pending);
            max_pending = max_pending.max(p);
        }
        d.run(&["XINFO", "GROUPS", "{k}"]);
    }
    // The PEL grew to: 20 (worker-3) + 6*15 (worker-2) + 3*15 (worker-1 unacked).
    assert_eq!(max_pending, 20 + 90 + 45);
    assert_eq!(stale.len(), 110);

    // --- Diagnosis. -------------------------------------------------------------------------
    let summary = d.run(&["XPENDING", "{k}", "billing"]);
    let per_consumer = summary.as_array()[3].as_array().to_vec();
    assert_eq!(per_consumer.len(), 3, "{summary}");
    d.run(&["XPENDING", "{k}", "billing", "-", "+", "5", "worker-3"]);
    d.run(&["XPENDING", "{k}", "billing", "IDLE", "0", "-", "+", "10"]);
    d.run(&["XINFO", "CONSUMERS", "{k}", "billing"]);
    d.run(&["XINFO", "STREAM", "{k}", "FULL", "COUNT", "5"]);
    // Nothing is idle for an hour yet (all deliveries are recent).
    let r = d.run(&["XPENDING", "{k}", "billing", "IDLE", "3600000", "-", "+", "1000"]);
    assert!(r.as_array().is_empty(), "{r}");
    // Time passes for the dead workers: their deliveries are back-dated (owner unchanged).
    for (w, ids) in [("worker-3", stale[..20].to_vec()), ("worker-2", stale[20..].to_vec())] {
        let mut a: Vec<String> = vec!["XCLAIM".into(), "{k}".into(), "billing".into(), w.into(), "0".into()];
        a.extend(ids.iter().cloned());
        a.extend(["TIME".into(), OLD_TIME.into(), "JUSTID".into()]);
        let r = d.runv(&a);
        assert_eq!(r.as_array().len(), ids.len());
    }
    let idle = d.run(&["XPENDING", "{k}", "billing", "IDLE", "3600000", "-", "+", "1000"]);
    assert_eq!(idle.as_array().len(), stale.len(), "only the dead workers' entries are idle");
    d.run(&["XPENDING", "{k}", "billing", "IDLE", "3600000", "-", "+", "7", "worker-2"]);
    d.run(&["XINFO", "STREAM", "{k}", "FULL", "COUNT", "3"]);

    // --- Remediation 1: park the stale messages on a dead-letter consumer. --------------------
    // The first 50 stale IDs by XCLAIM (min-idle 1 h: only the stale ones move)...
    let mut a: Vec<String> = vec!["XCLAIM".into(), "{k}".into(), "billing".into(), "dead-letter".into(), "3600000".into()];
    a.extend(stale[..50].iter().cloned());
    // ... plus some fresh IDs of worker-1 that must NOT move (not idle enough).
    let fresh = d.pending_ids(Some("worker-1"));
    assert_eq!(fresh.len(), 45);
    a.extend(fresh[..5].iter().cloned());
    a.push("JUSTID".into());
    let moved = d.runv(&a);
    assert_eq!(moved.as_array().len(), 50);
    // ... the rest by XAUTOCLAIM, page by page, following the cursor.
    let mut cursor = "0-0".to_string();
    let mut pages = 0;
    let mut autoclaimed = 0;
    loop {
        let r = d.run(&["XAUTOCLAIM", "{k}", "billing", "dead-letter", "3600000", &cursor, "COUNT", "25"]);
        let v = r.as_array();
        autoclaimed += v[1].as_array().len();
        assert!(v[2].as_array().is_empty());
        cursor = v[0].text();
        pages += 1;
        if cursor == "0-0" {
            break;
        }
        assert!(pages < 20);
    }
    assert_eq!(autoclaimed, 60, "the rest of the stale entries");
    let dl = d.pending_ids(Some("dead-letter"));
    assert_eq!(dl.len(), 110);
    d.run(&["XPENDING", "{k}", "billing"]);
    d.run(&["XINFO", "CONSUMERS", "{k}", "billing"]);
    // The dead workers are removed (they own nothing any more).
    assert_eq!(d.run(&["XGROUP", "DELCONSUMER", "{k}", "billing", "worker-3"]), Reply::Int(0));
    assert_eq!(d.run(&["XGROUP", "DELCONSUMER", "{k}", "billing", "worker-2"]), Reply::Int(0));

    // --- Remediation 2: cap the backlog with XTRIM MINID (memory alarm). ----------------------
    let len_before = d.run(&["XLEN", "{k}"]).as_int();
    assert_eq!(len_before, 260);
    let minid = order_id(100);
    let trimmed = d.run(&["XTRIM", "{k}", "MINID", &minid]).as_int();
    assert_eq!(trimmed, 100);
    d.run(&["XINFO", "STREAM", "{k}"]);
    d.run(&["XINFO", "GROUPS", "{k}"]);
    // The dead-letter PEL still references the trimmed entries: history shows [id, nil].
    let hist = d.run(&["XREADGROUP", "GROUP", "billing", "dead-letter", "COUNT", "1000", "STREAMS", "{k}", "0"]);
    let dead_below: Vec<&String> = dl.iter().filter(|id| parse_id(id.as_bytes()) < parse_id(minid.as_bytes())).collect();
    assert_eq!(entry_ids(&hist).len(), 110);
    assert_eq!(nil_entries(&hist), dead_below.len());
    assert!(!dead_below.is_empty());
    // XCLAIM of a trimmed ID drops it from the PEL (nothing returned); FORCE on an ID that is not
    // pending but exists creates a PEL entry.
    let r = d.run(&["XCLAIM", "{k}", "billing", "dead-letter", "0", dead_below[0].as_str()]);
    assert!(r.as_array().is_empty());
    // 250 was never delivered: FORCE makes it pending (a later `>` read delivers it again).
    let never = order_id(250);
    d.run(&["XCLAIM", "{k}", "billing", "dead-letter", "0", &never, "FORCE", "JUSTID"]);
    d.run(&["XCLAIM", "{k}", "billing", "dead-letter", "0", &order_id(10), "FORCE", "JUSTID"]);
    // XAUTOCLAIM over the group PEL reports every remaining deleted ID (the dead-letter's and
    // worker-1's trimmed ones) and drops them.
    let all_below = d.pending_ids(None).iter().filter(|id| parse_id(id.as_bytes()) < parse_id(minid.as_bytes())).count();
    assert!(all_below >= dead_below.len() - 1);
    let r = d.run(&["XAUTOCLAIM", "{k}", "billing", "dead-letter", "0", "0-0", "COUNT", "1000", "JUSTID"]);
    let deleted = r.as_array()[2].as_array().len();
    assert_eq!(deleted, all_below);
    let r = d.run(&["XPENDING", "{k}", "billing", "-", &format!("({minid}"), "1000"]);
    assert!(r.as_array().is_empty(), "no trimmed entry is pending any more: {r}");
    d.run(&["XINFO", "STREAM", "{k}", "FULL", "COUNT", "0"]);
    d.run(&["XPENDING", "{k}", "billing", "-", "+", "20"]);

    // --- Remediation 3: a replacement worker drains what is left; bulk XACK. ------------------
    assert_eq!(d.run(&["XGROUP", "CREATECONSUMER", "{k}", "billing", "worker-4"]), Reply::Int(1));
    loop {
        let ids = d.read("worker-4", 25);
        if ids.is_empty() {
            break;
        }
        assert_eq!(d.ack(&ids) as usize, ids.len());
    }
    let pending = d.pending_ids(None);
    let before = d.pending_count();
    assert_eq!(pending.len() as i64, before);
    assert!(before > 0);
    let acked = d.ack(&pending);
    assert_eq!(acked, before, "bulk XACK acks every pending entry");
    assert_eq!(d.pending_count(), 0);
    let summary = d.run(&["XPENDING", "{k}", "billing"]);
    assert_eq!(summary.as_array()[1], Reply::Nil, "{summary}");
    // Acking again is a no-op.
    assert_eq!(d.ack(&pending[..pending.len().min(10)]), 0);
    d.run(&["XINFO", "GROUPS", "{k}"]);
    d.run(&["XINFO", "CONSUMERS", "{k}", "billing"]);
    // The audit group, never read, still lags behind a trimmed stream.
    d.run(&["XREADGROUP", "GROUP", "audit", "auditor", "COUNT", "3", "NOACK", "STREAMS", "{k}", ">"]);
    d.run(&["XINFO", "GROUPS", "{k}"]);
    d.run(&["XGROUP", "SETID", "{k}", "audit", "$", "ENTRIESREAD", "260"]);
    d.run(&["XINFO", "GROUPS", "{k}"]);
    d.run(&["XINFO", "STREAM", "{k}", "FULL"]);
    d.run(&["XINFO", "STREAM", "{k}", "FULL", "COUNT", "0"]);
    report(&format!(
        "incident ({resp}): {} steps, replies identical; PEL peaked at {max_pending}, {} stale entries dead-lettered, {} trimmed while pending, bulk XACK of {acked}",
        d.steps,
        stale.len(),
        dead_below.len()
    ));
    d.steps
}

/// Built-in vs module.
#[test]
fn incident_replay() {
    let server = Server::start();
    let a = scenario(&server, true, false);
    let b = scenario(&server, true, true);
    report(&format!("incident: {} steps (RESP2 + RESP3), 0 differences", a + b));
}

/// Built-in vs built-in: the scenario and its normalisation are deterministic.
#[test]
fn incident_replay_aa() {
    let server = Server::start_plain();
    scenario(&server, false, false);
    scenario(&server, false, true);
}
