//! Shared by the tests that compare the module with the built-in twin on one server:
//! [`Twin`] (built-in in DB 0, module in DB 1, same key names), command-name mapping,
//! error-text normalisation, clock masking, `INFO memory`.
//! Include with `#[path = "common/twin.rs"] mod twin;` after `mod common;`.

#![allow(dead_code)]

use crate::common::*;

/// One server; `b` talks to DB 0 (built-in), `m` to DB 1 (module).
pub struct Twin {
    pub s: Server,
    pub b: Conn,
    pub m: Conn,
    /// Differences found so far (each test ends with `finish`, which fails if any).
    pub diffs: Vec<String>,
}

impl Twin {
    pub fn start() -> Twin {
        Twin::with(Server::builder())
    }
    pub fn with(builder: ServerBuilder) -> Twin {
        let s = builder.start();
        let mut b = s.conn();
        let mut m = s.conn();
        assert_eq!(b.cmd(&["SELECT", "0"]), Reply::Simple("OK".into()));
        assert_eq!(m.cmd(&["SELECT", "1"]), Reply::Simple("OK".into()));
        Twin { s, b, m, diffs: Vec::new() }
    }

    /// Runs `args` (built-in command names) on both sides; returns (built-in, module) replies.
    pub fn run<A: AsRef<[u8]>>(&mut self, args: &[A]) -> (Reply, Reply) {
        let (rb, _) = self.b.cmd_raw(args);
        let margs = module_args(args);
        let rm = match self.m.try_cmd_raw(&margs) {
            Ok((r, _)) => r,
            Err(e) => {
                panic!("module side: {} -> I/O error {e}; server alive: {}\n{}", trunc(&fmt_cmd(&margs), 200), self.s.is_alive(), self.s.log_tail(40))
            }
        };
        (rb, normalize(rm))
    }

    /// Runs `args` on both sides and asserts identical replies; returns the reply.
    pub fn same<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        let (rb, rm) = self.run(args);
        if rb != rm {
            self.diff(format!(
                "{}:\n      built-in: {}\n      module:   {}",
                trunc(&fmt_cmd(args), 300),
                trunc(&rb.to_string(), 600),
                trunc(&rm.to_string(), 600)
            ));
        }
        rb
    }

    /// Like `same`, after masking clock-dependent values with `mask`.
    pub fn same_masked<A: AsRef<[u8]>>(&mut self, args: &[A], mask: fn(&mut Reply)) -> Reply {
        let (mut rb, mut rm) = self.run(args);
        mask(&mut rb);
        mask(&mut rm);
        if rb != rm {
            self.diff(format!(
                "{} (times masked):\n      built-in: {}\n      module:   {}",
                trunc(&fmt_cmd(args), 300),
                trunc(&rb.to_string(), 600),
                trunc(&rm.to_string(), 600)
            ));
        }
        rb
    }

    pub fn diff(&mut self, d: String) {
        report(&format!("DIFFERENCE with the built-in: {d}"));
        self.diffs.push(d);
    }

    /// PING on both sides, then fails if any reply differed.
    pub fn finish(mut self, what: &str) {
        self.alive(what);
        assert!(self.diffs.is_empty(), "{what}: {} reply difference(s) with the built-in:\n  {}", self.diffs.len(), self.diffs.join("\n  "));
    }

    pub fn alive(&mut self, what: &str) {
        assert!(self.m.ping() && self.b.ping(), "{what}: no PONG; log:\n{}", self.s.log_tail(40));
    }
}

/// XADD -> XS.ADD, XGROUP -> XS.GROUP ...; other commands unchanged.
pub fn module_args<A: AsRef<[u8]>>(args: &[A]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
    let name = String::from_utf8_lossy(&v[0]).to_ascii_uppercase();
    if name.starts_with('X') && !name.starts_with("XS.") {
        v[0] = xcmd(true, &name).into_bytes();
    }
    v
}

/// Error and status texts (HELP lines) name the command: map the module's names back to the
/// built-in's. Bulk strings are data and are left alone.
pub fn normalize(mut r: Reply) -> Reply {
    pub fn fix(s: &str) -> String {
        s.replace("'xs.", "'x").replace("XS.", "X").replace("xs.", "x")
    }
    match &mut r {
        Reply::Error(e) | Reply::Simple(e) => *e = fix(e),
        Reply::Array(v) => {
            for x in v.iter_mut() {
                let y = normalize(std::mem::replace(x, Reply::Nil));
                *x = y;
            }
        }
        _ => {}
    }
    r
}

pub fn used_memory(c: &mut Conn) -> i64 {
    let info = c.cmd(&["INFO", "memory"]).text();
    info.lines().find_map(|l| l.strip_prefix("used_memory:")).and_then(|v| v.trim().parse().ok()).expect("used_memory in INFO memory")
}

/// Masks XPENDING extended entries' idle time ([id, consumer, idle, count]).
pub fn mask_pending(r: &mut Reply) {
    if let Reply::Array(v) = r {
        for e in v.iter_mut() {
            if let Reply::Array(x) = e {
                if x.len() == 4 {
                    x[2] = Reply::Int(0);
                }
            }
        }
    }
}

/// Masks `idle` / `inactive` / `seen-time` / `active-time` / `delivery-time`-like values.
pub fn mask_times(r: &mut Reply) {
    match r {
        Reply::Array(v) => {
            let mut i = 0;
            while i < v.len() {
                let is_time = matches!(&v[i], Reply::Bulk(k) if [&b"idle"[..], b"inactive", b"seen-time", b"active-time"].contains(&&k[..]));
                if is_time && i + 1 < v.len() {
                    v[i + 1] = Reply::Int(0);
                    i += 2;
                    continue;
                }
                mask_times(&mut v[i]);
                i += 1;
            }
            // Pending entries of XINFO STREAM FULL: [id, consumer, delivery-time, count] and
            // [id, delivery-time, count].
            if v.len() == 4 && matches!(v[0], Reply::Bulk(_)) && matches!(v[1], Reply::Bulk(_)) && matches!(v[2], Reply::Int(_)) {
                v[2] = Reply::Int(0);
            }
            if v.len() == 3 && matches!(v[0], Reply::Bulk(_)) && matches!(v[1], Reply::Int(_)) && matches!(v[2], Reply::Int(_)) {
                v[1] = Reply::Int(0);
            }
        }
        _ => {}
    }
}
