//! The policy state machine against a simple model: random operations (deliveries,
//! acks, NACKs, `>` reads taking due entries with MAXDELIVERIES, consumer expiry)
//! and random time steps.

use super::*;
use crate::stream::group::{ClaimCount, DeliveryTime, Group, NackCount, NO_OWNER};

fn id(ms: u64) -> StreamId {
    StreamId::new(ms, 0)
}

#[test]
fn timeout_with_backoff_and_cap() {
    let at = AckTimeout { ms: 100, backoff: 2.0, max_backoff: Some(1000) };
    assert_eq!([0, 1, 2, 3, 4, 5, 10, u64::MAX].map(|c| at.timeout_ms(c)), [100, 100, 200, 400, 800, 1000, 1000, 1000]);
    let flat = AckTimeout { ms: 100, backoff: 1.0, max_backoff: None };
    assert_eq!(flat.timeout_ms(u64::MAX), 100);
    let uncapped = AckTimeout { ms: 100, backoff: 1000.0, max_backoff: None };
    assert_eq!(uncapped.timeout_ms(u64::MAX), MS_MAX);
    assert_eq!(AckTimeout { ms: 10, backoff: 1.5, max_backoff: None }.timeout_ms(3), 22);
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The model: per pending ID its delivery time, count, owner (None: NACKed) and
/// its position in the time list (a sequence number; the NACK zone has its own).
#[derive(Clone, Debug)]
struct M {
    time: i64,
    count: u64,
    owner: Option<u32>,
    seq: u64,
}

fn model_due(m: &std::collections::BTreeMap<u64, M>, at: &AckTimeout, now: i64, limit: usize) -> Vec<u64> {
    let mut zone: Vec<(u64, u64)> = m.iter().filter(|(_, e)| e.owner.is_none()).map(|(k, e)| (e.seq, *k)).collect();
    zone.sort();
    let mut out: Vec<u64> = zone.into_iter().map(|(_, k)| k).collect();
    let mut due: Vec<(i64, u64, u64)> = m
        .iter()
        .filter(|(_, e)| e.owner.is_some())
        .filter_map(|(k, e)| {
            let d = e.time + at.timeout_ms(e.count);
            (d <= now).then_some((now - d, e.seq, *k))
        })
        .collect();
    due.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    out.extend(due.into_iter().map(|x| x.2));
    if limit != 0 {
        out.truncate(limit);
    }
    out
}

#[test]
fn random_operations_and_time_steps_match_the_model() {
    for seed in 1..=60u64 {
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let at = AckTimeout {
            ms: 1 + r.below(50) as i64,
            backoff: [1.0, 1.5, 2.0][r.below(3) as usize],
            max_backoff: if r.below(2) == 0 { Some(300) } else { None },
        };
        let maxdel = 1 + r.below(4);
        let ttl = 50 + r.below(200) as i64;
        let mut g = Group::new(b"g", StreamId::MAX, 0); // every entry delivered by `>` reads: due entries are at or below the last ID
        g.set_policy(Some(QueuePolicy {
            max_deliveries: Some((maxdel, DeadLetter::Drop)),
            ack_timeout: Some(at),
            consumer_ttl: Some(ttl),
            counters: Counters::default(),
            ttl_check_at: 0,
            ttl_scheduled_at: 0,
        }));
        let names: Vec<Vec<u8>> = (0..4).map(|i| format!("c{i}").into_bytes()).collect();
        let mut now: i64 = 1_000;
        let mut m: std::collections::BTreeMap<u64, M> = Default::default();
        let mut seen: std::collections::BTreeMap<Vec<u8>, i64> = Default::default();
        let mut seq = 0u64;
        let mut next_id = 1u64;
        let mut dead = 0u64;
        for _ in 0..400 {
            seq += 1;
            match r.below(8) {
                0 => now += r.below(120) as i64,
                1 | 2 => {
                    // A `>` read by consumer k: due entries first (dead-lettering those
                    // over the limit), then one new entry.
                    let k = r.below(4) as usize;
                    let slot = match g.lookup_consumer(&names[k], Some(now)) {
                        Some(s) => s,
                        None => g.create_consumer(&names[k], now).unwrap(),
                    };
                    seen.insert(names[k].clone(), now);
                    let limit = r.below(4);
                    let got: Vec<u64> = g.due_entries(now, limit, |_| true).iter().map(|(i, _)| i.ms).collect();
                    assert_eq!(got, model_due(&m, &at, now, limit as usize), "seed {seed}");
                    for ms in got {
                        let e = m.get_mut(&ms).unwrap();
                        if g.policy().unwrap().over_limit(e.count + 1) {
                            let d = g.dead_letter(id(ms), Reason::MaxDeliveries).unwrap();
                            assert_eq!(d.deliveries, e.count);
                            m.remove(&ms);
                            dead += 1;
                        } else {
                            g.claim(id(ms), slot, DeliveryTime::Now(now), ClaimCount::Increment, false).unwrap();
                            *e = M { time: now, count: e.count + 1, owner: Some(slot), seq };
                            seq += 1;
                        }
                    }
                    g.deliver_new(id(next_id), slot, now);
                    m.insert(next_id, M { time: now, count: 1, owner: Some(slot), seq });
                    next_id += 1;
                }
                3 => {
                    if let Some(&ms) = m.keys().nth(r.below(m.len() as u64 + 1) as usize) {
                        assert!(g.ack(id(ms)));
                        m.remove(&ms);
                    }
                }
                4 => {
                    if let Some(&ms) = m.keys().nth(r.below(m.len() as u64 + 1) as usize) {
                        assert!(g.nack_entry(id(ms), NackCount::Fail, false));
                        let e = m.get_mut(&ms).unwrap();
                        e.owner = None;
                        e.time = 0;
                        e.seq = seq;
                    }
                }
                5 => {
                    // CONSUMERTTL: expired consumers release their entries (NACK FAIL).
                    let exp = g.expired_consumers(now, 8);
                    let mut all = Vec::new();
                    let mut it = g.consumers();
                    while let Some((_, c)) = it.next_consumer() {
                        all.push(c.name.to_vec());
                    }
                    drop(it);
                    let want: Vec<Vec<u8>> = all.into_iter().filter(|n| now - seen.get(n).copied().unwrap_or(i64::MIN / 2) >= ttl).take(8).collect();
                    assert_eq!(exp, want, "seed {seed}");
                    for name in exp {
                        let slot = g.find_consumer(&name).unwrap();
                        let ids: Vec<StreamId> = g.by_time().filter(|(_, n)| n.owner == slot).map(|(i, _)| i).collect();
                        for i in ids {
                            g.nack_entry(i, NackCount::Fail, false);
                            let e = m.get_mut(&i.ms).unwrap();
                            e.owner = None;
                            e.time = 0;
                            e.seq = seq;
                            seq += 1;
                        }
                        assert_eq!(g.delete_consumer(&name), Some(0));
                        seen.remove(&name);
                    }
                }
                _ => {
                    // next_due never later than the first due entry.
                    if let Some(d) = g.next_due(now, |_| true) {
                        let first = model_due(&m, &at, d.max(now), 0);
                        assert!(!first.is_empty() || m.is_empty(), "seed {seed}: next_due {d} with nothing due");
                    } else {
                        assert!(m.is_empty(), "seed {seed}: next_due None with entries pending");
                    }
                }
            }
            g.check().unwrap();
            assert_eq!(g.pel().len(), m.len());
            for (ms, e) in &m {
                let n = g.nack(id(*ms)).unwrap();
                assert_eq!((n.delivery_count, n.owner == NO_OWNER), (e.count, e.owner.is_none()), "seed {seed} id {ms}");
                if let Some(o) = e.owner {
                    assert_eq!((n.delivery_time, n.owner), (e.time, o));
                }
            }
            assert!(m.values().all(|e| e.count <= maxdel), "seed {seed}: an entry went past MAXDELIVERIES");
        }
        assert_eq!(g.policy().unwrap().counters.dead_lettered, dead);
    }
}

#[test]
fn ttl_check_covers_consumers_created_after_a_scan() {
    let mut g = Group::new(b"g", StreamId::MIN, 0);
    g.set_policy(Some(QueuePolicy { consumer_ttl: Some(100), ..QueuePolicy::default() }));
    assert!(g.take_expired_consumers(0, 8).is_empty());
    g.create_consumer(b"a", 10).unwrap();
    assert!(g.take_expired_consumers(105, 8).is_empty(), "a is 95 ms old");
    assert_eq!(g.take_expired_consumers(110, 8), vec![b"a".to_vec()]);
    // Between scans a consumer cannot expire: no scan before the recorded time.
    let mut g = Group::new(b"g", StreamId::MIN, 0);
    g.set_policy(Some(QueuePolicy { consumer_ttl: Some(100), ..QueuePolicy::default() }));
    g.create_consumer(b"b", 0).unwrap();
    assert!(g.take_expired_consumers(50, 8).is_empty());
    assert_eq!(g.policy().unwrap().ttl_check_at, 100);
    assert_eq!(g.take_expired_consumers(100, 8), vec![b"b".to_vec()]);
}

#[test]
fn no_policy_no_due_entries() {
    let mut g = Group::new(b"g", StreamId::MIN, 0);
    let s = g.create_consumer(b"a", 0).unwrap();
    g.deliver_new(id(1), s, 0);
    g.nack_entry(id(1), NackCount::Fail, false);
    assert!(g.due_entries(i64::MAX, 0, |_| true).is_empty());
    assert_eq!(g.next_due(10, |_| true), None);
    assert!(g.expired_consumers(i64::MAX, 10).is_empty());
    g.set_policy(Some(QueuePolicy::default()));
    assert!(g.policy().is_none(), "an empty policy is no policy");
}

/// Issue 34: a group with a policy forgets the pending entries deleted from the stream (XDEL,
/// XDELEX KEEPREF, trims of every kind), when they go or, for those deleted before, when it
/// gets its policy; a group without one keeps them as the built-in does. Random streams, node
/// sizes, deliveries and deletions against a model of the two PELs.
#[test]
fn policy_groups_forget_deleted_pending_entries() {
    use crate::stream::{IdSpec, NodeLimits, RefPolicy, Stream, Trim, TrimStrategy};
    use std::collections::BTreeSet;
    let mut r = Rng(0x51ed_270b_a1f0_e3d9);
    for round in 0..300 {
        let mut s = Stream::new();
        let limits = NodeLimits { entries_max: 1 + r.below(8) as i64, bytes_max: 0 };
        let n = 1 + r.below(80);
        for i in 1..=n {
            s.append(&[b"f", b"v"], IdSpec::Explicit(id(i)), 0, limits).expect("append");
        }
        assert!(s.create_group(b"p", StreamId::MIN, 0) && s.create_group(b"plain", StreamId::MIN, 0));
        // The policy is set at a random point: entries deleted before it go at that point.
        let policy_at = r.below(40);
        let (mut kept_p, mut kept_plain) = (BTreeSet::new(), BTreeSet::new());
        for g in [&b"p"[..], b"plain"] {
            let grp = s.group_mut(g).expect("group");
            let slot = grp.create_consumer(b"c", 0).expect("consumer");
            for i in 1..=n {
                if r.below(3) > 0 {
                    grp.deliver_new(id(i), slot, 0);
                    if g == b"p" {
                        kept_p.insert(i)
                    } else {
                        kept_plain.insert(i)
                    };
                }
            }
        }
        for step in 0..40 {
            if step == policy_at {
                s.group_mut(b"p").expect("p").set_policy(Some(QueuePolicy {
                    ack_timeout: Some(AckTimeout { ms: 10, backoff: 1.0, max_backoff: None }),
                    ..Default::default()
                }));
                s.forget_missing_pending(b"p");
            }
            match r.below(4) {
                0 | 1 => {
                    let i = 1 + r.below(n);
                    s.delete_ids(&[id(i)]);
                }
                2 => {
                    let i = 1 + r.below(n);
                    s.delete_ex(&[id(i)], RefPolicy::KeepRef);
                }
                _ => {
                    let strategy = if r.below(2) == 0 { TrimStrategy::MaxLen(r.below(n)) } else { TrimStrategy::MinId(id(r.below(n + 2))) };
                    s.trim(&Trim { strategy, approx: r.below(2) == 0, limit: 0 });
                }
            }
            let live: BTreeSet<u64> = (1..=n).filter(|&i| s.contains(id(i))).collect();
            let pel = |s: &Stream, g: &[u8]| -> BTreeSet<u64> {
                let mut out = BTreeSet::new();
                let mut it = s.group(g).expect("group").pel().iter();
                while let Some((k, _)) = it.next() {
                    out.insert(StreamId::from_be_bytes(k).expect("id").ms);
                }
                out
            };
            assert_eq!(pel(&s, b"plain"), kept_plain, "round {round} step {step}: the group without a policy keeps its PEL");
            let want: BTreeSet<u64> = if step >= policy_at { kept_p.intersection(&live).copied().collect() } else { kept_p.clone() };
            if step >= policy_at {
                kept_p = want.clone();
            }
            assert_eq!(pel(&s, b"p"), want, "round {round} step {step}: the policy group's PEL");
            s.group(b"p").expect("p").check().expect("consistent group");
        }
    }
}
