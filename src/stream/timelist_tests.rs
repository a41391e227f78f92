//! Model test of a group's delivery-time order and NACK zone (REDIS8.md §4.2, §6.2):
//! random deliveries, claims at "now" and at explicit times, history re-reads, acks,
//! NACKs (every mode, FORCE), consumer deletions, re-deliveries after a SETID, and
//! RDB round trips, with a clock passed in, against a plain `Vec` in list order.
//! After every step: `Group::check`, `by_time` against the model, the zone size, the
//! consumers' PELs, and the time list's slab bounded by what it holds.

use super::group::{count_plus_one, DELIVERY_COUNT_MAX};
use super::tests::{seed, Rng};
use super::*;
use crate::rdb;

#[derive(Clone, Debug, PartialEq, Eq)]
struct MEntry {
    id: StreamId,
    owner: Option<String>,
    time: i64,
    count: u64,
}

#[derive(Default)]
struct Model {
    /// The time list: the zone (`zone` first entries), then the time order.
    list: Vec<MEntry>,
    zone: usize,
    consumers: Vec<String>,
}

impl Model {
    fn take(&mut self, id: StreamId) -> Option<MEntry> {
        let i = self.list.iter().position(|e| e.id == id)?;
        if i < self.zone {
            self.zone -= 1;
        }
        Some(self.list.remove(i))
    }
    fn insert_sorted(&mut self, e: MEntry) {
        let mut at = self.list.len();
        while at > self.zone && self.list[at - 1].time > e.time {
            at -= 1;
        }
        self.list.insert(at, e);
    }
    fn push_zone(&mut self, e: MEntry) {
        self.list.insert(self.zone, e);
        self.zone += 1;
    }
}

const CONSUMERS: [&str; 3] = ["a", "b", "c"];

fn slot_of(g: &mut Group, m: &mut Model, name: &str, now: i64) -> u32 {
    if let Some(s) = g.find_consumer(name.as_bytes()) {
        return s;
    }
    m.consumers.push(name.to_string());
    g.create_consumer(name.as_bytes(), now).unwrap()
}

fn rule_of(r: &mut Rng) -> NackCount {
    match r.below(5) {
        0 => NackCount::Silent,
        1 => NackCount::Fail,
        2 => NackCount::Fatal,
        3 => NackCount::Set(r.below(4)),
        _ => NackCount::Set(DELIVERY_COUNT_MAX - r.below(2)),
    }
}

fn apply_rule(rule: NackCount, c: u64) -> u64 {
    match rule {
        NackCount::Silent => c.saturating_sub(1),
        NackCount::Fail => c,
        NackCount::Fatal => DELIVERY_COUNT_MAX,
        NackCount::Set(n) => n,
    }
}

fn check(s: &Stream, m: &Model, what: &str) {
    let g = s.group(b"g").unwrap();
    g.check().unwrap_or_else(|e| panic!("{what}: {e}"));
    let got: Vec<MEntry> = g
        .by_time()
        .map(|(id, n)| MEntry {
            id,
            owner: if n.is_unowned() { None } else { Some(String::from_utf8(g.owner_name(n).to_vec()).unwrap()) },
            time: n.delivery_time,
            count: n.delivery_count,
        })
        .collect();
    assert_eq!(got, m.list, "{what}: time order");
    assert_eq!(g.nacked_count(), m.zone, "{what}: zone size");
    assert_eq!(g.pel().len(), m.list.len(), "{what}: PEL size");
    for name in &m.consumers {
        let slot = g.find_consumer(name.as_bytes()).unwrap_or_else(|| panic!("{what}: consumer {name}"));
        let mut want: Vec<StreamId> = m.list.iter().filter(|e| e.owner.as_deref() == Some(name.as_str())).map(|e| e.id).collect();
        want.sort();
        let mut have = Vec::new();
        let mut it = g.consumer(slot).unwrap().pel().iter();
        while let Some((k, _)) = it.next() {
            have.push(StreamId::from_be_bytes(k).unwrap());
        }
        assert_eq!(have, want, "{what}: PEL of {name}");
    }
    assert_eq!(g.consumer_count(), m.consumers.len(), "{what}: consumers");
    let (len, slab) = g.time_slab();
    assert!(if len == 0 { slab == 0 } else { slab <= 2 * len + 16 }, "{what}: slab {slab} for {len}");
}

fn run(seed: u64, steps: usize) {
    let mut r = Rng::new(seed);
    let mut s = Stream::new();
    s.create_group(b"g", StreamId::MIN, 0);
    let mut m = Model::default();
    let mut now: i64 = 1_000;
    let idn = 1 + r.below(60);
    for step in 0..steps {
        // The clock mostly advances, sometimes stands still or goes back a little.
        match r.below(10) {
            0 => now -= r.below(3) as i64,
            1..=3 => {}
            _ => now += r.below(5) as i64,
        }
        let id = StreamId::new(1 + r.below(idn), 0);
        let who = CONSUMERS[r.below(3) as usize];
        let op = r.below(100);
        let what = format!("seed {seed} step {step} op {op} id {id:?} {who} now {now}");
        if op == 99 {
            let mut io = rdb::VecIo::default();
            rdb::save(&s, &mut io);
            s = rdb::load(rdb::ENCVER, &mut io, rdb::Check::Deep).unwrap_or_else(|e| panic!("{what}: reload {e}"));
            check(&s, &m, &what);
            continue;
        }
        let g = s.group_mut(b"g").unwrap();
        match op {
            // A `>` delivery (also the re-delivery of a pending ID after SETID).
            0..=24 => {
                let slot = slot_of(g, &mut m, who, now);
                m.take(id);
                m.list.push(MEntry { id, owner: Some(who.into()), time: now, count: 1 });
                let n = g.deliver_new(id, slot, now);
                assert_eq!((n.delivery_time, n.delivery_count, n.owner), (now, 1, slot), "{what}");
            }
            // XCLAIM / XAUTOCLAIM / CLAIM at now, or XCLAIM IDLE / TIME.
            25..=49 => {
                let slot = slot_of(g, &mut m, who, now);
                let explicit = r.below(2) == 0;
                let t = if explicit { now - r.below(40) as i64 } else { now };
                let count = match r.below(5) {
                    0 => ClaimCount::Keep,
                    4 => ClaimCount::IncrementWrapping,
                    1 => ClaimCount::Set(if r.below(2) == 0 { r.below(5) } else { DELIVERY_COUNT_MAX - r.below(2) }),
                    _ => ClaimCount::Increment,
                };
                let force = r.below(4) == 0;
                let old = m.take(id);
                let want = match (old, force) {
                    (None, false) => None,
                    (old, _) => {
                        let c = old.map_or(1, |o| o.count);
                        let c = match count {
                            ClaimCount::Keep => c,
                            ClaimCount::Set(n) => n,
                            ClaimCount::Increment => count_plus_one(c),
                            ClaimCount::IncrementWrapping => c.wrapping_add(1),
                        };
                        let e = MEntry { id, owner: Some(who.into()), time: t, count: c };
                        if explicit {
                            m.insert_sorted(e.clone());
                        } else {
                            m.list.push(e.clone());
                        }
                        Some(e)
                    }
                };
                let when = if explicit { DeliveryTime::At(t) } else { DeliveryTime::Now(t) };
                let got = g.claim(id, slot, when, count, force);
                assert_eq!(got.map(|n| (n.delivery_time, n.delivery_count)), want.map(|e| (e.time, e.count)), "{what}");
            }
            // A history re-read of one of the consumer's own entries.
            50..=57 => {
                let owned: Vec<StreamId> = m.list.iter().filter(|e| e.owner.as_deref() == Some(who)).map(|e| e.id).collect();
                if let Some(&id) = owned.get(r.below(owned.len() as u64 + 1) as usize) {
                    let mut e = m.take(id).unwrap();
                    e.time = now;
                    e.count = count_plus_one(e.count);
                    m.list.push(e);
                    assert!(g.redeliver(id, now, true), "{what}");
                }
            }
            58..=69 => {
                let had = m.take(id).is_some();
                assert_eq!(g.ack(id), had, "{what}");
            }
            70..=92 => {
                let rule = rule_of(&mut r);
                let force = r.below(3) == 0;
                let done = match m.take(id) {
                    Some(e) => {
                        m.push_zone(MEntry { id, owner: None, time: 0, count: apply_rule(rule, e.count) });
                        true
                    }
                    None if force => {
                        m.push_zone(MEntry { id, owner: None, time: 0, count: apply_rule(rule, 0) });
                        true
                    }
                    None => false,
                };
                assert_eq!(g.nack_entry(id, rule, force), done, "{what}");
            }
            _ => {
                let owned = m.list.iter().filter(|e| e.owner.as_deref() == Some(who)).count();
                let existed = m.consumers.iter().any(|c| c == who);
                m.list.retain(|e| e.owner.as_deref() != Some(who));
                m.consumers.retain(|c| c != who);
                assert_eq!(g.delete_consumer(who.as_bytes()), existed.then_some(owned), "{what}");
            }
        }
        check(&s, &m, &what);
    }
}

#[test]
fn time_order_against_a_model() {
    let base = seed();
    for k in 0..60 {
        run(base.wrapping_add(k), 1500);
    }
}

#[test]
fn slab_memory_comes_back() {
    let mut s = Stream::new();
    s.create_group(b"g", StreamId::MIN, 0);
    let g = s.group_mut(b"g").unwrap();
    let a = g.create_consumer(b"a", 0).unwrap();
    for i in 0..10_000 {
        g.deliver_new(StreamId::new(i, 0), a, i as i64);
    }
    assert_eq!(g.time_slab(), (10_000, 10_000));
    // Acks from the front: compactions keep the slab within twice what it holds.
    for i in 0..9_990 {
        g.ack(StreamId::new(i, 0));
        let (len, slab) = g.time_slab();
        assert!(slab <= 2 * len + 16, "{len} {slab}");
    }
    for i in 9_990..10_000 {
        g.ack(StreamId::new(i, 0));
    }
    assert_eq!(g.time_slab(), (0, 0));
    g.check().unwrap();
}

#[test]
fn loading_without_order_sorts_by_time_then_id() {
    let mut g = Group::new(b"g", StreamId::MIN, 0);
    let times = [(1, 300), (3, 100), (4, 200), (5, 900), (6, 100), (7, 50), (8, 0)];
    for &(ms, t) in &times {
        assert!(g.load_nack(StreamId::new(ms, 0), t, 1));
    }
    let a = g.load_consumer(b"a", 0, -1).unwrap();
    for &(ms, _) in &times {
        assert!(g.load_owner(a, StreamId::new(ms, 0)));
    }
    // Without rebuild (encoding 2) an unplaced NACK is refused.
    let mut strict = g.clone();
    assert!(strict.load_finish(false).is_err());
    g.load_finish(true).unwrap();
    let order: Vec<u64> = g.by_time().map(|(id, _)| id.ms).collect();
    assert_eq!(order, [8, 7, 3, 6, 4, 1, 5]);
}

#[test]
fn zone_loading_is_checked() {
    let mut g = Group::new(b"g", StreamId::MIN, 0);
    assert!(g.load_nack(StreamId::new(1, 0), 0, 1));
    assert!(g.load_nack(StreamId::new(2, 0), 5, 1));
    assert!(g.load_nack(StreamId::new(3, 0), 0, 1));
    let a = g.load_consumer(b"a", 0, -1).unwrap();
    assert!(g.load_owner(a, StreamId::new(3, 0)));
    assert!(!g.load_zone(StreamId::new(9, 0)), "not pending");
    assert!(!g.load_zone(StreamId::new(2, 0)), "a delivery time");
    assert!(!g.load_zone(StreamId::new(3, 0)), "owned");
    assert!(g.load_zone(StreamId::new(1, 0)));
    assert!(!g.load_zone(StreamId::new(1, 0)), "twice");
    assert!(!g.load_time(StreamId::new(1, 0)), "in the zone");
    assert!(!g.load_time(StreamId::new(2, 0)), "unowned");
    assert!(g.load_time(StreamId::new(3, 0)));
    // 2-0: unowned outside the zone.
    assert!(g.load_finish(true).is_err());
}
