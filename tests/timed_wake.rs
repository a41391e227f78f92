//! Time-driven wake-ups of blocked group readers (issue 29, item 5). When something falls due
//! with no write to the key (a CLAIM min-idle reached, an ack timeout, a delayed entry), only
//! the first reader of each wait (same group, CLAIM, NOACK and keys) runs its read; the other
//! readers blocked on the key are passed over without running theirs (INFO xstream
//! `blocked_reads_rerun` / `blocked_reads_skipped` count both). A write still runs every reader,
//! as the built-in does.
//!
//! `measure_one_due_entry_many_readers` (ignored; by hand) gives the figure: 10,000 readers.

mod common;
use common::*;
use std::time::{Duration, Instant};

/// How many readers block in each test (CI size).
fn readers() -> usize {
    env_usize("TIMED_WAKE_READERS", 300)
}

/// (blocked_reads_rerun, blocked_reads_skipped).
fn counters(c: &mut Conn) -> (i64, i64) {
    (info_xstream(c, "blocked_reads_rerun"), info_xstream(c, "blocked_reads_skipped"))
}

/// Sends each reader's blocking command on a connection of its own, in order, and waits until
/// all of them are blocked.
fn block(s: &Server, c: &mut Conn, cmds: &[Vec<String>]) -> Vec<Conn> {
    let mut v = Vec::with_capacity(cmds.len());
    for (i, args) in cmds.iter().enumerate() {
        let mut w = s.conn();
        w.send(args).expect("send");
        v.push(w);
        // One at a time, so that the order they block in is the order sent.
        if i < 3 {
            assert!(wait_blocked_clients(c, i + 1), "reader {i} did not block");
        }
    }
    assert!(wait_blocked_clients(c, cmds.len()), "the readers did not all block");
    v
}

/// The IDs of a one-stream read reply.
fn read_ids(r: &Reply) -> Vec<String> {
    r.as_array()[0].as_array()[1].as_array().iter().map(|e| e.as_array()[0].text()).collect()
}

/// The reply of a blocked reader, within 5 s.
fn reply_of(w: &mut Conn) -> Reply {
    w.set_timeout(Duration::from_secs(5));
    w.read_reply().expect("the reader's reply").0
}

fn host_is_redis_7_0(c: &mut Conn) -> bool {
    let info = c.cmd(&["INFO", "server"]).text();
    info.contains("redis_version:7.0.") && !info.contains("valkey")
}

fn readgroup(group: &str, consumer: &str, extra: &[&str], key: &str) -> Vec<String> {
    let mut v: Vec<String> = ["XS.READGROUP", "GROUP", group, consumer, "BLOCK", "0"].iter().map(|s| s.to_string()).collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v.extend(["STREAMS".to_string(), key.to_string(), ">".to_string()]);
    v
}

/// One pending entry becomes claimable: the first reader of the `CLAIM 1000` wait claims it,
/// the first of the `CLAIM 100000` wait runs and stays blocked, every other reader is passed
/// over. Then a write runs them all and the first left takes the new entry.
#[test]
fn claimable_entry_runs_the_first_reader_of_each_wait() {
    let s = Server::start();
    let mut c = s.conn();
    let n = readers();
    c.cmd_str("XS.ADD s 1-0 f v");
    c.cmd_str("XS.GROUP CREATE s g 0");
    assert_eq!(read_ids(&c.cmd_str("XS.READGROUP GROUP g c0 STREAMS s >")), ["1-0"]);
    let t0 = Instant::now();
    let cmds: Vec<Vec<String>> =
        (0..n).map(|i| readgroup("g", &format!("r{i}"), &["CLAIM", if i % 2 == 0 { "1000" } else { "100000" }], "s")).collect();
    let mut ws = block(&s, &mut c, &cmds);
    assert!(t0.elapsed() < Duration::from_millis(900), "blocking took {:?}: the entry may be claimable already", t0.elapsed());
    let (r0, k0) = counters(&mut c);
    assert_eq!(read_ids(&reply_of(&mut ws[0])), ["1-0"]);
    assert_eq!(c.cmd_str("XS.ACK s g 1-0").as_int(), 1);
    assert_eq!(counters(&mut c), (r0 + 2, k0 + n as i64 - 2));
    assert!(wait_blocked_clients(&mut c, n - 1));

    // A write runs every reader; the first one left takes the new entry.
    c.cmd_str("XS.ADD s 2-0 f v");
    assert_eq!(read_ids(&reply_of(&mut ws[1])), ["2-0"]);
    assert_eq!(counters(&mut c), (r0 + 2 + n as i64 - 1, k0 + n as i64 - 2));
    assert!(wait_blocked_clients(&mut c, n - 2));
}

/// A delayed entry falls due: one reader of the group runs and gets it.
#[test]
fn due_delayed_entry_runs_one_reader() {
    let s = Server::start();
    let mut c = s.conn();
    let n = readers();
    c.cmd_str("XS.GROUP CREATE d g $ MKSTREAM");
    let cmds: Vec<Vec<String>> = (0..n).map(|i| readgroup("g", &format!("r{i}"), &[], "d")).collect();
    let mut ws = block(&s, &mut c, &cmds);
    let (r0, k0) = counters(&mut c);
    // The add is a write: every reader runs (nothing is due yet) and registers the due time.
    let id = c.cmd_str("XS.ADD d DELAY 300 * f v").text();
    assert_eq!(counters(&mut c), (r0 + n as i64, k0));
    assert_eq!(read_ids(&reply_of(&mut ws[0])), [id]);
    assert_eq!(counters(&mut c), (r0 + n as i64 + 1, k0 + n as i64 - 1));
    assert!(wait_blocked_clients(&mut c, n - 1));
}

/// An ack timeout redelivers one entry: one reader runs and gets it.
#[test]
fn ack_timeout_runs_one_reader() {
    let s = Server::start();
    let mut c = s.conn();
    let n = readers();
    c.cmd_str("XS.ADD a 1-0 f v");
    c.cmd_str("XS.GROUP CREATE a g 0");
    c.cmd_str("XS.GROUP SETPOLICY a g ACKTIMEOUT 1000");
    assert_eq!(read_ids(&c.cmd_str("XS.READGROUP GROUP g c0 STREAMS a >")), ["1-0"]);
    let cmds: Vec<Vec<String>> = (0..n).map(|i| readgroup("g", &format!("r{i}"), &[], "a")).collect();
    let mut ws = block(&s, &mut c, &cmds);
    let (r0, k0) = counters(&mut c);
    assert_eq!(read_ids(&reply_of(&mut ws[0])), ["1-0"]);
    assert_eq!(counters(&mut c), (r0 + 1, k0 + n as i64 - 1));
    assert!(wait_blocked_clients(&mut c, n - 1));
}

/// The reader a wake-up is meant for leaves before it runs: the server was busy (DEBUG SLEEP)
/// past both the entry's claim time and the first reader's BLOCK timeout, so the wake-up timer
/// signals the key for that reader, and Redis times it out before it serves the key (7.0 times
/// blocked clients out before it sleeps, not in its cron). The next reader of the wait runs in
/// its place and gets the entry (without that hand-over it would wait forever: BLOCK 0).
#[test]
fn a_reader_timed_out_before_its_wake_up_hands_it_on() {
    let s = Server::start();
    let mut c = s.conn();
    c.cmd_str("XS.ADD s 1-0 f v");
    c.cmd_str("XS.GROUP CREATE s g 0");
    assert_eq!(read_ids(&c.cmd_str("XS.READGROUP GROUP g c0 STREAMS s >")), ["1-0"]);
    let t0 = Instant::now();
    let cmds = [readgroup("g", "r0", &["CLAIM", "600"], "s"), readgroup("g", "r1", &["CLAIM", "600"], "s")];
    let mut cmds = cmds.to_vec();
    // r0 times out at 300 ms, before the entry is claimable (600 ms).
    cmds[0][5] = "300".to_string();
    let mut ws = block(&s, &mut c, &cmds);
    assert!(t0.elapsed() < Duration::from_millis(250), "blocking took {:?}", t0.elapsed());
    // The server sleeps through both times.
    c.cmd_str("DEBUG SLEEP 0.9");
    let first = reply_of(&mut ws[0]);
    if first.is_nil() {
        assert_eq!(read_ids(&reply_of(&mut ws[1])), ["1-0"]);
    } else {
        // A host that serves blocked keys before it times clients out: r0 had it.
        assert!(!host_is_redis_7_0(&mut c), "7.0 times r0 out first");
        assert_eq!(read_ids(&first), ["1-0"]);
    }
}

/// Measurement (by hand: `cargo test --release --test timed_wake -- --ignored --nocapture`):
/// 10,000 clients blocked in `XS.READGROUP ... BLOCK 0 CLAIM 1000` on one key, one pending
/// entry becomes claimable: how many reads run, and the server main thread's CPU time from
/// before the entry is due until the first reader has its reply, less the same span idle.
#[test]
#[ignore]
fn measure_one_due_entry_many_readers() {
    let n = env_usize("TIMED_WAKE_MEASURE_READERS", 10_000);
    let s = Server::builder().arg("--maxclients", &(n + 100).to_string()).start();
    let mut c = s.conn();
    let cpu = |c: &mut Conn| -> f64 {
        let info = c.cmd(&["INFO", "cpu"]).text();
        let f = |name: &str| -> f64 {
            info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).and_then(|v| v.trim().parse().ok()).unwrap_or(f64::NAN)
        };
        f("used_cpu_user_main_thread") + f("used_cpu_sys_main_thread")
    };
    c.cmd_str("XS.ADD s 1-0 f v");
    c.cmd_str("XS.GROUP CREATE s g 0");
    c.cmd_str("XS.READGROUP GROUP g c0 STREAMS s >");
    let delivered = Instant::now();
    let mut first = s.conn();
    first.send(&readgroup("g", "r0", &["CLAIM", "30000"], "s")).expect("send");
    assert!(wait_blocked_clients(&mut c, 1));
    let mut socks = Vec::with_capacity(n);
    for i in 1..n {
        let mut w = std::net::TcpStream::connect(("127.0.0.1", s.port())).expect("connect");
        std::io::Write::write_all(&mut w, &Conn::encode(&readgroup("g", &format!("r{i}"), &["CLAIM", "30000"], "s"))).expect("send");
        socks.push(w);
    }
    let t0 = Instant::now();
    while !c.cmd(&["INFO", "clients"]).text().contains(&format!("blocked_clients:{n}\r")) {
        assert!(t0.elapsed() < Duration::from_secs(60), "the readers did not all block");
        std::thread::sleep(Duration::from_millis(50));
    }
    let due = Duration::from_millis(30_000);
    assert!(delivered.elapsed() + Duration::from_secs(3) < due, "blocking took too long");
    // The idle cost of a span as long as the measured one (Redis's cron over n clients).
    std::thread::sleep(due - delivered.elapsed() - Duration::from_millis(2500));
    let idle0 = cpu(&mut c);
    let i0 = Instant::now();
    std::thread::sleep(Duration::from_millis(1000));
    let idle = (cpu(&mut c) - idle0) / i0.elapsed().as_secs_f64();
    std::thread::sleep(due.saturating_sub(delivered.elapsed()).saturating_sub(Duration::from_millis(500)));
    // Read leniently: the measurement also runs against builds without these counters.
    let opt = |c: &mut Conn| -> (i64, i64) {
        let info = c.cmd(&["INFO", "xstream"]).text();
        let f = |name: &str| {
            let line = |l: &str| l.trim().strip_prefix("xstream_").unwrap_or(l.trim()).strip_prefix(&format!("{name}:")).and_then(|v| v.parse().ok());
            info.lines().find_map(line).unwrap_or(-1)
        };
        (f("blocked_reads_rerun"), f("blocked_reads_skipped"))
    };
    let (r0, k0) = opt(&mut c);
    let cpu0 = cpu(&mut c);
    let w0 = Instant::now();
    let r = reply_of(&mut first);
    let span = w0.elapsed().as_secs_f64();
    let used = cpu(&mut c) - cpu0;
    let (r1, k1) = opt(&mut c);
    assert_eq!(read_ids(&r), ["1-0"]);
    report(&format!(
        "{n} readers blocked with CLAIM on one key, one entry claimable: {} reads run, {} passed over; \
         main-thread CPU {:.1} ms over the {:.0} ms up to the reply, of which idle {:.1} ms: the wake-up {:.1} ms",
        r1 - r0,
        k1 - k0,
        used * 1000.0,
        span * 1000.0,
        idle * span * 1000.0,
        (used - idle * span) * 1000.0
    ));
    drop(socks);
}
