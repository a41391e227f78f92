//! RDB loading follows `sanitize-dump-payload` (docs/rdb.md, src/ffi/loading.rs).
//!
//! Streams with groups, pending entries and tombstones are DUMPed, one node of
//! each is corrupted behind a valid listpack header (bit flips, special bytes,
//! random windows: the header, the first element and the terminator stay), and
//! the keys are written into an RDB file. Then:
//!
//! - `sanitize-dump-payload no`: the server loads it (headers only, as the
//!   built-in), and every stream command, DUMP, COPY, XS.EXPORT, MEMORY USAGE,
//!   DEBUG DIGEST-VALUE, AOF rewrite and DEBUG RELOAD run on every key: the server
//!   answers each (error replies allowed), never logs an internal error (no panic
//!   reached the fence), and is alive at the end; XS.EXPORT never hands a node
//!   that fails the deep check to the built-in type. RESTORE of each corrupted
//!   payload is deep-checked whatever the config: refused unless the corruption
//!   left a valid stream.
//! - a full sync from that server: a replica under `no` loads it, one under `yes`
//!   refuses it (Redis then runs its RDB check and exits, as for a built-in stream).
//! - `CONFIG SET sanitize-dump-payload yes` then `DEBUG RELOAD NOSAVE`: the same
//!   file is refused (the config is read again when the load starts; DEBUG RELOAD
//!   answers its error and the server lives on), and loads again after `no`.
//! - started with `sanitize-dump-payload yes`: refused at startup.
//!
//! `XSTREAM_SANITIZE_KEYS` (default 300), `XSTREAM_SEED` to replay.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// Reads an RDB length (rdbLoadLen): (value, is an encoded-string marker).
fn get_len(b: &[u8], pos: &mut usize) -> (u64, bool) {
    let first = b[*pos];
    *pos += 1;
    match first >> 6 {
        0 => (u64::from(first & 0x3F), false),
        1 => {
            let v = (u64::from(first & 0x3F) << 8) | u64::from(b[*pos]);
            *pos += 1;
            (v, false)
        }
        2 if first == 0x80 => {
            let v = u32::from_be_bytes(b[*pos..*pos + 4].try_into().unwrap());
            *pos += 4;
            (u64::from(v), false)
        }
        2 => {
            let v = u64::from_be_bytes(b[*pos..*pos + 8].try_into().unwrap());
            *pos += 8;
            (v, false)
        }
        _ => (u64::from(first & 0x3F), true),
    }
}

/// The byte ranges of the node listpacks in a module DUMP body written with
/// `rdbcompression no`: type, module id, then opcode-tagged items
/// (2 = unsigned, 5 = string, 0 = end); node k's listpack is string item 2k+1.
fn node_spans(body: &[u8]) -> Vec<(usize, usize)> {
    let mut pos = 1;
    get_len(body, &mut pos); // module id
    let mut items = Vec::new();
    loop {
        let (op, _) = get_len(body, &mut pos);
        match op {
            0 => break,
            2 => {
                let (v, _) = get_len(body, &mut pos);
                items.push((None, v));
            }
            5 => {
                let (n, enc) = get_len(body, &mut pos);
                assert!(!enc, "rdbcompression no: no encoded strings in a node");
                items.push((Some((pos, pos + n as usize)), 0));
                pos += n as usize;
            }
            op => panic!("module opcode {op}"),
        }
    }
    let nodes = items[0].1 as usize;
    // Encoding 6: key, codec tag (0: a plain listpack follows), node.
    (0..nodes)
        .map(|k| {
            assert_eq!(items[2 + 3 * k].1, 0, "a plain node (compression off)");
            items[3 + 3 * k].0.expect("a node is a string")
        })
        .collect()
}

const SPECIAL: &[u8] = &[0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xE0, 0xEF, 0xF0, 0xF3, 0xF4, 0xF5, 0xFE, 0xFF];

/// Corrupts the body of one node in place (same size): after the header (6
/// bytes) and the first element (the live count, < 128 here: 2 bytes), before
/// the terminator.
fn corrupt(body: &mut [u8], rng: &mut Rng) -> String {
    let spans = node_spans(body);
    let k = rng.below(spans.len() as u64) as usize;
    let (lo, hi) = (spans[k].0 + 8, spans[k].1 - 1);
    if hi <= lo {
        return "none".into();
    }
    let at = |rng: &mut Rng| lo + rng.below((hi - lo) as u64) as usize;
    match rng.below(3) {
        0 => {
            for _ in 0..1 + rng.below(3) {
                let i = at(rng);
                body[i] ^= 1 << rng.below(8);
            }
            format!("node {k}: bit flips")
        }
        1 => {
            for _ in 0..1 + rng.below(2) {
                let i = at(rng);
                body[i] = *rng.pick(SPECIAL);
            }
            format!("node {k}: special bytes")
        }
        _ => {
            let i = at(rng);
            for x in &mut body[i..(i + 1 + rng.below(12) as usize).min(hi)] {
                *x = rng.next_u64() as u8;
            }
            format!("node {k}: random window")
        }
    }
}

/// An RDB file holding `keys` (name, DUMP body) in DB 0.
fn rdb_file(version: u16, keys: &[(String, Vec<u8>)]) -> Vec<u8> {
    // Valkey 9 writes its RDB version 80 as "VALKEY080" (and refuses "REDIS0080").
    let mut f = if version >= 80 { format!("VALKEY{version:03}") } else { format!("REDIS{version:04}") }.into_bytes();
    f.extend_from_slice(&[0xFE, 0x00]); // SELECTDB 0
    for (name, body) in keys {
        f.push(body[0]); // the value's type (module)
        assert!(name.len() < 64);
        f.push(name.len() as u8);
        f.extend_from_slice(name.as_bytes());
        f.extend_from_slice(&body[1..]);
    }
    f.push(0xFF); // EOF
    let crc = crc64(0, &f);
    f.extend_from_slice(&crc.to_le_bytes());
    f
}

/// Varied module streams (several nodes, tombstones, a group with pending
/// entries) and their corrupted DUMP bodies: (name, body, what was done), rdb version.
fn corrupted_keys(rng: &mut Rng, keys: usize) -> (Vec<(String, Vec<u8>, String)>, u16) {
    let src = Server::builder().arg("--rdbcompression", "no").module_args(&["node-max-entries", "8"]).start();
    let mut c = src.conn();
    let mut out = Vec::new();
    let mut version = 0;
    for k in 0..keys {
        let key = format!("s{k}");
        let n = 10 + rng.below(50);
        for i in 0..n {
            let v = match rng.below(4) {
                0 => (i * 7919).to_string(),
                1 => format!("value-{i}-{}", "x".repeat(rng.below(80) as usize)),
                _ => format!("v{i}"),
            };
            let f = if rng.below(5) == 0 { "other" } else { "f" };
            let id = format!("{}-{}", 1000 + i / 2, i % 2);
            assert!(!c.cmd(&["XS.ADD", &key, &id, f, &v, "g", "1"]).is_error());
        }
        c.cmd(&["XS.DEL", &key, "1002-0", "1003-1"]);
        c.cmd(&["XS.GROUP", "CREATE", &key, "g", "0"]);
        c.cmd(&["XS.READGROUP", "GROUP", "g", "alice", "COUNT", "7", "STREAMS", &key, ">"]);
        let payload = c.cmd(&["DUMP", &key]);
        let (body, ver) = dump_split(payload.as_bytes().expect("DUMP")).expect("a valid DUMP");
        version = ver;
        let mut body = body.to_vec();
        let what = corrupt(&mut body, rng);
        out.push((key, body, what));
    }
    (out, version)
}

/// A server this test started: killed (by its pid) if the test ends early.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits for `child` to exit; false if it has not after the deadline.
fn wait_exit(child: &mut Child, secs: u64) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if let Ok(Some(_)) = child.0.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn temp_dir(what: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("xstream-sanitize-{what}-{}-{:?}", std::process::id(), Instant::now()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

const INTERNAL: &str = "xstream internal error";

#[test]
fn rdb_load_follows_sanitize_dump_payload() {
    let keys = env_usize("XSTREAM_SANITIZE_KEYS", 300);
    let mut rng = Rng::from_env("rdb_sanitize");
    let (corrupted, version) = corrupted_keys(&mut rng, keys);
    let file = rdb_file(version, &corrupted.iter().map(|(k, b, _)| (k.clone(), b.clone())).collect::<Vec<_>>());

    // RESTORE is deep-checked whatever the config (here the default, no).
    let plain = Server::start();
    let mut pc = plain.conn();
    // Valkey 9.1.2 has no such config: it deep-checks every payload it loads, whatever the
    // path (valkey-io/valkey#3721; the name is still accepted at startup, as a no-op). The
    // module, finding no value, deep-checks too (src/ffi/loading.rs).
    let config = pc.cmd(&["CONFIG", "GET", "sanitize-dump-payload"]);
    let always_deep = config == Reply::Array(vec![]);
    if !always_deep {
        assert_eq!(config, Reply::Array(vec![Reply::Bulk(b"sanitize-dump-payload".to_vec()), Reply::Bulk(b"no".to_vec())]));
    }
    let mut refused_by_restore = 0;
    for (k, body, _) in &corrupted {
        match pc.cmd(&[b"RESTORE".to_vec(), k.as_bytes().to_vec(), b"0".to_vec(), dump_build(body, version)]) {
            Reply::Simple(s) if s == "OK" => {
                // Accepted by the deep check: a valid stream (the corruption hit a value's bytes).
                assert!(!pc.cmd(&["XS.RANGE", k, "-", "+"]).is_error());
            }
            Reply::Error(e) => {
                assert_eq!(e, "ERR Bad data format", "{k}");
                refused_by_restore += 1;
            }
            r => panic!("RESTORE {k}: {r}"),
        }
    }
    assert!(refused_by_restore > 0, "no corruption broke the deep check: the test proves nothing");
    assert!(!plain.log_contains(INTERNAL));
    drop(plain);

    if always_deep {
        // No 'no' to follow: the RDB is refused as under yes, with or without the old name.
        refused_at_startup(&file, "always", &[]);
        refused_at_startup(&file, "always-no", &["--sanitize-dump-payload", "no"]);
        report(&format!(
            "rdb_sanitize: this host has no sanitize-dump-payload (it deep-checks every load): {keys} keys with a corrupted \
             node refused at startup, with and without --sanitize-dump-payload no; RESTORE refused {refused_by_restore} of the payloads"
        ));
        return;
    }

    // sanitize-dump-payload no: loaded, and every command survives every key.
    let dir = temp_dir("no");
    std::fs::write(dir.join("dump.rdb"), &file).expect("write rdb");
    let Boot::Started(child, port) = boot(&dir, &["--sanitize-dump-payload", "no", "--repl-diskless-sync-delay", "0"]) else {
        panic!("the server refused the RDB under no:\n{}", std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default())
    };
    let mut child = Child(child);
    let mut c = Conn::connect(port);
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(keys as i64));
    let (mut replies, mut errors, mut exported, mut export_refused) = (0usize, 0usize, 0usize, 0usize);
    for (k, _, what) in &corrupted {
        let copy = format!("{k}:copy");
        let cmds: Vec<Vec<String>> = [
            "XS.LEN {k}",
            "XS.RANGE {k} - +",
            "XS.REVRANGE {k} + -",
            "XS.RANGE {k} - + COUNT 3",
            "XS.REVRANGE {k} + - COUNT 3",
            "XS.RANGE {k} 1010-0 1010-0",
            "XS.RANGE {k} 1005 1020",
            "XS.REVRANGE {k} 1020 1005",
            "XS.READ COUNT 5 STREAMS {k} 0",
            "XS.READ STREAMS {k} 1010-1",
            "XS.READGROUP GROUP g bob COUNT 4 STREAMS {k} >",
            "XS.READGROUP GROUP g alice STREAMS {k} 0",
            "XS.READGROUP GROUP g carol NOACK STREAMS {k} >",
            "XS.PENDING {k} g",
            "XS.PENDING {k} g - + 10",
            "XS.PENDING {k} g IDLE 0 - + 10 alice",
            "XS.CLAIM {k} g bob 0 1000-0 1000-1 1001-0 1004-1",
            "XS.CLAIM {k} g bob 0 1001-1 JUSTID",
            "XS.AUTOCLAIM {k} g carol 0 0 COUNT 10",
            "XS.AUTOCLAIM {k} g carol 0 0 COUNT 10 JUSTID",
            "XS.ACK {k} g 1000-0 1002-1",
            "XS.INFO STREAM {k}",
            "XS.INFO STREAM {k} FULL",
            "XS.INFO STREAM {k} FULL COUNT 2",
            "XS.INFO GROUPS {k}",
            "XS.INFO CONSUMERS {k} g",
            "DUMP {k}",
            "MEMORY USAGE {k}",
            "DEBUG DIGEST-VALUE {k}",
            "COPY {k} {copy}",
            "XS.EXPORT {copy}",
            "XS.DEL {k} 1004-0 1007-1 1011-0",
            "XS.TRIM {k} MAXLEN ~ 20",
            "XS.TRIM {k} MINID = 1003-0",
            "XS.TRIM {k} MAXLEN = 15 LIMIT 0",
            "XS.SETID {k} 999999-0",
            "XS.ADD {k} * f v",
            "XS.ADD {k} MAXLEN = 10 * other v",
            "XS.RANGE {k} - +",
            "XS.REVRANGE {k} + -",
            "XS.GROUP SETID {k} g 0",
            "XS.READGROUP GROUP g dave STREAMS {k} >",
        ]
        .iter()
        .map(|t| t.replace("{k}", k).replace("{copy}", &copy).split(' ').map(String::from).collect())
        .collect();
        for cmd in &cmds {
            let r = c.try_cmd(cmd).unwrap_or_else(|e| panic!("{k} ({what}): {}: connection lost: {e}", cmd.join(" ")));
            replies += 1;
            if let Reply::Error(e) = &r {
                assert!(!e.contains(INTERNAL), "{k} ({what}): {}: {e}", cmd.join(" "));
                errors += 1;
            }
            if cmd[0] == "XS.EXPORT" {
                if r.is_error() {
                    assert!(r.text().starts_with("ERR XS.EXPORT: the stream is corrupt"), "{k}: {r}");
                    export_refused += 1;
                } else {
                    // Only a stream valid throughout became a built-in one: C code reads it.
                    exported += 1;
                    assert!(!c.cmd(&["XRANGE", &copy, "-", "+"]).is_error());
                    assert!(!c.cmd(&["XINFO", "STREAM", &copy, "FULL"]).is_error());
                }
            }
        }
        assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()), "{k} ({what})");
    }
    // A full sync of that data: a replica under no loads it as the primary did (its
    // load is a loading state too); one under yes refuses it.
    let replica = Server::builder().arg("--sanitize-dump-payload", "no").start();
    let mut rc = replica.conn();
    assert_eq!(rc.cmd(&["REPLICAOF", "127.0.0.1", &port.to_string()]), Reply::Simple("OK".into()));
    replica.wait_link_up(Duration::from_secs(30));
    assert_eq!(rc.cmd(&["DBSIZE"]), c.cmd(&["DBSIZE"]));
    assert!(!replica.log_contains("refusing stream payload") && !replica.log_contains(INTERNAL));
    drop(replica);
    let strict = Server::builder().arg("--sanitize-dump-payload", "yes").start();
    let mut sc = strict.conn();
    assert_eq!(sc.cmd(&["REPLICAOF", "127.0.0.1", &port.to_string()]), Reply::Simple("OK".into()));
    let t0 = Instant::now();
    while !strict.log_contains("xstream: refusing stream payload") && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(strict.log_contains("xstream: refusing stream payload"), "{}", strict.log_tail(30));
    // (A sync loaded from disk that fails then makes Redis run its RDB check and exit, as
    // it does for a built-in stream refused under yes: the replica is gone or retrying.)
    drop(sc);
    drop(strict);

    // Whole-keyspace paths: AOF rewrite (every entry of every key), save + reload.
    assert!(!c.cmd(&["BGREWRITEAOF"]).is_error());
    let t0 = Instant::now();
    while c.cmd(&["INFO", "persistence"]).text().contains("aof_rewrite_in_progress:1") && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
    assert!(!log.contains("internal error"), "a panic reached the fence:\n{log}");
    report(&format!(
        "rdb_sanitize: {keys} keys with a corrupted node loaded under 'no'; {replies} replies ({errors} errors, 0 internal), \
         XS.EXPORT refused {export_refused} and converted {exported} (valid) copies; RESTORE refused {refused_by_restore} of the payloads"
    ));

    // CONFIG SET yes, then a reload of the same file: refused (read again at load start).
    std::fs::write(dir.join("dump.rdb"), &file).expect("write rdb");
    assert_eq!(c.cmd(&["CONFIG", "SET", "sanitize-dump-payload", "yes"]), Reply::Simple("OK".into()));
    // DEBUG RELOAD runs in a client's context: Redis answers the error and lives on.
    let r = c.cmd(&["DEBUG", "RELOAD", "NOSAVE"]);
    assert!(r.text().starts_with("ERR Error trying to load the RDB dump"), "{r}");
    let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
    assert!(log.contains("xstream: refusing stream payload"), "{log}");
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // And back to no: the same file loads again.
    assert_eq!(c.cmd(&["CONFIG", "SET", "sanitize-dump-payload", "no"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["DEBUG", "RELOAD", "NOSAVE"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(keys as i64));
    let _ = c.try_cmd(&["SHUTDOWN", "NOSAVE"]);
    assert!(wait_exit(&mut child, 30), "SHUTDOWN NOSAVE");
    check_sanitizer_reports(&dir, "rdb_sanitize no");
    let _ = std::fs::remove_dir_all(&dir);

    // Started with yes: refused at startup.
    refused_at_startup(&file, "yes", &["--sanitize-dump-payload", "yes"]);
}

/// A server started on `file` (an RDB with corrupted nodes) refuses it: the process exits
/// (the host runs its RDB check, then exits), or is killed by boot() if it lingers after
/// logging the failure.
fn refused_at_startup(file: &[u8], what: &str, args: &[&str]) {
    let dir = temp_dir(what);
    std::fs::write(dir.join("dump.rdb"), file).expect("write rdb");
    if let Boot::Started(child, _) = boot(&dir, args) {
        drop(Child(child));
        panic!("the server loaded the corrupted RDB ({what})");
    }
    let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
    assert!(log.contains("xstream: refusing stream payload"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}
