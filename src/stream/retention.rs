//! Retention by age (ours, issue 17; docs/retention.md): a stream may carry a
//! maximum age. Entries whose ID time is older than `now - age` are trimmed, as
//! `MINID ~ <now - age>` (whole nodes) or, with EXACT, `MINID = <now - age>`. The
//! clock is always passed in: the pure core never reads it. IDs in the future are
//! never aged (the cutoff is below them).

use super::{RefPolicy, Stream, StreamId, Trim, TrimStrategy, Trimmed};

/// A stream's stored retention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxAge {
    /// Milliseconds (>= 1; 0 removes the retention and is never stored).
    pub ms: u64,
    /// Trim entry by entry instead of whole nodes.
    pub exact: bool,
    /// The due time the primary's timer index holds for this stream (0: not
    /// indexed); not content (RDB, digest and comparisons of the setting ignore it).
    pub indexed_due_ms: u64,
}

/// The largest age accepted (ms): about 292 million years, well inside i64.
pub const MAX_AGE_MS: u64 = i64::MAX as u64;

/// The first ID kept at `now_ms` with an age of `age_ms`: `(now - age)-0`, 0-0
/// (nothing aged) when the age reaches back before the epoch.
pub fn cutoff(now_ms: u64, age_ms: u64) -> StreamId {
    StreamId { ms: now_ms.saturating_sub(age_ms), seq: 0 }
}

impl MaxAge {
    pub fn new(ms: u64, exact: bool) -> Self {
        MaxAge { ms, exact, indexed_due_ms: 0 }
    }

    /// The same setting (age and mode).
    pub fn same(&self, other: &MaxAge) -> bool {
        self.ms == other.ms && self.exact == other.exact
    }

    /// The trim this retention asks for at `now_ms`, removing at most `limit`
    /// entries (0: no limit).
    pub fn trim_at(&self, now_ms: u64, limit: i64) -> Trim {
        Trim { strategy: TrimStrategy::MinId(cutoff(now_ms, self.ms)), approx: !self.exact, limit }
    }
}

impl Stream {
    /// Applies the stored retention at `now_ms` (KEEPREF); None without one.
    pub fn trim_aged(&mut self, now_ms: u64, limit: i64) -> Option<(Trim, Trimmed)> {
        let t = self.max_age.as_deref()?.trim_at(now_ms, limit);
        let done = self.trim_with(&t, RefPolicy::KeepRef);
        Some((t, done))
    }

    /// When the stored retention has something to trim next (Unix ms): the first
    /// entry's time + age + 1 (EXACT), or the time the first node's last entry
    /// (tombstones included, as the trim reads it) ages out (whole nodes). None
    /// without a retention or entries.
    pub fn age_due_ms(&self) -> Option<u64> {
        let a = *self.max_age.as_deref()?;
        if self.length == 0 {
            return None;
        }
        let oldest = if a.exact {
            self.first_id
        } else {
            let (master, lp) = self.nodes().next()?;
            super::node::last_entry_id(lp, master).unwrap_or(master)
        };
        Some(oldest.ms.saturating_add(a.ms).saturating_add(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{IdSpec, NodeLimits};

    fn limits() -> NodeLimits {
        NodeLimits { entries_max: 4, bytes_max: 4096 }
    }

    /// A stream with one entry at each of `times` (ms, seq 0).
    fn stream_at(times: &[u64]) -> Stream {
        let mut s = Stream::new();
        for &t in times {
            s.append(&[b"f", b"v"], IdSpec::Explicit(StreamId { ms: t, seq: 0 }), t, limits()).unwrap();
        }
        s
    }

    fn ids(s: &Stream) -> Vec<u64> {
        s.range(StreamId::MIN, StreamId::MAX, false).map(|e| e.id().ms).collect()
    }

    #[test]
    fn exact_keeps_exactly_the_entries_not_older_than_the_age() {
        let mut s = stream_at(&[100, 200, 300, 400, 500, 600]);
        s.max_age = Some(Box::new(MaxAge::new(250, true)));
        // now 600: cutoff 350, entries at 100..300 go.
        let (_, done) = s.trim_aged(600, 0).unwrap();
        assert_eq!(done.deleted, 3);
        assert_eq!(ids(&s), vec![400, 500, 600]);
        assert_eq!(s.first_id.ms, 400);
        // Next due: 400 + 250 + 1.
        assert_eq!(s.age_due_ms(), Some(651));
        assert_eq!(s.trim_aged(650, 0).unwrap().1.deleted, 0);
        assert_eq!(s.trim_aged(651, 0).unwrap().1.deleted, 1);
    }

    #[test]
    fn approximate_removes_whole_nodes_only() {
        // Nodes of 4 entries: [100..400] [500..800] [900].
        let mut s = stream_at(&[100, 200, 300, 400, 500, 600, 700, 800, 900]);
        s.max_age = Some(Box::new(MaxAge::new(100, false)));
        // The first node's last entry (400) ages out at 501.
        assert_eq!(s.age_due_ms(), Some(501));
        assert_eq!(s.trim_aged(500, 0).unwrap().1.deleted, 0);
        let (_, done) = s.trim_aged(650, 0).unwrap();
        assert_eq!(done.deleted, 4);
        // 500 and 600 are older than 550 but their node stays.
        assert_eq!(ids(&s), vec![500, 600, 700, 800, 900]);
        assert_eq!(s.age_due_ms(), Some(901));
    }

    #[test]
    fn future_ids_never_age_and_no_retention_does_nothing() {
        let mut s = stream_at(&[5_000, 6_000]);
        assert!(s.trim_aged(10_000, 0).is_none());
        assert_eq!(s.age_due_ms(), None);
        s.max_age = Some(Box::new(MaxAge::new(1_000, true)));
        // The clock (1 000) is before every ID.
        assert_eq!(s.trim_aged(1_000, 0).unwrap().1.deleted, 0);
        // An age longer than the clock: cutoff 0-0.
        s.max_age = Some(Box::new(MaxAge::new(u64::MAX, true)));
        assert_eq!(cutoff(6_000, u64::MAX), StreamId::MIN);
        assert_eq!(s.trim_aged(6_000, 0).unwrap().1.deleted, 0);
        assert_eq!(s.age_due_ms(), Some(u64::MAX));
        assert_eq!(ids(&s), vec![5_000, 6_000]);
    }

    #[test]
    fn limit_bounds_the_work_per_pass() {
        let times: Vec<u64> = (1..=40).map(|i| i * 10).collect();
        let mut s = stream_at(&times);
        s.max_age = Some(Box::new(MaxAge::new(10, false)));
        // Everything is aged at 1 000; 8 entries (two nodes) per pass.
        let mut passes = 0;
        while s.trim_aged(1_000, 8).unwrap().1.deleted > 0 {
            passes += 1;
        }
        assert_eq!(passes, 5);
        assert_eq!(s.len(), 0);
        assert_eq!(s.age_due_ms(), None);
    }

    #[test]
    fn the_trim_equals_minid_at_the_cutoff() {
        let times: Vec<u64> = (1..=30).map(|i| i * 7).collect();
        for exact in [false, true] {
            for now in [0, 50, 99, 120, 211, 300] {
                let mut a = stream_at(&times);
                let mut b = a.clone();
                a.max_age = Some(Box::new(MaxAge::new(40, exact)));
                a.trim_aged(now, 0);
                let t = Trim { strategy: TrimStrategy::MinId(cutoff(now, 40)), approx: !exact, limit: 0 };
                b.trim_with(&t, RefPolicy::KeepRef);
                assert_eq!(ids(&a), ids(&b), "exact {exact} now {now}");
            }
        }
    }
}
