//! Reliable-queue policies (issue 16; the state machine is src/stream/queue.rs):
//!
//! XS.GROUP SETPOLICY key group [MAXDELIVERIES n DEADLETTER dlq-key|DROP]
//!                    [ACKTIMEOUT ms [BACKOFF factor] [MAXBACKOFF ms]] [CONSUMERTTL ms] [RESET]
//! XS.GROUP GETPOLICY key group
//! XS.GROUP DEADLETTER key group id [id ...]
//!
//! and the dead-letter step every trigger shares ([`DeadLetters`]): the entry's
//! last owner and count are recorded, it is acknowledged in the source group, and
//! it is appended with `*` to the dead-letter stream (created if missing) as
//! `source-key source-id group consumer deliveries reason` + its own fields.
//! Propagated as `XS.ADD dlq-key <the concrete ID> ...` then `XS.ACK key group id`:
//! replicas and the AOF never apply a policy themselves (commands from the primary
//! or the AOF deliver as the built-in does; what the primary dead-lettered instead
//! arrives as those two commands).

use super::{is_kw, parse_ll};
use crate::error::{Error, Result};
use crate::ffi::ctx::{Arg, Ctx, KeyKind, Name};
use crate::stream::queue::{AckTimeout, Dead, DeadLetter, QueuePolicy, Reason, BACKOFF_MAX, MS_MAX};
use crate::stream::{IdSpec, Stream, StreamId};

/// The key / group checks of the other XS.GROUP subcommands, in their order.
fn group_checks(c: &Ctx, key: &crate::ffi::ctx::Key<'_>) -> Result<()> {
    match key.kind() {
        KeyKind::Other => return Err(key.wrong_type()),
        KeyKind::Empty => {
            return Err(Error::Err(
                "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ))
        }
        KeyKind::Stream => {}
    }
    if key.stream().and_then(|s| s.group(c.arg(3))).is_none() {
        return Err(super::group::nogroup_for_key(c.arg(3), c.arg(2)));
    }
    Ok(())
}

fn ms_arg(arg: &[u8], msg: &'static str) -> Result<i64> {
    match parse_ll(arg) {
        Ok(v) if (1..=MS_MAX).contains(&v) => Ok(v),
        _ => Err(Error::Err(msg)),
    }
}

/// What SETPOLICY parsed: each part given, and RESET.
#[derive(Default)]
struct Parsed {
    max_deliveries: Option<(u64, DeadLetter)>,
    ack_timeout: Option<AckTimeout>,
    consumer_ttl: Option<i64>,
    reset: bool,
    /// Argument index of the dead-letter key.
    dlq_arg: Option<usize>,
}

/// A part (or a sub-option of ACKTIMEOUT) given twice: refused, as XADD refuses a second
/// trim strategy (nothing silently overridden).
fn twice(part: &'static str) -> Error {
    Error::Full(format!("ERR syntax error, {part} given more than once"))
}

fn parse_setpolicy(c: &Ctx) -> Result<Parsed> {
    let argc = c.argc();
    let mut p = Parsed::default();
    let mut i = 4;
    while i < argc {
        let o = c.arg(i);
        let more = argc - 1 - i;
        let repeated = (is_kw(o, "MAXDELIVERIES") && p.max_deliveries.is_some())
            || (is_kw(o, "ACKTIMEOUT") && p.ack_timeout.is_some())
            || (is_kw(o, "CONSUMERTTL") && p.consumer_ttl.is_some())
            || (is_kw(o, "RESET") && p.reset);
        if repeated {
            return Err(twice(if is_kw(o, "MAXDELIVERIES") {
                "MAXDELIVERIES"
            } else if is_kw(o, "ACKTIMEOUT") {
                "ACKTIMEOUT"
            } else if is_kw(o, "CONSUMERTTL") {
                "CONSUMERTTL"
            } else {
                "RESET"
            }));
        }
        if is_kw(o, "MAXDELIVERIES") && more >= 2 {
            let n = match parse_ll(c.arg(i + 1)) {
                Ok(n) if n >= 1 => n as u64,
                _ => return Err(Error::Err("MAXDELIVERIES must be a positive integer")),
            };
            if is_kw(c.arg(i + 2), "DROP") {
                p.max_deliveries = Some((n, DeadLetter::Drop));
                p.dlq_arg = None;
                i += 3;
            } else if is_kw(c.arg(i + 2), "DEADLETTER") && more >= 3 {
                p.max_deliveries = Some((n, DeadLetter::Key(c.arg(i + 3).into())));
                p.dlq_arg = Some(i + 3);
                i += 4;
            } else {
                return Err(Error::Syntax);
            }
        } else if is_kw(o, "ACKTIMEOUT") && more >= 1 {
            let ms = ms_arg(c.arg(i + 1), "ACKTIMEOUT must be a positive integer (milliseconds, at most 1000000000000)")?;
            let mut at = AckTimeout { ms, backoff: 1.0, max_backoff: None };
            let mut backoff_given = false;
            i += 2;
            loop {
                let more = argc.saturating_sub(i + 1);
                if i < argc && is_kw(c.arg(i), "BACKOFF") && more >= 1 {
                    if std::mem::replace(&mut backoff_given, true) {
                        return Err(twice("BACKOFF"));
                    }
                    let f = std::str::from_utf8(c.arg(i + 1)).ok().and_then(|t| t.parse::<f64>().ok());
                    at.backoff = match f {
                        Some(f) if f.is_finite() && (1.0..=BACKOFF_MAX).contains(&f) => f,
                        _ => return Err(Error::Err("BACKOFF must be a number from 1 to 1000")),
                    };
                    i += 2;
                } else if i < argc && is_kw(c.arg(i), "MAXBACKOFF") && more >= 1 {
                    if at.max_backoff.is_some() {
                        return Err(twice("MAXBACKOFF"));
                    }
                    let m = ms_arg(c.arg(i + 1), "MAXBACKOFF must be a positive integer (milliseconds, at most 1000000000000)")?;
                    at.max_backoff = Some(m);
                    i += 2;
                } else {
                    break;
                }
            }
            if at.max_backoff.is_some_and(|m| m < at.ms) {
                return Err(Error::Err("MAXBACKOFF must not be below ACKTIMEOUT"));
            }
            p.ack_timeout = Some(at);
        } else if is_kw(o, "CONSUMERTTL") && more >= 1 {
            p.consumer_ttl = Some(ms_arg(c.arg(i + 1), "CONSUMERTTL must be a positive integer (milliseconds, at most 1000000000000)")?);
            i += 2;
        } else if is_kw(o, "RESET") {
            p.reset = true;
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
    }
    Ok(p)
}

pub fn run_setpolicy(c: &Ctx) -> Result<()> {
    let p = parse_setpolicy(c)?;
    if let Some(d) = p.dlq_arg {
        if c.arg(d) == c.arg(2) {
            return Err(Error::Err("the dead-letter key must be another key than the stream"));
        }
        // Cluster mode: the dead-letter key is written by commands on the stream key.
        if let Some(e) = cross_slot(c, 2, d) {
            return Err(e);
        }
    }
    let mut key = c.key(2, true);
    group_checks(c, &key)?;
    let s = key.stream_mut().ok_or(Error::WrongType)?;
    let g = s.group_mut(c.arg(3)).ok_or_else(|| super::group::nogroup_for_key(c.arg(3), c.arg(2)))?;
    let mut pol = if p.reset { QueuePolicy::default() } else { g.policy().cloned().unwrap_or_default() };
    if p.reset {
        // The counters survive a RESET that sets a new policy.
        pol.counters = g.policy().map(|q| q.counters).unwrap_or_default();
    }
    if let Some(m) = p.max_deliveries {
        pol.max_deliveries = Some(m);
    }
    if let Some(a) = p.ack_timeout {
        pol.ack_timeout = Some(a);
    }
    if let Some(t) = p.consumer_ttl {
        pol.consumer_ttl = Some(t);
    }
    pol.ttl_check_at = 0;
    pol.ttl_scheduled_at = 0;
    let ttl = pol.consumer_ttl;
    g.set_policy(Some(pol));
    // Pending entries deleted before the policy: forgotten now (replicas do the same).
    s.forget_missing_pending(c.arg(3));
    c.reply_ok();
    c.replicate_verbatim();
    if ttl.is_some() {
        // The primary's expiry timer looks at the group now, then when due.
        let now = c.now_ms() as i64;
        crate::ops::due::consumer_ttl(c, Name::Arg(2), Name::Arg(3), now);
    }
    // Blocked `>` readers of this group may have entries due now.
    c.signal_ready(2);
    Ok(())
}

/// CROSSSLOT when keys `a` and `b` hash to different slots in cluster mode.
fn cross_slot(c: &Ctx, a: usize, b: usize) -> Option<Error> {
    let slot = |i: usize| c.call_words(c"CLUSTER", &[b"KEYSLOT", c.arg(i)]).and_then(|r| r.as_ref().integer());
    if !c.in_cluster() {
        return None;
    }
    (slot(a) != slot(b)).then(|| Error::Full("CROSSSLOT Keys in request don't hash to the same slot".into()))
}

/// The policy's fields, unset ones left out: (name, value) with the value an
/// integer or a bulk string.
pub enum PolicyValue<'a> {
    Int(i64),
    Bulk(std::borrow::Cow<'a, [u8]>),
}

pub fn policy_fields(p: &QueuePolicy) -> Vec<(&'static str, PolicyValue<'_>)> {
    let mut out = Vec::new();
    if let Some((n, dl)) = &p.max_deliveries {
        out.push(("maxdeliveries", PolicyValue::Int(i64::try_from(*n).unwrap_or(i64::MAX))));
        match dl {
            DeadLetter::Key(k) => out.push(("deadletter", PolicyValue::Bulk(std::borrow::Cow::Borrowed(&k[..])))),
            DeadLetter::Drop => out.push(("drop", PolicyValue::Int(1))),
        }
    }
    if let Some(at) = &p.ack_timeout {
        out.push(("acktimeout", PolicyValue::Int(at.ms)));
        if at.backoff != 1.0 {
            out.push(("backoff", PolicyValue::Bulk(std::borrow::Cow::Owned(format!("{}", at.backoff).into_bytes()))));
        }
        if let Some(m) = at.max_backoff {
            out.push(("maxbackoff", PolicyValue::Int(m)));
        }
    }
    if let Some(t) = p.consumer_ttl {
        out.push(("consumerttl", PolicyValue::Int(t)));
    }
    out
}

pub fn reply_fields(c: &Ctx, fields: &[(&'static str, PolicyValue<'_>)]) {
    for (name, v) in fields {
        c.reply_bulk(name.as_bytes());
        match v {
            PolicyValue::Int(i) => c.reply_int(*i),
            PolicyValue::Bulk(b) => c.reply_bulk(b),
        }
    }
}

pub fn run_getpolicy(c: &Ctx) -> Result<()> {
    let key = c.key(2, false);
    group_checks(c, &key)?;
    let g = key.stream().and_then(|s| s.group(c.arg(3))).ok_or_else(|| super::group::nogroup_for_key(c.arg(3), c.arg(2)))?;
    let fields = g.policy().map(policy_fields).unwrap_or_default();
    c.reply_map(fields.len());
    reply_fields(c, &fields);
    Ok(())
}

pub fn run_deadletter(c: &Ctx) -> Result<()> {
    // Every ID parsed before anything changes.
    let mut ids = Vec::with_capacity(c.argc().saturating_sub(4));
    for i in 4..c.argc() {
        ids.push(StreamId::parse(c.arg(i), 0, true, false).ok_or(Error::InvalidId)?.0);
    }
    let mut key = c.key(2, true);
    group_checks(c, &key)?;
    let s = key.stream_mut().ok_or(Error::WrongType)?;
    let target = match s.group(c.arg(3)).and_then(|g| g.policy()).and_then(|p| p.max_deliveries.as_ref()) {
        Some((_, t)) => t.clone(),
        None => return Err(Error::Err("the group has no MAXDELIVERIES policy (XS.GROUP SETPOLICY ... DEADLETTER key|DROP)")),
    };
    // Asked for by name, so refused as a command touching a forbidden key is (the triggers
    // of a read deliver instead: DeadLetters::usable).
    if let DeadLetter::Key(k) = &target {
        if &k[..] != c.arg(2) && !c.may_write_named(k) {
            return Err(Error::no_key_permission());
        }
    }
    let mut dl = DeadLetters::new(2, 3, target);
    for id in ids {
        dl.take(c, s, c.arg(3), id, Reason::Manual);
    }
    let n = dl.len();
    dl.flush(c);
    c.reply_int(n as i64);
    Ok(())
}

/// A dead letter's copy: its ID and fields in the dead-letter stream.
type Copied = (StreamId, Vec<Vec<u8>>);

/// Entries taken out of a group for its dead-letter target during one command. Each is a
/// step of its own (issue 34): the copy is appended to the dead-letter stream first, and only
/// once it is there is the entry acknowledged in the source group; an append that fails (the
/// dead-letter stream's IDs exhausted, an entry too large) leaves the entry pending, and the
/// command counts it as not moved. [`DeadLetters::flush`] propagates what was done.
pub struct DeadLetters {
    key_arg: usize,
    group_arg: usize,
    target: DeadLetter,
    /// Whether the target key can take entries (None: not looked at yet).
    usable: Option<bool>,
    /// Each entry taken, with its copy's ID and fields in the dead-letter stream (None: DROP).
    taken: Vec<(Dead, Option<Copied>)>,
}

impl DeadLetters {
    pub fn new(key_arg: usize, group_arg: usize, target: DeadLetter) -> Self {
        DeadLetters { key_arg, group_arg, target, usable: None, taken: Vec::new() }
    }

    /// For the group `gname` of `s` if it has a MAXDELIVERIES policy and the
    /// command may apply it: not a command from the primary or the AOF (they
    /// replay what the primary decided). While the dead-letter key holds another
    /// type, or the client's user may not write it (ACL key patterns: SETPOLICY checked
    /// the user who set the policy, each trigger checks its own; a timer has no user),
    /// nothing is dead-lettered and nothing lost: the entries are delivered as without
    /// a policy, and the server log (and ACL LOG, for a denial) says why (checked on the
    /// first entry over the limit, so that a read with nothing to dead-letter opens no
    /// other key).
    pub fn for_group(c: &Ctx, s: &Stream, gname: &[u8], key_arg: usize, group_arg: usize) -> Option<Self> {
        if c.must_obey() {
            return None;
        }
        let (_, t) = s.group(gname)?.policy()?.max_deliveries.as_ref()?;
        Some(DeadLetters::new(key_arg, group_arg, t.clone()))
    }

    /// Whether the target can receive entries (see [`DeadLetters::for_group`]).
    fn usable(&mut self, c: &Ctx) -> bool {
        if let Some(u) = self.usable {
            return u;
        }
        let u = match &self.target {
            DeadLetter::Key(k) if &k[..] != c.arg(self.key_arg) => {
                let why = if c.open_key_named(k, false).kind() == KeyKind::Other {
                    Some("holds another type")
                } else if !c.may_write_named(k) {
                    Some("may not be written by this client's user (ACL)")
                } else {
                    None
                };
                if let Some(why) = why {
                    crate::ffi::log_warning(&format!("xstream: dead-letter key '{}' {why}: MAXDELIVERIES not applied", String::from_utf8_lossy(k)));
                }
                why.is_none()
            }
            _ => true,
        };
        self.usable = Some(u);
        u
    }

    /// Takes `id` if a delivery bringing its count to `count_after` must
    /// dead-letter it instead (MAXDELIVERIES); true when taken.
    pub fn take_if_over(&mut self, c: &Ctx, s: &mut Stream, gname: &[u8], id: StreamId, count_after: u64) -> bool {
        self.over(s, gname, count_after) && self.take(c, s, gname, id, Reason::MaxDeliveries)
    }

    /// Whether a delivery bringing `id`'s count to `count_after` must dead-letter it.
    pub fn over(&self, s: &Stream, gname: &[u8], count_after: u64) -> bool {
        s.group(gname).and_then(|g| g.policy()).is_some_and(|p| p.over_limit(count_after))
    }

    pub fn len(&self) -> usize {
        self.taken.len()
    }

    pub fn is_empty(&self) -> bool {
        self.taken.is_empty()
    }

    /// Moves `id` to the dead letters: its copy appended to the target stream (created if
    /// missing), then the entry acknowledged in the group and counted. False, with nothing
    /// changed, when it is not pending, when the group has not reached it yet (an ID above
    /// its last ID, pending only through FORCE: the group's `>` reads would deliver it after
    /// its dead letter), or when the copy cannot be appended.
    pub fn take(&mut self, c: &Ctx, s: &mut Stream, gname: &[u8], id: StreamId, reason: Reason) -> bool {
        if !self.usable(c) {
            return false;
        }
        let Some(g) = s.group(gname) else { return false };
        if id > g.last_id {
            return false;
        }
        let Some(n) = g.nack(id).copied() else { return false };
        let copy = match &self.target {
            DeadLetter::Drop => None,
            DeadLetter::Key(dlq) => {
                let dlq = dlq.clone();
                let consumer = g.owner_name(&n).to_vec();
                let mut argv: Vec<Vec<u8>> = vec![
                    b"source-key".to_vec(),
                    c.arg(self.key_arg).to_vec(),
                    b"source-id".to_vec(),
                    id.to_bytes(),
                    b"group".to_vec(),
                    gname.to_vec(),
                    b"consumer".to_vec(),
                    consumer,
                    b"deliveries".to_vec(),
                    n.delivery_count.to_string().into_bytes(),
                    b"reason".to_vec(),
                    reason.as_bytes().to_vec(),
                ];
                if let Some(e) = s.range(id, id, false).next_entry() {
                    for (f, v) in e.fields() {
                        argv.push(f);
                        argv.push(v);
                    }
                }
                match append_copy(c, s, &dlq, self.key_arg, &argv) {
                    Some(new_id) => Some((new_id, argv)),
                    None => {
                        crate::ffi::log_warning(&format!(
                            "xstream: cannot append to dead-letter key '{}' (IDs exhausted, or the entry is too large): entries stay pending",
                            String::from_utf8_lossy(&dlq)
                        ));
                        self.usable = Some(false);
                        return false;
                    }
                }
            }
        };
        let Some(d) = s.group_mut(gname).and_then(|g| g.dead_letter(id, reason)) else { return false };
        self.taken.push((d, copy));
        true
    }

    /// Propagates what was moved: for each entry `XS.ADD dlq <its copy's ID> ...`, then
    /// `XS.ACK key group id` for each.
    pub fn flush(self, c: &Ctx) {
        if self.taken.is_empty() {
            return;
        }
        let n = self.taken.len() as u64;
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_dead_lettered, n);
        if let DeadLetter::Key(dlq) = &self.target {
            for (_, copy) in &self.taken {
                let Some((id, argv)) = copy else { continue };
                let idb = id.to_bytes();
                let mut rep: Vec<Arg> = vec![Arg::New(dlq), Arg::New(&idb)];
                rep.extend(argv.iter().map(|a| Arg::New(a)));
                c.replicate(c"XS.ADD", &rep);
            }
        }
        for (d, _) in &self.taken {
            super::claim::propagate_ack(c, self.key_arg, self.group_arg, d.id);
        }
        c.signal_modified(self.key_arg);
    }
}

/// Appends a dead letter's copy `argv` to `dlq` with `*` (the stream itself when a RENAME
/// made the two one key: SETPOLICY refuses that); the new ID, or None when the key holds
/// another type or the append fails.
fn append_copy(c: &Ctx, src: &mut Stream, dlq: &[u8], key_arg: usize, argv: &[Vec<u8>]) -> Option<StreamId> {
    let fields: Vec<&[u8]> = argv.iter().map(|a| &a[..]).collect();
    let mut other = (dlq != c.arg(key_arg)).then(|| c.open_key_named(dlq, true));
    let st = match other.as_mut() {
        None => src,
        Some(k) => match k.kind() {
            KeyKind::Empty => k.create_stream(Stream::new())?,
            KeyKind::Stream => k.stream_mut()?,
            KeyKind::Other => return None,
        },
    };
    let queued = st.pack_queue().len();
    let id = st.append(&fields, IdSpec::Auto, c.now_ms(), crate::config::limits()).ok()?;
    if st.pack_queue().len() > queued {
        crate::ops::due::sealed(c, Name::Bytes(dlq));
    }
    drop(other);
    c.added_to_named(dlq);
    Some(id)
}
