//! Blocked readers: their state (impl Waiter), their wake-up times, and serving them when
//! a key they wait on is signalled.

use super::*;

/// What a blocked reader waits for (the built-in's c->bpop for streams).
#[derive(Debug)]
pub struct BlockState {
    pub(super) streams_arg: usize,
    /// Per key argument: what it waits after (`$` resolved when blocking).
    pub(super) from: Vec<ReadFrom>,
    pub(super) count: u64,
    /// MAXCOUNT / MAXSIZE (0: not given).
    pub(super) maxcount: u64,
    pub(super) maxsize: u64,
    pub(super) noack: bool,
    pub(super) group_arg: Option<usize>,
    /// CLAIM min-idle-time (ms).
    pub(super) claim: Option<i64>,
    /// The client's db when it blocked.
    pub(super) db: i32,
    /// Group readers are registered so that a deleted key releases them.
    pub(super) registration: Option<crate::ffi::blocking::Registration>,
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

    fn served_on_time(&self, c: &Ctx) -> bool {
        let now = c.now_ms() as i64;
        match claim_wake_at(c, self, now) {
            Some(due) if due <= now => true,
            Some(due) => {
                let names = (0..self.from.len()).map(|k| c.arg(self.streams_arg + k));
                crate::ops::due::wake_readers(c, self.db, names, due);
                false
            }
            None => false,
        }
    }
}

/// What a group reader waits for, as bytes equal for readers served by the same entries in
/// the same way ([`Registration::wait`](crate::ffi::blocking::Registration)): its group, CLAIM,
/// NOACK and keys (COUNT, MAXCOUNT, MAXSIZE and the consumer change how much it takes, not
/// whether something is there for it).
pub(super) fn wait_bytes(c: &Ctx, group_arg: usize, claim: Option<i64>, noack: bool, keys: std::ops::Range<usize>) -> Vec<u8> {
    let mut v = Vec::new();
    let mut put = |b: &[u8]| {
        v.extend_from_slice(&(b.len() as u64).to_le_bytes());
        v.extend_from_slice(b);
    };
    put(c.arg(group_arg));
    put(&claim.map_or(-1, |m| m).to_le_bytes());
    put(&[u8::from(noack)]);
    for k in keys {
        put(c.arg(k));
    }
    v
}

/// The first pass of a command Redis 7.2 re-executes for a blocked reader: the
/// error for the first key that fails (another type: WRONGTYPE; for XREADGROUP,
/// no stream or no group: NOGROUP), if any.
pub(super) fn reexec_check(c: &Ctx, st: &BlockState) -> Option<Error> {
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
pub(super) fn reexec_error(c: &Ctx, st: &BlockState) -> Error {
    reexec_check(c, st).unwrap_or_else(|| nogroup_read(c.arg(st.streams_arg), st.group_arg.map_or(&[][..], |g| c.arg(g))))
}

/// Redis 7.2 serves a blocked reader by running its command again (with `$`
/// resolved when it blocked): the keys are checked, every stream with something
/// new is served in argument order, and a reader with nothing to read stays
/// blocked. Returns false to keep it blocked.
pub(super) fn serve_reexecuted(c: &Ctx, st: &BlockState) -> bool {
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
    replied(c, serve(c, &read_of(c, st, Pass::Reexecuted)))
}

/// The read a blocked reader asks for, served as `pass`.
fn read_of<'a>(c: &Ctx, st: &'a BlockState, pass: Pass) -> Read<'a> {
    Read {
        pass,
        streams_arg: st.streams_arg,
        from: &st.from,
        group_arg: st.group_arg,
        noack: st.noack,
        claim: st.claim,
        count: st.count,
        maxcount: st.maxcount,
        maxsize: st.maxsize,
        now: c.now_ms() as i64,
        waits: true,
    }
}

/// A blocked reader's outcome: served or told an error (true), or left blocked (false).
fn replied(c: &Ctx, r: Result<bool>) -> bool {
    r.unwrap_or_else(|e| {
        c.reply_error(&e.message());
        true
    })
}

/// When a CLAIM reader about to block (or staying blocked) must re-run (§4.5):
/// min-idle after the oldest delivery among the first live pending entries of its
/// streams, or min-idle from now when they have none. None without CLAIM. A time past the
/// reader's own timeout is registered all the same: the wake-up is for every reader that
/// waits as it does (src/ffi/blocking.rs).
pub(super) fn claim_wake_at(c: &Ctx, st: &BlockState, now: i64) -> Option<i64> {
    let at = claim_or_due_wake_at(c, st, now);
    let sched = scheduled_wake_at(c, st, now);
    match (at, sched) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// When a blocked `>` reader must re-run for its groups' scheduled entries (delayed
/// delivery): the earliest due time in their schedules; None without one.
pub(super) fn scheduled_wake_at(c: &Ctx, st: &BlockState, now: i64) -> Option<i64> {
    let g = c.arg(st.group_arg?);
    let mut due: Option<i64> = None;
    for k in 0..st.from.len() {
        let key = c.key(st.streams_arg + k, false);
        if let Some(d) = key.stream().and_then(|s| s.group(g)).and_then(|grp| grp.next_scheduled()) {
            due = Some(due.map_or(d, |o: i64| o.min(d)));
        }
    }
    Some(due?.max(now))
}

pub(super) fn claim_or_due_wake_at(c: &Ctx, st: &BlockState, now: i64) -> Option<i64> {
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
    Some(oldest.unwrap_or(now).saturating_add(min_idle))
}

/// When a `>` reader (without CLAIM) of groups whose policy redelivers must re-run:
/// the earliest due time of its groups (issue 16). None without such a group, or with
/// NOACK.
pub(super) fn due_wake_at(c: &Ctx, st: &BlockState, now: i64) -> Option<i64> {
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
    Some(due?.max(now))
}

/// Whether a blocked group reader has a group whose policy redelivers (served
/// by re-running, as CLAIM readers).
pub(super) fn policy_reader(c: &Ctx, st: &BlockState) -> bool {
    let Some(ga) = st.group_arg else { return false };
    let g = c.arg(ga);
    (0..st.from.len()).any(|k| {
        c.key(st.streams_arg + k, false)
            .stream()
            .is_some_and(|s| redelivers(s, g) || s.delayed.is_some() || s.group(g).is_some_and(|grp| grp.schedule().is_some()))
    })
}

/// Registers a blocked CLAIM reader's keys for its next wake-up (src/jobs/wake.rs).
pub(super) fn schedule_claim_wake(c: &Ctx, st: &BlockState, now: i64) {
    if let Some(due) = claim_wake_at(c, st, now) {
        let names = (0..st.from.len()).map(|k| c.arg(st.streams_arg + k));
        crate::ops::due::wake_readers(c, st.db, names, due);
    }
}

/// Which of the reader's streams `ready_key` is (its first occurrence, as in blockForKeys).
fn signalled(c: &Ctx, st: &BlockState, ready_key: &[u8]) -> Option<usize> {
    (0..st.from.len()).find(|&k| c.arg(st.streams_arg + k) == ready_key)
}

/// Serves a blocked reader when `ready_key` was signalled (serveClientsBlockedOnStreamKey).
/// Returns false to keep it blocked.
pub(super) fn serve_blocked(c: &Ctx, st: &BlockState, ready_key: &[u8]) -> bool {
    // CLAIM (8.4) readers re-run their command whatever the level: they may be
    // served from any of their streams, whichever key woke them.
    if st.claim.is_some() || policy_reader(c, st) {
        // At compat 7.0, a group reader whose key went away is told so in 7.0's words
        // on every host (a 7.0 host releases it through `release` with the same text).
        if crate::config::level() < Level::V7_2 {
            let k = signalled(c, st, ready_key);
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
            let k = signalled(c, st, ready_key);
            if k.is_some_and(|k| c.key(st.streams_arg + k, false).kind() != KeyKind::Stream) {
                return false;
            }
        }
        return serve_reexecuted(c, st);
    }
    // 7.0: only the signalled key is served; its first occurrence wins, as in blockForKeys.
    let Some(k) = signalled(c, st, ready_key) else { return false };
    replied(c, serve(c, &read_of(c, st, Pass::Signalled(k))))
}
