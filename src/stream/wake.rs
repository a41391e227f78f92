//! Wake-up times of blocked CLAIM readers (REDIS8.md §4.5), per (db, key).
//!
//! A reader blocked with `CLAIM min-idle` must re-run when a pending entry of one
//! of its streams becomes claimable, although nothing writes to the key then. Each
//! of its keys is registered with that time; the index keeps the earliest per key,
//! and its owner (src/ffi/timer.rs) arms ONE timer for [`WakeIndex::earliest`]
//! and signals the keys [`WakeIndex::pop_due`] returns. Entries are never removed
//! when their readers leave: a stale one costs one spurious signal when reached.
//!
//! ```text
//!   by_key: (db, key) -> due_ms          (the earliest per key)
//!   by_due: {(due_ms, db, key)}          (the same entries, in due order)
//! ```

use std::collections::{BTreeSet, HashMap};

/// A key in a database.
pub type DbKey = (i32, Vec<u8>);

#[derive(Debug, Default)]
pub struct WakeIndex {
    by_key: HashMap<DbKey, i64>,
    by_due: BTreeSet<(i64, i32, Vec<u8>)>,
}

impl WakeIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `key` of `db` to be signalled at `due_ms`, unless it already is
    /// at that time or earlier. Returns whether the entry changed.
    pub fn insert(&mut self, db: i32, key: &[u8], due_ms: i64) -> bool {
        let k = (db, key.to_vec());
        match self.by_key.get(&k) {
            Some(&old) if old <= due_ms => false,
            Some(&old) => {
                self.by_due.remove(&(old, db, k.1.clone()));
                self.by_due.insert((due_ms, db, k.1.clone()));
                self.by_key.insert(k, due_ms);
                true
            }
            None => {
                self.by_due.insert((due_ms, db, k.1.clone()));
                self.by_key.insert(k, due_ms);
                true
            }
        }
    }

    /// The earliest due time, if any.
    pub fn earliest(&self) -> Option<i64> {
        self.by_due.first().map(|(due, _, _)| *due)
    }

    /// Removes and returns the keys due at `now_ms` (due <= now), earliest first.
    pub fn pop_due(&mut self, now_ms: i64) -> Vec<DbKey> {
        self.pop_due_max(now_ms, usize::MAX)
    }

    /// [`WakeIndex::pop_due`], at most `max` keys (bounded work per timer tick).
    pub fn pop_due_max(&mut self, now_ms: i64, max: usize) -> Vec<DbKey> {
        let mut out = Vec::new();
        while let Some((due, _, _)) = self.by_due.first() {
            if *due > now_ms || out.len() >= max {
                break;
            }
            let Some((_, db, key)) = self.by_due.pop_first() else { break };
            self.by_key.remove(&(db, key.clone()));
            out.push((db, key));
        }
        out
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// SWAPDB a b: the keys of `a` are now those of `b` and back.
    pub fn swap_db(&mut self, a: i32, b: i32) {
        if a == b {
            return;
        }
        let other = |db: i32| {
            if db == a {
                b
            } else if db == b {
                a
            } else {
                db
            }
        };
        let moved: Vec<(i64, i32, Vec<u8>)> = self.by_due.iter().filter(|(_, db, _)| *db == a || *db == b).cloned().collect();
        // All out, then all in: a key present in both databases must not meet itself.
        for (due, db, key) in &moved {
            self.by_due.remove(&(*due, *db, key.clone()));
            self.by_key.remove(&(*db, key.clone()));
        }
        for (due, db, key) in moved {
            self.by_due.insert((due, other(db), key.clone()));
            self.by_key.insert((other(db), key), due);
        }
    }

    /// Forgets everything (FLUSHALL is not needed: stale entries are harmless).
    pub fn clear(&mut self) {
        self.by_key.clear();
        self.by_due.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_per_key_and_due_order() {
        let mut w = WakeIndex::new();
        assert!(w.insert(0, b"a", 100));
        assert!(!w.insert(0, b"a", 150), "a later time does not replace an earlier one");
        assert!(w.insert(0, b"a", 50));
        assert!(w.insert(1, b"a", 70), "another db is another key");
        assert!(w.insert(0, b"b", 60));
        assert_eq!(w.len(), 3);
        assert_eq!(w.earliest(), Some(50));
        assert_eq!(w.pop_due(49), Vec::<DbKey>::new());
        assert_eq!(w.pop_due(65), vec![(0, b"a".to_vec()), (0, b"b".to_vec())]);
        assert_eq!(w.earliest(), Some(70));
        // A popped key can be registered again, later than before.
        assert!(w.insert(0, b"a", 200));
        assert_eq!(w.pop_due(i64::MAX), vec![(1, b"a".to_vec()), (0, b"a".to_vec())]);
        assert!(w.is_empty() && w.earliest().is_none());
    }

    #[test]
    fn swap_db_exchanges_two_databases() {
        let mut w = WakeIndex::new();
        w.insert(0, b"a", 10);
        w.insert(1, b"a", 20);
        w.insert(1, b"b", 30);
        w.insert(2, b"c", 40);
        w.swap_db(0, 1);
        w.swap_db(3, 3);
        assert_eq!(w.len(), 4);
        assert!(!w.insert(1, b"a", 15), "db 0's a (10) is now db 1's");
        assert!(!w.insert(0, b"b", 35), "db 1's b (30) is now db 0's");
        assert_eq!(w.pop_due(i64::MAX), vec![(1, b"a".to_vec()), (0, b"a".to_vec()), (0, b"b".to_vec()), (2, b"c".to_vec())]);
    }

    /// Against a model: a map of the minimum per key.
    #[test]
    fn random_against_model() {
        let mut rng = crate::stream::tests::Rng::new(7);
        let mut w = WakeIndex::new();
        let mut model: HashMap<DbKey, i64> = HashMap::new();
        let mut now = 0i64;
        for _ in 0..20_000 {
            if rng.below(3) == 0 {
                now += rng.below(50) as i64;
                let mut got = w.pop_due(now);
                let mut want: Vec<(i64, DbKey)> = model.iter().filter(|(_, &d)| d <= now).map(|(k, &d)| (d, k.clone())).collect();
                want.sort();
                model.retain(|_, d| *d > now);
                let want: Vec<DbKey> = want.into_iter().map(|(_, k)| k).collect();
                got.sort();
                let mut want_sorted = want.clone();
                want_sorted.sort();
                assert_eq!(got, want_sorted);
            } else {
                let db = rng.below(2) as i32;
                let key = vec![b'k', rng.below(20) as u8];
                let due = now + rng.below(200) as i64;
                let changed = w.insert(db, &key, due);
                let e = model.entry((db, key)).or_insert(i64::MAX);
                assert_eq!(changed, due < *e);
                *e = (*e).min(due);
            }
            assert_eq!(w.len(), model.len());
            assert_eq!(w.earliest(), model.values().min().copied());
        }
    }
}
