//! XS.TRIM key MAXLEN|MINID|MAXAGE [=|~] threshold [LIMIT count] [KEEPREF|DELREF|ACKED]
//!
//! MAXAGE ms (ours, issue 17): MINID at `now - ms` on the server clock, propagated as
//! `MINID = <id>`.

use super::add::{parse_add_or_trim, settle_cap};
use crate::error::{Error, Result};
use crate::ffi::ctx::{Arg, Ctx};
use crate::ops::trim::{compact_touched, exact_threshold, policy_threshold, policy_word};
use crate::stream::RefPolicy;

pub fn run(c: &Ctx) -> Result<()> {
    let (mut args, _) = parse_add_or_trim(c, false)?;
    if args.trim.is_none() {
        return Err(Error::Syntax);
    }
    let mut key = c.key(1, true);
    let Some(s) = key.existing_mut()? else {
        c.reply_int(0);
        return Ok(());
    };
    settle_cap(c, s, &mut args, 0);
    let Some(t) = args.trim else { return Err(Error::Syntax) };
    super::read_first(s, |s| s.read_trimmed_nodes(&t, args.policy == RefPolicy::KeepRef))?;
    let done = s.trim_with_rules(&t, args.policy, crate::config::ref_trim_rules());
    let deleted = done.deleted;
    if deleted > 0 {
        c.notify(c"xtrim", 1);
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_trimmed, deleted);
        if args.maxage.is_some() {
            crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_expired, deleted);
        }
        // Propagation: only when something changed; an approximate trim goes out
        // as the exact one with the same result. DELREF / ACKED: as the exact trim
        // that deletes the same entries on any node layout (see XS.ADD).
        if args.policy != RefPolicy::KeepRef {
            let (strategy, th) = policy_threshold(&done);
            c.replicate(c"XS.TRIM", &[Arg::Orig(1), Arg::New(strategy), Arg::New(b"="), Arg::New(&th), Arg::New(policy_word(args.policy))]);
        } else if let Some((_, cut)) = args.maxage {
            // MAXAGE [=|~] ms [LIMIT n]: `MINID = <cutoff or first kept ID>`.
            let th = if t.approx { exact_threshold(s, &t) } else { cut.text() };
            c.replicate(c"XS.TRIM", &[Arg::Orig(1), Arg::New(b"MINID"), Arg::New(b"="), Arg::New(&th)]);
        } else if t.approx {
            let th = exact_threshold(s, &t);
            c.replicate_with(c"XS.TRIM", &[(args.trim_arg_idx - 1, b"="), (args.trim_arg_idx, &th)]);
        } else {
            c.replicate_verbatim();
        }
        // The built-in counts one change per entry trimmed.
        c.add_dirty(deleted - 1);
        c.signal_modified(1);
        // After the threshold above was computed: the first node holds the trim's tombstones.
        let first = s.first_id;
        compact_touched(s, &[first]);
    }
    c.reply_int(deleted as i64);
    Ok(())
}
