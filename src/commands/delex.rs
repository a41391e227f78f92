//! XS.DELEX key [KEEPREF|DELREF|ACKED] IDS numids id [id ...]
//! XS.ACKDEL key group [KEEPREF|DELREF|ACKED] IDS numids id [id ...]
//!
//! Redis 8.2's XDELEX / XACKDEL (REDIS8.md §3.3-3.4). Order of checks, as
//! xdelexCommand / xackdelCommand: WRONGTYPE, the options
//! (streamParseAckDelArgsOrReply), a missing key (or group) answers -1 per ID
//! without reading the IDs, then every ID is parsed strictly before anything
//! changes. One integer per ID: -1 not found (XACKDEL: not pending in the
//! group), 1 deleted, 2 kept because still referenced (ACKED).

use super::{cstr, is_kw, parse_ll};
use crate::error::{Error, Result};
use crate::ffi::ctx::{Ctx, KeyKind};
use crate::stream::{DelOutcome, RefPolicy, StreamId};

/// The options after the key (XDELEX) or the group (XACKDEL).
struct DelArgs {
    policy: RefPolicy,
    /// Index of the first ID argument.
    first_id: usize,
    numids: usize,
}

/// streamParseAckDelArgsOrReply: tokens in any order, case-insensitive; one
/// policy; `IDS numids` followed by exactly that many IDs (a surplus argument is
/// read as an option and is a syntax error).
fn parse(c: &Ctx, from: usize) -> Result<DelArgs> {
    let argc = c.argc();
    let mut policy = None;
    let mut ids: Option<(usize, usize)> = None;
    let mut i = from;
    while i < argc {
        let moreargs = argc - 1 - i;
        let opt = c.arg(i);
        if is_kw(opt, "ids") && moreargs > 0 {
            let n = match parse_ll(c.arg(i + 1)) {
                Ok(n) if n >= 1 => n as u64,
                _ => return Err(Error::Err("Number of IDs must be a positive integer")),
            };
            if n > (moreargs - 1) as u64 {
                return Err(Error::Err("The `numids` parameter must match the number of arguments"));
            }
            // n <= moreargs - 1 < argc: fits.
            let n = n as usize;
            ids = Some((i + 2, n));
            i += n + 2;
            continue;
        }
        match RefPolicy::from_keyword(cstr(opt)) {
            Some(p) if policy.is_none() => policy = Some(p),
            _ => return Err(Error::Syntax),
        }
        i += 1;
    }
    let (first_id, numids) = ids.ok_or(Error::Err("IDS option is required"))?;
    Ok(DelArgs { policy: policy.unwrap_or_default(), first_id, numids })
}

/// The strict parse of every ID (no `-` / `+`), before anything changes. The
/// vector is bounded by argc.
fn parse_ids(c: &Ctx, a: &DelArgs) -> Result<Vec<StreamId>> {
    let mut ids = Vec::with_capacity(a.numids);
    for i in a.first_id..a.first_id + a.numids {
        ids.push(StreamId::parse(c.arg(i), 0, true, false).ok_or(Error::InvalidId)?.0);
    }
    Ok(ids)
}

fn reply_all(c: &Ctx, n: usize, v: i64) {
    c.reply_array(n);
    for _ in 0..n {
        c.reply_int(v);
    }
}

fn reply_outcome(c: &Ctx, out: &DelOutcome) {
    c.reply_array(out.replies.len());
    for &r in &out.replies {
        c.reply_int(r);
    }
}

/// Signals, events and propagation after an XDELEX / XACKDEL.
///
/// Propagated verbatim (the command is deterministic) whenever it changed
/// anything: an entry deleted or a PEL entry removed (XACKDEL's acks, DELREF's
/// cleanup; the built-in XDELEX counts only deletions as changes, so a DELREF
/// cleanup of an entry already gone would not reach its replicas: ours do). The
/// dirty counter gets what the built-in's gets (measured on Redis 8.2.3): XDELEX one
/// change per deletion, XACKDEL one per ack (an ack whose entry is then deleted
/// still counts once: `XACKDEL k g IDS 2 1-0 9-0 KEEPREF` with 1-0 pending adds 1).
fn after(c: &Ctx, out: &DelOutcome, acks: u64) {
    if out.deleted > 0 {
        c.signal_modified(1);
        c.notify(c"xdel", 1);
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_deleted, out.deleted);
    }
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_acked, acks);
    if out.deleted > 0 || out.unreferenced > 0 {
        c.replicate_verbatim();
        let changes = if acks > 0 { acks } else { out.deleted };
        if changes > 1 {
            c.add_dirty(changes - 1);
        }
    }
}

pub fn run_delex(c: &Ctx) -> Result<()> {
    let mut key = c.key(1, true);
    if key.kind() == KeyKind::Other {
        return Err(key.wrong_type());
    }
    let a = parse(c, 2)?;
    if key.kind() == KeyKind::Empty {
        reply_all(c, a.numids, -1);
        return Ok(());
    }
    let ids = parse_ids(c, &a)?;
    let s = key.stream_mut().ok_or(Error::WrongType)?;
    super::read_first(s, |s| s.read_nodes_of(ids.iter().copied()))?;
    let out = s.delete_ex(&ids, a.policy);
    if out.deleted > 0 {
        crate::ops::trim::compact_touched(s, &ids);
    }
    reply_outcome(c, &out);
    after(c, &out, 0);
    Ok(())
}

pub fn run_ackdel(c: &Ctx) -> Result<()> {
    let mut key = c.key(1, true);
    if key.kind() == KeyKind::Other {
        return Err(key.wrong_type());
    }
    let a = parse(c, 3)?;
    let has_group = key.stream().is_some_and(|s| s.group(c.arg(2)).is_some());
    if !has_group {
        reply_all(c, a.numids, -1);
        return Ok(());
    }
    let ids = parse_ids(c, &a)?;
    let s = key.stream_mut().ok_or(Error::WrongType)?;
    super::read_first(s, |s| s.read_nodes_of(ids.iter().copied()))?;
    let Some(out) = s.ack_del(c.arg(2), &ids, a.policy) else {
        reply_all(c, a.numids, -1);
        return Ok(());
    };
    if out.deleted > 0 {
        crate::ops::trim::compact_touched(s, &ids);
    }
    reply_outcome(c, &out);
    let acks = out.replies.iter().filter(|&&r| r != -1).count() as u64;
    after(c, &out, acks);
    Ok(())
}
