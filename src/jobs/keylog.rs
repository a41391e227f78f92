//! The keyspace log (issue 33, docs/keyspace-log.md): every keyspace notification of the
//! configured classes on a key matching the configured glob becomes an entry
//! `event <name> key <key> db <n>` of the stream `xstream.keyspace-log` names (database 0), in
//! the order the server emits them, trimmed to about `xstream.keyspace-log-maxlen` entries.
//!
//! ffi's [`Listener`] runs it in two halves. Inside the notification, where nothing may be
//! written, [`KeyLog::wants`] filters (the log's own key, class, pattern). After the execution
//! unit (a command, a whole MULTI/EXEC or script, the expiry or eviction of a key), in the
//! post-notification job Redis runs before it propagates, [`KeyLog::write`] appends the kept
//! notifications and propagates each entry as `XS.ADD log <id> event .. key .. db ..` (a trim as
//! `XS.TRIM log MAXLEN = <length>`): replicas and the AOF receive the change and its entries in
//! one MULTI, and apply them without logging anything themselves (only a primary that is not
//! loading keeps notifications). In cluster mode a key of a slot the node does not serve (one
//! it imports) is not logged, and the log's key must be in a slot it serves.
//!
//! No unsafe code here (lib.rs forbids it).

use crate::config;
use crate::ffi::ctx::{Arg, Ctx, KeyKind, Name};
use crate::ffi::keyspace::{Event, Listener};
use crate::ffi::stats::{bump, EVENTS};
use crate::ops::trim::{default_approx_limit, exact_threshold};
use crate::stream::{IdSpec, RefPolicy, Stream, Trim, TrimStrategy};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The database the log lives in (the only one in cluster mode).
pub const LOG_DB: i32 = 0;

pub struct KeyLog;

pub static KEYLOG: KeyLog = KeyLog;

/// The slots this node served when last asked (cluster mode), asked again when a key seems
/// not to be among them.
static OWNED: Mutex<Option<Vec<u64>>> = Mutex::new(None);

/// When the last warning about a refused append was written (Unix ms): one a minute at most.
static WARNED_MS: AtomicU64 = AtomicU64::new(0);

impl Listener for KeyLog {
    fn active(&self) -> bool {
        config::KEYLOG_ON.load(Ordering::Relaxed)
    }

    fn wants(&self, class: u32, key: &[u8], db: &dyn Fn() -> i32) -> bool {
        let s = config::keylog();
        if s.key.is_empty() {
            return false;
        }
        if key == s.key.as_slice() && db() == LOG_DB {
            // The log's own writes (and anything else done to it) never log.
            return false;
        }
        if class & s.classes == 0 || s.pattern.as_deref().is_some_and(|p| !glob_match(p, key)) {
            bump(&EVENTS.keyspace_log_dropped, 1);
            return false;
        }
        true
    }

    fn write(&self, c: &Ctx, events: Vec<Event>) {
        let n = events.len() as u64;
        let log = config::keylog().key.clone();
        if log.is_empty() {
            // Switched off since (a script's CONFIG SET cannot, but a module could).
            bump(&EVENTS.keyspace_log_dropped, n);
            return;
        }
        if !c.acts_on_time() {
            // Clients paused (nothing may be propagated now: only reads run, e.g. a key miss).
            bump(&EVENTS.keyspace_log_errors, n);
            return;
        }
        let events = if c.in_cluster() {
            if !owns(c, slot_of(&log)) {
                bump(&EVENTS.keyspace_log_errors, n);
                warn(
                    c,
                    &format!("xstream: keyspace log {}: its slot {} is not served by this node: {n} events not logged", show(&log), slot_of(&log)),
                );
                return;
            }
            let (kept, other): (Vec<Event>, Vec<Event>) = events.into_iter().partition(|e| owns(c, slot_of(&e.key)));
            bump(&EVENTS.keyspace_log_dropped, other.len() as u64);
            kept
        } else {
            events
        };
        if events.is_empty() {
            return;
        }
        let home = c.selected_db();
        // On Valkey 8.1 a notification of the log (DB 0) while the command's client is in
        // another DB would leave that client in DB 0 (ffi::host::notifications_move_the_client):
        // the appends raise none there. The job's DB is the events' (the client's, but for
        // MOVE / COPY ... DB).
        let notify = home == LOG_DB || !crate::ffi::host::notifications_move_the_client();
        if c.select_db(LOG_DB) {
            append(c, &log, &events, notify);
        } else {
            bump(&EVENTS.keyspace_log_errors, n);
        }
        c.select_db(home);
    }

    fn lost(&self, n: u64) {
        bump(&EVENTS.keyspace_log_errors, n);
    }
}

/// Appends `events` to the stream at `log` (the selected DB), propagated entry by entry, then
/// trims it to about the configured length; `notify`: with the keyspace events of an XADD on
/// the log (one `xadd` for the batch, as one command adding it; an `xtrim`).
fn append(c: &Ctx, log: &[u8], events: &[Event], notify: bool) {
    let n = events.len() as u64;
    let mut k = c.open_key_named(log, true);
    let s = match k.kind() {
        KeyKind::Empty => k.create_stream(Stream::new()),
        KeyKind::Stream => k.stream_mut(),
        KeyKind::Other => None,
    };
    let Some(s) = s else {
        bump(&EVENTS.keyspace_log_errors, n);
        warn(c, &format!("xstream: keyspace log {}: the key holds another type: {n} events not logged", show(log)));
        return;
    };
    let queued = s.pack_queue().len();
    let now = c.now_ms();
    let limits = config::limits();
    let mut appended = 0;
    let (mut id_buf, mut db) = ([0u8; 44], Vec::with_capacity(12));
    for e in events {
        db.clear();
        crate::stream::id::push_u64(&mut db, u64::from(e.db.unsigned_abs()));
        let db = db.as_slice();
        let fields: [&[u8]; 6] = [b"event", &e.event, b"key", &e.key, b"db", db];
        let Ok(id) = s.append(&fields, IdSpec::Auto, now, limits) else {
            // The last ID is the greatest possible, or an entry of over 1 GB: nothing more fits.
            bump(&EVENTS.keyspace_log_errors, n - appended);
            break;
        };
        appended += 1;
        let id_len = id.write_to_slice(&mut id_buf);
        let idb = &id_buf[..id_len];
        c.replicate_bytes8(c"XS.ADD", [log, idb, fields[0], fields[1], fields[2], fields[3], fields[4], fields[5]]);
    }
    if appended == 0 {
        return;
    }
    bump(&EVENTS.entries_added, appended);
    bump(&EVENTS.keyspace_log_appended, appended);
    let maxlen = config::KEYLOG_MAXLEN.load(Ordering::Relaxed);
    if maxlen > 0 && s.length > maxlen as u64 {
        let t = Trim { strategy: TrimStrategy::MaxLen(maxlen as u64), approx: true, limit: default_approx_limit() };
        let done = s.trim_with_rules(&t, RefPolicy::KeepRef, config::ref_trim_rules());
        if done.deleted > 0 {
            let th = exact_threshold(s, &t);
            c.replicate(c"XS.TRIM", &[Arg::New(log), Arg::New(b"MAXLEN"), Arg::New(b"="), Arg::New(&th)]);
            if notify {
                c.notify_name(c"xtrim", Name::Bytes(log));
            }
            bump(&EVENTS.entries_trimmed, done.deleted);
        }
    }
    if s.pack_queue().len() > queued {
        crate::ops::due::sealed(c, Name::Bytes(log));
    }
    drop(k);
    c.appended_to_named(log, notify);
}

/// Whether a log key may be set now (CONFIG SET): in cluster mode, its slot must be one this
/// node serves. Values from redis.conf or the module arguments are not checked (the node may
/// get its slots later); their appends are refused while the slot is not served.
pub fn check_log_key(key: &[u8]) -> Result<(), String> {
    let slot = slot_of(key);
    match crate::ffi::keyspace::with_module_ctx(|c| c.owned_slots().map(|bits| served(&bits, slot))) {
        Some(Some(false)) => Err(format!(
            "xstream.keyspace-log {}: its slot {slot} is not served by this node (in cluster mode the log's key must hash to a slot the node serves)",
            show(key)
        )),
        _ => Ok(()),
    }
}

fn served(bits: &[u64], slot: u16) -> bool {
    bits.get(usize::from(slot) / 64).is_some_and(|w| w & (1 << (slot % 64)) != 0)
}

/// Whether this node serves `slot`: from the slots last read, read again once when not there
/// (a slot just gained; one being imported stays not served).
fn owns(c: &Ctx, slot: u16) -> bool {
    let has = |bits: &Option<Vec<u64>>| bits.as_deref().is_some_and(|b| served(b, slot));
    let mut owned = OWNED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if has(&owned) {
        return true;
    }
    *owned = c.owned_slots();
    has(&owned)
}

/// A warning in the server log, at most one a minute.
fn warn(c: &Ctx, msg: &str) {
    let now = c.now_ms();
    if now.saturating_sub(WARNED_MS.load(Ordering::Relaxed)) >= 60_000 {
        WARNED_MS.store(now, Ordering::Relaxed);
        crate::ffi::log_warning(msg);
    }
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

/// The Redis Cluster slot of a key: CRC16 (XMODEM) of the key, or of its hash tag (the bytes
/// between the first `{` and the first `}` after it, when there are some), modulo 16,384.
pub fn slot_of(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = key.get(open + 1..)?;
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) & 0x3FFF
}

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as the cluster hashes keys.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// Whether `s` matches the glob `p` as the server matches KEYS and PSUBSCRIBE patterns
/// (stringmatchlen): `*`, `?`, `[abc]`, `[^abc]`, `[a-z]` (ends in either order), `\x` for a
/// literal x (inside classes too). Linear backtracking to the last `*` only: every other token
/// takes exactly one byte, so this finds a match whenever there is one, in O(|p|·|s|).
pub fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    // After the last `*`: where the pattern resumes, and where in `s` it was last tried.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        let ch = s[si];
        let step = match p.get(pi) {
            Some(b'*') => {
                while p.get(pi) == Some(&b'*') {
                    pi += 1;
                }
                star = Some((pi, si));
                continue;
            }
            Some(b'?') => Some(pi + 1),
            Some(b'[') => class_match(p, pi, ch),
            Some(b'\\') if pi + 1 < p.len() => (p[pi + 1] == ch).then_some(pi + 2),
            Some(&lit) => (lit == ch).then_some(pi + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                pi = next;
                si += 1;
            }
            (None, Some((sp, ss))) => {
                pi = sp;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            (None, None) => return false,
        }
    }
    while p.get(pi) == Some(&b'*') {
        pi += 1;
    }
    pi == p.len()
}

/// The class at `p[open]` (`[`) against `ch`: the index after it when `ch` matches. A class
/// without its `]` ends with the pattern, as the server reads it.
fn class_match(p: &[u8], open: usize, ch: u8) -> Option<usize> {
    let mut i = open + 1;
    let negate = p.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut hit = false;
    while i < p.len() {
        if p[i] == b'\\' && i + 1 < p.len() {
            hit |= p[i + 1] == ch;
            i += 2;
        } else if p[i] == b']' {
            i += 1;
            break;
        } else if i + 2 < p.len() && p[i + 1] == b'-' {
            let (a, b) = (p[i].min(p[i + 2]), p[i].max(p[i + 2]));
            hit |= a <= ch && ch <= b;
            i += 3;
        } else {
            hit |= p[i] == ch;
            i += 1;
        }
    }
    (hit != negate).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_as_the_server_matches() {
        let yes: &[(&str, &str)] = &[
            ("*", ""),
            ("*", "abc"),
            ("a*", "a"),
            ("a*c", "abbbc"),
            ("a?c", "abc"),
            ("user:*:name", "user:42:name"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("h[b-a]llo", "hallo"),
            ("a\\*b", "a*b"),
            ("[\\]]", "]"),
            ("*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaab"),
            ("**x", "abx"),
            ("a\\", "a\\"),
            ("[abc", "b"),
        ];
        let no: &[(&str, &str)] = &[
            ("a", ""),
            ("", "a"),
            ("a*c", "abcd"),
            ("a?c", "ac"),
            ("h[^e]llo", "hello"),
            ("h[a-b]llo", "hcllo"),
            ("a\\*b", "axb"),
            ("*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaa"),
            ("user:*", "users:1"),
        ];
        for (p, s) in yes {
            assert!(glob_match(p.as_bytes(), s.as_bytes()), "{p} should match {s}");
        }
        for (p, s) in no {
            assert!(!glob_match(p.as_bytes(), s.as_bytes()), "{p} should not match {s}");
        }
    }

    /// Against a plain recursive matcher (the server's algorithm) on random short patterns.
    #[test]
    fn glob_agrees_with_a_recursive_matcher() {
        fn rec(p: &[u8], s: &[u8]) -> bool {
            match p.first() {
                None => s.is_empty(),
                Some(b'*') => (0..=s.len()).any(|k| rec(&p[1..], &s[k..])),
                Some(b'?') => !s.is_empty() && rec(&p[1..], &s[1..]),
                Some(b'[') => {
                    let Some(&ch) = s.first() else { return false };
                    match class_match(p, 0, ch) {
                        Some(next) => rec(&p[next..], &s[1..]),
                        None => false,
                    }
                }
                Some(b'\\') if p.len() >= 2 => s.first() == Some(&p[1]) && rec(&p[2..], &s[1..]),
                Some(&c) => s.first() == Some(&c) && rec(&p[1..], &s[1..]),
            }
        }
        let alphabet = b"ab*?[]^-\\";
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..50_000 {
            let p: Vec<u8> = (0..next(7)).map(|_| alphabet[next(alphabet.len() as u64) as usize]).collect();
            let s: Vec<u8> = (0..next(7)).map(|_| b"ab]-"[next(4) as usize]).collect();
            assert_eq!(glob_match(&p, &s), rec(&p, &s), "pattern {:?} on {:?}", String::from_utf8_lossy(&p), String::from_utf8_lossy(&s));
        }
    }

    /// The slots of the cluster specification's examples.
    #[test]
    fn slots_with_and_without_hash_tags() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"user1000"));
        assert_eq!(slot_of(b"foo{}{bar}"), slot_of(b"foo{}{bar}"));
        assert_ne!(slot_of(b"foo{}{bar}"), slot_of(b"bar"));
        assert_eq!(slot_of(b"foo{{bar}}zap"), slot_of(b"{bar"));
        assert_eq!(slot_of(b"foo{bar}{zap}"), slot_of(b"bar"));
    }

    #[test]
    fn class_letters_round_trip() {
        use crate::config::{classes_text, parse_classes};
        assert_eq!(parse_classes(b"A").map(classes_text).as_deref(), Some("A"));
        assert_eq!(parse_classes(b"g$lshzxetd").map(classes_text).as_deref(), Some("A"));
        assert_eq!(parse_classes(b"Amn").map(classes_text).as_deref(), Some("Amn"));
        assert_eq!(parse_classes(b"xg").map(classes_text).as_deref(), Some("gx"));
        assert_eq!(parse_classes(b"").map(classes_text).as_deref(), Some(""));
        assert_eq!(parse_classes(b"K"), None);
        assert_eq!(parse_classes(b"E"), None);
    }
}
