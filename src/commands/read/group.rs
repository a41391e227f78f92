//! One stream of a group read: history, claimed, due, scheduled and new entries, with the
//! queue policies, and what each propagates.

use super::*;

/// One stream's part of a group read (see [`serve_group`]).
pub(super) struct GroupRead {
    pub(super) group_arg: usize,
    pub(super) key_idx: usize,
    /// First ID to serve: after the group's last ID (`>`), or the history start.
    pub(super) start: StreamId,
    /// COUNT within MAXCOUNT; 0 = all.
    pub(super) count: u64,
    pub(super) noack: bool,
    pub(super) history: bool,
    pub(super) blocked: bool,
    /// CLAIM min-idle-time (ms), for `>` reads.
    pub(super) claim: Option<i64>,
    pub(super) now: i64,
}

/// Serves a group read on one stream: the consumer is looked up (seen now) or
/// created, then history or new entries are replied and recorded.
///
/// Propagation and the dirty counter follow t_stream.c of 7.0: a read served
/// synchronously counts one change per stream (`if (groups) server.dirty++`),
/// and a created consumer one more (SCC_DEFAULT); a read served to a blocked
/// client (blocked.c) counts only the consumer. What goes out:
/// - a created consumer: `XS.GROUP CREATECONSUMER` (the built-in sends it only
///   with NOACK; sending it always keeps the replica's consumers equal after a
///   history read, and counts the built-in's change). For a blocked reader
///   without NOACK the delivery below creates it instead.
/// - `>` with acknowledgement: ONE `XS.CLAIM key group consumer 0 id1 .. idN TIME t
///   RETRYCOUNT 1 FORCE JUSTID LASTID last ENTRIESREAD n` for all the entries
///   delivered (each got the same time and count 1), where the built-in sends one
///   XCLAIM per entry plus `XGROUP SETID ... ENTRIESREAD` (7.4; 7.0 leaves
///   entries-read stale on replicas). One command is one change, as theirs.
///   ENTRIESREAD is an internal option of XS.CLAIM, accepted only from the
///   primary or the AOF.
/// - `>` with NOACK: `XS.GROUP SETID key group last ENTRIESREAD n`.
/// - a history read propagates nothing (as the built-in: delivery counts and
///   times of re-read entries stay on the primary) and counts its change.
///
/// A blocked reader therefore counts one change more than the built-in's (its
/// delivery must be propagated, and every module propagation counts one).
pub(super) fn serve_group(c: &Ctx, s: &mut crate::stream::Stream, g: &[u8], r: &GroupRead, budget: &mut Budget) -> Result<()> {
    let (group_arg, key_idx, now) = (r.group_arg, r.key_idx, r.now);
    let consumer_name = c.arg(group_arg + 1);
    // (A `>` read of the command or of a blocked reader run again read its nodes in
    // serve.rs `new_or_due`, before its purge: only history reads and 7.0's signalled
    // readers read them here.)
    if r.history || r.blocked {
        crate::commands::read_first(s, |s| read_group_nodes(s, g, consumer_name, r))?;
    }
    let slot = group_consumer(c, s, g, group_arg, key_idx, r.noack, r.blocked, now)?;
    // Queue policies (issue 16): MAXDELIVERIES dead letters, CONSUMERTTL expiry.
    let mut dl = crate::commands::queue::DeadLetters::for_group(c, s, g, key_idx, group_arg);
    if !r.history && !c.must_obey() {
        expire_consumers(c, s, r);
    }
    let result = serve_group_policy(c, s, g, r, slot, consumer_name, budget, &mut dl);
    if let Some(d) = dl {
        d.flush(c);
    }
    result
}

/// The nodes a group read reads: the entries after the group's last ID (`>`, COUNT of them),
/// or those of the consumer's pending IDs from the start (history).
fn read_group_nodes(s: &crate::stream::Stream, g: &[u8], consumer: &[u8], r: &GroupRead) {
    if r.history {
        read_history_nodes(s, g, consumer, r.start, r.count);
    } else {
        read_new_nodes(s, g, r.claim, r.noack, r.now, r.count);
    }
}

/// The nodes a history read reads: those of the consumer's pending IDs from `start`, `count`
/// of them (0 = all). None without the group or the consumer.
pub(super) fn read_history_nodes(s: &crate::stream::Stream, g: &[u8], consumer: &[u8], start: StreamId, count: u64) {
    let Some(grp) = s.group(g) else { return };
    let Some(cons) = grp.find_consumer(consumer).and_then(|slot| grp.consumer(slot)) else { return };
    let mut it = crate::stream::group::pel_from(cons.pel(), start);
    let mut left = if count == 0 { usize::MAX } else { count as usize };
    while left > 0 {
        let Some((k, _)) = it.next() else { break };
        s.contains(StreamId::from_be_bytes(k).unwrap_or_default());
        left -= 1;
    }
}

/// The nodes a `>` read of group `g` may read, whatever it then finds: the entries it takes
/// first (CLAIM's claimable ones, or the policy's due ones; under MAXDELIVERIES up to
/// [`PURGE_MAX`] more, which the purge may send to the dead letters), the scheduled entries
/// due, then COUNT new ones (more past a stream's delayed entries). Read first
/// (`read_first`): each of those passes claims, delivers or dead-letters entry by entry and
/// propagates at its end, so a node that cannot be read back must stop the read before the
/// first of them changes anything. An over-estimate costs reads of nodes only, and only while
/// nodes are on disk.
pub(super) fn read_new_nodes(s: &crate::stream::Stream, g: &[u8], claim: Option<i64>, noack: bool, now: i64, count: u64) {
    let Some(grp) = s.group(g) else { return };
    let purge = grp.policy().is_some_and(|p| p.max_deliveries.is_some());
    let limit = if count == 0 {
        0
    } else if purge {
        count.saturating_add(PURGE_MAX)
    } else {
        count
    };
    let taken = match claim {
        Some(min_idle) => s.claim_candidates(g, min_idle, now, limit),
        None if !noack && redelivers(s, g) => grp.due_entries(now, limit, |id| s.contains(id)),
        None => Vec::new(),
    };
    for (id, _) in taken {
        s.contains(id);
    }
    if grp.schedule().is_some() {
        for id in grp.scheduled_due(now, count) {
            s.contains(id);
        }
    }
    let start = grp.last_id.next().unwrap_or(StreamId::MAX);
    let past_delayed = if count == 0 { 0 } else { count.saturating_add(s.delayed_count() as u64) };
    s.read_nodes_forward(start, past_delayed);
}

/// Entries over MAXDELIVERIES moved to the dead letters by one read at most
/// ([`purge_over_limit`]).
const PURGE_MAX: u64 = 1000;

/// CONSUMERTTL on a `>` read (src/ops/consumers.rs), then the group
/// registered for the primary's expiry timer at its next possible expiry.
pub(super) fn expire_consumers(c: &Ctx, s: &mut crate::stream::Stream, r: &GroupRead) {
    let (key, group) = (Name::Arg(r.key_idx), Name::Arg(r.group_arg));
    if let Some(next) = crate::ops::consumers::expire(c, s, key, group, Some(c.arg(r.group_arg + 1)), r.now) {
        crate::ops::due::consumer_ttl(c, key, group, next);
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn serve_group_policy(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    r: &GroupRead,
    slot: u32,
    consumer_name: &[u8],
    budget: &mut Budget,
    dl: &mut Option<crate::commands::queue::DeadLetters>,
) -> Result<()> {
    let (group_arg, key_idx, now) = (r.group_arg, r.key_idx, r.now);
    if r.history {
        if let Some(d) = dl.as_mut() {
            // MAXDELIVERIES: the consumer's entries this read would deliver once too
            // often go to the dead letters first (and are not replied).
            let over: Vec<StreamId> = match s.group(g).and_then(|grp| grp.consumer(slot).map(|cons| (grp, cons))) {
                Some((grp, cons)) => {
                    let mut v = Vec::new();
                    let mut it = crate::stream::group::pel_from(cons.pel(), r.start);
                    let mut seen = 0u64;
                    while let Some((k, _)) = it.next() {
                        if r.count != 0 && seen == r.count {
                            break;
                        }
                        seen += 1;
                        let id = StreamId::from_be_bytes(k).unwrap_or_default();
                        if grp
                            .nack(id)
                            .is_some_and(|n| grp.policy().is_some_and(|p| p.over_limit(crate::stream::group::count_plus_one(n.delivery_count))))
                        {
                            v.push(id);
                        }
                    }
                    v
                }
                None => Vec::new(),
            };
            for id in over {
                if s.contains(id) {
                    d.take(c, s, g, id, crate::stream::queue::Reason::MaxDeliveries);
                }
            }
        }
    }
    c.reply_array_postponed();
    if r.history {
        // 8.8 saturates delivery counts at LLONG_MAX; the hosts' built-ins wrap. Under
        // MAXDELIVERIES they saturate too (a wrapped count would escape the limit).
        let saturate = crate::config::level() >= Level::Latest || dl.is_some();
        // Under a queue policy the counts and times decide (MAXDELIVERIES, the ack timeout's
        // backoff): the re-read entries' new ones go out (below), which the built-in's history
        // reads never propagate.
        let policy = s.group(g).is_some_and(|grp| grp.policy().is_some()) && !c.must_obey();
        let mut reread: Vec<StreamId> = Vec::new();
        let n = s.read_group_history(g, slot, r.start, r.count, now, saturate, |id, e| {
            if policy && e.is_some() {
                reread.push(id);
            }
            match &e {
                Some(e) => crate::commands::range::reply_entry(c, e),
                None => {
                    c.reply_array(2);
                    c.reply_id(id);
                    c.reply_null_array();
                }
            }
            budget.add_entry(e.as_ref(), id, None)
        });
        c.set_array_len(n as usize);
        budget.add_array(n);
        if let Some(grp) = s.group_mut(g) {
            grp.count_deliveries(n, n);
        }
        if let Some(grp) = s.group(g).filter(|_| !reread.is_empty()) {
            // As XS.CLAIM to the same consumer: TIME now, RETRYCOUNT the new count, one
            // command per run of equal counts.
            let counted: Vec<(StreamId, u64)> = reread.iter().filter_map(|&id| grp.nack(id).map(|nk| (id, nk.delivery_count))).collect();
            for run in counted.chunk_by(|a, b| a.1 == b.1) {
                let ids: Vec<StreamId> = run.iter().map(|(id, _)| *id).collect();
                propagate_claim_ids(c, key_idx, group_arg, &ids, now, run.first().map_or(1, |x| x.1), grp.last_id, None);
            }
        }
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_redelivered, n);
        // 7.0 counts every stream served; 7.4 only those that propagated something,
        // which a history read never does.
        if crate::config::level() < Level::V7_4 {
            c.add_dirty(1);
        }
        return Ok(());
    }
    // CLAIM: the claimable pending entries first; COUNT covers them and the new ones.
    // Without CLAIM, a group whose policy redelivers (ACKTIMEOUT / CONSUMERTTL):
    // its due entries first, in the form of new ones.
    let (claimed, go_on) = match r.claim {
        Some(min_idle) => serve_taken(c, s, g, slot, r, Take::Claimed(min_idle), budget, dl),
        None if !r.noack && !c.must_obey() && redelivers(s, g) => serve_taken(c, s, g, slot, r, Take::Due, budget, dl),
        None => (0, true),
    };
    // Delayed delivery: scheduled entries now due, before new ones.
    let (scheduled, go_on) = if go_on && (r.count == 0 || r.count > claimed) {
        let limit = if r.count == 0 { 0 } else { r.count - claimed };
        serve_scheduled(c, s, g, slot, r, limit, budget)
    } else {
        (0, go_on)
    };
    let claimed_only = claimed;
    let claimed = claimed + scheduled;
    let count_new = if r.count == 0 { 0 } else { r.count.saturating_sub(claimed) };
    // Bounded by the entries actually delivered.
    let mut delivered: Vec<(StreamId, Nack)> = Vec::new();
    // Entries passed over into the schedule (streams with delayed entries only).
    let mut skipped: Vec<StreamId> = Vec::new();
    let track = s.delayed.is_some() && !c.must_obey();
    let (n, moved) = if go_on && (r.count == 0 || count_new > 0) {
        let four = r.claim.is_some();
        s.read_group_new(g, slot, r.start, count_new, r.noack, now, crate::config::lag_rules(), track.then_some(&mut skipped), |e, nack, _| {
            if four {
                reply_entry_claimed(c, &e, 0, 0);
            } else {
                crate::commands::range::reply_entry(c, &e);
            }
            if let Some(nk) = nack {
                delivered.push((e.id(), nk));
            }
            budget.add_entry(Some(&e), e.id(), four.then_some((0, 0)))
        })
    } else {
        (0, false)
    };
    c.set_array_len((claimed + n) as usize);
    budget.add_array(claimed + n);
    if let Some(grp) = s.group_mut(g) {
        grp.count_deliveries(claimed + n, claimed_only);
    }
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_delivered, n + scheduled);
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_claimed, claimed_only);
    let Some(grp) = s.group_mut(g) else { return Ok(()) };
    if !delivered.is_empty() {
        // 7.2's active-time: the last time entries went into this consumer's PEL.
        if let Some(cons) = grp.consumer_mut(slot) {
            cons.active_time = now;
        }
        propagate_deliveries(c, key_idx, group_arg, consumer_name, &delivered, grp.last_id, grp.entries_read);
    } else if moved {
        propagate_group_id(c, key_idx, group_arg, grp.last_id, grp.entries_read);
    }
    if !skipped.is_empty() {
        // After the group's last ID went out: the replica checks each ID is behind it.
        propagate_schedule(c, key_idx, group_arg, b"SCHEDULE", &skipped);
        wake_at_next_scheduled(c, s, g, key_idx);
    }
    Ok(())
}

/// Delayed delivery (src/stream/delay.rs): before a `>` read of group `g` decides
/// whether the stream has something new, the delayed entries right after the
/// group's last ID that are not due are passed over (scheduled; the last ID and
/// entries-read move past them), propagated as `XS.GROUP SETID key group last
/// ENTRIESREAD n` then `XS.GROUP SCHEDULE key group id ...`. The primary only.
///
/// Returns true when it stopped at its cap (PASS_OVER_MAX) on an entry still to pass
/// over: a read that may wait then serves no new entry from this stream (only due ones),
/// and the readers blocked on the key re-run at once to go on (bounded work per run); a
/// read that answers now calls it again until it ends (serve.rs `new_or_due`).
pub(super) fn pass_over_delayed(c: &Ctx, s: &mut crate::stream::Stream, g: &[u8], key_idx: usize, group_arg: usize, now: i64) -> bool {
    if s.delayed.is_none() || c.must_obey() {
        return false;
    }
    let ids = s.pass_over_delayed(g, now, crate::config::lag_rules());
    if ids.is_empty() {
        return false;
    }
    if let Some(grp) = s.group(g) {
        propagate_group_id(c, key_idx, group_arg, grp.last_id, grp.entries_read);
    }
    propagate_schedule(c, key_idx, group_arg, b"SCHEDULE", &ids);
    wake_at_next_scheduled(c, s, g, key_idx);
    let capped = ids.len() >= crate::stream::delay::PASS_OVER_MAX;
    if capped {
        crate::ops::due::wake_readers(c, c.selected_db(), std::iter::once(c.arg(key_idx)), now);
    }
    capped
}

/// Readers blocked on the key re-run when the group's earliest scheduled entry is due.
pub(super) fn wake_at_next_scheduled(c: &Ctx, s: &crate::stream::Stream, g: &[u8], key_idx: usize) {
    if let Some(due) = s.group(g).and_then(|grp| grp.next_scheduled()) {
        crate::ops::due::wake_readers(c, c.selected_db(), std::iter::once(c.arg(key_idx)), due);
    }
}

/// IDs per propagated XS.GROUP SCHEDULE / UNSCHEDULE.
pub(super) const SCHEDULE_BATCH: usize = 1000;

/// `XS.GROUP SCHEDULE|UNSCHEDULE key group id ...`, in batches.
pub(super) fn propagate_schedule(c: &Ctx, key_idx: usize, group_arg: usize, sub: &[u8], ids: &[StreamId]) {
    for chunk in ids.chunks(SCHEDULE_BATCH) {
        let texts: Vec<Vec<u8>> = chunk.iter().map(|id| id.to_bytes()).collect();
        let mut args: Vec<Arg> = Vec::with_capacity(texts.len() + 3);
        args.extend([Arg::New(sub), Arg::Orig(key_idx), Arg::Orig(group_arg)]);
        args.extend(texts.iter().map(|t| Arg::New(t)));
        c.replicate(c"XS.GROUP", &args);
    }
}

/// Whether group `g` has a scheduled entry due at `now`.
pub(super) fn scheduled_now(s: &crate::stream::Stream, g: &[u8], now: i64) -> bool {
    s.group(g).is_some_and(|grp| grp.next_scheduled().is_some_and(|d| d <= now))
}

/// The scheduled part of a `>` read (delayed delivery): entries of the group's
/// schedule due at `now`, by (due, ID), at most `limit` (0 = all) within the
/// budget, replied as new entries are and delivered as new entries are (a NACK
/// with count 1 at the time list's tail, or none with NOACK). Propagated as the
/// deliveries' `XS.CLAIM ... FORCE JUSTID LASTID` (a forced claim takes an entry
/// out of the schedule), or with NOACK `XS.GROUP UNSCHEDULE key group id ...`.
pub(super) fn serve_scheduled(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    slot: u32,
    r: &GroupRead,
    limit: u64,
    budget: &mut Budget,
) -> (u64, bool) {
    let now = r.now;
    let Some(grp) = s.group(g) else { return (0, true) };
    if grp.schedule().is_none() || c.must_obey() {
        return (0, true);
    }
    let last = grp.last_id;
    let ids = grp.scheduled_due(now, limit);
    let mut done: Vec<StreamId> = Vec::new();
    let mut go_on = true;
    let four = r.claim.is_some();
    for id in ids {
        let more = {
            let Some(e) = s.range(id, id, false).next_entry() else { continue };
            if four {
                reply_entry_claimed(c, &e, 0, 0);
            } else {
                crate::commands::range::reply_entry(c, &e);
            }
            budget.add_entry(Some(&e), id, four.then_some((0, 0)))
        };
        if let Some(grp) = s.group_mut(g) {
            grp.unschedule(id);
            if !r.noack {
                grp.deliver_new(id, slot, now);
            }
        }
        done.push(id);
        if !more {
            go_on = false;
            break;
        }
    }
    if done.is_empty() {
        return (0, go_on);
    }
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_scheduled_delivered, done.len() as u64);
    if r.noack {
        propagate_schedule(c, r.key_idx, r.group_arg, b"UNSCHEDULE", &done);
    } else {
        if let Some(cons) = s.group_mut(g).and_then(|grp| grp.consumer_mut(slot)) {
            cons.active_time = now;
        }
        propagate_claim_ids(c, r.key_idx, r.group_arg, &done, now, 1, last, None);
    }
    (done.len() as u64, go_on)
}

/// The reading consumer of group `g`, seen now, or created (see [`serve_group`]
/// for what a creation propagates).
#[allow(clippy::too_many_arguments)]
pub(super) fn group_consumer(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    group_arg: usize,
    key_idx: usize,
    noack: bool,
    blocked: bool,
    now: i64,
) -> Result<u32> {
    let grp = s.group_mut(g).ok_or(Error::Err("group vanished"))?;
    let (slot, created) = crate::commands::claim::consumer_slot(c, grp, c.arg(group_arg + 1), now, key_idx)?;
    if created && (!blocked || noack) {
        c.replicate(c"XS.GROUP", &[Arg::Word(Word::CreateConsumer), Arg::Orig(key_idx), Arg::Orig(group_arg), Arg::Orig(group_arg + 1)]);
    }
    Ok(slot)
}

/// Propagates the entries a `>` read delivered, with the group's new last ID and
/// entries-read, as one XS.CLAIM (see [`serve_group`]). Deliveries of one read
/// share their time and count; should they not, each goes out on its own,
/// followed by the group's counters.
pub(super) fn propagate_deliveries(
    c: &Ctx,
    key_idx: usize,
    group_arg: usize,
    consumer: &[u8],
    delivered: &[(StreamId, Nack)],
    last: StreamId,
    entries_read: i64,
) {
    let Some(&(_, first)) = delivered.first() else { return };
    let shared = delivered.iter().all(|(_, nk)| nk.delivery_time == first.delivery_time && nk.delivery_count == first.delivery_count);
    if !shared {
        for (id, nk) in delivered {
            propagate_xclaim(c, key_idx, group_arg, consumer, *id, nk, last);
        }
        propagate_group_id(c, key_idx, group_arg, last, entries_read);
        return;
    }
    let ids: Vec<StreamId> = delivered.iter().map(|(id, _)| *id).collect();
    propagate_claim_ids(c, key_idx, group_arg, &ids, first.delivery_time, first.delivery_count, last, Some(entries_read));
}

/// A CLAIM read's entry: `[id, [field, value ...], idle ms, delivery count]`
/// (new entries: idle and count 0).
pub(super) fn reply_entry_claimed(c: &Ctx, e: &crate::stream::Entry<'_>, idle_ms: i64, count: i64) {
    c.reply_array(4);
    c.reply_id(e.id());
    c.reply_array(e.numfields() * 2);
    e.for_each_field(|f, v| {
        c.reply_value(f);
        c.reply_value(v);
    });
    c.reply_int(idle_ms);
    c.reply_int(count);
}

/// Whether group `g` of `s` has a pending entry that CLAIM `min_idle` takes now:
/// the first live one in delivery-time order qualifies (§4.3).
pub(super) fn claimable_now(s: &crate::stream::Stream, g: &[u8], min_idle: i64, now: i64) -> bool {
    s.claim_first_live(g).is_some_and(|n| crate::stream::claim::claimable(&n, min_idle, now))
}

/// Which pending entries a `>` read takes before new ones.
#[derive(Clone, Copy, Debug)]
pub(super) enum Take {
    /// CLAIM min-idle (REDIS8.md §4.4): the group's pending entries in delivery-time order, from
    /// the head, while idle for at least `min_idle` ms (NACKed ones always). Each is replied as
    /// `[id, fields, idle, count before this claim]`.
    Claimed(i64),
    /// A group whose policy redelivers (issue 16): the NACK zone (FIFO), then entries past
    /// their ack timeout, longest overdue first. Each is replied as a new entry (`[id,
    /// fields]`) and counted in `entries_timed_out`.
    Due,
}

/// The pending entries a `>` read takes first (see [`Take`]), within COUNT and the budget.
/// Entries whose stream data is gone are skipped and stay pending; an entry that would go past
/// MAXDELIVERIES goes to the dead letters instead. Each one taken moves to the reader: its
/// count + 1 (saturating), its delivery time now (the time list's tail). Returns (entries
/// taken, whether the budget lets the read go on).
///
/// Propagation: the claims in order, as `XS.CLAIM key group consumer 0 id.. TIME now
/// RETRYCOUNT n FORCE JUSTID LASTID <group last ID, unchanged by claims>`, one command per run
/// of entries with the same new count (the built-in sends one XCLAIM per entry; in order, so
/// the replica's time list ends the same).
#[expect(clippy::too_many_arguments, reason = "one stream of a group read: the stream, the group, the consumer, the read, the budget")]
pub(super) fn serve_taken(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    slot: u32,
    r: &GroupRead,
    take: Take,
    budget: &mut Budget,
    dl: &mut Option<crate::commands::queue::DeadLetters>,
) -> (u64, bool) {
    let now = r.now;
    let Some(grp) = s.group(g) else { return (0, true) };
    let last = grp.last_id;
    // Bounded by COUNT (or the PEL when COUNT is 0).
    let candidates = match take {
        Take::Claimed(min_idle) => s.claim_candidates(g, min_idle, now, r.count),
        Take::Due => grp.due_entries(now, r.count, |id| s.contains(id)),
    };
    let mut taken: Vec<(StreamId, u64)> = Vec::new();
    let mut go_on = true;
    for (id, old) in candidates {
        if let Some(d) = dl.as_mut() {
            if d.take_if_over(c, s, g, id, crate::stream::group::count_plus_one(old.delivery_count)) {
                continue;
            }
        }
        let more = {
            let Some(e) = s.range(id, id, false).next_entry() else { continue };
            match take {
                Take::Claimed(_) => {
                    let idle = now.saturating_sub(old.delivery_time);
                    // As XS.PENDING shows it (a count past LLONG_MAX, left by a wrapping
                    // claim below `latest`, reads as a negative long long).
                    let count = old.delivery_count as i64;
                    reply_entry_claimed(c, &e, idle, count);
                    budget.add_entry(Some(&e), id, Some((idle, count)))
                }
                Take::Due => {
                    crate::commands::range::reply_entry(c, &e);
                    budget.add_entry(Some(&e), id, None)
                }
            }
        };
        // At the time list's tail, one more delivery (saturating at LLONG_MAX). The
        // entry is pending (a candidate just found): the claim cannot miss it.
        let count = s
            .group_mut(g)
            .and_then(|grp| grp.claim(id, slot, DeliveryTime::Now(now), crate::stream::ClaimCount::Increment, false))
            .map_or(crate::stream::group::count_plus_one(old.delivery_count), |nk| nk.delivery_count);
        taken.push((id, count));
        if !more {
            go_on = false;
            break;
        }
    }
    if taken.is_empty() {
        return (0, go_on);
    }
    if let Some(cons) = s.group_mut(g).and_then(|grp| grp.consumer_mut(slot)) {
        cons.active_time = now;
    }
    if matches!(take, Take::Due) {
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_timed_out, taken.len() as u64);
    }
    for run in taken.chunk_by(|a, b| a.1 == b.1) {
        let ids: Vec<StreamId> = run.iter().map(|(id, _)| *id).collect();
        let count = run.first().map_or(1, |(_, n)| *n);
        propagate_claim_ids(c, r.key_idx, r.group_arg, &ids, now, count, last, None);
    }
    (taken.len() as u64, go_on)
}

/// Whether group `g` of `s` has a policy under which `>` reads redeliver.
pub(super) fn redelivers(s: &crate::stream::Stream, g: &[u8]) -> bool {
    s.group(g).and_then(|grp| grp.policy()).is_some_and(|p| p.redelivers())
}

/// Before a `>` read decides whether a stream has something to serve: the
/// entries it would take first (CLAIM's claimable ones, or the policy's due ones)
/// that MAXDELIVERIES sends to the dead letters go there now, until the first COUNT
/// of them (all, without COUNT) can be delivered, so that a read never serves a
/// stream only to reply no entry for it (and a blocked reader is not woken for
/// nothing). At most PURGE_MAX entries per read: returns true when it stopped there
/// with more to look at; the read then serves no due entry from this stream (new
/// ones still), and readers blocked on the key re-run at once to go on.
#[allow(clippy::too_many_arguments)]
pub(super) fn purge_over_limit(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    key_idx: usize,
    group_arg: usize,
    claim: Option<i64>,
    noack: bool,
    now: i64,
    count: u64,
) -> bool {
    // What the read would take first: its COUNT of entries (at most PURGE_MAX).
    let head = if count == 0 { PURGE_MAX } else { count.min(PURGE_MAX) };
    let Some(pol) = s.group(g).and_then(|grp| grp.policy()) else { return false };
    if pol.max_deliveries.is_none() || (claim.is_none() && (noack || !pol.redelivers())) {
        return false;
    }
    let Some(mut d) = crate::commands::queue::DeadLetters::for_group(c, s, g, key_idx, group_arg) else { return false };
    let mut moved = 0u64;
    let capped = loop {
        let candidates = match claim {
            Some(min_idle) => s.claim_candidates(g, min_idle, now, head),
            None => s.group(g).map(|grp| grp.due_entries(now, head, |id| s.contains(id))).unwrap_or_default(),
        };
        let mut taken = 0u64;
        for (id, n) in candidates {
            if moved + taken >= PURGE_MAX {
                break;
            }
            taken += u64::from(d.take_if_over(c, s, g, id, crate::stream::group::count_plus_one(n.delivery_count)));
        }
        moved += taken;
        if taken == 0 {
            break false;
        }
        if moved >= PURGE_MAX {
            break true;
        }
    };
    d.flush(c);
    if capped {
        crate::ops::due::wake_readers(c, c.selected_db(), std::iter::once(c.arg(key_idx)), now);
    }
    capped
}

/// Whether a `>` read of group `g` has a due entry to serve now (issue 16).
pub(super) fn due_now(s: &crate::stream::Stream, g: &[u8], now: i64) -> bool {
    s.group(g).is_some_and(|grp| !grp.due_entries(now, 1, |id| s.contains(id)).is_empty())
}
