//! The keyspace log (issue 33, docs/keyspace-log.md): `xstream.keyspace-log` names a stream
//! (database 0) that gets an entry `event <name> key <key> db <n>` for every keyspace
//! notification of the classes `xstream.keyspace-log-events` names on a key matching
//! `xstream.keyspace-log-pattern`, appended in the same execution unit as the change.
//!
//! - `log_is_the_servers_own_notifications`: the oracle is the server itself. Random commands
//!   of every type (MULTI blocks, scripts, two databases, keys that expire while it runs) with
//!   random classes and patterns; the log must be exactly the server's Pub/Sub keyevent
//!   notifications for the same classes, filtered by the pattern, in order.
//! - `multi_scripts_and_functions_keep_order_and_adjacency`, `expiry_and_eviction_are_logged`,
//!   `replica_and_aof_have_the_primarys_log`, `a_consumer_group_reads_the_log`,
//!   `configs_refusals_and_trimming`.
//!
//! On a server without post-notification jobs (Redis 7.0) every test checks the refusal instead.

mod common;

use common::*;
use std::time::Duration;

const LOG: &str = "klog";

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

/// Whether the server can run the log (7.2+; Valkey reports 7.2). On 7.0, checks the refusal.
fn supported(c: &mut Conn) -> bool {
    if redis_version(c) >= (7, 2) {
        return true;
    }
    let r = c.cmd(&["CONFIG", "SET", "xstream.keyspace-log", LOG]);
    assert!(
        r.text().contains("xstream.keyspace-log needs Redis 7.2 or later (or Valkey): this server's module API has no post-notification jobs"),
        "{r}"
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.keyspace-log"]).as_array()[1], Reply::Bulk(Vec::new()));
    false
}

fn enable(c: &mut Conn, events: &str, pattern: &str) {
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "xstream.keyspace-log", LOG, "xstream.keyspace-log-events", events, "xstream.keyspace-log-pattern", pattern]),
        ok()
    );
}

/// The log's entries as (event, key, db), checking each has exactly these three fields.
fn entries(c: &mut Conn) -> Vec<(String, String, String)> {
    let r = c.cmd(&["SELECT", "0"]);
    assert_eq!(r, ok());
    c.cmd(&["XS.RANGE", LOG, "-", "+"])
        .as_array()
        .iter()
        .map(|e| {
            let f: Vec<String> = e.as_array()[1].as_array().iter().map(Reply::text).collect();
            assert_eq!(f.len(), 6, "entry {e}");
            assert_eq!((f[0].as_str(), f[2].as_str(), f[4].as_str()), ("event", "key", "db"), "entry {e}");
            (f[1].clone(), f[3].clone(), f[5].clone())
        })
        .collect()
}

fn ids(c: &mut Conn) -> Vec<(u64, u64)> {
    c.cmd(&["XS.RANGE", LOG, "-", "+"]).as_array().iter().map(|e| parse_id(e.as_array()[0].as_bytes().unwrap_or_default()).expect("id")).collect()
}

fn e(event: &str, key: &str, db: &str) -> (String, String, String) {
    (event.into(), key.into(), db.into())
}

/// The server's glob, for the few forms the tests use: `*`, `?`, `[..]` without escapes.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|k| glob(&p[1..], &s[k..])),
        Some(b'?') => !s.is_empty() && glob(&p[1..], &s[1..]),
        Some(b'[') => {
            let close = p.iter().position(|&b| b == b']').expect("closed class");
            !s.is_empty() && p[1..close].contains(&s[0]) && glob(&p[close + 1..], &s[1..])
        }
        Some(&ch) => s.first() == Some(&ch) && glob(&p[1..], &s[1..]),
    }
}

/// One random command of the workload (keys `<type-letter><0-3>`, a few with a TTL of a few ms).
fn random_command(rng: &mut Rng) -> Vec<String> {
    let k = |rng: &mut Rng, t: &str| format!("{t}{}", rng.below(4));
    let v = |rng: &mut Rng| rng.below(100).to_string();
    let cmd: Vec<String> = match rng.below(26) {
        0 => vec!["SET".into(), k(rng, "s"), v(rng)],
        1 => vec!["SET".into(), k(rng, "s"), v(rng), "PX".into(), rng.range(1, 8).to_string()],
        2 => vec!["GET".into(), k(rng, "s")],
        3 => vec!["APPEND".into(), k(rng, "s"), v(rng)],
        4 => vec!["INCR".into(), k(rng, "n")],
        5 => vec!["LPUSH".into(), k(rng, "l"), v(rng), v(rng)],
        6 => vec!["RPOP".into(), k(rng, "l")],
        7 => vec!["SADD".into(), k(rng, "t"), v(rng)],
        8 => vec!["SREM".into(), k(rng, "t"), v(rng)],
        9 => vec!["HSET".into(), k(rng, "h"), v(rng), v(rng)],
        10 => vec!["HDEL".into(), k(rng, "h"), v(rng)],
        11 => vec!["ZADD".into(), k(rng, "z"), v(rng), v(rng)],
        12 => vec!["ZPOPMIN".into(), k(rng, "z")],
        13 => vec!["XADD".into(), k(rng, "x"), "MAXLEN".into(), "3".into(), "*".into(), "f".into(), v(rng)],
        14 => vec!["XS.ADD".into(), k(rng, "m"), "MAXLEN".into(), "3".into(), "*".into(), "f".into(), v(rng)],
        15 => vec!["XS.DEL".into(), k(rng, "m"), "0-1".into()],
        16 => vec!["DEL".into(), k(rng, "s"), k(rng, "l"), k(rng, "m")],
        17 => vec!["EXPIRE".into(), k(rng, "h"), "100000".into()],
        18 => vec!["PEXPIRE".into(), k(rng, "t"), rng.range(1, 6).to_string()],
        19 => vec!["PERSIST".into(), k(rng, "h")],
        20 => vec!["RENAME".into(), k(rng, "s"), k(rng, "s")],
        21 => vec!["COPY".into(), k(rng, "m"), k(rng, "m"), "REPLACE".into()],
        22 => vec!["UNLINK".into(), k(rng, "z"), k(rng, "x")],
        23 => vec!["GETDEL".into(), k(rng, "s")],
        24 => vec!["XS.TRIM".into(), k(rng, "m"), "MAXLEN".into(), "1".into()],
        _ => vec!["HGET".into(), k(rng, "h"), v(rng)],
    };
    cmd
}

/// Sends `n` random commands on `c`: single ones, MULTI blocks, EVAL of a few, in DB 0 or 1.
fn workload(c: &mut Conn, rng: &mut Rng, n: usize) {
    let mut done = 0;
    while done < n {
        let db = if rng.pct(20) { "1" } else { "0" };
        assert_eq!(c.cmd(&["SELECT", db]), ok());
        match rng.below(10) {
            0 => {
                assert_eq!(c.cmd(&["MULTI"]), ok());
                for _ in 0..rng.range(1, 5) {
                    c.cmd(&random_command(rng));
                    done += 1;
                }
                c.cmd(&["EXEC"]);
            }
            1 => {
                let cmds: Vec<Vec<String>> = (0..rng.range(1, 4)).map(|_| random_command(rng)).collect();
                done += cmds.len();
                let body: Vec<String> =
                    cmds.iter().map(|a| format!("redis.pcall({})", a.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(","))).collect();
                let r = c.cmd(&["EVAL", &format!("{}; return 1", body.join("; ")), "0"]);
                assert_eq!(r, Reply::Int(1), "script {body:?}");
            }
            _ => {
                c.cmd(&random_command(rng));
                done += 1;
            }
        }
        if rng.pct(3) {
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
}

/// Lets the keys with a TTL of a few ms expire: a wait, then every key that may carry one is
/// looked at (lazy expiry), in both databases.
fn expire_all(c: &mut Conn) {
    std::thread::sleep(Duration::from_millis(30));
    for db in ["0", "1"] {
        c.cmd(&["SELECT", db]);
        for t in ["s", "t"] {
            for i in 0..4 {
                c.cmd(&["EXISTS", &format!("{t}{i}")]);
            }
        }
    }
    c.cmd(&["SELECT", "0"]);
}

/// The server's own keyevent notifications as the log's oracle: random classes and patterns,
/// the same classes in `notify-keyspace-events`, a Pub/Sub subscriber to every keyevent channel;
/// the log must be exactly what the subscriber received (minus the log's own key), filtered by
/// the pattern, in the same order.
#[test]
fn log_is_the_servers_own_notifications() {
    let s = Server::start();
    let mut c = s.conn();
    if !supported(&mut c) {
        return;
    }
    let mut rng = Rng::from_env("keyspace log");
    let class_sets = ["A", "Amn", "g$", "lszh", "x", "t", "gx", "m", "n", "$lt", "gd", "e"];
    let patterns = ["*", "s*", "*[02]", "?1", "m*", "[hlz]?"];
    let rounds = env_usize("XSTREAM_KEYLOG_ROUNDS", 16);
    let ops = env_usize("XSTREAM_KEYLOG_OPS", 500);
    let mut total = 0;
    for round in 0..rounds {
        // The first round logs everything: most commands give one or more entries.
        let (classes, pattern) = if round == 0 { ("Amn", "*") } else { (*rng.pick(&class_sets), *rng.pick(&patterns)) };
        assert_eq!(c.cmd(&["FLUSHALL"]), ok());
        assert_eq!(c.cmd(&["CONFIG", "SET", "notify-keyspace-events", &format!("E{classes}")]), ok());
        enable(&mut c, classes, pattern);
        let mut sub = s.conn();
        sub.cmd(&["PSUBSCRIBE", "__keyevent@*__:*"]);
        sub.cmd(&["SUBSCRIBE", "end"]);
        workload(&mut c, &mut rng, ops);
        expire_all(&mut c);
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.keyspace-log", ""]), ok());
        c.cmd(&["SELECT", "0"]);
        c.cmd(&["PUBLISH", "end", "x"]);
        let expected: Vec<(String, String, String)> = read_events_until_message(&mut sub)
            .into_iter()
            .map(|(channel, key)| {
                let rest = channel.strip_prefix("__keyevent@").expect("keyevent channel");
                let (db, event) = rest.split_once("__:").expect("channel");
                (event.to_string(), key, db.to_string())
            })
            .filter(|(_, key, db)| !(key == LOG && db == "0") && glob(pattern.as_bytes(), key.as_bytes()))
            .collect();
        let got = entries(&mut c);
        if got != expected {
            let at = got.iter().zip(&expected).position(|(a, b)| a != b).unwrap_or(got.len().min(expected.len()));
            panic!(
                "round {round} (seed {}, classes {classes}, pattern {pattern}): the log differs from the notifications at {at} \
                 ({} entries, {} notifications)\nlog:   {:?}\nnotif: {:?}",
                rng.seed(),
                got.len(),
                expected.len(),
                &got[at.saturating_sub(3)..(at + 3).min(got.len())],
                &expected[at.saturating_sub(3)..(at + 3).min(expected.len())]
            );
        }
        if round == 0 {
            assert!(got.len() > ops / 2, "{} entries for {ops} commands", got.len());
        }
        total += got.len();
    }
    assert_eq!(info_xstream(&mut c, "keyspace_log_errors"), 0);
    report(&format!("keyspace log: {rounds} rounds, {total} entries, all as the server's notifications (seed {})", rng.seed()));
}

/// A MULTI, a script and a function each log their changes next to each other, in order, from
/// one append (one millisecond, consecutive sequence numbers), after the whole unit ran.
#[test]
fn multi_scripts_and_functions_keep_order_and_adjacency() {
    let s = Server::start();
    let mut c = s.conn();
    if !supported(&mut c) {
        return;
    }
    enable(&mut c, "A", "*");
    c.cmd(&["SET", "before", "1"]);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["INCR", "a"]);
    c.cmd(&["LPUSH", "l", "x"]);
    c.cmd(&["DEL", "a"]);
    let exec = c.cmd(&["EXEC"]);
    assert_eq!(exec.as_array().len(), 4);
    let script = "redis.call('HSET', KEYS[1], 'f', 'v'); redis.call('EXPIRE', KEYS[1], 100); redis.call('XS.ADD', KEYS[2], '*', 'f', 'v'); return 1";
    assert_eq!(c.cmd(&["EVAL", script, "2", "h", "ms"]), Reply::Int(1));
    let lib = "#!lua name=kl\nredis.register_function('kl', function(keys, args) redis.call('SADD', keys[1], 'm'); redis.call('SREM', keys[1], 'm'); return 2 end)";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), Reply::Bulk(b"kl".to_vec()));
    assert_eq!(c.cmd(&["FCALL", "kl", "1", "st"]), Reply::Int(2));
    assert_eq!(
        entries(&mut c),
        vec![
            e("set", "before", "0"),
            e("set", "a", "0"),
            e("incrby", "a", "0"),
            e("lpush", "l", "0"),
            e("del", "a", "0"),
            e("hset", "h", "0"),
            e("expire", "h", "0"),
            e("xadd", "ms", "0"),
            e("sadd", "st", "0"),
            e("srem", "st", "0"),
            e("del", "st", "0"),
        ]
    );
    // Each unit is one append: its entries share a millisecond and follow each other.
    let ids = ids(&mut c);
    for unit in [&ids[1..5], &ids[5..8], &ids[8..11]] {
        for w in unit.windows(2) {
            assert_eq!((w[1].0, w[1].1), (w[0].0, w[0].1 + 1), "ids {ids:?}");
        }
    }
    // An error inside MULTI (a wrong type) logs what ran, nothing for the failed command.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    c.cmd(&["SET", "str", "1"]);
    c.cmd(&["LPUSH", "str", "x"]);
    c.cmd(&["APPEND", "str", "2"]);
    let exec = c.cmd(&["EXEC"]);
    assert!(exec.as_array()[1].is_error(), "{exec}");
    let all = entries(&mut c);
    assert_eq!(&all[11..], &[e("set", "str", "0"), e("append", "str", "0")]);
}

/// Keys expired by the active cycle and on access, and keys evicted by maxmemory, are logged
/// (`expired`, `evicted`), though no client changed them.
#[test]
fn expiry_and_eviction_are_logged() {
    let s = Server::start();
    let mut c = s.conn();
    if !supported(&mut c) {
        return;
    }
    enable(&mut c, "A", "*");
    c.cmd(&["SET", "active", "1", "PX", "5"]);
    wait_until("the active expiry", Duration::from_secs(5), || entries(&mut c).contains(&e("expired", "active", "0")));
    assert_eq!(entries(&mut c), vec![e("set", "active", "0"), e("expire", "active", "0"), e("expired", "active", "0")]);

    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    c.cmd(&["SET", "lazy", "1", "PX", "5"]);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(entries(&mut c).len(), 5, "nothing expires before the access");
    assert_eq!(c.cmd(&["GET", "lazy"]), Reply::Nil);
    assert_eq!(&entries(&mut c)[3..], &[e("set", "lazy", "0"), e("expire", "lazy", "0"), e("expired", "lazy", "0")]);
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), ok());

    // Eviction: volatile keys go, the log (no TTL) stays and records each one.
    c.cmd(&["DEL", LOG]);
    let evicted_before = stat(&mut c, "evicted_keys");
    let big = "x".repeat(1000);
    for i in 0..2000 {
        c.cmd(&["SET", &format!("v{i}"), &big, "EX", "1000"]);
    }
    let used = stat(&mut c, "used_memory");
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &(used - 500_000).to_string()]), ok());
    c.cmd(&["SET", "trigger", "1"]);
    // Every command runs the eviction while over the limit (INFO too): counted after it is lifted.
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    let evicted = stat(&mut c, "evicted_keys") - evicted_before;
    assert!(evicted > 10, "evicted {evicted}");
    let logged: Vec<_> = entries(&mut c).into_iter().filter(|(ev, _, _)| ev == "evicted").collect();
    assert_eq!(logged.len() as i64, evicted, "one entry per evicted key");
    assert!(logged.iter().all(|(_, k, db)| k.starts_with('v') && db == "0"));
    assert_eq!(info_xstream(&mut c, "keyspace_log_errors"), 0);
}

fn stat(c: &mut Conn, name: &str) -> i64 {
    let info = c.cmd(&["INFO"]).text();
    info.lines().find_map(|l| l.trim().strip_prefix(&format!("{name}:"))).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} in INFO"))
}

/// The primary's changes and their entries travel together: a replica (configured the same way,
/// logging nothing itself) and the primary reloaded from its AOF hold the same log, digest for
/// digest, after random commands, MULTI blocks, scripts and expiries.
#[test]
fn replica_and_aof_have_the_primarys_log() {
    let mut p = Server::builder().arg("--appendonly", "yes").start();
    let mut pc = p.conn();
    if !supported(&mut pc) {
        return;
    }
    enable(&mut pc, "Amn", "*");
    let r = Server::replica_of(&p);
    let mut rc = r.conn();
    enable(&mut rc, "Amn", "*");
    let mut rng = Rng::from_env("keyspace log replica");
    workload(&mut pc, &mut rng, 1500);
    expire_all(&mut pc);
    // Off from here: the checks' own reads (key misses) would be logged too.
    assert_eq!(pc.cmd(&["CONFIG", "SET", "xstream.keyspace-log", ""]), ok());
    wait_synced(&mut pc, &mut rc);
    let log = entries(&mut pc);
    assert!(log.len() > 1000, "{} entries", log.len());
    assert!(log.iter().any(|(ev, _, _)| ev == "expired"), "expiries in the workload");
    let digest = pc.cmd(&["DEBUG", "DIGEST-VALUE", LOG]);
    assert_eq!(rc.cmd(&["DEBUG", "DIGEST-VALUE", LOG]), digest);
    assert_same_log(&entries(&mut rc), &log, "the replica");
    same_dataset(&mut pc, &mut rc, "the replica");
    assert_eq!(info_xstream(&mut rc, "keyspace_log_appended"), 0, "the replica logs nothing itself");
    assert_eq!(info_xstream(&mut pc, "keyspace_log_appended"), log.len() as i64);

    // The AOF: replayed (with the log on), it gives the same log and appends nothing while
    // loading.
    wait_rewrite(&mut pc);
    enable(&mut pc, "Amn", "*");
    assert_eq!(pc.cmd(&["DEBUG", "LOADAOF"]), ok());
    assert_same_log(&entries(&mut pc), &log, "the primary reloaded from its AOF");
    assert_eq!(pc.cmd(&["DEBUG", "DIGEST-VALUE", LOG]), digest);
    // The replica did not move since: the reloaded primary is the same as it.
    same_dataset(&mut pc, &mut rc, "the primary reloaded from its AOF");
    assert_eq!(info_xstream(&mut pc, "keyspace_log_appended"), log.len() as i64);

    // A restart from the AOF (multi-part, with its RDB preamble base): the same again.
    let whole = pc.cmd(&["DEBUG", "DIGEST"]);
    drop(pc);
    p.restart();
    let mut pc = p.conn();
    assert_eq!(pc.cmd(&["DEBUG", "DIGEST-VALUE", LOG]), digest);
    assert_eq!(pc.cmd(&["DEBUG", "DIGEST"]), whole);
}

/// `got` is `want`, or a panic showing where they part.
fn assert_same_log(got: &[(String, String, String)], want: &[(String, String, String)], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        panic!(
            "{what}: the log differs at {at} ({} / {} entries)\ngot:  {:?}\nwant: {:?}",
            got.len(),
            want.len(),
            &got[at.saturating_sub(3)..(at + 3).min(got.len())],
            &want[at.saturating_sub(3)..(at + 3).min(want.len())]
        );
    }
}

/// Every key of both databases with its value's digest and whether it has a TTL, and INFO
/// keyspace: what two datasets are compared by when their DEBUG DIGEST differs.
fn dataset(c: &mut Conn) -> (Vec<String>, String) {
    let mut out = Vec::new();
    for db in ["0", "1"] {
        c.cmd(&["SELECT", db]);
        let mut keys: Vec<String> = c.cmd(&["KEYS", "*"]).as_array().iter().map(Reply::text).collect();
        keys.sort();
        for k in keys {
            let (d, t) = (c.cmd(&["DEBUG", "DIGEST-VALUE", &k]), c.cmd(&["PTTL", &k]).as_int());
            out.push(format!("db {db} {k} {d} ttl {}", t >= 0));
        }
    }
    c.cmd(&["SELECT", "0"]);
    (out, c.cmd(&["INFO", "keyspace"]).text())
}

/// Both datasets are the same (DEBUG DIGEST), or a panic naming what differs.
fn same_dataset(a: &mut Conn, b: &mut Conn, what: &str) {
    let (da, db_) = (a.cmd(&["DEBUG", "DIGEST"]), b.cmd(&["DEBUG", "DIGEST"]));
    if da != db_ {
        let ((ka, ia), (kb, ib)) = (dataset(a), dataset(b));
        let only_a: Vec<&String> = ka.iter().filter(|k| !kb.contains(k)).collect();
        let only_b: Vec<&String> = kb.iter().filter(|k| !ka.contains(k)).collect();
        panic!("{what}: the datasets differ ({da} / {db_}):\n{only_a:?}\n{only_b:?}\nINFO keyspace: {ia} / {ib}");
    }
}

/// The log is a stream like any other: a group reads it, a blocked reader is woken by the
/// next change, acknowledgements work.
#[test]
fn a_consumer_group_reads_the_log() {
    let s = Server::start();
    let mut c = s.conn();
    if !supported(&mut c) {
        return;
    }
    enable(&mut c, "A", "user:*");
    assert_eq!(c.cmd(&["XS.GROUP", "CREATE", LOG, "g", "$", "MKSTREAM"]), ok());
    let mut reader = s.conn();
    reader.send(&["XS.READGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", LOG, ">"]).expect("send");
    assert!(wait_blocked_clients(&mut c, 1));
    c.cmd(&["SET", "other", "1"]);
    c.cmd(&["HSET", "user:1", "name", "ann"]);
    reader.set_timeout(Duration::from_secs(5));
    let got = reader.read_reply().expect("woken").0;
    let entry = &got.as_array()[0].as_array()[1].as_array()[0];
    let id = entry.as_array()[0].text();
    assert_eq!(
        entry.as_array()[1],
        Reply::Array(["event", "hset", "key", "user:1", "db", "0"].iter().map(|s| Reply::Bulk(s.as_bytes().to_vec())).collect())
    );
    assert_eq!(c.cmd(&["XS.ACK", LOG, "g", &id]), Reply::Int(1));
    assert_eq!(c.cmd(&["XS.LEN", LOG]), Reply::Int(1));
}

/// Defaults, normalised class letters, refused values; a log key holding another type (counted
/// as errors, nothing written); the approximate trim to `keyspace-log-maxlen`.
#[test]
fn configs_refusals_and_trimming() {
    let s = Server::builder().module_args(&["node-max-entries", "10"]).start();
    let mut c = s.conn();
    let get = |c: &mut Conn, name: &str| c.cmd(&["CONFIG", "GET", name]).as_array()[1].text();
    assert_eq!(get(&mut c, "xstream.keyspace-log"), "");
    assert_eq!(get(&mut c, "xstream.keyspace-log-events"), "A");
    assert_eq!(get(&mut c, "xstream.keyspace-log-pattern"), "*");
    assert_eq!(get(&mut c, "xstream.keyspace-log-maxlen"), "1000000");
    if !supported(&mut c) {
        return;
    }
    for (given, shown) in [("xg", "gx"), ("g$lshzxetd", "A"), ("nmA", "Amn"), ("", "")] {
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.keyspace-log-events", given]), ok());
        assert_eq!(get(&mut c, "xstream.keyspace-log-events"), shown);
    }
    for bad in ["K", "AE", "q"] {
        let r = c.cmd(&["CONFIG", "SET", "xstream.keyspace-log-events", bad]);
        assert!(r.text().contains("xstream.keyspace-log-events takes the letters g $ l s h z x e t m d n and A"), "{r}");
    }
    assert!(c.cmd(&["CONFIG", "SET", "xstream.keyspace-log-maxlen", "-1"]).is_error());
    // Nothing is logged with no class, nor before a key is set.
    c.cmd(&["SET", "a", "1"]);
    enable(&mut c, "A", "*");
    assert_eq!(info_xstream(&mut c, "keyspace_log_appended"), 0);

    // Another type at the log's key: the events are counted as errors and the key is untouched.
    c.cmd(&["DEL", LOG]);
    c.cmd(&["SET", LOG, "mine"]);
    let errors = info_xstream(&mut c, "keyspace_log_errors");
    c.cmd(&["SET", "a", "2"]);
    c.cmd(&["SET", "b", "2"]);
    assert_eq!(info_xstream(&mut c, "keyspace_log_errors"), errors + 2);
    assert_eq!(c.cmd(&["GET", LOG]), Reply::Bulk(b"mine".to_vec()));
    c.cmd(&["DEL", LOG]);

    // Dropped by the pattern and the classes: counted.
    enable(&mut c, "$", "a*");
    let dropped = info_xstream(&mut c, "keyspace_log_dropped");
    c.cmd(&["SET", "b", "3"]);
    c.cmd(&["DEL", "a"]);
    c.cmd(&["SET", "a", "3"]);
    assert_eq!(info_xstream(&mut c, "keyspace_log_dropped"), dropped + 2);
    assert_eq!(entries(&mut c), vec![e("set", "a", "0")]);

    // Trimmed to about maxlen (whole nodes of 10 entries): between 25 and 34 entries kept.
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.keyspace-log-maxlen", "25"]), ok());
    for i in 0..200 {
        c.cmd(&["SET", "a", &i.to_string()]);
    }
    let n = c.cmd(&["XS.LEN", LOG]).as_int();
    assert!((25..35).contains(&n), "length {n}");
    let last = entries(&mut c).pop();
    assert_eq!(last, Some(e("set", "a", "0")));
    assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.keyspace-log", ""]), ok());
    c.cmd(&["SET", "a", "x"]);
    assert_eq!(c.cmd(&["XS.LEN", LOG]).as_int(), n, "off: nothing more");
}

/// A client working in another database than the log's stays there: the log's appends (in
/// DB 0) must not move it (on Valkey 8.1 a module's notification in another DB selects that DB
/// on the executing client and leaves it there: the appends raise no notification there).
#[test]
fn the_clients_database_is_kept() {
    let s = Server::start();
    let mut c = s.conn();
    if !supported(&mut c) {
        return;
    }
    enable(&mut c, "Amn", "*");
    assert_eq!(c.cmd(&["SELECT", "1"]), ok());
    c.cmd(&["EXISTS", "nothing"]);
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["XADD", "x", "*", "f", "v"]);
    c.cmd(&["SET", "b", "1"]);
    let info = c.cmd(&["CLIENT", "INFO"]).text();
    assert!(info.contains(" db=1 "), "{info}");
    let mut keys: Vec<String> = c.cmd(&["KEYS", "*"]).as_array().iter().map(Reply::text).collect();
    keys.sort();
    assert_eq!(keys, ["a", "b", "x"]);
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    assert_eq!(c.cmd(&["KEYS", "*"]), Reply::Array(vec![Reply::Bulk(LOG.as_bytes().to_vec())]));
    assert_eq!(
        entries(&mut c),
        vec![
            e("keymiss", "nothing", "1"),
            e("new", "a", "1"),
            e("set", "a", "1"),
            e("new", "x", "1"),
            e("xadd", "x", "1"),
            e("new", "b", "1"),
            e("set", "b", "1")
        ]
    );
}

/// Module-class notifications (`d`): none of this module's commands raises one, so the test
/// build's XS.DEBUG-NOTIFY does (skipped without the `test-hooks` build).
#[test]
fn module_class_events_are_logged() {
    let Some(hooks) = test_hooks_module_path() else {
        report("module_class_events_are_logged: no test-hooks build (XSTREAM_TEST_HOOKS_MODULE): skipped");
        return;
    };
    let s = Server::builder().module(&hooks).start();
    let mut c = s.conn();
    if !supported(&mut c) {
        return;
    }
    enable(&mut c, "d", "*");
    assert_eq!(c.cmd(&["XS.DEBUG-NOTIFY", "k1", "custom-event"]), ok());
    c.cmd(&["SET", "k2", "1"]);
    enable(&mut c, "g$", "*");
    assert_eq!(c.cmd(&["XS.DEBUG-NOTIFY", "k3", "other-event"]), ok());
    c.cmd(&["SET", "k4", "1"]);
    assert_eq!(entries(&mut c), vec![e("custom-event", "k1", "0"), e("set", "k4", "0")]);
}

/// While clients are paused for writes (CLIENT PAUSE WRITE, a failover), nothing may be
/// propagated (the server asserts it): a key miss then is counted as an error, not logged, and
/// the server goes on; after the pause the log works again.
#[test]
fn paused_clients_log_nothing_and_the_server_lives() {
    let s = Server::start();
    let mut c = s.conn();
    if !supported(&mut c) {
        return;
    }
    enable(&mut c, "Am", "*");
    c.cmd(&["SET", "a", "1"]);
    let mut admin = s.conn();
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "300", "WRITE"]), ok());
    let errors = info_xstream(&mut c, "keyspace_log_errors");
    assert_eq!(c.cmd(&["GET", "missing"]), Reply::Nil);
    assert_eq!(c.cmd(&["EXISTS", "missing2"]), Reply::Int(0));
    assert_eq!(info_xstream(&mut c, "keyspace_log_errors"), errors + 2);
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
    c.cmd(&["SET", "b", "1"]);
    assert!(c.ping());
    assert_eq!(entries(&mut c), vec![e("set", "a", "0"), e("set", "b", "0")]);
}
