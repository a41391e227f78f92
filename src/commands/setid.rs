//! XS.SETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]

use super::{is_kw, parse_ll};
use crate::error::{Error, Result};
use crate::ffi::ctx::Ctx;
use crate::stream::StreamId;

pub fn run(c: &Ctx) -> Result<()> {
    let (id, _) = StreamId::parse(c.arg(2), 0, true, false).ok_or(Error::InvalidId)?;
    let mut entries_added: i64 = -1;
    let mut max_xdel_id = StreamId::MIN;
    let mut i = 3;
    while i < c.argc() {
        let moreargs = c.argc() - 1 - i;
        let opt = c.arg(i);
        if is_kw(opt, "ENTRIESADDED") && moreargs > 0 {
            entries_added = parse_ll(c.arg(i + 1))?;
            if entries_added < 0 {
                return Err(Error::Err("entries_added must be positive"));
            }
            i += 2;
        } else if is_kw(opt, "MAXDELETEDID") && moreargs > 0 {
            let (m, _) = StreamId::parse(c.arg(i + 1), 0, true, false).ok_or(Error::InvalidId)?;
            if id < m {
                return Err(Error::Err("The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
            }
            max_xdel_id = m;
            i += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let mut key = c.key(1, true);
    let s = key.existing_mut()?.ok_or(Error::NoSuchKey)?;
    // 7.2: the last ID never goes below a deleted entry's ID (7.0 allowed it, and
    // with it entries out of ID order inside a node).
    if crate::config::level() >= crate::config::Level::V7_2 && id < s.max_deleted_entry_id {
        return Err(Error::Err("The ID specified in XSETID is smaller than current max_deleted_entry_id"));
    }
    if s.length > 0 {
        if id < s.last_valid_id() {
            return Err(Error::Err("The ID specified in XSETID is smaller than the target stream top item"));
        }
        if entries_added != -1 && s.length > entries_added as u64 {
            return Err(Error::Err("The entries_added specified in XSETID is smaller than the target stream length"));
        }
    }
    s.last_id = id;
    if entries_added != -1 {
        s.entries_added = entries_added as u64;
        // #15489 (compat `latest`): no group may have read more than was ever added.
        if crate::config::level() == crate::config::Level::Latest {
            if let Some(groups) = s.groups_all_mut() {
                for g in groups.values_mut() {
                    if g.entries_read > entries_added {
                        g.entries_read = entries_added;
                    }
                }
            }
        }
    }
    if !max_xdel_id.is_zero() {
        s.max_deleted_entry_id = max_xdel_id;
    }
    c.reply_ok();
    // The built-in XSETID notifies but does not call signalModifiedKey.
    c.notify(c"xsetid", 1);
    c.replicate_verbatim();
    Ok(())
}
