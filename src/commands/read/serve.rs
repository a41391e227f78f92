//! The one serving loop of XS.READ / XS.READGROUP: the command's own pass, the re-run of a
//! blocked reader (7.2+, and CLAIM / queue-policy readers on every host), and 7.0's service of
//! the one signalled key. What differs between the three is only which streams are looked at
//! and whether each has something to serve ([`Pass`]); the reply, the budget and the serving
//! of a stream are the same code.

use super::*;

/// Who is serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pass {
    /// The command itself (xreadCommand's loop).
    Command,
    /// A blocked reader, served by running its command again (Redis 7.2+; CLAIM and
    /// queue-policy readers whatever the level), `$` resolved when it blocked.
    Reexecuted,
    /// Redis 7.0's serveClientsBlockedOnStreamKey: only the signalled key (its first
    /// occurrence), served if something was added after the reader's ID.
    Signalled(usize),
}

/// A read to serve.
pub(super) struct Read<'a> {
    pub(super) pass: Pass,
    pub(super) streams_arg: usize,
    pub(super) from: &'a [ReadFrom],
    pub(super) group_arg: Option<usize>,
    pub(super) noack: bool,
    pub(super) claim: Option<i64>,
    /// COUNT (0: none).
    pub(super) count: u64,
    pub(super) maxcount: u64,
    pub(super) maxsize: u64,
    pub(super) now: i64,
    /// The read may wait (BLOCK where blocking is allowed, or a blocked reader run again):
    /// a pass over delayed entries stopped on its cap then wakes the readers of the key to
    /// go on. A read that answers now goes on itself.
    pub(super) waits: bool,
}

/// What one stream gets.
enum Step {
    Skip,
    /// Entries after `after`; `history`: a group read of the consumer's own pending entries;
    /// `one`: the single last entry (XREAD `+`).
    Serve {
        after: StreamId,
        history: bool,
        one: bool,
    },
}

/// Serves `r`: Ok(true) when a reply was sent (the streams served, or for a blocked reader an
/// error it must be told), Ok(false) when nothing could be served (the command blocks or
/// answers nil; a blocked reader stays blocked). An error of the command's own pass is the
/// command's error reply; a blocked reader is answered the error in place.
pub(super) fn serve(c: &Ctx, r: &Read<'_>) -> Result<bool> {
    let gname = r.group_arg.map(|ga| (c.arg(ga), ga));
    let resp3 = c.is_resp3();
    let mut served = 0usize;
    let mut budget = Budget::new(r.maxcount, r.maxsize, resp3);
    if let (Some((g, ga)), Pass::Command | Pass::Reexecuted) = (gname, r.pass) {
        if let Err(e) = read_group_streams_first(c, r, g, ga, budget.stream_count(r.count)) {
            if r.pass == Pass::Command {
                return Err(e);
            }
            // A blocked reader run again: its whole reply becomes the error
            // (src/ffi/blocking.rs).
            crate::listpack::cold_read_failed();
        }
    }
    for (k, &rf) in r.from.iter().enumerate() {
        if matches!(r.pass, Pass::Signalled(only) if only != k) {
            continue;
        }
        if budget.exhausted() {
            // MAXCOUNT / MAXSIZE reached: the later streams are not looked at (not
            // served, and 7.2's consumer creation does not reach them either).
            break;
        }
        let key_idx = r.streams_arg + k;
        let mut key = c.key(key_idx, gname.is_some());
        let Some(s) = key.stream_mut() else {
            if matches!(r.pass, Pass::Signalled(_)) && gname.is_some() {
                // A group reader woken because its key went away (7.2 servers with
                // `compat 7.0`): 7.0's answer.
                return Err(Error::Full("UNBLOCKED the stream key no longer exists".into()));
            }
            continue;
        };
        let step = match r.pass {
            Pass::Command => step_command(c, s, r, gname, key_idx, rf)?,
            Pass::Reexecuted => step_reexecuted(c, s, r, gname, key_idx, rf),
            Pass::Signalled(_) => step_signalled(s, gname, rf)?,
        };
        let Step::Serve { after, history, one } = step else { continue };
        served += 1;
        stream_header(c, resp3, served, key_idx);
        budget.add_stream(c.arg(key_idx));
        // streamIncrID wraps the last possible ID to 0-0, and so do we.
        let start = after.next().unwrap_or(StreamId::MIN);
        let Some((g, ga)) = gname else {
            let n = if one { 1 } else { budget.stream_count(r.count) };
            reply_range_budget(c, s, start, n, &mut budget);
            continue;
        };
        let read = GroupRead {
            group_arg: ga,
            key_idx,
            start,
            count: budget.stream_count(r.count),
            noack: r.noack,
            history,
            blocked: matches!(r.pass, Pass::Signalled(_)),
            // CLAIM is ignored by history reads (and unknown to 7.0).
            claim: if history || matches!(r.pass, Pass::Signalled(_)) { None } else { r.claim },
            now: r.now,
        };
        if let Err(e) = serve_group(c, s, g, &read, &mut budget) {
            if r.pass == Pass::Command {
                return Err(e);
            }
            if e == Error::Err(crate::error::COLD_READ_FAILED) {
                // A blocked reader served now: its whole reply becomes the error
                // (src/ffi/blocking.rs).
                crate::listpack::cold_read_failed();
            }
            // Cannot happen (the group was just found); keep the reply well formed.
            c.reply_error(&e.message());
        }
    }
    if served == 0 {
        return Ok(false);
    }
    close_streams(c, resp3, served);
    Ok(true)
}

/// Whether a `>` read of group `g` has something now: new entries (unless the pass over
/// delayed entries stopped on its cap), claimable entries (CLAIM), entries due again
/// (ACKTIMEOUT), scheduled entries due. Runs the purge of entries over MAXDELIVERIES and the
/// pass over delayed entries first. Returns (has something, the group's last ID).
///
/// The nodes the read may need are read first (the purge and the passes change entries one
/// by one and propagate at their end): a node on disk that cannot be read back is an error
/// before anything changed.
fn new_or_due(c: &Ctx, s: &mut crate::stream::Stream, r: &Read<'_>, g: &[u8], ga: usize, key_idx: usize) -> Result<(bool, StreamId)> {
    let now = r.now;
    crate::commands::read_first(s, |s| read_new_nodes(s, g, r.claim, r.noack, now, r.count))?;
    let purge_capped = purge_over_limit(c, s, g, key_idx, ga, r.claim, r.noack, now, r.count);
    let mut capped = pass_over_delayed(c, s, g, key_idx, ga, now);
    // A read that answers now returns what a read without the cap would: it passes over
    // the rest itself, PASS_OVER_MAX entries (and their propagation) at a time.
    while capped && !r.waits {
        capped = pass_over_delayed(c, s, g, key_idx, ga, now);
    }
    let last = s.group(g).map_or(StreamId::MAX, |g| g.last_id);
    let has_new = !capped && s.length > 0 && s.last_valid_id() > last;
    // §4.3: with CLAIM, a stream with a claimable entry is served too ("claimed only" when
    // nothing is new).
    let claimable = match r.claim {
        Some(min_idle) => !purge_capped && claimable_now(s, g, min_idle, now),
        None => !purge_capped && !r.noack && redelivers(s, g) && due_now(s, g, now),
    } || scheduled_now(s, g, now);
    Ok((has_new || claimable, last))
}

/// A group read reads the nodes it may need on every stream of the call before the first
/// stream creates a consumer (7.2), claims, dead-letters or delivers anything: a node kept on
/// disk that cannot be read back (`xstream.tier-dir`) then ends the read with an error before
/// it changed anything, on any of its streams. The nodes read stay decoded for the command
/// (`Stream::probe`); `count` is the first stream's count, an over-estimate for the others.
/// Free while no node is on disk.
fn read_group_streams_first(c: &Ctx, r: &Read<'_>, g: &[u8], ga: usize, count: u64) -> Result<()> {
    if !crate::tier::cold::has_cold() {
        return Ok(());
    }
    let consumer = c.arg(ga + 1);
    for (k, &rf) in r.from.iter().enumerate() {
        let key = c.key(r.streams_arg + k, false);
        let Some(s) = key.stream() else { continue };
        crate::commands::read_first(s, |s| match rf {
            ReadFrom::New => read_new_nodes(s, g, r.claim, r.noack, r.now, count),
            ReadFrom::After(id) => read_history_nodes(s, g, consumer, id.next().unwrap_or(StreamId::MIN), count),
            ReadFrom::Last(_) => {}
        })?;
    }
    Ok(())
}

/// The command's own pass (xreadCommand).
fn step_command(c: &Ctx, s: &mut crate::stream::Stream, r: &Read<'_>, gname: Option<(&[u8], usize)>, key_idx: usize, rf: ReadFrom) -> Result<Step> {
    if let (Some((g, ga)), true) = (gname, crate::config::level() >= Level::V7_2) {
        // 7.2: the consumer exists (and is seen) on every stream of the call, served or not.
        group_consumer(c, s, g, ga, key_idx, r.noack, false, r.now)?;
    }
    Ok(match (gname, rf) {
        (Some(_), ReadFrom::After(id)) => Step::Serve { after: id, history: true, one: false },
        (Some((g, ga)), ReadFrom::New) => match new_or_due(c, s, r, g, ga, key_idx)? {
            (true, last) => Step::Serve { after: last, history: false, one: false },
            (false, _) => Step::Skip,
        },
        (None, ReadFrom::After(id)) if s.length > 0 && s.last_valid_id() > id => Step::Serve { after: id, history: false, one: false },
        // Served from the last live entry itself, one entry.
        (None, ReadFrom::Last(_)) if s.length > 0 => {
            Step::Serve { after: s.last_valid_id().prev().unwrap_or(StreamId::MAX), history: false, one: true }
        }
        _ => Step::Skip,
    })
}

/// A blocked reader run again: its consumer is seen on every stream it reads.
fn step_reexecuted(c: &Ctx, s: &mut crate::stream::Stream, r: &Read<'_>, gname: Option<(&[u8], usize)>, key_idx: usize, rf: ReadFrom) -> Step {
    match (gname, rf) {
        (Some((g, ga)), _) => {
            if group_consumer(c, s, g, ga, key_idx, r.noack, false, r.now).is_err() || s.group(g).is_none() {
                return Step::Skip;
            }
            match new_or_due(c, s, r, g, ga, key_idx) {
                Ok((true, last)) => Step::Serve { after: last, history: false, one: false },
                Ok((false, _)) => Step::Skip,
                // A blocked reader run again: its whole reply becomes the error
                // (src/ffi/blocking.rs).
                Err(_) => crate::listpack::cold_read_failed(),
            }
        }
        (None, ReadFrom::After(id) | ReadFrom::Last(id)) if s.length > 0 && s.last_valid_id() > id => {
            Step::Serve { after: id, history: false, one: false }
        }
        _ => Step::Skip,
    }
}

/// 7.0: the signalled key, if an entry was added after the reader's ID (the group's last ID).
fn step_signalled(s: &crate::stream::Stream, gname: Option<(&[u8], usize)>, rf: ReadFrom) -> Result<Step> {
    let after = match (gname, rf) {
        (Some((g, _)), _) => match s.group(g) {
            Some(grp) => grp.last_id,
            None => return Err(Error::Full("NOGROUP the consumer group this client was blocked on no longer exists".into())),
        },
        (None, ReadFrom::After(id) | ReadFrom::Last(id)) => id,
        (None, ReadFrom::New) => return Ok(Step::Skip),
    };
    Ok(if s.last_id <= after { Step::Skip } else { Step::Serve { after, history: false, one: false } })
}
