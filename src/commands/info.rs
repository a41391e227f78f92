//! XS.INFO STREAM key [FULL [COUNT count]] and XS.INFO HELP.
//!
//! A container command like the built-in XINFO, so unknown subcommands and
//! arity errors come from Redis in the built-in's words.

use super::{is_kw, parse_ll};
use crate::error::{Error, Result};
use crate::ffi::ctx::{Ctx, KeyKind};
use crate::stream::StreamId;

pub fn run_help(c: &Ctx) -> Result<()> {
    const HELP: &[&str] = &[
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
    ];
    let cmd = String::from_utf8_lossy(super::cstr(c.arg(0))).to_uppercase();
    c.reply_array(HELP.len() + 3);
    c.reply_simple(&format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"));
    for line in HELP {
        c.reply_simple(line);
    }
    c.reply_simple("HELP");
    c.reply_simple("    Print this help.");
    Ok(())
}

fn subcommand_syntax_error(c: &Ctx) -> Error {
    let cmd = String::from_utf8_lossy(super::cstr(c.arg(0))).to_uppercase();
    let sub = String::from_utf8_lossy(super::cstr(c.arg(1)));
    let sub: String = sub.chars().take(128).collect();
    Error::Full(format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {cmd} HELP."))
}

pub fn run_stream(c: &Ctx) -> Result<()> {
    let key = c.key(2, false);
    let s = match key.kind() {
        KeyKind::Empty => return Err(Error::NoSuchKey),
        KeyKind::Other => return Err(Error::WrongType),
        KeyKind::Stream => key.stream().ok_or(Error::WrongType)?,
    };
    let optc = c.argc() - 3;
    let mut full = false;
    let mut _count: i64 = 10;
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
            _count = parse_ll(c.arg(5))?;
            if _count < 0 {
                _count = 10;
            }
        }
        full = true;
    }
    if full {
        // FULL needs consumer groups; it arrives with them.
        return Err(Error::Err("XS.INFO STREAM FULL is not supported yet"));
    }
    c.reply_map(10);
    c.reply_bulk(b"length");
    c.reply_int(s.length as i64);
    c.reply_bulk(b"radix-tree-keys");
    c.reply_int(s.rax_keys() as i64);
    c.reply_bulk(b"radix-tree-nodes");
    c.reply_int(s.rax_nodes() as i64);
    c.reply_bulk(b"last-generated-id");
    c.reply_bulk(&s.last_id.to_bytes());
    c.reply_bulk(b"max-deleted-entry-id");
    c.reply_bulk(&s.max_deleted_entry_id.to_bytes());
    c.reply_bulk(b"entries-added");
    c.reply_int(s.entries_added as i64);
    c.reply_bulk(b"recorded-first-entry-id");
    c.reply_bulk(&s.first_id.to_bytes());
    c.reply_bulk(b"groups");
    c.reply_int(0);
    c.reply_bulk(b"first-entry");
    if super::range::reply_entries(c, s, StreamId::MIN, StreamId::MAX, 1, false) == 0 {
        c.reply_null();
    }
    c.reply_bulk(b"last-entry");
    if super::range::reply_entries(c, s, StreamId::MIN, StreamId::MAX, 1, true) == 0 {
        c.reply_null();
    }
    Ok(())
}
