//! The queue policy of a group (src/stream/queue.rs: the policy's parameters and rules):
//! due entries, the dead-letter step, consumer expiry, as methods of the group.

use super::*;
use crate::stream::queue::*;

impl Group {
    /// Entries a `>` read of a group with a redelivering policy takes before new
    /// ones, in order: the NACK zone (FIFO), then owned entries due at `now`,
    /// longest overdue first (ties: time-list order), at most `limit` (0 = all).
    /// `live` says whether the stream entry still exists (entries gone are
    /// skipped; a group with a policy forgets them when they go, [`Stream::forget_gone_pending`]),
    /// and entries above the group's last ID are skipped too.
    ///
    /// Cost: the time list is scanned from its head while entries were delivered
    /// at least the base timeout ago (a backoff only makes a timeout longer), so
    /// entries delivered recently are never visited.
    pub fn due_entries(&self, now: i64, limit: u64, live: impl Fn(StreamId) -> bool) -> Vec<(StreamId, Nack)> {
        // An entry above the group's last ID (pending through FORCE) is not due: the `>`
        // read that reaches it delivers it as a new one.
        let live = |id: StreamId| id <= self.last_id && live(id);
        let mut out = Vec::new();
        let Some(p) = self.policy() else { return out };
        if !p.redelivers() {
            return out;
        }
        let full = |out: &Vec<(StreamId, Nack)>| limit != 0 && out.len() as u64 >= limit;
        let mut it = self.by_time();
        let zone = self.nacked_count();
        for (id, n) in it.by_ref().take(zone) {
            if full(&out) {
                return out;
            }
            if live(id) {
                out.push((id, *n));
            }
        }
        let Some(at) = p.ack_timeout else { return out };
        // The shortest timeout any entry has (a backoff only lengthens it).
        let base = at.timeout_ms(1);
        if at.backoff <= 1.0 || at.max_backoff == Some(at.ms) {
            // One timeout for every entry: the time list's order is the overdue order, and
            // the walk stops after `limit` entries (O(limit), whatever the backlog).
            for (id, n) in it {
                if full(&out) || n.delivery_time.saturating_add(base) > now {
                    break;
                }
                if live(id) {
                    out.push((id, *n));
                }
            }
            return out;
        }
        // With a backoff, every entry delivered at least the base timeout ago is looked at
        // (O(those entries) per read), then the longest overdue taken.
        let mut overdue: Vec<(i64, usize, StreamId, Nack)> = Vec::new();
        for (pos, (id, n)) in it.enumerate() {
            if n.delivery_time.saturating_add(base) > now {
                break;
            }
            let due = at.due_at(n);
            if due <= now && live(id) {
                overdue.push((now.saturating_sub(due), pos, id, *n));
            }
        }
        overdue.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, _, id, n) in overdue {
            if full(&out) {
                break;
            }
            out.push((id, n));
        }
        out
    }

    /// The earliest time an owned entry becomes due (ACKTIMEOUT), or now when the
    /// NACK zone holds entries; None without a redelivering policy or anything
    /// pending. Only entries `live` says exist count (a pending entry deleted from
    /// the stream is never served, so it must not wake anyone). Scans owned entries
    /// while their delivery time could still give the minimum.
    pub fn next_due(&self, now: i64, live: impl Fn(StreamId) -> bool) -> Option<i64> {
        let live = |id: StreamId| id <= self.last_id && live(id);
        let p = self.policy()?;
        if !p.redelivers() {
            return None;
        }
        let zone = self.nacked_count();
        let mut it = self.by_time();
        if it.by_ref().take(zone).any(|(id, _)| live(id)) {
            return Some(now);
        }
        let at = p.ack_timeout?;
        let base = at.timeout_ms(1);
        let mut best: Option<i64> = None;
        for (id, n) in it {
            if best.is_some_and(|b| n.delivery_time.saturating_add(base) >= b) {
                break;
            }
            if !live(id) {
                continue;
            }
            let due = at.due_at(n);
            best = Some(best.map_or(due, |b: i64| b.min(due)));
        }
        best
    }

    /// Consumers whose last interaction is at least `ttl` ms before `now`
    /// (CONSUMERTTL), at most `limit`, in name order.
    pub fn expired_consumers(&self, now: i64, limit: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let Some(ttl) = self.policy().and_then(|p| p.consumer_ttl) else { return out };
        let mut it = self.consumers();
        while let Some((_, c)) = it.next_consumer() {
            if out.len() >= limit {
                break;
            }
            let last = c.seen_time.max(c.active_time);
            if now.saturating_sub(last) >= ttl {
                out.push(c.name.to_vec());
            }
        }
        out
    }

    /// [`Group::expired_consumers`] at most once per possible expiry: the scan
    /// (O(consumers)) runs only when `now` reached the earliest time a consumer
    /// could expire, which the scan itself records.
    pub fn take_expired_consumers(&mut self, now: i64, limit: usize) -> Vec<Vec<u8>> {
        let Some(p) = self.policy() else { return Vec::new() };
        let Some(ttl) = p.consumer_ttl else { return Vec::new() };
        if now < p.ttl_check_at {
            return Vec::new();
        }
        let out = self.expired_consumers(now, limit);
        let next = if out.len() >= limit {
            now
        } else {
            // A consumer created after this scan expires at now + ttl at the earliest.
            let mut next = now.saturating_add(ttl);
            let mut it = self.consumers();
            while let Some((_, c)) = it.next_consumer() {
                let at = c.seen_time.max(c.active_time).saturating_add(ttl);
                if at > now {
                    next = next.min(at);
                }
            }
            next
        };
        if let Some(p) = self.policy_mut() {
            p.ttl_check_at = next;
        }
        out
    }

    /// Whether the group must be registered in the expiry index at `next`: not when
    /// it already is at a time still to come and not after `next`. Records `next`
    /// when it must.
    pub fn ttl_schedule_needed(&mut self, now: i64, next: i64) -> bool {
        let Some(p) = self.policy_mut() else { return false };
        if p.ttl_scheduled_at > now && p.ttl_scheduled_at <= next {
            return false;
        }
        p.ttl_scheduled_at = next;
        true
    }

    /// The group just left the expiry index (its entry was reached).
    pub fn ttl_unscheduled(&mut self) {
        if let Some(p) = self.policy_mut() {
            p.ttl_scheduled_at = 0;
        }
    }

    /// Takes a pending entry out for the dead letters: records its last owner and
    /// count, acknowledges it, counts it. None if it is not pending.
    pub fn dead_letter(&mut self, id: StreamId, reason: Reason) -> Option<Dead> {
        let n = *self.nack(id)?;
        let consumer = self.owner_name(&n).to_vec();
        self.ack(id);
        if let Some(p) = self.policy_mut() {
            p.counters.dead_lettered += 1;
        }
        Some(Dead { id, consumer, deliveries: n.delivery_count, reason })
    }

    /// Counts deliveries with a policy set (`redelivered` of them re-deliveries).
    pub fn count_deliveries(&mut self, delivered: u64, redelivered: u64) {
        if let Some(p) = self.policy_mut() {
            p.counters.delivered += delivered;
            p.counters.redelivered += redelivered;
        }
    }

    /// Counts acknowledgements with a policy set.
    pub fn count_acks(&mut self, n: u64) {
        if let Some(p) = self.policy_mut() {
            p.counters.acked += n;
        }
    }

    /// Sets the policy (None, or an empty one: removed).
    pub fn set_policy(&mut self, p: Option<QueuePolicy>) {
        match p.filter(|p| !p.is_empty()) {
            Some(p) => self.extra_mut().policy = Some(p),
            None => {
                if let Some(e) = self.extra.as_deref_mut() {
                    e.policy = None;
                }
                self.drop_empty_extra();
            }
        }
    }
}
