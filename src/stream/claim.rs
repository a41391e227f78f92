//! XREADGROUP ... CLAIM min-idle-time (Redis 8.4, REDIS8.md §4): which pending
//! entries a `>` read with CLAIM takes over, in the group's delivery-time order.
//!
//! ```text
//!   time order (head first):  [NACK zone, FIFO]  oldest delivery ... newest delivery
//!                              ^ always claimable  ^ claimable while idle >= min-idle
//! ```
//!
//! The walk skips entries whose stream data is gone (they stay pending, untouched)
//! and stops at the first live entry that is not idle enough: everything after it
//! was delivered later.

use super::{Nack, Stream, StreamId};

/// Whether a pending entry qualifies for CLAIM `min_idle_ms` at `now_ms`: NACKed
/// entries (delivery time 0) always do; others once idle long enough.
pub fn claimable(n: &Nack, min_idle_ms: i64, now_ms: i64) -> bool {
    n.delivery_time == 0 || now_ms.saturating_sub(n.delivery_time) >= min_idle_ms
}

impl Stream {
    /// The group's pending entries in delivery-time order, from the head.
    /// The group's pending entries in delivery-time order, from the head.
    fn pel_by_time<'a>(&'a self, g: &'a super::Group) -> impl Iterator<Item = (StreamId, Nack)> + 'a {
        g.by_time().map(|(id, n)| (id, *n))
    }

    /// The delivery time of the first pending entry of group `gname`, in time
    /// order, whose stream entry still exists (None: no such entry, or no group).
    /// A CLAIM read serves the stream when it is claimable, and a blocked one
    /// wakes when it will be.
    pub fn claim_first_live(&self, gname: &[u8]) -> Option<Nack> {
        let g = self.group(gname)?;
        self.pel_by_time(g).find(|(id, _)| self.contains(*id)).map(|(_, n)| n)
    }

    /// The entries a CLAIM read takes, in order: pending entries of group `gname`
    /// in time order that still exist in the stream and qualify ([`claimable`]),
    /// up to the first live one that does not, at most `limit` (0 = all).
    pub fn claim_candidates(&self, gname: &[u8], min_idle_ms: i64, now_ms: i64, limit: u64) -> Vec<(StreamId, Nack)> {
        let mut out = Vec::new();
        let Some(g) = self.group(gname) else { return out };
        for (id, n) in self.pel_by_time(g) {
            if limit != 0 && out.len() as u64 == limit {
                break;
            }
            if !self.contains(id) {
                continue;
            }
            if !claimable(&n, min_idle_ms, now_ms) {
                break;
            }
            out.push((id, n));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::group::{DeliveryTime, NackCount};
    use crate::stream::{ClaimCount, IdSpec, NodeLimits};

    fn id(ms: u64) -> StreamId {
        StreamId::new(ms, 0)
    }

    /// Entries 1..=5, delivered to one consumer at times 100, 200, ... 500.
    fn stream() -> (Stream, u32) {
        let mut s = Stream::new();
        for ms in 1..=5 {
            s.append(&[b"f", b"v"], IdSpec::Explicit(id(ms)), 0, NodeLimits::default()).unwrap();
        }
        assert!(s.create_group(b"g", StreamId::MIN, 0));
        let g = s.group_mut(b"g").unwrap();
        let slot = g.create_consumer(b"c", 0).unwrap();
        for ms in 1..=5 {
            g.deliver_new(id(ms), slot, ms as i64 * 100);
        }
        (s, slot)
    }

    fn ids(v: &[(StreamId, Nack)]) -> Vec<u64> {
        v.iter().map(|(id, _)| id.ms).collect()
    }

    #[test]
    fn walk_in_time_order_stops_at_the_first_fresh_live_entry() {
        let (mut s, slot) = stream();
        // 3 is redelivered last; 2 goes away (skipped, stays pending).
        s.group_mut(b"g").unwrap().claim(id(3), slot, DeliveryTime::Now(600), ClaimCount::Increment, false);
        assert!(s.delete(id(2)));
        assert_eq!(s.claim_first_live(b"g").map(|n| n.delivery_time), Some(100));
        assert_eq!(ids(&s.claim_candidates(b"g", 250, 600, 0)), [1]);
        assert_eq!(ids(&s.claim_candidates(b"g", 200, 600, 0)), [1, 4]);
        assert_eq!(ids(&s.claim_candidates(b"g", 0, 600, 0)), [1, 4, 5, 3]);
        assert_eq!(ids(&s.claim_candidates(b"g", 0, 600, 2)), [1, 4]);
        assert_eq!(ids(&s.claim_candidates(b"g", 1000, 600, 0)), Vec::<u64>::new());
        assert!(s.group(b"g").unwrap().nack(id(2)).is_some());
        assert!(s.claim_candidates(b"nope", 0, 600, 0).is_empty() && s.claim_first_live(b"nope").is_none());
    }

    #[test]
    fn nacked_entries_come_first_whatever_min_idle() {
        let (mut s, _) = stream();
        let g = s.group_mut(b"g").unwrap();
        assert!(g.nack_entry(id(4), NackCount::Fail, false));
        assert!(g.nack_entry(id(2), NackCount::Fail, false));
        assert_eq!(ids(&s.claim_candidates(b"g", i64::MAX, 600, 0)), [4, 2]);
        assert_eq!(ids(&s.claim_candidates(b"g", 350, 600, 0)), [4, 2, 1]);
        assert_eq!(ids(&s.claim_candidates(b"g", 300, 600, 0)), [4, 2, 1, 3]);
        assert!(claimable(&s.claim_first_live(b"g").unwrap(), i64::MAX, 0));
    }
}
