//! Takeover mode and the tools that look at types: `TYPE key` answers `stream` for the module's
//! streams, `SCAN cursor [MATCH p] [COUNT n] TYPE stream` returns them as well as built-in
//! streams with the built-in's cursor walk, and `redis-cli --bigkeys` / `--memkeys` list them.
//!
//! - `takeover_type_like_builtin`: TYPE of every kind of key (module stream, built-in stream,
//!   string, list, set, zset, hash, missing), its arity errors, plainly, in MULTI, from EVAL and
//!   FCALL, RESP2 and RESP3: byte for byte the plain server's replies.
//! - `takeover_scan_type_stream`: >1000 keys of mixed types (module and built-in streams):
//!   complete cursor iterations with TYPE stream and MATCH / COUNT return every stream exactly
//!   once; each step has the cursor of the same SCAN without TYPE and its stream keys; SCAN
//!   errors, other TYPE values, HSCAN/SSCAN/ZSCAN, SCAN from EVAL as on the plain server.
//! - `takeover_bigkeys_memkeys`: redis-cli --bigkeys / --memkeys count and name our streams.

mod common;

use common::*;
use std::collections::BTreeSet;
use std::process::Command;

/// Runs a case one way (plainly, in MULTI, from a script) and returns the raw replies.
type PathFn<'a> = Box<dyn Fn(&mut Conn) -> Vec<u8> + 'a>;

fn takeover() -> Server {
    Server::builder().module_args(&["takeover", "yes"]).start()
}

fn split(line: &str) -> Vec<String> {
    line.split(' ').filter(|t| !t.is_empty()).map(String::from).collect()
}

/// One key of each kind on a server; with `builtin_stream` exported to the built-in type on the
/// takeover server (XS.EXPORT).
fn kinds(c: &mut Conn, takeover: bool) {
    for line in ["FLUSHALL", "XADD ours 1-1 f v", "XADD native 1-1 f v", "SET str v", "RPUSH list a", "SADD set a", "ZADD zset 1 a", "HSET hash f v"]
    {
        let r = c.cmd(&split(line));
        assert!(!r.is_error(), "{line}: {r}");
    }
    if takeover {
        assert_eq!(c.cmd(&["XS.EXPORT", "native"]), Reply::Int(1));
        // The stream the module serves, and the built-in one next to it.
        assert_eq!(c.cmd(&["XS.TYPE", "ours"]), Reply::Simple("stream".into()));
        assert_eq!(c.cmd(&["OBJECT", "ENCODING", "native"]), Reply::Bulk(b"stream".to_vec()));
    }
}

#[test]
fn takeover_type_like_builtin() {
    let a = Server::start_plain();
    let b = takeover();
    let lib = "#!lua name=xtypes\nredis.register_function('xcall', function(keys, args) return redis.call(unpack(args)) end)";
    let cases: Vec<Vec<String>> = [
        "TYPE ours",
        "type ours",
        "TyPe native",
        "TYPE str",
        "TYPE list",
        "TYPE set",
        "TYPE zset",
        "TYPE hash",
        "TYPE nokey",
        "TYPE",
        "TYPE ours extra",
    ]
    .iter()
    .map(|l| split(l))
    .collect();
    let mut diffs = Vec::new();
    let mut n = 0;
    for resp3 in [false, true] {
        let (mut ca, mut cb) = (a.conn(), b.conn());
        if resp3 {
            ca.hello3();
            cb.hello3();
        }
        for (c, t) in [(&mut ca, false), (&mut cb, true)] {
            kinds(c, t);
            assert!(!c.cmd(&["FUNCTION", "LOAD", "REPLACE", lib]).is_error());
        }
        for args in &cases {
            let paths: [(&str, PathFn); 5] = [
                ("plain", Box::new(|c: &mut Conn| c.raw(args))),
                (
                    "MULTI",
                    Box::new(|c: &mut Conn| {
                        let mut out = c.raw(&["MULTI"]);
                        out.extend(c.raw(args));
                        out.extend(c.raw(&["EXEC"]));
                        out
                    }),
                ),
                (
                    "EVAL call",
                    Box::new(|c: &mut Conn| {
                        let mut v: Vec<String> = vec!["EVAL".into(), "return redis.call(unpack(ARGV))".into(), "0".into()];
                        v.extend(args.iter().cloned());
                        c.raw(&v)
                    }),
                ),
                (
                    "EVAL pcall",
                    Box::new(|c: &mut Conn| {
                        let script = "local r = redis.pcall(unpack(ARGV)) if type(r) == 'table' and r.err then return {'pcall', r.err} end return r";
                        let mut v: Vec<String> = vec!["EVAL".into(), script.into(), "0".into()];
                        v.extend(args.iter().cloned());
                        c.raw(&v)
                    }),
                ),
                (
                    "FCALL",
                    Box::new(|c: &mut Conn| {
                        let mut v: Vec<String> = vec!["FCALL".into(), "xcall".into(), "0".into()];
                        v.extend(args.iter().cloned());
                        c.raw(&v)
                    }),
                ),
            ];
            for (name, f) in &paths {
                let (ra, rb) = (f(&mut ca), f(&mut cb));
                n += 1;
                if ra != rb {
                    diffs.push(format!(
                        "  RESP{} {name} {}\n    plain:    {}\n    takeover: {}",
                        if resp3 { 3 } else { 2 },
                        args.join(" "),
                        escape(&ra),
                        escape(&rb)
                    ));
                }
            }
        }
    }
    report(&format!("takeover TYPE: {n} replies compared, {} differ", diffs.len()));
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    // Served by the module, and the module's own name works too.
    let stats = b.conn().cmd(&["INFO", "commandstats"]).text();
    assert!(stats.contains("cmdstat_xs.type:calls="), "{stats}");
    let mut cb = b.conn();
    assert_eq!(cb.cmd(&["XS.TYPE", "str"]), Reply::Simple("string".into()));
    assert_eq!(cb.cmd(&["XS.TYPE", "nokey"]), Reply::Simple("none".into()));
}

/// Everything a complete SCAN iteration returns, with the raw step replies.
fn scan_all(c: &mut Conn, opts: &[&str]) -> (Vec<String>, usize) {
    let mut cursor = "0".to_string();
    let mut keys = Vec::new();
    let mut steps = 0;
    loop {
        let mut args = vec!["SCAN".to_string(), cursor.clone()];
        args.extend(opts.iter().map(|s| s.to_string()));
        let r = c.cmd(&args);
        let v = r.as_array();
        assert_eq!(v.len(), 2, "{r}");
        cursor = v[0].text();
        keys.extend(v[1].as_array().iter().map(|k| k.text()));
        steps += 1;
        if cursor == "0" {
            return (keys, steps);
        }
        assert!(steps < 100_000, "SCAN does not end");
    }
}

/// Waits until the main dict is not rehashing (a complete SCAN then returns every key exactly once).
fn wait_no_rehash(c: &mut Conn) {
    for _ in 0..200 {
        let s = c.cmd(&["DEBUG", "HTSTATS", "0"]).text();
        if !s.contains("rehashing target") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the keyspace dict is still rehashing");
}

#[test]
fn takeover_scan_type_stream() {
    let a = Server::start_plain();
    let b = takeover();
    let (mut ca, mut cb) = (a.conn(), b.conn());
    // 1300 keys: 260 streams (module ones on B, and 60 of them built-in on B too), and strings,
    // hashes, lists, sets, zsets; names `m:` (matched by the MATCH below) or `o:`.
    let mut streams = BTreeSet::new();
    let mut m_streams = BTreeSet::new();
    for c in [&mut ca, &mut cb] {
        c.cmd(&["FLUSHALL"]);
    }
    for i in 0..1300u32 {
        let name = format!("{}:{i}", if i % 3 == 0 { "m" } else { "o" });
        let cmd: Vec<String> = match i % 5 {
            0 => split(&format!("XADD {name} 1-1 f v")),
            1 => split(&format!("SET {name} v")),
            2 => split(&format!("HSET {name} f v")),
            3 => {
                if i % 2 == 0 {
                    split(&format!("RPUSH {name} a"))
                } else {
                    split(&format!("SADD {name} a"))
                }
            }
            _ => split(&format!("ZADD {name} 1 a")),
        };
        for c in [&mut ca, &mut cb] {
            let r = c.cmd(&cmd);
            assert!(!r.is_error(), "{cmd:?}: {r}");
        }
        if i % 5 == 0 {
            streams.insert(name.clone());
            if name.starts_with("m:") {
                m_streams.insert(name.clone());
            }
            if i % 20 == 0 {
                // Built-in streams on B as well.
                assert_eq!(cb.cmd(&["XS.EXPORT", &name]), Reply::Int(1));
            }
        }
    }
    assert!(streams.len() >= 260);
    let builtin_on_b = streams.iter().filter(|k| cb.cmd(&["OBJECT", "ENCODING", k]) == Reply::Bulk(b"stream".to_vec())).count();
    assert!(builtin_on_b >= 60 && builtin_on_b < streams.len(), "{builtin_on_b}");
    wait_no_rehash(&mut ca);
    wait_no_rehash(&mut cb);

    let mut total_steps = 0;
    for (opts, want) in [
        (vec!["TYPE", "stream"], &streams),
        (vec!["TYPE", "STREAM", "COUNT", "7"], &streams),
        (vec!["COUNT", "1", "TYPE", "Stream"], &streams),
        (vec!["COUNT", "100", "MATCH", "m:*", "TYPE", "stream"], &m_streams),
        (vec!["MATCH", "m:*", "TYPE", "stream"], &m_streams),
        (vec!["TYPE", "hash", "TYPE", "stream", "COUNT", "50"], &streams),
    ] {
        for (side, c) in [("plain", &mut ca), ("takeover", &mut cb)] {
            let (keys, steps) = scan_all(c, &opts);
            total_steps += steps;
            let set: BTreeSet<String> = keys.iter().cloned().collect();
            assert_eq!(set.len(), keys.len(), "{side} SCAN {opts:?}: a key returned twice");
            assert_eq!(&set, want, "{side} SCAN {opts:?}: not every stream, or not only streams");
        }
    }
    // Step by step on B: the same cursor as the SCAN without TYPE, and its stream keys.
    for opts in [vec!["COUNT", "13"], vec!["MATCH", "m:*", "COUNT", "40"]] {
        let mut cursor = "0".to_string();
        loop {
            let mut plain = vec!["SCAN".to_string(), cursor.clone()];
            plain.extend(opts.iter().map(|s| s.to_string()));
            let mut typed = plain.clone();
            typed.extend(["TYPE".to_string(), "stream".to_string()]);
            let (u, t) = (cb.cmd(&plain), cb.cmd(&typed));
            let (u, t) = (u.as_array(), t.as_array());
            assert_eq!(u[0], t[0], "cursor after {typed:?}");
            let kept: Vec<Reply> = u[1].as_array().iter().filter(|k| streams.contains(&k.text())).cloned().collect();
            assert_eq!(t[1].as_array(), kept.as_slice(), "{typed:?}");
            cursor = u[0].text();
            if cursor == "0" {
                break;
            }
        }
    }
    // Other types, errors, HSCAN/SSCAN/ZSCAN: the built-in's replies, byte for byte.
    for resp3 in [false, true] {
        if resp3 {
            ca.hello3();
            cb.hello3();
        }
        for line in [
            "SCAN 0 TYPE stream TYPE hash COUNT 100000",
            "SCAN 0 TYPE string COUNT 100000",
            "SCAN 0 MATCH nothing* TYPE stream COUNT 100000",
            "SCAN 0 TYPE",
            "SCAN",
            "SCAN x TYPE stream",
            "SCAN 0 TYPE stream COUNT 0",
            "SCAN 0 TYPE stream COUNT x",
            "SCAN 0 COUNT x TYPE stream",
            "SCAN 0 TYPE stream MATCH",
            "SCAN 0 TYPE stream FOO bar",
            "SCAN 18446744073709551616 TYPE stream",
            "HSCAN o:2 0 TYPE stream",
            "SSCAN o:3 0 TYPE stream",
            "ZSCAN o:4 0 TYPE stream",
            "HSCAN o:2 0",
        ] {
            let args = split(line);
            let (ra, rb) = (ca.raw(&args), cb.raw(&args));
            if line.contains("COUNT 100000") && !line.contains("nothing") {
                // Same keys, in each server's dict order: compare as sets.
                let set = |c: &mut Conn| -> BTreeSet<String> { c.cmd(&args).as_array()[1].as_array().iter().map(|k| k.text()).collect() };
                assert_eq!(set(&mut ca), set(&mut cb), "RESP3={resp3} {line}");
            } else {
                assert_eq!(escape(&ra), escape(&rb), "RESP3={resp3} {line}");
            }
        }
        // From a script, in MULTI.
        let script = "return redis.call('SCAN', ARGV[1], 'TYPE', 'stream', 'COUNT', '100000')";
        let set = |c: &mut Conn, args: &[&str]| -> BTreeSet<String> {
            let r = c.cmd(args);
            let r = if args[0] == "EXEC" { r.as_array()[0].clone() } else { r };
            r.as_array()[1].as_array().iter().map(|k| k.text()).collect()
        };
        for c in [&mut ca, &mut cb] {
            assert_eq!(&set(c, &["EVAL", script, "0", "0"]), &streams);
            assert_eq!(c.cmd(&["MULTI"]), Reply::Simple("OK".into()));
            assert_eq!(c.cmd(&["SCAN", "0", "TYPE", "stream", "COUNT", "100000"]), Reply::Simple("QUEUED".into()));
            assert_eq!(&set(c, &["EXEC"]), &streams);
        }
    }
    report(&format!(
        "takeover SCAN TYPE stream: {} keys, {} streams ({builtin_on_b} built-in on the takeover server), {total_steps} SCAN steps",
        1300,
        streams.len()
    ));
}

fn redis_cli(port: u16, flag: &str) -> String {
    let out = Command::new(redis_tool_bin("redis-cli")).args(["-p", &port.to_string(), flag]).output().expect("redis-cli");
    assert!(out.status.success(), "redis-cli {flag}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn takeover_bigkeys_memkeys() {
    if Command::new(redis_tool_bin("redis-cli")).arg("--version").output().is_err() {
        report("redis-cli not found: takeover_bigkeys_memkeys skipped");
        return;
    }
    let a = Server::start_plain();
    let b = takeover();
    for (s, takeover) in [(&a, false), (&b, true)] {
        let mut c = s.conn();
        c.cmd(&["FLUSHALL"]);
        for i in 1..=300u32 {
            c.cmd(&["XADD", "big", &format!("{i}-1"), "field", "value-value-value"]);
        }
        for k in 0..5u32 {
            c.cmd(&["XADD", &format!("small:{k}"), "1-1", "f", "v"]);
        }
        c.cmd(&["XADD", "native", "1-1", "f", "v"]);
        c.cmd(&["XADD", "native", "2-1", "f", "v"]);
        if takeover {
            assert!(!c.cmd(&["XS.EXPORT", "native"]).is_error());
        }
        c.cmd(&["SET", "str", "some-string-value"]);
        c.cmd(&["HSET", "hash", "f", "v"]);
    }
    let big = redis_cli(b.port(), "--bigkeys");
    let plain_big = redis_cli(a.port(), "--bigkeys");
    // On the takeover server the built-in stream left there (2 entries) is adopted by the XLEN
    // bigkeys sends (xstream.adopt), so it is counted and sized like the others.
    for (out, entries) in [(&plain_big, 307), (&big, 307)] {
        // redis-cli 7.4 dropped the quotes around the key name.
        assert!(
            out.contains("Biggest stream found '\"big\"' has 300 entries") || out.contains("Biggest stream found \"big\" has 300 entries"),
            "{out}"
        );
        assert!(out.contains(&format!("7 streams with {entries} entries")), "{out}");
        assert!(!out.contains("xs-stream"), "{out}");
    }
    let mem = redis_cli(b.port(), "--memkeys");
    assert!(mem.contains("Biggest stream found '\"big\"' has") || mem.contains("Biggest stream found \"big\" has"), "{mem}");
    assert!(mem.contains("7 streams with"), "{mem}");
    assert!(!mem.contains("xs-stream"), "{mem}");
    report(&format!(
        "takeover redis-cli: --bigkeys and --memkeys list the 7 streams\n{}",
        big.lines().filter(|l| l.contains("stream")).collect::<Vec<_>>().join("\n")
    ));
}
