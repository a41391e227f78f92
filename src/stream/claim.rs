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
