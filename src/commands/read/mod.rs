//! XS.READ [COUNT count] [MAXCOUNT n] [MAXSIZE bytes] [BLOCK ms] STREAMS key [key ...] id [id ...]
//! XS.READGROUP GROUP group consumer [COUNT count] [MAXCOUNT n] [MAXSIZE bytes] [BLOCK ms] [CLAIM min-idle-time] [NOACK] STREAMS key [key ...] id [id ...]
//!
//! One parser for both, as the built-in xreadCommand ([`run_generic`], this file). With
//! BLOCK and nothing to serve, the client blocks on its keys (src/ffi/blocking.rs)
//! and is served by [`serve_blocked`] when a write signals one of them.
//!
//! - `budget.rs`: MAXCOUNT / MAXSIZE, what one call may still emit.
//! - `group.rs`: one stream of a group read (history, claimed, due, scheduled, new) with
//!   its queue policies and what it propagates.
//! - `serve.rs`: the one serving loop: the command's pass, a blocked reader's re-run, 7.0's
//!   signalled key.
//! - `block.rs`: the blocked reader (impl Waiter), its wake-up times.
//!
//! Replication of XS.READGROUP (COMPAT.md §4): the command itself is never
//! propagated; see [`serve_group`] for what goes out instead (one XS.CLAIM per
//! read for the entries delivered, with the group's last ID and entries-read).
//!
//! CLAIM min-idle-time (Redis 8.4, REDIS8.md §4): a `>` read first takes over the
//! group's pending entries idle for at least min-idle-time, oldest delivery first,
//! then reads new entries; every entry of such a reply has 4 elements
//! ([`serve_taken`]). A blocked CLAIM reader also wakes when an entry becomes
//! claimable (src/jobs/wake.rs).

use crate::commands::claim::{propagate_claim_ids, propagate_group_id, propagate_xclaim};
use crate::commands::{cstr, is_kw, parse_ll};
use crate::config::Level;
use crate::error::{Error, NoGroup, Result};
use crate::ffi::ctx::{Arg, Ctx, KeyKind, Name, Word};
use crate::stream::group::DeliveryTime;
use crate::stream::{Nack, StreamId};

mod block;
mod budget;
mod group;
mod serve;

use block::*;
use budget::*;
use group::*;
use serve::*;

pub fn run_read(c: &Ctx) -> Result<()> {
    run_generic(c, false)
}

pub fn run_readgroup(c: &Ctx) -> Result<()> {
    run_generic(c, true)
}

/// One stream of an XREAD / XREADGROUP reply: the outer map (RESP3) or array
/// (RESP2) opens with the first stream served (`served` counts it), then the
/// stream's name (RESP2: inside a 2-element array); its entries follow.
pub(super) fn stream_header(c: &Ctx, resp3: bool, served: usize, key_idx: usize) {
    if served == 1 {
        if resp3 {
            c.reply_map_postponed();
        } else {
            c.reply_array_postponed();
        }
    }
    if !resp3 {
        c.reply_array(2);
    }
    c.reply_bulk(c.arg(key_idx));
}

/// Closes the outer reply opened by [`stream_header`].
pub(super) fn close_streams(c: &Ctx, resp3: bool, served: usize) {
    if resp3 {
        c.set_map_len(served);
    } else {
        c.set_array_len(served);
    }
}

/// The error for a key list without an ID per key: its text changed in 7.2 and 8.0.
pub(super) fn unbalanced(xreadgroup: bool) -> Error {
    let text = match (crate::config::level(), xreadgroup) {
        (Level::V7_0, _) => "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
        (Level::V7_2 | Level::V7_4, false) => "Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.",
        (Level::V7_2 | Level::V7_4, true) => "Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified.",
        (_, false) => "Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified.",
        (_, true) => "Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified.",
    };
    Error::Err(text)
}

/// Entries served to a blocked XREAD when it gave no COUNT (XREAD_BLOCKED_DEFAULT_COUNT).
pub(super) const BLOCKED_COUNT_DEFAULT: u64 = 1000;

/// XREADGROUP's error for a key without the group.
pub(super) fn nogroup_read(key: &[u8], group: &[u8]) -> Error {
    Error::no_group(NoGroup::ReadGroup, key, group)
}

/// How a stream's ID argument was given.
#[derive(Clone, Copy, Debug)]
pub(super) enum ReadFrom {
    /// Entries greater than this ID (`$` resolved, or an explicit ID).
    After(StreamId),
    /// `>`: entries never delivered to the group.
    New,
    /// `+` (7.4): the last entry now; when blocking, entries after this last ID.
    Last(StreamId),
}

fn run_generic(c: &Ctx, xreadgroup: bool) -> Result<()> {
    let argc = c.argc();
    let mut timeout: i64 = -1;
    let mut count: i64 = 0;
    let mut count_given = false;
    let mut maxcount: u64 = 0;
    let mut maxsize: u64 = 0;
    let mut streams_arg = 0;
    let mut streams_count = 0;
    let mut noack = false;
    let mut group_arg = None;
    let mut claim: Option<i64> = None;
    let mut i = 1;
    while i < argc {
        let moreargs = argc - i - 1;
        let o = c.arg(i);
        if is_kw(o, "BLOCK") && moreargs > 0 {
            // 7.4 (and Valkey 8) let scripts pass BLOCK (answered as a non-blocking read).
            if c.in_script() && !crate::config::scripts_may_block() {
                // argv[0] as the script spelled it (`xread` through the takeover filter).
                return Err(Error::Full(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(cstr(&c.command_name()))
                )));
            }
            i += 1;
            timeout = parse_ll(c.arg(i)).map_err(|_| Error::Err("timeout is not an integer or out of range"))?;
            if timeout < 0 {
                return Err(Error::Err("timeout is negative"));
            }
            // 7.2: a timeout whose deadline would overflow is refused.
            if timeout > 0 && crate::config::level() >= Level::V7_2 && timeout > i64::MAX - c.now_ms() as i64 {
                return Err(Error::Err("timeout is out of range"));
            }
        } else if is_kw(o, "COUNT") && moreargs > 0 {
            i += 1;
            count = parse_ll(c.arg(i))?.max(0);
            count_given = true;
        } else if is_kw(o, "MAXCOUNT") && moreargs > 0 {
            // 8.10. A non-integer gets the same text as 0 (not seen upstream: docs/redis8.md).
            i += 1;
            maxcount = parse_ll(c.arg(i)).ok().filter(|&n| n > 0).ok_or(Error::Err("MAXCOUNT must be a positive integer"))? as u64;
        } else if is_kw(o, "MAXSIZE") && moreargs > 0 {
            i += 1;
            maxsize = parse_ll(c.arg(i)).ok().filter(|&n| n > 0).ok_or(Error::Err("MAXSIZE must be a positive integer"))? as u64;
        } else if is_kw(o, "CLAIM") && moreargs > 0 {
            // 8.4. The last CLAIM wins; 0 is allowed.
            if !xreadgroup {
                return Err(Error::Err("The CLAIM option is only supported by XREADGROUP. You called XREAD instead."));
            }
            i += 1;
            let v = parse_ll(c.arg(i)).map_err(|_| Error::Err("min-idle-time is not an integer or out of range"))?;
            if v < 0 {
                return Err(Error::Err("min-idle-time must be a positive integer"));
            }
            claim = Some(v);
        } else if is_kw(o, "STREAMS") && moreargs > 0 {
            streams_arg = i + 1;
            streams_count = argc - streams_arg;
            if streams_count % 2 != 0 {
                return Err(unbalanced(xreadgroup));
            }
            streams_count /= 2;
            break;
        } else if is_kw(o, "GROUP") && moreargs >= 2 {
            if !xreadgroup {
                return Err(Error::Err("The GROUP option is only supported by XREADGROUP. You called XREAD instead."));
            }
            group_arg = Some(i + 1);
            i += 2;
        } else if is_kw(o, "NOACK") {
            if !xreadgroup {
                return Err(Error::Err("The NOACK option is only supported by XREADGROUP. You called XREAD instead."));
            }
            noack = true;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if streams_arg == 0 {
        return Err(Error::Syntax);
    }
    if xreadgroup && group_arg.is_none() {
        return Err(Error::Err("Missing GROUP option for XREADGROUP"));
    }
    if maxcount > 0 && count_given && count > 0 && (maxcount as i64) < count {
        return Err(Error::Err("MAXCOUNT must be greater than or equal to COUNT"));
    }
    let gname = group_arg.map(|g| c.arg(g));

    // First pass: types, groups and IDs, before anything is served.
    // Bounded by argc: one element per key the client sent.
    let mut from = Vec::with_capacity(streams_count);
    for k in 0..streams_count {
        let key_idx = streams_arg + k;
        let id_idx = key_idx + streams_count;
        let key = c.key(key_idx, false);
        let kind = key.kind();
        if kind == KeyKind::Other {
            return Err(key.wrong_type());
        }
        if let Some(g) = gname {
            if key.stream().and_then(|s| s.group(g)).is_none() {
                return Err(nogroup_read(c.arg(key_idx), g));
            }
        }
        let arg = c.arg(id_idx);
        if cstr(arg) == b"$" {
            if xreadgroup {
                return Err(Error::Err(
                    "The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ));
            }
            from.push(ReadFrom::After(key.stream().map_or(StreamId::MIN, |s| s.last_id)));
            continue;
        } else if cstr(arg) == b">" {
            if !xreadgroup {
                return Err(Error::Err("The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
            }
            from.push(ReadFrom::New);
            continue;
        } else if cstr(arg) == b"+" {
            // Redis 7.4: `+` reads the last entry (COMPAT.md §3).
            if xreadgroup {
                return Err(Error::Err(
                    "The + ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would just return an empty result set.",
                ));
            }
            from.push(ReadFrom::Last(key.stream().map_or(StreamId::MIN, |s| s.last_id)));
            continue;
        }
        let (id, _) = StreamId::parse(arg, 0, true, false).ok_or(Error::InvalidId)?;
        // The built-in stores `>` as the maximal ID (UINT64_MAX-UINT64_MAX) and tells
        // the two apart by value only, so an explicit maximal ID is `>`.
        if xreadgroup && id == StreamId::MAX {
            from.push(ReadFrom::New);
            continue;
        }
        from.push(ReadFrom::After(id));
    }

    // Second pass: serve what can be served now (serve.rs, the one serving loop).
    let now = c.now_ms() as i64;
    let waits = timeout != -1 && !c.deny_blocking();
    let read = Read { pass: Pass::Command, streams_arg, from: &from, group_arg, noack, claim, count: count as u64, maxcount, maxsize, now, waits };
    if serve(c, &read)? {
        return Ok(());
    }
    if timeout != -1 {
        if c.deny_blocking() {
            c.reply_null_array();
            return Ok(());
        }
        // A `+` that found nothing waits like `$`.
        let from = from
            .into_iter()
            .map(|f| match f {
                ReadFrom::Last(id) => ReadFrom::After(id),
                other => other,
            })
            .collect();
        let registration = group_arg.map(|ga| crate::ffi::blocking::Registration {
            id: crate::ffi::blocking::next_id(),
            db: c.selected_db(),
            keys: (streams_arg..streams_arg + streams_count).map(|i| c.arg(i).to_vec()).collect(),
            consumer: Some((c.arg(ga).to_vec(), c.arg(ga + 1).to_vec())),
            wait: wait_bytes(c, ga, claim, noack, streams_arg..streams_arg + streams_count),
            key_gone: std::cell::Cell::new(false),
        });
        let state = BlockState {
            streams_arg,
            from,
            // 7.0 caps a blocked read without COUNT; 7.2 re-executes the command
            // with its own COUNT.
            count: if count > 0 {
                count as u64
            } else if crate::config::level() < Level::V7_2 {
                BLOCKED_COUNT_DEFAULT
            } else {
                0
            },
            maxcount,
            maxsize,
            noack,
            group_arg,
            claim,
            db: c.selected_db(),
            registration,
        };
        // Computed before the state moves into the blocked client.
        let wake = claim_wake_at(c, &state, now);
        let keys: Vec<usize> = (streams_arg..streams_arg + streams_count).collect();
        if !crate::ffi::blocking::block_on_keys(c, &keys, timeout, Box::new(state)) {
            return Err(Error::Err("cannot block the client"));
        }
        if let Some(due) = wake {
            let names = (streams_arg..streams_arg + streams_count).map(|i| c.arg(i));
            crate::ops::due::wake_readers(c, c.selected_db(), names, due);
        }
        return Ok(());
    }
    c.reply_null_array();
    Ok(())
}
