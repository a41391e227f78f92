//! The consumer-group differential generator: the same random command sequence is sent to side A
//! and side B of a [`Pair`] (one server, built-in on keys `n{i}` vs `XS.*` on keys `m{i}`, in
//! `tests/differential_groups.rs`; a plain server vs a takeover server in `tests/takeover.rs`),
//! and the reply bytes are compared after normalisation (see `tests/common/groups.rs`):
//!
//!  - clock fields: XPENDING extended idle times, XINFO CONSUMERS `idle`, XINFO STREAM FULL
//!    delivery times and `seen-time` become a class (`NOW`, `NOW-2D`, `T=<literal>`). Everything
//!    else is clock-independent by construction: explicit IDs only (no `*`), XCLAIM TIME/IDLE
//!    values far from the min-idle thresholds (0, 3600000, 10^13) that XCLAIM / XAUTOCLAIM /
//!    XPENDING IDLE use;
//!  - side B's key names become side A's in XREAD/XREADGROUP replies and in quoted error texts
//!    (`No such key 'm0'`);
//!  - one server: names that Redis formats from the command itself (`'xs.claim'`, `Try XS.GROUP
//!    HELP.`) are accepted unless XSTREAM_DIFF_STRICT_NAMES=1 (two servers: never).
//!
//! Commands: XDELEX / XACKDEL (Redis 8.2; where a side lacks them, emulated there with XDEL /
//! XACK / XPENDING, `emulate_delex`), MAXCOUNT on multi-stream reads (8.10; emulated as one read
//! per stream, `emulate_maxcount`), XGROUP (CREATE/SETID/DESTROY/CREATECONSUMER/DELCONSUMER/HELP), XREADGROUP (`>` and
//! history, COUNT, NOACK, several keys), XREAD, XACK, XPENDING (summary, extended, IDLE,
//! consumer), XCLAIM (IDLE, TIME, RETRYCOUNT, FORCE, JUSTID, LASTID), XAUTOCLAIM (COUNT, JUSTID),
//! XINFO GROUPS/CONSUMERS/STREAM [FULL [COUNT n]], mixed with XADD/XDEL/XTRIM/XSETID/XRANGE/
//! XREVRANGE/XLEN/DEL, invalid arguments, wrong arity, WRONGTYPE (`str`), a never-created key,
//! NOGROUP/BUSYGROUP. Every `CHECK_EVERY` ops, `XINFO STREAM k FULL COUNT 0` of every pair is
//! compared (normalised); at the end too.
//!
//! The run is cut into segments; each starts with empty keys and new node limits (`diff.rs`).
//! The first part runs in RESP2, the rest in RESP3. Include with
//! `#[path = "common/gen_groups.rs"] mod gen_groups;`.
//!
//! Env of every runner: XSTREAM_SEED (replay), XSTREAM_DIFF_MAX=N (collect N distinct
//! differences before failing, default 1), XSTREAM_DIFF_STATS=1 (reply histogram and coverage),
//! XSTREAM_DIFF_LOG=path (side A's commands, RESP-encoded).

use crate::common::diff::*;
use crate::common::groups::*;
use crate::common::*;
use std::collections::BTreeMap;

/// Explicit-ID stream pairs 0..NPAIRS; pair MISSING is never created.
const NPAIRS: usize = 3;
const MISSING: usize = 3;
const NKEYS: usize = 4;
const HISTORY: usize = 30;
/// Compare `XINFO STREAM k FULL COUNT 0` of every pair this often.
const CHECK_EVERY: usize = 60;
const GROUPS: &[&str] = &["g1", "g2", "g3"];
/// Odd names: empty, case, spaces, a NUL byte and CR LF (Redis formats error texts with `%s`
/// and turns CR/LF into spaces), long.
const ODD_GROUPS: &[&str] = &["", "G1", "nogroup", "g1 ", "g\x00x", "g\r\nx", "a-very-long-group-name-0123456789-0123456789-0123456789"];
const CONSUMERS: &[&str] = &["alice", "bob", "carol", "dead-letter"];
const ODD_CONSUMERS: &[&str] = &["", "Alice", "x", "c\x00d", "c\r\nd", "consumer-with-a-rather-long-name-0123456789abcdef"];
const BAD_IDS: &[&str] =
    &["abc", "1-", "-1", "1-2-3", "1.5", "18446744073709551616-0", "0-18446744073709551616", "", "*", " 1", "0x10", "1-a", "99999999999999999999"];
const BAD_INTS: &[&str] = &["abc", "1.0", "", " 1", "9223372036854775808", "0x1"];
const MIN_IDLES: &[&str] = &["0", "0", "0", "0", "3600000", "3600000", "10000000000000", "-1"];

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Add(usize),
    SetId(usize, Vec<u8>),
    Del(usize),
    GroupCreate(usize, Vec<u8>, bool),
    GroupDestroy(usize, Vec<u8>),
    Other,
}

struct Op {
    toks: Vec<Tok>,
    kind: Kind,
}

#[derive(Default, Clone)]
struct KeyModel {
    last: (u64, u64),
    /// Every ID ever added (some deleted or trimmed since).
    ids: Vec<(u64, u64)>,
    /// Groups that exist (per side A's replies).
    groups: Vec<Vec<u8>>,
    exists: bool,
    fields: Vec<Vec<u8>>,
}

struct Runner {
    rng: Rng,
    keys: Vec<KeyModel>,
    pair: Pair,
    book: Book,
    norm: Normalizer,
    checks: usize,
    events: BTreeMap<&'static str, usize>,
    /// Whether each side's server has XDELEX / XACKDEL (else they are emulated there).
    delex_native: [bool; 2],
    /// Whether side A's server has XREAD MAXCOUNT (8.10; side B always has it).
    maxcount_native: bool,
    /// The module side keeps the group histograms (`xstream.group-stats yes`): every full check
    /// compares them with its streams' groups.
    group_stats: bool,
}

impl Runner {
    fn key_name(&self, side: usize, k: usize) -> Vec<u8> {
        self.pair.key(side, k)
    }

    // ----------------------------------------------------------------------------------------
    // Side-A queries (read-only, no effect on the state that is compared)
    // ----------------------------------------------------------------------------------------

    fn a_len(&mut self, k: usize) -> u64 {
        let key = self.key_name(0, k);
        match self.pair.a.cmd(&[b"XLEN".as_slice(), &key]) {
            Reply::Int(n) => n as u64,
            _ => 0,
        }
    }

    fn a_entries_added(&mut self, k: usize) -> u64 {
        let key = self.key_name(0, k);
        let r = self.pair.a.cmd(&[b"XINFO".as_slice(), b"STREAM", &key]);
        r.field("entries-added").map(|v| v.as_int() as u64).unwrap_or(0)
    }

    /// PEL IDs of group `g` (optionally of one consumer), per side A.
    fn a_pel(&mut self, k: usize, g: &[u8], consumer: Option<&[u8]>) -> Vec<Vec<u8>> {
        if k >= NPAIRS {
            return Vec::new();
        }
        let key = self.key_name(0, k);
        let mut args: Vec<&[u8]> = vec![b"XPENDING", &key, g, b"-", b"+", b"60"];
        if let Some(c) = consumer {
            args.push(c);
        }
        pel_ids(&self.pair.a.cmd(&args))
    }

    // ----------------------------------------------------------------------------------------
    // Argument generators
    // ----------------------------------------------------------------------------------------

    fn next_id(&mut self, last: (u64, u64)) -> (u64, u64) {
        next_id_after(&mut self.rng, last, 4, 2)
    }

    fn some_id(&mut self, k: usize) -> (u64, u64) {
        id_near(&mut self.rng, &self.keys[k.min(NKEYS - 1)].ids, 60, 4, 12)
    }

    fn bad_id(&mut self) -> Vec<u8> {
        self.rng.pick(BAD_IDS).as_bytes().to_vec()
    }

    fn bad_int(&mut self) -> Vec<u8> {
        self.rng.pick(BAD_INTS).as_bytes().to_vec()
    }

    fn group(&mut self, k: usize) -> Vec<u8> {
        let km = &self.keys[k.min(NKEYS - 1)];
        if !km.groups.is_empty() && self.rng.pct(90) {
            let i = self.rng.below(km.groups.len() as u64) as usize;
            return self.keys[k.min(NKEYS - 1)].groups[i].clone();
        }
        if self.rng.pct(92) {
            self.rng.pick(GROUPS).as_bytes().to_vec()
        } else {
            self.rng.pick(ODD_GROUPS).as_bytes().to_vec()
        }
    }

    fn consumer(&mut self) -> Vec<u8> {
        if self.rng.pct(96) {
            self.rng.pick(CONSUMERS).as_bytes().to_vec()
        } else {
            self.rng.pick(ODD_CONSUMERS).as_bytes().to_vec()
        }
    }

    /// An ID for the group commands: usually a PEL ID of `g`, else any ID of the key's history,
    /// sometimes malformed.
    fn claim_id(&mut self, k: usize, pel: &[Vec<u8>]) -> Vec<u8> {
        match self.rng.below(100) {
            0..=69 if !pel.is_empty() => pel[self.rng.below(pel.len() as u64) as usize].clone(),
            0..=95 => id_b(self.some_id(k)),
            96..=97 => self.some_id(k).0.to_string().into_bytes(),
            _ => self.bad_id(),
        }
    }

    fn range_start(&mut self, k: usize, pel: &[Vec<u8>]) -> Vec<u8> {
        match self.rng.below(100) {
            0..=29 => b"-".to_vec(),
            30..=39 => b"0-0".to_vec(),
            40..=59 if !pel.is_empty() => pel[self.rng.below(pel.len() as u64) as usize].clone(),
            40..=74 => id_b(self.some_id(k)),
            75..=84 => {
                let mut v = b"(".to_vec();
                v.extend(id_b(self.some_id(k)));
                v
            }
            85..=89 => self.some_id(k).0.to_string().into_bytes(),
            90..=93 => b"+".to_vec(),
            94..=95 => format!("({U64MAX}-{U64MAX}").into_bytes(),
            _ => self.bad_id(),
        }
    }

    fn range_end(&mut self, k: usize) -> Vec<u8> {
        match self.rng.below(100) {
            0..=54 => b"+".to_vec(),
            55..=79 => id_b(self.some_id(k)),
            80..=87 => {
                let mut v = b"(".to_vec();
                v.extend(id_b(self.some_id(k)));
                v
            }
            88..=92 => self.some_id(k).0.to_string().into_bytes(),
            93..=94 => b"(0-0".to_vec(),
            95..=96 => b"-".to_vec(),
            _ => self.bad_id(),
        }
    }

    fn small_count(&mut self) -> Vec<u8> {
        match self.rng.below(100) {
            0..=59 => self.rng.range(1, 5).to_string().into_bytes(),
            60..=79 => self.rng.range(1, 50).to_string().into_bytes(),
            80..=84 => b"0".to_vec(),
            85..=89 => format!("-{}", self.rng.range(1, 3)).into_bytes(),
            90..=93 => b"1000".to_vec(),
            94..=95 => b"9223372036854775807".to_vec(),
            _ => self.bad_int(),
        }
    }

    fn fields(&mut self, k: usize) -> Vec<Tok> {
        let reuse = !self.keys[k].fields.is_empty() && self.rng.pct(70);
        let names: Vec<Vec<u8>> = if reuse {
            self.keys[k].fields.clone()
        } else {
            let n = *self.rng.pick(&[1usize, 1, 2, 2, 3]);
            (0..n).map(|i| format!("{}{}", *self.rng.pick(&["f", "name", "x", "order"]), i).into_bytes()).collect()
        };
        self.keys[k].fields = names.clone();
        let mut out = Vec::new();
        for n in names {
            out.push(Tok::Lit(n));
            let v = if self.rng.pct(97) {
                let n = self.rng.range(0, 12) as usize;
                self.rng.alnum(n)
            } else {
                random_value(&mut self.rng)
            };
            out.push(Tok::Lit(v));
        }
        if self.rng.pct(1) {
            out.pop();
        }
        out
    }

    fn trim_clause(&mut self, k: usize) -> Vec<Tok> {
        let mut out = Vec::new();
        let approx = self.rng.pct(40);
        if self.rng.pct(55) {
            out.push(lit("MAXLEN"));
            out.push(lit(if approx {
                "~"
            } else if self.rng.pct(50) {
                "="
            } else {
                ""
            }));
            let len = self.a_len(k);
            let n = match self.rng.below(10) {
                0 => self.rng.below(5),
                1..=2 => len / 2,
                _ => len.saturating_sub(self.rng.below(8)),
            };
            out.push(lit(n.to_string()));
        } else {
            out.push(lit("MINID"));
            out.push(lit(if approx {
                "~"
            } else if self.rng.pct(50) {
                "="
            } else {
                ""
            }));
            let id = if self.keys[k].ids.is_empty() || self.rng.pct(10) {
                (self.rng.below(5), 0)
            } else {
                // Mostly a little past the oldest IDs: trims part of the stream.
                let ids = &self.keys[k].ids;
                let n = ids.len() as u64;
                let lo = n.saturating_sub(n.min(200));
                ids[(lo + self.rng.below((n - lo).min(40).max(1))) as usize]
            };
            out.push(Tok::Lit(id_b(id)));
        }
        out.retain(|t| !matches!(t, Tok::Lit(l) if l.is_empty()));
        if approx && self.rng.pct(40) {
            out.push(lit("LIMIT"));
            out.push(lit(self.rng.range(0, 30).to_string()));
        }
        out
    }

    // ----------------------------------------------------------------------------------------
    // Operations
    // ----------------------------------------------------------------------------------------

    fn gen_op(&mut self) -> Op {
        let k = match self.rng.weighted(&[88, 6, 4, 2]) {
            0 => self.rng.below(NPAIRS as u64) as usize,
            1 => MISSING,
            2 => usize::MAX, // WRONGTYPE
            _ => usize::MAX - 1,
        };
        if k == usize::MAX {
            let k = self.rng.below(NPAIRS as u64) as usize;
            let mut op = self.gen_key_op(k);
            while matches!(op.toks.first(), Some(Tok::Lit(_))) {
                op = self.gen_key_op(k);
            }
            on_string_key(&mut op.toks);
            op.kind = Kind::Other;
            return op;
        }
        if k == usize::MAX - 1 {
            return self.gen_multi_read();
        }
        let mut op = self.gen_key_op(k);
        if k == MISSING {
            never_create(&mut op.toks);
            if matches!(op.kind, Kind::GroupCreate(..)) {
                op.kind = Kind::Other;
            }
        }
        op
    }

    /// XREADGROUP / XREAD over several keys (pairs, missing, string key).
    fn gen_multi_read(&mut self) -> Op {
        let n = self.rng.range(2, 3) as usize;
        let mut keys = Vec::new();
        for _ in 0..n {
            keys.push(match self.rng.below(10) {
                0 => Tok::Key(MISSING),
                1 => Tok::Str,
                _ => Tok::Key(self.rng.below(NPAIRS as u64) as usize),
            });
        }
        let group = self.rng.pct(70);
        let mut toks = vec![Tok::Cmd(if group { "XREADGROUP" } else { "XREAD" })];
        if group {
            let k0 = match keys[0] {
                Tok::Key(k) => k,
                _ => 0,
            };
            let g = self.group(k0);
            let c = self.consumer();
            toks.extend([lit("GROUP"), Tok::Lit(g), Tok::Lit(c)]);
        }
        if self.rng.pct(60) {
            toks.extend([lit("COUNT"), Tok::Lit(self.small_count())]);
        }
        if group && self.rng.pct(15) {
            toks.push(lit("NOACK"));
        }
        // MAXCOUNT (8.10) where every key is a stream (and has the group): then the call is the
        // same reads one stream at a time, which is how a side without MAXCOUNT runs it.
        let g_arg = if group {
            match &toks[2] {
                Tok::Lit(g) => Some(g.clone()),
                _ => None,
            }
        } else {
            None
        };
        let all_valid = keys.iter().all(|kt| match kt {
            Tok::Key(k) if *k < NPAIRS => {
                let km = &self.keys[*k];
                km.exists && g_arg.as_ref().is_none_or(|g| km.groups.contains(g))
            }
            _ => false,
        });
        // COUNT as the server reads it: absent 0, negative 0; not an integer: no MAXCOUNT.
        let count: Option<i64> = match toks.iter().position(|t| matches!(t, Tok::Lit(l) if l == b"COUNT")) {
            None => Some(0),
            Some(i) => match &toks[i + 1] {
                Tok::Lit(n) => String::from_utf8_lossy(n).parse::<i64>().ok().map(|n| n.max(0)),
                _ => None,
            },
        };
        if let (true, Some(count), true) = (all_valid, count, self.rng.pct(30)) {
            let maxcount = if count > 0 { count.saturating_add(self.rng.below(4) as i64) } else { self.rng.range(1, 6) as i64 };
            // Between options: first, or last before STREAMS.
            let at = if self.rng.pct(30) { 1 } else { toks.len() };
            toks.insert(at, lit("MAXCOUNT"));
            toks.insert(at + 1, lit(maxcount.to_string()));
        }
        toks.push(lit("STREAMS"));
        let ids: Vec<Tok> = keys
            .iter()
            .map(|kt| {
                let k = match kt {
                    Tok::Key(k) => *k,
                    _ => 0,
                };
                if group {
                    match self.rng.below(10) {
                        0..=6 => lit(">"),
                        7 => lit("0"),
                        _ => Tok::Lit(id_b(self.some_id(k))),
                    }
                } else {
                    match self.rng.below(10) {
                        0..=3 => lit("0"),
                        4 => lit("$"),
                        _ => Tok::Lit(id_b(self.some_id(k))),
                    }
                }
            })
            .collect();
        toks.extend(keys);
        toks.extend(ids);
        Op { toks, kind: Kind::Other }
    }

    fn gen_key_op(&mut self, k: usize) -> Op {
        let km = k.min(NKEYS - 1);
        // A pair without a stream: mostly create it first.
        if k < NPAIRS && !self.keys[k].exists && self.rng.pct(80) {
            return if self.rng.pct(70) {
                self.op_xadd(k)
            } else {
                let g = self.rng.pick(GROUPS).as_bytes().to_vec();
                let id = if self.rng.pct(50) { "$" } else { "0" };
                Op {
                    toks: vec![Tok::Cmd("XGROUP"), lit("CREATE"), Tok::Key(k), Tok::Lit(g.clone()), lit(id), lit("MKSTREAM")],
                    kind: Kind::GroupCreate(k, g, true),
                }
            };
        }
        // A stream without groups: mostly create one.
        if k < NPAIRS && self.keys[k].groups.is_empty() && self.rng.pct(40) {
            let (t, kd) = self.op_xgroup_create(k);
            return Op { toks: t, kind: kd };
        }
        let which = self.rng.weighted(&[
            200, // 0 XADD
            180, // 1 XREADGROUP
            70,  // 2 XACK
            75,  // 3 XCLAIM
            55,  // 4 XAUTOCLAIM
            70,  // 5 XPENDING
            90,  // 6 XGROUP
            60,  // 7 XINFO
            35,  // 8 XDEL
            15,  // 9 XTRIM
            12,  // 10 XSETID
            25,  // 11 XRANGE / XREVRANGE
            8,   // 12 XLEN
            25,  // 13 XREAD
            3,   // 14 DEL
            12,  // 15 wrong arity / junk
            30,  // 16 XDELEX / XACKDEL (8.2)
        ]);
        let key = Tok::Key(k);
        let mut kind = Kind::Other;
        let toks: Vec<Tok> = match which {
            0 => return self.op_xadd(k),
            1 => {
                let g = self.group(km);
                let c = self.consumer();
                let mut t = vec![Tok::Cmd("XREADGROUP")];
                let mut opts: Vec<Vec<Tok>> = Vec::new();
                opts.push(vec![lit(if self.rng.pct(95) { "GROUP" } else { "group" }), Tok::Lit(g.clone()), Tok::Lit(c.clone())]);
                if self.rng.pct(55) {
                    opts.push(vec![lit("COUNT"), Tok::Lit(self.small_count())]);
                }
                if self.rng.pct(15) {
                    opts.push(vec![lit(if self.rng.pct(90) { "NOACK" } else { "noack" })]);
                }
                if self.rng.pct(15) {
                    let i = self.rng.below(opts.len() as u64) as usize;
                    let last = opts.len() - 1;
                    opts.swap(i, last);
                }
                for o in opts {
                    t.extend(o);
                }
                let id: Vec<u8> = match self.rng.below(100) {
                    0..=64 => b">".to_vec(),
                    65..=76 => b"0".to_vec(),
                    77..=79 => b"0-0".to_vec(),
                    80..=86 => {
                        let pel = self.a_pel(km, &g, Some(&c));
                        if pel.is_empty() {
                            id_b(self.some_id(km))
                        } else {
                            pel[self.rng.below(pel.len() as u64) as usize].clone()
                        }
                    }
                    87..=90 => id_b(self.some_id(km)),
                    // The built-in's internal form of `>` (UINT64_MAX-UINT64_MAX).
                    91..=92 => format!("{U64MAX}-{U64MAX}").into_bytes(),
                    93..=94 => b"$".to_vec(),
                    // Not `+`: Redis 7.4 gave it a meaning (an error for XREADGROUP) that the
                    // module implements (COMPAT.md section 3); 7.0 says "Invalid stream ID".
                    _ => self.bad_id(),
                };
                match self.rng.below(100) {
                    0 => t.extend([lit("STREAMS"), key]), // unbalanced
                    1 => t.extend([key, Tok::Lit(id)]),   // no STREAMS
                    2 => {
                        // no GROUP
                        t = vec![Tok::Cmd("XREADGROUP"), lit("STREAMS"), key, Tok::Lit(id)];
                    }
                    3 => {
                        // GROUP without consumer
                        t = vec![Tok::Cmd("XREADGROUP"), lit("GROUP"), Tok::Lit(g), lit("STREAMS"), key, Tok::Lit(id)];
                    }
                    4 => t.extend([lit("JUNK"), lit("STREAMS"), key, Tok::Lit(id)]),
                    5 => t.extend([lit("STREAMS"), key.clone(), key, Tok::Lit(id.clone()), Tok::Lit(id)]),
                    _ => t.extend([lit("STREAMS"), key, Tok::Lit(id)]),
                }
                t
            }
            2 => {
                let g = self.group(km);
                let pel = self.a_pel(km, &g, None);
                let mut t = vec![Tok::Cmd("XACK"), key, Tok::Lit(g)];
                let n = match self.rng.below(100) {
                    0..=59 => 1,
                    60..=84 => self.rng.range(2, 4),
                    85..=96 => self.rng.range(5, 30),
                    _ => 0,
                };
                for _ in 0..n {
                    let id = self.claim_id(km, &pel);
                    t.push(Tok::Lit(id));
                }
                if self.rng.pct(3) {
                    t.truncate(2);
                }
                t
            }
            3 => self.op_xclaim(k),
            4 => {
                let g = self.group(km);
                let c = self.consumer();
                let pel = self.a_pel(km, &g, None);
                let mut t = vec![
                    Tok::Cmd("XAUTOCLAIM"),
                    key,
                    Tok::Lit(g),
                    Tok::Lit(c),
                    lit(if self.rng.pct(97) { self.rng.pick(MIN_IDLES).as_bytes().to_vec() } else { self.bad_int() }),
                ];
                let start = match self.rng.below(100) {
                    0..=34 => b"0-0".to_vec(),
                    35..=44 => b"0".to_vec(),
                    45..=49 => b"-".to_vec(),
                    _ => self.range_start(km, &pel),
                };
                t.push(Tok::Lit(start));
                let mut opts: Vec<Vec<Tok>> = Vec::new();
                if self.rng.pct(55) {
                    let c: Vec<u8> = match self.rng.below(100) {
                        0..=69 => self.rng.range(1, 6).to_string().into_bytes(),
                        70..=84 => self.rng.range(7, 200).to_string().into_bytes(),
                        85..=87 => b"0".to_vec(),
                        88..=89 => b"-1".to_vec(),
                        90..=91 => b"922337203685477581".to_vec(),
                        92..=93 => b"8070450532247928833".to_vec(),
                        94..=95 => b"1000000".to_vec(),
                        _ => self.bad_int(),
                    };
                    opts.push(vec![lit("COUNT"), Tok::Lit(c)]);
                }
                if self.rng.pct(35) {
                    opts.push(vec![lit("JUSTID")]);
                }
                if self.rng.pct(3) {
                    opts.push(vec![lit(*self.rng.pick(&["FOO", "COUNT", "IDLE"]))]);
                }
                if opts.len() > 1 && self.rng.pct(40) {
                    opts.swap(0, 1);
                }
                for o in opts {
                    t.extend(o);
                }
                if self.rng.pct(2) {
                    t.truncate(5);
                }
                t
            }
            5 => {
                let g = self.group(km);
                let mut t = vec![Tok::Cmd("XPENDING"), key, Tok::Lit(g)];
                if self.rng.pct(30) {
                    // summary
                    if self.rng.pct(3) {
                        t.push(lit("-"));
                    }
                    t
                } else {
                    if self.rng.pct(25) {
                        t.push(lit("IDLE"));
                        t.push(lit(if self.rng.pct(95) { self.rng.pick(MIN_IDLES).as_bytes().to_vec() } else { self.bad_int() }));
                    }
                    let s = self.range_start(km, &[]);
                    let e = self.range_end(km);
                    t.push(Tok::Lit(s));
                    t.push(Tok::Lit(e));
                    let c: Vec<u8> = match self.rng.below(100) {
                        0..=49 => b"10".to_vec(),
                        50..=79 => self.rng.range(1, 5).to_string().into_bytes(),
                        80..=87 => b"100".to_vec(),
                        88..=90 => b"0".to_vec(),
                        91..=93 => b"-1".to_vec(),
                        _ => self.bad_int(),
                    };
                    t.push(Tok::Lit(c));
                    if self.rng.pct(40) {
                        t.push(Tok::Lit(self.consumer()));
                    }
                    match self.rng.below(100) {
                        0 => t.truncate(5),
                        1 => t.push(lit("extra")),
                        _ => {}
                    }
                    t
                }
            }
            6 => {
                let (t, kd) = self.op_xgroup(k);
                kind = kd;
                t
            }
            7 => {
                let g = self.group(km);
                match self.rng.below(100) {
                    0..=29 => vec![Tok::Cmd("XINFO"), lit("GROUPS"), key],
                    30..=59 => vec![Tok::Cmd("XINFO"), lit("CONSUMERS"), key, Tok::Lit(g)],
                    60..=69 => vec![Tok::Cmd("XINFO"), lit("STREAM"), key],
                    70..=91 => {
                        let mut t = vec![Tok::Cmd("XINFO"), lit("STREAM"), key, lit("FULL")];
                        if self.rng.pct(60) {
                            let c: Vec<u8> = match self.rng.below(10) {
                                0..=2 => b"0".to_vec(),
                                3..=6 => self.rng.range(1, 4).to_string().into_bytes(),
                                7 => b"-1".to_vec(),
                                8 => b"100".to_vec(),
                                _ => self.bad_int(),
                            };
                            t.extend([lit("COUNT"), Tok::Lit(c)]);
                        }
                        t
                    }
                    92..=93 => vec![Tok::Cmd("XINFO"), lit("HELP")],
                    94 => vec![Tok::Cmd("XINFO"), lit("GROUPS")],
                    95 => vec![Tok::Cmd("XINFO"), lit("CONSUMERS"), key],
                    96 => vec![Tok::Cmd("XINFO"), lit("STREAM"), key, lit("FULL"), lit("COUNT")],
                    97 => vec![Tok::Cmd("XINFO"), lit("STREAM"), key, lit("FOO")],
                    98 => vec![Tok::Cmd("XINFO"), lit("GROUPS"), key, lit("x")],
                    _ => vec![Tok::Cmd("XINFO"), lit("NOPE"), key],
                }
            }
            8 => {
                let mut t = vec![Tok::Cmd("XDEL"), key];
                let g = self.group(km);
                // Often delete pending entries: later history reads / claims see [id, nil].
                let pel = self.a_pel(km, &g, None);
                for _ in 0..self.rng.range(1, 3) {
                    let id = if !pel.is_empty() && self.rng.pct(50) {
                        pel[self.rng.below(pel.len() as u64) as usize].clone()
                    } else if self.rng.pct(97) {
                        id_b(self.some_id(km))
                    } else {
                        self.bad_id()
                    };
                    t.push(Tok::Lit(id));
                }
                t
            }
            9 => {
                let mut t = vec![Tok::Cmd("XTRIM"), key];
                if k < NPAIRS {
                    t.extend(self.trim_clause(k));
                } else {
                    t.extend([lit("MAXLEN"), lit("0")]);
                }
                t.extend(self.ref_policy());
                t
            }
            10 => {
                let last = self.keys[km].last;
                let id: Vec<u8> = match self.rng.below(100) {
                    0..=59 => {
                        let n = self.next_id(last);
                        id_b(n)
                    }
                    60..=74 => id_b(last),
                    75..=89 => id_b(self.some_id(km)),
                    90..=94 => self.bad_id(),
                    _ => b"0-0".to_vec(),
                };
                let mut t = vec![Tok::Cmd("XSETID"), key, Tok::Lit(id.clone())];
                if self.rng.pct(35) {
                    let added = if k < NPAIRS { self.a_entries_added(k) } else { 0 };
                    let n = match self.rng.below(10) {
                        0..=5 => (added + self.rng.below(4)).to_string(),
                        6 => added.saturating_sub(1).to_string(),
                        7 => "0".to_string(),
                        8 => "-1".to_string(),
                        _ => "abc".to_string(),
                    };
                    t.extend([lit("ENTRIESADDED"), lit(n)]);
                }
                if self.rng.pct(25) {
                    let m = match self.rng.below(10) {
                        0..=6 => id_b(self.some_id(km)),
                        7 => id.clone(),
                        8 => b"0-0".to_vec(),
                        _ => self.bad_id(),
                    };
                    t.extend([lit("MAXDELETEDID"), Tok::Lit(m)]);
                }
                kind = Kind::SetId(k, id);
                t
            }
            11 => {
                let rev = self.rng.pct(35);
                let mut t = vec![Tok::Cmd(if rev { "XREVRANGE" } else { "XRANGE" }), key];
                if rev {
                    t.extend([lit("+"), lit("-")]);
                } else {
                    let s = self.range_start(km, &[]);
                    t.extend([Tok::Lit(s), lit("+")]);
                }
                if self.rng.pct(60) {
                    t.extend([lit("COUNT"), lit(self.rng.range(1, 8).to_string())]);
                }
                t
            }
            12 => vec![Tok::Cmd("XLEN"), key],
            13 => {
                let mut t = vec![Tok::Cmd("XREAD")];
                if self.rng.pct(50) {
                    t.extend([lit("COUNT"), Tok::Lit(self.small_count())]);
                }
                let id = match self.rng.below(100) {
                    0..=39 => b"0".to_vec(),
                    40..=54 => b"$".to_vec(),
                    55..=89 => id_b(self.some_id(km)),
                    90..=93 => b">".to_vec(),
                    94..=95 => self.bad_id(),
                    _ => b"0-0".to_vec(),
                };
                match self.rng.below(100) {
                    0 => t.extend([lit("GROUP"), lit("g1"), lit("c"), lit("STREAMS"), key, Tok::Lit(id)]),
                    1 => t.extend([lit("NOACK"), lit("STREAMS"), key, Tok::Lit(id)]),
                    2 => t.extend([lit("STREAMS"), key]),
                    _ => t.extend([lit("STREAMS"), key, Tok::Lit(id)]),
                }
                t
            }
            14 => {
                kind = Kind::Del(k);
                vec![lit("DEL"), key]
            }
            16 => self.op_delex(k),
            _ => match self.rng.below(16) {
                0 => vec![Tok::Cmd("XREADGROUP")],
                1 => vec![Tok::Cmd("XREADGROUP"), lit("GROUP"), lit("g1")],
                2 => vec![Tok::Cmd("XACK"), key],
                3 => vec![Tok::Cmd("XACK"), key, lit("g1")],
                4 => vec![Tok::Cmd("XCLAIM"), key, lit("g1"), lit("alice")],
                5 => vec![Tok::Cmd("XCLAIM"), key, lit("g1"), lit("alice"), lit("0")],
                6 => vec![Tok::Cmd("XAUTOCLAIM"), key, lit("g1"), lit("alice"), lit("0")],
                7 => vec![Tok::Cmd("XPENDING"), key],
                8 => vec![Tok::Cmd("XGROUP")],
                9 => vec![Tok::Cmd("XGROUP"), lit("CREATE"), key],
                10 => vec![Tok::Cmd("XGROUP"), lit("DESTROY"), key, lit("g1"), lit("x")],
                11 => vec![Tok::Cmd("XINFO")],
                12 => vec![Tok::Cmd("XINFO"), lit("CONSUMERS"), key, lit("g1"), lit("x")],
                13 => vec![Tok::Cmd("XREAD"), lit("STREAMS")],
                14 => vec![Tok::Cmd("XGROUP"), lit("CREATECONSUMER"), key, lit("g1")],
                _ => vec![Tok::Cmd("XPENDING"), key, lit("g1"), lit("-"), lit("+")],
            },
        };
        Op { toks, kind }
    }

    /// XDELEX / XACKDEL (Redis 8.2), well formed: a policy (or none) before or after the IDS
    /// block, IDs pending in the group (or some group) and near the key's IDs.
    fn op_delex(&mut self, k: usize) -> Vec<Tok> {
        let km = k.min(NKEYS - 1);
        let ack = self.rng.pct(50);
        let g = self.group(km);
        let pel = self.a_pel(k, &g, None);
        let mut t = vec![Tok::Cmd(if ack { "XACKDEL" } else { "XDELEX" }), Tok::Key(k)];
        if ack {
            t.push(Tok::Lit(g));
        }
        let n = self.rng.range(1, 4);
        let mut ids = Vec::new();
        for _ in 0..n {
            if !pel.is_empty() && self.rng.pct(60) {
                ids.push(Tok::Lit(pel[self.rng.below(pel.len() as u64) as usize].clone()));
            } else {
                ids.push(Tok::Lit(id_b(self.some_id(km))));
            }
        }
        let policy = match self.rng.below(4) {
            0 => None,
            1 => Some("KEEPREF"),
            2 => Some(if self.rng.pct(90) { "DELREF" } else { "delref" }),
            _ => Some("ACKED"),
        };
        let before = self.rng.pct(70);
        if let (Some(p), true) = (policy, before) {
            t.push(lit(p));
        }
        t.extend([lit("IDS"), lit(n.to_string())]);
        t.extend(ids);
        if let (Some(p), false) = (policy, before) {
            t.push(lit(p));
        }
        t
    }

    /// The reference policy of a trim (Redis 8.2: XADD and XTRIM take KEEPREF / DELREF /
    /// ACKED), sometimes, where both sides' servers have it (it changes which entries a trim
    /// may remove, so it is compared with a real 8.2 built-in only, not emulated).
    fn ref_policy(&mut self) -> Option<Tok> {
        if !(self.delex_native[0] && self.delex_native[1]) || !self.rng.pct(30) {
            return None;
        }
        Some(lit(match self.rng.below(3) {
            0 => "KEEPREF",
            1 => "DELREF",
            _ => "ACKED",
        }))
    }

    fn op_xadd(&mut self, k: usize) -> Op {
        let km = k.min(NKEYS - 1);
        let mut t = vec![Tok::Cmd("XADD"), Tok::Key(k)];
        if self.rng.pct(4) {
            t.push(lit("NOMKSTREAM"));
        }
        let policy = self.ref_policy();
        let policy_first = self.rng.pct(50);
        if policy_first {
            t.extend(policy.clone());
        }
        if k < NPAIRS && self.rng.pct(if policy.is_some() { 40 } else { 7 }) {
            t.extend(self.trim_clause(k));
        }
        if !policy_first {
            t.extend(policy);
        }
        let last = self.keys[km].last;
        let id = match self.rng.below(100) {
            0..=88 => id_b(self.next_id(last)),
            89..=91 => id_b(last),
            92..=94 => id_b(self.some_id(km)),
            95..=96 => {
                // `*` is in BAD_IDS (invalid for the group commands) but valid here: the clock.
                let b = self.bad_id();
                if b == b"*" {
                    b"1-*-".to_vec()
                } else {
                    b
                }
            }
            97 => b"0-0".to_vec(),
            _ => (last.0 + self.rng.range(1, 3)).to_string().into_bytes(),
        };
        t.push(Tok::Lit(id));
        t.extend(self.fields(km));
        Op { toks: t, kind: Kind::Add(k) }
    }

    fn op_xclaim(&mut self, k: usize) -> Vec<Tok> {
        let km = k.min(NKEYS - 1);
        let g = self.group(km);
        let c = self.consumer();
        let pel = self.a_pel(km, &g, None);
        let minidle = if self.rng.pct(97) { self.rng.pick(MIN_IDLES).as_bytes().to_vec() } else { self.bad_int() };
        let mut t = vec![Tok::Cmd("XCLAIM"), Tok::Key(k), Tok::Lit(g), Tok::Lit(c), Tok::Lit(minidle)];
        let n = match self.rng.below(10) {
            0..=5 => 1,
            6..=8 => self.rng.range(2, 4),
            _ => self.rng.range(5, 12),
        };
        for _ in 0..n {
            let id = self.claim_id(km, &pel);
            t.push(Tok::Lit(id));
        }
        let now = now_ms();
        let mut opts: Vec<Vec<Tok>> = Vec::new();
        if self.rng.pct(18) {
            let v: Vec<u8> = match self.rng.below(10) {
                0..=1 => b"0".to_vec(),
                2..=3 => b"1000".to_vec(),
                4..=6 => b"172800000".to_vec(),  // two days: NOW-2D
                7 => b"10000000000000".to_vec(), // negative time: clamped to now
                8 => b"-5".to_vec(),             // future: clamped to now
                _ => self.bad_int(),
            };
            opts.push(vec![lit("IDLE"), Tok::Lit(v)]);
        }
        if self.rng.pct(18) {
            let v: Vec<u8> = match self.rng.below(10) {
                0 => b"0".to_vec(),
                1..=2 => b"1000".to_vec(),
                3..=4 => b"1600000000000".to_vec(),
                5 => b"-1".to_vec(),
                6 => (now + DAY_MS).to_string().into_bytes(), // future: clamped to now
                7 => (now - 2 * DAY_MS).to_string().into_bytes(),
                8 => now.to_string().into_bytes(),
                _ => self.bad_int(),
            };
            opts.push(vec![lit("TIME"), Tok::Lit(v)]);
        }
        if self.rng.pct(20) {
            let v: Vec<u8> = match self.rng.below(10) {
                0..=2 => b"0".to_vec(),
                3..=5 => self.rng.range(1, 5).to_string().into_bytes(),
                6 => b"100".to_vec(),
                7 => b"-1".to_vec(),
                8 => b"9223372036854775807".to_vec(),
                _ => self.bad_int(),
            };
            opts.push(vec![lit("RETRYCOUNT"), Tok::Lit(v)]);
        }
        if self.rng.pct(25) {
            opts.push(vec![lit(if self.rng.pct(90) { "FORCE" } else { "force" })]);
        }
        if self.rng.pct(30) {
            opts.push(vec![lit(if self.rng.pct(90) { "JUSTID" } else { "justid" })]);
        }
        if self.rng.pct(12) {
            let v = match self.rng.below(10) {
                0..=5 => id_b(self.some_id(km)),
                6..=7 => {
                    let last = self.keys[km].last;
                    id_b((last.0 + 5, 0))
                }
                8 => b"0-0".to_vec(),
                _ => self.bad_id(),
            };
            opts.push(vec![lit("LASTID"), Tok::Lit(v)]);
        }
        if self.rng.pct(3) {
            opts.push(vec![lit(*self.rng.pick(&["FOO", "IDLE", "TIME", "LASTID", "RETRYCOUNT"]))]);
        }
        // Shuffle a little.
        for i in (1..opts.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            opts.swap(i, j);
        }
        for o in opts {
            t.extend(o);
        }
        t
    }

    fn entries_read_arg(&mut self, k: usize) -> Vec<u8> {
        let added = if k < NPAIRS { self.a_entries_added(k) } else { 0 };
        match self.rng.below(100) {
            0..=14 => b"0".to_vec(),
            15..=44 => added.to_string().into_bytes(),
            45..=64 => self.rng.below(added + 1).to_string().into_bytes(),
            65..=74 => (added + self.rng.range(1, 5)).to_string().into_bytes(),
            75..=84 => b"-1".to_vec(),
            85..=89 => b"-2".to_vec(),
            90..=94 => b"9223372036854775807".to_vec(),
            _ => self.bad_int(),
        }
    }

    fn group_id_arg(&mut self, k: usize) -> Vec<u8> {
        match self.rng.below(100) {
            0..=29 => b"$".to_vec(),
            30..=49 => b"0".to_vec(),
            50..=54 => b"0-0".to_vec(),
            55..=84 => id_b(self.some_id(k)),
            85..=89 => {
                let last = self.keys[k].last;
                id_b((last.0 + self.rng.range(1, 3), 0))
            }
            90..=91 => b"-".to_vec(),
            92..=93 => b"+".to_vec(),
            _ => self.bad_id(),
        }
    }

    fn op_xgroup_create(&mut self, k: usize) -> (Vec<Tok>, Kind) {
        let km = k.min(NKEYS - 1);
        let key = Tok::Key(k);
        let case = |r: &mut Rng, s: &'static str| -> Tok {
            if r.pct(92) {
                lit(s)
            } else {
                lit(s.to_lowercase())
            }
        };
        // CREATE: usually a new name, sometimes an existing one (BUSYGROUP).
        let g: Vec<u8> = if self.rng.pct(75) {
            let free: Vec<&str> = GROUPS.iter().copied().filter(|g| !self.keys[km].groups.iter().any(|x| x == g.as_bytes())).collect();
            if free.is_empty() {
                self.group(km)
            } else {
                self.rng.pick(&free).as_bytes().to_vec()
            }
        } else {
            self.group(km)
        };
        let id = self.group_id_arg(km);
        let mut t = vec![Tok::Cmd("XGROUP"), case(&mut self.rng, "CREATE"), key, Tok::Lit(g.clone()), Tok::Lit(id)];
        let mk = self.rng.pct(20);
        let mut opts: Vec<Vec<Tok>> = Vec::new();
        if mk {
            opts.push(vec![lit("MKSTREAM")]);
        }
        if self.rng.pct(30) {
            let er = self.entries_read_arg(km);
            opts.push(vec![lit("ENTRIESREAD"), Tok::Lit(er)]);
        }
        if self.rng.pct(3) {
            opts.push(vec![lit(*self.rng.pick(&["FOO", "ENTRIESREAD", "MKSTREAM"]))]);
        }
        if opts.len() > 1 && self.rng.pct(40) {
            opts.swap(0, 1);
        }
        for o in opts {
            t.extend(o);
        }
        (t, Kind::GroupCreate(k, g, mk))
    }

    fn op_xgroup(&mut self, k: usize) -> (Vec<Tok>, Kind) {
        let km = k.min(NKEYS - 1);
        let key = Tok::Key(k);
        let sub = self.rng.weighted(&[28, 20, 8, 18, 14, 2, 3, 4]);
        // Redis 8.2.x (where both sides run the reference policies natively): no XGROUP DESTROY.
        // 8.2.3 keeps the destroyed group's last ID as the cached minimum that ACKED compares
        // with (redis#14552, fixed after 8.2.3), so later ACKED trims delete less than the
        // module does; the module keeps the fixed rule (docs/hosts.md).
        let sub = if sub == 2 && self.delex_native[0] && self.delex_native[1] { 4 } else { sub };
        let case = |r: &mut Rng, s: &'static str| -> Tok {
            if r.pct(92) {
                lit(s)
            } else {
                lit(s.to_lowercase())
            }
        };
        match sub {
            0 => self.op_xgroup_create(k),
            1 => {
                let g = self.group(km);
                let id = self.group_id_arg(km);
                let mut t = vec![Tok::Cmd("XGROUP"), case(&mut self.rng, "SETID"), key, Tok::Lit(g), Tok::Lit(id)];
                if self.rng.pct(45) {
                    let er = self.entries_read_arg(km);
                    t.extend([lit("ENTRIESREAD"), Tok::Lit(er)]);
                }
                if self.rng.pct(3) {
                    t.push(lit(*self.rng.pick(&["MKSTREAM", "ENTRIESREAD", "FOO"])));
                }
                (t, Kind::Other)
            }
            2 => {
                let g = self.group(km);
                (vec![Tok::Cmd("XGROUP"), case(&mut self.rng, "DESTROY"), key, Tok::Lit(g.clone())], Kind::GroupDestroy(k, g))
            }
            3 => {
                let g = self.group(km);
                let c = self.consumer();
                (vec![Tok::Cmd("XGROUP"), case(&mut self.rng, "CREATECONSUMER"), key, Tok::Lit(g), Tok::Lit(c)], Kind::Other)
            }
            4 => {
                let g = self.group(km);
                let c = self.consumer();
                (vec![Tok::Cmd("XGROUP"), case(&mut self.rng, "DELCONSUMER"), key, Tok::Lit(g), Tok::Lit(c)], Kind::Other)
            }
            5 => (vec![Tok::Cmd("XGROUP"), case(&mut self.rng, "HELP")], Kind::Other),
            6 => (vec![Tok::Cmd("XGROUP"), lit(*self.rng.pick(&["FOO", "CREATEX", "HELP"])), key, lit("g1")], Kind::Other),
            _ => {
                let t = match self.rng.below(6) {
                    0 => vec![Tok::Cmd("XGROUP"), lit("CREATE"), key, lit("g1")],
                    1 => vec![Tok::Cmd("XGROUP"), lit("SETID"), key, lit("g1")],
                    2 => vec![Tok::Cmd("XGROUP"), lit("DESTROY"), key],
                    3 => vec![Tok::Cmd("XGROUP"), lit("CREATECONSUMER"), key, lit("g1"), lit("a"), lit("b")],
                    4 => vec![Tok::Cmd("XGROUP"), lit("SETID"), key, lit("g1"), lit("0"), lit("ENTRIESREAD")],
                    _ => vec![Tok::Cmd("XGROUP"), lit("CREATE"), key, lit("g9"), lit("0"), lit("MKSTREAM"), lit("ENTRIESREAD"), lit("1"), lit("X")],
                };
                (t, Kind::Other)
            }
        }
    }

    /// Updates the model from side A's reply.
    fn observe(&mut self, op: &Op, ra: &Reply) {
        let ok = matches!(ra, Reply::Simple(s) if s == "OK");
        match &op.kind {
            Kind::Add(k) => {
                if let Reply::Bulk(b) = ra {
                    if let Some(id) = parse_id(b) {
                        let km = &mut self.keys[*k];
                        km.last = id;
                        km.ids.push(id);
                        km.exists = true;
                    }
                }
            }
            Kind::SetId(k, id) => {
                if ok {
                    if let Some(id) = parse_id(id) {
                        self.keys[*k].last = id;
                    }
                }
            }
            // Not when refused (a restricted ACL user's DEL): the key is still there.
            Kind::Del(k) if !ra.is_error() => {
                let ids = std::mem::take(&mut self.keys[*k].ids);
                self.keys[*k] = KeyModel { ids, ..Default::default() };
            }
            Kind::GroupCreate(k, g, mk) => {
                if ok {
                    let km = &mut self.keys[*k];
                    if !km.groups.contains(g) {
                        km.groups.push(g.clone());
                    }
                    if *mk {
                        km.exists = true;
                    }
                }
            }
            Kind::GroupDestroy(k, g) => {
                if matches!(ra, Reply::Int(1)) {
                    self.keys[*k].groups.retain(|x| x != g);
                }
            }
            Kind::Del(_) | Kind::Other => {}
        }
    }

    // ----------------------------------------------------------------------------------------
    // Running and comparing
    // ----------------------------------------------------------------------------------------

    /// Sends `toks` to both sides, compares the normalised replies; returns side A's reply.
    fn exec(&mut self, i: usize, toks: &[Tok], note: &str) -> Reply {
        let mut ca = self.pair.render(toks, 0, &[]);
        let mut cb = self.pair.render(toks, 1, &[]);
        self.book.log_cmd(&ca);
        // The periodic checks go plainly; the ops may go through MULTI/EVAL/FCALL (two servers).
        let x = self.pair.send(&mut self.rng, &mut ca, &mut cb, !note.is_empty());
        let (ra, ba, bb) = (x.ra, x.ba, x.bb);
        let note = format!("{note}{}", x.tag);
        let now = now_ms();
        let na = self.norm.normalize(&ca, &ba, 0, now);
        let nb = self.norm.normalize(&cb, &bb, 1, now);
        if na != nb {
            self.book.fail(i, &ca, &cb, &ba, &bb, Some((&na, &nb)), &note);
        } else if let Some(p) = x.problem {
            self.book.fail(i, &ca, &cb, &ba, &bb, Some((&na, &nb)), &format!("{note}{p}"));
        }
        self.count_events(&ca, &ba, &na);
        if self.book.stats {
            let name = String::from_utf8_lossy(&ca[0]).to_uppercase();
            let what = match &ra {
                Reply::Error(e) => format!("{name} -> {}", trunc(e, 60)),
                Reply::Nil => format!("{name} -> nil"),
                Reply::Array(v) if v.is_empty() => format!("{name} -> []"),
                Reply::Map(v) if v.is_empty() => format!("{name} -> {{}}"),
                Reply::Int(n) => format!("{name} -> int{}", if *n == 0 { " 0" } else { "" }),
                Reply::Simple(s) => format!("{name} -> +{s}"),
                _ => format!("{name} -> data"),
            };
            self.book.count(what);
        }
        self.book.op(i, &ca, &ba, 240);
        ra
    }

    /// XDELEX / XACKDEL where a side's server has no such command (Redis < 8.2 built-in): that
    /// side runs [`emulate_delex`] (XDEL / XACK / XPENDING / XINFO GROUPS) and the replies are
    /// compared; both sides plainly, without the dirty-counter check (the emulation is several
    /// commands). The XINFO checks then compare the resulting state as for every other op.
    fn exec_emulated(&mut self, i: usize, toks: &[Tok]) -> Reply {
        let ca = self.pair.render(toks, 0, &[]);
        let cb = self.pair.render(toks, 1, &[]);
        self.book.log_cmd(&ca);
        let mut out = Vec::new();
        let read = matches!(toks.first(), Some(Tok::Cmd("XREAD" | "XREADGROUP")));
        for (side, args) in [(0, &ca), (1, &cb)] {
            let native =
                if read { self.maxcount_native || (side == 1 && (self.pair.module || self.pair.two_servers())) } else { self.delex_native[side] };
            let c = self.pair.conn(side);
            out.push(match (native, read) {
                (true, _) => c.cmd(args),
                (false, true) => emulate_maxcount(c, args),
                (false, false) => emulate_delex(c, args),
            });
        }
        if read && !self.pair.two_servers() {
            // Side B's key names in its reply become side A's.
            rename_keys(&mut out[1], &self.norm.key_pairs);
        }
        let (ba, bb) = (resp2_of(&out[0]), resp2_of(&out[1]));
        if out[0] != out[1] {
            self.book.fail(i, &ca, &cb, &ba, &bb, None, " [XDELEX/XACKDEL or MAXCOUNT; emulated on the side(s) without it]");
        }
        *self.events.entry(if read { "XREAD/XREADGROUP MAXCOUNT compared" } else { "XDELEX/XACKDEL compared" }).or_insert(0) += 1;
        self.book.op(i, &ca, &ba, 240);
        out.swap_remove(0)
    }

    /// Counts the interesting situations side A's replies show (coverage evidence, reported at
    /// the end): `[id, nil]` entries, XAUTOCLAIM deleted IDs, lag unknown, old delivery times...
    fn count_events(&mut self, ca: &[Vec<u8>], ba: &[u8], na: &[u8]) {
        let name = ca[0].to_ascii_uppercase();
        let sub = ca.get(1).map(|a| a.to_ascii_uppercase()).unwrap_or_default();
        let n = Node::parse(ba);
        let mut ev: Vec<&'static str> = Vec::new();
        if n.is_error() {
            return;
        }
        match name.as_slice() {
            b"XREADGROUP" => {
                let hist = ca.last().map(|a| a.as_slice() != b">").unwrap_or(false);
                let mut nil_entries = 0;
                let mut entries = 0;
                let mut walk = |x: &Node| {
                    // An entry is [id, fields] or [id, nil].
                    if x.t == b'*' && x.kids.len() == 2 && x.kids[0].str_bytes().map(looks_like_id).unwrap_or(false) {
                        entries += 1;
                        if matches!(x.kids[1].t, b'_') || (x.kids[1].t == b'*' && x.kids[1].head == b"-1") {
                            nil_entries += 1;
                        }
                    }
                };
                fn visit(x: &Node, f: &mut dyn FnMut(&Node)) {
                    f(x);
                    for k in &x.kids {
                        visit(k, f);
                    }
                }
                visit(&n, &mut walk);
                if entries > 0 {
                    ev.push(if hist { "XREADGROUP history with entries" } else { "XREADGROUP > with entries" });
                }
                if nil_entries > 0 {
                    ev.push("XREADGROUP history with [id, nil]");
                }
                if ca.iter().any(|a| a.eq_ignore_ascii_case(b"NOACK")) && entries > 0 && !hist {
                    ev.push("XREADGROUP NOACK delivering");
                }
            }
            b"XAUTOCLAIM" => {
                if n.kids.len() == 3 {
                    if !n.kids[2].kids.is_empty() {
                        ev.push("XAUTOCLAIM reporting deleted IDs");
                    }
                    if !n.kids[1].kids.is_empty() {
                        ev.push("XAUTOCLAIM claiming");
                    }
                    if n.kids[0].str_bytes() != Some(b"0-0") {
                        ev.push("XAUTOCLAIM cursor not 0-0");
                    }
                }
            }
            b"XCLAIM" => {
                if !n.kids.is_empty() {
                    if ca.iter().any(|a| a.eq_ignore_ascii_case(b"FORCE")) {
                        ev.push("XCLAIM FORCE claiming");
                    }
                    if ca.iter().any(|a| a.eq_ignore_ascii_case(b"LASTID")) {
                        ev.push("XCLAIM LASTID claiming");
                    }
                    ev.push("XCLAIM claiming");
                }
            }
            b"XACK" => {
                if n.int().unwrap_or(0) > 1 {
                    ev.push("XACK acking several");
                }
            }
            b"XINFO" if sub == b"GROUPS" => {
                for g in &n.kids {
                    if let Some(l) = g.field("lag") {
                        ev.push(if l.int().is_some() { "XINFO GROUPS lag known" } else { "XINFO GROUPS lag nil" });
                    }
                }
            }
            _ => {}
        }
        let ns = String::from_utf8_lossy(na);
        if ns.contains("NOW-2D") {
            ev.push("normalised time NOW-2D");
        }
        if ns.contains(":T=") {
            ev.push("normalised time T=<literal>");
        }
        if ns.contains("IDLE?") {
            ev.push("unclassified idle time (!)");
        }
        for e in ev {
            *self.events.entry(e).or_insert(0) += 1;
        }
    }

    /// Deletes every key (both sides), forgets the model, picks new node limits.
    fn new_segment(&mut self) {
        self.pair.delete_keys(&mut self.book, NKEYS);
        self.keys = vec![KeyModel::default(); NKEYS];
        self.apply_limits();
        self.book.note("   (new segment: all keys deleted)".into());
    }

    fn apply_limits(&mut self) {
        self.book.limits = Pair::pick_node_limits(&mut self.rng, 40, 8);
        self.pair.apply_limits(&mut self.book, &mut self.rng);
    }

    /// `XINFO STREAM k FULL COUNT 0` of every pair (and XINFO GROUPS), compared.
    fn full_check(&mut self, i: usize) {
        for k in 0..NKEYS {
            for toks in [
                vec![Tok::Cmd("XINFO"), lit("STREAM"), Tok::Key(k), lit("FULL"), lit("COUNT"), lit("0")],
                vec![Tok::Cmd("XINFO"), lit("GROUPS"), Tok::Key(k)],
            ] {
                self.exec(i, &toks, " [periodic XINFO check]");
                self.checks += 1;
            }
        }
        if self.group_stats {
            self.check_group_stats(i);
        }
    }

    /// The module's INFO group histograms against its streams' groups (XS.INFO STREAM FULL).
    fn check_group_stats(&mut self, i: usize) {
        let mut walked = GroupHistograms::default();
        for k in 0..NKEYS {
            let key = String::from_utf8_lossy(&self.pair.key(1, k)).into_owned();
            let full = self.pair.conn(1).cmd(&["XS.INFO", "STREAM", &key, "FULL", "COUNT", "1"]);
            for g in full.field("groups").map(|g| g.as_array().to_vec()).unwrap_or_default() {
                count_group(&mut walked, &g);
            }
        }
        let got = info_group_histograms(self.pair.conn(1));
        assert_eq!(
            got, walked,
            "op {i}: INFO xstream group histograms vs the module's streams (replay: XSTREAM_SEED={} cargo test --release {})",
            self.book.seed, self.book.replay
        );
    }
}

/// Runs the group differential on `pair`; returns the number of ops compared (or panics on a
/// difference).
pub fn run(pair: Pair, o: &Opts) -> usize {
    let rng = Rng::from_env(o.what);
    let seed = rng.seed();
    // One server: side B's key names become side A's in replies (`No such key 'm0'`).
    let key_pairs = if pair.two_servers() { Vec::new() } else { (0..NKEYS).map(|k| (pair.key(1, k), pair.key(0, k))).collect() };
    let norm = Normalizer { key_pairs, loose_names: pair.loose_names };
    let mut r = Runner {
        rng,
        keys: vec![KeyModel::default(); NKEYS],
        pair,
        book: Book::new(o.label, o.replay, seed, HISTORY),
        norm,
        checks: 0,
        events: BTreeMap::new(),
        delex_native: [false; 2],
        maxcount_native: false,
        group_stats: false,
    };
    r.group_stats = r.pair.module && r.pair.conn(1).cmd(&["INFO", "xstream"]).text().contains("groups_by_lag");
    let a_has = matches!(r.pair.a.cmd(&["COMMAND", "INFO", "XDELEX"]).as_array().first(), Some(Reply::Array(_)));
    r.delex_native = [a_has, a_has || r.pair.module || r.pair.two_servers()];
    r.maxcount_native = !is_valkey(&mut r.pair.a) && redis_version(&mut r.pair.a) >= (8, 10);
    r.apply_limits();
    // XSTREAM_GDIFF_HIST_EVERY=1: the group histograms checked before every op (to find the op
    // that puts them wrong; periodic otherwise).
    let hist_every = env_usize("XSTREAM_GDIFF_HIST_EVERY", 0) != 0;
    let (n2, n3) = (o.n2, o.n3);
    let seg_len = ((n2 + n3) / o.segments.max(1)).max(1);
    let mut errors = 0usize;
    let mut delivered = 0usize;
    for i in 0..n2 + n3 {
        if i == n2 {
            r.pair.hello3();
            r.book.resp3 = true;
            r.book.note("   (HELLO 3)".into());
        }
        if i > 0 && i % seg_len == 0 {
            r.full_check(i);
            r.new_segment();
        }
        if i > 0 && i % CHECK_EVERY == 0 {
            r.full_check(i);
        }
        if r.group_stats && hist_every {
            r.check_group_stats(i);
        }
        let op = r.gen_op();
        let emulate = matches!(op.toks.first(), Some(Tok::Cmd("XDELEX" | "XACKDEL"))) && !(r.delex_native[0] && r.delex_native[1]);
        let maxcount = op.toks.iter().any(|t| matches!(t, Tok::Lit(l) if l == b"MAXCOUNT"));
        let ra = if emulate || (maxcount && !r.maxcount_native) { r.exec_emulated(i, &op.toks) } else { r.exec(i, &op.toks, "") };
        if ra.is_error() {
            errors += 1;
        }
        if matches!(op.toks.first(), Some(Tok::Cmd("XREADGROUP"))) {
            match &ra {
                Reply::Array(v) if !v.is_empty() => delivered += 1,
                Reply::Map(v) if !v.is_empty() => delivered += 1,
                _ => {}
            }
        }
        r.observe(&op, &ra);
    }
    r.full_check(n2 + n3);
    r.book.finish();
    let done = n2 + n3;
    report(&format!(
        "{}: {done} ops ({n2} RESP2 + {n3} RESP3; {errors} error replies, {delivered} non-empty XREADGROUP replies) + {} XINFO checks; node limits entries/bytes per segment {}",
        o.what,
        r.checks,
        r.book.all_limits.join(", ")
    ));
    let ev: Vec<String> = r.events.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    report(&format!("  coverage: {}", ev.join("; ")));
    r.pair.report_paths(&r.book);
    r.book.summary(done);
    done
}

/// The RESP2 bytes of a reply made of integers, arrays and errors (for the failure report).
fn resp2_of(r: &Reply) -> Vec<u8> {
    match r {
        Reply::Int(n) => format!(":{n}\r\n").into_bytes(),
        Reply::Error(e) => format!("-{e}\r\n").into_bytes(),
        Reply::Array(v) => {
            let mut out = format!("*{}\r\n", v.len()).into_bytes();
            for x in v {
                out.extend(resp2_of(x));
            }
            out
        }
        other => format!("+{other}\r\n").into_bytes(),
    }
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// XDELEX / XACKDEL of Redis 8.2 (REDIS8.md 3.3, 3.4) for a built-in that lacks them, from
/// the 7.0 commands, for the well-formed calls of [`Runner::op_delex`]: the missing key (or
/// group) answers -1 per ID; ACKED keeps an entry some group has not been delivered (its last
/// ID below the entry's) or holds in its PEL (XPENDING of that ID); DELREF XACKs the ID in
/// every group first; the deletion is an XDEL. XACKDEL acks in its group first (-1 if it was
/// not pending there) and answers 1 whenever deletion was allowed.
fn emulate_delex(c: &mut Conn, args: &[Vec<u8>]) -> Reply {
    let ack = args[0].eq_ignore_ascii_case(b"XACKDEL");
    let key = args[1].clone();
    let mut i = if ack { 3 } else { 2 };
    let mut policy = b"KEEPREF".to_vec();
    let mut ids: Vec<Vec<u8>> = Vec::new();
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"IDS") {
            let n: usize = String::from_utf8_lossy(&args[i + 1]).parse().expect("numids");
            ids = args[i + 2..i + 2 + n].to_vec();
            i += n + 2;
        } else {
            policy = args[i].to_ascii_uppercase();
            i += 1;
        }
    }
    let all = |v: i64| Reply::Array(vec![Reply::Int(v); ids.len()]);
    match c.cmd(&[b"TYPE".as_slice(), &key]) {
        Reply::Simple(t) if t == "none" => return all(-1),
        Reply::Simple(t) if t == "stream" => {}
        _ => return Reply::Error(WRONGTYPE.into()),
    }
    let mut groups: Vec<(Vec<u8>, (u64, u64))> = Vec::new();
    for g in c.cmd(&[b"XINFO".as_slice(), b"GROUPS", &key]).as_array() {
        let name = g.field("name").and_then(|n| n.as_bytes()).expect("group name").to_vec();
        let last = g.field("last-delivered-id").and_then(|n| n.as_bytes()).and_then(parse_id).expect("last id");
        groups.push((name, last));
    }
    if ack && !groups.iter().any(|(n, _)| *n == args[2]) {
        return all(-1);
    }
    let referenced = |c: &mut Conn, id: &[u8]| -> bool {
        let idt = parse_id(id).expect("generated IDs are valid");
        !groups.is_empty()
            && (groups.iter().any(|(_, last)| *last < idt)
                || groups.iter().any(|(g, _)| !c.cmd(&[b"XPENDING".as_slice(), &key, g, id, id, b"1"]).as_array().is_empty()))
    };
    let mut out = Vec::new();
    for id in &ids {
        if ack && c.cmd(&[b"XACK".as_slice(), &key, &args[2], id]) != Reply::Int(1) {
            out.push(Reply::Int(-1));
            continue;
        }
        if policy == b"ACKED" && referenced(c, id) {
            out.push(Reply::Int(2));
            continue;
        }
        if policy == b"DELREF" {
            for (g, _) in &groups {
                c.cmd(&[b"XACK".as_slice(), &key, g, id]);
            }
        }
        let deleted = c.cmd(&[b"XDEL".as_slice(), &key, id]) == Reply::Int(1);
        out.push(Reply::Int(if deleted || ack { 1 } else { -1 }));
    }
    Reply::Array(out)
}

/// Renames the stream names of an XREAD / XREADGROUP reply (RESP2 array of pairs, RESP3 map).
fn rename_keys(r: &mut Reply, pairs: &[(Vec<u8>, Vec<u8>)]) {
    let rename = |k: &mut Reply| {
        if let Reply::Bulk(b) = k {
            if let Some((_, to)) = pairs.iter().find(|(from, _)| from == b) {
                *b = to.clone();
            }
        }
    };
    match r {
        Reply::Array(v) => v.iter_mut().for_each(|p| {
            if let Reply::Array(kv) = p {
                if let Some(k) = kv.first_mut() {
                    rename(k);
                }
            }
        }),
        Reply::Map(kv) => kv.iter_mut().for_each(|(k, _)| rename(k)),
        _ => {}
    }
}

/// XREAD / XREADGROUP with MAXCOUNT (Redis 8.10, REDIS8.md 7.3) for a built-in without it: the
/// same read one stream at a time, in argument order, each with COUNT = what is left of the cap
/// (within COUNT), stopping once nothing is left; the parts are joined into one reply (RESP2
/// array, RESP3 map). For the generator's calls whose keys are all streams with the group.
fn emulate_maxcount(c: &mut Conn, args: &[Vec<u8>]) -> Reply {
    let mut opts: Vec<Vec<u8>> = Vec::new();
    let mut count = 0u64;
    let mut maxcount = 0u64;
    let mut i = 1;
    while i < args.len() && !args[i].eq_ignore_ascii_case(b"STREAMS") {
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"MAXCOUNT") || a.eq_ignore_ascii_case(b"COUNT") {
            let n: u64 = String::from_utf8_lossy(&args[i + 1]).parse::<i64>().expect("a count").max(0) as u64;
            if a.eq_ignore_ascii_case(b"MAXCOUNT") {
                maxcount = n;
            } else {
                count = n;
            }
            i += 2;
        } else if a.eq_ignore_ascii_case(b"GROUP") {
            opts.extend_from_slice(&args[i..i + 3]);
            i += 3;
        } else {
            opts.push(a.clone());
            i += 1;
        }
    }
    let rest = &args[i + 1..];
    let n = rest.len() / 2;
    let mut left = maxcount;
    let mut parts: Vec<(Reply, Reply)> = Vec::new();
    let mut resp3 = false;
    for k in 0..n {
        if left == 0 {
            break;
        }
        let take = if count == 0 { left } else { count.min(left) };
        let mut cmd = vec![args[0].clone()];
        cmd.extend(opts.iter().cloned());
        cmd.extend([b"COUNT".to_vec(), take.to_string().into_bytes(), b"STREAMS".to_vec(), rest[k].clone(), rest[n + k].clone()]);
        let part: Vec<(Reply, Reply)> = match c.cmd(&cmd) {
            Reply::Nil => Vec::new(),
            Reply::Array(v) => v.iter().map(|p| (p.as_array()[0].clone(), p.as_array()[1].clone())).collect(),
            Reply::Map(kv) => {
                resp3 = true;
                kv
            }
            other => return other,
        };
        for (key, entries) in part {
            left -= (entries.as_array().len() as u64).min(left);
            parts.push((key, entries));
        }
    }
    if parts.is_empty() {
        Reply::Nil
    } else if resp3 {
        Reply::Map(parts)
    } else {
        Reply::Array(parts.into_iter().map(|(k, v)| Reply::Array(vec![k, v])).collect())
    }
}
