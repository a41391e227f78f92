//! redis-rs (the `streams` feature), unmodified, against xstream in takeover mode.
//!
//! The job-queue scenario of tests/clients/node/scenario.mjs through redis-rs's typed stream
//! replies (StreamReadReply, StreamPendingReply, StreamAutoClaimReply, StreamInfoStreamReply,
//! StreamInfoGroupsReply, StreamInfoConsumersReply), in RESP2 and RESP3, against a redis-server
//! with the module in takeover mode and a plain one (the built-in streams, the oracle). Each run's
//! results are rendered as lines and compared with the lines written out in `EXPECTED`: passing
//! on the built-in proves the expectation, passing on the module proves the module.
//!
//! Usage: `xstream-client-redis-rs [--dump]`; env XSTREAM_MODULE (default
//! ../../../target/dist/libxstream.so), XSTREAM_REDIS_SERVER (default redis-server).

use redis::streams::{
    StreamAutoClaimOptions, StreamAutoClaimReply, StreamId, StreamInfoConsumersReply, StreamInfoGroupsReply,
    StreamInfoStreamReply, StreamPendingReply, StreamReadOptions, StreamReadReply,
};
use redis::{Commands, Connection, Value};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn free_port() -> u16 {
    loop {
        let p = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0);
        if p != 0 && p != 6379 {
            return p;
        }
    }
}

struct Server {
    port: u16,
    child: Child,
    dir: PathBuf,
}

impl Server {
    fn start(module: Option<&str>) -> Server {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("xstream-redis-rs-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let server = std::env::var("XSTREAM_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let mut cmd = Command::new(server);
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(dir.join("redis.log"));
        if let Some(m) = module {
            cmd.args(["--loadmodule", m, "takeover", "yes"]);
        }
        let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start redis-server");
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Server { port, child, dir };
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("redis-server on {port} did not start (log in {})", dir.display());
    }
    fn conn(&self, resp3: bool) -> Connection {
        let url = format!("redis://127.0.0.1:{}/{}", self.port, if resp3 { "?protocol=resp3" } else { "" });
        redis::Client::open(url).and_then(|c| c.get_connection()).expect("connect")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        Value::Nil => "nil".into(),
        other => format!("{other:?}"),
    }
}

fn entry(e: &StreamId) -> String {
    let mut fields: Vec<String> = e.map.iter().map(|(k, v)| format!("{k}={}", text(v))).collect();
    fields.sort();
    format!("{} {{{}}}", e.id, fields.join(" "))
}

fn read_lines(out: &mut Vec<String>, what: &str, r: &StreamReadReply) {
    for k in &r.keys {
        out.push(format!("{what}: {} -> [{}]", k.key, k.ids.iter().map(entry).collect::<Vec<_>>().join(", ")));
    }
}

fn scenario(s: &Server, resp3: bool) -> redis::RedisResult<Vec<String>> {
    let mut out = Vec::new();
    let mut producer = s.conn(resp3);
    let mut a = s.conn(resp3);
    let mut b = s.conn(resp3);
    redis::cmd("FLUSHALL").query::<()>(&mut producer)?;
    for i in 1..=10 {
        let kind = if i % 2 == 1 { "odd" } else { "even" };
        let id: String = producer.xadd("jobs", format!("{i}-0"), &[("n", i.to_string().as_str()), ("kind", kind)])?;
        out.push(format!("xadd: {id}"));
    }
    let created: String = producer.xgroup_create("jobs", "workers", "0")?;
    out.push(format!("create: {created}"));
    let opts = StreamReadOptions::default().group("workers", "A").count(4);
    let r: StreamReadReply = a.xread_options(&["jobs"], &[">"], &opts)?;
    read_lines(&mut out, "readA", &r);
    let acked: i64 = a.xack("jobs", "workers", &["1-0", "2-0"])?;
    out.push(format!("ackA: {acked}"));
    // A is killed mid-work: 3-0 and 4-0 stay pending for it.
    let aid: i64 = redis::cmd("CLIENT").arg("ID").query(&mut a)?;
    redis::cmd("CLIENT").arg("KILL").arg("ID").arg(aid).query::<()>(&mut producer)?;
    drop(a);
    let opts = StreamReadOptions::default().group("workers", "B").count(100);
    let r: StreamReadReply = b.xread_options(&["jobs"], &[">"], &opts)?;
    read_lines(&mut out, "readB", &r);
    let ids: Vec<String> = r.keys.iter().flat_map(|k| k.ids.iter().map(|e| e.id.clone())).collect();
    let acked: i64 = b.xack("jobs", "workers", &ids)?;
    out.push(format!("ackB: {acked}"));
    let p: StreamPendingReply = producer.xpending("jobs", "workers")?;
    match p {
        StreamPendingReply::Data(d) => out.push(format!(
            "pending: {} {}..{} [{}]",
            d.count,
            d.start_id,
            d.end_id,
            d.consumers.iter().map(|c| format!("{}={}", c.name, c.pending)).collect::<Vec<_>>().join(" ")
        )),
        _ => out.push("pending: empty".into()),
    }
    let deleted: i64 = producer.xdel("jobs", &["4-0"])?;
    out.push(format!("xdel: {deleted}"));
    let ac: StreamAutoClaimReply =
        b.xautoclaim_options("jobs", "workers", "B", 0, "0-0", StreamAutoClaimOptions::default().count(10))?;
    out.push(format!(
        "autoclaim: next {} claimed [{}] deleted [{}]",
        ac.next_stream_id,
        ac.claimed.iter().map(entry).collect::<Vec<_>>().join(", "),
        ac.deleted_ids.join(" ")
    ));
    let info: StreamInfoStreamReply = producer.xinfo_stream("jobs")?;
    out.push(format!(
        "stream: length {} last {} groups {} first {} last-entry {}",
        info.length,
        info.last_generated_id,
        info.groups,
        entry(&info.first_entry),
        entry(&info.last_entry)
    ));
    let groups: StreamInfoGroupsReply = producer.xinfo_groups("jobs")?;
    for g in &groups.groups {
        out.push(format!(
            "group: {} consumers {} pending {} last {} entries-read {:?} lag {:?}",
            g.name, g.consumers, g.pending, g.last_delivered_id, g.entries_read, g.lag
        ));
    }
    let cons: StreamInfoConsumersReply = producer.xinfo_consumers("jobs", "workers")?;
    for c in &cons.consumers {
        out.push(format!("consumer: {} pending {}", c.name, c.pending));
    }
    let acked: i64 = b.xack("jobs", "workers", &["3-0"])?;
    out.push(format!("ackClaimed: {acked}"));
    // Blocking reads woken by a write.
    let port = s.port;
    let group_reader = std::thread::spawn(move || -> redis::RedisResult<StreamReadReply> {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/{}", if resp3 { "?protocol=resp3" } else { "" }))?
            .get_connection()?;
        c.xread_options(&["jobs"], &[">"], &StreamReadOptions::default().group("workers", "B").block(5000))
    });
    let plain_reader = std::thread::spawn(move || -> redis::RedisResult<StreamReadReply> {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/{}", if resp3 { "?protocol=resp3" } else { "" }))?
            .get_connection()?;
        c.xread_options(&["jobs"], &["$"], &StreamReadOptions::default().block(5000))
    });
    std::thread::sleep(Duration::from_millis(300));
    let id: String = producer.xadd("jobs", "11-0", &[("n", "11"), ("kind", "odd")])?;
    out.push(format!("wake: {id}"));
    read_lines(&mut out, "blockedGroup", &group_reader.join().expect("reader thread")?);
    read_lines(&mut out, "blockedRead", &plain_reader.join().expect("reader thread")?);
    let r: Option<StreamReadReply> = producer.xread_options(&["jobs"], &["$"], &StreamReadOptions::default().block(100))?;
    out.push(format!("timeout: {}", if r.is_none() { "nil" } else { "entries" }));
    let t: String = redis::cmd("TYPE").arg("jobs").query(&mut producer)?;
    out.push(format!("type: {t}"));
    Ok(out)
}

// What the built-in streams answered (the oracle run checks them every time), RESP2 and RESP3 alike.
const EXPECTED: &[&str] = &[
    "xadd: 1-0",
    "xadd: 2-0",
    "xadd: 3-0",
    "xadd: 4-0",
    "xadd: 5-0",
    "xadd: 6-0",
    "xadd: 7-0",
    "xadd: 8-0",
    "xadd: 9-0",
    "xadd: 10-0",
    "create: OK",
    "readA: jobs -> [1-0 {kind=odd n=1}, 2-0 {kind=even n=2}, 3-0 {kind=odd n=3}, 4-0 {kind=even n=4}]",
    "ackA: 2",
    "readB: jobs -> [5-0 {kind=odd n=5}, 6-0 {kind=even n=6}, 7-0 {kind=odd n=7}, 8-0 {kind=even n=8}, 9-0 {kind=odd n=9}, 10-0 {kind=even n=10}]",
    "ackB: 6",
    "pending: 2 3-0..4-0 [A=2]",
    "xdel: 1",
    "autoclaim: next 0-0 claimed [3-0 {kind=odd n=3}] deleted [4-0]",
    "stream: length 9 last 10-0 groups 1 first 1-0 {kind=odd n=1} last-entry 10-0 {kind=even n=10}",
    "group: workers consumers 2 pending 1 last 10-0 entries-read Some(10) lag Some(0)",
    "consumer: A pending 0",
    "consumer: B pending 1",
    "ackClaimed: 1",
    "wake: 11-0",
    "blockedGroup: jobs -> [11-0 {kind=odd n=11}]",
    "blockedRead: jobs -> [11-0 {kind=odd n=11}]",
    "timeout: nil",
    "type: stream",
];

fn main() {
    let dump = std::env::args().any(|a| a == "--dump");
    let module = std::env::var("XSTREAM_MODULE").unwrap_or_else(|_| {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        here.join("../../../target/dist/libxstream.so").to_string_lossy().into_owned()
    });
    assert!(std::path::Path::new(&module).exists(), "module not found: {module} (make build)");
    let mut failed = 0;
    for (kind, m) in [("built-in", None), ("xstream takeover", Some(module.as_str()))] {
        let s = Server::start(m);
        for resp3 in [false, true] {
            let name = format!("redis-rs {} on {kind}", if resp3 { "RESP3" } else { "RESP2" });
            match scenario(&s, resp3) {
                Ok(lines) => {
                    if dump {
                        println!("// {name}\n{}", lines.join("\n"));
                    }
                    if lines == EXPECTED {
                        println!("ok   {name}");
                    } else {
                        failed += 1;
                        println!("FAIL {name}");
                        for (i, l) in lines.iter().enumerate() {
                            let e = EXPECTED.get(i).copied().unwrap_or("<none>");
                            if *l != e {
                                println!("  line {i}: got {l:?}\n          want {e:?}");
                            }
                        }
                        if lines.len() != EXPECTED.len() {
                            println!("  {} lines, {} expected", lines.len(), EXPECTED.len());
                        }
                    }
                }
                Err(e) => {
                    failed += 1;
                    println!("FAIL {name}: {e}");
                }
            }
        }
    }
    if failed > 0 {
        println!("{failed} client run(s) failed");
        std::process::exit(1);
    }
    println!("all client runs passed");
}
