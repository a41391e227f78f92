//! Idempotent production commands (Redis 8.6, REDIS8.md §5):
//!
//! - `XS.CFGSET key [IDMP-DURATION seconds] [IDMP-MAXSIZE n]` (XCFGSET)
//! - `XS.IDMPRECORD key pid iid stream-id` (XIDMPRECORD, internal: AOF rewrite)
//! - `XS.IDMPEXPIRE key now-ms LIMIT work [FROM pid]` (ours, internal): the time-driven
//!   expiry as an explicit command. Only the primary's timer decides to run it
//!   (src/jobs/idmp.rs); replicas and AOF replay apply it as received and never
//!   expire on their own clock. `now-ms` is the primary's clock; the cutoff is
//!   `now-ms - duration*1000` with the stream's own (replicated) duration, so the same
//!   state and arguments remove the same iids everywhere.
//!
//! XS.ADD's IDMP / IDMPAUTO options are in add.rs.

use super::{is_kw, parse_ll};
use crate::error::{Error, Result};
use crate::ffi::ctx::{Ctx, Name};
use crate::stream::idmp::{self, Recorded};
use crate::stream::StreamId;

/// XS.CFGSET key [IDMP-DURATION seconds] [IDMP-MAXSIZE n] [MAXAGE ms [EXACT]]
///
/// MAXAGE (ours, issue 17, docs/retention.md) stores a retention age (0 removes it);
/// the trimming it asks for is the primary's (on writes and by its timer,
/// src/jobs/age.rs), propagated as explicit trims.
///
/// Propagates itself verbatim only when a value changed (which also clears the
/// producers); the same values change nothing, are not dirty, go nowhere.
pub fn run_cfgset(c: &Ctx) -> Result<()> {
    let mut key = c.key(1, true);
    let s = key.existing_mut()?.ok_or(Error::NoSuchKey)?;
    let mut duration: Option<u32> = None;
    let mut maxsize: Option<u32> = None;
    let mut maxage: Option<(u64, bool)> = None;
    // Ours, from the AOF or a primary only (the AOF rewrite restores the lifetime
    // counters with them); a client gets the built-in's syntax error.
    let mut counters: [Option<u64>; 2] = [None, None];
    let obey = c.must_obey();
    let mut i = 2;
    while i < c.argc() {
        let moreargs = c.argc() - 1 - i;
        let opt = c.arg(i);
        if is_kw(opt, "IDMP-DURATION") && moreargs > 0 {
            if duration.is_some() {
                return Err(Error::Err("IDMP-DURATION specified multiple times"));
            }
            let v = parse_ll(c.arg(i + 1))?;
            if !(idmp::DURATION_S_MIN..=idmp::DURATION_S_MAX).contains(&v) {
                return Err(Error::Err("IDMP-DURATION must be between 1 and 86400 seconds"));
            }
            duration = Some(v as u32);
        } else if is_kw(opt, "IDMP-MAXSIZE") && moreargs > 0 {
            if maxsize.is_some() {
                return Err(Error::Err("IDMP-MAXSIZE specified multiple times"));
            }
            let v = parse_ll(c.arg(i + 1))?;
            if !(idmp::MAX_ENTRIES_MIN..=idmp::MAX_ENTRIES_MAX).contains(&v) {
                return Err(Error::Err("IDMP-MAXSIZE must be between 1 and 10000 entries"));
            }
            maxsize = Some(v as u32);
        } else if is_kw(opt, "MAXAGE") && moreargs > 0 {
            if maxage.is_some() {
                return Err(Error::Err("MAXAGE specified multiple times"));
            }
            let v = parse_ll(c.arg(i + 1))?;
            if v < 0 {
                return Err(Error::Err("MAXAGE must be >= 0 milliseconds"));
            }
            let exact = moreargs > 1 && is_kw(c.arg(i + 2), "EXACT");
            maxage = Some((v as u64, exact));
            i += usize::from(exact);
        } else if obey && moreargs > 0 && (is_kw(opt, "IIDS-ADDED") || is_kw(opt, "IIDS-DUPLICATES")) {
            let v = parse_ll(c.arg(i + 1))?;
            counters[usize::from(is_kw(opt, "IIDS-DUPLICATES"))] = Some(v as u64);
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    if duration.is_none() && maxsize.is_none() && maxage.is_none() && counters == [None, None] {
        return Err(Error::Err("At least one parameter must be specified"));
    }
    let cur = s.idmp_window();
    let mut changes = duration.is_some_and(|d| d != cur.0) || maxsize.is_some_and(|m| m != cur.1);
    if changes {
        s.idmp_mut().configure(duration, maxsize);
    }
    if counters != [None, None] {
        let m = s.idmp_mut();
        m.iids_added = counters[0].unwrap_or(m.iids_added);
        m.iids_duplicates = counters[1].unwrap_or(m.iids_duplicates);
        changes = true;
    }
    if let Some((ms, exact)) = maxage {
        let new = (ms > 0).then(|| Box::new(crate::stream::MaxAge::new(ms, exact)));
        let same = match (&s.max_age, &new) {
            (Some(a), Some(b)) => a.same(b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            s.max_age = new;
            changes = true;
            // Trimmed by the timer from its next tick (on a primary).
            if let Some(a) = s.max_age.as_mut() {
                let now = c.now_ms();
                crate::ops::due::aging(c, Name::Arg(1), now);
                a.indexed_due_ms = now;
            }
        }
    }
    if changes {
        c.signal_modified(1);
        c.replicate_verbatim();
    }
    c.reply_ok();
    Ok(())
}

/// The IDMP window for a stream this command creates: the configs' (§5.6), except for a
/// command from the AOF or a primary, which always creates with the default window:
/// the configs are not replicated, so a primary whose configs are not the defaults
/// follows its creation with [`propagate_window`], and the result is the same on any
/// replica whatever its own configs.
pub fn creation_window(c: &Ctx) -> (u32, u32) {
    if c.must_obey() {
        idmp::DEFAULT_WINDOW
    } else {
        crate::config::idmp_window()
    }
}

/// After a command that created key argument `key_i` with a window that is not the
/// default (and propagated itself first): `XS.CFGSET key IDMP-DURATION d IDMP-MAXSIZE m`,
/// then, when that command also recorded an iid (XS.ADD IDMP, which the CFGSET clears on
/// the replica), `XS.IDMPRECORD key pid iid id` and `XS.CFGSET key IIDS-ADDED n
/// IIDS-DUPLICATES n` so the replica ends with the primary's map and counters.
pub fn propagate_window(c: &Ctx, key_i: usize, window: (u32, u32), record: Option<(&[u8], &[u8], StreamId)>) {
    use crate::ffi::ctx::Arg;
    let (d, m) = (window.0.to_string(), window.1.to_string());
    c.replicate(
        c"XS.CFGSET",
        &[Arg::Orig(key_i), Arg::New(b"IDMP-DURATION"), Arg::New(d.as_bytes()), Arg::New(b"IDMP-MAXSIZE"), Arg::New(m.as_bytes())],
    );
    if let Some((pid, iid, id)) = record {
        let id = id.to_bytes();
        c.replicate(c"XS.IDMPRECORD", &[Arg::Orig(key_i), Arg::New(pid), Arg::New(iid), Arg::New(&id)]);
        c.replicate(c"XS.CFGSET", &[Arg::Orig(key_i), Arg::New(b"IIDS-ADDED"), Arg::New(b"1"), Arg::New(b"IIDS-DUPLICATES"), Arg::New(b"0")]);
    }
}

/// XS.IDMPRECORD key pid iid stream-id
///
/// Records a mapping (AOF rewrite writes one per tracked iid, in insertion order).
/// Propagated verbatim when it recorded something.
pub fn run_idmprecord(c: &Ctx) -> Result<()> {
    let (id, _) = StreamId::parse(c.arg(4), 0, true, false).ok_or(Error::InvalidId)?;
    let (pid, iid) = (c.arg(2), c.arg(3));
    if pid.is_empty() {
        return Err(Error::Err("producer ID must be non-empty"));
    }
    if iid.is_empty() {
        return Err(Error::Err("idempotent ID must be non-empty"));
    }
    let mut key = c.key(1, true);
    let s = key.existing_mut()?.ok_or(Error::NoSuchKey)?;
    // From a client the entry must exist. From the AOF (or a primary) an iid whose
    // entry was deleted or trimmed since is kept, as the map it was written from kept
    // it (a duplicate answers its ID whether or not the entry exists, §5.2): any ID
    // the stream has generated.
    let exists = if c.must_obey() { !id.is_zero() && id <= s.last_id } else { s.contains(id) };
    if !exists {
        return Err(Error::Err("No such message in stream"));
    }
    let m = s.idmp_mut();
    match m.record(pid, iid, id) {
        Recorded::Same => {}
        Recorded::Conflict(_) => return Err(Error::Err("IID already exists for this producer with a different stream ID")),
        Recorded::New => {
            let due = id.ms.saturating_add(u64::from(m.duration_s) * 1000);
            crate::ops::due::idmp_recorded(c, Name::Arg(1), m, due);
            c.signal_modified(1);
            c.replicate_verbatim();
        }
    }
    c.reply_ok();
    Ok(())
}

/// The arguments of XS.IDMPEXPIRE: now-ms, LIMIT, FROM.
type ExpireArgs<'a> = (u64, Option<u64>, Option<&'a [u8]>);

/// XS.IDMPEXPIRE key now-ms LIMIT work [FROM pid]: the pass of src/ops/idmp.rs.
fn parse_idmpexpire(c: &Ctx) -> Result<ExpireArgs<'_>> {
    let now_ms = parse_ll(c.arg(2))?;
    if now_ms < 0 {
        return Err(Error::NotInteger);
    }
    let mut work: Option<u64> = None;
    let mut from: Option<&[u8]> = None;
    let mut i = 3;
    while i < c.argc() {
        let moreargs = c.argc() - 1 - i;
        if is_kw(c.arg(i), "LIMIT") && moreargs > 0 && work.is_none() {
            let n = parse_ll(c.arg(i + 1))?;
            if n < 1 {
                return Err(Error::Err("The LIMIT argument must be >= 1."));
            }
            work = Some(n as u64);
        } else if is_kw(c.arg(i), "FROM") && moreargs > 0 && from.is_none() {
            from = Some(c.arg(i + 1));
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    Ok((now_ms as u64, work, from))
}

/// XS.IDMPEXPIRE key now-ms LIMIT work [FROM pid]
///
/// Replies `[removed, resume-from or nil, next-due-ms or nil]`; a key without a
/// stream of ours answers `[0, nil, nil]`. Propagated verbatim when it removed
/// something.
pub fn run_idmpexpire(c: &Ctx) -> Result<()> {
    let (now_ms, work, from) = parse_idmpexpire(c)?;
    let out = crate::ops::idmp::expire(c, Name::Arg(1), now_ms, work, from);
    let (removed, resume, due) = match out {
        Some(o) => (o.removed, o.resume_from, o.next_due_ms),
        None => (0, None, None),
    };
    c.reply_array(3);
    c.reply_int(removed as i64);
    match resume {
        Some(p) => c.reply_bulk(&p),
        None => c.reply_null(),
    }
    match due {
        Some(d) => c.reply_int(d as i64),
        None => c.reply_null(),
    }
    Ok(())
}
