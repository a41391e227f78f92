//! XS.READGROUP ... CLAIM min-idle-time of Redis 8.4 (REDIS8.md §4), on whatever host runs
//! this, RESP2 and RESP3. Every [VT] example of §4 (upstream's stream-cgroups.tcl and redis-py
//! tests against 8.4+ servers) is a test here; docs/redis8.md maps them. Times are real: the
//! tests wait (tens to hundreds of ms) for entries to become idle.

mod common;

use common::*;
use std::time::{Duration, Instant};

fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}

/// One entry of a read reply: (id, fields as text, idle, count); idle and count are None for
/// 2-element entries, and must be RESP integers otherwise.
#[derive(Debug, Clone, PartialEq)]
struct Ent {
    id: String,
    fields: Vec<String>,
    idle: Option<i64>,
    count: Option<i64>,
}

fn ent(r: &Reply) -> Ent {
    let v = r.as_array();
    let fields = v[1].as_array().iter().map(|f| f.text()).collect();
    let (idle, count) = match v.len() {
        2 => (None, None),
        4 => match (&v[2], &v[3]) {
            (Reply::Int(i), Reply::Int(c)) => (Some(*i), Some(*c)),
            other => panic!("idle / count are not integers: {other:?}"),
        },
        n => panic!("an entry of {n} elements: {r}"),
    };
    Ent { id: v[0].text(), fields, idle, count }
}

/// The (stream, entries) of an XREADGROUP reply in order (RESP2 array or RESP3 map); nil is none.
fn streams(r: &Reply) -> Vec<(String, Vec<Ent>)> {
    let pairs: Vec<(Reply, Reply)> = match r {
        Reply::Nil => return Vec::new(),
        Reply::Map(kv) => kv.clone(),
        Reply::Array(v) => v.iter().map(|p| (p.as_array()[0].clone(), p.as_array()[1].clone())).collect(),
        other => panic!("not a read reply: {other}"),
    };
    pairs.iter().map(|(k, v)| (k.text(), v.as_array().iter().map(ent).collect())).collect()
}

/// The entries of the only stream of a reply.
fn one(r: &Reply) -> Vec<Ent> {
    let s = streams(r);
    assert_eq!(s.len(), 1, "one stream expected: {r}");
    s.into_iter().next().map(|(_, e)| e).unwrap_or_default()
}

fn ids(e: &[Ent]) -> Vec<String> {
    e.iter().map(|e| e.id.clone()).collect()
}

/// (id, owner, delivery count) of XS.PENDING key group - + 100.
fn pending(c: &mut Conn, key: &str, group: &str) -> Vec<(String, String, i64)> {
    let r = c.cmd(&["XS.PENDING", key, group, "-", "+", "100"]);
    r.as_array()
        .iter()
        .map(|p| {
            let p = p.as_array();
            (p[0].text(), p[1].text(), p[3].as_int())
        })
        .collect()
}

fn owned(v: &[(&str, &str, i64)]) -> Vec<(String, String, i64)> {
    v.iter().map(|(a, b, n)| (a.to_string(), b.to_string(), *n)).collect()
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// `XS.ADD key id f v` for each (id, v).
fn add(c: &mut Conn, key: &str, items: &[(&str, &str)]) {
    for (id, v) in items {
        assert_eq!(c.cmd(&["XS.ADD", key, id, "f", v]).text(), *id);
    }
}

fn setup3(c: &mut Conn) {
    add(c, "s", &[("1-0", "v1"), ("2-0", "v2"), ("3-0", "v3")]);
    c.cmd_str("XS.GROUP CREATE s g 0");
}

/// [VT "with different position" (error part), "with not integer / negative integer for
/// min-idle-time"], XREAD with CLAIM.
#[test]
fn claim_parsing_errors() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "v1"), ("2-0", "v2")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s >");
        let not_int = err("ERR min-idle-time is not an integer or out of range");
        for bad in
            ["test", "5.5", "5,5", "10e", "+10", "*10", "10/2", "10*2", "-0", "-5.5", "-5,5", "-10e", "-10/2", "(-10)*2", "", "9223372036854775808"]
        {
            assert_eq!(c.cmd(&["XS.READGROUP", "GROUP", "g", "c1", "CLAIM", bad, "STREAMS", "s", ">"]), not_int, "CLAIM {bad:?}");
        }
        for neg in ["-10", "-42", "-9223372036854775808"] {
            assert_eq!(
                c.cmd(&["XS.READGROUP", "GROUP", "g", "c1", "CLAIM", neg, "STREAMS", "s", ">"]),
                err("ERR min-idle-time must be a positive integer"),
                "CLAIM {neg}"
            );
        }
        assert_eq!(c.cmd_str("XS.READ CLAIM 10 STREAMS s 0"), err("ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead."));
        // Misplaced CLAIM.
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c1 CLAIM 10 CLAIM COUNT 1 STREAMS s >"), not_int);
        assert_eq!(c.cmd_str("XS.READGROUP CLAIM GROUP g c1 COUNT 1 STREAMS s >"), not_int);
        assert_eq!(
            c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s CLAIM 50 >"),
            err("NOGROUP No such key 'CLAIM' or consumer group 'g' in XREADGROUP with GROUP option")
        );
        assert!(c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s CLAIM >").text().starts_with("ERR Unbalanced"));
        assert_eq!(
            c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s > CLAIM 50"),
            err("ERR Invalid stream ID specified as stream command argument")
        );
        assert!(c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s > CLAIM").text().starts_with("ERR Unbalanced"));
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g CLAIM 50 c1 STREAMS s >"), err("ERR syntax error"));
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c1 CLAIM STREAMS s >"), not_int);
        // The keys are found past CLAIM's value (cluster routing).
        assert_eq!(
            c.cmd_str("COMMAND GETKEYS XS.READGROUP CLAIM 10 GROUP g c1 CLAIM 5 STREAMS s t > >"),
            Reply::Array(vec![Reply::Bulk(b"s".to_vec()), Reply::Bulk(b"t".to_vec())])
        );
        // Nothing of that changed the group: 1-0 is still c1's only pending entry.
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c1", 1)]));
    });
}

/// [VT §4.4 example; "verify ownership transfer"; redis-py "raw response shape"]: the claimed
/// entry then the new one, both with 4 elements; XPENDING shows both owned by c2.
#[test]
fn claim_then_new_example() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "v1"), ("2-0", "v2")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        assert_eq!(ids(&one(&c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s >"))), ["1-0"]);
        sleep_ms(100);
        let t0 = Instant::now();
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 50 STREAMS s >"));
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!((e[0].id.as_str(), e[0].fields.clone(), e[0].count), ("1-0", vec!["f".to_string(), "v1".into()], Some(1)));
        let idle = e[0].idle.unwrap_or(-1);
        assert!((100..100 + 50 + t0.elapsed().as_millis() as i64 * 2 + 200).contains(&idle), "idle {idle}");
        assert_eq!(e[1], Ent { id: "2-0".into(), fields: vec!["f".into(), "v2".into()], idle: Some(0), count: Some(0) });
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c2", 2), ("2-0", "c2", 1)]));
        // Nothing idle enough and nothing new: null.
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 50 STREAMS s >"), Reply::Nil);
    });
}

/// [VT "field types are correct" (readraw)]: idle and count are RESP integers, in RESP2 and RESP3.
#[test]
fn claim_reply_is_integers_on_the_wire() {
    let s = Server::start();
    each_protocol(&s, |c, resp3| {
        add(c, "s", &[("1-0", "v1"), ("2-0", "v2")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s >");
        let (_, raw) = c.cmd_raw(&["XS.READGROUP", "GROUP", "g", "c2", "CLAIM", "0", "STREAMS", "s", ">"]);
        let text = String::from_utf8_lossy(&raw).to_string();
        let head = if resp3 { "%1\r\n$1\r\ns\r\n*2\r\n" } else { "*1\r\n*2\r\n$1\r\ns\r\n*2\r\n" };
        assert!(text.starts_with(head), "{text:?}");
        let rest = &text[head.len()..];
        // The claimed entry: its idle is a time (digits vary), its count 1.
        let first = "*4\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$2\r\nv1\r\n:";
        assert!(rest.starts_with(first), "{text:?}");
        let after_idle = rest[first.len()..].split_once("\r\n").map(|(idle, r)| {
            assert!(idle.bytes().all(|b| b.is_ascii_digit()), "idle {idle:?}");
            r
        });
        assert_eq!(after_idle, Some(":1\r\n*4\r\n$3\r\n2-0\r\n*2\r\n$1\r\nf\r\n$2\r\nv2\r\n:0\r\n:0\r\n"), "{text:?}");
        // Without CLAIM: 2-element entries, as before.
        c.cmd_str("XS.ADD s 3-0 f v3");
        let (_, raw) = c.cmd_raw(&["XS.READGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"]);
        let tail = "*1\r\n*2\r\n$3\r\n3-0\r\n*2\r\n$1\r\nf\r\n$2\r\nv3\r\n";
        assert!(String::from_utf8_lossy(&raw).ends_with(tail), "{raw:?}");
    });
}

/// [VT "delivery count"]: counts before each claim, whoever claims: 1, then 4 after three
/// more claims, then 6.
#[test]
fn claim_delivery_counts() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "v1")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        let mut seen = Vec::new();
        for consumer in ["c2", "c3", "c3", "c3", "c4", "c5"] {
            sleep_ms(60);
            let e = one(&c.cmd(&["XS.READGROUP", "GROUP", "g", consumer, "CLAIM", "50", "STREAMS", "s", ">"]));
            assert_eq!(ids(&e), ["1-0"]);
            seen.push(e[0].count.unwrap_or(-1));
        }
        assert_eq!(seen, [1, 2, 3, 4, 5, 6]);
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c5", 7)]));
    });
}

/// [VT "idle time"]: the reported idle is at least min-idle each time, and the idle clock
/// restarts at each claim.
#[test]
fn claim_idle_time() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "v1")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        for (wait, min) in [(100u64, 50i64), (70, 60), (80, 70), (20, 10)] {
            sleep_ms(wait);
            let e = one(&c.cmd(&["XS.READGROUP", "GROUP", "g", "c3", "CLAIM", &min.to_string(), "STREAMS", "s", ">"]));
            let idle = e[0].idle.unwrap_or(-1);
            assert!(idle >= min && idle < wait as i64 + 500, "idle {idle} after {wait} ms (CLAIM {min})");
        }
    });
}

/// [VT "min-idle-time equal to zero", "large min-idle-time", "claims all pending immediately"].
#[test]
fn claim_zero_and_max() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "v1"), ("2-0", "v2")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s >");
        sleep_ms(20);
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c1 CLAIM 9223372036854775807 STREAMS s >"));
        assert_eq!((ids(&e), e[0].count), (vec!["2-0".to_string()], Some(0)));
        // CLAIM 0: every pending entry at once, however fresh.
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c1 CLAIM 0 STREAMS s >"));
        assert_eq!(ids(&e), ["1-0", "2-0"]);
        assert_eq!(e.iter().map(|e| e.count).collect::<Vec<_>>(), [Some(1), Some(1)]);
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 STREAMS s >"));
        assert_eq!(e.iter().map(|e| e.count).collect::<Vec<_>>(), [Some(2), Some(2)]);
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c2", 3), ("2-0", "c2", 3)]));
    });
}

/// redis-py tests against 8.4 servers: "count limits claimed and new" (COUNT 4 over 3 pending
/// and 3 new: the 3 pending then 1 new), "min idle not reached returns only new", and a read
/// with BLOCK served at once (claimed + new, "issue 527").
#[test]
fn claim_redis_py_examples() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c STREAMS s >");
        sleep_ms(110);
        add(c, "s", &[("4-0", "d"), ("5-0", "e"), ("6-0", "f")]);
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c COUNT 4 CLAIM 100 STREAMS s >"));
        assert_eq!(ids(&e), ["1-0", "2-0", "3-0", "4-0"]);
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c CLAIM 60000 STREAMS s >"));
        assert_eq!(
            e,
            [
                Ent { id: "5-0".into(), fields: vec!["f".into(), "e".into()], idle: Some(0), count: Some(0) },
                Ent { id: "6-0".into(), fields: vec!["f".into(), "f".into()], idle: Some(0), count: Some(0) },
            ]
        );
        add(c, "s", &[("7-0", "g")]);
        let t0 = Instant::now();
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c COUNT 10 BLOCK 1 CLAIM 0 STREAMS s >"));
        assert!(t0.elapsed() < Duration::from_millis(100));
        assert_eq!(ids(&e), ["1-0", "2-0", "3-0", "4-0", "5-0", "6-0", "7-0"]);
    });
}

/// [VT "with specific ID"]: CLAIM is ignored by a history read: 2-element entries, history
/// semantics.
#[test]
fn claim_ignored_for_history_reads() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        sleep_ms(60);
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c1 CLAIM 10 STREAMS s 0"));
        assert_eq!(ids(&e), ["1-0", "2-0", "3-0"]);
        assert!(e.iter().all(|e| e.idle.is_none()), "{e:?}");
        // Another consumer's history is empty (CLAIM does not reach others' entries there).
        assert_eq!(one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 STREAMS s 0")), Vec::new());
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c1", 2), ("2-0", "c1", 2), ("3-0", "c1", 2)]));
    });
}

/// [VT "on non-existing consumer group / consumer"]: NOGROUP; a new consumer is created.
#[test]
fn claim_group_and_consumer() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        sleep_ms(60);
        assert_eq!(
            c.cmd_str("XS.READGROUP GROUP nope c1 CLAIM 50 STREAMS s >"),
            err("NOGROUP No such key 's' or consumer group 'nope' in XREADGROUP with GROUP option")
        );
        assert_eq!(ids(&one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 50 STREAMS s >"))), ["1-0", "2-0", "3-0"]);
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c2", 2), ("2-0", "c2", 2), ("3-0", "c2", 2)]));
        let cons = c.cmd_str("XS.INFO CONSUMERS s g");
        assert_eq!(cons.as_array().len(), 2, "{cons}");
    });
}

/// [VT "verify XACK removes messages from CLAIM pool"].
#[test]
fn claim_after_ack() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        c.cmd_str("XS.ACK s g 1-0 3-0");
        sleep_ms(60);
        assert_eq!(ids(&one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 50 STREAMS s >"))), ["2-0"]);
        c.cmd_str("XS.ACK s g 2-0");
        sleep_ms(60);
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 50 STREAMS s >"), Reply::Nil);
    });
}

/// [VT "verify that XCLAIM updates delivery count", "verify forced entries are claimable"].
#[test]
fn claim_after_xclaim() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        sleep_ms(60);
        assert_eq!(c.cmd_str("XS.CLAIM s g c3 50 2-0 3-0 JUSTID").as_array().len(), 2);
        sleep_ms(60);
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 50 STREAMS s >"));
        // XCLAIM ... JUSTID keeps the counts; 1-0 was delivered first, so it is the oldest.
        assert_eq!(ids(&e), ["1-0", "2-0", "3-0"]);
        assert_eq!(e.iter().map(|e| e.count).collect::<Vec<_>>(), [Some(1), Some(1), Some(1)]);

        c.cmd_str("FLUSHALL");
        setup3(c);
        c.cmd_str("XS.CLAIM s g c3 0 1-0 2-0 FORCE JUSTID");
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 COUNT 2 STREAMS s >"));
        assert_eq!(ids(&e), ["1-0", "2-0"]);
        assert_eq!(e.iter().map(|e| e.count).collect::<Vec<_>>(), [Some(1), Some(1)]);
        // COUNT 2 was used by the claimed entries: nothing new was read.
        let info = c.cmd_str("XS.INFO GROUPS s");
        assert_eq!(info.as_array()[0].field("last-delivered-id").map(|r| r.text()), Some("0-0".into()), "{info}");
    });
}

/// [VT "with NOACK", "with NOACK and pending messages"]: NOACK applies to new entries only.
#[test]
fn claim_with_noack() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "v1"), ("2-0", "v2")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        sleep_ms(20);
        assert_eq!(ids(&one(&c.cmd_str("XS.READGROUP GROUP g c1 NOACK CLAIM 10 STREAMS s >"))), ["1-0", "2-0"]);
        assert_eq!(c.cmd_str("XS.PENDING s g").as_array()[0], Reply::Int(0));
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c1 NOACK CLAIM 10 STREAMS s >"), Reply::Nil);

        c.cmd_str("FLUSHALL");
        add(c, "s", &[("1-0", "v1"), ("2-0", "v2")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s >");
        sleep_ms(60);
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c1 NOACK CLAIM 50 STREAMS s >"));
        assert_eq!((ids(&e), e[1].count), (vec!["1-0".to_string(), "2-0".into()], Some(0)));
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c1", 2)]));
        sleep_ms(60);
        assert_eq!(ids(&one(&c.cmd_str("XS.READGROUP GROUP g c1 NOACK CLAIM 50 STREAMS s >"))), ["1-0"]);
    });
}

/// [VT "with multiple streams"]: streams in argument order, each claimed then new.
#[test]
fn claim_multiple_streams() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s1", &[("1-0", "v1"), ("2-0", "v2")]);
        add(c, "s2", &[("3-0", "v1"), ("4-0", "v2")]);
        add(c, "s3", &[("5-0", "v1"), ("6-0", "v2")]);
        for k in ["s1", "s2", "s3"] {
            c.cmd(&["XS.GROUP", "CREATE", k, "g", "0"]);
        }
        c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s1 s2 s3 > > >");
        sleep_ms(60);
        let r = streams(&c.cmd_str("XS.READGROUP GROUP g c1 CLAIM 50 STREAMS s1 s2 s3 > > >"));
        let got: Vec<(String, Vec<(String, Option<i64>)>)> =
            r.iter().map(|(k, e)| (k.clone(), e.iter().map(|e| (e.id.clone(), e.count)).collect())).collect();
        let want: Vec<(String, Vec<(String, Option<i64>)>)> = [("s1", "1-0", "2-0"), ("s2", "3-0", "4-0"), ("s3", "5-0", "6-0")]
            .iter()
            .map(|(k, a, b)| (k.to_string(), vec![(a.to_string(), Some(1)), (b.to_string(), Some(0))]))
            .collect();
        assert_eq!(got, want);
        // Served per stream (§4.3): claimed only on s1, new only on s2, nothing on s3.
        c.cmd_str("XS.ADD s2 7-0 f v");
        sleep_ms(60);
        c.cmd_str("XS.READGROUP GROUP g c1 CLAIM 0 STREAMS s2 s3 > >");
        c.cmd_str("XS.CLAIM s1 g c1 0 1-0 IDLE 1000 JUSTID");
        let r = streams(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 500 STREAMS s1 s2 s3 > > >"));
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].0.as_str(), ids(&r[0].1)), ("s1", vec!["1-0".to_string()]));
    });
}

/// [VT "verify claiming order"]: oldest delivery first (not ID order); new entries after, in ID
/// order; COUNT covers both.
#[test]
fn claim_order_is_delivery_time() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "a"), ("2-0", "b"), ("3-0", "c"), ("4-0", "d"), ("5-0", "e")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 COUNT 3 STREAMS s >");
        // Delivery times: 2-0 oldest, then 3-0, then 1-0.
        c.cmd_str("XS.CLAIM s g c1 0 2-0 IDLE 3000 JUSTID");
        c.cmd_str("XS.CLAIM s g c1 0 3-0 IDLE 2000 JUSTID");
        c.cmd_str("XS.CLAIM s g c1 0 1-0 IDLE 1000 JUSTID");
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 500 COUNT 4 STREAMS s >"));
        assert_eq!(ids(&e), ["2-0", "3-0", "1-0", "4-0"]);
        let idles: Vec<i64> = e.iter().map(|e| e.idle.unwrap_or(-1)).collect();
        assert!(idles[0] >= 3000 && idles[1] >= 2000 && idles[1] < 3000 && idles[2] >= 1000 && idles[2] < 2000, "{idles:?}");
        assert_eq!(idles[3], 0);
        // The claimed ones went to the tail in claim order: CLAIM 0 sees 5-0 last (new).
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c3 CLAIM 0 STREAMS s >"));
        assert_eq!(ids(&e), ["2-0", "3-0", "1-0", "4-0", "5-0"]);
        // The walk stops at the first entry not idle enough, even if later ones are.
        c.cmd_str("XS.CLAIM s g c1 0 4-0 IDLE 5000 JUSTID");
        c.cmd_str("XS.CLAIM s g c1 0 5-0 IDLE 100 JUSTID");
        c.cmd_str("XS.CLAIM s g c1 0 1-0 IDLE 4000 JUSTID");
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 1000 STREAMS s >"));
        assert_eq!(ids(&e), ["4-0", "1-0"]);
    });
}

/// [VT "with large number of PEL messages", COUNT per stream]: COUNT 2 with 3 claimable gives
/// 2 claimed and no new entry; COUNT 0 (none) gives all.
#[test]
fn claim_count_covers_claimed_and_new() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        setup3(c);
        c.cmd_str("XS.ADD s 4-0 f v4");
        c.cmd_str("XS.READGROUP GROUP g c1 COUNT 3 STREAMS s >");
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 COUNT 2 STREAMS s >"));
        assert_eq!(ids(&e), ["1-0", "2-0"]);
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 COUNT 2 STREAMS s >"));
        assert_eq!(ids(&e), ["3-0", "1-0"]);
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 STREAMS s >"));
        assert_eq!(ids(&e), ["2-0", "3-0", "1-0", "4-0"]);
        // A large PEL.
        c.cmd_str("FLUSHALL");
        for i in 1..=500 {
            c.cmd(&["XS.ADD", "s", &format!("{i}-0"), "f", "v"]);
        }
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 COUNT 100 STREAMS s >"));
        assert_eq!(e.len(), 100);
        assert_eq!(e[0].id, "1-0");
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 STREAMS s >"));
        assert_eq!(e.len(), 500);
        assert_eq!((e[0].id.as_str(), e[399].id.as_str(), e[400].id.as_str()), ("101-0", "500-0", "1-0"));
    });
}

/// [VT "with different position", "with multiple CLAIM options"]: order-free, the last wins.
#[test]
fn claim_positions_and_last_wins() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "v1"), ("2-0", "v2")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s >");
        let mut counts = Vec::new();
        for line in [
            "XS.READGROUP GROUP g c1 COUNT 1 CLAIM 50 STREAMS s >",
            "XS.READGROUP GROUP g c1 CLAIM 50 COUNT 1 STREAMS s >",
            "XS.READGROUP GROUP g c1 CLAIM 50 COUNT 1 CLAIM 60 STREAMS s >",
            "XS.READGROUP CLAIM 50 GROUP g c1 COUNT 1 STREAMS s >",
            "XS.READGROUP GROUP g c1 CLAIM 100000 COUNT 1 CLAIM 50 STREAMS s >",
        ] {
            sleep_ms(70);
            let e = one(&c.cmd_str(line));
            assert_eq!(ids(&e), ["1-0"], "{line}");
            counts.push(e[0].count.unwrap_or(-1));
        }
        assert_eq!(counts, [1, 2, 3, 4, 5]);
        // The last wins the other way round too: only the new entry.
        sleep_ms(70);
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c1 CLAIM 50 COUNT 1 CLAIM 100000 STREAMS s >"));
        assert_eq!(ids(&e), ["2-0"]);
    });
}

/// §4.4 examples: DELCONSUMER, SETID forward, XTRIM MAXLEN 0, an entry deleted by XDEL
/// (skipped and left pending).
#[test]
fn claim_after_group_changes() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        assert_eq!(c.cmd_str("XS.GROUP DELCONSUMER s g c1"), Reply::Int(3));
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 STREAMS s >"), Reply::Nil);

        c.cmd_str("FLUSHALL");
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 COUNT 2 STREAMS s >");
        c.cmd_str("XS.GROUP SETID s g 3-0");
        assert_eq!(ids(&one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 STREAMS s >"))), ["1-0", "2-0"]);

        c.cmd_str("FLUSHALL");
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        c.cmd_str("XS.TRIM s MAXLEN 0");
        sleep_ms(20);
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 10 STREAMS s >"), Reply::Nil);
        assert_eq!(pending(c, "s", "g").len(), 3, "ghost entries stay pending");

        c.cmd_str("FLUSHALL");
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        c.cmd_str("XS.DEL s 1-0");
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 STREAMS s >"));
        assert_eq!(ids(&e), ["2-0", "3-0"]);
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c1", 1), ("2-0", "c2", 2), ("3-0", "c2", 2)]));
        // A deleted first entry does not stop the walk, nor make the stream claimable.
        c.cmd_str("XS.DEL s 2-0 3-0");
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 STREAMS s >"), Reply::Nil);
    });
}

/// [VT "within MULTI/EXEC transaction"]; BLOCK inside MULTI does not block.
#[test]
fn claim_in_multi() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "v1")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        sleep_ms(60);
        c.cmd_str("MULTI");
        c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 50 STREAMS s >");
        c.cmd_str("XS.READGROUP GROUP g c3 BLOCK 1000 CLAIM 50 STREAMS s >");
        let r = c.cmd_str("EXEC");
        let r = r.as_array();
        assert_eq!(ids(&one(&r[0])), ["1-0"]);
        assert_eq!(r[1], Reply::Nil);
        assert_eq!(c.cmd_str("XS.PENDING s g").as_array()[0], Reply::Int(1));
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c2", 2)]));
    });
}

/// MAXCOUNT / MAXSIZE (§7): claimed entries count; withheld ones stay with their owner.
#[test]
fn claim_within_maxcount_maxsize() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        setup3(c);
        add(c, "t", &[("1-0", "v1"), ("2-0", "v2")]);
        c.cmd_str("XS.GROUP CREATE t g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s t > >");
        let r = streams(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 MAXCOUNT 4 STREAMS s t > >"));
        let got: Vec<(String, Vec<String>)> = r.iter().map(|(k, e)| (k.clone(), ids(e))).collect();
        assert_eq!(got, [("s".to_string(), vec!["1-0".to_string(), "2-0".into(), "3-0".into()]), ("t".into(), vec!["1-0".into()])]);
        assert_eq!(pending(c, "t", "g"), owned(&[("1-0", "c2", 2), ("2-0", "c1", 1)]));
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c3 CLAIM 0 MAXSIZE 1 STREAMS t s > >"));
        assert_eq!(ids(&e), ["2-0"]);
        assert_eq!(pending(c, "t", "g"), owned(&[("1-0", "c2", 2), ("2-0", "c3", 2)]));
    });
}

/// Delivery counts saturate at LLONG_MAX (§6.3).
#[test]
fn claim_count_saturates() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "v1")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        c.cmd_str("XS.CLAIM s g c1 0 1-0 RETRYCOUNT 9223372036854775806 JUSTID");
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 STREAMS s >"))[0].count.unwrap_or(-1));
        }
        assert_eq!(seen, [i64::MAX - 1, i64::MAX, i64::MAX]);
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c2", i64::MAX)]));
    });
}

/// A client blocked in `XS.READGROUP ... BLOCK ms CLAIM min ...` (sent on a new connection).
fn blocked_claim_reader(s: &Server, resp3: bool, args: &str) -> Conn {
    let mut w = s.conn();
    if resp3 {
        w.hello3();
    }
    let v: Vec<&str> = args.split(' ').collect();
    w.send(&v).expect("send");
    w
}

/// [VT "BLOCK with CLAIM": BLOCK 5000 CLAIM 1000 returns the entry after ~1 s; BLOCK 100
/// CLAIM 500 times out in 100-300 ms; "with BLOCK zero"].
#[test]
fn block_claim_wakes_when_claimable() {
    let s = Server::start();
    each_protocol(&s, |c, resp3| {
        add(c, "s", &[("1-0", "v1")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        let t0 = Instant::now();
        let mut w = blocked_claim_reader(&s, resp3, "XS.READGROUP GROUP g c2 BLOCK 5000 CLAIM 1000 STREAMS s >");
        w.set_timeout(Duration::from_secs(10));
        let r = w.read_reply().expect("reply").0;
        let took = t0.elapsed().as_millis();
        assert!((950..1500).contains(&took), "woken after {took} ms");
        let e = one(&r);
        assert_eq!((ids(&e), e[0].count), (vec!["1-0".to_string()], Some(1)));
        assert!(e[0].idle.unwrap_or(-1) >= 1000, "{e:?}");
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c2", 2)]));

        // Times out: null after BLOCK's 100 ms (not CLAIM's 500).
        let t0 = Instant::now();
        let r = c.cmd_str("XS.READGROUP GROUP g c1 BLOCK 100 CLAIM 500 STREAMS s >");
        let took = t0.elapsed().as_millis();
        assert_eq!(r, Reply::Nil);
        assert!((100..300).contains(&took), "timed out after {took} ms");

        // TCG "with BLOCK zero".
        c.cmd_str("FLUSHALL");
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c1 BLOCK 1 STREAMS s >"), Reply::Nil);
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c1 BLOCK 100 CLAIM 500 STREAMS s >"), Reply::Nil);
        sleep_ms(100);
        assert_eq!(one(&c.cmd_str("XS.READGROUP GROUP g c1 BLOCK 10000 CLAIM 50 STREAMS s >")).len(), 3);
        sleep_ms(100);
        assert_eq!(one(&c.cmd_str("XS.READGROUP GROUP g c1 BLOCK 0 CLAIM 50 STREAMS s >")).len(), 3);
        // BLOCK 0 waits as long as it takes.
        let t0 = Instant::now();
        let mut w = blocked_claim_reader(&s, resp3, "XS.READGROUP GROUP g c2 BLOCK 0 CLAIM 300 STREAMS s >");
        w.set_timeout(Duration::from_secs(10));
        assert_eq!(one(&w.read_reply().expect("reply").0).len(), 3);
        let took = t0.elapsed().as_millis();
        assert!((250..800).contains(&took), "woken after {took} ms");
    });
}

/// [VT "a new XADD still wakes immediately"; "with two blocked clients"]: a plain reader takes
/// the new entry, the CLAIM reader stays blocked and claims it once idle enough.
#[test]
fn block_claim_xadd_and_two_readers() {
    let s = Server::start();
    each_protocol(&s, |c, resp3| {
        add(c, "s", &[("1-0", "v1")]);
        c.cmd_str("XS.GROUP CREATE s g 0");
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        let mut w = blocked_claim_reader(&s, resp3, "XS.READGROUP GROUP g c2 BLOCK 5000 CLAIM 3000 STREAMS s >");
        assert!(wait_blocked_clients(c, 1));
        let t0 = Instant::now();
        c.cmd_str("XS.ADD s 2-0 f v2");
        w.set_timeout(Duration::from_secs(10));
        let e = one(&w.read_reply().expect("reply").0);
        assert!(t0.elapsed() < Duration::from_millis(200), "{:?}", t0.elapsed());
        assert_eq!(e, [Ent { id: "2-0".into(), fields: vec!["f".into(), "v2".into()], idle: Some(0), count: Some(0) }]);

        c.cmd_str("FLUSHALL");
        c.cmd_str("XS.ADD s 1-0 f v1");
        c.cmd_str("XS.DEL s 1-0");
        c.cmd_str("XS.GROUP CREATE s g 0 MKSTREAM");
        let mut w1 = blocked_claim_reader(&s, resp3, "XS.READGROUP GROUP g c1 BLOCK 0 STREAMS s >");
        assert!(wait_blocked_clients(c, 1));
        let mut w2 = blocked_claim_reader(&s, resp3, "XS.READGROUP GROUP g c2 BLOCK 0 CLAIM 100 STREAMS s >");
        assert!(wait_blocked_clients(c, 2));
        let t0 = Instant::now();
        c.cmd_str("XS.ADD s 2-0 f v2");
        w1.set_timeout(Duration::from_secs(5));
        w2.set_timeout(Duration::from_secs(5));
        let e1 = one(&w1.read_reply().expect("reply").0);
        assert_eq!((ids(&e1), e1[0].idle), (vec!["2-0".to_string()], None));
        let e2 = one(&w2.read_reply().expect("reply").0);
        let took = t0.elapsed().as_millis();
        assert_eq!((ids(&e2), e2[0].count), (vec!["2-0".to_string()], Some(1)));
        assert!((95..600).contains(&took), "the CLAIM reader got it after {took} ms");
    });
}

/// [VT redis-py "claim nacked entries first"; §6.3]: NACKed entries (XS.NACK, 8.8) come first,
/// in the zone's FIFO order, whatever min-idle (even LLONG_MAX), with idle = now - 0 and the
/// count before the claim; claiming takes them out of the zone (the owner is the reader).
#[test]
fn claim_takes_nacked_entries_first() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        assert_eq!(c.cmd_str("XS.READGROUP GROUP g c1 CLAIM 60000 STREAMS s >"), Reply::Nil);
        assert_eq!(c.cmd_str("XS.NACK s g FAIL IDS 1 2-0"), Reply::Int(1));
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 60000 STREAMS s >"));
        assert_eq!((ids(&e), e[0].count), (vec!["2-0".to_string()], Some(1)));
        assert!(e[0].idle.unwrap_or(0) > 1_000_000_000_000, "idle of a NACKed entry: {e:?}");
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c1", 1), ("2-0", "c2", 2), ("3-0", "c1", 1)]));
        // Zone FIFO, then delivery order; LLONG_MAX min-idle still takes the zone.
        assert_eq!(c.cmd_str("XS.NACK s g SILENT IDS 2 3-0 1-0"), Reply::Int(2));
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c3 CLAIM 9223372036854775807 STREAMS s >"));
        assert_eq!(ids(&e), ["3-0", "1-0"]);
        assert_eq!(e.iter().map(|e| e.count).collect::<Vec<_>>(), [Some(0), Some(0)]);
        assert_eq!(c.cmd_str("XS.NACK s g FATAL IDS 1 1-0"), Reply::Int(1));
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c1 CLAIM 0 STREAMS s >"));
        assert_eq!(ids(&e), ["1-0", "2-0", "3-0"]);
        assert_eq!(e[0].count, Some(i64::MAX));
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c1", i64::MAX), ("2-0", "c1", 3), ("3-0", "c1", 2)]));
        // A deleted NACKed entry is skipped and stays in the zone.
        c.cmd_str("XS.NACK s g FAIL IDS 2 1-0 2-0");
        c.cmd_str("XS.DEL s 1-0");
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 60000 STREAMS s >"));
        assert_eq!(ids(&e), ["2-0"]);
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "", i64::MAX), ("2-0", "c2", 4), ("3-0", "c1", 2)]));
    });
}

/// [VT §4.5 "XNACK also signals the key, which wakes CLAIM readers at once"].
#[test]
fn xnack_wakes_blocked_claim_reader_at_once() {
    let s = Server::start();
    each_protocol(&s, |c, resp3| {
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        let mut w = blocked_claim_reader(&s, resp3, "XS.READGROUP GROUP g c2 BLOCK 10000 CLAIM 60000 STREAMS s >");
        assert!(wait_blocked_clients(c, 1));
        let t0 = Instant::now();
        assert_eq!(c.cmd_str("XS.NACK s g FAIL IDS 1 3-0"), Reply::Int(1));
        w.set_timeout(Duration::from_secs(5));
        let e = one(&w.read_reply().expect("reply").0);
        assert!(t0.elapsed() < Duration::from_millis(200), "{:?}", t0.elapsed());
        assert_eq!((ids(&e), e[0].count), (vec!["3-0".to_string()], Some(1)));
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c1", 1), ("2-0", "c1", 1), ("3-0", "c2", 2)]));
    });
}

/// CLAIM of NACKed entries replicates: the replica's zone, owners and counts end the same.
#[test]
fn claim_of_nacked_entries_replicates() {
    let p = Server::start();
    let r = Server::replica_of(&p);
    let mut c = p.conn();
    let mut rc = r.conn();
    setup3(&mut c);
    c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
    c.cmd_str("XS.NACK s g FAIL IDS 2 3-0 1-0");
    c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 60000 COUNT 1 STREAMS s >");
    wait_replica(&mut c, &mut rc);
    assert_eq!(pending(&mut rc, "s", "g"), owned(&[("1-0", "", 1), ("2-0", "c1", 1), ("3-0", "c2", 2)]));
    assert_eq!(rc.cmd_str("DEBUG DIGEST-VALUE s"), c.cmd_str("DEBUG DIGEST-VALUE s"));
}

/// Takeover mode: the built-in names reach CLAIM (XREADGROUP ... CLAIM, XREAD's error).
#[test]
fn claim_in_takeover_mode() {
    let s = Server::builder().module_args(&["takeover", "yes"]).start();
    each_protocol(&s, |c, _| {
        add(c, "s", &[("1-0", "v1"), ("2-0", "v2")]);
        c.cmd_str("XGROUP CREATE s g 0");
        c.cmd_str("XREADGROUP GROUP g c1 COUNT 1 STREAMS s >");
        let e = one(&c.cmd_str("XREADGROUP GROUP g c2 CLAIM 0 STREAMS s >"));
        assert_eq!((ids(&e), e[0].count, e[1].count), (vec!["1-0".to_string(), "2-0".into()], Some(1), Some(0)));
        assert_eq!(c.cmd_str("XREAD CLAIM 10 STREAMS s 0"), err("ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead."));
    });
}

/// A blocked CLAIM reader whose key goes away: 7.0's text at compat 7.0, the re-executed
/// command's NOGROUP from 7.2 on, on every host.
#[test]
fn block_claim_key_deleted() {
    for (level, want) in [
        ("7.0", "UNBLOCKED the stream key no longer exists"),
        ("latest", "NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"),
    ] {
        // The level as a module argument (CONFIG SET of a string config leaks in the
        // redis-module glue under LeakSanitizer).
        let s = Server::builder().module_args(&["compat", level]).start();
        let mut c = s.conn();
        c.cmd_str("XS.GROUP CREATE s g $ MKSTREAM");
        let mut w = blocked_claim_reader(&s, false, "XS.READGROUP GROUP g c BLOCK 0 CLAIM 100000 STREAMS s >");
        assert!(wait_blocked_clients(&mut c, 1));
        c.cmd_str("DEL s");
        w.set_timeout(Duration::from_secs(5));
        assert_eq!(w.read_reply().expect("reply").0, err(want), "compat {level}");
    }
}

/// [VT "CLAIM state persists across RDB save/load", "idle time resets after RDB reload", "high
/// delivery counts persist"]: DEBUG RELOAD keeps delivery times and counts.
#[test]
fn claim_state_survives_reload() {
    let s = Server::start();
    each_protocol(&s, |c, _| {
        setup3(c);
        c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >");
        c.cmd_str("XS.CLAIM s g c1 0 3-0 RETRYCOUNT 1000 JUSTID");
        sleep_ms(60);
        assert_eq!(one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 50 COUNT 1 STREAMS s >")).len(), 1);
        let before = pending(c, "s", "g");
        assert_eq!(before, owned(&[("1-0", "c2", 2), ("2-0", "c1", 1), ("3-0", "c1", 1000)]));
        assert_eq!(c.cmd_str("DEBUG RELOAD"), Reply::Simple("OK".into()));
        assert_eq!(pending(c, "s", "g"), before);
        // 1-0 was claimed just now: not idle enough yet; 2-0 and 3-0 are, in that order.
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c3 CLAIM 50 STREAMS s >"));
        assert_eq!(ids(&e), ["2-0", "3-0"]);
        assert_eq!(e.iter().map(|e| e.count).collect::<Vec<_>>(), [Some(1), Some(1000)]);
        assert!(e.iter().all(|e| e.idle.unwrap_or(0) >= 60), "{e:?}");
        sleep_ms(60);
        c.cmd_str("DEBUG RELOAD");
        // All three are idle enough now; 1-0 was claimed first.
        let e = one(&c.cmd_str("XS.READGROUP GROUP g c3 CLAIM 50 STREAMS s >"));
        assert_eq!(ids(&e), ["1-0", "2-0", "3-0"]);
        assert!(e.iter().all(|e| e.idle.unwrap_or(0) >= 50 && e.idle.unwrap_or(0) < 1000), "{e:?}");
        assert_eq!(pending(c, "s", "g"), owned(&[("1-0", "c3", 3), ("2-0", "c3", 3), ("3-0", "c3", 1002)]));
    });
}

fn wait_replica(c: &mut Conn, rc: &mut Conn) {
    assert_eq!(c.cmd(&["WAIT", "1", "10000"]), Reply::Int(1));
    let off = |c: &mut Conn| {
        let info = c.cmd(&["INFO", "replication"]).text();
        info.lines().find(|l| l.starts_with("master_repl_offset:")).map(|l| l.trim().to_string()).unwrap_or_default()
    };
    let t0 = Instant::now();
    while off(c) != off(rc) && t0.elapsed() < Duration::from_secs(10) {
        sleep_ms(10);
    }
}

/// [VT "delivery count increments replicated correctly": 1 -> 2 -> 3]: the replica ends with
/// the same owners, counts and delivery times (digest), also for a blocked CLAIM reader, NOACK
/// and claimed-only reads (no SETID).
#[test]
fn claim_replicates() {
    let p = Server::builder().arg("--appendonly", "yes").start();
    let r = Server::replica_of(&p);
    let mut c = p.conn();
    let mut rc = r.conn();
    add(&mut c, "s", &[("1-0", "v1"), ("2-0", "v2")]);
    c.cmd_str("XS.GROUP CREATE s g 0");
    c.cmd_str("XS.READGROUP GROUP g c1 COUNT 1 STREAMS s >");
    let mut counts = Vec::new();
    for consumer in ["c2", "c3"] {
        sleep_ms(60);
        c.cmd(&["XS.READGROUP", "GROUP", "g", consumer, "CLAIM", "50", "COUNT", "1", "STREAMS", "s", ">"]);
        wait_replica(&mut c, &mut rc);
        let rp = pending(&mut rc, "s", "g");
        assert_eq!(rp, pending(&mut c, "s", "g"));
        counts.push(rp[0].2);
    }
    assert_eq!(counts, [2, 3]);
    // Claimed + new with NOACK, then a blocked reader woken by its timer.
    sleep_ms(60);
    c.cmd_str("XS.READGROUP GROUP g c4 NOACK CLAIM 50 STREAMS s >");
    let mut w = p.conn();
    w.send(&["XS.READGROUP", "GROUP", "g", "c5", "BLOCK", "5000", "CLAIM", "200", "STREAMS", "s", ">"]).expect("send");
    w.set_timeout(Duration::from_secs(10));
    assert_eq!(ids(&one(&w.read_reply().expect("reply").0)), ["1-0"]);
    wait_replica(&mut c, &mut rc);
    assert_eq!(pending(&mut rc, "s", "g"), owned(&[("1-0", "c5", 5)]));
    assert_eq!(rc.cmd_str("DEBUG DIGEST-VALUE s"), c.cmd_str("DEBUG DIGEST-VALUE s"));
    assert_eq!(rc.cmd_str("XS.INFO GROUPS s"), c.cmd_str("XS.INFO GROUPS s"));
    // The AOF replays to the same state.
    let before = c.cmd_str("DEBUG DIGEST-VALUE s");
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    c.cmd_str("DEBUG LOADAOF");
    assert_eq!(c.cmd_str("DEBUG DIGEST-VALUE s"), before);
}

/// The model of one stream with one group for [`claim_random_against_model`].
#[derive(Default)]
struct Model {
    /// Live entry IDs (`n-0`, value `v<n>`).
    entries: std::collections::BTreeSet<u64>,
    next: u64,
    last: u64,
    /// The group PEL in delivery-time order: (id, owner, count).
    pel: Vec<(u64, String, i64)>,
}

impl Model {
    fn take(&mut self, id: u64) -> Option<(u64, String, i64)> {
        let pos = self.pel.iter().position(|p| p.0 == id)?;
        Some(self.pel.remove(pos))
    }
    fn by_id(&self) -> Vec<(String, String, i64)> {
        let mut v: Vec<(String, String, i64)> = self.pel.iter().map(|(id, o, n)| (format!("{id}-0"), o.clone(), *n)).collect();
        v.sort_by_key(|(id, _, _)| id.trim_end_matches("-0").parse::<u64>().unwrap_or(0));
        v
    }
}

/// An entry of a random read: (id, count element if 4 elements; None for 2; Some(-1) for a
/// deleted history entry) and its idle when given.
fn loose(r: &Reply) -> Vec<(String, Option<i64>, Option<i64>)> {
    let s = match r {
        Reply::Nil => return Vec::new(),
        Reply::Array(v) if v.len() == 1 => v[0].as_array()[1].clone(),
        other => panic!("one stream expected: {other}"),
    };
    s.as_array()
        .iter()
        .map(|e| {
            let v = e.as_array();
            match (v.len(), &v[1]) {
                (2, Reply::Nil) => (v[0].text(), Some(-1), None),
                (2, _) => (v[0].text(), None, None),
                (4, _) => (v[0].text(), Some(v[3].as_int()), Some(v[2].as_int())),
                _ => panic!("bad entry {e}"),
            }
        })
        .collect()
}

/// Random XS.READGROUP with and without CLAIM (0: everything pending; huge: nothing), history
/// reads, XS.CLAIM, XS.ACK, XS.DEL, checked reply by reply against a model of the group's
/// time-ordered PEL; XS.PENDING against the model now and then; at the end a CLAIM 0 read shows
/// the whole time order, the replica's digest equals the primary's, and DEBUG RELOAD (whose
/// loader checks the group invariants) keeps the PEL. XSTREAM_SEED replays a run;
/// CLAIM_RANDOM_OPS sets its length. Two runs: with history reads (which, as the built-in's,
/// propagate nothing: their new counts and times stay on the primary, so the replica is not
/// compared), and without them, compared with the replica.
#[test]
fn claim_random_against_model() {
    random_run(true);
    random_run(false);
}

fn random_run(history: bool) {
    let p = Server::start();
    let r = Server::replica_of(&p);
    let mut c = p.conn();
    let mut rc = r.conn();
    let mut rng = Rng::from_env("claim_random_against_model");
    let ops = env_usize("CLAIM_RANDOM_OPS", 3000);
    let consumers = ["c1", "c2", "c3", "c4"];
    let mut m = Model::default();
    c.cmd_str("XS.GROUP CREATE s g 0 MKSTREAM");
    for step in 0..ops {
        let what = rng.weighted(&[30, 30, if history { 10 } else { 0 }, 12, 10, 8, 8]);
        let cons = *rng.pick(&consumers);
        let ctx = format!("seed {} step {step}", rng.seed());
        match what {
            0 => {
                m.next += 1;
                let id = format!("{}-0", m.next);
                assert_eq!(c.cmd(&["XS.ADD", "s", &id, "f", &format!("v{}", m.next)]).text(), id);
                m.entries.insert(m.next);
            }
            1 => {
                let count = *rng.pick(&[0usize, 1, 2, 5]);
                let mode = rng.below(3); // 0: no CLAIM, 1: CLAIM 0, 2: CLAIM huge
                let noack = rng.pct(20);
                let mut args = vec!["XS.READGROUP", "GROUP", "g", cons];
                let count_s = count.to_string();
                if count > 0 {
                    args.extend(["COUNT", &count_s]);
                }
                match mode {
                    1 => args.extend(["CLAIM", "0"]),
                    2 => args.extend(["CLAIM", "9223372036854775807"]),
                    _ => {}
                }
                if noack {
                    args.push("NOACK");
                }
                args.extend(["STREAMS", "s", ">"]);
                let limit = if count == 0 { usize::MAX } else { count };
                let mut want: Vec<(String, Option<i64>, Option<i64>)> = Vec::new();
                if mode != 0 {
                    // The NACK zone (owner "") always qualifies; CLAIM huge stops at the
                    // first live entry outside it.
                    let live: Vec<(u64, i64)> = m
                        .pel
                        .iter()
                        .filter(|p| m.entries.contains(&p.0))
                        .take_while(|p| mode == 1 || p.1.is_empty())
                        .map(|p| (p.0, p.2))
                        .take(limit)
                        .collect();
                    for (id, n) in live {
                        m.take(id);
                        m.pel.push((id, cons.to_string(), n.saturating_add(1)));
                        want.push((format!("{id}-0"), Some(n), None));
                    }
                }
                let new: Vec<u64> = m.entries.range(m.last + 1..).copied().take(limit - want.len().min(limit)).collect();
                for id in new {
                    m.last = id;
                    if !noack {
                        m.take(id);
                        m.pel.push((id, cons.to_string(), 1));
                    }
                    want.push((format!("{id}-0"), (mode != 0).then_some(0), None));
                }
                let got = c.cmd(&args);
                let mut g = loose(&got);
                for (i, e) in g.iter_mut().enumerate() {
                    let idle = e.2.take();
                    if let Some(idle) = idle {
                        let claimed = want.get(i).is_some_and(|w| w.1.is_some_and(|n| n > 0));
                        // Claimed: since the last delivery (a NACKed entry's: since 0).
                        assert!(if claimed { idle >= 0 } else { idle == 0 }, "{ctx}: idle {idle} in {got}");
                    }
                }
                assert_eq!(g, want, "{ctx}: {}", args.join(" "));
            }
            2 => {
                // A history read (CLAIM ignored): own entries in ID order, each re-delivered.
                let count = *rng.pick(&[0usize, 1, 3]);
                let mut args = vec!["XS.READGROUP", "GROUP", "g", cons];
                let count_s = count.to_string();
                if count > 0 {
                    args.extend(["COUNT", &count_s]);
                }
                if rng.pct(50) {
                    args.extend(["CLAIM", "0"]);
                }
                args.extend(["STREAMS", "s", "0"]);
                let mut own: Vec<u64> = m.pel.iter().filter(|p| p.1 == cons).map(|p| p.0).collect();
                own.sort_unstable();
                if count > 0 {
                    own.truncate(count);
                }
                let mut want = Vec::new();
                for id in own {
                    if m.entries.contains(&id) {
                        if let Some((_, o, n)) = m.take(id) {
                            m.pel.push((id, o, n.saturating_add(1)));
                        }
                        want.push((format!("{id}-0"), None, None));
                    } else {
                        want.push((format!("{id}-0"), Some(-1), None));
                    }
                }
                assert_eq!(loose(&c.cmd(&args)), want, "{ctx}: {}", args.join(" "));
            }
            3 => {
                // XS.CLAIM min-idle 0 JUSTID of 1-3 distinct IDs (pending or not).
                let mut pick: Vec<u64> = Vec::new();
                for _ in 0..rng.range(1, 4) {
                    let id =
                        if !m.pel.is_empty() && rng.pct(80) { m.pel[rng.below(m.pel.len() as u64) as usize].0 } else { rng.range(1, m.next + 2) };
                    if !pick.contains(&id) {
                        pick.push(id);
                    }
                }
                let id_args: Vec<String> = pick.iter().map(|id| format!("{id}-0")).collect();
                let mut args = vec!["XS.CLAIM", "s", "g", cons, "0"];
                args.extend(id_args.iter().map(|s| s.as_str()));
                args.push("JUSTID");
                let mut want = Vec::new();
                for id in pick {
                    let Some((_, _, n)) = m.take(id) else { continue };
                    if m.entries.contains(&id) {
                        m.pel.push((id, cons.to_string(), n));
                        want.push(Reply::Bulk(format!("{id}-0").into_bytes()));
                    }
                }
                assert_eq!(c.cmd(&args), Reply::Array(want), "{ctx}: {}", args.join(" "));
            }
            4 => {
                let mut ids = Vec::new();
                for _ in 0..rng.range(1, 3) {
                    if !m.pel.is_empty() {
                        ids.push(m.pel[rng.below(m.pel.len() as u64) as usize].0);
                    }
                }
                ids.dedup();
                if ids.is_empty() {
                    continue;
                }
                let id_args: Vec<String> = ids.iter().map(|id| format!("{id}-0")).collect();
                let mut args = vec!["XS.ACK", "s", "g"];
                args.extend(id_args.iter().map(|s| s.as_str()));
                let n = ids.iter().filter(|id| m.take(**id).is_some()).count();
                assert_eq!(c.cmd(&args), Reply::Int(n as i64), "{ctx}: {}", args.join(" "));
            }
            6 => {
                // XS.NACK FAIL (count kept): to the end of the NACK zone, unowned.
                let mut ids: Vec<u64> = Vec::new();
                for _ in 0..rng.range(1, 3) {
                    let id =
                        if !m.pel.is_empty() && rng.pct(85) { m.pel[rng.below(m.pel.len() as u64) as usize].0 } else { rng.range(1, m.next + 2) };
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                let id_args: Vec<String> = ids.iter().map(|id| format!("{id}-0")).collect();
                let n_s = ids.len().to_string();
                let mut args = vec!["XS.NACK", "s", "g", "FAIL", "IDS", &n_s];
                args.extend(id_args.iter().map(|s| s.as_str()));
                let mut n = 0;
                for id in ids {
                    if let Some((_, _, cnt)) = m.take(id) {
                        let zone = m.pel.iter().take_while(|p| p.1.is_empty()).count();
                        m.pel.insert(zone, (id, String::new(), cnt));
                        n += 1;
                    }
                }
                assert_eq!(c.cmd(&args), Reply::Int(n), "{ctx}: {}", args.join(" "));
            }
            _ => {
                let live: Vec<u64> = m.entries.iter().copied().collect();
                if live.is_empty() {
                    continue;
                }
                let id = live[rng.below(live.len() as u64) as usize];
                assert_eq!(c.cmd(&["XS.DEL", "s", &format!("{id}-0")]), Reply::Int(1), "{ctx}");
                m.entries.remove(&id);
            }
        }
        if step % 50 == 0 {
            assert_eq!(pending_all(&mut c), m.by_id(), "{ctx}: XS.PENDING");
        }
    }
    // The whole time order, live entries only (deleted ones are skipped and stay).
    let e = loose(&c.cmd_str("XS.READGROUP GROUP g final CLAIM 0 STREAMS s >"));
    let live: Vec<String> = m.pel.iter().filter(|p| m.entries.contains(&p.0)).map(|p| format!("{}-0", p.0)).collect();
    let news: Vec<String> = m.entries.range(m.last + 1..).map(|id| format!("{id}-0")).collect();
    let got: Vec<String> = e.iter().map(|x| x.0.clone()).collect();
    assert_eq!(got, [live, news].concat(), "final CLAIM 0 read");
    if !history {
        wait_replica(&mut c, &mut rc);
        assert_eq!(rc.cmd_str("DEBUG DIGEST-VALUE s"), c.cmd_str("DEBUG DIGEST-VALUE s"), "replica digest");
        assert_eq!(pending_all(&mut rc), pending_all(&mut c), "replica PEL");
        // The replica's time order too: a CLAIM 0 read there (after promotion) lists the same.
        assert_eq!(rc.cmd_str("REPLICAOF NO ONE"), Reply::Simple("OK".into()));
        let on_replica = loose(&rc.cmd_str("XS.READGROUP GROUP g final2 CLAIM 0 STREAMS s >"));
        let on_primary = loose(&c.cmd_str("XS.READGROUP GROUP g final2 CLAIM 0 STREAMS s >"));
        let strip = |v: Vec<(String, Option<i64>, Option<i64>)>| v.into_iter().map(|(id, n, _)| (id, n)).collect::<Vec<_>>();
        assert_eq!(strip(on_replica), strip(on_primary), "replica time order");
    }
    let before = (c.cmd_str("DEBUG DIGEST-VALUE s"), pending_all(&mut c));
    assert_eq!(c.cmd_str("DEBUG RELOAD"), Reply::Simple("OK".into()));
    assert_eq!((c.cmd_str("DEBUG DIGEST-VALUE s"), pending_all(&mut c)), before, "after DEBUG RELOAD");
}

/// XS.PENDING s g - + (all): (id, owner, count).
fn pending_all(c: &mut Conn) -> Vec<(String, String, i64)> {
    let r = c.cmd(&["XS.PENDING", "s", "g", "-", "+", "1000000"]);
    r.as_array()
        .iter()
        .map(|p| {
            let p = p.as_array();
            (p[0].text(), p[1].text(), p[3].as_int())
        })
        .collect()
}

/// Measurement (run by hand: `cargo test --release --test redis8_claim -- --ignored
/// measure_claim_wake_latency --nocapture`): how late a blocked CLAIM reader is served after
/// its entry becomes claimable, over CLAIM_WAKE_RUNS (1,000) waits. Lateness = the idle time
/// the reply reports minus min-idle (server clock), and the client's wall time from sending
/// the read to the reply minus the expected wait. Asserts p99 < 20 ms.
#[test]
#[ignore]
fn measure_claim_wake_latency() {
    let s = Server::start();
    let mut c = s.conn();
    let mut w = s.conn();
    w.set_timeout(Duration::from_secs(10));
    let runs = env_usize("CLAIM_WAKE_RUNS", 1000);
    let min_idle = 20i64;
    c.cmd_str("XS.GROUP CREATE s g $ MKSTREAM");
    let mut server_late = Vec::with_capacity(runs);
    let mut client_late = Vec::with_capacity(runs);
    for i in 1..=runs {
        c.cmd(&["XS.ADD", "s", &format!("{i}-0"), "f", "v"]);
        let t0 = Instant::now();
        assert_eq!(ids(&one(&c.cmd_str("XS.READGROUP GROUP g c1 STREAMS s >"))), [format!("{i}-0")]);
        w.send(&["XS.READGROUP", "GROUP", "g", "c2", "BLOCK", "5000", "CLAIM", &min_idle.to_string(), "STREAMS", "s", ">"]).expect("send");
        let e = one(&w.read_reply().expect("reply").0);
        let took = t0.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(ids(&e), [format!("{i}-0")]);
        server_late.push((e[0].idle.unwrap_or(-1) - min_idle) as f64);
        client_late.push(took - min_idle as f64);
        c.cmd(&["XS.ACK", "s", "g", &format!("{i}-0")]);
    }
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        v[((v.len() as f64 - 1.0) * p).round() as usize]
    };
    let (s50, s99, smax) = (pct(&mut server_late, 0.5), pct(&mut server_late, 0.99), pct(&mut server_late, 1.0));
    let (c50, c99, cmax) = (pct(&mut client_late, 0.5), pct(&mut client_late, 0.99), pct(&mut client_late, 1.0));
    report(&format!(
        "CLAIM wake lateness over {runs} waits (CLAIM {min_idle}): server idle - min-idle p50 {s50} p99 {s99} max {smax} ms; \
         client wall time - min-idle p50 {c50:.2} p99 {c99:.2} max {cmax:.2} ms"
    ));
    assert!(s99 < 20.0 && c99 < 20.0, "p99 lateness {s99} / {c99:.2} ms");
}

/// CPU time (utime + stime, in clock ticks) of a process.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/pid/stat");
    // Fields after the command name (which may hold spaces): state is field 3.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0)
}

/// Measurement (by hand, `-- --ignored measure_blocked_claim_readers_idle_cpu --nocapture`):
/// 10,000 clients blocked in `XS.READGROUP ... BLOCK 0 CLAIM 3600000` on 1,000 keys (each with
/// a pending entry delivered now), nothing due for an hour: redis-server's CPU over 10 s, and
/// the same with plain blocked readers (no CLAIM) for comparison. Asserts that CLAIM adds less
/// than 1% of a core.
#[test]
#[ignore]
fn measure_blocked_claim_readers_idle_cpu() {
    let clients = env_usize("CLAIM_CPU_CLIENTS", 10_000);
    let keys = env_usize("CLAIM_CPU_KEYS", 1_000);
    let secs = env_usize("CLAIM_CPU_SECS", 10) as u64;
    let tck = 100.0; // sysconf(_SC_CLK_TCK) on Linux
    let mut figures = Vec::new();
    for claim in [true, false] {
        let s = Server::builder().arg("--maxclients", &(clients + 100).to_string()).start();
        let pid = s.pid().expect("pid");
        let mut c = s.conn();
        for k in 0..keys {
            let key = format!("k{k}");
            c.cmd(&["XS.ADD", &key, "1-0", "f", "v"]);
            c.cmd(&["XS.GROUP", "CREATE", &key, "g", "0"]);
            c.cmd(&["XS.READGROUP", "GROUP", "g", "c0", "STREAMS", &key, ">"]);
        }
        let mut conns = Vec::with_capacity(clients);
        for i in 0..clients {
            // A bare socket (one descriptor, no read buffer): 10,000 of them.
            let mut w = std::net::TcpStream::connect(("127.0.0.1", s.port())).expect("connect");
            let key = format!("k{}", i % keys);
            let cons = format!("c{}", i % 7 + 1);
            let mut args = vec!["XS.READGROUP", "GROUP", "g", &cons, "BLOCK", "0"];
            if claim {
                args.extend(["CLAIM", "3600000"]);
            }
            args.extend(["STREAMS", &key, ">"]);
            std::io::Write::write_all(&mut w, &Conn::encode(&args)).expect("send");
            conns.push(w);
        }
        let t0 = Instant::now();
        while !c.cmd(&["INFO", "clients"]).text().contains(&format!("blocked_clients:{clients}\r")) {
            assert!(t0.elapsed() < Duration::from_secs(60), "the readers did not all block");
            sleep_ms(50);
        }
        sleep_ms(1000);
        let before = cpu_ticks(pid);
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        let ticks = cpu_ticks(pid) - before;
        let pct = ticks as f64 / tck / t0.elapsed().as_secs_f64() * 100.0;
        assert!(c.cmd(&["INFO", "clients"]).text().contains(&format!("blocked_clients:{clients}\r")), "someone woke");
        figures.push((claim, ticks, pct));
        drop(conns);
    }
    report(&format!(
        "{clients} blocked readers on {keys} keys, {secs} s: with CLAIM {} ticks = {:.2}% of a core; without CLAIM {} ticks = {:.2}%",
        figures[0].1, figures[0].2, figures[1].1, figures[1].2
    ));
    // Redis's own cron over 10,000 clients costs about as much as that budget: what CLAIM may
    // add is less than 1% of a core on top of plain blocked readers.
    assert!(figures[0].2 - figures[1].2 < 1.0, "{figures:?}");
}

/// The use CLAIM is for: workers blocked in `XS.READGROUP ... BLOCK CLAIM 100` on five streams
/// drop 30% of what they get (a crash before XACK); nothing else ever touches the dropped
/// entries, so once the producer stops only the timer wake-ups bring them back to some worker
/// (BLOCK 3000: a reader's own timeout is not what drains them). Every entry a producer
/// adds is acknowledged in the end, each exactly once (the XACK replies sum to the count).
#[test]
fn claim_workers_recover_dropped_entries() {
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    use std::sync::Arc;
    let s = Server::start();
    let mut c = s.conn();
    let keys = ["w1", "w2", "w3", "w4", "w5"];
    for k in keys {
        c.cmd(&["XS.GROUP", "CREATE", k, "g", "$", "MKSTREAM"]);
    }
    let total = env_usize("CLAIM_WORKERS_ENTRIES", 400) as i64;
    let acked = Arc::new(AtomicI64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..6u64 {
        let (acked, done) = (acked.clone(), done.clone());
        let mut conn = s.conn();
        workers.push(std::thread::spawn(move || {
            let mut rng = Rng::new(1000 + w);
            let name = format!("worker{w}");
            let mut claimed_back = 0u64;
            while !done.load(Ordering::Relaxed) {
                let mut args = vec!["XS.READGROUP", "GROUP", "g", name.as_str(), "COUNT", "5", "BLOCK", "3000", "CLAIM", "100", "STREAMS"];
                args.extend(keys);
                args.extend([">"; 5]);
                let r = conn.cmd(&args);
                for (k, entries) in streams(&r) {
                    for e in entries {
                        if e.count.unwrap_or(0) > 0 {
                            claimed_back += 1;
                        }
                        if rng.pct(30) {
                            continue; // dropped: pending until claimed
                        }
                        acked.fetch_add(conn.cmd(&["XS.ACK", &k, "g", &e.id]).as_int(), Ordering::Relaxed);
                    }
                }
            }
            claimed_back
        }));
    }
    for i in 1..=total {
        let k = keys[(i as usize) % keys.len()];
        c.cmd(&["XS.ADD", k, "*", "n", &i.to_string()]);
        if i % 20 == 0 {
            sleep_ms(10);
        }
    }
    let t0 = Instant::now();
    while acked.load(Ordering::Relaxed) < total && t0.elapsed() < Duration::from_secs(60) {
        sleep_ms(50);
    }
    let drained = t0.elapsed();
    done.store(true, Ordering::Relaxed);
    let claimed_back: u64 = workers.into_iter().map(|w| w.join().expect("worker")).sum();
    assert_eq!(acked.load(Ordering::Relaxed), total, "after {drained:?}");
    for k in keys {
        assert_eq!(c.cmd(&["XS.PENDING", k, "g"]).as_array()[0], Reply::Int(0), "{k}");
    }
    assert!(claimed_back > 0);
    report(&format!(
        "claim_workers_recover_dropped_entries: {total} entries acked, {claimed_back} deliveries by CLAIM, drained {drained:?} after the last add"
    ));
    // Each round of drops costs 100 ms of idleness; the readers' own timeouts (3 s) play no part.
    assert!(drained < Duration::from_millis(2500), "{drained:?}");
}

/// The commands of a RESP-encoded AOF (arrays of bulk strings), as text.
fn aof_commands(bytes: &[u8]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    let line = |i: &mut usize| -> Option<String> {
        let rest = bytes.get(*i..)?;
        let end = rest.windows(2).position(|w| w == b"\r\n")?;
        let l = String::from_utf8_lossy(&rest[..end]).to_string();
        *i += end + 2;
        Some(l)
    };
    while let Some(head) = line(&mut i) {
        let Some(n) = head.strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) else { break };
        let mut cmd = Vec::with_capacity(n);
        for _ in 0..n {
            let Some(len) = line(&mut i).and_then(|l| l.strip_prefix('$').and_then(|n| n.parse::<usize>().ok())) else {
                return out;
            };
            cmd.push(String::from_utf8_lossy(bytes.get(i..i + len).unwrap_or_default()).to_string());
            i += len + 2;
        }
        out.push(cmd);
    }
    out
}

/// §4.6 / §10: what a CLAIM read propagates, exactly (read back from the AOF): the claims in
/// order as `XS.CLAIM k g c 0 id.. TIME now RETRYCOUNT n FORCE JUSTID LASTID <last at the
/// start>` (consecutive entries with the same new count in one command), then the new entries'
/// XS.CLAIM with ENTRIESREAD; a claimed-only read no SETID; the consumer created first.
#[test]
fn claim_propagation_in_the_aof() {
    let s = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "no").start();
    let mut c = s.conn();
    add(&mut c, "s", &[("1-0", "a"), ("2-0", "b"), ("3-0", "c"), ("4-0", "d")]);
    c.cmd_str("XS.GROUP CREATE s g 0");
    c.cmd_str("XS.READGROUP GROUP g c1 COUNT 3 STREAMS s >");
    c.cmd_str("XS.CLAIM s g c1 0 2-0 RETRYCOUNT 5 JUSTID");
    let before = c.cmd_str("INFO persistence").text();
    assert!(before.contains("aof_enabled:1"), "{before}");
    // 1-0 (count 1 -> 2), 3-0 (1 -> 2), 2-0 (5 -> 6): two runs; then 4-0 new.
    let e = one(&c.cmd_str("XS.READGROUP GROUP g c2 CLAIM 0 STREAMS s >"));
    assert_eq!(ids(&e), ["1-0", "3-0", "2-0", "4-0"]);
    // Claimed only: no SETID.
    let e = one(&c.cmd_str("XS.READGROUP GROUP g c3 CLAIM 0 COUNT 1 STREAMS s >"));
    assert_eq!(ids(&e), ["1-0"]);
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    let aof: Vec<u8> = std::fs::read_dir(s.dir().join("appendonlydir"))
        .expect("appendonlydir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".incr."))
        .flat_map(|e| std::fs::read(e.path()).unwrap_or_default())
        .collect();
    let cmds = aof_commands(&aof);
    // From the first CLAIM read on (after the XS.CLAIM RETRYCOUNT 5 of the setup).
    let start = cmds.iter().position(|c| c.iter().any(|a| a == "c2")).expect("the CLAIM read in the AOF");
    let got: Vec<Vec<String>> = cmds[start..]
        .iter()
        .filter(|c| !matches!(c[0].to_ascii_uppercase().as_str(), "MULTI" | "EXEC" | "SELECT"))
        .map(|c| c.iter().enumerate().map(|(i, a)| if i > 0 && c[i - 1].eq_ignore_ascii_case("TIME") { "<t>".into() } else { a.clone() }).collect())
        .collect();
    let w = |v: &str| v.split(' ').map(String::from).collect::<Vec<String>>();
    assert_eq!(
        got,
        [
            w("XS.GROUP CREATECONSUMER s g c2"),
            w("XS.CLAIM s g c2 0 1-0 3-0 TIME <t> RETRYCOUNT 2 FORCE JUSTID LASTID 3-0"),
            w("XS.CLAIM s g c2 0 2-0 TIME <t> RETRYCOUNT 6 FORCE JUSTID LASTID 3-0"),
            w("XS.CLAIM s g c2 0 4-0 TIME <t> RETRYCOUNT 1 FORCE JUSTID LASTID 4-0 ENTRIESREAD 4"),
            w("XS.GROUP CREATECONSUMER s g c3"),
            w("XS.CLAIM s g c3 0 1-0 TIME <t> RETRYCOUNT 3 FORCE JUSTID LASTID 4-0"),
        ]
    );
}
