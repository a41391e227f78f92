//! What XS.ADD `*` and approximate trims propagate, on every host of the matrix.
//!
//! On hosts known to pass a command the client's own argv, XS.ADD puts the concrete ID (and an
//! approximate trim's exact threshold) into that argv and propagates it verbatim, as t_stream.c
//! does (src/ffi/ctx.rs, `Ctx::replicate_with`); elsewhere, or with `xstream.argv-rewrite no`,
//! it builds a new command. Either way a replica and the AOF must end with the same streams as
//! the primary. The workload: 20,000 pipelined `XS.ADD *` (plain, `ms-*`, MAXLEN ~, MINID ~,
//! LIMIT, NOMKSTREAM), XS.TRIM ~, 100 adds from EVAL, adds inside MULTI; in takeover mode the
//! same through the standard names. Checked: DEBUG DIGEST-VALUE of every key on the primary,
//! on the replica, and after DEBUG LOADAOF; the AOF holds no `*` or `~` argument.

mod common;

use common::*;
use std::time::Duration;

const KEYS: &[&str] = &["pa", "pb", "pc", "pd"];

/// The command name: the module's, or the standard one in takeover mode.
fn name(takeover: bool, builtin: &str) -> String {
    if takeover {
        builtin.to_string()
    } else {
        xcmd(true, builtin)
    }
}

/// Sends `cmds` pipelined, 500 at a time; returns the replies.
fn pipeline(c: &mut Conn, cmds: &[Vec<Vec<u8>>]) -> Vec<Reply> {
    let mut out = Vec::with_capacity(cmds.len());
    for chunk in cmds.chunks(500) {
        for cmd in chunk {
            c.send(cmd).expect("send");
        }
        for _ in chunk {
            out.push(c.read_reply().expect("reply").0);
        }
    }
    out
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn workload(c: &mut Conn, takeover: bool, rng: &mut Rng) {
    let add = name(takeover, "XADD");
    let trim = name(takeover, "XTRIM");
    let n_adds = env_usize("XSTREAM_PROPAGATION_OPS", 20_000);
    let mut cmds: Vec<Vec<Vec<u8>>> = Vec::with_capacity(n_adds);
    let mut last_ms: u64 = 0;
    for i in 0..n_adds {
        let key = KEYS[rng.below(KEYS.len() as u64) as usize];
        let mut cmd = vec![b(&add), b(key)];
        match rng.weighted(&[60, 12, 8, 5, 5, 5, 5]) {
            0 => {}
            1 => cmd.extend([b("MAXLEN"), b("~"), rng.range(10, 300).to_string().into_bytes()]),
            2 => {
                cmd.extend([b("MAXLEN"), b("~"), rng.range(10, 300).to_string().into_bytes(), b("LIMIT"), rng.range(1, 150).to_string().into_bytes()])
            }
            // MINID ~ a little in the past: whole nodes go.
            3 => {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
                cmd.extend([b("MINID"), b("~"), format!("{}", now.saturating_sub(rng.range(0, 3))).into_bytes()]);
            }
            4 => cmd.push(b("NOMKSTREAM")),
            5 => cmd.extend([b("MAXLEN"), b("="), rng.range(50, 400).to_string().into_bytes()]),
            _ => {
                // `ms-*` on a key of its own, with the ms moving forward now and then.
                if rng.pct(30) {
                    last_ms += 1;
                }
                cmd = vec![b(&add), b("pms"), format!("{}-*", 1_000 + last_ms).into_bytes()];
            }
        }
        if cmd[1] != b"pms" {
            cmd.push(b("*"));
        }
        for f in 0..rng.range(1, 3) {
            cmd.push(format!("f{f}").into_bytes());
            cmd.push(format!("v{i}-{}", rng.below(1000)).into_bytes());
        }
        cmds.push(cmd);
        if i % 1000 == 999 {
            let key = KEYS[rng.below(KEYS.len() as u64) as usize];
            cmds.push(vec![b(&trim), b(key), b("MAXLEN"), b("~"), rng.range(50, 500).to_string().into_bytes()]);
        }
    }
    for (i, r) in pipeline(c, &cmds).iter().enumerate() {
        assert!(!r.is_error(), "{}: {r}", fmt_cmd(&cmds[i]));
    }
    // From scripts: one add per call, and two plus an approximate trim in one call.
    let lua_call = if takeover { "XADD" } else { "XS.ADD" };
    for i in 0..100 {
        let script = if i % 10 == 0 {
            format!(
                "redis.call('{lua_call}', KEYS[1], '*', 'lua', ARGV[1]); \
                 return redis.call('{lua_call}', KEYS[1], 'MAXLEN', '~', '20', '*', 'lua2', ARGV[1])"
            )
        } else {
            format!("return redis.call('{lua_call}', KEYS[1], '*', 'lua', ARGV[1])")
        };
        let key = KEYS[i % KEYS.len()];
        let r = c.cmd(&["EVAL", &script, "1", key, &i.to_string()]);
        assert!(!r.is_error(), "EVAL: {r}");
    }
    // Inside MULTI.
    for i in 0..10 {
        let key = KEYS[i % KEYS.len()];
        assert_eq!(c.cmd(&["MULTI"]), Reply::Simple("OK".into()));
        c.cmd(&[add.as_str(), key, "*", "multi", &i.to_string()]);
        c.cmd(&[add.as_str(), key, "MAXLEN", "~", "30", "*", "multi2", &i.to_string()]);
        c.cmd(&[trim.as_str(), key, "MAXLEN", "~", "100"]);
        let r = c.cmd(&["EXEC"]);
        assert_eq!(r.as_array().len(), 3, "EXEC: {r}");
        assert!(r.as_array().iter().all(|x| !x.is_error()), "EXEC: {r}");
    }
}

fn digests(c: &mut Conn) -> Vec<(String, Reply)> {
    let mut keys: Vec<&str> = KEYS.to_vec();
    keys.push("pms");
    keys.iter().map(|k| (k.to_string(), c.cmd(&["DEBUG", "DIGEST-VALUE", k]))).collect()
}

fn offset(c: &mut Conn) -> String {
    let info = c.cmd(&["INFO", "replication"]).text();
    info.lines().find(|l| l.starts_with("master_repl_offset:")).map(|l| l.trim().to_string()).unwrap_or_default()
}

fn run(what: &str, module_args: &[&str], takeover: bool) {
    let primary = Server::builder().arg("--appendonly", "yes").arg("--aof-use-rdb-preamble", "no").module_args(module_args).start();
    let replica = Server::replica_of(&primary);
    let mut c = primary.conn();
    // Small nodes: approximate trims find whole nodes to cut.
    for conn in [&mut c, &mut replica.conn()] {
        set_node_limits(conn, 10, 0, true);
    }
    let rewrite_on = !module_args.contains(&"argv-rewrite");
    assert_eq!(
        primary.log_contains("propagates through RedisModule_Replicate"),
        false,
        "{what}: the host is not one the module knows (src/ffi/host.rs); log:\n{}",
        primary.log_tail(20)
    );
    let mut rng = Rng::from_env(what);
    workload(&mut c, takeover, &mut rng);

    let w = c.cmd(&["WAIT", "1", "10000"]);
    assert_eq!(w, Reply::Int(1), "{what}: WAIT: {w}; replica log:\n{}", replica.log_tail(30));
    let mut rc = replica.conn();
    let t0 = std::time::Instant::now();
    while offset(&mut c) != offset(&mut rc) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let on_primary = digests(&mut c);
    for (k, d) in &on_primary {
        assert!(!matches!(d, Reply::Nil) && !d.is_error(), "{what}: {k}: DEBUG DIGEST-VALUE {d}");
    }
    assert_eq!(on_primary, digests(&mut rc), "{what}: replica differs from the primary");

    // The AOF holds concrete IDs and exact thresholds only.
    wait_persistence_idle(&mut c, Duration::from_secs(30));
    let aof: Vec<u8> = std::fs::read_dir(primary.dir().join("appendonlydir"))
        .expect("appendonlydir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".incr."))
        .flat_map(|e| std::fs::read(e.path()).unwrap_or_default())
        .collect();
    let adds = aof.windows(8).filter(|w| w.eq_ignore_ascii_case(b"\r\nXS.ADD")).count();
    assert!(adds >= 20_000.min(env_usize("XSTREAM_PROPAGATION_OPS", 20_000)), "{what}: {adds} XS.ADD in the AOF");
    for bad in [&b"\r\n$1\r\n*\r\n"[..], b"\r\n$1\r\n~\r\n", b"-*\r\n"] {
        assert!(!aof.windows(bad.len()).any(|w| w == bad), "{what}: the AOF holds {:?}", String::from_utf8_lossy(bad));
    }
    let r = c.cmd(&["DEBUG", "LOADAOF"]);
    assert_eq!(r, Reply::Simple("OK".into()), "{what}: DEBUG LOADAOF; log:\n{}", primary.log_tail(20));
    assert_eq!(on_primary, digests(&mut c), "{what}: the AOF, loaded again, differs");
    report(&format!(
        "{what}: {} keys equal on primary, replica and AOF reload ({adds} XS.ADD in the AOF; argv rewrite {})",
        on_primary.len(),
        if rewrite_on { "on" } else { "off" }
    ));
}

#[test]
fn propagation_argv_rewrite() {
    run("propagation_argv_rewrite", &[], false);
}

#[test]
fn propagation_argv_rewrite_takeover() {
    run("propagation_argv_rewrite_takeover", &["takeover", "yes"], true);
}

#[test]
fn propagation_without_argv_rewrite() {
    run("propagation_without_argv_rewrite", &["argv-rewrite", "no"], false);
}

/// An approximate trim sent by the primary or the AOF has no work cap (the primary rewrote its
/// threshold exact), as the built-in's (streamParseAddOrTrimArgsOrReply); a client's has the
/// default cap, 100 nodes' worth. `MAXLEN ~ 0` on 30,000 entries in nodes of 100: 10,000 removed
/// for a client, as XTRIM on the built-in; everything from the AOF, XS.TRIM and XS.ADD alike.
/// (XS.ADD asks who sent it only where the cap could bind: `src/commands/add.rs` settle_cap.)
#[test]
fn approximate_trims_from_the_aof_have_no_cap() {
    let mut s = Server::builder().arg("--appendonly", "yes").start();
    let mut c = s.conn();
    for (add, key) in [("XS.ADD", "m"), ("XS.ADD", "t"), ("XS.ADD", "a"), ("XADD", "b")] {
        let cmds: Vec<Vec<Vec<u8>>> = (1..=30_000).map(|i| vec![b(add), b(key), format!("{i}-0").into_bytes(), b("f"), b("v")]).collect();
        assert!(pipeline(&mut c, &cmds).iter().all(|r| !r.is_error()), "{add} {key}");
    }
    // A client: the cap, as the built-in.
    assert_eq!(c.cmd(&["XTRIM", "b", "MAXLEN", "~", "0"]), Reply::Int(10_000));
    assert_eq!(c.cmd(&["XS.TRIM", "m", "MAXLEN", "~", "0"]), Reply::Int(10_000));
    assert_eq!(c.cmd(&["XS.LEN", "m"]), c.cmd(&["XLEN", "b"]));
    // The AOF: no cap. (XS.ADD appends first: 30,001 entries, every node removed.)
    s.run_from_aof(&[&["XS.TRIM", "t", "MAXLEN", "~", "0"], &["XS.ADD", "a", "MAXLEN", "~", "0", "40000-0", "f", "v"]]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["XS.LEN", "t"]), Reply::Int(0), "XS.TRIM from the AOF");
    assert_eq!(c.cmd(&["XS.LEN", "a"]), Reply::Int(0), "XS.ADD from the AOF");
    assert_eq!(c.cmd(&["XS.LEN", "m"]), Reply::Int(20_000), "the client's trim, propagated exact");
    // A client again, on a stream the cap cannot bind (one entry over MAXLEN): one node removed.
    assert_eq!(c.cmd(&["XS.ADD", "m", "MAXLEN", "~", "19900", "40001-0", "f", "v"]), Reply::Bulk(b("40001-0")));
    assert_eq!(c.cmd(&["XS.LEN", "m"]), Reply::Int(19_901));
}
