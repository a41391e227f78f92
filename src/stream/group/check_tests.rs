//! `Group::check` (walks) against `Group::check_by_lookups` (the former check, a lookup per
//! consumer entry and per time-list node): on random consistent groups both pass, and on
//! every corruption of a group's parts (the PEL, the consumers' PELs, the time list's links,
//! the NACK zone) both refuse.

use super::*;
use crate::stream::tests::{seed, Rng};
use crate::stream::{ClaimCount, DeliveryTime, NackCount, Stream};

/// A group of three consumers with `n` entries delivered among them, some claimed at other
/// times, some NACKed into the zone (with and without FORCE).
fn group(r: &mut Rng, n: u64) -> Stream {
    let mut s = Stream::new();
    s.create_group(b"g", StreamId::MIN, 0);
    let g = s.group_mut(b"g").unwrap();
    let slots: Vec<u32> = [&b"a"[..], b"b", b"c"].iter().map(|c| g.create_consumer(c, 1).unwrap()).collect();
    for i in 1..=n {
        let id = StreamId::new(i, r.below(3));
        let slot = slots[r.below(3) as usize];
        g.deliver_new(id, slot, 1000 + r.below(50) as i64);
        match r.below(6) {
            0 => {
                g.claim(id, slots[r.below(3) as usize], DeliveryTime::At(r.below(2000) as i64), ClaimCount::Keep, false);
            }
            1 => {
                g.nack_entry(id, NackCount::Fail, false);
            }
            _ => {}
        }
    }
    g.nack_entry(StreamId::new(n + 5, 0), NackCount::Set(2), true);
    s
}

fn keys<V: EmptyRax>(t: &IdMap<V>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut it = t.iter();
    while let Some((k, _)) = it.next() {
        out.push(k.to_vec());
    }
    out
}

/// One corruption of `g`, chosen by `what`; false when it does not apply to this group.
fn corrupt(g: &mut Group, what: u64, r: &mut Rng) -> bool {
    let pel = keys(&g.pel);
    let pick = |r: &mut Rng| pel[r.below(pel.len() as u64) as usize].clone();
    let owned: Vec<Vec<u8>> = pel.iter().filter(|k| g.pel.get(k).is_some_and(|n| n.owner != NO_OWNER)).cloned().collect();
    let zone: Vec<Vec<u8>> = pel.iter().filter(|k| g.pel.get(k).is_some_and(|n| n.owner == NO_OWNER)).cloned().collect();
    let slots: Vec<u32> = (0..g.consumers.slot_count() as u32).filter(|&s| g.consumer(s).is_some()).collect();
    match what {
        // An owned entry missing from its owner's PEL.
        0 if !owned.is_empty() => {
            let k = owned[r.below(owned.len() as u64) as usize].clone();
            let o = g.pel.get(&k).unwrap().owner;
            g.consumer_mut(o).unwrap().pel.remove(&k).is_some()
        }
        // A consumer PEL entry that is not in the group PEL.
        1 => {
            let s = slots[r.below(slots.len() as u64) as usize];
            g.consumer_mut(s).unwrap().pel.insert(&StreamId::new(1 << 40, 0).to_be_bytes(), ());
            true
        }
        // An entry in two consumers' PELs.
        2 if !owned.is_empty() => {
            let k = owned[r.below(owned.len() as u64) as usize].clone();
            let o = g.pel.get(&k).unwrap().owner;
            let Some(&other) = slots.iter().find(|&&s| s != o) else { return false };
            g.consumer_mut(other).unwrap().pel.insert(&<[u8; 16]>::try_from(&k[..]).unwrap(), ());
            true
        }
        // The group PEL names another owner than the consumer's PEL.
        3 if !owned.is_empty() => {
            let k = owned[r.below(owned.len() as u64) as usize].clone();
            let o = g.pel.get(&k).unwrap().owner;
            let Some(&other) = slots.iter().find(|&&s| s != o) else { return false };
            g.pel.get_mut(&k).unwrap().owner = other;
            true
        }
        // An owned entry made unowned outside the zone.
        4 if !owned.is_empty() => {
            let k = owned[r.below(owned.len() as u64) as usize].clone();
            g.pel.get_mut(&k).unwrap().owner = NO_OWNER;
            true
        }
        // A zone entry with a delivery time, or an owner.
        5 if !zone.is_empty() => {
            let k = zone[r.below(zone.len() as u64) as usize].clone();
            g.pel.get_mut(&k).unwrap().delivery_time = 7;
            true
        }
        6 if !zone.is_empty() => {
            let k = zone[r.below(zone.len() as u64) as usize].clone();
            g.pel.get_mut(&k).unwrap().owner = slots[0];
            true
        }
        // Two entries' time-list nodes swapped, or one pointing at another's node.
        7 if pel.len() >= 2 => {
            let (a, b) = (pick(r), pick(r));
            if a == b {
                return false;
            }
            let (la, lb) = (g.pel.get(&a).unwrap().link, g.pel.get(&b).unwrap().link);
            g.pel.get_mut(&a).unwrap().link = lb;
            if r.below(2) == 0 {
                g.pel.get_mut(&b).unwrap().link = la;
            }
            true
        }
        // A link out of the list's slab, or NIL.
        8 => {
            let k = pick(r);
            g.pel.get_mut(&k).unwrap().link = if r.below(2) == 0 { Link::NIL } else { Link::new(g.time.slab_len() as u32 + 3) };
            true
        }
        // An entry gone from the group PEL (still in the list, maybe in a consumer's PEL).
        9 => {
            let k = pick(r);
            g.pel.remove(&k);
            true
        }
        _ => false,
    }
}

#[test]
fn walk_check_refuses_every_corruption_the_lookup_check_refuses() {
    let mut r = Rng::new(seed());
    let mut applied = [0u32; 10];
    for round in 0..400 {
        let n = 1 + r.below(40);
        let mut s = group(&mut r, n);
        let g = s.group_mut(b"g").unwrap();
        assert_eq!(g.check(), Ok(()), "round {round}");
        assert_eq!(g.check_by_lookups(), Ok(()), "round {round}");
        let what = r.below(10);
        if !corrupt(g, what, &mut r) {
            continue;
        }
        applied[what as usize] += 1;
        let (walk, lookups) = (g.check(), g.check_by_lookups());
        assert!(walk.is_err(), "round {round}: corruption {what} passed the walk ({lookups:?} by lookups)");
        assert!(lookups.is_err(), "round {round}: corruption {what} passed the lookups");
    }
    assert!(applied.iter().all(|&n| n >= 5), "{applied:?}");
}
