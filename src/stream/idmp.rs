//! Idempotent production (Redis 8.6, REDIS8.md §5): the per-stream map of
//! producer ID -> idempotent IDs (iids) -> the stream ID each was recorded with.
//!
//! ```text
//!   Idmp { duration_s, max_entries, iids_added, iids_duplicates }
//!    └── producers (BTreeMap, pid order: RDB, AOF rewrite and digest walk it)
//!         ├── "p1" ──> Producer { map: iid -> id (lookup), order: [(iid, id) ...] (insertion order) }
//!         └── "p2" ──> ...                                    head = oldest: evicted / expired first
//! ```
//!
//! A stream that never used IDMP has no `Idmp` (the `Stream` field is `None` until the
//! first record or XS.CFGSET): plain streams pay one pointer.
//!
//! Expiry here is the mechanism only ([`Idmp::expire`]: pop list heads whose stream ID's
//! ms is at or below a cutoff, bounded work, resumable by pid); *when* it runs, and
//! that it runs only on the primary and is propagated, is the command layer's business
//! (src/commands/idmp.rs, src/ffi/idmp_timer.rs).
//!
//! Architecture invariant: pure Rust, no module API, no unsafe.

#![forbid(unsafe_code)]

use super::StreamId;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, OnceLock};

/// The iid hash tables' hasher: one-shot XXH3-64 per written slice, seeded once per
/// process at random (std's RandomState), so that the buckets of attacker-chosen iids
/// cannot be predicted from outside. Cheaper than std's SipHash on the lookup every
/// IDMP add does (measured in docs/redis8.md).
#[derive(Clone, Copy, Debug)]
pub struct IidHasher(u64);

impl Default for IidHasher {
    fn default() -> Self {
        static SEED: OnceLock<u64> = OnceLock::new();
        IidHasher(*SEED.get_or_init(|| std::collections::hash_map::RandomState::new().build_hasher().finish()))
    }
}

impl BuildHasher for IidHasher {
    type Hasher = IidHashState;
    fn build_hasher(&self) -> IidHashState {
        IidHashState(self.0)
    }
}

/// The running state of [`IidHasher`].
pub struct IidHashState(u64);

impl Hasher for IidHashState {
    fn write(&mut self, b: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(b, self.0);
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// An iid, shared by a producer's hash table and its insertion list (one allocation).
type Iid = Arc<[u8]>;

/// Range and default of the idempotency window, in seconds (stream-idmp-duration).
pub const DURATION_S_MIN: i64 = 1;
pub const DURATION_S_MAX: i64 = 86_400;
pub const DURATION_S_DEFAULT: i64 = 100;
/// Range and default of the iids kept per producer (stream-idmp-maxsize).
pub const MAX_ENTRIES_MIN: i64 = 1;
pub const MAX_ENTRIES_MAX: i64 = 10_000;
pub const MAX_ENTRIES_DEFAULT: i64 = 100;
/// (duration s, max entries) of a stream created under the default configs.
pub const DEFAULT_WINDOW: (u32, u32) = (DURATION_S_DEFAULT as u32, MAX_ENTRIES_DEFAULT as u32);

/// A field-value pair up to this size (with its 8-byte length) is hashed from the stack.
const AUTO_PAIR_INLINE_BYTES: usize = 240;

/// Length of an IDMPAUTO iid: the 16 bytes of an XXH128_hash_t (low64, high64).
pub const AUTO_IID_BYTES: usize = 16;

/// The two reference counts in front of an iid's bytes.
const IID_OVERHEAD: usize = 2 * std::mem::size_of::<usize>();

/// One producer's recorded iids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Producer {
    /// iid -> stream ID, for the dedup lookup.
    map: HashMap<Iid, StreamId, IidHasher>,
    /// The same pairs in insertion order (head = oldest).
    order: VecDeque<(Iid, StreamId)>,
    /// Bytes of the iids (with their reference counts), for MEMORY USAGE.
    iid_bytes: usize,
}

impl Producer {
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The pairs in insertion order.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], StreamId)> {
        self.order.iter().map(|(k, v)| (&k[..], *v))
    }

    pub fn get(&self, iid: &[u8]) -> Option<StreamId> {
        self.map.get(iid).copied()
    }

    fn pop_front(&mut self) -> Option<StreamId> {
        let (k, id) = self.order.pop_front()?;
        self.map.remove(&k);
        self.iid_bytes = self.iid_bytes.saturating_sub(IID_OVERHEAD + k.len());
        Some(id)
    }

    fn push(&mut self, iid: &[u8], id: StreamId) {
        let k: Iid = Arc::from(iid);
        self.map.insert(k.clone(), id);
        self.order.push_back((k, id));
        self.iid_bytes += IID_OVERHEAD + iid.len();
    }

    /// The ms of the oldest entry's stream ID.
    fn head_ms(&self) -> Option<u64> {
        self.order.front().map(|(_, id)| id.ms)
    }

    fn mem_bytes(&self) -> usize {
        let pair = std::mem::size_of::<(Iid, StreamId)>();
        // Hash table: slots of one pair plus a control byte, at 8/7 load.
        self.iid_bytes + self.order.capacity() * pair + self.map.capacity() * (pair + 1) * 8 / 7
    }
}

/// The idempotency state of a stream (stream.h: idmp_*, iids_added, iids_duplicates).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Idmp {
    /// Seconds an iid is kept after its entry's ID time (1..86400).
    pub duration_s: u32,
    /// iids per producer (1..10000); the oldest goes when a record exceeds it.
    pub max_entries: u32,
    producers: BTreeMap<Box<[u8]>, Producer>,
    /// iids recorded over the stream's life (XADD IDMP / IDMPAUTO, XIDMPRECORD).
    pub iids_added: u64,
    /// XADDs answered as duplicates over the stream's life.
    pub iids_duplicates: u64,
    /// Sum of the producers' sizes (XINFO iids-tracked).
    tracked: usize,
    /// The expiry index holds this stream for this due time or earlier (0: not known
    /// to be indexed). Kept by the command layer so that an IDMP add registers with the
    /// index only when its due time is earlier (src/jobs/idmp.rs). Not persisted.
    pub indexed_due_ms: u64,
}

/// What [`Idmp::record`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// A new mapping (iids_added counted, eviction done).
    New,
    /// The same mapping was there already: nothing changed.
    Same,
    /// The iid is mapped to another ID: nothing changed.
    Conflict(StreamId),
}

/// What one [`Idmp::expire`] call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expired {
    /// iids removed.
    pub removed: u64,
    /// The producer to resume from (inclusive) when the work limit stopped the walk;
    /// None when every producer from the start point was done.
    pub resume_from: Option<Vec<u8>>,
}

impl Idmp {
    /// A new state with the given window (the configs at stream creation).
    pub fn new(duration_s: u32, max_entries: u32) -> Self {
        Idmp { duration_s, max_entries, producers: BTreeMap::new(), iids_added: 0, iids_duplicates: 0, tracked: 0, indexed_due_ms: 0 }
    }

    /// XINFO pids-tracked.
    pub fn pids_tracked(&self) -> usize {
        self.producers.len()
    }

    /// XINFO iids-tracked.
    pub fn iids_tracked(&self) -> usize {
        self.tracked
    }

    /// As a stream that never used IDMP: the default window, no producers, zero
    /// counters (digests and rewrites treat it as absent).
    pub fn is_default(&self) -> bool {
        (self.duration_s, self.max_entries) == DEFAULT_WINDOW && self.producers.is_empty() && self.iids_added == 0 && self.iids_duplicates == 0
    }

    pub fn has_producer(&self, pid: &[u8]) -> bool {
        self.producers.contains_key(pid)
    }

    /// The producers in pid order.
    pub fn producers(&self) -> impl Iterator<Item = (&[u8], &Producer)> {
        self.producers.iter().map(|(k, v)| (&k[..], v))
    }

    /// The dedup lookup: the ID `iid` was recorded with under `pid`. Age is not
    /// checked (an expired iid dedups until expiry reaches it, as the built-in).
    pub fn lookup(&self, pid: &[u8], iid: &[u8]) -> Option<StreamId> {
        self.producers.get(pid)?.get(iid)
    }

    /// Records `pid`/`iid` -> `id`, then evicts the producer's oldest iids beyond
    /// `max_entries`. A conflicting or identical mapping changes nothing.
    pub fn record(&mut self, pid: &[u8], iid: &[u8], id: StreamId) -> Recorded {
        if let Some(p) = self.producers.get_mut(pid) {
            match p.get(iid) {
                Some(old) if old == id => return Recorded::Same,
                Some(old) => return Recorded::Conflict(old),
                None => {}
            }
            p.push(iid, id);
            self.tracked += 1;
            while p.len() > self.max_entries as usize {
                if p.pop_front().is_none() {
                    break;
                }
                self.tracked -= 1;
            }
        } else {
            let mut p = Producer::default();
            p.push(iid, id);
            self.producers.insert(pid.into(), p);
            self.tracked += 1;
        }
        self.iids_added = self.iids_added.wrapping_add(1);
        Recorded::New
    }

    /// XCFGSET: sets the window; any value that changes clears every producer
    /// (counters kept). Returns whether anything changed.
    pub fn configure(&mut self, duration_s: Option<u32>, max_entries: Option<u32>) -> bool {
        let mut changed = false;
        if let Some(d) = duration_s.filter(|&d| d != self.duration_s) {
            self.duration_s = d;
            changed = true;
        }
        if let Some(m) = max_entries.filter(|&m| m != self.max_entries) {
            self.max_entries = m;
            changed = true;
        }
        if changed {
            self.producers.clear();
            self.tracked = 0;
        }
        changed
    }

    /// The cutoff for `now_ms`: iids whose ID ms is at or below it are expired
    /// (`ms <= now - duration*1000`); None while the window reaches before the epoch.
    pub fn cutoff_ms(&self, now_ms: u64) -> Option<u64> {
        now_ms.checked_sub(u64::from(self.duration_s) * 1000)
    }

    /// When the oldest head becomes expired: min over producers of head ms +
    /// duration (ms), or None without producers. Walks every producer: called by the
    /// expiry pass after its bounded work, on one stream.
    pub fn due_ms(&self) -> Option<u64> {
        let win = u64::from(self.duration_s) * 1000;
        self.producers.values().filter_map(Producer::head_ms).min().map(|ms| ms.saturating_add(win))
    }

    /// Pops, per producer in pid order from `from` on (inclusive; from the first when
    /// None), list heads whose ID ms is <= `cutoff_ms`, and deletes producers left
    /// empty. Work (producers visited + iids removed) stops at `work_max` (at least
    /// 2, so that every call removes an iid or passes a producer: a walk resumed again
    /// and again always ends); the result says where to resume. Deterministic: the same state and
    /// arguments remove the same iids (replicas and AOF replay run it with the
    /// primary's arguments).
    pub fn expire(&mut self, cutoff_ms: u64, from: Option<&[u8]>, work_max: u64) -> Expired {
        let limit = work_max.max(2);
        let mut out = Expired::default();
        let mut work = 0u64;
        let mut emptied: Vec<Box<[u8]>> = Vec::new();
        let range = match from {
            Some(a) => self.producers.range_mut::<[u8], _>((std::ops::Bound::Included(a), std::ops::Bound::Unbounded)),
            None => self.producers.range_mut::<[u8], _>(..),
        };
        'walk: for (pid, p) in range {
            if work >= limit {
                out.resume_from = Some(pid.to_vec());
                break;
            }
            work += 1;
            while p.head_ms().is_some_and(|ms| ms <= cutoff_ms) {
                if work >= limit {
                    out.resume_from = Some(pid.to_vec());
                    break 'walk;
                }
                p.pop_front();
                self.tracked -= 1;
                out.removed += 1;
                work += 1;
            }
            if p.is_empty() {
                emptied.push(pid.clone());
            }
        }
        for pid in emptied {
            self.producers.remove(&pid);
        }
        out
    }

    /// Bytes used (MEMORY USAGE).
    pub fn mem_bytes(&self) -> usize {
        let node = std::mem::size_of::<(Box<[u8]>, Producer)>();
        std::mem::size_of::<Idmp>() + self.producers.iter().map(|(k, p)| node + k.len() + p.mem_bytes()).sum::<usize>()
    }

    /// Consistency (the loaders' validator): producers non-empty, within max_entries,
    /// map and list agreeing, the tracked count right.
    pub fn check(&self) -> Result<(), &'static str> {
        if !(DURATION_S_MIN..=DURATION_S_MAX).contains(&i64::from(self.duration_s)) {
            return Err("IDMP duration out of range");
        }
        if !(MAX_ENTRIES_MIN..=MAX_ENTRIES_MAX).contains(&i64::from(self.max_entries)) {
            return Err("IDMP max entries out of range");
        }
        let mut total = 0usize;
        for (pid, p) in &self.producers {
            if pid.is_empty() {
                return Err("empty producer ID");
            }
            if p.is_empty() || p.len() > self.max_entries as usize {
                return Err("producer size out of range");
            }
            if p.map.len() != p.order.len() {
                return Err("duplicate iid in a producer");
            }
            for (k, id) in &p.order {
                if k.is_empty() {
                    return Err("empty iid");
                }
                if p.map.get(k) != Some(id) {
                    return Err("iid map and list disagree");
                }
            }
            total += p.len();
        }
        if total != self.tracked {
            return Err("iid count disagrees");
        }
        Ok(())
    }

    /// Loading: appends `iid` -> `id` at the producer's tail without eviction or
    /// counting. False if the iid is already there (the payload is refused).
    pub fn load_entry(&mut self, pid: &[u8], iid: &[u8], id: StreamId) -> bool {
        if let Some(p) = self.producers.get(pid) {
            if p.map.contains_key(iid) {
                return false;
            }
        }
        let p = self.producers.entry(pid.into()).or_default();
        if p.map.contains_key(iid) {
            return false;
        }
        p.push(iid, id);
        self.tracked += 1;
        true
    }
}

/// The IDMPAUTO iid of `fields` (`f1 v1 f2 v2 ...`), bit-exact with the built-in's
/// createIdempotencyHash: per pair XXH3-128 of `field || field_len as 8-byte
/// little-endian || value`, combined order-independently (sums and xors of both
/// halves), returned as the in-memory XXH128_hash_t (low64 then high64, little-endian).
pub fn auto_iid(fields: &[&[u8]]) -> [u8; AUTO_IID_BYTES] {
    let (mut sum_lo, mut sum_hi, mut xor_lo, mut xor_hi) = (0u64, 0u64, 0u64, 0u64);
    // A pair that fits is hashed in one shot from a stack buffer (XXH3's short-input
    // paths: a third of the streaming hasher's instructions on 5 small pairs); a longer
    // one through the streaming hasher. The same bytes give the same hash either way.
    let mut buf = [0u8; AUTO_PAIR_INLINE_BYTES];
    let mut h: Option<xxhash_rust::xxh3::Xxh3> = None;
    for pair in fields.chunks_exact(2) {
        let (f, v) = (pair[0], pair[1]);
        let len = f.len() + 8 + v.len();
        let d = if len <= AUTO_PAIR_INLINE_BYTES {
            buf[..f.len()].copy_from_slice(f);
            buf[f.len()..f.len() + 8].copy_from_slice(&(f.len() as u64).to_le_bytes());
            buf[f.len() + 8..len].copy_from_slice(v);
            xxhash_rust::xxh3::xxh3_128(&buf[..len])
        } else {
            let h = h.get_or_insert_with(xxhash_rust::xxh3::Xxh3::new);
            h.reset();
            h.update(f);
            h.update(&(f.len() as u64).to_le_bytes());
            h.update(v);
            h.digest128()
        };
        let (lo, hi) = (d as u64, (d >> 64) as u64);
        sum_lo = sum_lo.wrapping_add(lo);
        sum_hi = sum_hi.wrapping_add(hi);
        xor_lo ^= lo;
        xor_hi ^= hi;
    }
    let lo = sum_lo ^ xor_hi.rotate_left(1);
    let hi = sum_hi ^ xor_lo.rotate_left(1);
    let mut out = [0u8; AUTO_IID_BYTES];
    out[..8].copy_from_slice(&lo.to_le_bytes());
    out[8..].copy_from_slice(&hi.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Vectors computed from the reference definition (§5.3) with the C xxHash 0.8.1
    /// library (`XXH3_128bits` through ctypes, the pair buffer built by hand), not with
    /// this crate.
    #[test]
    fn auto_iid_vectors() {
        assert_eq!(hex(&auto_iid(&[b"f1", b"v1"])), "f2fa386b08dd909f5a92c99bc7da545d");
        assert_eq!(hex(&auto_iid(&[b"a", b"1", b"b", b"2"])), "c5b282935f77a53123e1ff7a302a11f2");
        assert_eq!(hex(&auto_iid(&[b"", b""])), "1a9f7ebbaea1d61d30b6b8daa3e38da7");
        let long = [b'x'; 100];
        assert_eq!(hex(&auto_iid(&[b"field", &long, b"k", b""])), "a6779ad2394872a585e978ca4cfc780a");
        // Pairs on both sides of the stack-buffer limit (streaming hasher above it): the
        // one-shot and the streaming hash of the same bytes agree.
        for n in [200usize, 226, 227, 228, 300, 5000] {
            let v = vec![b'y'; n];
            let mut whole = b"field".to_vec();
            whole.extend_from_slice(&5u64.to_le_bytes());
            whole.extend_from_slice(&v);
            let d = xxhash_rust::xxh3::xxh3_128(&whole);
            let (lo, hi) = (d as u64, (d >> 64) as u64);
            let mut want = [0u8; 16];
            want[..8].copy_from_slice(&(lo ^ hi.rotate_left(1)).to_le_bytes());
            want[8..].copy_from_slice(&(hi ^ lo.rotate_left(1)).to_le_bytes());
            assert_eq!(auto_iid(&[b"field", &v]), want, "value of {n} bytes");
        }
        // XXH3_128("") itself (the published value 99aa06d3014798d86001c324468d497f).
        let d = xxhash_rust::xxh3::xxh3_128(b"");
        assert_eq!(format!("{d:032x}"), "99aa06d3014798d86001c324468d497f");
    }

    #[test]
    fn auto_iid_order_independent_but_names_matter() {
        let a = auto_iid(&[b"a", b"1", b"b", b"2", b"c", b"3"]);
        assert_eq!(a, auto_iid(&[b"c", b"3", b"a", b"1", b"b", b"2"]));
        assert_eq!(a, auto_iid(&[b"b", b"2", b"c", b"3", b"a", b"1"]));
        assert_ne!(auto_iid(&[b"f1", b"v"]), auto_iid(&[b"f2", b"v"]));
        // The length separates field from value.
        assert_ne!(auto_iid(&[b"ab", b"c"]), auto_iid(&[b"a", b"bc"]));
        // A pair twice cancels in the xor but not in the sum.
        assert_ne!(auto_iid(&[b"a", b"1", b"a", b"1"]), auto_iid(&[]));
    }

    #[test]
    fn record_dedup_evict_configure() {
        let mut m = Idmp::new(100, 3);
        let id = |n| StreamId::new(n, 0);
        assert_eq!(m.record(b"p", b"a", id(1)), Recorded::New);
        assert_eq!(m.record(b"p", b"a", id(1)), Recorded::Same);
        assert_eq!(m.record(b"p", b"a", id(2)), Recorded::Conflict(id(1)));
        assert_eq!(m.record(b"q", b"a", id(2)), Recorded::New);
        for (n, k) in [(3, b"b"), (4, b"c"), (5, b"d")] {
            m.record(b"p", k, id(n));
        }
        assert_eq!(m.lookup(b"p", b"a"), None, "oldest evicted");
        assert_eq!(m.lookup(b"p", b"b"), Some(id(3)));
        assert_eq!((m.pids_tracked(), m.iids_tracked(), m.iids_added), (2, 4, 5));
        assert!(!m.configure(Some(100), Some(3)));
        assert_eq!(m.iids_tracked(), 4);
        assert!(m.configure(Some(100), Some(4)));
        assert_eq!((m.pids_tracked(), m.iids_tracked(), m.iids_added), (0, 0, 5));
        m.check().unwrap();
    }

    #[test]
    fn expire_by_id_ms_bounded_and_resumable() {
        let mut m = Idmp::new(1, 100);
        for (i, pid) in [b"a", b"b", b"c"].iter().enumerate() {
            for n in 0..5u64 {
                m.record(*pid, &n.to_be_bytes(), StreamId::new(1000 * (i as u64 + 1) + n, 0));
            }
        }
        assert_eq!(m.cutoff_ms(999), None);
        assert_eq!(m.due_ms(), Some(2000));
        // cutoff 2002: a loses all 5, b loses 3; limit 4 = producer a + 3 iids.
        let e = m.expire(2002, None, 4);
        assert_eq!(e, Expired { removed: 3, resume_from: Some(b"a".to_vec()) });
        let e = m.expire(2002, Some(b"a"), 100);
        assert_eq!(e, Expired { removed: 5, resume_from: None });
        let e = m.expire(2002, None, 100);
        assert_eq!(e, Expired { removed: 0, resume_from: None });
        assert_eq!((m.pids_tracked(), m.iids_tracked()), (2, 7));
        m.check().unwrap();
    }

    /// Random operations against a plain model: a Vec of (pid, iid, id) per producer.
    #[test]
    fn model() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _round in 0..50 {
            let max = 1 + rnd(6) as u32;
            let dur = 1 + rnd(3) as u32;
            let mut m = Idmp::new(dur, max);
            let mut model: BTreeMap<Vec<u8>, Vec<(Vec<u8>, StreamId)>> = BTreeMap::new();
            let (mut added, mut ms) = (0u64, 1000u64);
            for _ in 0..400 {
                ms += rnd(300);
                let pid = vec![b'p', rnd(4) as u8];
                let iid = vec![rnd(12) as u8];
                match rnd(10) {
                    0..=5 => {
                        let want = model.get(&pid).and_then(|v| v.iter().find(|e| e.0 == iid)).map(|e| e.1);
                        assert_eq!(m.lookup(&pid, &iid), want);
                        if want.is_none() {
                            let id = StreamId::new(ms, 0);
                            assert_eq!(m.record(&pid, &iid, id), Recorded::New);
                            added += 1;
                            let v = model.entry(pid).or_default();
                            v.push((iid, id));
                            while v.len() > max as usize {
                                v.remove(0);
                            }
                        }
                    }
                    6..=8 => {
                        let cutoff = ms.saturating_sub(u64::from(dur) * 1000);
                        let work = 1 + rnd(8);
                        let mut from: Option<Vec<u8>> = None;
                        loop {
                            let e = m.expire(cutoff, from.as_deref(), work);
                            from = e.resume_from;
                            if from.is_none() {
                                break;
                            }
                        }
                        for v in model.values_mut() {
                            while v.first().is_some_and(|e| e.1.ms <= cutoff) {
                                v.remove(0);
                            }
                        }
                        model.retain(|_, v| !v.is_empty());
                    }
                    _ => {
                        let nd = 1 + rnd(3) as u32;
                        if m.configure(Some(nd), None) {
                            model.clear();
                        }
                    }
                }
                m.check().unwrap();
                let got: BTreeMap<Vec<u8>, Vec<(Vec<u8>, StreamId)>> =
                    m.producers().map(|(k, p)| (k.to_vec(), p.entries().map(|(i, id)| (i.to_vec(), id)).collect())).collect();
                assert_eq!(got, model);
                assert_eq!(m.iids_added, added);
                assert_eq!(m.iids_tracked(), model.values().map(Vec::len).sum::<usize>());
            }
        }
    }
}
