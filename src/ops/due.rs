//! The indexes of time-driven work: what is due when, by (db, key). Commands and arrivals fill
//! them; the jobs bound to them at load (src/jobs) serve them when their one timer fires
//! (src/ffi/timer.rs). Each is the mechanism's index; this file only names them and gives the
//! typed ways in.

use crate::ffi::ctx::{Ctx, Name};
use crate::ffi::timer::{KeyQueue, KeyTimer};
use crate::stream::Stream;

/// Keys with blocked `CLAIM` / ACKTIMEOUT readers, by the time a pending entry of theirs becomes
/// claimable (src/jobs/wake.rs signals them).
pub static READERS: KeyTimer = KeyTimer::new(0);
/// Groups with a CONSUMERTTL (index keys from [`ttl_key`]), by the time one of their consumers
/// can expire (src/jobs/ttl.rs).
pub static CONSUMER_TTL: KeyTimer = KeyTimer::new(0);
/// Streams holding idempotency records, by the time their oldest one expires (src/jobs/idmp.rs).
pub static IDMP: KeyTimer = KeyTimer::new(1);
/// Streams with a MAXAGE, by the time something in them ages out (src/jobs/age.rs).
pub static AGE: KeyTimer = KeyTimer::new(1);
/// Streams with sealed nodes queued for compression (src/jobs/pack.rs): a burst of appends
/// seals several nodes per tick.
pub static PACK: KeyQueue = KeyQueue::new(2);

fn clamp_ms(due_ms: u64) -> i64 {
    i64::try_from(due_ms).unwrap_or(i64::MAX)
}

/// Blocked readers of `keys` (selected DB) are to be woken at `due_ms`.
pub fn wake_readers<'a>(c: &Ctx, db: i32, keys: impl Iterator<Item = &'a [u8]>, due_ms: i64) {
    READERS.schedule_many(c, db, keys, due_ms);
}

/// `key` and `group` in one index key: u32 LE key length, key, group.
pub fn ttl_key(key: &[u8], group: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + key.len() + group.len());
    v.extend_from_slice(&(key.len() as u32).to_le_bytes());
    v.extend_from_slice(key);
    v.extend_from_slice(group);
    v
}

/// The (key, group) of an index key of [`CONSUMER_TTL`].
pub fn ttl_key_split(c: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u32::from_le_bytes(c.get(..4)?.try_into().ok()?) as usize;
    let rest = c.get(4..)?;
    Some((rest.get(..n)?, rest.get(n..)?))
}

/// Group `group` of `key` (selected DB) is to be looked at for idle consumers at `due_ms`.
pub fn consumer_ttl(c: &Ctx, key: Name<'_>, group: Name<'_>, due_ms: i64) {
    CONSUMER_TTL.schedule(c, c.selected_db(), &ttl_key(c.name_bytes(key), c.name_bytes(group)), due_ms);
}

/// An idempotency record was written to `key` (selected DB) whose records are `m`, due at
/// `due_ms`: indexed unless the index holds the key for that time or earlier (one comparison
/// on the common path).
pub fn idmp_recorded(c: &Ctx, key: Name<'_>, m: &mut crate::stream::Idmp, due_ms: u64) {
    if m.indexed_due_ms == 0 || due_ms < m.indexed_due_ms {
        IDMP.schedule(c, c.selected_db(), c.name_bytes(key), clamp_ms(due_ms));
        m.indexed_due_ms = due_ms;
    }
}

/// `key` (selected DB) holds a stream with something to age out at `due_ms`.
pub fn aging(c: &Ctx, key: Name<'_>, due_ms: u64) {
    AGE.schedule(c, c.selected_db(), c.name_bytes(key), clamp_ms(due_ms));
}

/// A write to the retained stream `s` at `key`: indexed for its age unless it is.
pub fn aging_written(c: &Ctx, key: Name<'_>, s: &mut Stream) {
    let Some(a) = s.max_age.as_ref() else { return };
    if a.indexed_due_ms != 0 {
        return;
    }
    if let Some(due) = s.age_due_ms() {
        aging(c, key, due);
        if let Some(a) = s.max_age.as_mut() {
            a.indexed_due_ms = due;
        }
    }
}

/// The stream at `key` (selected DB) sealed nodes to compress.
pub fn sealed(c: &Ctx, key: Name<'_>) {
    PACK.note(c, c.selected_db(), c.name_bytes(key));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_key_round_trip() {
        for (k, g) in [(&b"k"[..], &b"g"[..]), (b"", b""), (b"a\0b", b"\xff")] {
            assert_eq!(ttl_key_split(&ttl_key(k, g)), Some((k, g)));
        }
        assert_eq!(ttl_key_split(b"\x05\0\0\0ab"), None);
    }
}
