//! Reliable queues under hostile use (issue 34): the seven reproducers of the issue, each on
//! RESP2 and RESP3, with the behaviour chosen (docs/queues.md, "Deleted entries, failed dead
//! letters, entries ahead of the group").
//!
//! 1. pending entries deleted or trimmed from the stream leave the PEL of a group with a
//!    policy (at once; those deleted before the policy when it is set): `>` reads no longer
//!    walk past them;
//! 2. a `>` read dead-letters until its first COUNT due entries can be delivered: it never
//!    replies an empty entry list, a BLOCK reader waits;
//! 3. entries released by the CONSUMERTTL timer wake blocked `>` readers, and a consumer
//!    blocked in a read is not expired;
//! 4. delivery counts and times a policy reads reach replicas and the AOF (history reads);
//! 5. a dead letter whose append fails leaves the entry pending and is not counted;
//! 6. XS.GROUP SCHEDULE from a client is refused (it re-delivered acknowledged entries);
//! 7. an entry above the group's last ID is never dead-lettered (its `>` read would deliver it
//!    after).

mod common;

use common::*;
use std::time::{Duration, Instant};

fn ok(r: Reply) {
    assert_eq!(r, Reply::Simple("OK".into()), "{r}");
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

/// `[[key, entries]]` (RESP2) or `{key: entries}` (RESP3) of a read serving one stream.
fn one_stream(resp3: bool, key: &str, entries: Vec<Reply>) -> Reply {
    if resp3 {
        Reply::Map(vec![(bulk(key), Reply::Array(entries))])
    } else {
        Reply::Array(vec![Reply::Array(vec![bulk(key), Reply::Array(entries)])])
    }
}

fn entry(id: &str, f: &str, v: &str) -> Reply {
    Reply::Array(vec![bulk(id), Reply::Array(vec![bulk(f), bulk(v)])])
}

/// The group's pending count (XS.PENDING summary).
fn pending_count(c: &mut Conn, key: &str, group: &str) -> i64 {
    c.cmd(&["XS.PENDING", key, group]).as_array()[0].as_int()
}

/// (id, delivery count) of every pending entry of `g` on `s`.
fn pending_counts(c: &mut Conn) -> Vec<(String, i64)> {
    c.cmd(&["XS.PENDING", "s", "g", "-", "+", "1000"]).as_array().iter().map(|e| (e.as_array()[0].text(), e.as_array()[3].as_int())).collect()
}

fn pipeline_n(c: &mut Conn, n: u64, f: impl Fn(u64) -> Vec<String>) {
    let cmds: Vec<Vec<String>> = (1..=n).map(f).collect();
    pipeline(c, &cmds);
}

/// µs per `XS.ADD` + `XS.READGROUP ... COUNT 1 >` pair, over `n` pairs.
fn read_cost_us(c: &mut Conn, n: u32) -> f64 {
    let t0 = Instant::now();
    for _ in 0..n {
        c.cmd(&["XS.ADD", "s", "*", "f", "new"]);
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "COUNT", "1", "STREAMS", "s", ">"]);
        assert!(!r.is_nil() && !r.is_error(), "{r}");
    }
    t0.elapsed().as_secs_f64() * 1e6 / f64::from(n)
}

/// 1. 30,000 delivered entries of an ACKTIMEOUT group deleted (XS.DEL), trimmed (MAXLEN 0,
/// MINID) or deleted before the policy was set: they leave the PEL, and a `>` read costs what
/// it costs without them (the figure is reported; the PEL being empty is what is asserted).
#[test]
fn deleted_pending_entries_leave_the_pel() {
    let s = Server::start();
    const N: u64 = 30_000;
    let figures = std::cell::RefCell::new(Vec::new());
    each_protocol(&s, |c, resp3| {
        for how in ["XS.DEL", "MAXLEN 0", "MINID", "before the policy"] {
            c.cmd(&["DEL", "s"]);
            ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "$", "MKSTREAM"]));
            if how != "before the policy" {
                ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "ACKTIMEOUT", "1"]));
            }
            pipeline_n(c, N, |i| vec!["XS.ADD".into(), "s".into(), format!("{i}-0"), "f".into(), "v".into()]);
            let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "dead", "COUNT", &N.to_string(), "STREAMS", "s", ">"]);
            assert!(!r.is_nil() && !r.is_error(), "{how}");
            assert_eq!(pending_count(c, "s", "g"), N as i64, "{how}");
            match how {
                "MAXLEN 0" => assert_eq!(c.cmd(&["XS.TRIM", "s", "MAXLEN", "0"]), Reply::Int(N as i64)),
                "MINID" => assert_eq!(c.cmd(&["XS.TRIM", "s", "MINID", &format!("{}-0", N + 1)]), Reply::Int(N as i64)),
                _ => pipeline_n(c, N, |i| vec!["XS.DEL".into(), "s".into(), format!("{i}-0")]),
            }
            assert_eq!(c.cmd(&["XS.LEN", "s"]), Reply::Int(0));
            if how == "before the policy" {
                // Without a policy the group keeps them, as the built-in does.
                assert_eq!(pending_count(c, "s", "g"), N as i64);
                ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "ACKTIMEOUT", "1"]));
            }
            assert_eq!(pending_count(c, "s", "g"), 0, "{how}: the deleted entries left the PEL");
            std::thread::sleep(Duration::from_millis(5));
            let with = read_cost_us(c, 300);
            // The same reads on a stream that never had them.
            c.cmd(&["DEL", "s"]);
            ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "$", "MKSTREAM"]));
            ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "ACKTIMEOUT", "1"]));
            let without = read_cost_us(c, 300);
            figures.borrow_mut().push(format!("{} {how}: {with:.1} us / {without:.1} us", if resp3 { "RESP3" } else { "RESP2" }));
        }
        // A reply the worker sees: the new entry, nothing of the deleted ones.
        c.cmd(&["DEL", "s"]);
        ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "$", "MKSTREAM"]));
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "ACKTIMEOUT", "1"]));
        c.cmd(&["XS.ADD", "s", "1-0", "f", "v"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "dead", "STREAMS", "s", ">"]);
        c.cmd(&["XS.DEL", "s", "1-0"]);
        c.cmd(&["XS.ADD", "s", "2-0", "f", "new"]);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", "s", ">"]), one_stream(resp3, "s", vec![entry("2-0", "f", "new")]));
        assert_eq!(c.cmd(&["XS.ACK", "s", "g", "1-0"]), Reply::Int(0), "forgotten, as XAUTOCLAIM forgets");
    });
    report(&format!("queue_hostile: a `>` read (with an XS.ADD) after 30,000 deleted pending entries vs never any: {}", figures.borrow().join("; ")));
}

/// 2. The due entries of a `>` read going to the dead letters: the read goes on with the next
/// ones, and with none left it is not served (a BLOCK reader waits: nil at its timeout, not
/// `[[k, []]]`); due entries still come before new ones. Past 1,000 dead letters a read stops
/// (bounded work) and is not served from them either.
#[test]
fn due_entries_dead_lettered_never_give_an_empty_reply() {
    let s = Server::start();
    each_protocol(&s, |c, resp3| {
        for i in 1..=3 {
            c.cmd(&["XS.ADD", "k", &format!("{i}-0"), "f", "v"]);
        }
        ok(c.cmd(&["XS.GROUP", "CREATE", "k", "g", "0"]));
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "k", ">"]).to_string().matches("-0").count(), 3);
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "k", "g", "MAXDELIVERIES", "1", "DEADLETTER", "kd", "ACKTIMEOUT", "10"]));
        std::thread::sleep(Duration::from_millis(20));
        let t0 = Instant::now();
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "COUNT", "1", "BLOCK", "300", "STREAMS", "k", ">"]), Reply::Nil);
        assert!(t0.elapsed() >= Duration::from_millis(290), "the reader did not wait");
        assert_eq!(c.cmd(&["XS.LEN", "kd"]), Reply::Int(3));
        assert_eq!(pending_count(c, "k", "g"), 0);
        // Due entries that can be delivered come before new ones.
        c.cmd(&["DEL", "k", "kd"]);
        for i in 1..=3 {
            c.cmd(&["XS.ADD", "k", &format!("{i}-0"), "f", "v"]);
        }
        ok(c.cmd(&["XS.GROUP", "CREATE", "k", "g", "0"]));
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "k", ">"]);
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "k", "g", "MAXDELIVERIES", "2", "DEADLETTER", "kd", "ACKTIMEOUT", "10"]));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "COUNT", "2", "STREAMS", "k", ">"]),
            one_stream(resp3, "k", vec![entry("1-0", "f", "v"), entry("2-0", "f", "v")])
        );
        // 1,500 entries over the limit: 1,000 dead-lettered by the first read, which serves
        // nothing (nil, not an empty list), then the other 500.
        c.cmd(&["DEL", "k", "kd"]);
        ok(c.cmd(&["XS.GROUP", "CREATE", "k", "g", "$", "MKSTREAM"]));
        pipeline_n(c, 1500, |i| vec!["XS.ADD".into(), "k".into(), format!("{i}-0"), "f".into(), "v".into()]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "k", ">"]);
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "k", "g", "MAXDELIVERIES", "1", "DEADLETTER", "kd", "ACKTIMEOUT", "1"]));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "COUNT", "1", "STREAMS", "k", ">"]), Reply::Nil);
        assert_eq!(c.cmd(&["XS.LEN", "kd"]), Reply::Int(1000));
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "COUNT", "1", "STREAMS", "k", ">"]), Reply::Nil);
        assert_eq!(c.cmd(&["XS.LEN", "kd"]), Reply::Int(1500));
        assert_eq!(pending_count(c, "k", "g"), 0);
        // A new entry is served after them.
        c.cmd(&["XS.ADD", "k", "2000-0", "f", "new"]);
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", "k", ">"]), one_stream(resp3, "k", vec![entry("2000-0", "f", "new")]));
    });
}

/// 3. CONSUMERTTL: the timer expires the silent consumer x, and the blocked reader y (not
/// expired while it waits) gets x's entry at once.
#[test]
fn consumer_ttl_release_wakes_blocked_readers() {
    let s = Server::start();
    each_protocol(&s, |c, resp3| {
        ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "$", "MKSTREAM"]));
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "CONSUMERTTL", "300"]));
        c.cmd(&["XS.ADD", "s", "1-0", "f", "v"]);
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "x", "STREAMS", "s", ">"]), one_stream(resp3, "s", vec![entry("1-0", "f", "v")]));
        let mut y = s.conn();
        if resp3 {
            y.hello3();
        }
        y.set_timeout(Duration::from_secs(10));
        let t0 = Instant::now();
        y.send(&["XS.READGROUP", "GROUP", "g", "y", "BLOCK", "5000", "STREAMS", "s", ">"]).expect("send");
        let (r, _) = y.read_reply().expect("reply");
        assert_eq!(r, one_stream(resp3, "s", vec![entry("1-0", "f", "v")]), "after {:?}", t0.elapsed());
        assert!(t0.elapsed() < Duration::from_millis(4000), "woken by the timer, not by the block's end");
        let names: Vec<String> =
            c.cmd(&["XS.INFO", "CONSUMERS", "s", "g"]).as_array().iter().map(|e| e.field("name").expect("name").text()).collect();
        assert_eq!(names, ["y"]);
        // A consumer blocked longer than the TTL is not expired while it waits.
        y.send(&["XS.READGROUP", "GROUP", "g", "y", "BLOCK", "900", "STREAMS", "s", ">"]).expect("send");
        std::thread::sleep(Duration::from_millis(700));
        let names: Vec<String> =
            c.cmd(&["XS.INFO", "CONSUMERS", "s", "g"]).as_array().iter().map(|e| e.field("name").expect("name").text()).collect();
        assert_eq!(names, ["y"], "y expired while blocked");
        assert!(y.read_reply().expect("reply").0.is_nil());
    });
}

/// 4. History reads under a policy propagate the counts and times they set: after DEBUG
/// LOADAOF, and on a replica (the failover's new primary), MAXDELIVERIES reads the primary's
/// counts, and the replica's digest is the primary's.
#[test]
fn delivery_counts_survive_aof_and_failover() {
    let s = Server::builder().arg("--appendonly", "yes").start();
    let replica = Server::replica_of(&s);
    each_protocol(&s, |c, resp3| {
        for i in 1..=2 {
            c.cmd(&["XS.ADD", "s", &format!("{i}-0"), "f", "v"]);
        }
        ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]));
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "MAXDELIVERIES", "3", "DEADLETTER", "d", "ACKTIMEOUT", "60000", "BACKOFF", "2"]));
        c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", "s", ">"]);
        // The worker re-reads its pending entries at start-up, twice (restarts).
        for _ in 0..2 {
            assert_eq!(
                c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", "s", "0"]),
                one_stream(resp3, "s", vec![entry("1-0", "f", "v"), entry("2-0", "f", "v")])
            );
        }
        assert_eq!(pending_counts(c), [("1-0".to_string(), 3), ("2-0".to_string(), 3)]);
        assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
        let mut r = replica.conn();
        assert_eq!(pending_counts(&mut r), pending_counts(c), "replica");
        assert_eq!(r.raw(&["DEBUG", "DIGEST-VALUE", "s"]), c.raw(&["DEBUG", "DIGEST-VALUE", "s"]), "replica digest");
        let digest = c.raw(&["DEBUG", "DIGEST-VALUE", "s"]);
        ok(c.cmd(&["DEBUG", "LOADAOF"]));
        assert_eq!(c.raw(&["DEBUG", "DIGEST-VALUE", "s"]), digest, "after DEBUG LOADAOF");
        assert_eq!(pending_counts(c), [("1-0".to_string(), 3), ("2-0".to_string(), 3)]);
        // The fourth delivery is the dead letter's, on the primary as it would be on the replica.
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", "s", "0"]), one_stream(resp3, "s", vec![]));
        assert_eq!(c.cmd(&["XS.LEN", "d"]), Reply::Int(2));
        assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
        assert_eq!(r.cmd(&["XS.LEN", "d"]), Reply::Int(2));
        assert_eq!(r.raw(&["DEBUG", "DIGEST"]), c.raw(&["DEBUG", "DIGEST"]), "replica digest after the dead letters");
    });
    // A restart: the counts come back from the AOF.
    drop(replica);
    let mut s = s;
    let mut c = s.conn();
    ok(c.cmd(&["FLUSHALL"]));
    c.cmd(&["XS.ADD", "s", "1-0", "f", "v"]);
    ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]));
    ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "MAXDELIVERIES", "3", "DEADLETTER", "d"]));
    c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", "s", ">"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", "s", "0"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", "s", "0"]);
    assert_eq!(pending_counts(&mut c), [("1-0".to_string(), 3)]);
    wait_persistence_idle(&mut c, Duration::from_secs(20));
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(pending_counts(&mut c), [("1-0".to_string(), 3)], "after a restart");
}

/// 5. A dead-letter stream that refuses appends (its IDs exhausted): nothing moves, the entry
/// stays pending, the replies say so (XS.GROUP DEADLETTER 0; XS.NACK FATAL NACKs it, no copy).
#[test]
fn failed_dead_letter_append_keeps_the_entry() {
    let s = Server::start();
    each_protocol(&s, |c, _resp3| {
        assert_eq!(c.cmd(&["XS.ADD", "d", "18446744073709551615-18446744073709551615", "f", "v"]), bulk("18446744073709551615-18446744073709551615"));
        c.cmd(&["XS.ADD", "s", "1-0", "f", "v"]);
        c.cmd(&["XS.ADD", "s", "2-0", "f", "v"]);
        ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]));
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "MAXDELIVERIES", "1", "DEADLETTER", "d"]));
        c.cmd(&["XS.READGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
        assert_eq!(c.cmd(&["XS.GROUP", "DEADLETTER", "s", "g", "1-0"]), Reply::Int(0));
        assert_eq!(c.cmd(&["XS.NACK", "s", "g", "FATAL", "IDS", "1", "2-0"]), Reply::Int(1));
        assert_eq!(pending_counts(c).iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["1-0", "2-0"]);
        // MAXDELIVERIES on a history read: delivered as without a policy, nothing lost.
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "a", "STREAMS", "s", "0"]);
        assert!(r.to_string().contains("1-0"), "{r}");
        assert_eq!(c.cmd(&["XS.LEN", "d"]), Reply::Int(1));
        let info = c.cmd(&["XS.INFO", "GROUPS", "s"]);
        assert_eq!(info.as_array()[0].field("dead-lettered"), Some(&Reply::Int(0)), "{info}");
    });
}

/// 6. An acknowledged delayed entry is not delivered again: a client's XS.GROUP SCHEDULE is
/// refused (only the primary and the AOF send it).
#[test]
fn acknowledged_delayed_entry_is_not_scheduled_again() {
    let s = Server::start();
    each_protocol(&s, |c, resp3| {
        ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "$", "MKSTREAM"]));
        let id = c.cmd(&["XS.ADD", "s", "DELAY", "50", "*", "f", "v"]).text();
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]), Reply::Nil, "passed over");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]), one_stream(resp3, "s", vec![entry(&id, "f", "v")]));
        assert_eq!(c.cmd(&["XS.ACK", "s", "g", &id]), Reply::Int(1));
        assert_eq!(
            c.cmd(&["XS.GROUP", "SCHEDULE", "s", "g", &id]),
            Reply::Error(
                "ERR XS.GROUP SCHEDULE is sent by the primary and the AOF only: a `>` read schedules the delayed entries it passes over".into()
            )
        );
        assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]), Reply::Nil);
    });
}

/// 7. An entry above the group's last ID (pending through FORCE) is not dead-lettered: the
/// `>` read delivers it once, the worker acknowledges it, the dead-letter stream stays empty.
#[test]
fn entry_ahead_of_the_group_is_not_dead_lettered() {
    let s = Server::start();
    each_protocol(&s, |c, resp3| {
        c.cmd(&["XS.ADD", "s", "1-0", "f", "v"]);
        c.cmd(&["XS.ADD", "s", "2-0", "f", "v"]);
        ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]));
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "MAXDELIVERIES", "5", "DEADLETTER", "kd", "ACKTIMEOUT", "1"]));
        assert_eq!(c.cmd(&["XS.NACK", "s", "g", "FATAL", "IDS", "1", "1-0", "FORCE"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XS.CLAIM", "s", "g", "x", "0", "2-0", "FORCE", "JUSTID"]), Reply::Array(vec![bulk("2-0")]));
        assert_eq!(c.cmd(&["XS.GROUP", "DEADLETTER", "s", "g", "2-0"]), Reply::Int(0));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            c.cmd(&["XS.READGROUP", "GROUP", "g", "w", "STREAMS", "s", ">"]),
            one_stream(resp3, "s", vec![entry("1-0", "f", "v"), entry("2-0", "f", "v")])
        );
        assert_eq!(c.cmd(&["XS.ACK", "s", "g", "1-0", "2-0"]), Reply::Int(2));
        assert_eq!(c.cmd(&["XS.LEN", "kd"]), Reply::Int(0));
        assert_eq!(c.cmd(&["EXISTS", "kd"]), Reply::Int(0));
    });
}

/// Milliseconds since the epoch (the server's clock: the same machine).
fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn ms_of(id: &str) -> u64 {
    id.split('-').next().and_then(|m| m.parse().ok()).unwrap_or(0)
}

/// The entries of a `>` read's reply for stream `s`: None when the stream is not in the reply;
/// panics on an empty entry list (what issue 34's defect 2 replied).
fn read_entries(r: &Reply, what: &str) -> Vec<String> {
    let streams: Vec<(&Reply, &Reply)> = match r {
        Reply::Nil => return Vec::new(),
        Reply::Map(kv) => kv.iter().map(|(k, v)| (k, v)).collect(),
        Reply::Array(v) => v.iter().map(|s| (&s.as_array()[0], &s.as_array()[1])).collect(),
        other => panic!("{what}: {other}"),
    };
    let mut out = Vec::new();
    for (_, entries) in streams {
        let e = entries.as_array();
        assert!(!e.is_empty(), "{what}: a stream served with no entry: {r}");
        out.extend(e.iter().map(|x| x.as_array()[0].text()));
    }
    out
}

/// The random queue workload of issue 34, on a primary with a replica and an AOF: adds (some
/// delayed), `>` reads (some blocking), acknowledgements, history re-reads with AOF reloads
/// between, XS.DEL and trims under the policy, XS.NACK FATAL FORCE (also of entries the group
/// has not reached), XS.CLAIM FORCE then XS.GROUP DEADLETTER, client SCHEDULEs of acknowledged
/// delayed entries, and spells with a dead-letter key that refuses appends. Then the queue is
/// drained. Asserted: 0 entries lost (every entry still in the stream ends acknowledged or
/// dead-lettered), 0 both acknowledged and dead-lettered, 0 delayed entries delivered early,
/// 0 `>` replies with an empty entry list; the replica's and the reloaded AOF's digests are the
/// primary's. `XSTREAM_WAVE2_SCALE` multiplies the operations (10 in `make soak`).
#[test]
fn hostile_queue_workload() {
    use std::collections::{BTreeMap, BTreeSet};
    let s = Server::builder().arg("--appendonly", "yes").start();
    let replica = Server::replica_of(&s);
    let mut c = s.conn();
    let mut rng = Rng::from_env("queue_hostile_workload");
    ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "$", "MKSTREAM"]));
    let policy = |dlq: &str| -> Vec<String> {
        ["XS.GROUP", "SETPOLICY", "s", "g", "MAXDELIVERIES", "2", "DEADLETTER", dlq, "ACKTIMEOUT", "15", "CONSUMERTTL", "400"]
            .map(String::from)
            .to_vec()
    };
    ok(c.cmd(&policy("dlq")));
    // The dead-letter key that refuses appends.
    c.cmd(&["XS.ADD", "dfull", "18446744073709551615-18446744073709551615", "f", "v"]);
    let mut acked: BTreeSet<String> = BTreeSet::new();
    let mut due: BTreeMap<String, u64> = BTreeMap::new();
    let mut added: Vec<String> = Vec::new();
    // Source IDs whose dead letters XS.GROUP REDRIVE sent back (as new entries).
    let mut redriven: BTreeSet<String> = BTreeSet::new();
    let (mut reads, mut refused_schedules) = (0usize, 0usize);
    let early = std::cell::RefCell::new(Vec::<String>::new());
    let mut full_spell = false;
    // What happened to each ID (for the failure report).
    let hist = std::cell::RefCell::new(BTreeMap::<String, Vec<String>>::new());
    let note = |id: &str, what: String| hist.borrow_mut().entry(id.to_string()).or_default().push(what);
    let ops = 1500 * wave2_scale();
    let consumers = ["w1", "w2", "w3", "w4"];
    let deliver = |r: &Reply, due: &BTreeMap<String, u64>, what: &str| -> Vec<String> {
        let got = read_entries(r, what);
        let now = now_ms();
        for id in &got {
            note(id, format!("{what} at {now}"));
            if due.get(id).is_some_and(|d| now < *d) {
                early.borrow_mut().push(id.clone());
            }
        }
        got
    };
    for i in 0..ops {
        let w = *rng.pick(&consumers);
        match rng.weighted(&[24, 26, 16, 5, 5, 3, 4, 3, 2, 2, 2, 2, 3]) {
            0 => {
                let delayed = rng.below(4) == 0;
                let delay = rng.range(5, 60);
                let r = if delayed {
                    c.cmd(&["XS.ADD", "s", "DELAY", &delay.to_string(), "*", "f", &i.to_string()])
                } else {
                    c.cmd(&["XS.ADD", "s", "*", "f", &i.to_string()])
                };
                let id = r.text();
                if delayed {
                    due.insert(id.clone(), ms_of(&id) + delay);
                }
                added.push(id);
            }
            1 => {
                let r = if rng.below(5) == 0 {
                    c.cmd(&["XS.READGROUP", "GROUP", "g", w, "COUNT", "3", "BLOCK", "20", "STREAMS", "s", ">"])
                } else {
                    c.cmd(&["XS.READGROUP", "GROUP", "g", w, "COUNT", &rng.range(1, 4).to_string(), "STREAMS", "s", ">"])
                };
                reads += 1;
                deliver(&r, &due, "`>` read");
            }
            2 => {
                // A worker acknowledges what it holds (some of it).
                // (What it received from a read: not an entry it claimed with FORCE unread.)
                let r = c.cmd(&["XS.PENDING", "s", "g", "-", "+", "5", w]);
                for e in r.as_array() {
                    let id = e.as_array()[0].text();
                    let read = hist.borrow().get(&id).is_some_and(|h| h.iter().any(|x| x.contains("read")));
                    if read && rng.below(3) > 0 && c.cmd(&["XS.ACK", "s", "g", &id]) == Reply::Int(1) {
                        note(&id, format!("acked by {w}"));
                        acked.insert(id);
                    }
                }
            }
            3 => {
                // A worker restarting re-reads its pending entries.
                let r = c.cmd(&["XS.READGROUP", "GROUP", "g", w, "COUNT", "10", "STREAMS", "s", "0"]);
                assert!(!r.is_error(), "{r}");
            }
            4 => {
                if let Some(id) = added.get(rng.below(added.len().max(1) as u64) as usize).cloned() {
                    let r = c.cmd(&["XS.DEL", "s", &id]);
                    note(&id, format!("XS.DEL -> {r}"));
                }
            }
            5 => {
                let r = if rng.below(2) == 0 {
                    c.cmd(&["XS.TRIM", "s", "MAXLEN", "~", &rng.range(20, 200).to_string()])
                } else {
                    let id = added.get(added.len().saturating_sub(rng.range(50, 300) as usize)).cloned().unwrap_or("0-1".into());
                    c.cmd(&["XS.TRIM", "s", "MINID", &id])
                };
                assert!(!r.is_error(), "{r}");
            }
            6 => {
                // FATAL, with FORCE now and then: also on entries the group has not reached. Only
                // on entries never delivered: FORCE makes an acknowledged or dead-lettered entry
                // pending again (as XCLAIM FORCE does), which the user then asked for.
                let fresh = added
                    .get(added.len().saturating_sub(1 + rng.below(4) as usize))
                    .filter(|id| !hist.borrow().contains_key(*id) && !due.contains_key(*id))
                    .cloned();
                if let Some(id) = fresh {
                    let mut cmd = vec!["XS.NACK", "s", "g", "FATAL", "IDS", "1", &id];
                    if rng.below(2) == 0 {
                        cmd.push("FORCE");
                    }
                    let r = c.cmd(&cmd);
                    assert!(!r.is_error());
                    note(&id, format!("{} -> {r}", cmd.join(" ")));
                }
            }
            7 => {
                let fresh = added
                    .get(added.len().saturating_sub(1 + rng.below(4) as usize))
                    .filter(|id| !hist.borrow().contains_key(*id) && !due.contains_key(*id))
                    .cloned();
                if let Some(id) = fresh {
                    let rc = c.cmd(&["XS.CLAIM", "s", "g", w, "0", &id, "FORCE", "JUSTID"]);
                    let r = c.cmd(&["XS.GROUP", "DEADLETTER", "s", "g", &id]);
                    note(&id, format!("CLAIM FORCE -> {rc}, DEADLETTER -> {r}"));
                    assert!(matches!(r, Reply::Int(0 | 1)), "{r}");
                }
            }
            8 => {
                // A client's SCHEDULE of an acknowledged delayed entry: refused.
                if let Some(id) = acked.iter().find(|id| due.contains_key(*id)).cloned() {
                    assert!(c.cmd(&["XS.GROUP", "SCHEDULE", "s", "g", &id]).is_error());
                    refused_schedules += 1;
                }
            }
            9 => {
                // A spell with a dead-letter key that refuses appends, or its end.
                full_spell = !full_spell;
                ok(c.cmd(&policy(if full_spell { "dfull" } else { "dlq" })));
            }
            10 => {
                if rng.below(10) == 0 {
                    // A restart of the primary's state from its AOF.
                    wait_persistence_idle(&mut c, Duration::from_secs(20));
                    ok(c.cmd(&["DEBUG", "LOADAOF"]));
                }
            }
            11 => {
                // Dead letters back to the stream (XS.GROUP REDRIVE): their source IDs leave the
                // dead-letter stream and come back as new entries.
                let sources = |c: &mut Conn| -> BTreeSet<String> {
                    c.cmd(&["XS.RANGE", "dlq", "-", "+"])
                        .as_array()
                        .iter()
                        .filter_map(|e| e.as_array()[1].field("source-id").map(|v| v.text()))
                        .collect()
                };
                let before = sources(&mut c);
                let r = c.cmd(&["XS.GROUP", "REDRIVE", "dlq", "s", "COUNT", &rng.range(1, 6).to_string()]);
                assert!(matches!(r, Reply::Int(_)), "{r}");
                let after = sources(&mut c);
                for id in before.difference(&after) {
                    note(id, format!("redriven ({r} moved)"));
                    redriven.insert(id.clone());
                }
            }
            _ => std::thread::sleep(Duration::from_millis(rng.below(25))),
        }
    }
    // Drain: the usable dead-letter key, short timeouts, every entry read and acknowledged.
    ok(c.cmd(&policy("dlq")));
    let t0 = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let r = c.cmd(&["XS.READGROUP", "GROUP", "g", "drain", "COUNT", "100", "STREAMS", "s", ">"]);
        let got = deliver(&r, &due, "drain");
        for id in &got {
            if c.cmd(&["XS.ACK", "s", "g", id]) == Reply::Int(1) {
                acked.insert(id.clone());
            }
        }
        let pending = c.cmd(&["XS.PENDING", "s", "g"]).as_array()[0].as_int();
        let sched = c.cmd(&["XS.INFO", "STREAM", "s"]).field("delayed-entries").map_or(0, |v| v.as_int());
        if got.is_empty() && pending == 0 && (sched == 0 || t0.elapsed() > Duration::from_secs(2)) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the queue never drained: {pending} pending");
    }
    let dl_entries = c.cmd(&["XS.RANGE", "dlq", "-", "+"]);
    let dead: BTreeSet<String> = dl_entries.as_array().iter().filter_map(|e| e.as_array()[1].field("source-id").map(|v| v.text())).collect();
    let dead_story = |id: &str| -> Vec<String> {
        dl_entries.as_array().iter().filter(|e| e.as_array()[1].field("source-id").is_some_and(|v| v.text() == id)).map(|e| e.to_string()).collect()
    };
    let live: Vec<String> = c.cmd(&["XS.RANGE", "s", "-", "+"]).as_array().iter().map(|e| e.as_array()[0].text()).collect();
    let lost: Vec<&String> = live.iter().filter(|id| !acked.contains(*id) && !dead.contains(*id) && !redriven.contains(*id)).collect();
    let both: Vec<&String> = acked.intersection(&dead).collect();
    assert!(lost.is_empty(), "{} entries neither acknowledged nor dead-lettered: {:#?}", lost.len(), {
        let h = hist.borrow();
        lost.iter().take(3).map(|id| format!("{id}: {:?}", h.get(*id))).collect::<Vec<_>>()
    });
    let h = hist.borrow();
    let story = |ids: &[&String]| -> Vec<String> {
        ids.iter().take(3).map(|id| format!("{id}: {:?} (due {:?}) dead letters {:?}", h.get(*id), due.get(*id), dead_story(id))).collect()
    };
    assert!(both.is_empty(), "{} entries both acknowledged and dead-lettered: {:#?}", both.len(), story(&both));
    let early = early.borrow();
    assert!(early.is_empty(), "{} delayed entries delivered early: {:#?}", early.len(), story(&early.iter().collect::<Vec<_>>()));
    assert_eq!(c.cmd(&["XS.LEN", "dfull"]), Reply::Int(1), "the full dead-letter key took nothing");
    // The replica and the AOF.
    ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "CONSUMERTTL", "100000000"]));
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    let digest = |c: &mut Conn| c.raw(&["DEBUG", "DIGEST-VALUE", "s", "dlq", "dfull"]);
    let want = digest(&mut c);
    let mut rc = replica.conn();
    let t = Instant::now();
    while digest(&mut rc) != want && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(digest(&mut rc), want, "replica");
    wait_persistence_idle(&mut c, Duration::from_secs(20));
    ok(c.cmd(&["DEBUG", "LOADAOF"]));
    assert_eq!(digest(&mut c), want, "AOF reload");
    report(&format!(
        "queue_hostile workload: {ops} ops, {} added, {reads} `>` reads, {} acknowledged, {} dead-lettered, {} redriven, {refused_schedules} client SCHEDULEs refused; 0 lost, 0 both, 0 early, 0 empty `>` replies",
        added.len(),
        acked.len(),
        dead.len(),
        redriven.len()
    ));
}

/// The minor points of issue 34: under MAXDELIVERIES a delivery count saturates at LLONG_MAX
/// (wrapped, it read as negative and escaped the limit); a SETPOLICY part given twice is
/// refused; XS.NACK's second IDS block overrides the first, as 8.8's XNACK (REDIS8.md §6).
#[test]
fn counts_saturate_and_repeated_options() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        c.cmd(&["XS.ADD", "s", "1-0", "f", "v"]);
        c.cmd(&["XS.ADD", "s", "2-0", "f", "v"]);
        ok(c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]));
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "MAXDELIVERIES", "5", "DEADLETTER", "d"]));
        c.cmd(&["XS.READGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
        assert_eq!(c.cmd(&["XS.CLAIM", "s", "g", "a", "0", "1-0", "RETRYCOUNT", "9223372036854775807", "JUSTID"]), Reply::Array(vec![bulk("1-0")]));
        // The next delivery is one too many: a dead letter, not a count of -9223372036854775808.
        assert_eq!(c.cmd(&["XS.CLAIM", "s", "g", "b", "0", "1-0"]), Reply::Array(vec![]));
        assert_eq!(c.cmd(&["XS.LEN", "d"]), Reply::Int(1));
        // With a dead-letter key that refuses appends the deliveries go on (nothing lost), the
        // count stays at LLONG_MAX (wrapped, it read as negative, below the limit).
        c.cmd(&["XS.ADD", "dfull", "18446744073709551615-18446744073709551615", "f", "v"]);
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "MAXDELIVERIES", "5", "DEADLETTER", "dfull"]));
        c.cmd(&["XS.CLAIM", "s", "g", "a", "0", "2-0", "RETRYCOUNT", "9223372036854775807", "JUSTID"]);
        for via in [
            &["XS.CLAIM", "s", "g", "b", "0", "2-0"][..],
            &["XS.AUTOCLAIM", "s", "g", "b", "0", "0"],
            &["XS.READGROUP", "GROUP", "g", "b", "STREAMS", "s", "0"],
        ] {
            assert!(!c.cmd(via).is_error());
            let p = c.cmd(&["XS.PENDING", "s", "g", "-", "+", "10"]);
            assert_eq!(p.as_array()[0].as_array()[3], Reply::Int(i64::MAX), "after {via:?}: {p}");
        }
        ok(c.cmd(&["XS.GROUP", "SETPOLICY", "s", "g", "MAXDELIVERIES", "5", "DEADLETTER", "d"]));
        for (args, part) in [
            (&["ACKTIMEOUT", "10", "ACKTIMEOUT", "20"][..], "ACKTIMEOUT"),
            (&["MAXDELIVERIES", "1", "DROP", "MAXDELIVERIES", "2", "DROP"][..], "MAXDELIVERIES"),
            (&["CONSUMERTTL", "10", "CONSUMERTTL", "20"][..], "CONSUMERTTL"),
            (&["RESET", "RESET"][..], "RESET"),
            (&["ACKTIMEOUT", "10", "BACKOFF", "2", "BACKOFF", "3"][..], "BACKOFF"),
            (&["ACKTIMEOUT", "10", "MAXBACKOFF", "20", "MAXBACKOFF", "30"][..], "MAXBACKOFF"),
        ] {
            let mut cmd = vec!["XS.GROUP", "SETPOLICY", "s", "g"];
            cmd.extend(args);
            assert_eq!(c.cmd(&cmd), Reply::Error(format!("ERR syntax error, {part} given more than once")));
        }
        // Nothing of the refused calls was applied.
        let pol = c.cmd(&["XS.GROUP", "GETPOLICY", "s", "g"]);
        assert_eq!((pol.field("maxdeliveries"), pol.field("acktimeout"), pol.field("consumerttl")), (Some(&Reply::Int(5)), None, None), "{pol}");
        // XS.NACK: the second IDS block wins (8.8's XNACK).
        assert_eq!(c.cmd(&["XS.NACK", "s", "g", "FAIL", "IDS", "1", "1-0", "IDS", "1", "2-0"]), Reply::Int(1));
        let p = c.cmd(&["XS.PENDING", "s", "g", "-", "+", "10"]);
        assert_eq!(p.as_array().len(), 1, "{p}");
        assert_eq!(p.as_array()[0].as_array()[0], bulk("2-0"));
    });
}
