//! What a stream counts for in the module's running totals (`INFO xstream`, src/ffi/stats.rs):
//! its entries, nodes, groups, consumers and pending entries. Computed in O(groups), so that
//! the totals are kept up to date after each write instead of walking the keyspace on INFO.

use super::Stream;

/// A stream's contribution to the totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    pub entries: u64,
    pub nodes: u64,
    pub groups: u64,
    pub consumers: u64,
    pub pending: u64,
}

impl Census {
    #[inline]
    pub fn of(s: &Stream) -> Census {
        let mut c = Census { entries: s.length, nodes: s.rax_keys() as u64, groups: s.group_count() as u64, ..Census::default() };
        // The value slab, not a walk of the tree: the order does not matter here.
        if let Some(gs) = s.groups.as_deref() {
            for g in gs.values() {
                c.consumers += g.consumer_count() as u64;
                c.pending += g.pel().len() as u64;
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{IdSpec, NodeLimits, StreamId};

    #[test]
    fn counts_entries_nodes_groups_consumers_and_pending() {
        let mut s = Stream::new();
        let limits = NodeLimits { entries_max: 2, bytes_max: 4096 };
        for i in 1..=5u64 {
            s.append(&[b"f", b"v"], IdSpec::Explicit(StreamId { ms: i, seq: 0 }), 0, limits).unwrap();
        }
        assert_eq!(Census::of(&s), Census { entries: 5, nodes: 3, ..Census::default() });
        assert!(s.create_group(b"g", StreamId::default(), 0));
        let g = s.group_mut(b"g").unwrap();
        let a = g.create_consumer(b"a", 0).unwrap();
        g.create_consumer(b"b", 0).unwrap();
        g.deliver_new(StreamId { ms: 1, seq: 0 }, a, 0);
        g.deliver_new(StreamId { ms: 2, seq: 0 }, a, 0);
        assert_eq!(Census::of(&s), Census { entries: 5, nodes: 3, groups: 1, consumers: 2, pending: 2 });
    }
}
