//! XS.INFO STREAM key [FULL [COUNT count]], XS.INFO GROUPS key,
//! XS.INFO CONSUMERS key group, XS.INFO HELP.
//!
//! A container command like the built-in XINFO, so unknown subcommands and
//! arity errors come from Redis in the built-in's words. Reply shapes are those
//! of Redis 7.0 (the 7.2 additions `inactive` / `active-time` are not emitted).

use super::{cstr, is_kw, parse_ll};
use crate::config::Level;
use crate::error::{Error, Result};
use crate::ffi::ctx::Ctx;
use crate::stream::{Group, Meta, Stream, StreamId, ENTRIES_READ_INVALID};

/// addReplyHelp: a header naming the command as typed (upper case), the lines,
/// and the HELP footer. (In takeover mode the built-in answers XINFO / XGROUP
/// HELP itself: the filter leaves them alone.)
pub fn reply_help(c: &Ctx, lines: &[&str]) {
    let cmd = String::from_utf8_lossy(cstr(&c.command_name())).to_uppercase();
    c.reply_array(lines.len() + 3);
    c.reply_simple(&format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"));
    for line in lines {
        c.reply_simple(line);
    }
    c.reply_simple("HELP");
    // Redis's common footer (addReplyHelp) lost its `s` in 7.2.
    c.reply_simple(if crate::config::level() >= Level::V7_2 { "    Print this help." } else { "    Prints this help." });
}

pub fn run_help(c: &Ctx) -> Result<()> {
    reply_help(
        c,
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
    Ok(())
}

/// addReplySubcommandSyntaxError (`Try XINFO HELP.` through the takeover filter).
pub fn subcommand_syntax_error(c: &Ctx) -> Error {
    let cmd = String::from_utf8_lossy(cstr(&c.command_name())).to_uppercase();
    let sub: String = String::from_utf8_lossy(cstr(c.arg(1))).chars().take(128).collect();
    Error::Full(format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {cmd} HELP."))
}

/// Opens key argument 2 for reading, with XINFO's errors.
fn with_stream(c: &Ctx, f: impl FnOnce(&Stream) -> Result<()>) -> Result<()> {
    let key = c.key(2, false);
    f(key.existing()?.ok_or(Error::NoSuchKey)?)
}

fn reply_entries_read(c: &Ctx, g: &Group) {
    if g.entries_read != ENTRIES_READ_INVALID {
        c.reply_int(g.entries_read);
    } else {
        c.reply_null();
    }
}

fn reply_lag(c: &Ctx, meta: &Meta, g: &Group) {
    match meta.lag(g) {
        Some(l) => c.reply_int(l),
        None => c.reply_null(),
    }
}

pub fn run_groups(c: &Ctx) -> Result<()> {
    with_stream(c, |s| {
        let meta = s.meta(crate::config::lag_rules());
        let Some(it) = s.groups_iter() else {
            c.reply_array(0);
            return Ok(());
        };
        c.reply_array(s.group_count());
        for (name, g) in it {
            // A group with a queue policy (issue 16): its fields and counters after
            // the built-in's six.
            let pol = g.policy().map(|p| (super::queue::policy_fields(p), p.counters));
            // Delayed delivery (issue 17): `scheduled` only on a stream that has delayed entries.
            let delayed = s.delayed.is_some() || g.schedule().is_some();
            c.reply_map(6 + pol.as_ref().map_or(0, |(f, _)| f.len() + 4) + usize::from(delayed));
            c.reply_bulk(b"name");
            c.reply_bulk(name);
            c.reply_bulk(b"consumers");
            c.reply_int(g.consumer_count() as i64);
            c.reply_bulk(b"pending");
            c.reply_int(g.pel().len() as i64);
            c.reply_bulk(b"last-delivered-id");
            c.reply_id(g.last_id);
            c.reply_bulk(b"entries-read");
            reply_entries_read(c, g);
            c.reply_bulk(b"lag");
            reply_lag(c, &meta, g);
            if delayed {
                c.reply_bulk(b"scheduled");
                c.reply_int(g.scheduled_count() as i64);
            }
            if let Some((fields, n)) = &pol {
                super::queue::reply_fields(c, fields);
                for (k, v) in [("delivered", n.delivered), ("acked", n.acked), ("redelivered", n.redelivered), ("dead-lettered", n.dead_lettered)] {
                    c.reply_bulk(k.as_bytes());
                    c.reply_int(i64::try_from(v).unwrap_or(i64::MAX));
                }
            }
        }
        Ok(())
    })
}

pub fn run_consumers(c: &Ctx) -> Result<()> {
    with_stream(c, |s| {
        let gname = c.arg(3);
        let g = s.group(gname).ok_or_else(|| super::group::nogroup_for_key(gname, c.arg(2)))?;
        c.reply_array(g.consumer_count());
        let now = c.now_ms() as i64;
        let mut it = g.consumers();
        let inactive = crate::config::level() >= Level::V7_2;
        while let Some((_, cons)) = it.next_consumer() {
            c.reply_map(if inactive { 4 } else { 3 });
            c.reply_bulk(b"name");
            c.reply_bulk(&cons.name);
            c.reply_bulk(b"pending");
            c.reply_int(cons.pel().len() as i64);
            c.reply_bulk(b"idle");
            c.reply_int((now - cons.seen_time).max(0));
            if inactive {
                // 7.2: time since the last successful delivery, -1 if none.
                c.reply_bulk(b"inactive");
                c.reply_int(if cons.active_time == -1 { -1 } else { now - cons.active_time });
            }
        }
        Ok(())
    })
}

pub fn run_stream(c: &Ctx) -> Result<()> {
    with_stream(c, |s| {
        let optc = c.argc() - 3;
        let mut full = false;
        let mut count: i64 = 10;
        if optc > 0 {
            if optc != 1 && optc != 3 {
                return Err(subcommand_syntax_error(c));
            }
            if !is_kw(c.arg(3), "full") {
                return Err(subcommand_syntax_error(c));
            }
            if optc == 3 {
                if !is_kw(c.arg(4), "count") {
                    return Err(subcommand_syntax_error(c));
                }
                count = parse_ll(c.arg(5))?;
                if count < 0 {
                    count = 10;
                }
            }
            full = true;
        }
        // 8.6: the IDMP fields, on every stream (§5.7), at the latest level only.
        let idmp = crate::config::level() == Level::Latest;
        let extra = if idmp { 6 } else { 0 };
        // With compaction on (xstream.compact-deleted), the tombstones the nodes still hold:
        // what compaction has left to free. Absent when off, so replies stay the built-in's.
        let compacting = crate::config::compact_deleted() > 0;
        // Retention by age (issue 17): only on a stream that has one.
        let max_age = s.max_age.as_deref().copied();
        // Delayed delivery (issue 17): only on a stream that has delayed entries.
        let delayed = s.delayed_count();
        // Tiering on (xstream.tier-dir, issue 30): the nodes of this stream on disk and their
        // bytes there (MEMORY USAGE is its RAM). Absent when off, as `deleted-entries`.
        let tiered = crate::stream::tiering().then(|| s.tiered());
        c.reply_map(
            if full { 9 } else { 10 }
                + extra
                + usize::from(compacting)
                + usize::from(max_age.is_some())
                + usize::from(delayed > 0)
                + if tiered.is_some() { 2 } else { 0 },
        );
        c.reply_bulk(b"length");
        c.reply_int(s.length as i64);
        c.reply_bulk(b"radix-tree-keys");
        c.reply_int(s.rax_keys() as i64);
        c.reply_bulk(b"radix-tree-nodes");
        c.reply_int(s.rax_nodes() as i64);
        c.reply_bulk(b"last-generated-id");
        c.reply_id(s.last_id);
        c.reply_bulk(b"max-deleted-entry-id");
        c.reply_id(s.max_deleted_entry_id);
        c.reply_bulk(b"entries-added");
        c.reply_int(s.entries_added as i64);
        c.reply_bulk(b"recorded-first-entry-id");
        c.reply_id(s.first_id);
        if idmp {
            let (d, m) = s.idmp_window();
            let (pids, iids, added, dups) = s
                .idmp
                .as_deref()
                .map_or((0, 0, 0, 0), |m| (m.pids_tracked() as i64, m.iids_tracked() as i64, m.iids_added as i64, m.iids_duplicates as i64));
            for (name, v) in [
                (&b"idmp-duration"[..], i64::from(d)),
                (b"idmp-maxsize", i64::from(m)),
                (b"pids-tracked", pids),
                (b"iids-tracked", iids),
                (b"iids-added", added),
                (b"iids-duplicates", dups),
            ] {
                c.reply_bulk(name);
                c.reply_int(v);
            }
        }
        if let Some(a) = max_age {
            c.reply_bulk(b"max-age");
            c.reply_int(i64::try_from(a.ms).unwrap_or(i64::MAX));
        }
        if delayed > 0 {
            c.reply_bulk(b"delayed-entries");
            c.reply_int(delayed as i64);
        }
        if compacting {
            c.reply_bulk(b"deleted-entries");
            c.reply_int(i64::try_from(s.deleted_entries()).unwrap_or(i64::MAX));
        }
        if let Some((nodes, bytes)) = tiered {
            c.reply_bulk(b"tiered-nodes");
            c.reply_int(i64::try_from(nodes).unwrap_or(i64::MAX));
            c.reply_bulk(b"tiered-bytes");
            c.reply_int(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        if !full {
            c.reply_bulk(b"groups");
            c.reply_int(s.group_count() as i64);
            c.reply_bulk(b"first-entry");
            if super::range::reply_entries(c, s, StreamId::MIN, StreamId::MAX, 1, false) == 0 {
                c.reply_null();
            }
            c.reply_bulk(b"last-entry");
            if super::range::reply_entries(c, s, StreamId::MIN, StreamId::MAX, 1, true) == 0 {
                c.reply_null();
            }
            return Ok(());
        }
        let count = count as u64;
        c.reply_bulk(b"entries");
        super::range::reply_range(c, s, StreamId::MIN, StreamId::MAX, count, false);
        c.reply_bulk(b"groups");
        let meta = s.meta(crate::config::lag_rules());
        let Some(it) = s.groups_iter() else {
            c.reply_array(0);
            return Ok(());
        };
        c.reply_array(s.group_count());
        for (name, g) in it {
            // 8.8's nacked-count only at `xstream.compat latest` (a field the host's
            // own XINFO lacks); a NACKed entry's pending row is [id, "", 0, count] anyway.
            let nacked = crate::config::level() >= Level::Latest;
            // Delayed delivery (issue 17): the group's schedule, only when it has entries (so
            // the replies of streams without delayed delivery stay the built-in's).
            let sched = g.schedule().filter(|sc| !sc.is_empty());
            c.reply_map(if nacked { 8 } else { 7 } + usize::from(sched.is_some()));
            c.reply_bulk(b"name");
            c.reply_bulk(name);
            c.reply_bulk(b"last-delivered-id");
            c.reply_id(g.last_id);
            c.reply_bulk(b"entries-read");
            reply_entries_read(c, g);
            c.reply_bulk(b"lag");
            reply_lag(c, &meta, g);
            c.reply_bulk(b"pel-count");
            c.reply_int(g.pel().len() as i64);
            if nacked {
                c.reply_bulk(b"nacked-count");
                c.reply_int(g.nacked_count() as i64);
            }
            c.reply_bulk(b"pending");
            c.reply_array_postponed();
            let mut n = 0u64;
            let mut p = g.pel().iter();
            while let Some((k, nack)) = p.next() {
                if count != 0 && n == count {
                    break;
                }
                c.reply_array(4);
                c.reply_id(StreamId::from_be_bytes(k).unwrap_or(StreamId::MIN));
                c.reply_bulk(g.owner_name(nack));
                c.reply_int(nack.delivery_time);
                c.reply_int(nack.delivery_count as i64);
                n += 1;
            }
            c.set_array_len(n as usize);
            c.reply_bulk(b"consumers");
            c.reply_array(g.consumer_count());
            let mut ci = g.consumers();
            let active = crate::config::level() >= Level::V7_2;
            while let Some((_, cons)) = ci.next_consumer() {
                c.reply_map(if active { 5 } else { 4 });
                c.reply_bulk(b"name");
                c.reply_bulk(&cons.name);
                c.reply_bulk(b"seen-time");
                c.reply_int(cons.seen_time);
                if active {
                    c.reply_bulk(b"active-time");
                    c.reply_int(cons.active_time);
                }
                c.reply_bulk(b"pel-count");
                c.reply_int(cons.pel().len() as i64);
                c.reply_bulk(b"pending");
                c.reply_array_postponed();
                let mut n = 0u64;
                let mut p = cons.pel().iter();
                while let Some((k, _)) = p.next() {
                    if count != 0 && n == count {
                        break;
                    }
                    let nack = g.pel().get(k).copied().unwrap_or(crate::stream::Nack::detached(0, 0, 0));
                    c.reply_array(3);
                    c.reply_id(StreamId::from_be_bytes(k).unwrap_or(StreamId::MIN));
                    c.reply_int(nack.delivery_time);
                    c.reply_int(nack.delivery_count as i64);
                    n += 1;
                }
                c.set_array_len(n as usize);
            }
            if let Some(sc) = sched {
                // [ID, due ms] in serving order (due time, then ID), bounded by COUNT as `pending` is.
                c.reply_bulk(b"scheduled");
                let n = if count == 0 { sc.len() } else { sc.len().min(usize::try_from(count).unwrap_or(usize::MAX)) };
                c.reply_array(n);
                for (due, id) in sc.iter().take(n) {
                    c.reply_array(2);
                    c.reply_id(id);
                    c.reply_int(due);
                }
            }
        }
        Ok(())
    })
}
