//! XS.NACK key group SILENT|FAIL|FATAL IDS numids id [id ...] [RETRYCOUNT count] [FORCE]
//!
//! Redis 8.8's XNACK (REDIS8.md §6). Order of checks, as xnackCommand: WRONGTYPE,
//! a missing key or group (NOGROUP, before the mode), the mode (argv[3]), the
//! options from argv[4] in any order, then every ID parsed strictly before
//! anything changes. Each ID in turn (duplicates each time): a pending entry,
//! owned or already NACKed, loses its owner, gets its count from RETRYCOUNT or
//! the mode, delivery time 0, and goes to the end of the group's NACK zone; with
//! FORCE an entry that exists in the stream but is not pending becomes an
//! unowned pending entry the same way (count 0 before the rule); anything else
//! is skipped. The reply is how many IDs were NACKed.
//!
//! When that is > 0: propagated verbatim (deterministic), one change per NACK,
//! and the key is signalled ready (a blocked XS.READGROUP re-runs, which wakes
//! CLAIM readers). No keyspace event, no WATCH signal.

use super::{cstr, is_kw, parse_ll};
use crate::error::{Error, Result};
use crate::ffi::ctx::{Ctx, KeyKind};
use crate::stream::{NackCount, StreamId};

/// The mode word, case-insensitive.
fn mode(arg: &[u8]) -> Option<NackCount> {
    if is_kw(arg, "SILENT") {
        Some(NackCount::Silent)
    } else if is_kw(arg, "FAIL") {
        Some(NackCount::Fail)
    } else if is_kw(arg, "FATAL") {
        Some(NackCount::Fatal)
    } else {
        None
    }
}

fn unrecognized(opt: &[u8]) -> Error {
    Error::Full(format!("ERR Unrecognized XNACK option '{}'", String::from_utf8_lossy(cstr(opt))))
}

pub fn run(c: &Ctx) -> Result<()> {
    let argc = c.argc();
    if argc < 7 {
        return Err(Error::WrongArity);
    }
    let mut key = c.key(1, true);
    if key.kind() == KeyKind::Other {
        return Err(key.wrong_type());
    }
    let gname = c.arg(2);
    if key.stream().and_then(|s| s.group(gname)).is_none() {
        return Err(super::claim::nogroup(c));
    }
    let mut rule = mode(c.arg(3)).ok_or(Error::Err("mode must be SILENT, FAIL, or FATAL"))?;
    let mut retrycount: Option<u64> = None;
    let mut force = false;
    let mut ids: Option<(usize, usize)> = None;
    let mut i = 4;
    while i < argc {
        let moreargs = argc - 1 - i;
        let opt = c.arg(i);
        if is_kw(opt, "IDS") && moreargs > 0 {
            let n = match parse_ll(c.arg(i + 1)) {
                Ok(n) if (1..=i64::from(i32::MAX)).contains(&n) => n as u64,
                _ => return Err(Error::Err("numids must be a positive integer")),
            };
            if n > (moreargs - 1) as u64 {
                return Err(Error::Err("number of IDs doesn't match numids"));
            }
            // n <= moreargs - 1 < argc: fits.
            let n = n as usize;
            ids = Some((i + 2, n));
            i += n + 2;
        } else if is_kw(opt, "RETRYCOUNT") && moreargs > 0 {
            let v = parse_ll(c.arg(i + 1))?;
            // From the primary or the AOF a negative count is a count wrapped past LLONG_MAX
            // (below `latest`, as the built-in's uint64 counter), written as the long long it
            // reads as (AOF rewrite, src/ffi/types.rs): restored as is.
            if v < 0 && !c.must_obey() {
                return Err(Error::Err("Invalid RETRYCOUNT value, must be >= 0"));
            }
            retrycount = Some(v as u64);
            i += 2;
        } else if is_kw(opt, "FORCE") {
            force = true;
            i += 1;
        } else {
            return Err(unrecognized(opt));
        }
    }
    let (first, n) = ids.ok_or(Error::Err("syntax error, expected IDS keyword"))?;
    if let Some(v) = retrycount {
        rule = NackCount::Set(v);
    }
    // Every ID parsed before anything changes (bounded by argc).
    let mut parsed = Vec::with_capacity(n);
    for j in first..first + n {
        parsed.push(StreamId::parse(c.arg(j), 0, true, false).ok_or(Error::InvalidId)?.0);
    }
    let s = key.stream_mut().ok_or(Error::WrongType)?;
    // A queue policy with MAXDELIVERIES: FATAL dead-letters at once (issue 16).
    let dl = if rule == NackCount::Fatal { super::queue::DeadLetters::for_group(c, s, gname, 1, 2) } else { None };
    // FORCE looks each ID up in the stream, a dead letter copies its entry: their nodes are
    // read before anything changes (a node on disk that cannot be read back is an error then).
    if force || dl.is_some() {
        super::read_first(s, |s| s.read_nodes_of(parsed.iter().copied()))?;
    }
    let mut fatal: Vec<StreamId> = Vec::new();
    let mut count = 0u64;
    for id in parsed {
        let pending = s.group(gname).is_some_and(|g| g.nack(id).is_some());
        let create = !pending && force && s.contains(id);
        if !pending && !create {
            continue;
        }
        let Some(g) = s.group_mut(gname) else { break };
        if g.nack_entry(id, rule, create) {
            count += 1;
            if dl.is_some() {
                fatal.push(id);
            }
        }
    }
    c.reply_int(count as i64);
    if count > 0 {
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_nacked, count);
        c.replicate_verbatim();
        c.add_dirty(count - 1);
        c.signal_ready(1);
    }
    if let Some(mut d) = dl {
        for id in fatal {
            d.take(c, s, gname, id, crate::stream::queue::Reason::NackFatal);
        }
        d.flush(c);
    }
    Ok(())
}
