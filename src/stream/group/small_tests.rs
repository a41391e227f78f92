//! The small-or-tree indexes (small.rs) against `BTreeMap` models, on random operations that
//! cross [`SMALL_MAX`]: the same keys and values, in the same order, from every start, and the
//! form each should be in (a vector until it outgrows SMALL_MAX, a tree from then on).

use super::small::{IdMap, Names, OwnPel, SMALL_MAX};
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

fn consumer(name: &[u8]) -> Consumer {
    Consumer { name: name.into(), seen_time: 0, active_time: -1, pel: OwnPel::default() }
}

#[test]
fn names_against_a_btree_map() {
    let mut r = Rng::new(seed());
    for round in 0..30 {
        let mut idx = Names::default();
        let mut slots: Vec<Option<Consumer>> = Vec::new();
        let mut free: Vec<u32> = Vec::new();
        let mut m: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        let space = [6, SMALL_MAX as u64 + 6, 3 * SMALL_MAX as u64][round % 3];
        let mut was_tree = false;
        for step in 0..2000 {
            // Names of different lengths sharing prefixes: "c1", "c12", "c123", ...
            let name = format!("c{}", r.below(space)).into_bytes();
            let insert = r.below(100) < if step < 1000 { 70 } else { 30 };
            if insert {
                if m.contains_key(&name) {
                    assert!(idx.get(&name, &slots).is_some());
                    continue;
                }
                let slot = match free.pop() {
                    Some(s) => {
                        slots[s as usize] = Some(consumer(&name));
                        s
                    }
                    None => {
                        slots.push(Some(consumer(&name)));
                        (slots.len() - 1) as u32
                    }
                };
                idx.insert(&name, slot, &slots);
                m.insert(name.clone(), slot);
            } else {
                let got = idx.remove(&name, &slots);
                assert_eq!(got, m.remove(&name), "remove {name:?}");
                if let Some(s) = got {
                    slots[s as usize] = None;
                    free.push(s);
                }
            }
            assert_eq!(idx.len(), m.len());
            assert_eq!(idx.is_tree(), was_tree || m.len() > SMALL_MAX, "len {}", m.len());
            was_tree = idx.is_tree();
            let probe = format!("c{}", r.below(space)).into_bytes();
            assert_eq!(idx.get(&probe, &slots), m.get(&probe).copied(), "get {probe:?}");
            if step % 50 == 0 {
                let mut it = idx.iter(&slots);
                let mut have = Vec::new();
                while let Some((k, s)) = it.next() {
                    have.push((k.to_vec(), s));
                }
                let want: Vec<(Vec<u8>, u32)> = m.iter().map(|(k, &s)| (k.clone(), s)).collect();
                assert_eq!(have, want);
            }
        }
    }
}
