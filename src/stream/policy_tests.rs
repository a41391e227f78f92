//! Model test of the reference policies (REDIS8.md §3): random XADD (with trims under a
//! policy), XREADGROUP `>`, XACK, XDEL, XDELEX, XACKDEL, XTRIM, group create / destroy /
//! SETID on a [`Stream`], against a model of the entries (a `BTreeSet`) and of each group's
//! last ID and PEL (a `BTreeMap` id -> consumer). Replies of XDELEX / XACKDEL and trim counts
//! are compared op by op, the whole state after every op, over many seeds.

use super::tests::{seed, Rng};
use super::*;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Default)]
struct MGroup {
    last_id: StreamId,
    /// id -> consumer name
    pel: BTreeMap<StreamId, String>,
}

#[derive(Default)]
struct M {
    entries: BTreeSet<StreamId>,
    groups: BTreeMap<String, MGroup>,
}

impl M {
    fn referenced(&self, id: StreamId) -> bool {
        if self.groups.is_empty() {
            return false;
        }
        self.groups.values().any(|g| g.last_id < id || g.pel.contains_key(&id))
    }

    fn unref(&mut self, id: StreamId) {
        for g in self.groups.values_mut() {
            g.pel.remove(&id);
        }
    }

    fn delex(&mut self, ids: &[StreamId], p: RefPolicy) -> Vec<i64> {
        let mut out = Vec::new();
        for &id in ids {
            if p == RefPolicy::Acked && self.referenced(id) {
                out.push(2);
                continue;
            }
            if p == RefPolicy::DelRef {
                self.unref(id);
            }
            out.push(if self.entries.remove(&id) { 1 } else { -1 });
        }
        out
    }

    fn ackdel(&mut self, g: &str, ids: &[StreamId], p: RefPolicy) -> Option<Vec<i64>> {
        self.groups.get(g)?;
        let mut out = Vec::new();
        for &id in ids {
            let pending = self.groups.get_mut(g).is_some_and(|g| g.pel.remove(&id).is_some());
            if !pending {
                out.push(-1);
                continue;
            }
            if p == RefPolicy::Acked && self.referenced(id) {
                out.push(2);
                continue;
            }
            if p == RefPolicy::DelRef {
                self.unref(id);
            }
            self.entries.remove(&id);
            out.push(1);
        }
        Some(out)
    }

    /// An exact trim as it works on a single node (every entry of the stream in one walk).
    fn trim_exact(&mut self, strategy: TrimStrategy, p: RefPolicy) -> u64 {
        let mut deleted = 0;
        let ids: Vec<StreamId> = self.entries.iter().copied().collect();
        for id in ids {
            let stop = match strategy {
                TrimStrategy::MaxLen(n) => self.entries.len() as u64 <= n,
                TrimStrategy::MinId(min) => id >= min,
            };
            if stop {
                break;
            }
            match p {
                RefPolicy::KeepRef => {}
                RefPolicy::DelRef => self.unref(id),
                RefPolicy::Acked if self.referenced(id) => continue,
                RefPolicy::Acked => {}
            }
            self.entries.remove(&id);
            deleted += 1;
        }
        deleted
    }
}

fn check(s: &Stream, m: &M, what: &str) {
    let ids: Vec<StreamId> = s.range(StreamId::MIN, StreamId::MAX, false).map(|e| e.id()).collect();
    let want: Vec<StreamId> = m.entries.iter().copied().collect();
    assert_eq!(ids, want, "{what}: entries");
    assert_eq!(s.len(), want.len() as u64, "{what}: length");
    let first = want.first().copied().unwrap_or(StreamId::MIN);
    assert_eq!(s.first_id, first, "{what}: first_id");
    assert_eq!(s.group_count(), m.groups.len(), "{what}: groups");
    for (name, mg) in &m.groups {
        let g = s.group(name.as_bytes()).unwrap_or_else(|| panic!("{what}: group {name} missing"));
        assert_eq!(g.last_id, mg.last_id, "{what}: last id of {name}");
        let mut pel = Vec::new();
        let mut it = g.pel().iter();
        while let Some((k, n)) = it.next() {
            pel.push((StreamId::from_be_bytes(k).unwrap(), String::from_utf8_lossy(g.owner_name(n)).into_owned()));
        }
        let want: Vec<(StreamId, String)> = mg.pel.iter().map(|(k, v)| (*k, v.clone())).collect();
        assert_eq!(pel, want, "{what}: PEL of {name}");
        g.check().unwrap_or_else(|e| panic!("{what}: group {name}: {e}"));
    }
}

fn random_policy(r: &mut Rng) -> RefPolicy {
    match r.below(3) {
        0 => RefPolicy::KeepRef,
        1 => RefPolicy::DelRef,
        _ => RefPolicy::Acked,
    }
}

fn random_ids(r: &mut Rng, top: u64) -> Vec<StreamId> {
    (0..1 + r.below(6)).map(|_| StreamId::new(1 + r.below(top + 3), 0)).collect()
}

const GROUPS: &[&str] = &["ga", "gb", "gc"];
const CONSUMERS: &[&str] = &["c1", "c2"];

fn run_seed(seed: u64, ops: usize) {
    let mut r = Rng::new(seed);
    // One node for everything (exact ACKED trims then follow the simple model), or small nodes.
    let single = r.below(2) == 0;
    let limits = if single { NodeLimits { entries_max: 0, bytes_max: 0 } } else { NodeLimits { entries_max: 3, bytes_max: 0 } };
    let mut s = Stream::new();
    let mut m = M::default();
    let mut next_ms = 1u64;
    for op in 0..ops {
        let what = format!("seed {seed} op {op}");
        match r.below(11) {
            0 | 1 => {
                let id = StreamId::new(next_ms, 0);
                next_ms += 1;
                s.append(&[b"f", b"v"], IdSpec::Explicit(id), 0, limits).unwrap();
                m.entries.insert(id);
                if r.below(3) == 0 {
                    let p = random_policy(&mut r);
                    let strategy =
                        if r.below(2) == 0 { TrimStrategy::MaxLen(r.below(8)) } else { TrimStrategy::MinId(StreamId::new(r.below(next_ms + 1), 0)) };
                    trim_op(&mut s, &mut m, strategy, p, single, &mut r, &what);
                }
            }
            2 | 3 => {
                let g = GROUPS[r.below(3) as usize];
                let c = CONSUMERS[r.below(2) as usize];
                if m.groups.contains_key(g) {
                    let noack = r.below(4) == 0;
                    let count = r.below(4);
                    let slot = match s.group(g.as_bytes()).and_then(|x| x.find_consumer(c.as_bytes())) {
                        Some(sl) => sl,
                        None => s.group_mut(g.as_bytes()).unwrap().create_consumer(c.as_bytes(), 0).unwrap(),
                    };
                    let mg = m.groups.get_mut(g).unwrap();
                    let start = mg.last_id.next().unwrap_or(StreamId::MAX);
                    let mut got = Vec::new();
                    s.read_group_new(g.as_bytes(), slot, start, count, noack, 0, LagRules::Redis8, None, |e, _, _| {
                        got.push(e.id());
                        true
                    });
                    let want: Vec<StreamId> = m.entries.range(start..).copied().take(if count == 0 { usize::MAX } else { count as usize }).collect();
                    assert_eq!(got, want, "{what}: read");
                    if let Some(&last) = want.last() {
                        mg.last_id = last;
                    }
                    if !noack {
                        for id in want {
                            mg.pel.insert(id, c.to_string());
                        }
                    }
                }
            }
            4 => {
                let g = GROUPS[r.below(3) as usize];
                let ids = random_ids(&mut r, next_ms);
                if let Some(grp) = s.group_mut(g.as_bytes()) {
                    for &id in &ids {
                        let had = m.groups.get_mut(g).unwrap().pel.remove(&id).is_some();
                        assert_eq!(grp.ack(id), had, "{what}: ack");
                    }
                }
            }
            5 => {
                let ids = random_ids(&mut r, next_ms);
                let p = random_policy(&mut r);
                let out = s.delete_ex(&ids, p);
                assert_eq!(out.replies, m.delex(&ids, p), "{what}: XDELEX {p:?} {ids:?}");
            }
            6 | 7 => {
                let g = GROUPS[r.below(3) as usize];
                let mut ids = random_ids(&mut r, next_ms);
                // Mostly IDs that are pending somewhere.
                if let Some(mg) = m.groups.get(g) {
                    ids.extend(mg.pel.keys().take(r.below(4) as usize).copied());
                }
                let p = random_policy(&mut r);
                let out = s.ack_del(g.as_bytes(), &ids, p).map(|o| o.replies);
                assert_eq!(out, m.ackdel(g, &ids, p), "{what}: XACKDEL {g} {p:?} {ids:?}");
            }
            8 => {
                let p = random_policy(&mut r);
                let strategy =
                    if r.below(2) == 0 { TrimStrategy::MaxLen(r.below(10)) } else { TrimStrategy::MinId(StreamId::new(r.below(next_ms + 1), 0)) };
                trim_op(&mut s, &mut m, strategy, p, single, &mut r, &what);
            }
            9 => {
                let g = GROUPS[r.below(3) as usize];
                let at = StreamId::new(r.below(next_ms + 1), 0);
                match r.below(3) {
                    0 => {
                        assert_eq!(s.destroy_group(g.as_bytes()), m.groups.remove(g).is_some(), "{what}: destroy");
                    }
                    1 => {
                        let created = s.create_group(g.as_bytes(), at, ENTRIES_READ_INVALID);
                        assert_eq!(created, !m.groups.contains_key(g), "{what}: create");
                        m.groups.entry(g.to_string()).or_insert(MGroup { last_id: at, pel: BTreeMap::new() });
                    }
                    _ => {
                        if let Some(grp) = s.group_mut(g.as_bytes()) {
                            grp.last_id = at;
                            m.groups.get_mut(g).unwrap().last_id = at;
                        }
                    }
                }
            }
            _ => {
                let ids = random_ids(&mut r, next_ms);
                let n = s.delete_ids(&ids);
                let want = ids.iter().filter(|id| m.entries.remove(id)).count() as u64;
                assert_eq!(n, want, "{what}: XDEL");
            }
        }
        check(&s, &m, &what);
    }
}

/// A trim under a policy. Exact trims on one node follow the model exactly. Otherwise (nodes
/// of three, or `~`) the result depends on the node layout: the model then takes the stream's
/// result after checking what every policy guarantees: ACKED deleted no referenced entry,
/// DELREF left no PEL entry for a deleted entry, KEEPREF left every PEL alone, and MAXLEN never
/// went below its target.
fn trim_op(s: &mut Stream, m: &mut M, strategy: TrimStrategy, p: RefPolicy, single: bool, r: &mut Rng, what: &str) {
    let approx = r.below(2) == 0;
    let t = Trim { strategy, approx, limit: if approx { [0, 3, 100][r.below(3) as usize] } else { 0 } };
    let replica = s.clone();
    if single && !approx {
        let done = s.trim_with(&t, p);
        assert_eq!(done.deleted, m.trim_exact(strategy, p), "{what}: trim {t:?} {p:?}");
        check_replayed(s, replica, done, p, what);
        return;
    }
    let before = m.entries.clone();
    let done = s.trim_with(&t, p);
    check_replayed(s, replica, done, p, what);
    let n = done.deleted;
    let after: BTreeSet<StreamId> = s.range(StreamId::MIN, StreamId::MAX, false).map(|e| e.id()).collect();
    assert_eq!(before.len() - after.len(), n as usize, "{what}: trim count");
    assert!(after.is_subset(&before), "{what}: trim added entries");
    if let TrimStrategy::MaxLen(maxlen) = strategy {
        assert!(after.len() as u64 >= maxlen.min(before.len() as u64), "{what}: MAXLEN went below its target");
    }
    for id in before.difference(&after) {
        if let TrimStrategy::MinId(min) = strategy {
            assert!(*id < min, "{what}: MINID deleted {id}");
        }
        match p {
            RefPolicy::Acked => assert!(!m.referenced(*id), "{what}: ACKED deleted the referenced {id}"),
            RefPolicy::DelRef => m.unref(*id),
            RefPolicy::KeepRef => {}
        }
    }
    m.entries = after;
}

/// A DELREF / ACKED trim goes to replicas as the exact `MINID = examined_below` (or
/// `MAXLEN = 0`) trim under the same policy: on the state before, it must give the same
/// entries and PELs.
fn check_replayed(s: &Stream, mut replica: Stream, done: Trimmed, p: RefPolicy, what: &str) {
    if p == RefPolicy::KeepRef {
        return;
    }
    let strategy = match done.examined_below {
        Some(id) => TrimStrategy::MinId(id),
        None => TrimStrategy::MaxLen(0),
    };
    let again = replica.trim_with(&Trim { strategy, approx: false, limit: 0 }, p);
    assert_eq!(again.deleted, done.deleted, "{what}: replayed trim {strategy:?} {p:?}");
    let ids = |s: &Stream| s.range(StreamId::MIN, StreamId::MAX, false).map(|e| e.id()).collect::<Vec<_>>();
    assert_eq!(ids(&replica), ids(s), "{what}: replayed trim entries");
    for g in GROUPS {
        let pel = |s: &Stream| {
            s.group(g.as_bytes()).map(|g| {
                let mut v = Vec::new();
                let mut it = g.pel().iter();
                while let Some((k, _)) = it.next() {
                    v.push(k.to_vec());
                }
                v
            })
        };
        assert_eq!(pel(&replica), pel(s), "{what}: replayed trim PEL of {g}");
    }
    assert_eq!(replica.first_id, s.first_id, "{what}: replayed first id");
}

#[test]
fn policies_against_model() {
    let base = seed();
    let seeds = std::env::var("XSTREAM_POLICY_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300u64);
    for i in 0..seeds {
        run_seed(base.wrapping_add(i), 400);
    }
}

/// The [VT] trims of REDIS8.md §3.5 at the core level (nodes of two).
#[test]
fn vt_trims_in_nodes_of_two() {
    let l = NodeLimits { entries_max: 2, bytes_max: 0 };
    let setup = |read: u64, acks: &[u64]| {
        let mut s = Stream::new();
        for i in 1..=5 {
            s.append(&[b"f", b"v"], IdSpec::Explicit(StreamId::new(i, 0)), 0, l).unwrap();
        }
        s.create_group(b"g", StreamId::MIN, 0);
        let slot = s.group_mut(b"g").unwrap().create_consumer(b"c", 0).unwrap();
        s.read_group_new(b"g", slot, StreamId::new(0, 1), read, false, 0, LagRules::Redis8, None, |_, _, _| true);
        for &a in acks {
            s.group_mut(b"g").unwrap().ack(StreamId::new(a, 0));
        }
        s
    };
    let ids = |s: &Stream| s.range(StreamId::MIN, StreamId::MAX, false).map(|e| e.id().ms).collect::<Vec<_>>();
    let mut s = setup(5, &[1, 2, 4]);
    let t = Trim { strategy: TrimStrategy::MinId(StreamId::new(6, 0)), approx: true, limit: 200 };
    assert_eq!(s.trim_with(&t, RefPolicy::Acked).deleted, 3);
    assert_eq!(ids(&s), [3, 5]);
    let mut s = setup(4, &[]);
    let t = Trim { strategy: TrimStrategy::MinId(StreamId::new(5, 0)), approx: true, limit: 200 };
    assert_eq!(s.trim_with(&t, RefPolicy::DelRef).deleted, 4);
    assert_eq!(ids(&s), [5]);
    assert_eq!(s.group(b"g").unwrap().pel().len(), 0);
    // LIMIT is checked per node: a limit of 3 stops before the second node of two.
    let mut s = setup(4, &[]);
    let t = Trim { strategy: TrimStrategy::MinId(StreamId::new(5, 0)), approx: true, limit: 3 };
    assert_eq!(s.trim_with(&t, RefPolicy::DelRef).deleted, 2);
    assert_eq!(ids(&s), [3, 4, 5]);
}
