//! Helpers for the consumer-group tests (differential_groups, incident, replication_groups):
//!
//! - [`Node`]: an exact RESP tree parsed from raw reply bytes. Unlike [`super::Reply`] it keeps
//!   every wire detail (`$-1` vs `*-1`, `+` vs `$`, map vs flat array), and [`Node::to_bytes`]
//!   gives back the original bytes, so a reply can be normalised in place and still be compared
//!   byte for byte.
//! - Clock normalisation of the group replies: idle times (XPENDING extended, XINFO CONSUMERS
//!   `idle`) and absolute times (XINFO STREAM FULL delivery times and `seen-time`) are replaced by
//!   a class marker (`NOW`, `NOW-2D`, `T=<literal>`), see [`time_class`] / [`idle_class`].
//! - [`Normalizer`]: everything a differential comparison of two sides needs: side B's key names
//!   renamed to side A's (in XREAD/XREADGROUP replies and in quoted error texts), the module's
//!   command name in Redis-formatted texts (`'xs.claim'`, `Try XS.GROUP HELP`), clock fields.

use std::time::{SystemTime, UNIX_EPOCH};

pub const DAY_MS: i64 = 86_400_000;
pub const HOUR_MS: i64 = 3_600_000;

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// One RESP value with its exact wire form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Type byte: `+ - : $ * % ~ > _ , # ( = ! |`.
    pub t: u8,
    /// The header line after the type byte (length, count, or the simple value).
    pub head: Vec<u8>,
    /// Payload of `$ ! =` (None for `$-1`).
    pub blob: Option<Vec<u8>>,
    /// Elements of aggregates (a map has 2n: key, value, key, value...).
    pub kids: Vec<Node>,
}

impl Node {
    /// Parses exactly one value from `b` (panics on malformed input: the bytes come from
    /// `Conn::raw`, which already validated them).
    pub fn parse(b: &[u8]) -> Node {
        let mut i = 0;
        let n = Node::parse_at(b, &mut i);
        assert_eq!(i, b.len(), "trailing bytes after a RESP value");
        n
    }

    fn parse_at(b: &[u8], i: &mut usize) -> Node {
        let t = b[*i];
        let start = *i + 1;
        let mut end = start;
        while !(b[end] == b'\r' && b[end + 1] == b'\n') {
            end += 1;
        }
        let head = b[start..end].to_vec();
        *i = end + 2;
        let num = || -> i64 { std::str::from_utf8(&head).unwrap().parse().unwrap() };
        let mut node = Node { t, head: head.clone(), blob: None, kids: Vec::new() };
        match t {
            b'$' | b'!' | b'=' => {
                let n = num();
                if n >= 0 {
                    let n = n as usize;
                    node.blob = Some(b[*i..*i + n].to_vec());
                    *i += n + 2;
                }
            }
            b'*' | b'~' | b'>' => {
                let n = num();
                for _ in 0..n.max(0) {
                    node.kids.push(Node::parse_at(b, i));
                }
            }
            b'%' | b'|' => {
                let n = num();
                for _ in 0..2 * n.max(0) {
                    node.kids.push(Node::parse_at(b, i));
                }
            }
            _ => {}
        }
        node
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.push(self.t);
        out.extend_from_slice(&self.head);
        out.extend_from_slice(b"\r\n");
        if let Some(b) = &self.blob {
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        for k in &self.kids {
            k.write(out);
        }
    }

    /// String content of `+ - $ ! =` (None otherwise).
    pub fn str_bytes(&self) -> Option<&[u8]> {
        match self.t {
            b'+' | b'-' => Some(&self.head),
            b'$' | b'!' | b'=' => self.blob.as_deref(),
            _ => None,
        }
    }

    pub fn int(&self) -> Option<i64> {
        if self.t == b':' {
            std::str::from_utf8(&self.head).ok()?.parse().ok()
        } else {
            None
        }
    }

    pub fn is_error(&self) -> bool {
        self.t == b'-' || self.t == b'!'
    }

    pub fn is_aggregate(&self) -> bool {
        matches!(self.t, b'*' | b'~' | b'>' | b'%')
    }

    /// The elements of an array/set, or the (key, value) pairs flattened for a map.
    pub fn items(&self) -> &[Node] {
        &self.kids
    }

    /// Value of field `name` in a RESP3 map or a RESP2 flat `[k, v, k, v...]` array.
    pub fn field(&self, name: &str) -> Option<&Node> {
        if !(self.t == b'%' || self.t == b'*') {
            return None;
        }
        let mut j = 0;
        while j + 1 < self.kids.len() {
            if self.kids[j].str_bytes() == Some(name.as_bytes()) {
                return Some(&self.kids[j + 1]);
            }
            j += 2;
        }
        None
    }

    pub fn field_mut(&mut self, name: &str) -> Option<&mut Node> {
        if !(self.t == b'%' || self.t == b'*') {
            return None;
        }
        let mut j = 0;
        while j + 1 < self.kids.len() {
            if self.kids[j].str_bytes() == Some(name.as_bytes()) {
                return Some(&mut self.kids[j + 1]);
            }
            j += 2;
        }
        None
    }

    /// Replaces an integer's text by a marker (e.g. `NOW`): the result is no longer valid RESP,
    /// it only serves for comparisons.
    pub fn mark(&mut self, marker: String) {
        self.head = marker.into_bytes();
    }

    /// Applies `f` to every node, depth first.
    pub fn walk_mut(&mut self, f: &mut dyn FnMut(&mut Node)) {
        f(self);
        for k in self.kids.iter_mut() {
            k.walk_mut(f);
        }
    }
}

/// Class of an absolute ms time (XCLAIM TIME literals, delivery times, seen-time):
/// `NOW` within a day of `now`, `NOW-2D` within an hour of two days ago, else the exact value.
pub fn time_class(t: i64, now: i64) -> String {
    if (t - now).abs() <= DAY_MS {
        "NOW".into()
    } else if (t - (now - 2 * DAY_MS)).abs() <= HOUR_MS {
        "NOW-2D".into()
    } else {
        format!("T={t}")
    }
}

/// Class of an idle time: the absolute time it stands for, classified by [`time_class`]; a
/// time far in the past (set with XCLAIM TIME) is rounded to the nearest of `literals` within
/// an hour (the two sides read it a few ms apart).
pub fn idle_class(idle: i64, now: i64, literals: &[i64]) -> String {
    let t = now - idle;
    let c = time_class(t, now);
    if c.starts_with("T=") {
        for &l in literals {
            if (t - l).abs() <= HOUR_MS {
                return format!("T={l}");
            }
        }
        return format!("IDLE?{idle}");
    }
    c
}

/// The explicit `XCLAIM ... TIME` values the tests use that stay in the past (0 and 1000 and
/// one in 2020): idle times derived from them classify as `T=<literal>`.
pub const TIME_LITERALS: &[i64] = &[0, 1000, 1_600_000_000_000];

fn mark_idle(n: &mut Node, now: i64) {
    if let Some(v) = n.int() {
        n.mark(idle_class(v, now, TIME_LITERALS));
    }
}

fn mark_time(n: &mut Node, now: i64) {
    if let Some(v) = n.int() {
        n.mark(time_class(v, now));
    }
}

/// XPENDING extended: `[[id, consumer, idle, count], ...]`: the idle times.
pub fn norm_pending_ext(n: &mut Node, now: i64) {
    if n.t != b'*' {
        return;
    }
    for e in n.kids.iter_mut() {
        if e.t == b'*' && e.kids.len() == 4 {
            mark_idle(&mut e.kids[2], now);
        }
    }
}

/// XINFO CONSUMERS: each consumer's `idle` (7.0: name, pending, idle).
pub fn norm_info_consumers(n: &mut Node, now: i64) {
    if n.t != b'*' {
        return;
    }
    for c in n.kids.iter_mut() {
        for f in ["idle", "inactive"] {
            if let Some(v) = c.field_mut(f) {
                mark_idle(v, now);
            }
        }
    }
}

/// XINFO STREAM FULL: delivery times of every group PEL entry and consumer PEL entry, and the
/// consumers' `seen-time` (and `active-time`, for servers that have it).
pub fn norm_info_full(n: &mut Node, now: i64) {
    let Some(groups) = n.field_mut("groups") else {
        return;
    };
    if groups.t != b'*' {
        return;
    }
    for g in groups.kids.iter_mut() {
        if let Some(p) = g.field_mut("pending") {
            for e in p.kids.iter_mut() {
                if e.t == b'*' && e.kids.len() == 4 {
                    mark_time(&mut e.kids[2], now);
                }
            }
        }
        if let Some(cs) = g.field_mut("consumers") {
            for c in cs.kids.iter_mut() {
                for f in ["seen-time", "active-time"] {
                    if let Some(v) = c.field_mut(f) {
                        mark_time(v, now);
                    }
                }
                if let Some(p) = c.field_mut("pending") {
                    for e in p.kids.iter_mut() {
                        if e.t == b'*' && e.kids.len() == 3 {
                            mark_time(&mut e.kids[1], now);
                        }
                    }
                }
            }
        }
    }
}

/// XINFO STREAM FULL: only the consumers' `seen-time` / `active-time` (for a primary/replica
/// comparison: delivery times are replicated, seen times are each server's own clock).
pub fn norm_seen_times(n: &mut Node, now: i64) {
    let Some(groups) = n.field_mut("groups") else {
        return;
    };
    for g in groups.kids.iter_mut() {
        if let Some(cs) = g.field_mut("consumers") {
            for c in cs.kids.iter_mut() {
                for f in ["seen-time", "active-time"] {
                    if let Some(v) = c.field_mut(f) {
                        mark_time(v, now);
                    }
                }
            }
        }
    }
}

/// Which clock normalisation a reply needs, from its command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockKind {
    None,
    PendingExt,
    InfoConsumers,
    InfoFull,
}

fn upper(a: &[u8]) -> Vec<u8> {
    a.to_ascii_uppercase()
}

/// Classifies a command line (built-in or module spelling).
pub fn clock_kind<A: AsRef<[u8]>>(args: &[A]) -> ClockKind {
    if args.is_empty() {
        return ClockKind::None;
    }
    let name = upper(args[0].as_ref());
    let name = name.strip_prefix(b"XS.").map(|r| {
        let mut v = b"X".to_vec();
        v.extend_from_slice(r);
        v
    });
    let name = name.unwrap_or_else(|| upper(args[0].as_ref()));
    let arg = |i: usize| args.get(i).map(|a| upper(a.as_ref())).unwrap_or_default();
    match name.as_slice() {
        b"XPENDING" if args.len() > 3 => ClockKind::PendingExt,
        b"XINFO" if arg(1) == b"CONSUMERS" => ClockKind::InfoConsumers,
        b"XINFO" if arg(1) == b"STREAM" && args.len() > 3 => ClockKind::InfoFull,
        _ => ClockKind::None,
    }
}

/// Applies the clock normalisation for `kind` (no-op on error replies).
pub fn norm_clock(n: &mut Node, kind: ClockKind, now: i64) {
    if n.is_error() {
        return;
    }
    match kind {
        ClockKind::None => {}
        ClockKind::PendingExt => norm_pending_ext(n, now),
        ClockKind::InfoConsumers => norm_info_consumers(n, now),
        ClockKind::InfoFull => norm_info_full(n, now),
    }
}

/// Replaces every occurrence of `from` by `to` in `s`.
pub fn replace_bytes(s: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return s.to_vec();
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// Normalisation of side B's reply (and clock fields of both) for a differential comparison.
#[derive(Clone, Debug, Default)]
pub struct Normalizer {
    /// (side B key, side A key): renamed in XREAD/XREADGROUP replies (bulk strings equal to the
    /// key) and in error texts (`'<key>'`).
    pub key_pairs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Accept the naming differences Redis itself formats from the command name.
    pub loose_names: bool,
}

impl Normalizer {
    /// Normalises side `side`'s reply `raw` to `cmd` (that side's command line).
    pub fn normalize<A: AsRef<[u8]>>(&self, cmd: &[A], raw: &[u8], side: usize, now: i64) -> Vec<u8> {
        let mut n = Node::parse(raw);
        norm_clock(&mut n, clock_kind(cmd), now);
        if side == 1 {
            let name = cmd.first().map(|a| upper(a.as_ref())).unwrap_or_default();
            let reads = matches!(name.as_slice(), b"XREAD" | b"XREADGROUP" | b"XS.READ" | b"XS.READGROUP");
            let is_help = cmd.get(1).map(|a| a.as_ref().eq_ignore_ascii_case(b"HELP")).unwrap_or(false);
            let pairs = &self.key_pairs;
            let loose = self.loose_names;
            if reads {
                // The key names: [[key, entries], ...] (RESP2) or {key: entries} (RESP3).
                let rename = |x: &mut Node| {
                    if let Some(b) = x.str_bytes().map(|b| b.to_vec()) {
                        if let Some((_, a)) = pairs.iter().find(|(kb, _)| *kb == b) {
                            set_str(x, a.clone());
                        }
                    }
                };
                match n.t {
                    b'*' => {
                        for e in n.kids.iter_mut() {
                            if e.t == b'*' && e.kids.len() == 2 {
                                rename(&mut e.kids[0]);
                            }
                        }
                    }
                    b'%' => {
                        for (j, e) in n.kids.iter_mut().enumerate() {
                            if j % 2 == 0 {
                                rename(e);
                            }
                        }
                    }
                    _ => {}
                }
            }
            n.walk_mut(&mut |x: &mut Node| {
                if x.is_error() {
                    let mut s = x.str_bytes().unwrap_or_default().to_vec();
                    for (b, a) in pairs {
                        let mut qb = b"'".to_vec();
                        qb.extend_from_slice(b);
                        qb.push(b'\'');
                        let mut qa = b"'".to_vec();
                        qa.extend_from_slice(a);
                        qa.push(b'\'');
                        s = replace_bytes(&s, &qb, &qa);
                    }
                    if loose {
                        s = loosen(&s);
                    }
                    set_str(x, s);
                } else if loose && is_help && x.t == b'+' {
                    let s = loosen(&x.head);
                    set_str(x, s);
                }
            });
        }
        n.to_bytes()
    }
}

fn set_str(x: &mut Node, s: Vec<u8>) {
    match x.t {
        b'+' | b'-' => x.head = s,
        _ => {
            x.head = s.len().to_string().into_bytes();
            x.blob = Some(s);
        }
    }
}

/// The texts Redis formats from the command's own name: `'xs.claim'` in arity errors,
/// `Try XS.GROUP HELP.`, `XS.INFO <subcommand>` in HELP replies, `'xs.group|foo'`.
pub fn loosen(s: &[u8]) -> Vec<u8> {
    let mut s = replace_bytes(s, b"'xs.", b"'x");
    for (f, t) in [(&b"XS.INFO"[..], &b"XINFO"[..]), (b"XS.GROUP", b"XGROUP"), (b"xs.info|", b"xinfo|"), (b"xs.group|", b"xgroup|")] {
        s = replace_bytes(&s, f, t);
    }
    s
}

/// Pretty form of raw RESP bytes for reports (one line, escaped).
pub fn show(raw: &[u8], max: usize) -> String {
    let s = super::escape(raw);
    if s.len() <= max {
        s
    } else {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...({} bytes)", &s[..end], s.len())
    }
}

/// The entry IDs of an extended XPENDING reply (`[[id, consumer, idle, count], ...]`); empty
/// for anything else (an error, a missing key).
pub fn pel_ids(r: &super::Reply) -> Vec<Vec<u8>> {
    match r {
        super::Reply::Array(v) => v
            .iter()
            .filter_map(|e| match e {
                super::Reply::Array(x) if !x.is_empty() => x[0].as_bytes().map(|b| b.to_vec()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}
