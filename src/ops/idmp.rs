//! Expiry of idempotency records (REDIS8.md §5.4, docs/redis8.md "IDMP expiry"): one pass on
//! one stream, shared by XS.IDMPEXPIRE (as replicas and the AOF receive it) and the primary's
//! IDMP job (src/jobs/idmp.rs), which alone decides to run it.

use crate::ffi::ctx::{Arg, Ctx, KeyKind, Name};

/// What an expiry pass on one key did.
pub struct Expired {
    pub removed: u64,
    /// Resume here (the work limit was reached).
    pub resume_from: Option<Vec<u8>>,
    /// When the oldest remaining record becomes due (None: nothing left).
    pub next_due_ms: Option<u64>,
}

/// Expires the records of the stream at `key` (selected DB) older than its duration at `now_ms`
/// (the primary's clock), visiting at most `work` producers + records, from producer `from`.
/// None when the key holds no stream of ours. A pass that removed records is propagated as
/// `XS.IDMPEXPIRE key now-ms [LIMIT work] [FROM pid]`: the cutoff is `now-ms - duration*1000`
/// with the stream's own (replicated) duration, so the same state and arguments remove the
/// same records everywhere.
pub fn expire(c: &Ctx, key: Name<'_>, now_ms: u64, work: Option<u64>, from: Option<&[u8]>) -> Option<Expired> {
    let mut k = c.open(key, true);
    if k.kind() != KeyKind::Stream {
        return None;
    }
    let s = k.stream_mut()?;
    let Some(m) = s.idmp.as_deref_mut() else {
        return Some(Expired { removed: 0, resume_from: None, next_due_ms: None });
    };
    let Some(cutoff) = m.cutoff_ms(now_ms) else {
        return Some(Expired { removed: 0, resume_from: None, next_due_ms: m.due_ms() });
    };
    let e = m.expire(cutoff, from, work.unwrap_or(u64::MAX));
    let next_due_ms = if e.resume_from.is_some() { None } else { m.due_ms() };
    // What the primary's job indexes next for this key (ops::due::idmp_recorded).
    m.indexed_due_ms = if e.resume_from.is_some() { now_ms } else { next_due_ms.unwrap_or(0) };
    if e.removed > 0 {
        c.signal_modified_name(key);
        let now_s = now_ms.to_string();
        let work_s = work.map(|w| w.to_string());
        let mut args: Vec<Arg> = vec![key.into(), Arg::New(now_s.as_bytes())];
        if let Some(w) = &work_s {
            args.extend([Arg::New(b"LIMIT"), Arg::New(w.as_bytes())]);
        }
        if let Some(p) = from {
            args.extend([Arg::New(b"FROM"), Arg::New(p)]);
        }
        c.replicate(c"XS.IDMPEXPIRE", &args);
    }
    Some(Expired { removed: e.removed, resume_from: e.resume_from, next_due_ms })
}
