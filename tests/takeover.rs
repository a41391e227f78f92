//! Takeover mode (`loadmodule libxstream.so takeover yes`): the module serves the STANDARD stream
//! command names through a command filter. Every test here compares two servers:
//!
//!  - A: a plain redis-server (the built-in streams, the reference);
//!  - B: a redis-server with the module loaded with `takeover yes`,
//!
//! sending both the same commands with the standard names (`XADD`, `xreadgroup`...), and
//! comparing the replies byte for byte (only clock-dependent fields of group replies are
//! masked; command names in error texts are compared as they are).
//!
//! - `takeover_differential_basic` / `takeover_differential_groups`: the random generators of
//!   `tests/common/gen_basic.rs` and `tests/common/gen_groups.rs` (the ones of
//!   `tests/differential*.rs`) with the two-server runner of `tests/common/diff.rs`: the command
//!   name in random case, some commands inside MULTI/EXEC, EVAL (`redis.call(unpack(ARGV))`) or
//!   FCALL (a function library, `tests/common/via.rs`), 3% as one of six restricted ACL users
//!   (the ACL LOGs compared at the end), reads also through EVAL_RO, a no-writes script or while
//!   writes are paused (`CLIENT PAUSE WRITE`), and now and then a key made a built-in stream
//!   again on B (RESTORE of A's DUMP) for B to adopt; B has an AOF, so it propagates (a
//!   propagation during the pause would abort it). CONFIG SET stream-node-max-* on both
//!   servers per segment (and CONFIG SET xstream.node-max-* on B, which takeover mode refuses).
//! - `takeover_scripts_and_functions`: fixed scripts and functions calling XADD / XRANGE.
//! - `takeover_blocking_*`: XREAD BLOCK / XREADGROUP BLOCK served by a later XADD (plain, from
//!   MULTI, from a script, from a function), timeouts, BLOCK inside MULTI / scripts.
//! - `takeover_node_limits`: CONFIG SET stream-node-max-entries / -bytes (and the values given
//!   at startup) shape B's nodes like A's (XINFO STREAM radix-tree-keys/nodes equal).
//! - `takeover_replica_and_aof`: a replica of B (module with `takeover yes`) ends with the same
//!   digest and contents; B's AOF (appendonly, no RDB preamble) and the replication stream seen
//!   by a raw `SYNC` client carry the module's names (`XS.*`), never the built-in ones: Redis 7.0
//!   replays the AOF without the command filter, so a logged `XADD` would reach the built-in.
//! - `takeover_replica_digest`: DEBUG DIGEST-VALUE of a replica after XREADGROUP.
//! - `takeover_aof_restart`: a restart from B's AOF (with and without RDB preamble) gives back
//!   module streams with all the data.
//!
//! No naming differences are tolerated: `'xadd'`, `Try XGROUP HELP.`, `xread command is not
//! allowed with BLOCK option from scripts` as the built-in says them (every error path is in
//! tests/takeover_errors.rs; TYPE and SCAN TYPE stream in tests/takeover_types.rs).
//!
//! Env: XSTREAM_SEED, XSTREAM_TDIFF_OPS / XSTREAM_TDIFF_OPS3 (basic differential, RESP2 / RESP3
//! ops), XSTREAM_TGDIFF_OPS / XSTREAM_TGDIFF_OPS3 (group differential), XSTREAM_TDIFF_SEGMENTS,
//! XSTREAM_DIFF_MAX, XSTREAM_DIFF_STATS, XSTREAM_DIFF_LOG.

mod common;
#[path = "common/gen_basic.rs"]
mod gen_basic;
#[path = "common/gen_groups.rs"]
mod gen_groups;

use common::diff::{Opts, Pair};
use common::groups::{now_ms, Node};
use common::via;
use common::*;
use std::time::{Duration, Instant};

/// The module server in takeover mode.
fn start_takeover() -> Server {
    Server::builder().module_args(&["takeover", "yes"]).start()
}

/// `INFO commandstats` as (command, calls).
fn command_calls(c: &mut Conn) -> Vec<(String, u64)> {
    let info = c.cmd(&["INFO", "commandstats"]).text();
    info.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("cmdstat_")?;
            let (name, rest) = l.split_once(':')?;
            let calls = rest.split(',').find_map(|f| f.strip_prefix("calls="))?.parse().ok()?;
            Some((name.to_string(), calls))
        })
        .collect()
}

/// Whether `key` holds a module stream. TYPE says `stream` for both kinds in takeover mode;
/// OBJECT ENCODING tells them apart (`stream` for the built-in, `raw` for a module value).
fn is_module_stream(c: &mut Conn, key: &str) -> bool {
    c.cmd(&["TYPE", key]) == Reply::Simple("stream".into()) && c.cmd(&["OBJECT", "ENCODING", key]) == Reply::Bulk(b"raw".to_vec())
}

/// On B, the built-in stream commands must never have run (the filter sent everything to the
/// module), and the module's commands must have: otherwise a differential would compare the
/// built-in with itself.
fn assert_served_by_module(b: &Server, what: &str) {
    let mut c = b.conn();
    let calls = command_calls(&mut c);
    // Commands Redis refused before running them (arity, unknown subcommand) are counted as
    // `calls=0,rejected_calls=n` of the built-in: the filter leaves them to it, so its error
    // text is the reply. HELP too (it touches no key).
    let builtin: Vec<String> = calls
        .iter()
        .filter(|(n, k)| n.starts_with('x') && !n.starts_with("xs.") && !n.ends_with("|help") && *k > 0)
        .map(|(n, k)| format!("{n}={k}"))
        .collect();
    assert!(builtin.is_empty(), "{what}: built-in stream commands ran on the takeover server: {builtin:?}");
    let module: u64 = calls.iter().filter(|(n, _)| n.starts_with("xs.")).map(|(_, k)| k).sum();
    assert!(module > 0, "{what}: no XS.* command ran on the takeover server");
    let list: Vec<String> = calls.iter().filter(|(n, _)| n.starts_with("xs.")).map(|(n, k)| format!("{n}={k}")).collect();
    report(&format!("{what}: B command stats: {}", list.join(" ")));
}

// =============================================================================================
// Random differentials
// =============================================================================================

/// Runs a generator (`gen_basic::run` / `gen_groups::run`) between a plain server and a
/// takeover server; `what` names the run and is the summary label (`<what>: N ops, 0
/// differences`); `env`: the variables giving the RESP2 / RESP3 op counts. Returns the servers.
fn takeover_diff(run: fn(Pair, &Opts) -> usize, what: &'static str, test: &'static str, env: [&str; 2], n: [usize; 2]) -> (Server, Server) {
    let a = Server::start_plain();
    // With an AOF, so that B propagates: a propagation while writes are paused (the runner's
    // `CLIENT PAUSE WRITE` windows) aborts Redis, which it would otherwise skip.
    let b = Server::builder().module_args(&["takeover", "yes"]).arg("--appendonly", "yes").start();
    let o = Opts {
        what,
        label: what,
        replay: test,
        n2: env_usize(env[0], n[0]),
        n3: env_usize(env[1], n[1]),
        segments: env_usize("XSTREAM_TDIFF_SEGMENTS", 3),
        layout_free: false,
    };
    let done = run(Pair::two(&a, &b), &o);
    assert!(done >= o.n2 + o.n3);
    assert_served_by_module(&b, what);
    (a, b)
}

#[test]
fn takeover_differential_basic() {
    let (a, b) = takeover_diff(
        gen_basic::run,
        "takeover differential (basic)",
        "--test takeover takeover_differential_basic",
        ["XSTREAM_TDIFF_OPS", "XSTREAM_TDIFF_OPS3"],
        [5000, 2000],
    );
    // TYPE says `stream` for the module's streams too (tests/takeover_types.rs).
    for c in [&mut a.conn(), &mut b.conn()] {
        c.cmd(&["XADD", "t", "1-1", "f", "v"]);
        assert_eq!(c.cmd(&["TYPE", "t"]), Reply::Simple("stream".into()));
    }
}

#[test]
fn takeover_differential_groups() {
    takeover_diff(
        gen_groups::run,
        "takeover differential (groups)",
        "--test takeover takeover_differential_groups",
        ["XSTREAM_TGDIFF_OPS", "XSTREAM_TGDIFF_OPS3"],
        [5000, 2500],
    );
}

// =============================================================================================
// Fixed sequences compared between A and B
// =============================================================================================

/// Runs `lines` on both servers in order (`ca`: A, `cb`: B) and compares each reply after clock
/// masking; panics with every difference.
fn compare_lines(ca: &mut Conn, cb: &mut Conn, what: &str, lines: &[Vec<String>]) {
    let mut diffs = Vec::new();
    for args in lines {
        let ra = ca.raw(args);
        let rb = cb.raw(args);
        let na = mask(&ra, args, 0);
        let nb = mask(&rb, args, 1);
        if na != nb {
            diffs.push(format!("  {}\n    A: {}\n    B: {}", fmt_cmd(args), escape(&ra), escape(&rb)));
        }
    }
    assert!(diffs.is_empty(), "{what}: {} difference(s):\n{}", diffs.len(), diffs.join("\n"));
}

/// Clock fields masked (XPENDING extended, XINFO CONSUMERS, XINFO STREAM FULL). Command names
/// in error texts are compared as they are: in takeover mode they are the built-in's.
fn mask(raw: &[u8], args: &[String], side: usize) -> Vec<u8> {
    let norm = common::groups::Normalizer { key_pairs: Vec::new(), loose_names: false };
    // Scripts and functions: the command is inside; classify by the first stream command name.
    const NAMES: &[&str] = &["XPENDING", "XINFO"];
    let inner: Vec<String> = match args.iter().position(|a| NAMES.iter().any(|n| a.eq_ignore_ascii_case(n))) {
        Some(i) if i > 0 => args[i..].to_vec(),
        _ => args.to_vec(),
    };
    norm.normalize(&inner, raw, side, now_ms())
}

fn argv(line: &str) -> Vec<String> {
    line.split(' ').filter(|t| !t.is_empty()).map(|t| t.replace("{sp}", " ")).collect()
}

fn script_lines() -> Vec<Vec<String>> {
    let mut v: Vec<Vec<String>> = Vec::new();
    let eval = |script: &str, keys: &[&str], args: &[&str]| -> Vec<String> {
        let mut a = vec!["EVAL".to_string(), script.to_string(), keys.len().to_string()];
        a.extend(keys.iter().map(|s| s.to_string()));
        a.extend(args.iter().map(|s| s.to_string()));
        a
    };
    v.push(eval("return redis.call('XADD', KEYS[1], ARGV[1], 'f', ARGV[2])", &["s1"], &["1-1", "one"]));
    v.push(eval("return redis.call('xadd', KEYS[1], '*', 'f', 'auto')", &["s2"], &[]));
    v.push(eval(
        "redis.call('XADD', KEYS[1], '2-1', 'f', 'two'); redis.call('XADD', KEYS[1], 'MAXLEN', '=', '2', '3-1', 'f', 'three'); return redis.call('XRANGE', KEYS[1], '-', '+')",
        &["s1"],
        &[],
    ));
    v.push(eval("return redis.pcall('XADD', KEYS[1], '1-1', 'f', 'dup')", &["s1"], &[]));
    v.push(eval("return redis.call('XADD', KEYS[1])", &["s1"], &[]));
    v.push(eval("return redis.pcall('XINFO', 'STREAM', KEYS[1], 'FULL')", &["s1"], &[]));
    v.push(eval(
        "redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0'); return redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'COUNT', '1', 'STREAMS', KEYS[1], '>')",
        &["s1"],
        &[],
    ));
    v.push(eval("return redis.call('XPENDING', KEYS[1], 'g')", &["s1"], &[]));
    v.push(eval("return redis.call('XCLAIM', KEYS[1], 'g', 'd', '0', '2-1', 'JUSTID')", &["s1"], &[]));
    v.push(eval("return redis.call('XAUTOCLAIM', KEYS[1], 'g', 'e', '0', '0-0')", &["s1"], &[]));
    v.push(eval("return redis.call('XACK', KEYS[1], 'g', '2-1', '3-1')", &["s1"], &[]));
    v.push(eval("return redis.call('XLEN', KEYS[1])", &["s1"], &[]));
    v.push(eval("return redis.call('XDEL', KEYS[1], '2-1')", &["s1"], &[]));
    v.push(eval("return redis.call('XTRIM', KEYS[1], 'MAXLEN', '0')", &["s1"], &[]));
    v.push(eval("return redis.call('XSETID', KEYS[1], '9-9')", &["s1"], &[]));
    v.push(eval("return redis.call('XINFO', 'STREAM', KEYS[1])", &["s1"], &[]));
    v.push(eval("return redis.call('XINFO', 'GROUPS', KEYS[1])", &["s1"], &[]));
    v.push(eval("return redis.call('XREVRANGE', KEYS[1], '+', '-')", &["s1"], &[]));
    v.push(eval("return redis.call('XREAD', 'STREAMS', KEYS[1], '0')", &["s1"], &[]));
    // Read-only script (EVAL_RO): reads allowed, XADD refused the same way.
    v.push({
        let mut a = eval("return redis.call('XRANGE', KEYS[1], '-', '+')", &["s1"], &[]);
        a[0] = "EVAL_RO".into();
        a
    });
    v.push({
        let mut a = eval("return redis.call('XADD', KEYS[1], '10-1', 'f', 'v')", &["s1"], &[]);
        a[0] = "EVAL_RO".into();
        a
    });
    // Functions.
    for l in [
        "FCALL xaddrange 1 f1 1-1 a 1",
        "FCALL xaddrange 1 f1 2-1 b 2",
        "FCALL xaddrange 1 f1 2-1 dup 3",
        "FCALL xlenrange 1 f1 1",
        "FCALL_RO xlenrange 1 f1 5",
        "FCALL_RO xaddrange 1 f1 3-1 ro 1",
        "FCALL xcall 0 XADD f1 3-1 c 3",
        "FCALL xcall 0 xinfo STREAM f1",
        "FCALL xcall 0 XGROUP CREATE f1 g 0",
        "FCALL xcall 0 XREADGROUP GROUP g c STREAMS f1 >",
        "FCALL xcall 0 XINFO CONSUMERS f1 g",
        "FCALL xcall 0 XPENDING f1 g - + 10",
        "FCALL xcall 0 XADD str 1-1 f v",
    ] {
        v.push(argv(l));
    }
    // Transactions: queued stream commands, a queue-time error, a run-time error.
    for l in [
        "MULTI",
        "XADD m1 1-1 f v",
        "xadd m1 2-1 f v",
        "XRANGE m1 - +",
        "XGROUP CREATE m1 g $",
        "XADD m1 3-1 f v",
        "XREADGROUP GROUP g c STREAMS m1 >",
        "XADD str 1-1 f v",
        "XINFO STREAM m1",
        "EXEC",
        "MULTI",
        "XADD m1 4-1 f v",
        "XADD m1",
        "EXEC",
        "XLEN m1",
        "MULTI",
        "XADD m1 5-1 f v",
        "DISCARD",
        "XLEN m1",
        "WATCH m1",
        "MULTI",
        "XLEN m1",
        "EXEC",
    ] {
        v.push(argv(l));
    }
    v
}

/// Fixed scripts, functions and transactions with the standard names: same replies.
#[test]
fn takeover_scripts_and_functions() {
    let a = Server::start_plain();
    let b = start_takeover();
    for resp3 in [false, true] {
        let mut ca = a.conn();
        let mut cb = b.conn();
        for c in [&mut ca, &mut cb] {
            c.cmd(&["FLUSHALL"]);
            c.cmd(&["SET", "str", "x"]);
            via::load_functions(c);
            if resp3 {
                c.hello3();
            }
        }
        let what = format!("scripts and functions (RESP{})", if resp3 { 3 } else { 2 });
        // `*` in a script: the IDs differ between the servers; compare the rest of that reply's
        // shape by running it separately.
        let mut lines = script_lines();
        let auto = lines.remove(1);
        let ra = ca.cmd(&auto);
        let rb = cb.cmd(&auto);
        assert!(looks_like_id(ra.as_bytes().unwrap()) && looks_like_id(rb.as_bytes().unwrap()), "{what}: XADD * in a script: A {ra}, B {rb}");
        compare_lines(&mut ca, &mut cb, &what, &lines);
        // Written through scripts and functions: the keys are module streams on B.
        for k in ["s1", "f1", "m1"] {
            assert!(is_module_stream(&mut cb, k), "{what}: {k} is not a module stream");
        }
        // A WATCHed key modified by a stream command aborts the transaction on both.
        let mut wa = a.conn();
        let mut wb = b.conn();
        let mut obs = Vec::new();
        for (w, other) in [(&mut wa, &mut ca), (&mut wb, &mut cb)] {
            let mut o = Vec::new();
            o.push(w.raw(&["WATCH", "m1"]));
            other.cmd(&["XADD", "m1", "100-1", "f", "v"]);
            o.push(w.raw(&["MULTI"]));
            o.push(w.raw(&["XLEN", "m1"]));
            o.push(w.raw(&["EXEC"]));
            o.push(w.raw(&["WATCH", "m1"]));
            other.cmd(&["XGROUP", "CREATECONSUMER", "m1", "g", "new-consumer"]);
            o.push(w.raw(&["MULTI"]));
            o.push(w.raw(&["XLEN", "m1"]));
            o.push(w.raw(&["EXEC"]));
            obs.push(o);
        }
        assert_eq!(obs[0], obs[1], "{what}: WATCH + stream writes: A {:?} B {:?}", obs[0], obs[1]);
    }
    assert_served_by_module(&b, "scripts and functions");
}

// =============================================================================================
// Blocking reads
// =============================================================================================

fn info_field(c: &mut Conn, section: &str, field: &str) -> String {
    let info = c.cmd(&["INFO", section]).text();
    info.lines().find_map(|l| l.strip_prefix(&format!("{field}:"))).map(|v| v.trim().to_string()).unwrap_or_default()
}

fn client_flags(c: &mut Conn, id: i64) -> Option<(String, String)> {
    let line = c.cmd(&["CLIENT", "LIST", "ID", &id.to_string()]).text();
    if line.trim().is_empty() {
        return None;
    }
    let field = |name: &str| line.split(' ').find_map(|f| f.strip_prefix(name)).unwrap_or("").trim().to_string();
    Some((field("flags="), field("cmd=")))
}

fn read_raw(c: &mut Conn, timeout: Duration) -> Vec<u8> {
    c.set_timeout(timeout);
    let r = match c.read_reply() {
        Ok((_, raw)) => raw,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => b"<closed>".to_vec(),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => b"<no reply>".to_vec(),
        Err(e) => format!("<io error: {e}>").into_bytes(),
    };
    c.set_timeout(READ_TIMEOUT);
    r
}

/// One server's run of a blocking scenario: every observation is recorded, then the two
/// servers' lists are compared.
struct Env<'a> {
    srv: &'a Server,
    admin: Conn,
    resp3: bool,
    obs: Vec<(String, Vec<u8>)>,
    waiters: Vec<(Conn, i64, String)>,
}

impl<'a> Env<'a> {
    fn new(srv: &'a Server, resp3: bool) -> Env<'a> {
        let mut admin = srv.conn();
        admin.cmd(&["FLUSHALL"]);
        via::load_functions(&mut admin);
        Env { srv, admin, resp3, obs: Vec::new(), waiters: Vec::new() }
    }
    fn client(&self) -> Conn {
        let mut c = self.srv.conn();
        if self.resp3 {
            c.hello3();
        }
        c
    }
    fn note(&mut self, label: impl Into<String>, raw: &[u8]) {
        self.obs.push((label.into(), raw.to_vec()));
    }
    /// Runs a line on the admin connection without recording it.
    fn run(&mut self, line: &str) -> Vec<u8> {
        self.admin.raw(&argv(line))
    }
    /// Runs and records (clock fields masked).
    fn rec(&mut self, line: &str) {
        let args = argv(line);
        let r = self.admin.raw(&args);
        let r = mask(&r, &args, 1);
        self.note(line, &r);
    }
    fn rec_args(&mut self, label: &str, args: &[String]) {
        let r = self.admin.raw(args);
        let r = mask(&r, args, 1);
        self.note(label, &r);
    }
    /// Sends `line` from a new client and waits until the server reports it blocked.
    fn block(&mut self, line: &str) -> usize {
        let mut c = self.client();
        let id = c.cmd(&["CLIENT", "ID"]).as_int();
        c.send(&argv(line)).unwrap();
        let t0 = Instant::now();
        loop {
            match client_flags(&mut self.admin, id) {
                Some((flags, cmd)) if cmd != "client|id" && cmd != "hello" && !cmd.is_empty() && cmd != "NULL" => {
                    if flags.contains('b') {
                        break;
                    }
                    let r = read_raw(&mut c, Duration::from_secs(5));
                    panic!("`{line}` did not block on port {}: {}", self.srv.port(), escape(&r));
                }
                None => panic!("client of `{line}` is gone"),
                _ => {}
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "`{line}` never processed");
            std::thread::sleep(Duration::from_millis(1));
        }
        self.waiters.push((c, id, line.to_string()));
        self.waiters.len() - 1
    }
    /// The waiter's reply if it has one now (it must not be blocked any more), else `<blocked>`.
    fn state(&mut self, label: &str, w: usize) {
        let id = self.waiters[w].1;
        let blocked = client_flags(&mut self.admin, id).is_some_and(|(f, _)| f.contains('b'));
        let r = if blocked { b"<blocked>".to_vec() } else { read_raw(&mut self.waiters[w].0, Duration::from_secs(10)) };
        let l = format!("[{}] {label}", self.waiters[w].2);
        self.note(l, &r);
    }
    /// Waits for the waiter's reply (a timeout), up to 10 s.
    fn reply(&mut self, label: &str, w: usize) {
        let t0 = Instant::now();
        let r = read_raw(&mut self.waiters[w].0, Duration::from_secs(10));
        let l = format!("[{}] {label}", self.waiters[w].2);
        self.note(l, &r);
        let ms = t0.elapsed().as_millis();
        self.note(format!("[{}] replied within 5 s", self.waiters[w].2), (ms < 5000).to_string().as_bytes());
    }
    fn finish(mut self) -> Vec<(String, Vec<u8>)> {
        // Nobody may stay blocked.
        let t0 = Instant::now();
        let mut n;
        loop {
            n = info_field(&mut self.admin, "clients", "blocked_clients");
            if n == "0" || t0.elapsed() > Duration::from_secs(5) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.note("blocked_clients at the end", n.as_bytes());
        self.obs
    }
}

fn blocking_diff(test: &str, scenario: impl Fn(&mut Env)) {
    let a = Server::start_plain();
    let b = start_takeover();
    let mut failures = Vec::new();
    for resp3 in [false, true] {
        let mut res = Vec::new();
        for srv in [&a, &b] {
            let mut e = Env::new(srv, resp3);
            scenario(&mut e);
            res.push(e.finish());
        }
        let (oa, ob) = (&res[0], &res[1]);
        let mut diffs = Vec::new();
        for i in 0..oa.len().max(ob.len()) {
            match (oa.get(i), ob.get(i)) {
                (Some((la, ra)), Some((lb, rb))) if la == lb && ra == rb => {}
                (x, y) => diffs.push(format!(
                    "  #{i}\n    A: {}\n    B: {}",
                    x.map(|(l, r)| format!("{l} => {}", escape(r))).unwrap_or_default(),
                    y.map(|(l, r)| format!("{l} => {}", escape(r))).unwrap_or_default()
                )),
            }
        }
        if !diffs.is_empty() {
            failures.push(format!("{test} (RESP{}): {} difference(s):\n{}", if resp3 { 3 } else { 2 }, diffs.len(), diffs.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_served_by_module(&b, test);
}

/// XREAD BLOCK / XREADGROUP BLOCK served by a later XADD: plain, from MULTI/EXEC, from EVAL,
/// from FCALL; lower-case names; two keys.
#[test]
fn takeover_blocking_served() {
    blocking_diff("takeover_blocking_served", |e| {
        e.run("XADD a 1-1 f v1");
        let w = e.block("XREAD BLOCK 0 STREAMS a $");
        e.rec("XADD a 2-1 f v2 g w2");
        e.state("after XADD 2-1", w);

        let w = e.block("xread count 5 block 0 streams b c $ $");
        e.rec("xadd c 1-1 f on-c");
        e.state("after xadd on the second key", w);

        e.run("XGROUP CREATE a grp $");
        let w = e.block("XREADGROUP GROUP grp alice BLOCK 0 STREAMS a >");
        let w2 = e.block("XREADGROUP GROUP grp bob COUNT 1 BLOCK 0 STREAMS a >");
        e.rec("XADD a 3-1 f v3");
        e.state("first waiter after 3-1", w);
        e.state("second waiter after 3-1", w2);
        e.rec("XADD a 4-1 f v4");
        e.state("second waiter after 4-1", w2);
        e.rec("XPENDING a grp");
        e.rec("XPENDING a grp - + 10");
        e.rec("XINFO CONSUMERS a grp");

        // Served by a transaction.
        let w = e.block("XREADGROUP GROUP grp carol BLOCK 0 STREAMS a >");
        e.rec("MULTI");
        e.rec("XADD a 5-1 f in-multi");
        e.rec("XADD a 5-2 f in-multi-2");
        e.rec("EXEC");
        e.state("after MULTI/EXEC", w);

        // Served by a script and by a function.
        let w = e.block("XREAD BLOCK 0 STREAMS a $");
        let args: Vec<String> = vec![
            "EVAL".into(),
            "redis.call('XADD', KEYS[1], '6-1', 'f', 'a'); return redis.call('xadd', KEYS[1], '6-2', 'f', 'b')".into(),
            "1".into(),
            "a".into(),
        ];
        e.rec_args("EVAL with two XADD", &args);
        e.state("after EVAL", w);
        e.rec("XGROUP SETID a grp $");
        let w = e.block("XREADGROUP GROUP grp dave NOACK BLOCK 0 STREAMS a >");
        e.rec("FCALL xaddrange 1 a 7-1 f from-function");
        e.state("after FCALL", w);
        e.rec("XINFO GROUPS a");

        // The creating XADD serves a waiter on a missing key.
        let w = e.block("XREAD BLOCK 0 STREAMS newkey 0-0");
        e.rec("XADD newkey 1-1 f created");
        e.state("after the creating XADD", w);

        // Writes that add nothing do not serve; the next XADD does.
        let w = e.block("XREAD BLOCK 0 STREAMS a $");
        e.rec("XDEL a 1-1");
        e.rec("XTRIM a MAXLEN 100");
        e.rec("XSETID a 100-0");
        e.state("after XDEL / XTRIM / XSETID", w);
        e.rec("XADD a 101-1 f served");
        e.state("after XADD 101-1", w);
    });
}

/// Timeouts, BLOCK inside MULTI and scripts (never blocks), a destroyed group.
#[test]
fn takeover_blocking_timeouts() {
    blocking_diff("takeover_blocking_timeouts", |e| {
        e.run("XADD a 1-1 f v");
        e.run("XGROUP CREATE a grp $");
        let w = e.block("XREAD BLOCK 150 STREAMS a $");
        e.reply("timeout", w);
        let w = e.block("XREADGROUP GROUP grp c BLOCK 150 STREAMS a >");
        e.reply("timeout", w);
        let w = e.block("XREAD COUNT 2 BLOCK 120 STREAMS missing a 0 $");
        e.reply("timeout on two keys", w);
        e.rec("XINFO CONSUMERS a grp");
        // Inside MULTI: answers at once (a null array like a timeout, or the data).
        for l in ["MULTI", "XREAD BLOCK 0 STREAMS a $", "XREADGROUP GROUP grp c BLOCK 0 STREAMS a >", "XREAD BLOCK 0 STREAMS a 0", "EXEC"] {
            e.rec(l);
        }
        // From scripts: never blocks either.
        let args: Vec<String> =
            vec!["EVAL".into(), "return redis.call('XREAD', 'BLOCK', '0', 'STREAMS', KEYS[1], '$')".into(), "1".into(), "a".into()];
        e.rec_args("EVAL XREAD BLOCK 0", &args);
        let args: Vec<String> = vec![
            "EVAL".into(),
            "return redis.call('XREADGROUP', 'GROUP', 'grp', 'c', 'BLOCK', '0', 'STREAMS', KEYS[1], '>')".into(),
            "1".into(),
            "a".into(),
        ];
        e.rec_args("EVAL XREADGROUP BLOCK 0", &args);
        e.rec("FCALL xcall 0 XREAD BLOCK 0 STREAMS a $");
        // The group is destroyed while a client waits on it.
        let w = e.block("XREADGROUP GROUP grp c BLOCK 0 STREAMS a >");
        e.rec("XGROUP DESTROY a grp");
        e.state("after XGROUP DESTROY", w);
        // The key is deleted while a client waits, then re-created.
        let w = e.block("XREAD BLOCK 0 STREAMS a $");
        e.rec("DEL a");
        e.state("after DEL", w);
        e.rec("XADD a 2-1 f again");
        e.state("after re-creating XADD", w);
    });
}

// =============================================================================================
// Node limits
// =============================================================================================

fn xinfo_nodes(c: &mut Conn, key: &str) -> (i64, i64, i64) {
    let r = c.cmd(&["XINFO", "STREAM", key]);
    let f = |n: &str| r.field(n).map(|v| v.as_int()).unwrap_or(-1);
    (f("length"), f("radix-tree-keys"), f("radix-tree-nodes"))
}

fn add_entries(c: &mut Conn, key: &str, from: u64, n: u64, value_len: usize) {
    let v = "v".repeat(value_len);
    for i in from..from + n {
        let id = format!("{i}-1");
        let r = c.cmd(&["XADD", key, &id, "field", &v]);
        assert!(!r.is_error(), "XADD {key} {id}: {r}");
    }
}

/// The server's stream-node-max-entries / -bytes shape B's nodes like A's: at startup (command
/// line) and after CONFIG SET (also while a stream exists); xstream.node-max-* given at load are
/// ignored, and CONFIG SET refuses to change them.
#[test]
fn takeover_node_limits() {
    let a = Server::builder().no_module().arg("--stream-node-max-entries", "7").start();
    let b = Server::builder().module_args(&["takeover", "yes", "node-max-entries", "1000"]).arg("--stream-node-max-entries", "7").start();
    let mut ca = a.conn();
    let mut cb = b.conn();
    let mut table = Vec::new();
    let mut check = |ca: &mut Conn, cb: &mut Conn, key: &str, what: &str| {
        let na = xinfo_nodes(ca, key);
        let nb = xinfo_nodes(cb, key);
        table.push(format!("{what}: A {na:?} B {nb:?}"));
        assert_eq!(na, nb, "{what}: (length, radix-tree-keys, radix-tree-nodes) differ");
        let fa = ca.raw(&["XINFO", "STREAM", key]);
        let fb = cb.raw(&["XINFO", "STREAM", key]);
        assert_eq!(escape(&fa), escape(&fb), "{what}: XINFO STREAM differs");
    };
    // From the command line: 7 entries per node.
    for c in [&mut ca, &mut cb] {
        add_entries(c, "k1", 1, 50, 3);
    }
    check(&mut ca, &mut cb, "k1", "startup stream-node-max-entries 7, 50 entries");
    assert_eq!(xinfo_nodes(&mut ca, "k1").1, 8, "A: 50 entries / 7 per node");

    // CONFIG SET at runtime, while k1 exists: new nodes follow the new limit.
    for c in [&mut ca, &mut cb] {
        assert_eq!(c.cmd(&["CONFIG", "SET", "stream-node-max-entries", "3"]), Reply::Simple("OK".into()));
    }
    // The module's own limits have no say in takeover mode: changing them is refused (B was
    // started with `node-max-entries 1000`, which the load logs as ignored).
    for what in ["entries", "bytes"] {
        let name = format!("xstream.node-max-{what}");
        assert_eq!(
            cb.cmd(&["CONFIG", "SET", &name, "5"]),
            Reply::Error(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - \
                 {name} has no effect in takeover mode: set the server's stream-node-max-{what}"
            ))
        );
    }
    assert_eq!(cb.cmd(&["CONFIG", "SET", "xstream.node-max-entries", "1000"]), Reply::Simple("OK".into()), "the value it has");
    assert!(b.log_contains("xstream.node-max-entries 1000 ignored"), "{}", b.log_tail(20));
    for c in [&mut ca, &mut cb] {
        add_entries(c, "k1", 100, 20, 3);
        add_entries(c, "k2", 1, 20, 3);
    }
    check(&mut ca, &mut cb, "k1", "after CONFIG SET stream-node-max-entries 3 (existing stream)");
    check(&mut ca, &mut cb, "k2", "after CONFIG SET stream-node-max-entries 3 (new stream)");

    // Bytes: a small byte limit with larger values (new keys only: changing the byte limit while
    // nodes exist is avoided, see tests/differential.rs).
    for c in [&mut ca, &mut cb] {
        assert_eq!(c.cmd(&["CONFIG", "SET", "stream-node-max-entries", "0", "stream-node-max-bytes", "200"]), Reply::Simple("OK".into()));
        add_entries(c, "k3", 1, 40, 30);
    }
    check(&mut ca, &mut cb, "k3", "stream-node-max-entries 0, stream-node-max-bytes 200");
    // Lower-case config name, CONFIG SET of both at once, approximate trims follow the nodes.
    for c in [&mut ca, &mut cb] {
        assert_eq!(c.cmd(&["config", "set", "STREAM-NODE-MAX-ENTRIES", "5", "stream-node-max-bytes", "0"]), Reply::Simple("OK".into()));
        add_entries(c, "k4", 1, 33, 3);
        let r = c.cmd(&["XTRIM", "k4", "MAXLEN", "~", "12"]);
        assert!(!r.is_error(), "{r}");
    }
    check(&mut ca, &mut cb, "k4", "entries 5, XTRIM MAXLEN ~ 12");
    assert_eq!(ca.raw(&["XRANGE", "k4", "-", "+"]), cb.raw(&["XRANGE", "k4", "-", "+"]));
    // The values survive a DEBUG RELOAD on B (stream written with the server limits, read back).
    assert_eq!(cb.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
    for c in [&mut ca, &mut cb] {
        add_entries(c, "k4", 100, 11, 3);
    }
    check(&mut ca, &mut cb, "k4", "after DEBUG RELOAD on B and 11 more entries");
    report(&format!("takeover_node_limits:\n  {}", table.join("\n  ")));
}

// =============================================================================================
// Replication and AOF
// =============================================================================================

fn wait_offsets(primary: &mut Conn, replica: &mut Conn) {
    let r = primary.cmd(&["WAIT", "1", "5000"]);
    assert_eq!(r, Reply::Int(1), "WAIT 1 5000: {r}");
    let t0 = Instant::now();
    loop {
        let mo = info_field(primary, "replication", "master_repl_offset");
        let ro = info_field(replica, "replication", "slave_repl_offset");
        if !mo.is_empty() && mo == ro {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "replica offset {ro} != {mo}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A workload with every kind of write (and reads that propagate: XREADGROUP with and without
/// NOACK, XCLAIM, XAUTOCLAIM), approximate trims, scripts and transactions. Explicit IDs (or `*`
/// after an XSETID into the future, which is deterministic) on `r0..r2`, so that a built-in and
/// a module server end equal; clock IDs only on `auto` when `clock_ids`.
fn replicated_workload(c: &mut Conn, rng: &mut Rng, clock_ids: bool) {
    for k in 0..3 {
        let key = format!("r{k}");
        for i in 0..40u64 {
            let r = c.cmd(&["XADD", &key, &format!("{}-{}", i + 1, rng.below(3)), "f", &i.to_string()]);
            assert!(!r.is_error(), "{r}");
        }
        c.cmd(&["XGROUP", "CREATE", &key, "g1", "0"]);
        c.cmd(&["xgroup", "create", &key, "g2", "$", "ENTRIESREAD", "3"]);
        c.cmd(&["XREADGROUP", "GROUP", "g1", "alice", "COUNT", "10", "STREAMS", &key, ">"]);
        c.cmd(&["XREADGROUP", "GROUP", "g1", "bob", "NOACK", "COUNT", "3", "STREAMS", &key, ">"]);
        c.cmd(&["XREADGROUP", "GROUP", "g1", "carol", "COUNT", "5", "STREAMS", &key, ">"]);
        let pend = c.cmd(&["XPENDING", &key, "g1", "-", "+", "3"]);
        let ids: Vec<String> = pend.as_array().iter().map(|e| e.as_array()[0].text()).collect();
        if let Some(id) = ids.first() {
            c.cmd(&["XDEL", &key, id]);
        }
        let mut claim = vec!["XCLAIM".to_string(), key.clone(), "g1".into(), "dave".into(), "0".into()];
        claim.extend(ids.iter().cloned());
        claim.extend(["RETRYCOUNT".into(), "4".into()]);
        c.cmd(&claim);
        c.cmd(&["XAUTOCLAIM", &key, "g1", "erin", "0", "0-0", "COUNT", "2"]);
        c.cmd(&["XACK", &key, "g1", ids.last().map(|s| s.as_str()).unwrap_or("1-0")]);
        c.cmd(&["XGROUP", "CREATECONSUMER", &key, "g2", "idle-one"]);
        c.cmd(&["XGROUP", "SETID", &key, "g2", "5-0", "ENTRIESREAD", "4"]);
        c.cmd(&["XTRIM", &key, "MAXLEN", "=", "33"]);
        c.cmd(&["XTRIM", &key, "MAXLEN", "~", "25"]);
        c.cmd(&["XADD", &key, "MAXLEN", "~", "20", "100-1", "f", "trimmed"]);
        c.cmd(&["XADD", &key, "MINID", "~", "10", "101-1", "f", "trimmed"]);
        c.cmd(&["XGROUP", "DELCONSUMER", &key, "g1", "carol"]);
        c.cmd(&["XSETID", &key, "99999999999999-0", "ENTRIESADDED", "1000", "MAXDELETEDID", "3-0"]);
        let ev = vec!["EVAL".to_string(), "return redis.call('XADD', KEYS[1], '*', 'from', 'lua')".into(), "1".into(), key.clone()];
        c.cmd(&ev);
        c.cmd(&["MULTI"]);
        c.cmd(&["XADD", &key, "*", "in", "multi"]);
        c.cmd(&["XREADGROUP", "GROUP", "g2", "frank", "STREAMS", &key, ">"]);
        c.cmd(&["EXEC"]);
        c.cmd(&["FCALL", "xaddrange", "1", &key, "*", "from", "function"]);
    }
    c.cmd(&["XGROUP", "DESTROY", "r2", "g2"]);
    c.cmd(&["XADD", "gone", "1-1", "f", "v"]);
    c.cmd(&["DEL", "gone"]);
    if clock_ids {
        for i in 0..30 {
            c.cmd(&["XADD", "auto", "MAXLEN", "~", "10", "*", "i", &i.to_string()]);
        }
        c.cmd(&["XGROUP", "CREATE", "auto", "g", "0"]);
        c.cmd(&["XREADGROUP", "GROUP", "g", "c", "COUNT", "4", "STREAMS", "auto", ">"]);
        c.cmd(&["XAUTOCLAIM", "auto", "g", "d", "0", "0-0", "COUNT", "2"]);
    }
}

/// Per key: TYPE, OBJECT ENCODING (module or built-in value), XRANGE, XINFO STREAM FULL (exact
/// bytes), DEBUG DIGEST-VALUE; and the db's DBSIZE and DEBUG DIGEST.
fn snapshot(c: &mut Conn, keys: &[&str]) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for k in keys {
        v.push((format!("TYPE {k}"), c.raw(&["TYPE", k])));
        v.push((format!("OBJECT ENCODING {k}"), c.raw(&["OBJECT", "ENCODING", k])));
        v.push((format!("XRANGE {k}"), c.raw(&["XRANGE", k, "-", "+"])));
        v.push((format!("XINFO STREAM {k} FULL"), c.raw(&["XINFO", "STREAM", k, "FULL"])));
        v.push((format!("DEBUG DIGEST-VALUE {k}"), c.raw(&["DEBUG", "DIGEST-VALUE", k])));
    }
    v.push(("DBSIZE".into(), c.raw(&["DBSIZE"])));
    v.push(("DEBUG DIGEST".into(), c.raw(&["DEBUG", "DIGEST"])));
    v
}

/// A snapshot with the clock fields of XINFO STREAM FULL classified (`NOW`...), TYPE, OBJECT
/// ENCODING and the digests left out: for comparing a built-in server with a module server.
fn content(c: &mut Conn, keys: &[&str]) -> Vec<(String, Vec<u8>)> {
    snapshot(c, keys)
        .into_iter()
        .filter(|(l, _)| l.starts_with("XRANGE") || l.starts_with("XINFO"))
        .map(|(l, raw)| {
            let args: Vec<&str> = l.split(' ').collect();
            let n = mask(&raw, &args.iter().map(|s| s.to_string()).collect::<Vec<_>>(), 0);
            (l, n)
        })
        .collect()
}

/// XINFO STREAM FULL with the consumers' `seen-time` and `active-time` (7.2) removed: a replica
/// sets them from its own clock when it replays XCLAIM / XGROUP commands (the built-in does the
/// same).
fn without_seen_time(raw: &[u8]) -> Vec<u8> {
    if raw.first() != Some(&b'*') && raw.first() != Some(&b'%') {
        return raw.to_vec();
    }
    let mut n = Node::parse(raw);
    if let Some(groups) = n.field_mut("groups") {
        for g in groups.kids.iter_mut() {
            if let Some(cs) = g.field_mut("consumers") {
                for c in cs.kids.iter_mut() {
                    for f in ["seen-time", "active-time"] {
                        if let Some(v) = c.field_mut(f) {
                            v.mark("SEEN".into());
                        }
                    }
                }
            }
        }
    }
    n.to_bytes()
}

/// The (group, entries-read, lag) triples of XINFO STREAM FULL.
fn entries_read(raw: &[u8]) -> Vec<String> {
    let n = Node::parse(raw);
    let mut v = Vec::new();
    if let Some(groups) = n.field("groups") {
        for g in &groups.kids {
            let f = |name: &str| g.field(name).map(|x| escape(&x.to_bytes())).unwrap_or_default();
            v.push(format!("{} entries-read {} lag {}", f("name"), f("entries-read"), f("lag")));
        }
    }
    v
}

fn without_entries_read(raw: &[u8]) -> Vec<u8> {
    if raw.first() != Some(&b'*') && raw.first() != Some(&b'%') {
        return raw.to_vec();
    }
    let mut n = Node::parse(raw);
    if let Some(groups) = n.field_mut("groups") {
        for g in groups.kids.iter_mut() {
            for f in ["entries-read", "lag"] {
                if let Some(v) = g.field_mut(f) {
                    *v = Node::parse(b"+MASKED\r\n");
                }
            }
        }
    }
    n.to_bytes()
}

fn assert_same_snap(what: &str, x: &[(String, Vec<u8>)], y: &[(String, Vec<u8>)]) {
    let diffs: Vec<String> = x
        .iter()
        .zip(y.iter())
        .filter(|(a, b)| a != b)
        .map(|((l, a), (_, b))| format!("  {l}\n    first:  {}\n    second: {}", escape(a), escape(b)))
        .collect();
    assert!(diffs.is_empty(), "{what}: {} difference(s):\n{}", diffs.len(), diffs.join("\n"));
}

/// Reads every file of the AOF (7.0: a directory with base and incr files).
fn read_aof(dir: &std::path::Path) -> Vec<u8> {
    let mut out = Vec::new();
    let sub = dir.join("appendonlydir");
    let mut files: Vec<_> = std::fs::read_dir(&sub).unwrap_or_else(|e| panic!("{}: {e}", sub.display())).map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files {
        out.extend(std::fs::read(&f).unwrap());
    }
    out
}

/// Command names (argv[0]) of a stream of RESP arrays (AOF or replication stream).
fn command_names(mut b: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    while !b.is_empty() {
        if b[0] != b'*' {
            // Not a command (e.g. an inline PING "\n" in the replication stream): skip a line.
            match b.iter().position(|&c| c == b'\n') {
                Some(p) => {
                    b = &b[p + 1..];
                    continue;
                }
                None => break,
            }
        }
        let line_end = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let n: usize = std::str::from_utf8(&b[1..line_end]).unwrap().parse().unwrap();
        b = &b[line_end + 2..];
        for i in 0..n {
            let le = b.windows(2).position(|w| w == b"\r\n").unwrap();
            let len: usize = std::str::from_utf8(&b[1..le]).unwrap().parse().unwrap();
            let arg = &b[le + 2..le + 2 + len];
            if i == 0 {
                names.push(String::from_utf8_lossy(arg).into_owned());
            }
            b = &b[le + 2 + len + 2..];
        }
    }
    names
}

fn name_counts(names: &[String]) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for n in names {
        *m.entry(n.to_ascii_uppercase()).or_insert(0) += 1;
    }
    m
}

/// Four servers: A (plain) with its replica A', B (module, `takeover yes`, appendonly without
/// RDB preamble) with its replica B' (module, `takeover yes`). The same workload on A and B.
///
/// - A vs B: same content (XRANGE, XINFO STREAM FULL with clock fields classified);
/// - A' vs B': the same, except the groups' entries-read / lag: Redis 7.0 does not replicate
///   them (XREADGROUP propagates as XCLAIM ... LASTID), the module does (it propagates the
///   group position with ENTRIESREAD, as Redis 7.2 does), so B' matches B there, not A';
/// - B vs B': TYPE, XRANGE, XINFO STREAM FULL, DEBUG DIGEST-VALUE identical, except the
///   consumers' seen-time (a replica's own clock, as for the built-in);
/// - B's AOF and the replication stream read by a raw `SYNC` client contain the standard names
///   (XADD, XCLAIM, XGROUP...), never XS.*; so does the AOF after BGREWRITEAOF.
#[test]
fn takeover_replica_and_aof() {
    let a = Server::start_plain();
    let a2 = Server::replica_of(&a);
    let b = Server::builder().module_args(&["takeover", "yes"]).arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "no").start();
    let b2 = Server::replica_of(&b);
    let (mut ca, mut ca2, mut cb, mut cb2) = (a.conn(), a2.conn(), b.conn(), b2.conn());
    wait_persistence_idle(&mut cb, Duration::from_secs(10));
    for c in [&mut ca, &mut cb] {
        via::load_functions(c);
    }
    // A raw replication client on B: SYNC now, read the command stream later.
    let mut sync = std::net::TcpStream::connect(("127.0.0.1", b.port())).unwrap();
    {
        use std::io::Write;
        sync.write_all(b"*1\r\n$4\r\nSYNC\r\n").unwrap();
    }
    let rng = Rng::from_env("takeover_replica_and_aof");
    replicated_workload(&mut ca, &mut rng.clone(), false);
    replicated_workload(&mut cb, &mut rng.clone(), true);
    wait_offsets(&mut ca, &mut ca2);
    wait_offsets(&mut cb, &mut cb2);
    let keys = ["r0", "r1", "r2", "gone"];

    // The module serves like the built-in, on the primaries and on the replicas.
    assert_same_snap("A vs B (primaries)", &content(&mut ca, &keys), &content(&mut cb, &keys));
    let no_er = |v: Vec<(String, Vec<u8>)>| -> Vec<(String, Vec<u8>)> { v.into_iter().map(|(l, r)| (l, without_entries_read(&r))).collect() };
    assert_same_snap("A' vs B' (replicas; entries-read / lag aside)", &no_er(content(&mut ca2, &keys)), &no_er(content(&mut cb2, &keys)));

    // B vs its replica: identical but for the seen-times.
    let all = ["r0", "r1", "r2", "gone", "auto"];
    let strip = |v: &[(String, Vec<u8>)]| -> Vec<(String, Vec<u8>)> { v.iter().map(|(l, r)| (l.clone(), without_seen_time(r))).collect() };
    assert_same_snap("B vs B' (replica)", &strip(&snapshot(&mut cb, &all)), &strip(&snapshot(&mut cb2, &all)));
    assert!(is_module_stream(&mut cb2, "r0"));
    for k in keys {
        let info = |c: &mut Conn| entries_read(&c.raw(&["XINFO", "STREAM", k, "FULL"]));
        let (ea, ea2) = (info(&mut ca), info(&mut ca2));
        if ea != ea2 {
            report(&format!(
                "takeover_replica_and_aof: {k}: the built-in replica's entries-read / lag differ from its primary's (Redis 7.0): primary {ea:?} replica {ea2:?}"
            ));
        }
    }

    // B's AOF and replication stream carry the module's names (XS.*), never the standard stream
    // names: Redis 7.0 replays the AOF without the command filter, so a logged XADD would be run
    // by the built-in at the next start (see `takeover_aof_restart`).
    let std_names = ["XADD", "XCLAIM", "XGROUP", "XSETID", "XTRIM", "XDEL", "XACK"];
    wait_persistence_idle(&mut cb, Duration::from_secs(10));
    let wanted = ["XS.ADD", "XS.CLAIM", "XS.GROUP", "XS.SETID", "XS.TRIM", "XS.DEL", "XS.ACK"];
    // With appendfsync everysec a write may wait behind a running fsync (up to 2 s): read the
    // AOF again until every name is there, or 5 s have passed.
    let t0 = std::time::Instant::now();
    let names = loop {
        let names = name_counts(&command_names(&read_aof(b.dir())));
        if wanted.iter().all(|w| names.contains_key(*w)) || t0.elapsed() > Duration::from_secs(5) {
            break names;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    report(&format!("takeover AOF command names: {names:?}"));
    for want in wanted {
        assert!(names.contains_key(want), "no {want} in the AOF: {names:?}");
    }
    for n in std_names {
        assert!(!names.contains_key(n), "{n} (a built-in name) in the AOF: {names:?}");
    }

    // The replication stream seen by the SYNC client.
    let stream = read_sync_stream(&mut sync, &mut cb);
    let snames = name_counts(&command_names(&stream));
    report(&format!("takeover replication stream command names: {snames:?}"));
    for want in ["XS.ADD", "XS.CLAIM", "XS.GROUP"] {
        assert!(snames.contains_key(want), "no {want} in the replication stream: {snames:?}");
    }
    for n in std_names {
        assert!(!snames.contains_key(n), "{n} (a built-in name) in the replication stream: {snames:?}");
    }
    drop(sync);

    // AOF rewrite: the module's names in the new base file too.
    assert!(!cb.cmd(&["BGREWRITEAOF"]).is_error());
    std::thread::sleep(Duration::from_millis(50));
    wait_persistence_idle(&mut cb, Duration::from_secs(20));
    let names = name_counts(&command_names(&read_aof(b.dir())));
    report(&format!("takeover AOF after BGREWRITEAOF: {names:?}"));
    for want in ["XS.ADD", "XS.SETID", "XS.GROUP", "XS.CLAIM"] {
        assert!(names.contains_key(want), "no {want} in the rewritten AOF: {names:?}");
    }
    for n in std_names {
        assert!(!names.contains_key(n), "{n} (a built-in name) in the rewritten AOF: {names:?}");
    }
}

/// A restart of B replays its AOF: the data must come back as module streams, complete. (On
/// Redis 7.0 AOF loading runs commands without the command filter, which is why the module logs
/// its own names.) Both AOF forms: with the RDB preamble (the default: only writes after the last
/// rewrite are replayed as commands) and without. The same workload runs on a plain server A with
/// the same AOF settings: after both restart, B's content equals A's (an AOF rewrite drops pending
/// entries whose stream entry was deleted, on both), every key is still a module stream, and no
/// entry was lost.
#[test]
fn takeover_aof_restart() {
    let mut failures = Vec::new();
    for preamble in ["yes", "no"] {
        let mut servers = Vec::new();
        for takeover in [false, true] {
            let mut bld = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", preamble);
            bld = if takeover { bld.module_args(&["takeover", "yes"]) } else { bld.no_module() };
            servers.push(bld.start());
        }
        let all = ["r0", "r1", "r2", "auto", "newkey"];
        // `auto` has clock IDs: compared across B's restart only.
        let explicit = ["r0", "r1", "r2", "newkey"];
        let rng = Rng::from_env("takeover_aof_restart");
        let mut before_ranges = Vec::new();
        let mut before_groups: Vec<Vec<u8>> = Vec::new();
        for (i, srv) in servers.iter().enumerate() {
            let mut c = srv.conn();
            wait_persistence_idle(&mut c, Duration::from_secs(10));
            via::load_functions(&mut c);
            replicated_workload(&mut c, &mut rng.clone(), true);
            // A rewrite, then more writes (an existing key and a new one) after it.
            assert!(!c.cmd(&["BGREWRITEAOF"]).is_error());
            std::thread::sleep(Duration::from_millis(50));
            wait_persistence_idle(&mut c, Duration::from_secs(20));
            for l in [
                "XADD r0 99999999999999-100 after rewrite",
                "XADD newkey 1-1 f created-after-rewrite",
                "XGROUP CREATE newkey g 0",
                "XREADGROUP GROUP g c STREAMS newkey >",
            ] {
                let r = c.cmd(&argv(l));
                assert!(!r.is_error(), "{l}: {r}");
            }
            if i == 1 {
                before_ranges = all.iter().map(|k| c.raw(&["XRANGE", k, "-", "+"])).collect();
                before_groups = explicit.iter().map(|k| c.raw(&["XINFO", "GROUPS", k])).collect();
            }
        }
        for srv in servers.iter_mut() {
            srv.restart();
        }
        let mut ca = servers[0].conn();
        let mut cb = servers[1].conn();
        for (k, before) in all.iter().zip(&before_ranges) {
            if !is_module_stream(&mut cb, k) {
                let t = cb.raw(&["OBJECT", "ENCODING", k]);
                failures.push(format!("aof-use-rdb-preamble {preamble}: {k} is not a module stream after restart (OBJECT ENCODING {})", escape(&t)));
            }
            let after = cb.raw(&["XRANGE", k, "-", "+"]);
            if &after != before {
                failures.push(format!("aof-use-rdb-preamble {preamble}: XRANGE {k} changed across the restart"));
            }
        }
        // Groups (entries-read included) survive on the module side. Only with the RDB preamble:
        // a rewrite to commands drops pending entries whose stream entry was deleted (and a
        // consumer left with none), exactly as the built-in's (compared above).
        for (k, before) in explicit.iter().zip(&before_groups).filter(|_| preamble == "yes") {
            let after = cb.raw(&["XINFO", "GROUPS", k]);
            if &after != before {
                failures.push(format!(
                    "aof-use-rdb-preamble {preamble}: XINFO GROUPS {k} changed across the restart:\n    before: {}\n    after:  {}",
                    trunc(&escape(before), 300),
                    trunc(&escape(&after), 300)
                ));
            }
        }
        // entries-read / lag are masked: the built-in's AOF loses entries-read (it logs `>` reads
        // as XCLAIM only, redis#12898), the module's keeps it (checked against B's own state below).
        let (x, y) = (mask_group_counters(content(&mut ca, &explicit)), mask_group_counters(content(&mut cb, &explicit)));
        let diffs: Vec<String> = x
            .iter()
            .zip(y.iter())
            .filter(|(p, q)| p != q)
            .map(|((l, p), (_, q))| format!("  {l}\n    built-in: {}\n    module:   {}", trunc(&escape(p), 300), trunc(&escape(q), 300)))
            .collect();
        if !diffs.is_empty() {
            let log: Vec<String> =
                servers[1].log().lines().filter(|l| l.contains("CRITICAL") || l.contains("DB loaded from")).map(|l| format!("    {l}")).collect();
            failures.push(format!(
                "aof-use-rdb-preamble {preamble}: {} difference(s) between built-in and module after a restart from the AOF:\n{}\n  module server log:\n{}",
                diffs.len(),
                diffs.iter().take(8).cloned().collect::<Vec<_>>().join("\n"),
                log.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// XINFO STREAM FULL with each group's entries-read and lag replaced by a marker.
fn mask_group_counters(v: Vec<(String, Vec<u8>)>) -> Vec<(String, Vec<u8>)> {
    v.into_iter()
        .map(|(l, raw)| {
            if !l.starts_with("XINFO STREAM") || (raw.first() != Some(&b'*') && raw.first() != Some(&b'%')) {
                return (l, raw);
            }
            let mut n = Node::parse(&raw);
            if let Some(groups) = n.field_mut("groups") {
                for g in groups.kids.iter_mut() {
                    for f in ["entries-read", "lag"] {
                        if let Some(x) = g.field_mut(f) {
                            *x = Node { t: b'+', head: b"MASKED".to_vec(), blob: None, kids: Vec::new() };
                        }
                    }
                }
            }
            (l, n.to_bytes())
        })
        .collect()
}

/// DEBUG DIGEST-VALUE of B's replica equals B's after consumer-group reads. (The built-in's
/// digest ignores the group state, so A and A' agree; the module's digest covers entries-read,
/// which 7.0-style propagation does not carry.)
#[test]
fn takeover_replica_digest() {
    let b = start_takeover();
    let b2 = Server::replica_of(&b);
    let (mut cb, mut cb2) = (b.conn(), b2.conn());
    for l in ["XADD k 1-1 f v", "XADD k 2-1 f v", "XGROUP CREATE k g 0", "XREADGROUP GROUP g alice COUNT 1 STREAMS k >"] {
        assert!(!cb.cmd(&argv(l)).is_error(), "{l}");
    }
    wait_offsets(&mut cb, &mut cb2);
    let d = |c: &mut Conn| c.cmd(&["DEBUG", "DIGEST-VALUE", "k"]).as_array()[0].text();
    let g = |c: &mut Conn| format!("{}", c.cmd(&["XINFO", "GROUPS", "k"]));
    let (db, db2) = (d(&mut cb), d(&mut cb2));
    assert_eq!(
        db,
        db2,
        "DEBUG DIGEST-VALUE k: primary {db} replica {db2}\n  XINFO GROUPS primary: {}\n  XINFO GROUPS replica: {}",
        g(&mut cb),
        g(&mut cb2)
    );
}

/// Reads what the master sent to a `SYNC` client: the RDB payload (`$<len>` then the bytes,
/// or the diskless `$EOF:<mark>` form), then the commands until a marker write shows up.
fn read_sync_stream(sock: &mut std::net::TcpStream, primary: &mut Conn) -> Vec<u8> {
    // A marker command after the workload; read until it arrives.
    primary.cmd(&["SET", "sync-marker", "1"]);
    let mut buf = Vec::new();
    sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The RDB payload is a bulk string without the trailing CRLF: read the socket by hand.
    use std::io::Read;
    let t0 = Instant::now();
    let mut tmp = [0u8; 65536];
    loop {
        match sock.read(&mut tmp) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e) => panic!("reading the SYNC stream: {e}"),
        }
        if find(&buf, b"sync-marker").is_some() {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no marker in the SYNC stream");
    }
    // Skip newlines (keep-alives) and the payload.
    let mut i = 0;
    while i < buf.len() && buf[i] == b'\n' {
        i += 1;
    }
    assert_eq!(buf[i], b'$', "SYNC: expected a bulk payload, got {}", escape(&buf[i..(i + 40).min(buf.len())]));
    let le = i + find(&buf[i..], b"\r\n").unwrap();
    let head = std::str::from_utf8(&buf[i + 1..le]).unwrap().to_string();
    let rest = if let Some(mark) = head.strip_prefix("EOF:") {
        let start = le + 2;
        let end = start + find(&buf[start..], mark.as_bytes()).unwrap() + mark.len();
        &buf[end..]
    } else {
        let n: usize = head.parse().unwrap();
        &buf[le + 2 + n..]
    };
    // Cut at the marker command.
    let cut = find(rest, b"*3\r\n$3\r\nSET\r\n$11\r\nsync-marker").unwrap_or(rest.len());
    rest[..cut].to_vec()
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

// =============================================================================================
// ACL
// =============================================================================================

/// Runs each of `cmds` as a user with ACL `rules` on both servers (each on fresh data: `acl:s`
/// with one entry and group `g`, prepared by the default user) and returns the differences.
fn acl_diffs(a: &Server, b: &Server, rules: &[&str], cmds: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut replies: Vec<Vec<Vec<u8>>> = Vec::new();
    for (side, srv) in [a, b].into_iter().enumerate() {
        let mut admin = srv.conn();
        admin.cmd(&["ACL", "DELUSER", "tester"]);
        let mut setuser = vec!["ACL", "SETUSER", "tester", "on", ">pw"];
        setuser.extend(rules.iter().copied());
        let r = admin.cmd(&setuser);
        assert_eq!(r, Reply::Simple("OK".into()), "ACL SETUSER {rules:?}: {r}");
        let mut c = srv.conn();
        assert_eq!(c.cmd(&["AUTH", "tester", "pw"]), Reply::Simple("OK".into()));
        let mut v = Vec::new();
        for l in cmds {
            // Each command on the same fresh data.
            admin.cmd(&["FLUSHALL"]);
            admin.cmd(&["XADD", "acl:s", "1-1", "f", "v"]);
            admin.cmd(&["XGROUP", "CREATE", "acl:s", "g", "0"]);
            let args = argv(l);
            v.push(mask(&c.raw(&args), &args, side));
        }
        replies.push(v);
    }
    for (i, l) in cmds.iter().enumerate() {
        if replies[0][i] != replies[1][i] {
            out.push(format!("  user {rules:?}: {l}\n    A: {}\n    B: {}", escape(&replies[0][i]), escape(&replies[1][i])));
        }
    }
    out
}

/// ACL denials written for the standard names keep denying in takeover mode: `-xadd`,
/// `-xgroup|destroy`, `-xtrim` and a read-only recipe `+@all -@write`. (Redis checks the ACL
/// after the command filter, i.e. against XS.ADD, which no such rule names and which is in no
/// category on 7.0; the module can re-check the standard command itself with
/// RM_ACLCheckCommandPermissions, which evaluates the built-in's name and categories.)
/// Key permissions (`%R~` / `%W~`) follow the key specs and already agree.
#[test]
fn takeover_acl_denials() {
    let a = Server::start_plain();
    let b = start_takeover();
    let mut diffs = Vec::new();
    diffs.extend(acl_diffs(
        &a,
        &b,
        &["~*", "&*", "+@all", "-xadd", "-xgroup|destroy", "-xtrim"],
        &["XADD acl:s 2-1 f v", "xadd acl:s 2-2 f v", "XGROUP DESTROY acl:s g", "XTRIM acl:s MAXLEN 0", "XLEN acl:s", "XRANGE acl:s - +"],
    ));
    diffs.extend(acl_diffs(
        &a,
        &b,
        &["~*", "&*", "+@all", "-@write"],
        &["XADD acl:s 3-1 f v", "XDEL acl:s 1-1", "XGROUP CREATE acl:s g2 0", "XSETID acl:s 5-0", "XRANGE acl:s - +"],
    ));
    diffs.extend(acl_diffs(
        &a,
        &b,
        &["%R~acl:*", "%W~w:*", "+@all"],
        &["XADD acl:s 4-1 f v", "XRANGE acl:s - +", "XADD w:1 1-1 f v", "XRANGE w:1 - +", "XINFO STREAM w:1"],
    ));
    assert!(
        diffs.is_empty(),
        "ACL denials on the standard names: {} difference(s) between the built-in and takeover:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// ACL grants by standard name or category (`+xlen`, `+@stream`, `+@read`): Redis checks XS.LEN,
/// which such a user may not run, before the module sees the call; and on 7.0 module commands
/// cannot join categories (COMPAT.md section 5). A known limitation (users of takeover mode
/// must also grant the XS.* names); run with `--ignored` to see it.
#[test]
#[ignore = "Redis 7.0: grants of XADD or @stream do not cover XS.* (known limitation)"]
fn takeover_acl_grants() {
    let a = Server::start_plain();
    let b = start_takeover();
    let mut diffs = Vec::new();
    diffs.extend(acl_diffs(
        &a,
        &b,
        &["~*", "-@all", "+xlen", "+xrange", "+xreadgroup"],
        &["XLEN acl:s", "XRANGE acl:s - +", "XREADGROUP GROUP g c STREAMS acl:s >"],
    ));
    diffs.extend(acl_diffs(&a, &b, &["~*", "+@stream"], &["XADD acl:s 2-1 f v", "XLEN acl:s", "XINFO STREAM acl:s"]));
    diffs.extend(acl_diffs(&a, &b, &["~*", "+@read"], &["XRANGE acl:s - +"]));
    assert!(diffs.is_empty(), "ACL grants: {} difference(s):\n{}", diffs.len(), diffs.join("\n"));
}
