//! Issue 15's three features together: one random workload of XS.ADD with IDMP / IDMPAUTO
//! (duplicates included) and DELAY (issue 17's delayed delivery), XS.READGROUP with and without CLAIM, XS.NACK in every mode (FORCE and
//! RETRYCOUNT too), XS.CLAIM / XS.AUTOCLAIM, XS.ACK, XS.CFGSET and deletions, on a primary with
//! a replica and an AOF. At the end the digests are equal on the primary, the replica, the AOF
//! loaded again, and the rewritten AOF after a restart; and the group invariants hold after
//! DEBUG RELOAD (its loader checks them). Each feature also has its own workload test
//! (redis8_idmp, redis8_claim, redis8_nack); this one checks that they compose.

mod common;

use common::*;
use std::time::{Duration, Instant};

fn offset(c: &mut Conn) -> String {
    let info = c.cmd(&["INFO", "replication"]).text();
    info.lines().find(|l| l.starts_with("master_repl_offset:")).map(|l| l.trim().to_string()).unwrap_or_default()
}

#[test]
fn claim_idmp_and_nack_workload_replicates_and_persists() {
    let mut primary = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "no").start();
    let replica = Server::replica_of(&primary);
    let (mut c, mut rc) = (primary.conn(), replica.conn());
    let mut rng = Rng::from_env("claim_idmp_and_nack_workload");
    let keys = ["a", "b", "c"];
    let consumers = ["c1", "c2", "c3"];
    for k in keys {
        c.cmd(&["XS.GROUP", "CREATE", k, "g", "0", "MKSTREAM"]);
    }
    let ops = env_usize("XSTREAM_COMBINED_OPS", 6000);
    let mut counts = [0usize; 8];
    let mut known_ids: Vec<String> = Vec::new();
    for _ in 0..ops {
        let k = *rng.pick(&keys);
        let cn = *rng.pick(&consumers);
        let op = rng.weighted(&[30, 14, 14, 10, 6, 6, 10, 3]);
        counts[op] += 1;
        let r = match op {
            0 => {
                let pid = format!("p{}", rng.below(3));
                let v = rng.below(20).to_string();
                let r = match rng.below(4) {
                    0 => c.cmd(&["XS.ADD", k, "IDMP", &pid, &format!("i{}", rng.below(60)), "*", "f", &v]),
                    1 => c.cmd(&["XS.ADD", k, "IDMPAUTO", &pid, "*", "f", &v]),
                    // Delayed delivery (issue 17): `>` reads pass over it, schedule it, serve it later.
                    2 => c.cmd(&["XS.ADD", k, "DELAY", &rng.below(40).to_string(), "IDMP", &pid, &format!("d{}", rng.below(60)), "*", "f", &v]),
                    _ => c.cmd(&["XS.ADD", k, "MAXLEN", "~", "200", "*", "f", &v]),
                };
                if !r.is_error() {
                    known_ids.push(r.text());
                }
                r
            }
            1 => c.cmd(&["XS.READGROUP", "GROUP", "g", cn, "COUNT", &rng.range(1, 5).to_string(), "STREAMS", k, ">"]),
            2 => c.cmd(&[
                "XS.READGROUP",
                "GROUP",
                "g",
                cn,
                "CLAIM",
                &rng.below(3).to_string(),
                "COUNT",
                &rng.range(1, 5).to_string(),
                "STREAMS",
                k,
                ">",
            ]),
            3 => {
                let mode = *rng.pick(&["SILENT", "FAIL", "FATAL"]);
                let id = known_ids.get(rng.below(known_ids.len().max(1) as u64) as usize).cloned().unwrap_or("0-1".into());
                let mut cmd = vec!["XS.NACK".to_string(), k.into(), "g".into(), mode.into(), "IDS".into(), "1".into(), id];
                if rng.below(4) == 0 {
                    cmd.extend(["RETRYCOUNT".into(), rng.below(5).to_string()]);
                }
                if rng.below(4) == 0 {
                    cmd.push("FORCE".into());
                }
                c.cmd(&cmd)
            }
            4 => c.cmd(&["XS.AUTOCLAIM", k, "g", cn, "0", "0", "COUNT", "3"]),
            5 => {
                let id = known_ids.get(rng.below(known_ids.len().max(1) as u64) as usize).cloned().unwrap_or("0-1".into());
                c.cmd(&["XS.CLAIM", k, "g", cn, "0", &id])
            }
            6 => {
                let pend = c.cmd(&["XS.PENDING", k, "g", "-", "+", "3"]);
                let ids: Vec<String> = pend.as_array().iter().map(|e| e.as_array()[0].text()).collect();
                if ids.is_empty() {
                    continue;
                }
                let mut cmd = vec!["XS.ACK".to_string(), k.into(), "g".into()];
                cmd.extend(ids);
                c.cmd(&cmd)
            }
            _ => match rng.below(3) {
                0 => c.cmd(&["XS.CFGSET", k, "IDMP-MAXSIZE", &rng.range(5, 40).to_string()]),
                1 => {
                    let id = known_ids.get(rng.below(known_ids.len().max(1) as u64) as usize).cloned().unwrap_or("0-1".into());
                    c.cmd(&["XS.DEL", k, &id])
                }
                _ => c.cmd(&["XS.GROUP", "DELCONSUMER", k, "g", cn]),
            },
        };
        assert!(!r.is_error() || r.text().contains("no such key"), "op {op}: {r}");
    }
    // End with NACKed entries and fresh iids in the state that is compared and persisted.
    for k in keys {
        let pend = c.cmd(&["XS.PENDING", k, "g", "-", "+", "4"]);
        for e in pend.as_array() {
            let id = e.as_array()[0].text();
            assert!(!c.cmd(&["XS.NACK", k, "g", "FAIL", "IDS", "1", &id]).is_error());
        }
        c.cmd(&["XS.ADD", k, "IDMP", "p-end", "last", "*", "f", "v"]);
    }
    assert_eq!(c.cmd(&["WAIT", "1", "10000"]), Reply::Int(1));
    let t0 = Instant::now();
    while offset(&mut c) != offset(&mut rc) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let d = c.cmd(&["DEBUG", "DIGEST"]);
    for k in keys {
        let (a, b) = (c.cmd(&["DEBUG", "DIGEST-VALUE", k]), rc.cmd(&["DEBUG", "DIGEST-VALUE", k]));
        if a != b {
            let full = |c: &mut Conn| {
                format!("{}\n{}", c.cmd(&["XS.INFO", "STREAM", k, "FULL", "COUNT", "0"]), c.cmd(&["XS.PENDING", k, "g", "-", "+", "1000"]))
            };
            panic!("{k} differs on the replica:\nprimary: {}\nreplica: {}", full(&mut c), full(&mut rc));
        }
    }
    assert_eq!(rc.cmd(&["DEBUG", "DIGEST"]), d, "the replica differs");
    let nacked: i64 = keys
        .iter()
        .map(|k| {
            let p = c.cmd(&["XS.PENDING", k, "g", "-", "+", "100000"]);
            p.as_array().iter().filter(|e| e.as_array()[1].text().is_empty()).count() as i64
        })
        .sum();
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    assert_eq!(c.cmd(&["DEBUG", "LOADAOF"]).text(), "OK");
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), d, "the AOF, loaded again, differs");
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]).text(), "OK");
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), d, "DEBUG RELOAD differs");
    assert!(!c.cmd(&["BGREWRITEAOF"]).is_error());
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    primary.restart();
    let mut c = primary.conn();
    let d2 = c.cmd(&["DEBUG", "DIGEST"]);
    // The rewrite drops pending entries whose stream entry is gone (as the built-in's rewrite
    // does; docs/redis8.md): the entries and every other pending entry (ID, owner or "",
    // count) must be the replica's, which kept everything.
    let live_pel = |c: &mut Conn, k: &str| -> Vec<String> {
        let p = c.cmd(&["XS.PENDING", k, "g", "-", "+", "100000"]);
        p.as_array()
            .iter()
            .filter(|e| !c.cmd(&["XS.RANGE", k, &e.as_array()[0].text(), &e.as_array()[0].text()]).as_array().is_empty())
            .map(|e| {
                let e = e.as_array();
                format!("{} {} {}", e[0].text(), e[1].text(), e[3].text())
            })
            .collect()
    };
    for k in keys {
        assert_eq!(c.cmd(&["XS.RANGE", k, "-", "+"]), rc.cmd(&["XS.RANGE", k, "-", "+"]), "{k}: entries after rewrite + restart");
        assert_eq!(live_pel(&mut c, k), live_pel(&mut rc, k), "{k}: pending entries after rewrite + restart");
        assert_eq!(
            c.cmd(&["XS.ADD", k, "IDMP", "p-end", "last", "*", "f", "v"]),
            rc.cmd(&["XS.REVRANGE", k, "+", "-", "COUNT", "1"]).as_array()[0].as_array()[0].clone(),
            "{k}: iid map after rewrite + restart"
        );
    }
    report(&format!(
        "{ops} ops (adds {}, reads {}, CLAIM reads {}, NACKs {}, autoclaims {}, claims {}, acks {}, other {}); {nacked} NACKed at the end; digests equal on primary, replica, AOF reload, DEBUG RELOAD; after rewrite + restart digest {}",
        counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6], counts[7],
        if d2 == d { "equal" } else { "differs (ghost pending entries dropped by the rewrite)" }
    ));
}

/// A delivery count past LLONG_MAX (XS.NACK FATAL, then a claim: below `latest` the count wraps
/// as the built-in's uint64 counter, and XS.PENDING shows it as a negative long long) reaches
/// the replica and survives an AOF rewrite: the replica and the AOF apply the propagated
/// negative RETRYCOUNT, which a client's XS.CLAIM ignores and a client's XS.NACK refuses, as
/// the built-in's do.
#[test]
fn wrapped_delivery_count_replicates_and_survives_a_rewrite() {
    let mut primary = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "no").start();
    let replica = Server::replica_of(&primary);
    let (mut c, mut rc) = (primary.conn(), replica.conn());
    c.cmd(&["XS.ADD", "s", "1-0", "f", "v"]);
    c.cmd(&["XS.GROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&["XS.READGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"]);
    assert_eq!(c.cmd(&["XS.NACK", "s", "g", "FATAL", "IDS", "1", "1-0"]), Reply::Int(1));
    assert_eq!(c.cmd(&["XS.CLAIM", "s", "g", "b", "0", "1-0"]).as_array().len(), 1);
    let count = |c: &mut Conn| c.cmd(&["XS.PENDING", "s", "g", "-", "+", "10"]).as_array()[0].as_array()[3].clone();
    assert_eq!(count(&mut c), Reply::Int(i64::MIN));
    assert_eq!(c.cmd(&["XS.NACK", "s", "g", "FAIL", "IDS", "1", "1-0"]), Reply::Int(1));
    // A client's negative RETRYCOUNT: ignored by XS.CLAIM, refused by XS.NACK (the built-ins').
    assert_eq!(
        c.cmd(&["XS.NACK", "s", "g", "FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "-1"]),
        Reply::Error("ERR Invalid RETRYCOUNT value, must be >= 0".into())
    );
    // A CLAIM read takes the NACKed entry: it replies the count before the claim as
    // XS.PENDING shows it, keeps it (a count past LLONG_MAX is not incremented), and
    // propagates it as the same negative long long (as an unsigned number the replica's
    // XS.CLAIM refused it, and the entry stayed with "b" there).
    let read = c.cmd(&["XS.READGROUP", "GROUP", "g", "c", "CLAIM", "0", "STREAMS", "s", ">"]);
    assert_eq!(read.as_array()[0].as_array()[1].as_array()[0].as_array()[3], Reply::Int(i64::MIN), "{read}");
    let owner = |c: &mut Conn| c.cmd(&["XS.PENDING", "s", "g", "-", "+", "10"]).as_array()[0].as_array()[1].text();
    assert_eq!(owner(&mut c), "c");
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    let t0 = Instant::now();
    while offset(&mut c) != offset(&mut rc) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(count(&mut rc), Reply::Int(i64::MIN), "replica");
    assert_eq!(owner(&mut rc), "c", "replica");
    let d = c.cmd(&["DEBUG", "DIGEST"]);
    assert_eq!(rc.cmd(&["DEBUG", "DIGEST"]), d);
    assert!(!c.cmd(&["BGREWRITEAOF"]).is_error());
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    primary.restart();
    let mut c = primary.conn();
    assert_eq!(count(&mut c), Reply::Int(i64::MIN), "after rewrite + restart");
    assert_eq!(c.cmd(&["DEBUG", "DIGEST"]), d);
}
