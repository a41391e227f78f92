//! XS.GROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]
//! XS.GROUP SETID key group id|$ [ENTRIESREAD n]
//! XS.GROUP DESTROY key group
//! XS.GROUP CREATECONSUMER key group consumer
//! XS.GROUP DELCONSUMER key group consumer
//! XS.GROUP HELP
//!
//! One handler for the subcommands, as the built-in xgroupCommand, so that the
//! order of checks (and so of errors) is the same.

use super::{cstr, is_kw, parse_ll};
use crate::error::{Error, NoGroup, Result};
use crate::ffi::ctx::{Ctx, KeyKind};
use crate::stream::{Stream, StreamId, ENTRIES_READ_INVALID};

pub fn run_help(c: &Ctx) -> Result<()> {
    const HELP: &[&str] = &[
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
    ];
    super::info::reply_help(c, HELP);
    Ok(())
}

/// `-NOGROUP No such consumer group '<g>' for key name '<k>'`.
pub fn nogroup_for_key(group: &[u8], key: &[u8]) -> Error {
    Error::no_group(NoGroup::ForKey, key, group)
}

/// Redis 8.2.2 (#14259): an ENTRIESREAD above the stream's entries-added is taken
/// as entries-added (level 8.2 and later; checked on 8.2.3. Before, and in 8.0.2 and
/// every Valkey, it is stored as given, and the lag can come out negative).
fn clamp_entries_read(s: &Stream, entries_read: i64) -> i64 {
    if crate::config::level() >= crate::config::Level::V8_2 && entries_read != ENTRIES_READ_INVALID && entries_read as u64 > s.entries_added {
        s.entries_added as i64
    } else {
        entries_read
    }
}

pub fn run(c: &Ctx) -> Result<()> {
    let opt = c.arg(1);
    let argc = c.argc();
    let create = is_kw(opt, "CREATE");
    let setid = is_kw(opt, "SETID");
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_INVALID;
    let mut i = 5;
    while i < argc {
        if create && is_kw(c.arg(i), "MKSTREAM") {
            mkstream = true;
            i += 1;
        } else if (create || setid) && is_kw(c.arg(i), "ENTRIESREAD") && i + 1 < argc {
            entries_read = parse_ll(c.arg(i + 1))?;
            if entries_read < 0 && entries_read != ENTRIES_READ_INVALID {
                return Err(Error::Err("value for ENTRIESREAD must be positive or -1"));
            }
            i += 2;
        } else {
            return Err(super::info::subcommand_syntax_error(c));
        }
    }
    let mut key = c.key(2, true);
    match key.kind() {
        KeyKind::Other => return Err(key.wrong_type()),
        KeyKind::Empty if !mkstream => {
            return Err(Error::Err(
                "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ))
        }
        _ => {}
    }
    let gname = c.arg(3);
    let exists = key.stream().is_some_and(|s| s.group(gname).is_some());
    if !mkstream && !exists && (setid || is_kw(opt, "CREATECONSUMER") || is_kw(opt, "DELCONSUMER")) {
        return Err(nogroup_for_key(gname, c.arg(2)));
    }

    if create && (5..=8).contains(&argc) {
        let arg = c.arg(4);
        let id = if cstr(arg) == b"$" {
            key.stream().map_or(StreamId::MIN, |s| s.last_id)
        } else {
            StreamId::parse(arg, 0, true, false).ok_or(Error::InvalidId)?.0
        };
        let mut window = None;
        if key.kind() == KeyKind::Empty {
            let w = super::idmp::creation_window(c);
            key.create_stream(Stream::new_with_idmp(w)).ok_or(Error::Err("cannot create the stream"))?;
            window = Some(w).filter(|&w| w != crate::stream::idmp::DEFAULT_WINDOW);
            c.signal_modified(2);
        }
        let s = key.stream_mut().ok_or(Error::WrongType)?;
        let entries_read = clamp_entries_read(s, entries_read);
        if s.create_group(gname, id, entries_read) {
            c.reply_ok();
            c.notify(c"xgroup-create", 2);
            c.replicate_verbatim();
            if let Some(w) = window {
                super::idmp::propagate_window(c, 2, w, None);
            }
        } else {
            return Err(Error::Full("BUSYGROUP Consumer Group name already exists".into()));
        }
    } else if setid && (argc == 5 || argc == 7) {
        let arg = c.arg(4);
        let s = key.stream_mut().ok_or(Error::WrongType)?;
        let id = if cstr(arg) == b"$" { s.last_id } else { StreamId::parse(arg, 0, false, false).ok_or(Error::InvalidId)?.0 };
        let entries_read = clamp_entries_read(s, entries_read);
        let g = s.group_mut(gname).ok_or_else(|| nogroup_for_key(gname, c.arg(2)))?;
        g.last_id = id;
        g.entries_read = entries_read;
        // Delayed delivery: scheduled entries after the new last ID leave the schedule
        // (the next `>` read reaches them again and looks at their due time then).
        if g.schedule().is_some() {
            g.unschedule_after(id);
        }
        c.reply_ok();
        c.notify(c"xgroup-setid", 2);
        c.replicate_verbatim();
    } else if is_kw(opt, "DESTROY") && argc == 4 {
        let s = key.stream_mut().ok_or(Error::WrongType)?;
        if s.destroy_group(gname) {
            c.reply_int(1);
            c.notify(c"xgroup-destroy", 2);
            c.replicate_verbatim();
            // Readers blocked on this group learn it is gone (NOGROUP).
            c.signal_ready(2);
        } else {
            c.reply_int(0);
        }
    } else if is_kw(opt, "CREATECONSUMER") && argc == 5 {
        let now = c.now_ms() as i64;
        let s = key.stream_mut().ok_or(Error::WrongType)?;
        let g = s.group_mut(gname).ok_or_else(|| nogroup_for_key(gname, c.arg(2)))?;
        if g.create_consumer(c.arg(4), now).is_some() {
            c.reply_int(1);
            c.notify(c"xgroup-createconsumer", 2);
            c.replicate_verbatim();
        } else {
            c.reply_int(0);
        }
    } else if is_kw(opt, "DELCONSUMER") && argc == 5 {
        let s = key.stream_mut().ok_or(Error::WrongType)?;
        let g = s.group_mut(gname).ok_or_else(|| nogroup_for_key(gname, c.arg(2)))?;
        match g.delete_consumer(c.arg(4)) {
            Some(pending) => {
                c.reply_int(pending as i64);
                c.notify(c"xgroup-delconsumer", 2);
                c.replicate_verbatim();
            }
            None => c.reply_int(0),
        }
    } else {
        return Err(super::info::subcommand_syntax_error(c));
    }
    Ok(())
}

/// XS.GROUP SCHEDULE key group id [id ...] / XS.GROUP UNSCHEDULE key group id [id ...]
/// (delayed delivery, src/stream/delay.rs): the propagated forms of a `>` read that
/// passed over delayed entries (SCHEDULE) or served scheduled entries with NOACK
/// (UNSCHEDULE), and the AOF rewrite's. SCHEDULE adds an ID that was added delayed,
/// exists, is at or before the group's last ID and is not pending, with its
/// recorded due time; other IDs are ignored. UNSCHEDULE removes IDs from the
/// schedule. Both reply the number of IDs changed. SCHEDULE is taken from the primary
/// and the AOF only: a client's could not tell an entry passed over from one delivered
/// and acknowledged since (both are behind the last ID and not pending), and would
/// deliver the latter again (issue 34). UNSCHEDULE only removes: any client may send it.
pub fn run_schedule(c: &Ctx) -> Result<()> {
    let add = is_kw(c.arg(1), "SCHEDULE");
    if add && !c.must_obey() {
        return Err(Error::Err("XS.GROUP SCHEDULE is sent by the primary and the AOF only: a `>` read schedules the delayed entries it passes over"));
    }
    let mut ids = Vec::with_capacity(c.argc().saturating_sub(4));
    for i in 4..c.argc() {
        ids.push(StreamId::parse(c.arg(i), 0, true, false).ok_or(Error::InvalidId)?.0);
    }
    let mut key = c.key(2, true);
    if key.kind() == KeyKind::Other {
        return Err(key.wrong_type());
    }
    let gname = c.arg(3);
    let Some(s) = key.stream_mut().filter(|s| s.group(gname).is_some()) else {
        return Err(nogroup_for_key(gname, c.arg(2)));
    };
    let mut n = 0i64;
    for id in ids {
        let changed = if add { s.schedule_existing(gname, id) } else { s.group_mut(gname).is_some_and(|g| g.unschedule(id)) };
        n += i64::from(changed);
    }
    c.reply_int(n);
    if n > 0 {
        c.replicate_verbatim();
    }
    Ok(())
}
