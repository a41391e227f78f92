//! XS.READ [COUNT count] [BLOCK ms] STREAMS key [key ...] id [id ...]
//! XS.READGROUP GROUP group consumer [COUNT count] [BLOCK ms] [NOACK] STREAMS key [key ...] id [id ...]
//!
//! One parser and one serving loop for both, as the built-in xreadCommand. With
//! BLOCK and nothing to serve, the client blocks on its keys (src/ffi/blocking.rs)
//! and is served by [`serve_blocked`] when a write signals one of them.
//!
//! Replication of XS.READGROUP (COMPAT.md §4): the command itself is never
//! propagated. Each entry delivered to a PEL goes out as XS.CLAIM ... LASTID; a
//! read that moved the group then goes out as XS.GROUP SETID ... ENTRIESREAD (the
//! built-in 7.0 does this only for NOACK reads and leaves entries-read stale on
//! replicas otherwise); a consumer created by a NOACK read as XS.GROUP
//! CREATECONSUMER (otherwise the XS.CLAIM creates it on the replica).

use super::claim::{propagate_group_id, propagate_xclaim};
use super::{cstr, is_kw, parse_ll};
use crate::error::{Error, Result};
use crate::ffi::ctx::{Arg, Ctx, KeyKind, Word};
use crate::stream::StreamId;

pub fn run_read(c: &Ctx) -> Result<()> {
    run_generic(c, false)
}

pub fn run_readgroup(c: &Ctx) -> Result<()> {
    run_generic(c, true)
}

/// Entries served to a blocked XREAD when it gave no COUNT (XREAD_BLOCKED_DEFAULT_COUNT).
const BLOCKED_COUNT_DEFAULT: u64 = 1000;

/// What a blocked reader waits for (the built-in's c->bpop for streams).
#[derive(Debug)]
pub struct BlockState {
    streams_arg: usize,
    /// Per key argument: what it waits after (`$` resolved when blocking).
    from: Vec<ReadFrom>,
    count: u64,
    noack: bool,
    group_arg: Option<usize>,
    /// Group readers are registered so that a deleted key releases them.
    registration: Option<crate::ffi::blocking::Registration>,
}

impl BlockState {
    pub fn registration(&self) -> Option<&crate::ffi::blocking::Registration> {
        self.registration.as_ref()
    }
}

/// How a stream's ID argument was given.
#[derive(Clone, Copy, Debug)]
enum ReadFrom {
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
    let mut streams_arg = 0;
    let mut streams_count = 0;
    let mut noack = false;
    let mut group_arg = None;
    let mut i = 1;
    while i < argc {
        let moreargs = argc - i - 1;
        let o = c.arg(i);
        if is_kw(o, "BLOCK") && moreargs > 0 {
            if c.in_script() {
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
        } else if is_kw(o, "COUNT") && moreargs > 0 {
            i += 1;
            count = parse_ll(c.arg(i))?.max(0);
        } else if is_kw(o, "STREAMS") && moreargs > 0 {
            streams_arg = i + 1;
            streams_count = argc - streams_arg;
            if streams_count % 2 != 0 {
                return Err(Error::Err(
                    "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
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
                return Err(Error::Full(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(cstr(c.arg(key_idx))),
                    String::from_utf8_lossy(cstr(g))
                )));
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
                return Err(Error::Err(
                    "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
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
        from.push(ReadFrom::After(id));
    }

    // Second pass: serve what can be served now.
    let resp3 = c.is_resp3();
    let now = c.now_ms() as i64;
    let mut served = 0usize;
    for (k, rf) in from.iter().enumerate() {
        let key_idx = streams_arg + k;
        let mut key = c.key(key_idx, xreadgroup);
        let Some(s) = key.stream_mut() else { continue };
        let (serve, start, history) = match (gname, *rf) {
            (Some(_), ReadFrom::After(id)) => (true, id, true),
            (Some(g), ReadFrom::New) => {
                let last = s.group(g).map_or(StreamId::MAX, |g| g.last_id);
                (s.length > 0 && s.last_valid_id() > last, last, false)
            }
            (None, ReadFrom::After(id)) => (s.length > 0 && s.last_valid_id() > id, id, false),
            (None, ReadFrom::Last(_)) if s.length > 0 => {
                // Served from the last live entry itself, one entry.
                (true, s.last_valid_id().prev().unwrap_or(StreamId::MAX), false)
            }
            (_, ReadFrom::New) | (_, ReadFrom::Last(_)) => (false, StreamId::MAX, false),
        };
        if !serve {
            continue;
        }
        served += 1;
        if served == 1 {
            if resp3 {
                c.reply_map_postponed();
            } else {
                c.reply_array_postponed();
            }
        }
        // streamIncrID wraps the last possible ID to 0-0, and so do we.
        let start = start.next().unwrap_or(StreamId::MIN);
        if !resp3 {
            c.reply_array(2);
        }
        c.reply_bulk(c.arg(key_idx));
        let Some(g) = gname else {
            let n = if matches!(rf, ReadFrom::Last(_)) { 1 } else { count as u64 };
            super::range::reply_range(c, s, start, StreamId::MAX, n, false);
            continue;
        };
        serve_group_new(c, s, g, group_arg.unwrap_or(0), key_idx, start, count as u64, noack, history, now)?;
    }
    if served > 0 {
        if resp3 {
            c.set_map_len(served);
        } else {
            c.set_array_len(served);
        }
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
        let registration = group_arg.map(|_| crate::ffi::blocking::Registration {
            id: crate::ffi::blocking::next_id(),
            db: crate::ffi::blocking::selected_db(c),
            keys: (streams_arg..streams_arg + streams_count).map(|i| c.arg(i).to_vec()).collect(),
            key_gone: std::cell::Cell::new(false),
        });
        let state = BlockState {
            streams_arg,
            from,
            count: if count > 0 { count as u64 } else { BLOCKED_COUNT_DEFAULT },
            noack,
            group_arg,
            registration,
        };
        let keys: Vec<usize> = (streams_arg..streams_arg + streams_count).collect();
        if !crate::ffi::blocking::block_on_keys(c, &keys, timeout, state) {
            return Err(Error::Err("cannot block the client"));
        }
        return Ok(());
    }
    c.reply_null_array();
    Ok(())
}

/// Serves a group read on one stream: the consumer is looked up (seen now) or
/// created, then history or new entries are replied and recorded.
#[allow(clippy::too_many_arguments)]
fn serve_group_new(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    group_arg: usize,
    key_idx: usize,
    start: StreamId,
    count: u64,
    noack: bool,
    history: bool,
    now: i64,
) -> Result<()> {
    let consumer_name = c.arg(group_arg + 1);
    let grp = s.group_mut(g).ok_or(Error::Err("group vanished"))?;
    let existed = grp.find_consumer(consumer_name).is_some();
    let slot = super::claim::consumer_slot(c, grp, consumer_name, now, key_idx)?;
    if !existed && noack {
        // A NOACK read propagates no XS.CLAIM, which would create the consumer on replicas.
        c.replicate(
            c"XS.GROUP",
            &[Arg::Word(Word::CreateConsumer), Arg::Orig(key_idx), Arg::Orig(group_arg), Arg::Orig(group_arg + 1)],
        );
    }
    if let Some(cons) = grp.consumer_mut(slot) {
        cons.active_time = now;
    }
    c.reply_array_postponed();
    if history {
        let n = s.read_group_history(g, slot, start, count, now, |id, e| match e {
            Some(e) => super::range::reply_entry(c, &e),
            None => {
                c.reply_array(2);
                c.reply_id(id);
                c.reply_null_array();
            }
        });
        c.set_array_len(n as usize);
    } else {
        let (n, moved) = s.read_group_new(g, slot, start, count, noack, now, |e, nack, glast| {
            super::range::reply_entry(c, &e);
            if let Some(nk) = nack {
                propagate_xclaim(c, key_idx, group_arg, consumer_name, e.id(), &nk, glast);
            }
        });
        c.set_array_len(n as usize);
        // The group's new last ID and read counter go out as XS.GROUP SETID ...
        // ENTRIESREAD: with NOACK nothing else carries them, and without it the
        // XS.CLAIM ... LASTID forms carry the last ID but not entries-read, which
        // Redis 7.0 leaves stale on replicas (fixed upstream, redis#12898, the
        // same way). Replicas end content-identical (COMPAT.md §7).
        if moved {
            if let Some(grp) = s.group(g) {
                propagate_group_id(c, key_idx, group_arg, grp.last_id, grp.entries_read);
            }
        }
    }
    Ok(())
}

/// Serves a blocked reader when `ready_key` was signalled (serveClientsBlockedOnStreamKey).
/// Returns false to keep it blocked.
pub fn serve_blocked(c: &Ctx, st: &BlockState, ready_key: &[u8]) -> bool {
    // The first occurrence of the key wins, as in blockForKeys.
    let Some(k) = (0..st.from.len()).find(|&k| c.arg(st.streams_arg + k) == ready_key) else { return false };
    let key_idx = st.streams_arg + k;
    let gname = st.group_arg.map(|g| c.arg(g));
    let mut key = c.key(key_idx, gname.is_some());
    let Some(s) = key.stream_mut() else { return false };
    let gt = match (gname, st.from[k]) {
        (Some(g), _) => match s.group(g) {
            Some(grp) => grp.last_id,
            None => {
                c.reply_error("NOGROUP the consumer group this client was blocked on no longer exists");
                return true;
            }
        },
        (None, ReadFrom::After(id)) | (None, ReadFrom::Last(id)) => id,
        (None, ReadFrom::New) => return false,
    };
    if s.last_id <= gt {
        return false;
    }
    let start = gt.next().unwrap_or(StreamId::MIN);
    if c.is_resp3() {
        c.reply_map(1);
    } else {
        c.reply_array(1);
        c.reply_array(2);
    }
    c.reply_bulk(ready_key);
    match (gname, st.group_arg) {
        (Some(g), Some(ga)) => {
            let now = c.now_ms() as i64;
            if let Err(e) = serve_group_new(c, s, g, ga, key_idx, start, st.count, st.noack, false, now) {
                // Cannot happen (the group was just found); keep the reply well formed.
                c.reply_error(&e.message());
            }
        }
        _ => {
            super::range::reply_range(c, s, start, StreamId::MAX, st.count, false);
        }
    }
    true
}
