//! Self-tests of the test harness (tests/common), on plain redis-server processes (no module):
//! the RESP3 parser on every reply type, restart with RDB and AOF, replicas, kill -9, cleanup of
//! processes and temp dirs, a readable panic when a server cannot start, and the sanitizer check
//! (a report in a server's log or stderr fails the test).

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
        ("bignum", Reply::BigNumber("1234567999999999999999999999999999999".into())),
        ("null", Reply::Nil),
        ("array", Reply::Array(vec![Reply::Int(0), Reply::Int(1), Reply::Int(2)])),
        ("set", Reply::Set(vec![Reply::Int(0), Reply::Int(1), Reply::Int(2)])),
        ("map", Reply::Map(vec![(Reply::Int(0), Reply::Bool(false)), (Reply::Int(1), Reply::Bool(true)), (Reply::Int(2), Reply::Bool(false))])),
        ("attrib", Reply::Bulk(b"Some real reply following the attribute".to_vec())),
        ("push", Reply::Bulk(b"Some real reply following the push reply".to_vec())),
        ("verbatim", Reply::Verbatim("txt".into(), b"This is a verbatim\nstring".to_vec())),
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
    assert_eq!(pushes[0].0, Reply::Push(vec![Reply::Bulk(b"server-cpu-usage".to_vec()), Reply::Int(42)]));
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
    let mut s = Server::builder().no_module().arg("--appendonly", "yes").start();
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
        assert!(!std::path::Path::new(&format!("/proc/{p}")).exists(), "redis-server pid {p} still exists");
    }
}

#[test]
fn start_failure_shows_the_reason() {
    let r = std::panic::catch_unwind(|| Server::builder().no_module().arg("--no-such-option", "1").start());
    let Err(e) = r else { panic!("a bad option must fail the start") };
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("did not start") && msg.contains("no-such-option"), "{msg}");
}

/// Two tests can draw the same free port: a server started on a port another server holds
/// must not take that server for its own (it answers PING before ours fails to bind). It
/// moves to another port, and each talks to its own server.
#[test]
fn a_taken_port_is_not_shared() {
    let a = Server::start();
    let b = Server::builder().first_port(a.port()).start();
    assert_ne!(a.port(), b.port());
    for s in [&a, &b] {
        let dir = s.conn().cmd(&["CONFIG", "GET", "dir"]).as_array()[1].text();
        assert_eq!(std::path::Path::new(&dir), std::fs::canonicalize(s.dir()).unwrap());
    }
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

/// A sanitizer report in a server's stderr or log fails the test when the server is dropped
/// (make test-asan); a clean log does not; a server dropped while the test is already panicking
/// only prints the report (no panic in a panic).
#[test]
fn sanitizer_report_fails_the_test() {
    use std::io::Write;
    if std::env::var("XSTREAM_SANITIZER_CHECK").is_ok_and(|m| !m.is_empty() && m != "fail") {
        report("sanitizer_report_fails_the_test: skipped (XSTREAM_SANITIZER_CHECK collects or is off)");
        return;
    }
    let asan = "=================================================================\n\
==4242==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010 at pc 0x55 bp 0x7f sp 0x7f\n\
READ of size 8 at 0x602000000010 thread T0\n\
    #0 0x55 in moduleFreeContext /redis/src/module.c:100\n\
SUMMARY: AddressSanitizer: heap-use-after-free /redis/src/module.c:100 in moduleFreeContext\n";
    let ubsan = "t_stream.c:1234:5: runtime error: signed integer overflow: 9223372036854775807 + 1 cannot be represented in type 'long long int'\n";
    let lsan = "==4242==ERROR: LeakSanitizer: detected memory leaks\n\nDirect leak of 16 byte(s) in 1 object(s) allocated from:\n";
    // The scanner: a real Redis log holds none of the markers.
    let clean = Server::start_plain();
    assert!(clean.log_contains("Ready to accept connections"));
    assert_eq!(find_sanitizer_report(&clean.log()), None);
    // allocator_may_return_null=1: a refused impossible allocation is a warning, not a report.
    assert_eq!(find_sanitizer_report("==13906==WARNING: AddressSanitizer failed to allocate 0x1f0000000a000101 bytes\n"), None);
    drop(clean);
    for (file, text, want) in [
        ("stderr.log", asan, "heap-use-after-free"),
        ("redis.log", ubsan, "signed integer overflow"),
        ("stderr.log", lsan, "LeakSanitizer"),
        ("asan.12345", asan, "AddressSanitizer"),
    ] {
        let s = Server::start_plain();
        let dir = s.dir().to_path_buf();
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(file)).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        drop(f);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(s)));
        let Err(e) = r else {
            let _ = std::fs::remove_dir_all(&dir);
            panic!("a report in {file} must fail the test")
        };
        let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("SANITIZER REPORT") && msg.contains(want) && msg.contains(file), "{file}: {msg}");
        assert!(dir.exists(), "the dir of a server with a report is kept");
        let _ = std::fs::remove_dir_all(&dir);
    }
    // Dropped while panicking: printed, no second panic (which would abort the test binary).
    let s = Server::start_plain();
    let dir = s.dir().to_path_buf();
    std::fs::write(dir.join("stderr.log"), asan).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _s = s;
        panic!("the test's own failure");
    }));
    let msg = r.unwrap_err().downcast_ref::<&str>().copied().unwrap_or_default();
    assert_eq!(msg, "the test's own failure");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A real memory error of the module under the ASan server: XS.DEBUG-DOUBLE-FREE (test-hooks
/// build) frees a block twice; ASan reports it (abort_on_error=1 ends the server) and dropping the
/// server must fail with that report. Runs only under `make test-asan` / `test-asan-short`
/// (`XSTREAM_SANITIZER=address` and the test-hooks module): on a jemalloc server the double free
/// would corrupt the heap instead.
#[test]
fn asan_reports_a_real_double_free() {
    if std::env::var("XSTREAM_SANITIZER").as_deref() != Ok("address") {
        report("asan_reports_a_real_double_free: skipped (not an ASan server; make test-asan runs it)");
        return;
    }
    let so = test_hooks_module_path().expect("XSTREAM_TEST_HOOKS_MODULE (the test-hooks build) must be set under ASan");
    let mut s = Server::builder().module(&so).start();
    let dir = s.dir().to_path_buf();
    let mut c = s.conn();
    let r = c.try_cmd(&["XS.DEBUG-DOUBLE-FREE"]);
    assert!(r.is_err(), "the server answered after a double free: {r:?}");
    drop(c);
    let t0 = std::time::Instant::now();
    while s.is_alive() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!s.is_alive(), "the server still runs after the double free");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(s)));
    let msg = r.expect_err("the ASan report must fail the test").downcast_ref::<String>().cloned().unwrap_or_default();
    // zfree asks malloc_usable_size first (used_memory accounting): ASan stops there with
    // bad-malloc_usable_size, before free() could say attempting double-free.
    assert!(msg.contains("ERROR: AddressSanitizer: ") && msg.contains("debug_double_free") && msg.contains("stderr.log"), "{msg}");
    report(&format!("asan_reports_a_real_double_free: {}", msg.lines().find(|l| l.contains("ERROR: AddressSanitizer")).unwrap_or("")));
    let _ = std::fs::remove_dir_all(&dir);
}

/// LeakSanitizer runs when a server exits (SIGTERM from the harness: exit(0)): Redis's own
/// `DEBUG LEAK <string>` loses an allocation on purpose, and dropping the server must fail with
/// the LeakSanitizer report. Under make test-asan only (ASan server, leak detection on).
#[test]
fn lsan_reports_a_leak_at_exit() {
    let opts = std::env::var("ASAN_OPTIONS").unwrap_or_default();
    if std::env::var("XSTREAM_SANITIZER").as_deref() != Ok("address") || opts.contains("detect_leaks=0") {
        report("lsan_reports_a_leak_at_exit: skipped (not an ASan server with leak detection; make test-asan runs it)");
        return;
    }
    let s = Server::start_plain();
    let dir = s.dir().to_path_buf();
    assert_eq!(s.conn().cmd(&["DEBUG", "LEAK", "lost-on-purpose"]), Reply::Simple("OK".into()));
    let t0 = std::time::Instant::now();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(s)));
    let msg = r.expect_err("the LeakSanitizer report must fail the test").downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("ERROR: LeakSanitizer: detected memory leaks") && msg.contains("debugCommand"), "{msg}");
    // The server ended by itself after the report (no 5 s SIGKILL fallback).
    assert!(t0.elapsed() < STOP_GRACE, "the stop took {:?}", t0.elapsed());
    report("lsan_reports_a_leak_at_exit: DEBUG LEAK -> ERROR: LeakSanitizer: detected memory leaks");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The module's string configs (xstream.compat, xstream.compression) read and set many times:
/// their values are right, and under make test-asan the server exits with no LeakSanitizer
/// report (the redis-module crate hands Redis a getter's string without freeing it: a fresh
/// string per CONFIG GET / SET leaked one allocation each; ours are interned).
#[test]
fn string_configs_do_not_leak() {
    let s = Server::start();
    let mut c = s.conn();
    for i in 0..200 {
        let level = ["7.0", "latest", "host"][i % 3];
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compat", level]), Reply::Simple("OK".into()));
        assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compat"]).to_string(), format!(r#"["xstream.compat", "{level}"]"#));
        let comp = ["lz4", "off"][i % 2];
        assert_eq!(c.cmd(&["CONFIG", "SET", "xstream.compression", comp]), Reply::Simple("OK".into()));
        assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compression"]).to_string(), format!(r#"["xstream.compression", "{comp}"]"#));
    }
    assert!(c.cmd(&["CONFIG", "SET", "xstream.compat", "6.2"]).is_error());
    assert_eq!(c.cmd(&["CONFIG", "GET", "xstream.compat"]).to_string(), r#"["xstream.compat", "latest"]"#, "a failed SET keeps the value");
}
