//! Self-tests of the test harness (tests/common), on plain redis-server processes (no module):
//! the RESP3 parser on every reply type, restart with RDB and AOF, replicas, kill -9, cleanup of
//! processes and temp dirs, and a readable panic when a server cannot start.

mod common;

use common::*;
use std::time::Duration;

#[test]
fn resp3_reply_types() {
    let s = Server::start_plain();
    let mut c = s.conn();
    c.hello3();
    let cases: &[(&str, Reply)] = &[
        ("string", Reply::Bulk(b"Hello World".to_vec())),
        ("integer", Reply::Int(12345)),
        ("double", Reply::Double("3.141".into())),
        (
            "bignum",
            Reply::BigNumber("1234567999999999999999999999999999999".into()),
        ),
        ("null", Reply::Nil),
        (
            "array",
            Reply::Array(vec![Reply::Int(0), Reply::Int(1), Reply::Int(2)]),
        ),
        (
            "set",
            Reply::Set(vec![Reply::Int(0), Reply::Int(1), Reply::Int(2)]),
        ),
        (
            "map",
            Reply::Map(vec![
                (Reply::Int(0), Reply::Bool(false)),
                (Reply::Int(1), Reply::Bool(true)),
                (Reply::Int(2), Reply::Bool(false)),
            ]),
        ),
        (
            "attrib",
            Reply::Bulk(b"Some real reply following the attribute".to_vec()),
        ),
        (
            "push",
            Reply::Bulk(b"Some real reply following the push reply".to_vec()),
        ),
        (
            "verbatim",
            Reply::Verbatim("txt".into(), b"This is a verbatim\nstring".to_vec()),
        ),
        ("true", Reply::Bool(true)),
        ("false", Reply::Bool(false)),
    ];
    for (t, want) in cases {
        let (got, raw) = c.cmd_raw(&["DEBUG", "PROTOCOL", t]);
        assert_eq!(&got, want, "DEBUG PROTOCOL {t}: raw {}", escape(&raw));
    }
    // The push message was queued, not returned as a reply.
    let pushes = c.take_pushes();
    assert_eq!(pushes.len(), 1);
    assert_eq!(
        pushes[0].0,
        Reply::Push(vec![
            Reply::Bulk(b"server-cpu-usage".to_vec()),
            Reply::Int(42)
        ])
    );
    assert!(c.ping());
    c.hello2();
    assert_eq!(c.cmd_str("SET a 1"), Reply::Simple("OK".into()));
    assert_eq!(c.raw(&["GET", "a"]), b"$1\r\n1\r\n");
    assert_eq!(c.cmd(&["GET", "nope"]), Reply::Nil);
    assert!(c.cmd(&["NOSUCHCOMMAND"]).is_error());
    assert!(s.log_contains("Ready to accept connections"));
}

#[test]
fn restart_aof_replica_cleanup() {
    let mut s = Server::builder()
        .no_module()
        .arg("--appendonly", "yes")
        .start();
    let port = s.port();
    let mut c = s.conn();
    c.cmd_str("XADD st 1-1 a 1");
    wait_persistence_idle(&mut c, Duration::from_secs(10));
    drop(c);
    s.restart();
    assert_eq!(s.port(), port, "restart keeps the port");
    let mut c = s.conn();
    assert_eq!(c.cmd_str("XLEN st"), Reply::Int(1));
    assert!(!c.cmd(&["BGREWRITEAOF"]).is_error());
    wait_persistence_idle(&mut c, Duration::from_secs(10));
    c.cmd_str("XADD st 2-1 a 1");
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(c.cmd_str("XLEN st"), Reply::Int(2));

    let r = Server::replica_of(&s);
    c.cmd_str("XADD st 3-1 a 1");
    assert_eq!(c.cmd_str("WAIT 1 5000"), Reply::Int(1));
    assert_eq!(r.conn().cmd_str("XLEN st"), Reply::Int(3));

    let dirs = [s.dir().to_path_buf(), r.dir().to_path_buf()];
    let pids = [s.pid().unwrap(), r.pid().unwrap()];
    drop(r);
    drop(c);
    s.kill9();
    assert!(!s.is_alive());
    drop(s);
    for d in &dirs {
        assert!(!d.exists(), "{} left behind", d.display());
    }
    for p in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{p}")).exists(),
            "redis-server pid {p} still exists"
        );
    }
}

#[test]
fn start_failure_shows_the_reason() {
    let r = std::panic::catch_unwind(|| {
        Server::builder()
            .no_module()
            .arg("--no-such-option", "1")
            .start()
    });
    let Err(e) = r else {
        panic!("a bad option must fail the start")
    };
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("did not start") && msg.contains("no-such-option"),
        "{msg}"
    );
}

#[test]
fn prng_is_deterministic() {
    let mut a = Rng::new(42);
    let mut b = Rng::new(42);
    let va: Vec<u64> = (0..100).map(|_| a.next_u64()).collect();
    let vb: Vec<u64> = (0..100).map(|_| b.next_u64()).collect();
    assert_eq!(va, vb);
    assert!((0..1000).all(|_| a.below(7) < 7));
    assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
}
