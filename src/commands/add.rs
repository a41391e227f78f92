//! XS.ADD key [NOMKSTREAM] [KEEPREF|DELREF|ACKED] [IDMP pid iid | IDMPAUTO pid]
//!        [NOTBEFORE unix-ms | DELAY ms]
//!        [MAXLEN|MINID|MAXAGE [=|~] threshold [LIMIT count]] *|id field value [field value ...]
//!
//! NOTBEFORE / DELAY (ours, delayed delivery: src/stream/delay.rs) record a due time
//! for the new entry; `>` reads of consumer groups deliver it not before then.
//!
//! MAXAGE ms (ours, issue 17) is `MINID` at `now - ms` (server clock), propagated as
//! `MINID = <id>`; a stream with a stored MAXAGE (XS.CFGSET) is also trimmed by age
//! on every XS.ADD, sent as `XS.TRIM key MINID = <id>` after it.
//!
//! Also the option parser XS.TRIM shares (streamParseAddOrTrimArgsOrReply). The
//! options come in any order before the ID; the reference policy (8.2) once, the
//! idempotency option (8.6, REDIS8.md §5.2) once.

use super::{cstr, is_kw, parse_ll};
use crate::config;
use crate::error::{Error, Result};
use crate::ffi::ctx::{Arg, Ctx, KeyKind, Name};
use crate::ops::trim::{compact_touched, default_approx_limit, exact_threshold, policy_threshold, policy_word};
use crate::stream::{AddError, IdSpec, RefPolicy, SeqGiven, Stream, StreamId, Trim, TrimStrategy};

/// Field and value arguments kept on the stack before falling back to a Vec.
const ARGS_INLINE: usize = 16;

/// XADD / XTRIM options.
#[derive(Debug, Default)]
pub struct AddTrimArgs {
    /// The ID argument of XADD (None for `*`), with how its sequence was given.
    pub id: Option<(StreamId, SeqGiven)>,
    pub no_mkstream: bool,
    pub trim: Option<Trim>,
    /// KEEPREF (default), DELREF or ACKED: what trimming does to referenced entries.
    pub policy: RefPolicy,
    /// The approximate trim's cap is the default one, which a command from the primary or the
    /// AOF does not have: [`settle_cap`] decides once the stream is known.
    pub default_cap: bool,
    /// Index of the threshold argument (rewritten when an approximate trim is propagated).
    pub trim_arg_idx: usize,
    /// IDMP / IDMPAUTO (8.6): the argument indexes of the producer ID and, for IDMP,
    /// of the iid (None: IDMPAUTO, the iid is the fields' hash).
    pub idmp: Option<(usize, Option<usize>)>,
    /// MAXAGE (ours, issue 17): the keyword's argument index and the cutoff the
    /// threshold was turned into (`MINID` at `now - ms`); propagated as `MINID =`.
    pub maxage: Option<(usize, StreamId)>,
    /// NOTBEFORE unix-ms | DELAY ms (ours, delayed delivery): the keyword's argument
    /// index and the due time (unix ms; DELAY is added to the server clock).
    /// Propagated as `NOTBEFORE <due>` (or `NOTBEFORE 0` when the entry was not
    /// delayed: due time not after the clock).
    pub delay: Option<(usize, i64)>,
}

/// Parses options from argument 2 on. For XADD returns the index of the ID argument.
pub fn parse_add_or_trim(c: &Ctx, xadd: bool) -> Result<(AddTrimArgs, usize)> {
    let mut a = AddTrimArgs::default();
    let argc = c.argc();
    let mut strategy: Option<TrimStrategy> = None;
    let mut approx = false;
    let mut limit: i64 = 0;
    let mut limit_given = false;
    let mut policy_given = false;
    let mut i = 2;
    while i < argc {
        let moreargs = argc - 1 - i;
        let opt = c.arg(i);
        // The keywords' first letter, to skip the comparisons that cannot match (each
        // is_kw is a NUL scan and a case-insensitive compare).
        let c0 = opt.first().map_or(0, u8::to_ascii_lowercase);
        if xadd && cstr(opt) == b"*" {
            break;
        } else if c0 == b'm' && (is_kw(opt, "maxlen") || is_kw(opt, "minid") || is_kw(opt, "maxage")) && moreargs > 0 {
            let maxlen = is_kw(opt, "maxlen");
            let maxage = !maxlen && is_kw(opt, "maxage");
            if strategy.is_some() {
                if maxage || a.maxage.is_some() {
                    return Err(Error::Err("syntax error, MAXAGE cannot be used with MAXLEN or MINID"));
                }
                return Err(Error::Err("syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            let kw_idx = i;
            approx = false;
            let next = cstr(c.arg(i + 1));
            if moreargs >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if moreargs >= 2 && next == b"=" {
                i += 1;
            }
            if maxlen {
                let n = parse_ll(c.arg(i + 1))?;
                if n < 0 {
                    return Err(Error::Err("The MAXLEN argument must be >= 0."));
                }
                strategy = Some(TrimStrategy::MaxLen(n as u64));
            } else if maxage {
                let n = parse_ll(c.arg(i + 1))?;
                if n < 0 {
                    return Err(Error::Err("The MAXAGE argument must be >= 0."));
                }
                let cut = crate::stream::retention::cutoff(c.now_ms(), n as u64);
                a.maxage = Some((kw_idx, cut));
                strategy = Some(TrimStrategy::MinId(cut));
            } else {
                let (id, _) = StreamId::parse(c.arg(i + 1), 0, true, false).ok_or(Error::InvalidId)?;
                strategy = Some(TrimStrategy::MinId(id));
            }
            i += 1;
            a.trim_arg_idx = i;
        } else if c0 == b'l' && is_kw(opt, "limit") && moreargs > 0 {
            limit = parse_ll(c.arg(i + 1))?;
            if limit < 0 {
                return Err(Error::Err("The LIMIT argument must be >= 0."));
            }
            limit_given = true;
            i += 1;
        } else if xadd && c0 == b'n' && is_kw(opt, "nomkstream") {
            a.no_mkstream = true;
        } else if xadd && c0 == b'i' && moreargs >= 2 && is_kw(opt, "idmp") {
            if a.idmp.is_some() {
                return Err(Error::Err("syntax error, IDMP/IDMPAUTO specified multiple times"));
            }
            if c.arg(i + 1).is_empty() {
                return Err(Error::Err("syntax error, IDMP requires a non-empty producer ID"));
            }
            if c.arg(i + 2).is_empty() {
                return Err(Error::Err("syntax error, IDMP requires a non-empty idempotent ID"));
            }
            a.idmp = Some((i + 1, Some(i + 2)));
            i += 2;
        } else if xadd && c0 == b'i' && moreargs >= 1 && is_kw(opt, "idmpauto") {
            if a.idmp.is_some() {
                return Err(Error::Err("syntax error, IDMP/IDMPAUTO specified multiple times"));
            }
            if c.arg(i + 1).is_empty() {
                return Err(Error::Err("syntax error, IDMPAUTO requires a non-empty producer ID"));
            }
            a.idmp = Some((i + 1, None));
            i += 1;
        } else if xadd && (c0 == b'n' || c0 == b'd') && moreargs > 0 && (is_kw(opt, "notbefore") || is_kw(opt, "delay")) {
            let delay = is_kw(opt, "delay");
            if a.delay.is_some() {
                return Err(Error::Err("syntax error, NOTBEFORE and DELAY options at the same time are not compatible"));
            }
            let n = parse_ll(c.arg(i + 1))?;
            if n < 0 {
                return Err(Error::Err(if delay { "The DELAY argument must be >= 0." } else { "The NOTBEFORE argument must be >= 0." }));
            }
            let due = if delay { (c.now_ms() as i64).saturating_add(n) } else { n };
            a.delay = Some((i, due));
            i += 1;
        } else if let Some(p) = matches!(c0, b'k' | b'd' | b'a').then(|| RefPolicy::from_keyword(cstr(opt))).flatten().filter(|_| !policy_given) {
            // A second policy is not an option: XADD reads it as the ID, XTRIM
            // answers a syntax error (the branches below).
            a.policy = p;
            policy_given = true;
        } else if xadd {
            let parsed = StreamId::parse(opt, 0, true, true).ok_or(Error::InvalidId)?;
            a.id = Some(parsed);
            break;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if limit != 0 && strategy.is_none() {
        return Err(Error::Err("syntax error, LIMIT cannot be used without specifying a trimming strategy"));
    }
    if !xadd && strategy.is_none() {
        return Err(Error::Err("syntax error, XTRIM must be called with a trimming strategy"));
    }
    // Only `*` with IDMP, except from the primary or the AOF, which receive the
    // concrete ID the propagation put in its place.
    if a.idmp.is_some() && a.id.is_some() && !c.must_obey() {
        return Err(Error::Err("syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs"));
    }
    // The work cap. From the primary or the AOF there is none: the threshold was rewritten
    // exact (the built-in's streamParseAddOrTrimArgsOrReply).
    if strategy.is_none() || (!approx && !limit_given) {
        // Nothing to trim, or an exact trim without LIMIT: no cap, whoever sent it.
        limit = 0;
    } else if !limit_given {
        // `~` with the default cap: who sent it is asked (the context flags) only where the
        // cap could bind, once the stream is known (`settle_cap`): an XS.ADD MAXLEN ~ on a
        // stream at its length never asks.
        limit = default_approx_limit();
        a.default_cap = true;
    } else if c.must_obey() {
        limit = 0;
    } else if !approx {
        return Err(Error::Err("syntax error, LIMIT cannot be used without the special ~ option"));
    }
    a.trim = strategy.map(|strategy| Trim { strategy, approx, limit });
    Ok((a, i))
}

/// An approximate trim with the default work cap ([`AddTrimArgs::default_cap`]) has none when
/// the command comes from the primary or the AOF. Asked only when the cap could bind: when the
/// trim could delete more entries than the cap (`adding`: entries the command appends before
/// it trims). A trim that cannot reach the cap does the same with it or without it: a node it
/// removes holds at most what the trim may delete, and `~` stops at the first node it keeps.
pub fn settle_cap(c: &Ctx, s: &Stream, args: &mut AddTrimArgs, adding: u64) {
    let Some(t) = args.trim.as_mut().filter(|_| args.default_cap) else { return };
    let length = s.length.saturating_add(adding);
    let most = match t.strategy {
        TrimStrategy::MaxLen(maxlen) => length.saturating_sub(maxlen),
        TrimStrategy::MinId(_) => length,
    };
    if most > t.limit.max(0) as u64 && c.must_obey() {
        t.limit = 0;
    }
}

pub fn run(c: &Ctx) -> Result<()> {
    let (mut args, idpos) = parse_add_or_trim(c, true)?;
    let field_pos = idpos + 1;
    let nfields = c.argc().saturating_sub(field_pos);
    if nfields < 2 || nfields % 2 == 1 {
        return Err(Error::WrongArity);
    }
    if let Some((id, SeqGiven::Yes)) = args.id {
        if id.is_zero() {
            return Err(Error::Err("The ID specified in XADD must be greater than 0-0"));
        }
    }

    let mut key = c.key(1, true);
    // A window other than the default given to a stream created here, which the
    // replicas must be told (commands::idmp::propagate_window).
    let mut new_window = None;
    match key.kind() {
        KeyKind::Other => return Err(key.wrong_type()),
        KeyKind::Empty if args.no_mkstream => {
            c.reply_null();
            return Ok(());
        }
        KeyKind::Empty => {
            // Created before the append, as the built-in: a failed append leaves
            // an empty stream behind.
            let w = super::idmp::creation_window(c);
            key.create_stream(Stream::new_with_idmp(w)).ok_or(Error::Err("cannot create the stream"))?;
            new_window = Some(w).filter(|&w| w != crate::stream::idmp::DEFAULT_WINDOW);
        }
        KeyKind::Stream => {}
    }
    // Up to 8 field-value pairs live on the stack (no allocation on the hot path).
    let mut small: [&[u8]; ARGS_INLINE] = [&[]; ARGS_INLINE];
    let heap: Vec<&[u8]>;
    let fields: &[&[u8]] = if nfields <= ARGS_INLINE {
        for (slot, i) in small.iter_mut().zip(field_pos..c.argc()) {
            *slot = c.arg(i);
        }
        &small[..nfields]
    } else {
        heap = (field_pos..c.argc()).map(|i| c.arg(i)).collect();
        &heap
    };
    let s = key.stream_mut().ok_or(Error::WrongType)?;
    // IDMP: the (pid, iid) of this add; the IDMPAUTO iid is hashed from the fields.
    let auto_iid: [u8; crate::stream::idmp::AUTO_IID_BYTES];
    let idmp: Option<(&[u8], &[u8])> = match args.idmp {
        None => None,
        Some((p, Some(i))) => Some((c.arg(p), c.arg(i))),
        Some((p, None)) => {
            auto_iid = crate::stream::idmp::auto_iid(fields);
            Some((c.arg(p), &auto_iid[..]))
        }
    };
    if let Some((pid, iid)) = idmp {
        if let Some(old) = s.idmp.as_deref_mut().and_then(|m| m.lookup(pid, iid).map(|id| (m, id))) {
            // A duplicate: the recorded ID, whether or not that entry still exists. No
            // append, trim, event or wake-up. Propagated unchanged (still `*`): the
            // replica answers from its own map and counts the duplicate too (§5.9).
            let (m, id) = old;
            m.iids_duplicates = m.iids_duplicates.wrapping_add(1);
            crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.idmp_duplicates, 1);
            c.reply_id(id);
            c.replicate_verbatim();
            return Ok(());
        }
    }
    if s.last_id == StreamId::MAX {
        return Err(Error::Err("The stream has exhausted the last possible ID, unable to add more items"));
    }
    let spec = match args.id {
        None => IdSpec::Auto,
        Some((id, SeqGiven::Yes)) => IdSpec::Explicit(id),
        Some((id, SeqGiven::Auto)) => IdSpec::AutoSeq(id.ms),
    };
    settle_cap(c, s, &mut args, 1);
    match &args.trim {
        Some(t) => super::read_first(s, |s| s.read_trimmed_nodes(t, args.policy == crate::stream::RefPolicy::KeepRef))?,
        // Without a trim nothing here reads a sealed node (a tail that cannot be read starts a
        // new node): the reply need not be held back (two allocations less per call while
        // nodes are on disk).
        None => c.send_held(),
    }
    let queued = s.pack_queue().len();
    let id = match s.append(fields, spec, c.now_ms(), config::limits()) {
        Ok(id) => {
            if s.pack_queue().len() > queued {
                // A node was sealed: compressed later by the background step.
                crate::ops::due::sealed(c, Name::Arg(1));
            }
            id
        }
        Err(AddError::IdNotGreater) => return Err(Error::Err("The ID specified in XADD is equal or smaller than the target stream top item")),
        Err(AddError::TooLarge) => return Err(Error::Err("Elements are too large to be stored")),
        Err(AddError::Unreadable) => return Err(Error::Err(crate::error::COLD_READ_FAILED)),
    };
    let mut id_buf = [0u8; 44];
    let id_len = id.write_to_slice(&mut id_buf);
    let id_text = &id_buf[..id_len];
    c.reply_bulk(id_text);
    if let Some((pid, iid)) = idmp {
        // A new ID cannot be recorded already; a conflict (an AOF replaying an
        // XS.IDMPRECORD for this very ID first) leaves the map as it is.
        let m = s.idmp_mut();
        m.record(pid, iid, id);
        let due = id.ms.saturating_add(u64::from(m.duration_s) * 1000);
        crate::ops::due::idmp_recorded(c, Name::Arg(1), m, due);
    }
    // Delayed delivery: recorded when the due time is still to come on the primary;
    // from the primary or the AOF whenever it is given (the primary sends 0 otherwise).
    let delayed_due = args.delay.map(|(_, due)| due).filter(|&due| if c.must_obey() { due > 0 } else { due > c.now_ms() as i64 });
    if let Some(due) = delayed_due {
        s.record_delay(id, due);
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_delayed, 1);
    }
    c.signal_modified(1);
    c.notify(c"xadd", 1);
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_added, 1);

    let mut threshold = None;
    let mut trimmed = None;
    if let Some(t) = &args.trim {
        let done = s.trim_with_rules(t, args.policy, crate::config::ref_trim_rules());
        if done.deleted > 0 {
            c.notify(c"xtrim", 1);
            crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_trimmed, done.deleted);
            if args.maxage.is_some() {
                crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_expired, done.deleted);
            }
        }
        if t.approx {
            threshold = Some(exact_threshold(s, t));
        } else if let Some((_, cut)) = args.maxage {
            threshold = Some(cut.text());
        }
        if done.deleted > 0 {
            // After the threshold: the first node holds the trim's tombstones.
            let first = s.first_id;
            compact_touched(s, &[first]);
        }
        trimmed = Some(done);
    }
    // Retention by age stored with the stream (XS.CFGSET MAXAGE): trimmed here on
    // the primary, sent as `XS.TRIM key MINID = <id>` after this command. A replica
    // or the AOF applies what the primary sent and never ages on its own clock.
    let mut aged = None;
    if s.max_age.is_some() && !c.must_obey() {
        if let Some((t, done)) = s.trim_aged(c.now_ms(), default_approx_limit()) {
            if done.deleted > 0 {
                c.notify(c"xtrim", 1);
                crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_trimmed, done.deleted);
                crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_expired, done.deleted);
                aged = Some(match t.strategy {
                    TrimStrategy::MinId(cut) if !t.approx => cut.text(),
                    _ => exact_threshold(s, &t),
                });
                let first = s.first_id;
                compact_touched(s, &[first]);
            }
        }
    }
    if s.max_age.is_some() {
        crate::ops::due::aging_written(c, Name::Arg(1), s);
    }

    // Propagation: the concrete ID instead of `*` / `ms-*`, and an approximate
    // trim as the exact one that gives the same result (COMPAT.md §4).
    let auto_id = !matches!(args.id, Some((_, SeqGiven::Yes)));
    if let (Some(done), true) = (trimmed, args.policy != RefPolicy::KeepRef) {
        // DELREF / ACKED: which entries go depends on the node layout (which node
        // limits, not replicated, decide), so the trim goes out as the exact one
        // that deletes the same entries on any layout, or not at all when it
        // deleted nothing: `XS.ADD key [policy MINID = <first not examined> |
        // policy MAXLEN = 0] id field value ...`.
        let th = policy_threshold(&done);
        let mut argv: Vec<Arg> = vec![Arg::Orig(1)];
        // The IDMP option goes along (the replica records the same mapping).
        if let Some((p, iid)) = args.idmp {
            argv.extend([Arg::Orig(p - 1), Arg::Orig(p)]);
            argv.extend(iid.map(Arg::Orig));
        }
        if done.deleted > 0 {
            argv.extend([Arg::New(policy_word(args.policy)), Arg::New(th.0), Arg::New(b"="), Arg::New(&th.1)]);
        }
        let due_text = delayed_due.map(|d| d.to_string());
        if let Some(d) = &due_text {
            argv.extend([Arg::New(b"NOTBEFORE"), Arg::New(d.as_bytes())]);
        }
        argv.push(Arg::New(id_text));
        argv.extend((idpos + 1..c.argc()).map(Arg::Orig));
        c.replicate(c"XS.ADD", &argv);
    } else if !auto_id && threshold.is_none() && args.delay.is_none() {
        c.replicate_verbatim();
    } else {
        let mut changes: [(usize, &[u8]); 6] = [(0, &[]); 6];
        let mut n = 0;
        // Formatted only with the option (the common XS.ADD pays nothing for it).
        let due_text = args.delay.map(|_| delayed_due.unwrap_or(0).to_string());
        if let (Some((kw, _)), Some(t)) = (args.delay, &due_text) {
            changes[0] = (kw, b"NOTBEFORE");
            changes[1] = (kw + 1, t.as_bytes());
            n = 2;
        }
        if let Some(th) = &threshold {
            changes[n] = (args.trim_arg_idx, th);
            n += 1;
            match args.maxage {
                // MAXAGE [=|~] ms: `MINID [=] <cutoff or first kept ID>`.
                Some((kw, _)) => {
                    changes[n] = (kw, b"MINID");
                    n += 1;
                    if args.trim_arg_idx - 1 != kw {
                        changes[n] = (args.trim_arg_idx - 1, b"=");
                        n += 1;
                    }
                }
                None => {
                    changes[n] = (args.trim_arg_idx - 1, b"=");
                    n += 1;
                }
            }
        }
        if auto_id {
            changes[n] = (idpos, id_text);
            n += 1;
        }
        c.replicate_with(c"XS.ADD", &changes[..n]);
    }
    if let Some(th) = &aged {
        c.replicate(c"XS.TRIM", &[Arg::Orig(1), Arg::New(b"MINID"), Arg::New(b"="), Arg::New(th)]);
    }
    if let Some(w) = new_window {
        super::idmp::propagate_window(c, 1, w, idmp.map(|(p, i)| (p, i, id)));
    }
    // Blocked readers of this key are served after this command.
    c.signal_ready(1);
    Ok(())
}
