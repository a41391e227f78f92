//! XS.CLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME ms]
//!          [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id]
//! XS.AUTOCLAIM key group consumer min-idle-time start [COUNT n] [JUSTID]
//!
//! Replication (COMPAT.md §4): never the command itself; the claimed PEL entries
//! go out as `XS.CLAIM key group consumer 0 id [id ...] TIME t RETRYCOUNT n FORCE
//! JUSTID LASTID group-last-id`, one command per run of consecutive claims that
//! share their time and count (the built-in sends one XCLAIM per entry), which
//! sets the replica's NACKs exactly. A PEL entry whose stream entry is gone goes
//! out on its own in the one-ID form (the replica, not finding the entry either,
//! drops its NACK).
//!
//! `ENTRIESREAD n` is an internal option, accepted only from the primary or the
//! AOF: XS.READGROUP propagates a `>` read as one XS.CLAIM for all its entries
//! with the group's new entries-read (read.rs); a user gets the built-in's
//! "Unrecognized XCLAIM option" error for it.

use super::{cstr, is_kw, parse_ll};
use crate::config::Level;
use crate::error::{Error, NoGroup, Result};
use crate::ffi::ctx::{Arg, Ctx, KeyKind, Word};
use crate::stream::id::IdText;
use crate::stream::{ClaimCount, DeliveryTime, Nack, StreamId};

/// The consumer called `name`, seen now, or created (with its keyspace event on
/// key argument `key_arg`), as streamLookupConsumer / streamCreateConsumer.
/// `.1` tells whether it was created: the built-in counts that as a change
/// (SCC_DEFAULT), and the caller accounts for it (see [`Ctx::add_dirty`]).
pub fn consumer_slot(c: &Ctx, g: &mut crate::stream::Group, name: &[u8], now: i64, key_arg: usize) -> Result<(u32, bool)> {
    if let Some(sl) = g.lookup_consumer(name, Some(now)) {
        return Ok((sl, false));
    }
    let sl = g.create_consumer(name, now).ok_or(Error::Err("cannot create consumer"))?;
    c.notify(c"xgroup-createconsumer", key_arg);
    Ok((sl, true))
}

/// The consumer for a claim (XS.CLAIM / XS.AUTOCLAIM), created on first use (7.0)
/// or up front (7.2). A creation goes out as `XS.GROUP CREATECONSUMER` (one
/// change, as the built-in counts it): a 7.2 claim that claims nothing propagates
/// nothing else, and the built-in then loses the consumer on replicas and in the
/// AOF; ours keep it.
fn claim_slot(c: &Ctx, slot: &mut Option<u32>, g: &mut crate::stream::Group, name: &[u8], now: i64) -> Result<u32> {
    if let Some(sl) = *slot {
        return Ok(sl);
    }
    let (sl, created) = consumer_slot(c, g, name, now, 1)?;
    if created {
        c.replicate(c"XS.GROUP", &[Arg::Word(Word::CreateConsumer), Arg::Orig(1), Arg::Orig(2), Arg::Orig(3)]);
    }
    Ok(*slot.insert(sl))
}

/// Propagates one NACK's state in the XCLAIM form ([`propagate_claim_ids`] of one ID,
/// for a consumer that is not an argument of the command).
pub fn propagate_xclaim(c: &Ctx, key_arg: usize, group_arg: usize, consumer: &[u8], id: StreamId, nack: &Nack, group_last: StreamId) {
    replicate_claim(c, key_arg, group_arg, Arg::New(consumer), &[id], nack.delivery_time, nack.delivery_count, group_last, None);
}

/// The claims of one XS.CLAIM / XS.AUTOCLAIM not yet propagated. The built-in
/// propagates one XCLAIM per claimed entry and counts one change for each; here
/// consecutive claims that leave the same delivery time, count and group last ID go
/// out as one `XS.CLAIM` of all their IDs ([`propagate_claim_ids`], the form a `>`
/// read uses; the replica applies them in order), and the dirty counter still
/// gains one per entry. A claim whose state differs, and anything else the command
/// propagates in its loop (the cleanup of a deleted entry), first sends the run;
/// what it propagates after the loop (the group's ID, the dead letters, which
/// [`super::queue::DeadLetters`] sends at its flush) follows it, as before.
/// Per entry that saves the command's own argument vector (one lookup of the
/// dirty counter's command is left: [`Ctx::add_dirty_exact`]).
#[derive(Default)]
struct ClaimRun {
    ids: Vec<StreamId>,
    time: i64,
    count: u64,
    last: StreamId,
}

impl ClaimRun {
    /// Claimed entry `id`, now in state `nk`, with the group's last ID `last`.
    fn push(&mut self, c: &Ctx, id: StreamId, nk: &Nack, last: StreamId) {
        if !self.ids.is_empty() && (nk.delivery_time, nk.delivery_count, last) != (self.time, self.count, self.last) {
            self.flush(c);
        }
        if self.ids.is_empty() {
            (self.time, self.count, self.last) = (nk.delivery_time, nk.delivery_count, last);
        }
        self.ids.push(id);
    }

    /// Propagates the run (the consumer is argument 3 of both commands).
    fn flush(&mut self, c: &Ctx) {
        let Some(more) = self.ids.len().checked_sub(1) else { return };
        propagate_claim_ids(c, 1, 2, &self.ids, self.time, self.count, self.last, None);
        c.add_dirty_exact(more as u64);
        self.ids.clear();
    }
}

/// Propagates pending entries that now belong to the reading consumer (argument
/// `group_arg + 1`) with one delivery time and count, as ONE `XS.CLAIM key group
/// consumer 0 id1 .. idN TIME t RETRYCOUNT n FORCE JUSTID LASTID last
/// [ENTRIESREAD er]`: the replica applies the IDs in order, each as the built-in's
/// one-ID XCLAIM would (an entry gone from its stream is dropped from its PEL).
#[allow(clippy::too_many_arguments)]
pub fn propagate_claim_ids(
    c: &Ctx,
    key_idx: usize,
    group_arg: usize,
    ids: &[StreamId],
    time: i64,
    count: u64,
    last: StreamId,
    entries_read: Option<i64>,
) {
    replicate_claim(c, key_idx, group_arg, Arg::Orig(group_arg + 1), ids, time, count, last, entries_read);
}

/// `XS.CLAIM key group consumer 0 id1 .. idN TIME t RETRYCOUNT n FORCE JUSTID LASTID
/// last [ENTRIESREAD er]`. The IDs' text in one vector, whatever their number.
#[allow(clippy::too_many_arguments)]
fn replicate_claim(
    c: &Ctx,
    key_arg: usize,
    group_arg: usize,
    consumer: Arg<'_>,
    ids: &[StreamId],
    time: i64,
    count: u64,
    last: StreamId,
    entries_read: Option<i64>,
) {
    if ids.is_empty() {
        return;
    }
    let ids: Vec<IdText> = ids.iter().map(|id| id.text()).collect();
    let time = time.to_string();
    // As a long long, as streamPropagateXCLAIM: a count past LLONG_MAX (wrapped below
    // compat latest) goes out negative, which the receiving XS.CLAIM applies (it refuses
    // a number above LLONG_MAX).
    let retry = (count as i64).to_string();
    let last = last.text();
    let er = entries_read.map(|n| n.to_string());
    let mut args: Vec<Arg> = Vec::with_capacity(ids.len() + 14);
    args.extend([Arg::Orig(key_arg), Arg::Orig(group_arg), consumer, Arg::Word(Word::Zero)]);
    args.extend(ids.iter().map(|id| Arg::New(id)));
    args.extend([
        Arg::Word(Word::Time),
        Arg::New(time.as_bytes()),
        Arg::Word(Word::RetryCount),
        Arg::New(retry.as_bytes()),
        Arg::Word(Word::Force),
        Arg::Word(Word::JustId),
        Arg::Word(Word::LastId),
        Arg::New(&last),
    ]);
    if let Some(er) = &er {
        args.extend([Arg::Word(Word::EntriesRead), Arg::New(er.as_bytes())]);
    }
    c.replicate(c"XS.CLAIM", &args);
}

/// One more delivery: saturating at LLONG_MAX at `xstream.compat latest` (8.8) and
/// under MAXDELIVERIES (`policy`: a count wrapped past LLONG_MAX would read as small and
/// escape the limit), wrapping otherwise as the hosts' built-ins do (REDIS8.md §6.3).
fn increment(policy: bool) -> ClaimCount {
    if policy || crate::config::level() >= Level::Latest {
        ClaimCount::Increment
    } else {
        ClaimCount::IncrementWrapping
    }
}

/// Propagates `XS.ACK key group id`: how XCLAIM / XAUTOCLAIM clean a NACKed
/// (unowned) entry whose stream entry is gone, there being no consumer to name in
/// an XCLAIM (REDIS8.md §6.3, §10).
pub fn propagate_ack(c: &Ctx, key_arg: usize, group_arg: usize, id: StreamId) {
    let id_text = id.to_bytes();
    c.replicate(c"XS.ACK", &[Arg::Orig(key_arg), Arg::Orig(group_arg), Arg::New(&id_text)]);
}

/// The deleted entry `id` with PEL entry `nk` leaves the PEL: propagated as an
/// XCLAIM naming its owner, or as an XACK when it has none (NACKed). Returns
/// whether the propagation carried the group's last ID.
fn propagate_cleanup(c: &Ctx, g: &crate::stream::Group, id: StreamId, nk: &Nack) -> bool {
    if nk.is_unowned() {
        propagate_ack(c, 1, 2, id);
        return false;
    }
    let owner = g.owner_name(nk).to_vec();
    propagate_xclaim(c, 1, 2, &owner, id, nk, g.last_id);
    true
}

/// Propagates a group's last ID and read counter (XGROUP SETID ... ENTRIESREAD).
pub fn propagate_group_id(c: &Ctx, key_arg: usize, group_arg: usize, last: StreamId, entries_read: i64) {
    let last = last.to_bytes();
    let er = entries_read.to_string();
    c.replicate(
        c"XS.GROUP",
        &[Arg::Word(Word::SetId), Arg::Orig(key_arg), Arg::Orig(group_arg), Arg::New(&last), Arg::Word(Word::EntriesRead), Arg::New(er.as_bytes())],
    );
}

/// NOGROUP for the key (argument 1) and group (argument 2) of XCLAIM, XAUTOCLAIM, XNACK.
pub(crate) fn nogroup(c: &Ctx) -> Error {
    Error::no_group(NoGroup::KeyOrGroup, c.arg(1), c.arg(2))
}

/// getLongLongFromObjectOrReply with a custom message.
fn ll_or(arg: &[u8], msg: &'static str) -> Result<i64> {
    parse_ll(arg).map_err(|_| Error::Err(msg))
}

pub fn run_claim(c: &Ctx) -> Result<()> {
    let mut key = c.key(1, true);
    if key.kind() == KeyKind::Other {
        return Err(key.wrong_type());
    }
    let gname = c.arg(2);
    if key.stream().and_then(|s| s.group(gname)).is_none() {
        return Err(nogroup(c));
    }
    let minidle = ll_or(c.arg(4), "Invalid min-idle-time argument for XCLAIM")?.max(0);
    // IDs up to the first argument that is not one; options after.
    let mut ids = Vec::new();
    let mut j = 5;
    while j < c.argc() {
        match StreamId::parse(c.arg(j), 0, true, false) {
            Some((id, _)) => ids.push((id, j)),
            None => break,
        }
        j += 1;
    }
    let now = c.now_ms() as i64;
    let mut retrycount: i64 = -1;
    let mut retrycount_given = false;
    let mut deliverytime: i64 = -1;
    let mut force = false;
    let mut justid = false;
    let mut last_id = StreamId::MIN;
    let mut entries_read: Option<i64> = None;
    while j < c.argc() {
        let moreargs = c.argc() - 1 - j;
        let opt = c.arg(j);
        if is_kw(opt, "FORCE") {
            force = true;
        } else if is_kw(opt, "JUSTID") {
            justid = true;
        } else if is_kw(opt, "IDLE") && moreargs > 0 {
            j += 1;
            deliverytime = now.wrapping_sub(ll_or(c.arg(j), "Invalid IDLE option argument for XCLAIM")?);
        } else if is_kw(opt, "TIME") && moreargs > 0 {
            j += 1;
            deliverytime = ll_or(c.arg(j), "Invalid TIME option argument for XCLAIM")?;
        } else if is_kw(opt, "RETRYCOUNT") && moreargs > 0 {
            j += 1;
            retrycount = ll_or(c.arg(j), "Invalid RETRYCOUNT option argument for XCLAIM")?;
            retrycount_given = true;
        } else if is_kw(opt, "LASTID") && moreargs > 0 {
            j += 1;
            last_id = StreamId::parse(c.arg(j), 0, true, false).ok_or(Error::InvalidId)?.0;
        } else if is_kw(opt, "ENTRIESREAD") && moreargs > 0 && c.must_obey() {
            // Internal: the group's entries-read after a `>` read, propagated with
            // its deliveries (read.rs). Users get the built-in's error below.
            j += 1;
            entries_read = Some(ll_or(c.arg(j), "Invalid ENTRIESREAD option argument for XCLAIM")?);
        } else {
            return Err(Error::Full(format!("ERR Unrecognized XCLAIM option '{}'", String::from_utf8_lossy(cstr(opt)))));
        }
        j += 1;
    }
    let s = key.stream_mut().ok_or(Error::WrongType)?;
    super::read_first(s, |s| s.read_nodes_of(ids.iter().map(|&(id, _)| id)))?;
    let mut propagate_last_id = false;
    {
        let g = s.group_mut(gname).ok_or_else(|| nogroup(c))?;
        if last_id > g.last_id {
            g.last_id = last_id;
            propagate_last_id = true;
        }
    }
    // IDLE / TIME place the entry by sorted insertion in the time list; the
    // default delivery "now" appends it at the tail.
    let explicit_time = deliverytime != -1;
    if deliverytime == -1 || deliverytime < 0 || deliverytime > now {
        deliverytime = now;
    }
    let when = if explicit_time { DeliveryTime::At(deliverytime) } else { DeliveryTime::Now(deliverytime) };
    let name = c.arg(3);
    let mut slot: Option<u32> = None;
    if crate::config::level() >= Level::V7_2 {
        // 7.2: the consumer exists (and is seen) even if nothing is claimed.
        let g = s.group_mut(gname).ok_or_else(|| nogroup(c))?;
        claim_slot(c, &mut slot, g, name, now)?;
    }
    c.reply_array_postponed();
    let mut dl = super::queue::DeadLetters::for_group(c, s, gname, 1, 2);
    let mut n = 0usize;
    let mut run = ClaimRun::default();
    for &(id, _) in &ids {
        let exists = s.contains(id);
        let g = s.group_mut(gname).ok_or_else(|| nogroup(c))?;
        let nack = g.nack(id).copied();
        if !exists {
            if let Some(nk) = nack {
                run.flush(c);
                if propagate_cleanup(c, g, id, &nk) {
                    propagate_last_id = false;
                }
                g.ack(id);
            }
            continue;
        }
        if nack.is_none() && !force {
            continue;
        }
        if let Some(nk) = nack {
            // 8.8: a NACKed (unowned) entry is claimable whatever the min-idle.
            if minidle != 0 && !nk.is_unowned() && now - nk.delivery_time < minidle {
                continue;
            }
        }
        // A negative RETRYCOUNT is ignored, as t_stream.c does (`if (retrycount >= 0)`),
        // except from the primary or the AOF: below `latest` a count past LLONG_MAX wraps
        // (as the built-in's uint64 counter, XNACK FATAL then a claim) and is propagated as
        // the negative long long it reads as; ignoring it would leave the replica's count
        // behind the primary's (the built-in's own replicas do diverge there).
        let rule = if retrycount >= 0 || (retrycount_given && c.must_obey()) {
            ClaimCount::Set(retrycount as u64)
        } else if !justid {
            increment(dl.is_some())
        } else {
            ClaimCount::Keep
        };
        // MAXDELIVERIES: a claim with the entry is a delivery (not JUSTID).
        if let (Some(d), Some(nk), false) = (dl.as_mut(), nack, justid) {
            let after = match rule {
                ClaimCount::Set(n) => n,
                _ => crate::stream::group::count_plus_one(nk.delivery_count),
            };
            if d.take_if_over(c, s, gname, id, after) {
                continue;
            }
        }
        let g = s.group_mut(gname).ok_or_else(|| nogroup(c))?;
        let sl = claim_slot(c, &mut slot, g, name, now)?;
        let Some(updated) = g.claim(id, sl, when, rule, true) else { continue };
        if let Some(cons) = g.consumer_mut(sl) {
            cons.active_time = now;
        }
        let glast = g.last_id;
        if justid {
            c.reply_id(id);
        } else {
            super::range::reply_entries(c, s, id, id, 1, false);
        }
        n += 1;
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_claimed, 1);
        run.push(c, id, &updated, glast);
        propagate_last_id = false;
    }
    run.flush(c);
    if propagate_last_id {
        if let Some(g) = s.group(gname) {
            propagate_group_id(c, 1, 2, g.last_id, g.entries_read);
        }
    }
    if let (Some(er), Some(g)) = (entries_read, s.group_mut(gname)) {
        g.entries_read = er;
    }
    if let Some(d) = dl {
        d.flush(c);
    }
    if let Some(g) = s.group_mut(gname) {
        g.count_deliveries(n as u64, n as u64);
    }
    c.set_array_len(n);
    Ok(())
}

/// The largest COUNT XAUTOCLAIM accepts (LONG_MAX / max(sizeof(streamID), 10)).
const AUTOCLAIM_COUNT_MAX: i64 = i64::MAX / 16;
/// Entries examined per entry claimed at most (attempts_factor).
const AUTOCLAIM_ATTEMPTS_FACTOR: i64 = 10;

pub fn run_autoclaim(c: &Ctx) -> Result<()> {
    let minidle = ll_or(c.arg(4), "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let (start, ex) = StreamId::parse_interval(c.arg(5), 0).ok_or(Error::InvalidId)?;
    let start = if ex { start.next().ok_or(Error::Err("invalid start ID for the interval"))? } else { start };
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < c.argc() {
        let moreargs = c.argc() - 1 - j;
        let opt = c.arg(j);
        if is_kw(opt, "COUNT") && moreargs > 0 {
            count = match parse_ll(c.arg(j + 1)) {
                Ok(v) if (1..=AUTOCLAIM_COUNT_MAX).contains(&v) => v,
                _ => return Err(Error::Err("COUNT must be > 0")),
            };
            j += 1;
        } else if is_kw(opt, "JUSTID") {
            justid = true;
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    let mut key = c.key(1, true);
    if key.kind() == KeyKind::Other {
        return Err(key.wrong_type());
    }
    let gname = c.arg(2);
    if key.stream().and_then(|s| s.group(gname)).is_none() {
        return Err(nogroup(c));
    }
    let s = key.stream_mut().ok_or(Error::WrongType)?;
    let now = c.now_ms() as i64;
    let name = c.arg(3);
    let mut attempts = count.saturating_mul(AUTOCLAIM_ATTEMPTS_FACTOR);
    super::read_first(s, |s| {
        let Some(g) = s.group(gname) else { return };
        let mut it = crate::stream::group::pel_from(g.pel(), start);
        let mut left = attempts;
        while left > 0 {
            let Some((k, _)) = it.next() else { break };
            s.contains(StreamId::from_be_bytes(k).unwrap_or_default());
            left -= 1;
        }
    })?;
    // The deleted IDs are collected while the claimed entries are replied; the
    // vector grows with what is found (never preallocated from COUNT).
    let mut deleted: Vec<StreamId> = Vec::new();
    let mut slot: Option<u32> = None;
    if crate::config::level() >= Level::V7_2 {
        // 7.2: the consumer exists (and is seen) even if nothing is claimed.
        let g = s.group_mut(gname).ok_or_else(|| nogroup(c))?;
        claim_slot(c, &mut slot, g, name, now)?;
    }
    // The cursor (reply[0]) is only known at the end: the claimed IDs are
    // collected (bounded by the PEL) and their entries replied after it.
    let mut claimed: Vec<StreamId> = Vec::new();
    let mut dl = super::queue::DeadLetters::for_group(c, s, gname, 1, 2);
    let mut run = ClaimRun::default();
    // Where the next PEL lookup starts; None once the last possible ID was seen.
    let mut cursor = Some(start);
    let next_cursor;
    loop {
        let g = s.group(gname).ok_or_else(|| nogroup(c))?;
        let next = cursor.and_then(|from| {
            let mut it = crate::stream::group::pel_from(g.pel(), from);
            it.next().map(|(k, n)| (StreamId::from_be_bytes(k).unwrap_or_default(), *n))
        });
        if attempts == 0 || count == 0 {
            next_cursor = next.map_or(StreamId::MIN, |(id, _)| id);
            break;
        }
        attempts -= 1;
        let Some((id, nack)) = next else {
            next_cursor = StreamId::MIN;
            break;
        };
        cursor = id.next();
        if !s.contains(id) {
            let g = s.group_mut(gname).ok_or_else(|| nogroup(c))?;
            run.flush(c);
            propagate_cleanup(c, g, id, &nack);
            g.ack(id);
            deleted.push(id);
            count -= 1;
            continue;
        }
        // 8.8: a NACKed (unowned) entry is claimable whatever the min-idle.
        if minidle != 0 && !nack.is_unowned() && now - nack.delivery_time < minidle {
            continue;
        }
        if let (Some(d), false) = (dl.as_mut(), justid) {
            if d.take_if_over(c, s, gname, id, crate::stream::group::count_plus_one(nack.delivery_count)) {
                count -= 1;
                continue;
            }
        }
        let g = s.group_mut(gname).ok_or_else(|| nogroup(c))?;
        let sl = claim_slot(c, &mut slot, g, name, now)?;
        let rule = if justid { ClaimCount::Keep } else { increment(dl.is_some()) };
        let Some(updated) = g.claim(id, sl, DeliveryTime::Now(now), rule, false) else { continue };
        if let Some(cons) = g.consumer_mut(sl) {
            cons.active_time = now;
        }
        let glast = g.last_id;
        claimed.push(id);
        count -= 1;
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_claimed, 1);
        run.push(c, id, &updated, glast);
    }
    run.flush(c);
    if let Some(d) = dl {
        d.flush(c);
    }
    if let Some(g) = s.group_mut(gname) {
        g.count_deliveries(claimed.len() as u64, claimed.len() as u64);
    }
    c.reply_array(3);
    c.reply_id(next_cursor);
    c.reply_array(claimed.len());
    for &id in &claimed {
        if justid {
            c.reply_id(id);
        } else {
            super::range::reply_entries(c, s, id, id, 1, false);
        }
    }
    c.reply_array(deleted.len());
    for &id in &deleted {
        c.reply_id(id);
    }
    Ok(())
}
