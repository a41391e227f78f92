//! The small-or-tree indexes (small.rs) against `BTreeMap` models, on random operations that
//! cross [`SMALL_MAX`]: the same keys and values, in the same order, from every start, and the
//! form each should be in (a vector until it outgrows SMALL_MAX, a tree from then on).

use super::small::{IdMap, OwnPel, Roster, SMALL_MAX};
use super::Consumer;
use crate::stream::id::StreamId;
use crate::stream::tests::{seed, Rng};
use std::collections::BTreeMap;

fn entries(m: &IdMap<u32>, start: Option<StreamId>) -> Vec<(Vec<u8>, u32)> {
    let mut it = match start {
        Some(s) => m.from(s),
        None => m.iter(),
    };
    let mut v = Vec::new();
    while let Some((k, &x)) = it.next() {
        v.push((k.to_vec(), x));
    }
    v
}

#[test]
fn id_map_against_a_btree_map() {
    let mut r = Rng::new(seed());
    for round in 0..45 {
        let mut p: IdMap<u32> = IdMap::default();
        let mut m: BTreeMap<[u8; 16], u32> = BTreeMap::new();
        // Rounds alternate between key spaces that stay small, cross the threshold, and
        // grow well past it.
        let space = [8, SMALL_MAX as u64 + 8, 4 * SMALL_MAX as u64][round % 3];
        let mut was_tree = false;
        for step in 0..3000u32 {
            let key = StreamId::new(r.below(space), r.below(2)).to_be_bytes();
            // Inserts win early, removals later: every round fills and drains.
            let grow = if step < 1500 { 60 } else { 25 };
            match r.below(100) {
                x if x < grow => assert_eq!(p.insert(&key, step), m.insert(key, step), "insert {key:?}"),
                x if x < grow + 10 => {
                    let want = if m.contains_key(&key) { Err(step) } else { Ok(()) };
                    assert_eq!(p.try_insert(&key, step), want, "try_insert {key:?}");
                    m.entry(key).or_insert(step);
                }
                x if x < grow + 15 => {
                    if let Some(v) = p.get_mut(&key) {
                        *v += 1;
                    }
                    if let Some(v) = m.get_mut(&key) {
                        *v += 1;
                    }
                }
                _ => assert_eq!(p.remove(&key), m.remove(&key), "remove {key:?}"),
            }
            // A key that is not 16 bytes is never there.
            assert_eq!(p.get(&key[..15]), None);
            assert_eq!(p.get(&key), m.get(&key));
            assert_eq!(p.len(), m.len());
            assert_eq!(p.is_empty(), m.is_empty());
            if m.len() > SMALL_MAX || was_tree {
                assert!(p.is_tree(), "len {}", m.len());
            } else {
                assert!(!p.is_tree(), "len {}", m.len());
            }
            was_tree = p.is_tree();
            if step % 50 == 0 {
                let all: Vec<(Vec<u8>, u32)> = m.iter().map(|(k, &x)| (k.to_vec(), x)).collect();
                assert_eq!(entries(&p, None), all);
                let s = StreamId::new(r.below(space + 2), r.below(3));
                let from: Vec<(Vec<u8>, u32)> = m.range(s.to_be_bytes()..).map(|(k, &x)| (k.to_vec(), x)).collect();
                assert_eq!(entries(&p, Some(s)), from, "from {s:?}");
                assert_eq!(p.edge_with(true, |k, &x| (k.to_vec(), x)), all.first().cloned());
                assert_eq!(p.edge_with(false, |k, &x| (k.to_vec(), x)), all.last().cloned());
                p.for_each_value_mut(|v| *v = v.wrapping_mul(3));
                for v in m.values_mut() {
                    *v = v.wrapping_mul(3);
                }
                assert_eq!(entries(&p.clone(), None).len(), m.len());
            }
        }
    }
}

#[test]
fn own_pel_first_key_takes_room_for_one() {
    let mut p = OwnPel::default();
    assert_eq!(p.mem_bytes(), 0);
    assert_eq!(p.insert(&StreamId::new(1, 1).to_be_bytes(), ()), None);
    assert_eq!(p.mem_bytes(), 16);
    assert_eq!(p.insert(&StreamId::new(1, 1).to_be_bytes(), ()), Some(()));
    assert_eq!(p.mem_bytes(), 16);
}

fn consumer(name: &[u8], seen_time: i64) -> Consumer {
    Consumer { name: name.into(), seen_time, active_time: -1, pel: OwnPel::default() }
}

/// A roster against a model (name -> (slot, payload)): the same names, slots kept while a
/// value lives and reused once freed, name order from every walk, the index's form, and
/// its own check.
#[test]
fn roster_against_a_btree_map() {
    let mut r = Rng::new(seed());
    for round in 0..30 {
        let mut ro: Roster<Consumer> = Roster::default();
        let mut m: BTreeMap<Vec<u8>, (u32, i64)> = BTreeMap::new();
        let mut freed: Vec<u32> = Vec::new();
        let space = [6, SMALL_MAX as u64 + 6, 3 * SMALL_MAX as u64][round % 3];
        let mut was_tree = false;
        for step in 0..2000i64 {
            // Names of different lengths sharing prefixes: "c1", "c12", "c123", ...
            let name = format!("c{}", r.below(space)).into_bytes();
            let insert = r.below(100) < if step < 1000 { 70 } else { 30 };
            if insert {
                match ro.try_insert(consumer(&name, step)) {
                    Err(c) => {
                        assert!(m.contains_key(&name), "refused {name:?}");
                        assert_eq!(c.seen_time, step);
                    }
                    Ok(slot) => {
                        assert!(!m.contains_key(&name), "added {name:?} twice");
                        // A freed slot is reused before a new one is made.
                        match freed.pop() {
                            Some(f) => assert_eq!(slot, f),
                            None => assert_eq!(slot as usize, m.len()),
                        }
                        m.insert(name.clone(), (slot, step));
                    }
                }
            } else {
                let got = ro.remove(&name).map(|(s, c)| (s, c.seen_time));
                assert_eq!(got, m.remove(&name), "remove {name:?}");
                if let Some((s, _)) = got {
                    freed.push(s);
                }
            }
            assert_eq!(ro.len(), m.len());
            assert_eq!(ro.is_empty(), m.is_empty());
            assert_eq!(ro.is_tree(), was_tree || m.len() > SMALL_MAX, "len {}", m.len());
            was_tree = ro.is_tree();
            let probe = format!("c{}", r.below(space)).into_bytes();
            let want = m.get(&probe).copied();
            assert_eq!(ro.find(&probe), want.map(|w| w.0), "find {probe:?}");
            assert_eq!(ro.get(&probe).map(|c| c.seen_time), want.map(|w| w.1), "get {probe:?}");
            if let Some((s, c)) = ro.get_mut_indexed(&probe) {
                c.seen_time += 1;
                let w = m.get_mut(&probe).expect("in the model");
                assert_eq!(s, w.0);
                w.1 += 1;
            }
            if step % 50 == 0 {
                ro.check().expect("roster check");
                let have: Vec<(Vec<u8>, u32, i64)> = ro.iter().map(|(s, c)| (c.name.to_vec(), s, c.seen_time)).collect();
                let want: Vec<(Vec<u8>, u32, i64)> = m.iter().map(|(k, &(s, t))| (k.clone(), s, t)).collect();
                assert_eq!(have, want);
                let mut by_slot: Vec<u32> = ro
                    .values_mut_indexed()
                    .map(|(s, c)| {
                        assert_eq!(ro_slot_name(&m, s), Some(&c.name[..]));
                        s
                    })
                    .collect();
                by_slot.sort_unstable();
                assert_eq!(by_slot.len(), m.len());
                assert_eq!(ro.values().count(), m.len());
            }
        }
    }
}

fn ro_slot_name(m: &BTreeMap<Vec<u8>, (u32, i64)>, slot: u32) -> Option<&[u8]> {
    m.iter().find(|(_, &(s, _))| s == slot).map(|(k, _)| &k[..])
}

/// The first value of a roster costs its slot: room for one, not four, and no index. A
/// second value makes the index of both, in name order, whichever slot the first is in.
#[test]
fn a_roster_of_one_holds_one_slot() {
    let one = std::mem::size_of::<Consumer>();
    let mut ro: Roster<Consumer> = Roster::default();
    assert_eq!(ro.mem_bytes(), 0);
    assert_eq!(ro.try_insert(consumer(b"c", 0)).ok(), Some(0));
    assert_eq!((ro.len(), ro.mem_bytes(), ro.find(b"c"), ro.find(b"d")), (1, one, Some(0), None));
    assert!(ro.try_insert(consumer(b"c", 1)).is_err(), "a name taken");
    assert_eq!(ro.check(), Ok(()));
    for (first, second) in [(&b"b"[..], &b"a"[..]), (b"a", b"b")] {
        let mut ro: Roster<Consumer> = Roster::default();
        ro.try_insert(consumer(first, 0)).map_err(|_| "taken").expect("new name");
        assert_eq!(ro.try_insert(consumer(second, 0)).ok(), Some(1));
        assert_eq!((ro.len(), ro.mem_bytes()), (2, 2 * 4 + 2 * one));
        let names: Vec<&[u8]> = ro.iter().map(|(_, c)| &c.name[..]).collect();
        assert_eq!(names, [&b"a"[..], b"b"]);
        assert_eq!(ro.check(), Ok(()));
    }
    // Emptied and filled again: the one slot, still no index; a second value after the first
    // left makes an index of one.
    assert_eq!(ro.remove(b"c").map(|(s, _)| s), Some(0));
    assert_eq!((ro.len(), ro.iter().count(), ro.find(b"c")), (0, 0, None));
    assert_eq!(ro.check(), Ok(()));
    assert_eq!(ro.try_insert(consumer(b"e", 0)).ok(), Some(0));
    assert_eq!((ro.len(), ro.mem_bytes(), ro.find(b"e")), (1, one, Some(0)));
    assert_eq!(ro.remove(b"e").map(|(s, _)| s), Some(0));
    assert_eq!(ro.try_insert(consumer(b"f", 0)).ok(), Some(0));
    assert_eq!(ro.try_insert(consumer(b"g", 0)).ok(), Some(1));
    assert_eq!(ro.remove(b"f").map(|(s, _)| s), Some(0));
    assert_eq!((ro.len(), ro.find(b"g"), ro.find(b"f")), (1, Some(1), None));
    assert_eq!(ro.check(), Ok(()));
}

/// A roster's check finds an index that names the wrong slot.
#[test]
fn a_roster_check_finds_a_wrong_index() {
    let mut ro: Roster<Consumer> = Roster::default();
    for n in [&b"a"[..], b"b", b"c"] {
        ro.try_insert(consumer(n, 0)).map_err(|_| "taken").expect("new name");
    }
    assert_eq!(ro.check(), Ok(()));
    ro.swap_index_for_test(0, 2);
    assert_eq!(ro.check(), Err("name index out of order"));
}
