//! What the random differentials (`gen_basic.rs`, `gen_groups.rs`) share, whatever they generate:
//!
//!  - [`Pair`]: where sides A and B live and how one command reaches them. Two runners:
//!     - [`Pair::same`]: ONE server, side A the built-in commands on keys `n{i}`, side B the
//!       module's `XS.*` on keys `m{i}` (or, A/A, the built-in again on keys `a{i}`). The dirty
//!       counter is read before A, after A and after B: both must move it by the same amount.
//!     - [`Pair::two`]: a plain server (A) and a takeover server (B), the same key names and
//!       the STANDARD command names on both, spelled in random case, now and then sent inside
//!       MULTI/EXEC, EVAL or FCALL (`via.rs`); the rest of the transaction is compared too, and
//!       each server's dirty counter must move by the same amount. Error texts are compared as
//!       they are (no name mapping).
//!  - [`Book`]: the bookkeeping of a run: seed, protocol, node limits, recent history, the
//!    distinct differences (`XSTREAM_DIFF_MAX`), the op log (`XSTREAM_DIFF_LOG`), the reply
//!    histogram (`XSTREAM_DIFF_STATS`), the summary line the CI greps.
//!  - node limits per segment (the same `stream-node-max-*` on both sides; the module's own
//!    `xstream.node-max-*` equal on one server; a takeover server refuses other values for them).
//!  - what both generators build commands from: [`Tok`] (rendered per side by
//!    [`Pair::render`]), [`lit`], IDs after / near a key's history ([`next_id_after`],
//!    [`id_near`], with the edge IDs of [`edge_id`]), [`on_string_key`], [`never_create`].
//!
//! A new command or argument goes into the generator (`gen_basic.rs` / `gen_groups.rs`) once;
//! every runner (`tests/differential*.rs`, `tests/takeover.rs`) sends it.

use super::via::*;
use super::*;
use std::collections::{BTreeMap, VecDeque};

/// Where sides A and B live; see the module doc.
pub struct Pair {
    /// Side A (built-in streams); on one server, side B's connection too.
    pub a: Conn,
    /// Side B's server when it is another one (takeover mode).
    b: Option<Conn>,
    /// Side B's command names are the module's (`XADD` becomes `XS.ADD`).
    pub module: bool,
    /// Key prefixes of sides A and B.
    pub prefix: [&'static str; 2],
    /// Accept `'xs.add'` for `'xadd'` in error texts (one server, unless
    /// XSTREAM_DIFF_STRICT_NAMES=1: Redis formats those names itself).
    pub loose_names: bool,
    /// How many commands went each path (two servers).
    vias: BTreeMap<&'static str, usize>,
    /// Two servers: B's keys made built-in streams again ([`Pair::restore_builtin`]) whose
    /// adoption has not been propagated yet: the first write to one propagates `XS.IMPORT`,
    /// which Redis counts as a change (RM_Replicate), one more than the built-in's count.
    builtin_on_b: std::collections::BTreeSet<Vec<u8>>,
    /// Two servers: connections as each of the [`ACL_USERS`], on A and on B.
    users: Vec<(Conn, Conn)>,
    /// Fields of side B's replies (at the top level of a map or a flat field-value array)
    /// removed before comparing: the module's own, shown when a feature is on (the tiering
    /// runners: XS.INFO STREAM's `tiered-nodes` / `tiered-bytes`). Their presence is checked.
    pub strip_fields: &'static [&'static str],
}

/// The outcome of one command on both sides.
pub struct Sent {
    pub ra: Reply,
    pub ba: Vec<u8>,
    pub rb: Reply,
    pub bb: Vec<u8>,
    /// The path (` [via EVAL]`...), empty when plain.
    pub tag: &'static str,
    /// A difference other than the replies: the dirty counter, the rest of a transaction.
    pub problem: Option<String>,
}

impl Pair {
    /// One server: built-in vs module (`module`), or built-in vs built-in on other keys.
    pub fn same(server: &Server, module: bool) -> Pair {
        let mut a = server.conn();
        assert_eq!(a.cmd(&["SET", "str", "hello"]), Reply::Simple("OK".into()));
        Pair {
            a,
            b: None,
            module,
            prefix: if module { ["n", "m"] } else { ["n", "a"] },
            loose_names: std::env::var_os("XSTREAM_DIFF_STRICT_NAMES").is_none(),
            vias: BTreeMap::new(),
            builtin_on_b: Default::default(),
            users: Vec::new(),
            strip_fields: &[],
        }
    }

    /// Two servers: `a` plain, `b` the module in takeover mode. Both are flushed and get the
    /// string key and the function library of `via.rs`.
    pub fn two(a: &Server, b: &Server) -> Pair {
        let (mut ca, mut cb) = (a.conn(), b.conn());
        for c in [&mut ca, &mut cb] {
            assert_eq!(c.cmd(&["FLUSHALL"]), Reply::Simple("OK".into()));
            assert_eq!(c.cmd(&["SET", "str", "hello"]), Reply::Simple("OK".into()));
            load_functions(c);
        }
        Pair {
            a: ca,
            b: Some(cb),
            module: false,
            prefix: ["n", "n"],
            loose_names: false,
            vias: BTreeMap::new(),
            builtin_on_b: Default::default(),
            users: acl_users(a).into_iter().zip(acl_users(b)).collect(),
            strip_fields: &[],
        }
    }

    pub fn two_servers(&self) -> bool {
        self.b.is_some()
    }

    /// Side `side`'s spelling of a command name given in the built-in spelling.
    pub fn name(&self, side: usize, c: &str) -> Vec<u8> {
        if side == 1 && self.module && c.starts_with('X') {
            format!("XS.{}", &c[1..]).into_bytes()
        } else {
            c.as_bytes().to_vec()
        }
    }

    /// Side `side`'s name of key `k`.
    pub fn key(&self, side: usize, k: usize) -> Vec<u8> {
        format!("{}{}", self.prefix[side], k).into_bytes()
    }

    /// The connection serving side `side`.
    pub fn conn(&mut self, side: usize) -> &mut Conn {
        match (&mut self.b, side) {
            (Some(b), 1) => b,
            _ => &mut self.a,
        }
    }

    pub fn hello3(&mut self) {
        self.a.hello3();
        if let Some(b) = self.b.as_mut() {
            b.hello3();
        }
        for (ua, ub) in &mut self.users {
            ua.hello3();
            ub.hello3();
        }
    }

    /// Sends `ca` to side A and `cb` to side B. Two servers: the command name gets the same
    /// random spelling on both (written back into `ca`/`cb`), and unless `plain`, the same
    /// random path. Either way the dirty counter must move by the same amount on both sides.
    pub fn send(&mut self, rng: &mut Rng, ca: &mut [Vec<u8>], cb: &mut [Vec<u8>], plain: bool) -> Sent {
        let mut x = self.send_both(rng, ca, cb, plain);
        if !self.strip_fields.is_empty() && is_info_stream(cb) && !x.rb.is_error() {
            for f in self.strip_fields {
                match strip_top_field(&x.bb, f) {
                    Some(bb) => {
                        x.bb = bb;
                        x.rb.remove_field(f);
                    }
                    None => x.problem = Some(format!(" [{f} missing from side B's reply]")),
                }
            }
        }
        x
    }

    fn send_both(&mut self, rng: &mut Rng, ca: &mut [Vec<u8>], cb: &mut [Vec<u8>], plain: bool) -> Sent {
        // Two servers: now and then a key of the command is made a built-in stream again on B
        // (RESTORE of A's DUMP): the command then meets it as a takeover server meets a RESTOREd
        // or MIGRATEd stream, and adopts it (a read propagating nothing, a write XS.IMPORT).
        if self.b.is_some() && rng.pct(2) {
            self.restore_builtin(ca, cb);
        }
        let Some(b) = self.b.as_mut() else {
            let d0 = dirty(&mut self.a);
            let (ra, ba) = self.a.cmd_raw(ca);
            let d1 = dirty(&mut self.a);
            let (rb, bb) = self.a.cmd_raw(cb);
            let d2 = dirty(&mut self.a);
            let problem = (!dirty_matches_cmd(ca, d1 - d0, d2 - d1)).then(|| format!(" [dirty counter: +{} vs +{}]", d1 - d0, d2 - d1));
            return Sent { ra, ba, rb, bb, tag: "", problem };
        };
        if !ca.is_empty() {
            let name = spell(rng, &ca[0]);
            ca[0] = name.clone();
            cb[0] = name;
        }
        let via = if !plain && rng.pct(3) {
            Via::User
        } else if plain || !wrappable(ca) {
            Via::Plain
        } else if read_only(ca) {
            Via::pick_read(rng)
        } else {
            Via::pick(rng)
        };

        *self.vias.entry(via.name()).or_insert(0) += 1;
        let user = (via == Via::User).then(|| rng.below(self.users.len() as u64) as usize);
        let da = dirty(&mut self.a);
        let oa = match user {
            Some(u) => exec_via(&mut self.users[u].0, via, ca),
            None => exec_via(&mut self.a, via, ca),
        };
        let da = dirty(&mut self.a) - da;
        let db = dirty(b);
        let ob = match user {
            Some(u) => exec_via(&mut self.users[u].1, via, cb),
            None => exec_via(b, via, cb),
        };
        let db = dirty(b) - db;
        // The keys of the command that B still holds as built-in streams: the arguments at the
        // key positions (COMMAND GETKEYS on A), never one that only looks like a key (a field
        // value, a group name: the command adopts nothing there).
        let met: Vec<Vec<u8>> = if cb.iter().skip(1).any(|k| self.builtin_on_b.contains(k)) {
            let keys = match self.a.cmd(&[[b"COMMAND".to_vec(), b"GETKEYS".to_vec()].as_slice(), &ca[..]].concat()) {
                Reply::Array(keys) => keys,
                _ => Vec::new(),
            };
            let at_key = |i: usize| keys.iter().any(|k| *k == Reply::Bulk(ca[i].clone()));
            (1..cb.len().min(ca.len())).filter(|&i| at_key(i) && self.builtin_on_b.contains(&cb[i])).map(|i| cb[i].clone()).collect()
        } else {
            Vec::new()
        };
        let adopted = met.len() as i64;
        // A write that met them propagated XS.IMPORT (B counted more); one refused before it
        // opened its keys (arity, syntax) did not.
        if adopted > 0 && db > da {
            for k in &met {
                self.builtin_on_b.remove(k);
            }
        }
        // Each adoption's XS.IMPORT is one change more on B, on top of what the command counts.
        let adoption_counted = (1..=adopted).any(|k| dirty_matches_cmd(ca, da, db - k));
        let problem = if oa.side != ob.side {
            Some(format!("{} [transaction replies differ: A {} / B {}]", via.tag(), escape(&oa.side), escape(&ob.side)))
        } else {
            (!dirty_matches_cmd(ca, da, db) && !adoption_counted).then(|| format!("{} [dirty counter: +{da} vs +{db}]", via.tag()))
        };
        Sent { ra: oa.reply, ba: oa.raw, rb: ob.reply, bb: ob.raw, tag: via.tag(), problem }
    }

    /// Two servers: every argument of `ca` that names a stream on A is replaced on B by A's DUMP
    /// of it (a built-in payload: B holds a built-in stream there until a command adopts it).
    /// B's content was A's (what the run checks), so nothing a command sees changes.
    fn restore_builtin(&mut self, ca: &[Vec<u8>], cb: &[Vec<u8>]) {
        let Some(b) = self.b.as_mut() else { return };
        for (ka, kb) in ca.iter().zip(cb).skip(1) {
            if !ka.starts_with(self.prefix[0].as_bytes()) || ka.len() > 8 {
                continue;
            }
            if self.a.cmd(&[b"TYPE".as_slice(), ka]) != Reply::Simple("stream".into()) {
                continue;
            }
            // Not where the sides' IDs differ (`*` IDs on two clocks: the runner maps B's to A's).
            let views = |c: &mut Conn, k: &[u8]| {
                [
                    c.raw(&[b"XRANGE".as_slice(), k, b"-", b"+"]),
                    c.raw(&[b"XINFO".as_slice(), b"STREAM", k]),
                    c.raw(&[b"XINFO".as_slice(), b"GROUPS", k]),
                ]
            };
            if views(&mut self.a, ka) != views(b, kb) {
                continue;
            }
            let Reply::Bulk(payload) = self.a.cmd(&[b"DUMP".as_slice(), ka]) else { continue };
            let ttl = match self.a.cmd(&[b"PEXPIRETIME".as_slice(), ka]) {
                Reply::Int(t) if t > 0 => t.to_string(),
                _ => "0".to_string(),
            };
            let mut cmd: Vec<&[u8]> = vec![b"RESTORE", kb, ttl.as_bytes(), &payload, b"REPLACE"];
            if ttl != "0" {
                cmd.push(b"ABSTTL");
            }
            let r = b.cmd(&cmd);
            assert_eq!(r, Reply::Simple("OK".into()), "RESTORE of A's {} on B", String::from_utf8_lossy(ka));
            *self.vias.entry("built-in again on B").or_insert(0) += 1;
            self.builtin_on_b.insert(kb.clone());
        }
    }

    /// Deletes keys `0..nkeys` on both sides (logged as side A's commands).
    pub fn delete_keys(&mut self, book: &mut Book, nkeys: usize) {
        for k in 0..nkeys {
            for side in 0..2 {
                let del = vec![b"DEL".to_vec(), self.key(side, k)];
                if side == 0 {
                    book.log_cmd(&del);
                }
                self.conn(side).cmd(&del);
            }
        }
    }

    /// Picks node limits: entries in 1..`small` (`small_pct` %) or 1..100, bytes 0 (40 %) or
    /// 64..4096.
    pub fn pick_node_limits(rng: &mut Rng, small_pct: u64, small: u64) -> (u64, u64) {
        let e = if rng.pct(small_pct) { rng.range(1, small) } else { rng.range(1, 100) };
        let b = if rng.pct(40) { 0 } else { rng.range(64, 4096) };
        (e, b)
    }

    /// Sets the node limits `book.limits` on both sides. A takeover server must refuse other
    /// values for the module's own limits.
    pub fn apply_limits(&mut self, book: &mut Book, rng: &mut Rng) {
        let (e, b) = book.limits;
        let cfg =
            ["CONFIG", "SET", "stream-node-max-entries", &e.to_string(), "stream-node-max-bytes", &b.to_string()].map(|s| s.as_bytes().to_vec());
        book.log_cmd(&cfg);
        set_node_limits(&mut self.a, e, b, self.module);
        if let Some(c) = self.b.as_mut() {
            set_node_limits(c, e, b, false);
            // The module's own limits: takeover mode refuses to change them (they would have
            // no effect there). B's is the default, 100.
            let xe = rng.range(101, 600).to_string();
            let r = c.cmd(&["CONFIG", "SET", "xstream.node-max-entries", &xe]);
            assert!(
                r.is_error() && r.text().contains("has no effect in takeover mode"),
                "CONFIG SET xstream.node-max-entries {xe} on the takeover server: {r}"
            );
        }
        book.note(format!("   (node limits: entries={e} bytes={b})"));
        book.all_limits.push(format!("{e}/{b}"));
    }

    /// Two servers: the `paths:` line (how many commands went plainly, through MULTI...), and
    /// the ACL LOG of both servers compared ([`acl_log_counts`]): every denial of the
    /// restricted users logged alike.
    pub fn report_paths(&mut self, book: &Book) {
        let Some(b) = self.b.as_mut() else { return };
        let v: Vec<String> = self.vias.iter().map(|(k, v)| format!("{k} {v}")).collect();
        report(&format!("  paths: {}", v.join(", ")));
        let (la, lb) = (acl_log_counts(&mut self.a), acl_log_counts(b));
        if la != lb {
            let only = |x: &BTreeMap<_, i64>, y: &BTreeMap<_, i64>| -> Vec<String> {
                x.iter().filter(|(k, n)| y.get(*k) != Some(*n)).map(|(k, n)| format!("{k:?} x{n}")).collect()
            };
            panic!(
                "{} seed {}: the ACL LOGs differ (reason, object, username)\n built-in only: {:?}\n module only:   {:?}",
                book.label,
                book.seed,
                only(&la, &lb),
                only(&lb, &la)
            );
        }
        let denials: i64 = la.values().sum();
        report(&format!("  ACL LOG: {denials} denials in {} entries, the same on both servers", la.len()));
    }
}

/// The bookkeeping of one run; see the module doc.
pub struct Book {
    /// Prefix of the summary line and of the failure (`differential`...).
    pub label: &'static str,
    /// How to replay (`--test differential`).
    pub replay: &'static str,
    pub seed: u64,
    pub resp3: bool,
    pub limits: (u64, u64),
    pub all_limits: Vec<String>,
    history: VecDeque<String>,
    history_len: usize,
    /// (signature, full report) of each distinct difference.
    diffs: Vec<(String, String)>,
    diff_count: usize,
    max_diffs: usize,
    oplog: Option<std::fs::File>,
    /// XSTREAM_DIFF_STATS=1: reply histogram.
    pub stats: bool,
    hist: BTreeMap<String, usize>,
}

impl Book {
    pub fn new(label: &'static str, replay: &'static str, seed: u64, history_len: usize) -> Book {
        Book {
            label,
            replay,
            seed,
            resp3: false,
            limits: (0, 0),
            all_limits: Vec::new(),
            history: VecDeque::new(),
            history_len,
            diffs: Vec::new(),
            diff_count: 0,
            max_diffs: env_usize("XSTREAM_DIFF_MAX", 1).max(1),
            // XSTREAM_DIFF_LOG=path: every side-A command (and CONFIG SET), RESP-encoded.
            oplog: std::env::var_os("XSTREAM_DIFF_LOG").map(|p| std::fs::File::create(p).expect("XSTREAM_DIFF_LOG")),
            stats: std::env::var_os("XSTREAM_DIFF_STATS").is_some(),
            hist: BTreeMap::new(),
        }
    }

    pub fn log_cmd(&mut self, args: &[Vec<u8>]) {
        if let Some(f) = self.oplog.as_mut() {
            use std::io::Write;
            let _ = f.write_all(&Conn::encode(args));
            let _ = f.flush();
        }
    }

    /// A line of recent history (shown with a difference).
    pub fn note(&mut self, line: String) {
        self.history.push_back(line);
        if self.history.len() > self.history_len {
            self.history.pop_front();
        }
    }

    /// Records op `i` (side A's command and reply) in the history.
    pub fn op(&mut self, i: usize, ca: &[Vec<u8>], ba: &[u8], width: usize) {
        self.note(format!("#{i} {} -> {}", trunc(&fmt_cmd(ca), width), trunc(&escape(ba), width)));
    }

    /// One more reply in the histogram (XSTREAM_DIFF_STATS=1).
    pub fn count(&mut self, what: String) {
        *self.hist.entry(what).or_insert(0) += 1;
    }

    /// Records a difference (`norm`: both normalised replies, when they were). Stops the run
    /// (panics with every recorded difference) once `XSTREAM_DIFF_MAX` distinct ones (default
    /// 1) are recorded; identical signatures (command, kind of both replies) are counted once.
    #[allow(clippy::too_many_arguments)]
    pub fn fail(&mut self, i: usize, ca: &[Vec<u8>], cb: &[Vec<u8>], ba: &[u8], bb: &[u8], norm: Option<(&[u8], &[u8])>, note: &str) {
        let class = |x: &[u8]| -> String {
            if x.starts_with(b"-") {
                trunc(&escape(x), 90)
            } else {
                format!("{} reply", x.first().map(|c| *c as char).unwrap_or('?'))
            }
        };
        let sub = if ca.len() > 1 && (ca[0].eq_ignore_ascii_case(b"XGROUP") || ca[0].eq_ignore_ascii_case(b"XINFO")) {
            format!(" {}", String::from_utf8_lossy(&ca[1]).to_uppercase())
        } else {
            String::new()
        };
        let (na, nb) = norm.unwrap_or((ba, bb));
        let sig = format!("{}{sub} | A {} | B {}", String::from_utf8_lossy(&ca[0]), class(na), class(nb));
        self.diff_count += 1;
        if self.diffs.iter().any(|(s, _)| *s == sig) {
            return;
        }
        let mut msg = format!(
            "\nDIFFERENCE at op #{i} (seed {}, {}, node limits entries={} bytes={}){note}\n",
            self.seed,
            if self.resp3 { "RESP3" } else { "RESP2" },
            self.limits.0,
            self.limits.1
        );
        msg.push_str(&format!("  A: {}\n  B: {}\n", trunc(&fmt_cmd(ca), 400), trunc(&fmt_cmd(cb), 400)));
        msg.push_str(&format!("  A reply: {}\n  B reply: {}\n", trunc(&escape(ba), 3000), trunc(&escape(bb), 3000)));
        if na != ba || nb != bb {
            msg.push_str(&format!("  A normalised: {}\n  B normalised: {}\n", trunc(&escape(na), 3000), trunc(&escape(nb), 3000)));
        }
        msg.push_str("  recent ops (side A):\n");
        for h in &self.history {
            msg.push_str(&format!("    {h}\n"));
        }
        msg.push_str(&format!("  replay: XSTREAM_SEED={} cargo test --release {}\n", self.seed, self.replay));
        if self.max_diffs > 1 {
            report(&msg);
        }
        self.diffs.push((sig, msg));
        if self.diffs.len() >= self.max_diffs {
            self.give_up("stopped at");
        }
    }

    pub fn give_up(&self, how: &str) -> ! {
        let sigs: Vec<String> = self.diffs.iter().map(|(s, _)| format!("  {s}")).collect();
        panic!(
            "{}: {how} {} difference(s), {} distinct (seed {}):\n{}\n{}",
            self.label,
            self.diff_count,
            self.diffs.len(),
            self.seed,
            sigs.join("\n"),
            self.diffs.first().map(|(_, m)| m.as_str()).unwrap_or("")
        );
    }

    /// End of the run: the histogram, then a failure if any difference was recorded.
    pub fn finish(&self) {
        for (k, v) in &self.hist {
            report(&format!("  {v:6} {k}"));
        }
        if !self.diffs.is_empty() {
            self.give_up("found");
        }
    }

    /// The line the CI greps.
    pub fn summary(&self, done: usize) {
        report(&format!("{}: {done} ops, 0 differences (seed {})", self.label, self.seed));
    }
}

/// How a runner calls a generator: labels, sizes.
pub struct Opts {
    /// Seeds the generator (`Rng::from_env`) and names the run in the details line.
    pub what: &'static str,
    /// Prefix of the summary line (`differential`, `takeover differential (basic)`).
    pub label: &'static str,
    /// The replay hint's cargo arguments (`--test differential`).
    pub replay: &'static str,
    /// RESP2 ops, then RESP3 ops.
    pub n2: usize,
    pub n3: usize,
    /// Segments: each starts with empty keys and new node limits.
    pub segments: usize,
    /// Side B may lay its nodes out differently (compaction on): only exact trims are
    /// generated, and XINFO STREAM is compared without its node-layout fields
    /// (radix-tree-keys / -nodes, and the module's `deleted-entries`).
    pub layout_free: bool,
}

/// One argument of a generated command, rendered per side by [`Pair::render`].
#[derive(Clone, Debug)]
pub enum Tok {
    /// Command name, built-in spelling (`XADD`); a module side B gets `XS.ADD`.
    Cmd(&'static str),
    /// This side's key of pair i.
    Key(usize),
    /// The OTHER side's key of pair i (cross-type checks: WRONGTYPE both ways).
    OtherKey(usize),
    /// The string key shared by both sides (WRONGTYPE).
    Str,
    Lit(Vec<u8>),
    /// The j-th auto-generated ID, as this side got it (optionally "(" prefixed).
    AutoId(usize, bool),
}

pub fn lit<T: AsRef<[u8]>>(s: T) -> Tok {
    Tok::Lit(s.as_ref().to_vec())
}

impl Pair {
    /// Side `side`'s command line; `auto`: the auto-generated IDs side `side` got.
    pub fn render(&self, toks: &[Tok], side: usize, auto: &[Vec<u8>]) -> Vec<Vec<u8>> {
        toks.iter()
            .map(|t| match t {
                Tok::Cmd(c) => self.name(side, c),
                Tok::Key(i) => self.key(side, *i),
                Tok::OtherKey(i) => self.key(1 - side, *i),
                Tok::Str => b"str".to_vec(),
                Tok::Lit(b) => b.clone(),
                Tok::AutoId(j, excl) => [if *excl { &b"("[..] } else { b"" }, &auto[*j]].concat(),
            })
            .collect()
    }
}

/// The largest ms or seq of a stream ID.
pub const U64MAX: &str = "18446744073709551615";

/// An ID as an argument.
pub fn id_b(id: (u64, u64)) -> Vec<u8> {
    fmt_id(id).into_bytes()
}

/// An ID after `last`: the same ms with seq + 1..=2 (half the time), else ms + 1..=`ms_step`
/// with seq 0..=`seq_max`; an exhausted ms gives the last possible ID.
pub fn next_id_after(rng: &mut Rng, last: (u64, u64), ms_step: u64, seq_max: u64) -> (u64, u64) {
    let (ms, seq) = last;
    if ms >= u64::MAX - 5 {
        return (u64::MAX, u64::MAX);
    }
    if rng.pct(50) && seq < u64::MAX - 3 {
        (ms, seq + rng.range(1, 3))
    } else {
        (ms + rng.range(1, ms_step), rng.range(0, seq_max))
    }
}

/// Some ID near a key's known IDs (`ids`: every ID ever added; for ranges, MINID, XDEL, claims):
/// 7 % an edge ID ([`edge_id`]), 5 % (or no history) a small one with seq below `fresh_seqs`,
/// else one of the history, 60 % among the last `recent` (more likely still in the stream),
/// one step off in 3 cases of `off_of`.
pub fn id_near(rng: &mut Rng, ids: &[(u64, u64)], recent: u64, fresh_seqs: u64, off_of: u64) -> (u64, u64) {
    if rng.pct(7) {
        return edge_id(rng, ids);
    }
    if ids.is_empty() || rng.pct(5) {
        return (rng.below(20), rng.below(fresh_seqs));
    }
    let n = ids.len() as u64;
    let i = if rng.pct(60) { n - 1 - rng.below(n.min(recent)) } else { rng.below(n) };
    let (ms, seq) = ids[i as usize];
    match rng.below(off_of) {
        0 => (ms, seq.saturating_add(1)),
        1 => (ms, seq.saturating_sub(1)),
        2 => (ms.saturating_add(1), 0),
        _ => (ms, seq),
    }
}

/// Points every key of a generated command at the string key both sides share (WRONGTYPE).
pub fn on_string_key(toks: &mut [Tok]) {
    for t in toks.iter_mut() {
        if matches!(t, Tok::Key(_)) {
            *t = Tok::Str;
        }
    }
}

/// Keeps the never-created key missing: XADD gets NOMKSTREAM, XGROUP CREATE loses MKSTREAM.
pub fn never_create(toks: &mut Vec<Tok>) {
    let is = |t: &Tok, w: &[u8]| matches!(t, Tok::Lit(l) if l.eq_ignore_ascii_case(w));
    if matches!(toks.first(), Some(Tok::Cmd("XADD"))) && toks.len() >= 2 && !toks.iter().any(|t| is(t, b"NOMKSTREAM")) {
        toks.insert(2, lit("NOMKSTREAM"));
    }
    toks.retain(|t| !is(t, b"MKSTREAM"));
}

/// XS.INFO STREAM's fields while tiering is on ([`Pair::strip_fields`] of the tiering runners).
pub const TIER_INFO_FIELDS: &[&str] = &["tiered-nodes", "tiered-bytes"];

/// XINFO STREAM / XS.INFO STREAM (any case, FULL or not).
fn is_info_stream(c: &[Vec<u8>]) -> bool {
    c.len() >= 3 && (c[0].eq_ignore_ascii_case(b"XINFO") || c[0].eq_ignore_ascii_case(b"XS.INFO")) && c[1].eq_ignore_ascii_case(b"STREAM")
}

/// `raw` (a RESP2 flat array or a RESP3 map at the top level) without field `name` and its
/// integer value, the top-level count corrected; None when the field is not there.
pub fn strip_top_field(raw: &[u8], name: &str) -> Option<Vec<u8>> {
    let kind = *raw.first()?;
    let line_end = raw.windows(2).position(|w| w == b"\r\n")?;
    let n: usize = std::str::from_utf8(&raw[1..line_end]).ok()?.parse().ok()?;
    let (per_field, ok) = match kind {
        b'*' => (2, n >= 2),
        b'%' => (1, n >= 1),
        _ => return None,
    };
    if !ok {
        return None;
    }
    let pat = format!("${}\r\n{name}\r\n:", name.len());
    let at = raw.windows(pat.len()).position(|w| w == pat.as_bytes())?;
    let end = at + pat.len() + raw[at + pat.len()..].windows(2).position(|w| w == b"\r\n")? + 2;
    let mut out = format!("{}{}\r\n", kind as char, n - per_field).into_bytes();
    out.extend_from_slice(&raw[line_end + 2..at]);
    out.extend_from_slice(&raw[end..]);
    Some(out)
}
