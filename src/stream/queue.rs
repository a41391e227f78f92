//! Reliable-queue policies of a consumer group (issue 16): MAXDELIVERIES with a
//! dead-letter stream (or DROP), ACKTIMEOUT with exponential BACKOFF, CONSUMERTTL.
//!
//! ```text
//!   Group ── extra ── policy: Option<QueuePolicy>   (None: the built-in's group, byte for byte)
//!                       max_deliveries  n, DEADLETTER key | DROP
//!                       ack_timeout     ms, backoff f, max_backoff ms
//!                       consumer_ttl    ms
//!                       counters        delivered acked redelivered dead_lettered (not persisted)
//! ```
//!
//! Everything here is a function of the group's state and a clock passed in:
//! - an owned pending entry is *due* at `delivery_time + min(ms * f^(count-1), maxbackoff)`;
//!   an unowned one (the NACK zone: XS.NACK, a released consumer) is due at once;
//! - an entry about to be delivered for the (n+1)-th time goes to the dead letters;
//! - a consumer whose last interaction (seen-time) is `ttl` ms old is expired.
//!
//! No state beyond the policy's parameters: due times come from the NACKs' own
//! delivery times and counts, so persistence, replicas and AOF replay need
//! nothing more than the parameters (the counters are statistics).

#![forbid(unsafe_code)]

use super::group::Nack;
use super::StreamId;

/// What MAXDELIVERIES does with an entry over the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeadLetter {
    /// Appended to this stream key, then acknowledged (shared: a command applying the
    /// policy takes a reference, not a copy).
    Key(std::sync::Arc<[u8]>),
    /// Acknowledged without a copy.
    Drop,
}

/// ACKTIMEOUT ms [BACKOFF f] [MAXBACKOFF ms].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AckTimeout {
    pub ms: i64,
    /// >= 1.
    pub backoff: f64,
    pub max_backoff: Option<i64>,
}

/// Largest ACKTIMEOUT / MAXBACKOFF / CONSUMERTTL in ms (about 31.7 years: sums
/// with unix times stay far from i64 overflow).
pub const MS_MAX: i64 = 1_000_000_000_000;
/// Largest BACKOFF factor.
pub const BACKOFF_MAX: f64 = 1000.0;

impl AckTimeout {
    /// The timeout after the `count`-th delivery: `min(ms * f^(count-1), maxbackoff)`,
    /// capped at [`MS_MAX`] (count 0, possible after XS.NACK SILENT, counts as 1).
    pub fn timeout_ms(&self, count: u64) -> i64 {
        let cap = self.max_backoff.unwrap_or(MS_MAX).min(MS_MAX);
        if self.backoff <= 1.0 || count <= 1 {
            return self.ms.min(cap);
        }
        // f^e overflows to inf past e ~ 1000 for f >= 2: clamp the exponent first.
        let e = (count - 1).min(4096) as i32;
        let t = self.ms as f64 * self.backoff.powi(e);
        if t.is_finite() && t < cap as f64 {
            (t as i64).max(self.ms).min(cap)
        } else {
            cap
        }
    }

    /// When the NACK `n` becomes due (unowned: now, i.e. at once).
    pub fn due_at(&self, n: &Nack) -> i64 {
        if n.is_unowned() {
            return i64::MIN;
        }
        n.delivery_time.saturating_add(self.timeout_ms(n.delivery_count))
    }
}

/// Per-group counters shown by XS.INFO GROUPS (statistics: not persisted, not in
/// the digest; a replica counts what the commands it receives do).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub delivered: u64,
    pub acked: u64,
    pub redelivered: u64,
    pub dead_lettered: u64,
}

/// A group's policy. At least one of the three parts is set (a policy with none
/// is removed from the group).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueuePolicy {
    pub max_deliveries: Option<(u64, DeadLetter)>,
    pub ack_timeout: Option<AckTimeout>,
    pub consumer_ttl: Option<i64>,
    pub counters: Counters,
    /// CONSUMERTTL: no consumer can have expired before this time (the earliest
    /// `last interaction + ttl` the last scan saw); runtime only.
    pub ttl_check_at: i64,
    /// CONSUMERTTL: the earliest time the group is registered at in the primary's
    /// expiry index (0: unknown); runtime only.
    pub ttl_scheduled_at: i64,
}

impl QueuePolicy {
    pub fn is_empty(&self) -> bool {
        self.max_deliveries.is_none() && self.ack_timeout.is_none() && self.consumer_ttl.is_none()
    }

    /// Whether a delivery that would bring the count to `count_after` must
    /// dead-letter the entry instead (count_after > n).
    pub fn over_limit(&self, count_after: u64) -> bool {
        matches!(self.max_deliveries, Some((n, _)) if count_after > n)
    }

    /// Whether `>` reads deliver due entries (ACKTIMEOUT or CONSUMERTTL set:
    /// entries released by an expired consumer go to the next `>` reader).
    pub fn redelivers(&self) -> bool {
        self.ack_timeout.is_some() || self.consumer_ttl.is_some()
    }

    /// The dead-letter key, if MAXDELIVERIES names one.
    pub fn dead_letter_key(&self) -> Option<&[u8]> {
        match &self.max_deliveries {
            Some((_, DeadLetter::Key(k))) => Some(k),
            _ => None,
        }
    }
}

impl QueuePolicy {
    /// The SETPOLICY options that set this policy (AOF rewrite, digest): every
    /// part set, in a fixed order; BACKOFF in Rust's shortest round-trip form.
    pub fn setpolicy_args(&self) -> Vec<Vec<u8>> {
        let mut a: Vec<Vec<u8>> = Vec::new();
        if let Some((n, t)) = &self.max_deliveries {
            a.push(b"MAXDELIVERIES".to_vec());
            a.push(n.to_string().into_bytes());
            match t {
                DeadLetter::Key(k) => {
                    a.push(b"DEADLETTER".to_vec());
                    a.push(k.to_vec());
                }
                DeadLetter::Drop => a.push(b"DROP".to_vec()),
            }
        }
        if let Some(at) = &self.ack_timeout {
            a.push(b"ACKTIMEOUT".to_vec());
            a.push(at.ms.to_string().into_bytes());
            if at.backoff != 1.0 {
                a.push(b"BACKOFF".to_vec());
                a.push(format!("{}", at.backoff).into_bytes());
            }
            if let Some(m) = at.max_backoff {
                a.push(b"MAXBACKOFF".to_vec());
                a.push(m.to_string().into_bytes());
            }
        }
        if let Some(t) = self.consumer_ttl {
            a.push(b"CONSUMERTTL".to_vec());
            a.push(t.to_string().into_bytes());
        }
        a
    }
}

/// Why an entry was dead-lettered (the `reason` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    MaxDeliveries,
    NackFatal,
    Manual,
}

impl Reason {
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            Reason::MaxDeliveries => b"max-deliveries",
            Reason::NackFatal => b"nack-fatal",
            Reason::Manual => b"manual",
        }
    }
}

/// What a dead letter records of its entry before it is acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dead {
    pub id: StreamId,
    /// The last owner ("" when NACKed).
    pub consumer: Vec<u8>,
    pub deliveries: u64,
    pub reason: Reason,
}

/// Which entries just left the stream, for [`Stream::forget_gone_pending`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gone {
    /// One entry (XS.DEL, XS.DELEX).
    One(StreamId),
    /// Every entry below this ID (a trim from the head: the first live entry's ID), or
    /// every entry (None: the stream is empty).
    Below(Option<StreamId>),
}

impl super::Stream {
    /// Whether some group has a queue policy.
    pub fn has_policy_group(&self) -> bool {
        self.groups.get().is_some_and(|gs| gs.values().any(|g| g.policy().is_some()))
    }

    /// When group `gname` gets a policy: its pending entries the stream no longer holds
    /// (deleted before) are forgotten as [`Stream::forget_gone_pending`] forgets later ones.
    /// O(pending entries of the group), once. Returns how many.
    pub fn forget_missing_pending(&mut self, gname: &[u8]) -> usize {
        let missing: Vec<StreamId> = match self.group(gname) {
            Some(g) if g.policy().is_some() => {
                let mut v = Vec::new();
                let mut it = g.pel().iter();
                while let Some((k, _)) = it.next() {
                    match StreamId::from_be_bytes(k) {
                        Some(id) if !self.contains(id) => v.push(id),
                        _ => {}
                    }
                }
                v
            }
            _ => return 0,
        };
        if let Some(g) = self.group_mut(gname) {
            for &id in &missing {
                g.ack(id);
            }
        }
        missing.len()
    }

    /// A group with a queue policy forgets the pending entries the stream no longer holds,
    /// when they go (XS.DEL, XS.DELEX KEEPREF, XS.TRIM, XS.ADD's trims, MAXAGE): as XAUTOCLAIM
    /// drops them for the built-in, without a reply or a count. Kept, such an entry could
    /// never be delivered, acknowledged by a worker or dead-lettered (the copy has nothing to
    /// copy), and every `>` read of a redelivering group walked past it (issue 34: 22 ms a
    /// read with 30,000 of them). Replicas and the AOF run the same deletion on the same
    /// groups, so they forget the same entries: nothing more is propagated. Groups without
    /// a policy keep the built-in's behaviour (the PEL keeps the ID; `[id, nil]` on a
    /// history read). Cost: O(groups) per deleted entry when some group has a policy, plus
    /// O(log) per forgotten entry; nothing otherwise.
    pub(crate) fn forget_gone_pending(&mut self, gone: Gone) {
        if !self.has_policy_group() {
            return;
        }
        let Some(gs) = self.groups.all_mut() else { return };
        for g in gs.values_mut() {
            if g.policy().is_none() {
                continue;
            }
            match gone {
                Gone::One(id) => {
                    g.ack(id);
                }
                Gone::Below(bound) => {
                    let ids: Vec<StreamId> = {
                        let mut v = Vec::new();
                        let mut it = g.pel().iter();
                        while let Some((k, _)) = it.next() {
                            let Some(id) = StreamId::from_be_bytes(k) else { continue };
                            if bound.is_some_and(|b| id >= b) {
                                break;
                            }
                            v.push(id);
                        }
                        v
                    };
                    for id in ids {
                        g.ack(id);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
