//! XS.READ [COUNT count] [MAXCOUNT n] [MAXSIZE bytes] [BLOCK ms] STREAMS key [key ...] id [id ...]
//! XS.READGROUP GROUP group consumer [COUNT count] [MAXCOUNT n] [MAXSIZE bytes] [BLOCK ms] [CLAIM min-idle-time] [NOACK] STREAMS key [key ...] id [id ...]
//!
//! One parser and one serving loop for both, as the built-in xreadCommand. With
//! BLOCK and nothing to serve, the client blocks on its keys (src/ffi/blocking.rs)
//! and is served by [`serve_blocked`] when a write signals one of them.
//!
//! Replication of XS.READGROUP (COMPAT.md §4): the command itself is never
//! propagated; see [`serve_group`] for what goes out instead (one XS.CLAIM per
//! read for the entries delivered, with the group's last ID and entries-read).
//!
//! CLAIM min-idle-time (Redis 8.4, REDIS8.md §4): a `>` read first takes over the
//! group's pending entries idle for at least min-idle-time, oldest delivery first,
//! then reads new entries; every entry of such a reply has 4 elements
//! ([`serve_claimed`]). A blocked CLAIM reader also wakes when an entry becomes
//! claimable (src/jobs/wake.rs).

use super::claim::{propagate_group_id, propagate_xclaim};
use super::{cstr, is_kw, parse_ll};
use crate::config::Level;
use crate::error::{Error, Result};
use crate::ffi::ctx::{Arg, Ctx, KeyKind, Name, Word};
use crate::stream::group::DeliveryTime;
use crate::stream::{Nack, StreamId};

pub fn run_read(c: &Ctx) -> Result<()> {
    run_generic(c, false)
}

pub fn run_readgroup(c: &Ctx) -> Result<()> {
    run_generic(c, true)
}

/// One stream of an XREAD / XREADGROUP reply: the outer map (RESP3) or array
/// (RESP2) opens with the first stream served (`served` counts it), then the
/// stream's name (RESP2: inside a 2-element array); its entries follow.
fn stream_header(c: &Ctx, resp3: bool, served: usize, key_idx: usize) {
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
fn close_streams(c: &Ctx, resp3: bool, served: usize) {
    if resp3 {
        c.set_map_len(served);
    } else {
        c.set_array_len(served);
    }
}

/// MAXCOUNT / MAXSIZE of Redis 8.10 (REDIS8.md §7): what one call may still emit.
///
/// - MAXCOUNT caps the entries of the whole reply: streams are served in argument
///   order, each with min(COUNT, what is left); once nothing is left, later
///   streams are not served (and do not appear).
/// - MAXSIZE is a soft byte budget, checked before every further entry and before
///   every further stream: once at least one entry is in the reply and the bytes
///   emitted so far reach it, the call stops. The first entry always goes out, and
///   the entry that crosses the budget goes out whole. The built-in counts its
///   client's output bytes; a module cannot see them, so the bytes are the RESP
///   encoding of what this call emitted in the client's protocol: stream names (in
///   RESP2 with their 2-element array), entries, and each stream's entry-array
///   header once filled; the outer array or map header (filled at the end) is not
///   counted (docs/redis8.md).
///
/// Withheld entries are not delivered: no PEL entry, no last-ID move, nothing
/// propagated. Without either option a budget never stops anything and sizes are
/// not computed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Budget {
    /// Entries still allowed (MAXCOUNT), None without MAXCOUNT.
    count_left: Option<u64>,
    /// MAXSIZE in bytes, None without it.
    size_max: Option<u64>,
    /// Entries and bytes emitted so far by this call.
    entries: u64,
    bytes: u64,
    resp3: bool,
}

/// Length of a RESP aggregate or bulk header for `n` (`*n\r\n`: 3 + digits).
fn header_len(n: u64) -> u64 {
    let mut digits = 1;
    let mut v = n;
    while v >= 10 {
        v /= 10;
        digits += 1;
    }
    3 + digits
}

/// Bytes of a bulk string of `len` bytes.
fn bulk_len(len: u64) -> u64 {
    header_len(len) + len + 2
}

/// Bytes of a listpack value replied as a bulk string.
fn value_len(v: crate::listpack::Value<'_>) -> u64 {
    match v {
        crate::listpack::Value::Str(b) => bulk_len(b.len() as u64),
        crate::listpack::Value::Int(i) => {
            let digits = i.unsigned_abs().checked_ilog10().map_or(1, |d| u64::from(d) + 1) + u64::from(i < 0);
            bulk_len(digits)
        }
    }
}

/// Bytes of a RESP integer (`:n\r\n`).
fn int_len(v: i64) -> u64 {
    let digits = v.unsigned_abs().checked_ilog10().map_or(1, |d| u64::from(d) + 1) + u64::from(v < 0);
    3 + digits
}

fn id_len(id: StreamId) -> u64 {
    let mut buf = [0u8; 44];
    bulk_len(id.write_to_slice(&mut buf) as u64)
}

impl Budget {
    fn new(maxcount: u64, maxsize: u64, resp3: bool) -> Budget {
        Budget { count_left: (maxcount > 0).then_some(maxcount), size_max: (maxsize > 0).then_some(maxsize), entries: 0, bytes: 0, resp3 }
    }

    /// Nothing more may be emitted.
    fn exhausted(&self) -> bool {
        self.count_left == Some(0) || (self.entries > 0 && self.size_max.is_some_and(|m| self.bytes >= m))
    }

    /// The count for the next stream: COUNT (0 = all) within MAXCOUNT.
    fn stream_count(&self, count: u64) -> u64 {
        match self.count_left {
            Some(left) if count == 0 || left < count => left,
            _ => count,
        }
    }

    /// A stream's name went out (RESP2: inside its 2-element array).
    fn add_stream(&mut self, key: &[u8]) {
        if self.size_max.is_some() {
            self.bytes += bulk_len(key.len() as u64) + if self.resp3 { 0 } else { header_len(2) };
        }
    }

    /// A stream's entry array was filled with `n` entries.
    fn add_array(&mut self, n: u64) {
        if self.size_max.is_some() {
            self.bytes += header_len(n);
        }
    }

    /// An entry went out (`claim`: a CLAIM read's 4-element entry with these idle
    /// and count integers). Returns whether the call may go on.
    fn add_entry(&mut self, e: Option<&crate::stream::Entry<'_>>, id: StreamId, claim: Option<(i64, i64)>) -> bool {
        self.entries += 1;
        if let Some(left) = self.count_left.as_mut() {
            *left = left.saturating_sub(1);
        }
        if self.size_max.is_some() {
            self.bytes += match claim {
                Some((idle, count)) => header_len(4) + int_len(idle) + int_len(count),
                None => header_len(2),
            } + id_len(id);
            match e {
                Some(e) => {
                    self.bytes += header_len(e.numfields() as u64 * 2);
                    let mut fields = 0;
                    e.for_each_field(|f, v| fields += value_len(f) + value_len(v));
                    self.bytes += fields;
                }
                // [id, nil] of a deleted entry in a history read.
                None => self.bytes += if self.resp3 { 3 } else { 5 },
            }
        }
        !self.exhausted()
    }
}

/// XREAD's entries of one stream from `start`, within `count` and the budget.
fn reply_range_budget(c: &Ctx, s: &crate::stream::Stream, start: StreamId, count: u64, budget: &mut Budget) {
    c.reply_array_postponed();
    let mut n = 0u64;
    for e in s.range(start, StreamId::MAX, false) {
        super::range::reply_entry(c, &e);
        n += 1;
        if !budget.add_entry(Some(&e), e.id(), None) || (count != 0 && n == count) {
            break;
        }
    }
    c.set_array_len(n as usize);
    budget.add_array(n);
}

/// The error for a key list without an ID per key: its text changed in 7.2 and 8.0.
fn unbalanced(xreadgroup: bool) -> Error {
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
const BLOCKED_COUNT_DEFAULT: u64 = 1000;

/// What a blocked reader waits for (the built-in's c->bpop for streams).
#[derive(Debug)]
pub struct BlockState {
    streams_arg: usize,
    /// Per key argument: what it waits after (`$` resolved when blocking).
    from: Vec<ReadFrom>,
    count: u64,
    /// MAXCOUNT / MAXSIZE (0: not given).
    maxcount: u64,
    maxsize: u64,
    noack: bool,
    group_arg: Option<usize>,
    /// CLAIM min-idle-time (ms).
    claim: Option<i64>,
    /// When the block times out (unix ms); None for BLOCK 0.
    deadline_ms: Option<i64>,
    /// The client's db when it blocked.
    db: i32,
    /// Group readers are registered so that a deleted key releases them.
    registration: Option<crate::ffi::blocking::Registration>,
}

impl crate::ffi::blocking::Waiter for BlockState {
    fn serve(&self, c: &Ctx, ready_key: &[u8]) -> bool {
        let served = serve_blocked(c, self, ready_key);
        if !served {
            // A CLAIM reader woken too early (or by a write that served someone
            // else) waits for its next claimable entry again.
            schedule_claim_wake(c, self, c.now_ms() as i64);
        }
        served
    }

    fn release(&self, c: &Ctx, key_gone: bool) {
        if !key_gone {
            // Timeout or CLIENT UNBLOCK: a null reply, as XREAD's.
            c.reply_null_array();
        } else if crate::config::level() < Level::V7_2 {
            c.reply_error("UNBLOCKED the stream key no longer exists");
        } else {
            // 7.2 re-executes the command: it now fails on the key that went away.
            c.reply_error(&reexec_error(c, self).message());
        }
    }

    fn registration(&self) -> Option<&crate::ffi::blocking::Registration> {
        self.registration.as_ref()
    }
}

/// The first pass of a command Redis 7.2 re-executes for a blocked reader: the
/// error for the first key that fails (another type: WRONGTYPE; for XREADGROUP,
/// no stream or no group: NOGROUP), if any.
fn reexec_check(c: &Ctx, st: &BlockState) -> Option<Error> {
    let g = st.group_arg.map(|g| c.arg(g));
    for k in 0..st.from.len() {
        let key_idx = st.streams_arg + k;
        let key = c.key(key_idx, false);
        if key.kind() == KeyKind::Other {
            return Some(key.wrong_type());
        }
        if let Some(g) = g {
            if key.stream().and_then(|s| s.group(g)).is_none() {
                return Some(nogroup_read(c.arg(key_idx), g));
            }
        }
    }
    None
}

/// The error a blocked group reader gets when its key goes away (7.2+).
fn reexec_error(c: &Ctx, st: &BlockState) -> Error {
    reexec_check(c, st).unwrap_or_else(|| nogroup_read(c.arg(st.streams_arg), st.group_arg.map_or(&[][..], |g| c.arg(g))))
}

/// Redis 7.2 serves a blocked reader by running its command again (with `$`
/// resolved when it blocked): the keys are checked, every stream with something
/// new is served in argument order, and a reader with nothing to read stays
/// blocked. Returns false to keep it blocked.
fn serve_reexecuted(c: &Ctx, st: &BlockState) -> bool {
    // The built-in re-executes through processCommand, whose cluster check comes first (a key
    // deleted by MIGRATE while its slot migrates: -ASK).
    if let Some(redirect) = c.cluster_redirect(st.streams_arg..st.streams_arg + st.from.len()) {
        c.reply_error(&redirect);
        return true;
    }
    if let Some(e) = reexec_check(c, st) {
        c.reply_error(&e.message());
        return true;
    }
    let gname = st.group_arg.map(|g| (c.arg(g), g));
    let resp3 = c.is_resp3();
    let now = c.now_ms() as i64;
    let mut served = 0usize;
    let mut budget = Budget::new(st.maxcount, st.maxsize, resp3);
    for (k, rf) in st.from.iter().enumerate() {
        if budget.exhausted() {
            break;
        }
        let key_idx = st.streams_arg + k;
        let mut key = c.key(key_idx, gname.is_some());
        let Some(s) = key.stream_mut() else { continue };
        let gt = match (gname, *rf) {
            (Some((g, ga)), _) => {
                if group_consumer(c, s, g, ga, key_idx, st.noack, false, now).is_err() {
                    continue;
                }
                match s.group(g) {
                    Some(grp) => grp.last_id,
                    None => continue,
                }
            }
            (None, ReadFrom::After(id)) | (None, ReadFrom::Last(id)) => id,
            (None, ReadFrom::New) => continue,
        };
        let mut gt = gt;
        let mut capped = false;
        let mut purge_capped = false;
        if let Some((g, ga)) = gname {
            purge_capped = purge_over_limit(c, s, g, key_idx, ga, st.claim, st.noack, now, st.count);
            capped = pass_over_delayed(c, s, g, key_idx, ga, now);
            gt = s.group(g).map_or(gt, |grp| grp.last_id);
        }
        let has_new = !capped && s.length > 0 && s.last_valid_id() > gt;
        let claimable = match (gname, st.claim) {
            (Some((g, _)), Some(min_idle)) => (!purge_capped && claimable_now(s, g, min_idle, now)) || scheduled_now(s, g, now),
            (Some((g, _)), None) => (!purge_capped && !st.noack && redelivers(s, g) && due_now(s, g, now)) || scheduled_now(s, g, now),
            _ => false,
        };
        if !has_new && !claimable {
            continue;
        }
        served += 1;
        stream_header(c, resp3, served, key_idx);
        budget.add_stream(c.arg(key_idx));
        let start = gt.next().unwrap_or(StreamId::MIN);
        let count = budget.stream_count(st.count);
        match gname {
            Some((g, ga)) => {
                let read = GroupRead { group_arg: ga, key_idx, start, count, noack: st.noack, history: false, blocked: false, claim: st.claim, now };
                if let Err(e) = serve_group(c, s, g, &read, &mut budget) {
                    // Cannot happen (the group was just found); keep the reply well formed.
                    c.reply_error(&e.message());
                }
            }
            None => reply_range_budget(c, s, start, count, &mut budget),
        }
    }
    if served == 0 {
        return false;
    }
    close_streams(c, resp3, served);
    true
}

/// XREADGROUP's error for a key without the group.
fn nogroup_read(key: &[u8], group: &[u8]) -> Error {
    Error::Full(format!(
        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
        String::from_utf8_lossy(cstr(key)),
        String::from_utf8_lossy(cstr(group))
    ))
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

    // Second pass: serve what can be served now.
    let resp3 = c.is_resp3();
    let now = c.now_ms() as i64;
    let mut served = 0usize;
    let mut budget = Budget::new(maxcount, maxsize, resp3);
    for (k, rf) in from.iter().enumerate() {
        if budget.exhausted() {
            // MAXCOUNT / MAXSIZE reached: the later streams are not looked at (not
            // served, and 7.2's consumer creation does not reach them either).
            break;
        }
        let key_idx = streams_arg + k;
        let mut key = c.key(key_idx, xreadgroup);
        let Some(s) = key.stream_mut() else { continue };
        if let (Some(g), Some(ga), true) = (gname, group_arg, crate::config::level() >= Level::V7_2) {
            // 7.2: the consumer exists (and is seen) on every stream of the call,
            // served or not.
            group_consumer(c, s, g, ga, key_idx, noack, false, now)?;
        }
        let mut purge_capped = false;
        if let (Some(g), Some(ga), ReadFrom::New) = (gname, group_arg, *rf) {
            purge_capped = purge_over_limit(c, s, g, key_idx, ga, claim, noack, now, count.max(0) as u64);
        }
        let (serve, start, history) = match (gname, *rf) {
            (Some(_), ReadFrom::After(id)) => (true, id, true),
            (Some(g), ReadFrom::New) => {
                let capped = group_arg.is_some_and(|ga| pass_over_delayed(c, s, g, key_idx, ga, now));
                let last = s.group(g).map_or(StreamId::MAX, |g| g.last_id);
                let has_new = !capped && s.length > 0 && s.last_valid_id() > last;
                // §4.3: with CLAIM, a stream with a claimable entry is served too
                // ("claimed only" when nothing is new).
                let claimable = (!purge_capped && claim.is_some_and(|min_idle| claimable_now(s, g, min_idle, now)))
                    || (!purge_capped && claim.is_none() && !noack && redelivers(s, g) && due_now(s, g, now))
                    || scheduled_now(s, g, now);
                (has_new || claimable, last, false)
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
        stream_header(c, resp3, served, key_idx);
        budget.add_stream(c.arg(key_idx));
        // streamIncrID wraps the last possible ID to 0-0, and so do we.
        let start = start.next().unwrap_or(StreamId::MIN);
        let Some(g) = gname else {
            let n = if matches!(rf, ReadFrom::Last(_)) { 1 } else { budget.stream_count(count as u64) };
            reply_range_budget(c, s, start, n, &mut budget);
            continue;
        };
        let read = GroupRead {
            group_arg: group_arg.unwrap_or(0),
            key_idx,
            start,
            count: budget.stream_count(count as u64),
            noack,
            history,
            blocked: false,
            // CLAIM is ignored by history reads.
            claim: if history { None } else { claim },
            now,
        };
        serve_group(c, s, g, &read, &mut budget)?;
    }
    if served > 0 {
        close_streams(c, resp3, served);
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
            deadline_ms: (timeout > 0).then(|| now.saturating_add(timeout)),
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

/// One stream's part of a group read (see [`serve_group`]).
struct GroupRead {
    group_arg: usize,
    key_idx: usize,
    /// First ID to serve: after the group's last ID (`>`), or the history start.
    start: StreamId,
    /// COUNT within MAXCOUNT; 0 = all.
    count: u64,
    noack: bool,
    history: bool,
    blocked: bool,
    /// CLAIM min-idle-time (ms), for `>` reads.
    claim: Option<i64>,
    now: i64,
}

/// Serves a group read on one stream: the consumer is looked up (seen now) or
/// created, then history or new entries are replied and recorded.
///
/// Propagation and the dirty counter follow t_stream.c of 7.0: a read served
/// synchronously counts one change per stream (`if (groups) server.dirty++`),
/// and a created consumer one more (SCC_DEFAULT); a read served to a blocked
/// client (blocked.c) counts only the consumer. What goes out:
/// - a created consumer: `XS.GROUP CREATECONSUMER` (the built-in sends it only
///   with NOACK; sending it always keeps the replica's consumers equal after a
///   history read, and counts the built-in's change). For a blocked reader
///   without NOACK the delivery below creates it instead.
/// - `>` with acknowledgement: ONE `XS.CLAIM key group consumer 0 id1 .. idN TIME t
///   RETRYCOUNT 1 FORCE JUSTID LASTID last ENTRIESREAD n` for all the entries
///   delivered (each got the same time and count 1), where the built-in sends one
///   XCLAIM per entry plus `XGROUP SETID ... ENTRIESREAD` (7.4; 7.0 leaves
///   entries-read stale on replicas). One command is one change, as theirs.
///   ENTRIESREAD is an internal option of XS.CLAIM, accepted only from the
///   primary or the AOF.
/// - `>` with NOACK: `XS.GROUP SETID key group last ENTRIESREAD n`.
/// - a history read propagates nothing (as the built-in: delivery counts and
///   times of re-read entries stay on the primary) and counts its change.
///
/// A blocked reader therefore counts one change more than the built-in's (its
/// delivery must be propagated, and every module propagation counts one).
fn serve_group(c: &Ctx, s: &mut crate::stream::Stream, g: &[u8], r: &GroupRead, budget: &mut Budget) -> Result<()> {
    let (group_arg, key_idx, now) = (r.group_arg, r.key_idx, r.now);
    let consumer_name = c.arg(group_arg + 1);
    let slot = group_consumer(c, s, g, group_arg, key_idx, r.noack, r.blocked, now)?;
    // Queue policies (issue 16): MAXDELIVERIES dead letters, CONSUMERTTL expiry.
    let mut dl = super::queue::DeadLetters::for_group(c, s, g, key_idx, group_arg);
    if !r.history && !c.must_obey() {
        expire_consumers(c, s, r);
    }
    let result = serve_group_policy(c, s, g, r, slot, consumer_name, budget, &mut dl);
    if let Some(d) = dl {
        d.flush(c);
    }
    result
}

/// CONSUMERTTL on a `>` read (src/ops/consumers.rs), then the group
/// registered for the primary's expiry timer at its next possible expiry.
fn expire_consumers(c: &Ctx, s: &mut crate::stream::Stream, r: &GroupRead) {
    let (key, group) = (Name::Arg(r.key_idx), Name::Arg(r.group_arg));
    if let Some(next) = crate::ops::consumers::expire(c, s, key, group, Some(c.arg(r.group_arg + 1)), r.now) {
        crate::ops::due::consumer_ttl(c, key, group, next);
    }
}

#[allow(clippy::too_many_arguments)]
fn serve_group_policy(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    r: &GroupRead,
    slot: u32,
    consumer_name: &[u8],
    budget: &mut Budget,
    dl: &mut Option<super::queue::DeadLetters>,
) -> Result<()> {
    let (group_arg, key_idx, now) = (r.group_arg, r.key_idx, r.now);
    if r.history {
        if let Some(d) = dl.as_mut() {
            // MAXDELIVERIES: the consumer's entries this read would deliver once too
            // often go to the dead letters first (and are not replied).
            let over: Vec<StreamId> = match s.group(g).and_then(|grp| grp.consumer(slot).map(|cons| (grp, cons))) {
                Some((grp, cons)) => {
                    let mut v = Vec::new();
                    let mut it = crate::stream::group::pel_from(cons.pel(), r.start);
                    let mut seen = 0u64;
                    while let Some((k, _)) = it.next() {
                        if r.count != 0 && seen == r.count {
                            break;
                        }
                        seen += 1;
                        let id = StreamId::from_be_bytes(k).unwrap_or_default();
                        if grp
                            .nack(id)
                            .is_some_and(|n| grp.policy().is_some_and(|p| p.over_limit(crate::stream::group::count_plus_one(n.delivery_count))))
                        {
                            v.push(id);
                        }
                    }
                    v
                }
                None => Vec::new(),
            };
            for id in over {
                if s.contains(id) {
                    d.take(c, s, g, id, crate::stream::queue::Reason::MaxDeliveries);
                }
            }
        }
    }
    c.reply_array_postponed();
    if r.history {
        // 8.8 saturates delivery counts at LLONG_MAX; the hosts' built-ins wrap. Under
        // MAXDELIVERIES they saturate too (a wrapped count would escape the limit).
        let saturate = crate::config::level() >= Level::Latest || dl.is_some();
        // Under a queue policy the counts and times decide (MAXDELIVERIES, the ack timeout's
        // backoff): the re-read entries' new ones go out (below), which the built-in's history
        // reads never propagate.
        let policy = s.group(g).is_some_and(|grp| grp.policy().is_some()) && !c.must_obey();
        let mut reread: Vec<StreamId> = Vec::new();
        let n = s.read_group_history(g, slot, r.start, r.count, now, saturate, |id, e| {
            if policy && e.is_some() {
                reread.push(id);
            }
            match &e {
                Some(e) => super::range::reply_entry(c, e),
                None => {
                    c.reply_array(2);
                    c.reply_id(id);
                    c.reply_null_array();
                }
            }
            budget.add_entry(e.as_ref(), id, None)
        });
        c.set_array_len(n as usize);
        budget.add_array(n);
        if let Some(grp) = s.group_mut(g) {
            grp.count_deliveries(n, n);
        }
        if let Some(grp) = s.group(g).filter(|_| !reread.is_empty()) {
            // As XS.CLAIM to the same consumer: TIME now, RETRYCOUNT the new count, one
            // command per run of equal counts.
            let counted: Vec<(StreamId, u64)> = reread.iter().filter_map(|&id| grp.nack(id).map(|nk| (id, nk.delivery_count))).collect();
            for run in counted.chunk_by(|a, b| a.1 == b.1) {
                let ids: Vec<StreamId> = run.iter().map(|(id, _)| *id).collect();
                propagate_claim_ids(c, key_idx, group_arg, &ids, now, run.first().map_or(1, |x| x.1), grp.last_id, None);
            }
        }
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_redelivered, n as u64);
        // 7.0 counts every stream served; 7.4 only those that propagated something,
        // which a history read never does.
        if crate::config::level() < Level::V7_4 {
            c.add_dirty(1);
        }
        return Ok(());
    }
    // CLAIM: the claimable pending entries first; COUNT covers them and the new ones.
    // Without CLAIM, a group whose policy redelivers (ACKTIMEOUT / CONSUMERTTL):
    // its due entries first, in the form of new ones.
    let (claimed, go_on) = match r.claim {
        Some(min_idle) => serve_claimed(c, s, g, slot, r, min_idle, budget, dl),
        None if !r.noack && !c.must_obey() && redelivers(s, g) => serve_due(c, s, g, slot, r, budget, dl),
        None => (0, true),
    };
    // Delayed delivery: scheduled entries now due, before new ones.
    let (scheduled, go_on) = if go_on && (r.count == 0 || r.count > claimed) {
        let limit = if r.count == 0 { 0 } else { r.count - claimed };
        serve_scheduled(c, s, g, slot, r, limit, budget)
    } else {
        (0, go_on)
    };
    let claimed_only = claimed;
    let claimed = claimed + scheduled;
    let count_new = if r.count == 0 { 0 } else { r.count.saturating_sub(claimed) };
    // Bounded by the entries actually delivered.
    let mut delivered: Vec<(StreamId, Nack)> = Vec::new();
    // Entries passed over into the schedule (streams with delayed entries only).
    let mut skipped: Vec<StreamId> = Vec::new();
    let track = s.delayed.is_some() && !c.must_obey();
    let (n, moved) = if go_on && (r.count == 0 || count_new > 0) {
        let four = r.claim.is_some();
        s.read_group_new(g, slot, r.start, count_new, r.noack, now, crate::config::lag_rules(), track.then_some(&mut skipped), |e, nack, _| {
            if four {
                reply_entry_claimed(c, &e, 0, 0);
            } else {
                super::range::reply_entry(c, &e);
            }
            if let Some(nk) = nack {
                delivered.push((e.id(), nk));
            }
            budget.add_entry(Some(&e), e.id(), four.then_some((0, 0)))
        })
    } else {
        (0, false)
    };
    c.set_array_len((claimed + n) as usize);
    budget.add_array(claimed + n);
    if let Some(grp) = s.group_mut(g) {
        grp.count_deliveries(claimed + n, claimed_only);
    }
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_delivered, (n + scheduled) as u64);
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_claimed, claimed_only as u64);
    let Some(grp) = s.group_mut(g) else { return Ok(()) };
    if !delivered.is_empty() {
        // 7.2's active-time: the last time entries went into this consumer's PEL.
        if let Some(cons) = grp.consumer_mut(slot) {
            cons.active_time = now;
        }
        propagate_deliveries(c, key_idx, group_arg, consumer_name, &delivered, grp.last_id, grp.entries_read);
    } else if moved {
        propagate_group_id(c, key_idx, group_arg, grp.last_id, grp.entries_read);
    }
    if !skipped.is_empty() {
        // After the group's last ID went out: the replica checks each ID is behind it.
        propagate_schedule(c, key_idx, group_arg, b"SCHEDULE", &skipped);
        wake_at_next_scheduled(c, s, g, key_idx);
    }
    Ok(())
}

/// Delayed delivery (src/stream/delay.rs): before a `>` read of group `g` decides
/// whether the stream has something new, the delayed entries right after the
/// group's last ID that are not due are passed over (scheduled; the last ID and
/// entries-read move past them), propagated as `XS.GROUP SETID key group last
/// ENTRIESREAD n` then `XS.GROUP SCHEDULE key group id ...`. The primary only.
///
/// Returns true when it stopped at its cap (PASS_OVER_MAX) on an entry still to pass
/// over: the read then serves no new entry from this stream (only due ones), and the
/// readers blocked on the key re-run at once to go on (bounded work per command).
fn pass_over_delayed(c: &Ctx, s: &mut crate::stream::Stream, g: &[u8], key_idx: usize, group_arg: usize, now: i64) -> bool {
    if s.delayed.is_none() || c.must_obey() {
        return false;
    }
    let ids = s.pass_over_delayed(g, now, crate::config::lag_rules());
    if ids.is_empty() {
        return false;
    }
    if let Some(grp) = s.group(g) {
        propagate_group_id(c, key_idx, group_arg, grp.last_id, grp.entries_read);
    }
    propagate_schedule(c, key_idx, group_arg, b"SCHEDULE", &ids);
    wake_at_next_scheduled(c, s, g, key_idx);
    let capped = ids.len() >= crate::stream::delay::PASS_OVER_MAX;
    if capped {
        crate::ops::due::wake_readers(c, c.selected_db(), std::iter::once(c.arg(key_idx)), now);
    }
    capped
}

/// Readers blocked on the key re-run when the group's earliest scheduled entry is due.
fn wake_at_next_scheduled(c: &Ctx, s: &crate::stream::Stream, g: &[u8], key_idx: usize) {
    if let Some(due) = s.group(g).and_then(|grp| grp.next_scheduled()) {
        crate::ops::due::wake_readers(c, c.selected_db(), std::iter::once(c.arg(key_idx)), due);
    }
}

/// IDs per propagated XS.GROUP SCHEDULE / UNSCHEDULE.
const SCHEDULE_BATCH: usize = 1000;

/// `XS.GROUP SCHEDULE|UNSCHEDULE key group id ...`, in batches.
fn propagate_schedule(c: &Ctx, key_idx: usize, group_arg: usize, sub: &[u8], ids: &[StreamId]) {
    for chunk in ids.chunks(SCHEDULE_BATCH) {
        let texts: Vec<Vec<u8>> = chunk.iter().map(|id| id.to_bytes()).collect();
        let mut args: Vec<Arg> = Vec::with_capacity(texts.len() + 3);
        args.extend([Arg::New(sub), Arg::Orig(key_idx), Arg::Orig(group_arg)]);
        args.extend(texts.iter().map(|t| Arg::New(t)));
        c.replicate(c"XS.GROUP", &args);
    }
}

/// Whether group `g` has a scheduled entry due at `now`.
fn scheduled_now(s: &crate::stream::Stream, g: &[u8], now: i64) -> bool {
    s.group(g).is_some_and(|grp| grp.next_scheduled().is_some_and(|d| d <= now))
}

/// The scheduled part of a `>` read (delayed delivery): entries of the group's
/// schedule due at `now`, by (due, ID), at most `limit` (0 = all) within the
/// budget, replied as new entries are and delivered as new entries are (a NACK
/// with count 1 at the time list's tail, or none with NOACK). Propagated as the
/// deliveries' `XS.CLAIM ... FORCE JUSTID LASTID` (a forced claim takes an entry
/// out of the schedule), or with NOACK `XS.GROUP UNSCHEDULE key group id ...`.
fn serve_scheduled(c: &Ctx, s: &mut crate::stream::Stream, g: &[u8], slot: u32, r: &GroupRead, limit: u64, budget: &mut Budget) -> (u64, bool) {
    let now = r.now;
    let Some(grp) = s.group(g) else { return (0, true) };
    if grp.schedule().is_none() || c.must_obey() {
        return (0, true);
    }
    let last = grp.last_id;
    let ids = grp.scheduled_due(now, limit);
    let mut done: Vec<StreamId> = Vec::new();
    let mut go_on = true;
    let four = r.claim.is_some();
    for id in ids {
        let more = {
            let Some(e) = s.range(id, id, false).next_entry() else { continue };
            if four {
                reply_entry_claimed(c, &e, 0, 0);
            } else {
                super::range::reply_entry(c, &e);
            }
            budget.add_entry(Some(&e), id, four.then_some((0, 0)))
        };
        if let Some(grp) = s.group_mut(g) {
            grp.unschedule(id);
            if !r.noack {
                grp.deliver_new(id, slot, now);
            }
        }
        done.push(id);
        if !more {
            go_on = false;
            break;
        }
    }
    if done.is_empty() {
        return (0, go_on);
    }
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_scheduled_delivered, done.len() as u64);
    if r.noack {
        propagate_schedule(c, r.key_idx, r.group_arg, b"UNSCHEDULE", &done);
    } else {
        if let Some(cons) = s.group_mut(g).and_then(|grp| grp.consumer_mut(slot)) {
            cons.active_time = now;
        }
        propagate_claim_ids(c, r.key_idx, r.group_arg, &done, now, 1, last, None);
    }
    (done.len() as u64, go_on)
}

/// The reading consumer of group `g`, seen now, or created (see [`serve_group`]
/// for what a creation propagates).
#[allow(clippy::too_many_arguments)]
fn group_consumer(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    group_arg: usize,
    key_idx: usize,
    noack: bool,
    blocked: bool,
    now: i64,
) -> Result<u32> {
    let grp = s.group_mut(g).ok_or(Error::Err("group vanished"))?;
    let (slot, created) = super::claim::consumer_slot(c, grp, c.arg(group_arg + 1), now, key_idx)?;
    if created && (!blocked || noack) {
        c.replicate(c"XS.GROUP", &[Arg::Word(Word::CreateConsumer), Arg::Orig(key_idx), Arg::Orig(group_arg), Arg::Orig(group_arg + 1)]);
    }
    Ok(slot)
}

/// Propagates the entries a `>` read delivered, with the group's new last ID and
/// entries-read, as one XS.CLAIM (see [`serve_group`]). Deliveries of one read
/// share their time and count; should they not, each goes out on its own,
/// followed by the group's counters.
fn propagate_deliveries(
    c: &Ctx,
    key_idx: usize,
    group_arg: usize,
    consumer: &[u8],
    delivered: &[(StreamId, Nack)],
    last: StreamId,
    entries_read: i64,
) {
    let Some(&(_, first)) = delivered.first() else { return };
    let shared = delivered.iter().all(|(_, nk)| nk.delivery_time == first.delivery_time && nk.delivery_count == first.delivery_count);
    if !shared {
        for (id, nk) in delivered {
            propagate_xclaim(c, key_idx, group_arg, consumer, *id, nk, last);
        }
        propagate_group_id(c, key_idx, group_arg, last, entries_read);
        return;
    }
    let ids: Vec<StreamId> = delivered.iter().map(|(id, _)| *id).collect();
    propagate_claim_ids(c, key_idx, group_arg, &ids, first.delivery_time, first.delivery_count, last, Some(entries_read));
}

/// Propagates pending entries that now belong to the reading consumer (argument
/// `group_arg + 1`) with one delivery time and count, as ONE `XS.CLAIM key group
/// consumer 0 id1 .. idN TIME t RETRYCOUNT n FORCE JUSTID LASTID last
/// [ENTRIESREAD er]`: the replica applies the IDs in order, each as the built-in's
/// one-ID XCLAIM would (an entry gone from its stream is dropped from its PEL).
#[allow(clippy::too_many_arguments)]
fn propagate_claim_ids(
    c: &Ctx,
    key_idx: usize,
    group_arg: usize,
    ids: &[StreamId],
    time: i64,
    count: u64,
    last: StreamId,
    entries_read: Option<i64>,
) {
    if ids.is_empty() {
        return;
    }
    let ids: Vec<Vec<u8>> = ids.iter().map(|id| id.to_bytes()).collect();
    let time = time.to_string();
    let retry = count.to_string();
    let last = last.to_bytes();
    let er = entries_read.map(|n| n.to_string());
    let mut args: Vec<Arg> = Vec::with_capacity(ids.len() + 14);
    args.extend([Arg::Orig(key_idx), Arg::Orig(group_arg), Arg::Orig(group_arg + 1), Arg::Word(Word::Zero)]);
    args.extend(ids.iter().map(|id| Arg::New(id)));
    args.extend([
        Arg::Word(Word::Time),
        Arg::New(time.as_bytes()),
        Arg::Word(Word::RetryCount),
        Arg::New(retry.as_bytes()),
        Arg::Word(Word::Force),
        Arg::Word(Word::JustId),
        Arg::Word(Word::LastId),
        Arg::New(&last),
    ]);
    if let Some(er) = &er {
        args.extend([Arg::Word(Word::EntriesRead), Arg::New(er.as_bytes())]);
    }
    c.replicate(c"XS.CLAIM", &args);
}

/// A CLAIM read's entry: `[id, [field, value ...], idle ms, delivery count]`
/// (new entries: idle and count 0).
fn reply_entry_claimed(c: &Ctx, e: &crate::stream::Entry<'_>, idle_ms: i64, count: i64) {
    c.reply_array(4);
    c.reply_id(e.id());
    c.reply_array(e.numfields() * 2);
    e.for_each_field(|f, v| {
        c.reply_value(f);
        c.reply_value(v);
    });
    c.reply_int(idle_ms);
    c.reply_int(count);
}

/// Whether group `g` of `s` has a pending entry that CLAIM `min_idle` takes now:
/// the first live one in delivery-time order qualifies (§4.3).
fn claimable_now(s: &crate::stream::Stream, g: &[u8], min_idle: i64, now: i64) -> bool {
    s.claim_first_live(g).is_some_and(|n| crate::stream::claim::claimable(&n, min_idle, now))
}

/// The claimed part of a CLAIM read of one stream (REDIS8.md §4.4): the group's
/// pending entries in delivery-time order, from the head, while idle for at least
/// `min_idle` ms (NACKed ones always), within COUNT and the budget. Entries whose
/// stream data is gone are skipped and stay pending. Each one is replied as
/// `[id, fields, idle, count before this claim]` and moves to the reader: its
/// count + 1 (saturating), its delivery time now (the time list's tail).
/// Returns (entries claimed, whether the budget lets the read go on).
///
/// Propagation: the claims in order, as `XS.CLAIM key group consumer 0 id.. TIME
/// now RETRYCOUNT n FORCE JUSTID LASTID <group last ID, unchanged by claims>`,
/// one command per run of entries with the same new count (the built-in sends one
/// XCLAIM per entry; in order, so the replica's time list ends the same).
fn serve_claimed(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    slot: u32,
    r: &GroupRead,
    min_idle: i64,
    budget: &mut Budget,
    dl: &mut Option<super::queue::DeadLetters>,
) -> (u64, bool) {
    let now = r.now;
    let Some(last) = s.group(g).map(|grp| grp.last_id) else { return (0, true) };
    // Bounded by COUNT (or the PEL when COUNT is 0).
    let candidates = s.claim_candidates(g, min_idle, now, r.count);
    let mut claimed: Vec<(StreamId, u64)> = Vec::new();
    let mut go_on = true;
    for (id, old) in candidates {
        if let Some(d) = dl.as_mut() {
            if d.take_if_over(c, s, g, id, crate::stream::group::count_plus_one(old.delivery_count)) {
                continue;
            }
        }
        let more = {
            let Some(e) = s.range(id, id, false).next_entry() else { continue };
            let idle = now.saturating_sub(old.delivery_time);
            let count = i64::try_from(old.delivery_count).unwrap_or(i64::MAX);
            reply_entry_claimed(c, &e, idle, count);
            budget.add_entry(Some(&e), id, Some((idle, count)))
        };
        // At the time list's tail, one more delivery (saturating at LLONG_MAX). The
        // entry is pending (a candidate just found): the claim cannot miss it.
        let count = s
            .group_mut(g)
            .and_then(|grp| grp.claim(id, slot, DeliveryTime::Now(now), crate::stream::ClaimCount::Increment, false))
            .map_or(crate::stream::group::count_plus_one(old.delivery_count), |nk| nk.delivery_count);
        claimed.push((id, count));
        if !more {
            go_on = false;
            break;
        }
    }
    if claimed.is_empty() {
        return (0, go_on);
    }
    if let Some(cons) = s.group_mut(g).and_then(|grp| grp.consumer_mut(slot)) {
        cons.active_time = now;
    }
    for run in claimed.chunk_by(|a, b| a.1 == b.1) {
        let ids: Vec<StreamId> = run.iter().map(|(id, _)| *id).collect();
        let count = run.first().map_or(1, |(_, n)| *n);
        propagate_claim_ids(c, r.key_idx, r.group_arg, &ids, now, count, last, None);
    }
    (claimed.len() as u64, go_on)
}

/// Whether group `g` of `s` has a policy under which `>` reads redeliver.
fn redelivers(s: &crate::stream::Stream, g: &[u8]) -> bool {
    s.group(g).and_then(|grp| grp.policy()).is_some_and(|p| p.redelivers())
}

/// Before a `>` read decides whether a stream has something to serve: the
/// entries it would take first (CLAIM's claimable ones, or the policy's due ones)
/// that MAXDELIVERIES sends to the dead letters go there now, until the first COUNT
/// of them (all, without COUNT) can be delivered, so that a read never serves a
/// stream only to reply no entry for it (and a blocked reader is not woken for
/// nothing). At most PURGE_MAX entries per read: returns true when it stopped there
/// with more to look at; the read then serves no due entry from this stream (new
/// ones still), and readers blocked on the key re-run at once to go on.
#[allow(clippy::too_many_arguments)]
fn purge_over_limit(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    key_idx: usize,
    group_arg: usize,
    claim: Option<i64>,
    noack: bool,
    now: i64,
    count: u64,
) -> bool {
    const PURGE_MAX: u64 = 1000;
    // What the read would take first: its COUNT of entries (at most PURGE_MAX).
    let head = if count == 0 { PURGE_MAX } else { count.min(PURGE_MAX) };
    let Some(pol) = s.group(g).and_then(|grp| grp.policy()) else { return false };
    if pol.max_deliveries.is_none() || (claim.is_none() && (noack || !pol.redelivers())) {
        return false;
    }
    let Some(mut d) = super::queue::DeadLetters::for_group(c, s, g, key_idx, group_arg) else { return false };
    let mut moved = 0u64;
    let capped = loop {
        let candidates = match claim {
            Some(min_idle) => s.claim_candidates(g, min_idle, now, head),
            None => s.group(g).map(|grp| grp.due_entries(now, head, |id| s.contains(id))).unwrap_or_default(),
        };
        let mut taken = 0u64;
        for (id, n) in candidates {
            if moved + taken >= PURGE_MAX {
                break;
            }
            taken += u64::from(d.take_if_over(c, s, g, id, crate::stream::group::count_plus_one(n.delivery_count)));
        }
        moved += taken;
        if taken == 0 {
            break false;
        }
        if moved >= PURGE_MAX {
            break true;
        }
    };
    d.flush(c);
    if capped {
        crate::ops::due::wake_readers(c, c.selected_db(), std::iter::once(c.arg(key_idx)), now);
    }
    capped
}

/// Whether a `>` read of group `g` has a due entry to serve now (issue 16).
fn due_now(s: &crate::stream::Stream, g: &[u8], now: i64) -> bool {
    s.group(g).is_some_and(|grp| !grp.due_entries(now, 1, |id| s.contains(id)).is_empty())
}

/// The due part of a `>` read of a group whose policy redelivers: the NACK zone
/// (FIFO), then entries past their ack timeout, longest overdue first, within
/// COUNT and the budget; each replied as a new entry is (`[id, fields]`), its
/// count + 1, owned by the reader, delivered now. An entry that would go past
/// MAXDELIVERIES goes to the dead letters instead. Propagated as the CLAIM reads'
/// (one XS.CLAIM per run of the same new count). Returns (entries, go on).
fn serve_due(
    c: &Ctx,
    s: &mut crate::stream::Stream,
    g: &[u8],
    slot: u32,
    r: &GroupRead,
    budget: &mut Budget,
    dl: &mut Option<super::queue::DeadLetters>,
) -> (u64, bool) {
    let now = r.now;
    let Some(grp) = s.group(g) else { return (0, true) };
    let last = grp.last_id;
    let candidates = grp.due_entries(now, r.count, |id| s.contains(id));
    let mut done: Vec<(StreamId, u64)> = Vec::new();
    let mut go_on = true;
    for (id, old) in candidates {
        if let Some(d) = dl.as_mut() {
            if d.take_if_over(c, s, g, id, crate::stream::group::count_plus_one(old.delivery_count)) {
                continue;
            }
        }
        let more = {
            let Some(e) = s.range(id, id, false).next_entry() else { continue };
            super::range::reply_entry(c, &e);
            budget.add_entry(Some(&e), id, None)
        };
        let count = s
            .group_mut(g)
            .and_then(|grp| grp.claim(id, slot, DeliveryTime::Now(now), crate::stream::ClaimCount::Increment, false))
            .map_or(crate::stream::group::count_plus_one(old.delivery_count), |nk| nk.delivery_count);
        done.push((id, count));
        if !more {
            go_on = false;
            break;
        }
    }
    if done.is_empty() {
        return (0, go_on);
    }
    if let Some(cons) = s.group_mut(g).and_then(|grp| grp.consumer_mut(slot)) {
        cons.active_time = now;
    }
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_timed_out, done.len() as u64);
    for run in done.chunk_by(|a, b| a.1 == b.1) {
        let ids: Vec<StreamId> = run.iter().map(|(id, _)| *id).collect();
        let count = run.first().map_or(1, |(_, n)| *n);
        propagate_claim_ids(c, r.key_idx, r.group_arg, &ids, now, count, last, None);
    }
    (done.len() as u64, go_on)
}

/// When a CLAIM reader about to block (or staying blocked) must re-run (§4.5):
/// min-idle after the oldest delivery among the first live pending entries of its
/// streams, or min-idle from now when they have none. None without CLAIM, or when
/// the block times out first.
fn claim_wake_at(c: &Ctx, st: &BlockState, now: i64) -> Option<i64> {
    let at = claim_or_due_wake_at(c, st, now);
    let sched = scheduled_wake_at(c, st, now);
    match (at, sched) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// When a blocked `>` reader must re-run for its groups' scheduled entries (delayed
/// delivery): the earliest due time in their schedules; None without one, or when
/// the block times out first.
fn scheduled_wake_at(c: &Ctx, st: &BlockState, now: i64) -> Option<i64> {
    let g = c.arg(st.group_arg?);
    let mut due: Option<i64> = None;
    for k in 0..st.from.len() {
        let key = c.key(st.streams_arg + k, false);
        if let Some(d) = key.stream().and_then(|s| s.group(g)).and_then(|grp| grp.next_scheduled()) {
            due = Some(due.map_or(d, |o: i64| o.min(d)));
        }
    }
    let due = due?.max(now);
    match st.deadline_ms {
        Some(d) if due > d => None,
        _ => Some(due),
    }
}

fn claim_or_due_wake_at(c: &Ctx, st: &BlockState, now: i64) -> Option<i64> {
    let ga = st.group_arg?;
    let Some(min_idle) = st.claim else { return due_wake_at(c, st, now) };
    let g = c.arg(ga);
    let mut oldest: Option<i64> = None;
    for k in 0..st.from.len() {
        let key = c.key(st.streams_arg + k, false);
        if let Some(n) = key.stream().and_then(|s| s.claim_first_live(g)) {
            oldest = Some(oldest.map_or(n.delivery_time, |o| o.min(n.delivery_time)));
        }
    }
    let due = oldest.unwrap_or(now).saturating_add(min_idle);
    match st.deadline_ms {
        Some(d) if due > d => None,
        _ => Some(due),
    }
}

/// When a `>` reader (without CLAIM) of groups whose policy redelivers must re-run:
/// the earliest due time of its groups (issue 16). None without such a group, with
/// NOACK, or when the block times out first.
fn due_wake_at(c: &Ctx, st: &BlockState, now: i64) -> Option<i64> {
    if st.noack {
        return None;
    }
    let g = c.arg(st.group_arg?);
    let mut due: Option<i64> = None;
    for k in 0..st.from.len() {
        let key = c.key(st.streams_arg + k, false);
        let next = key.stream().and_then(|s| s.group(g).and_then(|grp| grp.next_due(now, |id| s.contains(id))));
        if let Some(d) = next {
            due = Some(due.map_or(d, |o: i64| o.min(d)));
        }
    }
    let due = due?.max(now);
    match st.deadline_ms {
        Some(d) if due > d => None,
        _ => Some(due),
    }
}

/// Whether a blocked group reader has a group whose policy redelivers (served
/// by re-running, as CLAIM readers).
fn policy_reader(c: &Ctx, st: &BlockState) -> bool {
    let Some(ga) = st.group_arg else { return false };
    let g = c.arg(ga);
    (0..st.from.len()).any(|k| {
        c.key(st.streams_arg + k, false)
            .stream()
            .is_some_and(|s| redelivers(s, g) || s.delayed.is_some() || s.group(g).is_some_and(|grp| grp.schedule().is_some()))
    })
}

/// Registers a blocked CLAIM reader's keys for its next wake-up (src/jobs/wake.rs).
fn schedule_claim_wake(c: &Ctx, st: &BlockState, now: i64) {
    if let Some(due) = claim_wake_at(c, st, now) {
        let names = (0..st.from.len()).map(|k| c.arg(st.streams_arg + k));
        crate::ops::due::wake_readers(c, st.db, names, due);
    }
}

/// Serves a blocked reader when `ready_key` was signalled (serveClientsBlockedOnStreamKey).
/// Returns false to keep it blocked.
fn serve_blocked(c: &Ctx, st: &BlockState, ready_key: &[u8]) -> bool {
    // CLAIM (8.4) readers re-run their command whatever the level: they may be
    // served from any of their streams, whichever key woke them.
    if st.claim.is_some() || policy_reader(c, st) {
        // At compat 7.0, a group reader whose key went away is told so in 7.0's words
        // on every host (a 7.0 host releases it through `release` with the same text).
        if crate::config::level() < Level::V7_2 {
            let k = (0..st.from.len()).find(|&k| c.arg(st.streams_arg + k) == ready_key);
            if k.is_some_and(|k| c.key(st.streams_arg + k, false).stream().is_none()) {
                c.reply_error("UNBLOCKED the stream key no longer exists");
                return true;
            }
        }
        return serve_reexecuted(c, st);
    }
    if crate::config::level() >= Level::V7_2 {
        // Redis serves a module-blocked client whatever the signalled key now holds;
        // the built-in XREAD ignores a key that is not a stream (its XREADGROUP is
        // woken, and fails: UNBLOCK_DELETED).
        if st.group_arg.is_none() {
            let k = (0..st.from.len()).find(|&k| c.arg(st.streams_arg + k) == ready_key);
            if k.is_some_and(|k| c.key(st.streams_arg + k, false).kind() != KeyKind::Stream) {
                return false;
            }
        }
        return serve_reexecuted(c, st);
    }
    // 7.0: only the signalled key is served; its first occurrence wins, as in blockForKeys.
    let Some(k) = (0..st.from.len()).find(|&k| c.arg(st.streams_arg + k) == ready_key) else { return false };
    let key_idx = st.streams_arg + k;
    let gname = st.group_arg.map(|g| c.arg(g));
    let mut key = c.key(key_idx, gname.is_some());
    let Some(s) = key.stream_mut() else {
        // A group reader woken because its key went away (7.2 servers with
        // `compat 7.0`): 7.0's answer.
        if gname.is_some() {
            c.reply_error("UNBLOCKED the stream key no longer exists");
            return true;
        }
        return false;
    };
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
    let mut budget = Budget::new(st.maxcount, st.maxsize, c.is_resp3());
    budget.add_stream(ready_key);
    let count = budget.stream_count(st.count);
    match (gname, st.group_arg) {
        (Some(g), Some(ga)) => {
            let now = c.now_ms() as i64;
            let read = GroupRead { group_arg: ga, key_idx, start, count, noack: st.noack, history: false, blocked: true, claim: None, now };
            if let Err(e) = serve_group(c, s, g, &read, &mut budget) {
                // Cannot happen (the group was just found); keep the reply well formed.
                c.reply_error(&e.message());
            }
        }
        _ => reply_range_budget(c, s, start, count, &mut budget),
    }
    true
}
