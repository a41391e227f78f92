//! What a stream counts for in the module's running totals (`INFO xstream`, src/ffi/stats.rs):
//! its entries, nodes, groups, consumers and pending entries.
//!
//! Entries, nodes and groups are counters the stream keeps. Consumers and pending entries are
//! sums over the groups, kept incrementally so that a write costs O(groups it touched), not
//! O(groups) ([`Census::update`]). The groups live in a [`GroupSet`], whose only mutable
//! accessors record what they hand out:
//! - [`GroupSet::get_mut`]: the group's slab index and its contribution at that moment (a
//!   snapshot, once per group between two updates): until then a group not recorded
//!   contributes exactly what it was accounted as;
//! - [`GroupSet::remove`]: the removed group's accounted contribution (its snapshot if it was
//!   recorded, whose record goes, else what it holds);
//! - [`GroupSet::all_mut`] (every group at once), more than [`TOUCHED_MAX`] groups recorded,
//!   or any group of a stream with at most [`WALK_MAX`] groups: a flag making the next update
//!   walk every group.
//!
//! [`Census::update`] applies, for each recorded group, (current - snapshot), and forgets the
//! records. Nothing is stored per group for the sums: a slab index is reused only by a group
//! created after the removal that dropped the old group's record, and a new group contributes
//! nothing.
//!
//! Two histograms count the groups by PEL size and by lag, in log-2 buckets ([`bucket`]; the lag
//! has one more for "unknown", XINFO's nil). Each group stores the two buckets it was last
//! accounted in (`Group::hist`), and an update reports each move to the caller ([`Hist`], bucket,
//! +1 / -1), which keeps the module's totals (INFO xstream). A PEL changes only through the
//! recording accessors, so the PEL bucket is looked at for the recorded groups only. The lag
//! changes without any group being touched: with every append, trim, deletion, XSETID. When the
//! stream's metadata ([`Meta`]) changed otherwise than by appends, the update walks every group.
//! Appends are cheaper: [`Meta::lag_form`] tells, branch by branch of `Meta::lag`, which lags
//! follow appends (entries added minus a constant, or unknown for good) and which may change
//! form; a stream with more than [`WALK_MAX`] groups keeps an index of the first by the
//! entries-added count at which each crosses into its next bucket, and of the second, so an
//! append re-buckets only the groups it takes across and the few whose form may change (a queue
//! whose group keeps up: its group at every append; 1,000 groups far behind: each once per
//! doubling of its lag). Up to [`WALK_MAX`] groups, walking them all costs less than the index.

use super::group::{Group, Groups};
use super::{LagForm, LagRules, Meta, Stream};

/// Log-2 buckets: bucket 0 holds 0, bucket k (1..=64) holds [2^(k-1), 2^k).
pub const BUCKETS: usize = 65;
/// The lag histogram's extra bucket: the lag is unknown (XINFO's nil).
pub const LAG_UNKNOWN: u8 = BUCKETS as u8;
/// A group not (yet) counted in the histograms.
pub const NOT_ACCOUNTED: u8 = u8::MAX;

/// The log-2 bucket of `v`.
#[inline]
pub fn bucket(v: u64) -> u8 {
    (64 - v.leading_zeros()) as u8
}

/// The smallest value of bucket `b` (its label in INFO): 0, 1, 2, 4, 8...
pub fn bucket_floor(b: u8) -> u64 {
    match b {
        0 => 0,
        b => 1u64 << (b - 1).min(63),
    }
}

/// The histograms: groups by PEL size, groups by lag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hist {
    Pel = 0,
    Lag = 1,
}

/// Receives the histogram moves of an update: (histogram, bucket, +1 or -1).
pub type HistMoves<'a> = &'a mut dyn FnMut(Hist, u8, i64);

/// The histograms being kept: since when, under which lag rules, and where the moves go. An
/// epoch is never 0 and never reused: a stream accounted in another epoch (the histograms were
/// off, or switched off and on since) is accounted afresh, as if just loaded.
pub struct HistCtx<'a> {
    pub epoch: u32,
    pub rules: LagRules,
    pub emit: HistMoves<'a>,
}

/// A group's buckets now, and when appends alone change its lag bucket: Some(the entries-added
/// count at which it moves; u64::MAX never), or None when any append may.
fn buckets_of(g: &Group, meta: &Meta) -> ([u8; 2], Option<u64>) {
    let pel = bucket(g.pel().len() as u64);
    match meta.lag_form(g) {
        LagForm::Behind(r) => {
            let lag = (meta.entries_added as i64).wrapping_sub(r);
            let b = bucket(lag.max(0) as u64);
            // Bucket b ends below 2^b: the lag reaches it after 2^b - lag appends.
            let cross = if b >= 63 { u64::MAX } else { (r as u64).wrapping_add(1u64 << b) };
            ([pel, b], Some(cross))
        }
        LagForm::Unknown => ([pel, LAG_UNKNOWN], Some(u64::MAX)),
        LagForm::Volatile => {
            let lag = match meta.lag(g) {
                None => LAG_UNKNOWN,
                Some(l) => bucket(l.max(0) as u64),
            };
            ([pel, lag], None)
        }
    }
}

/// Moves `g` to the buckets `now`, reporting the moves; `fresh`: whatever it stores is not
/// accounted (a loaded or copied stream entering the totals).
fn rebucket(g: &mut Group, now: [u8; 2], fresh: bool, emit: HistMoves) {
    for (i, h) in [Hist::Pel, Hist::Lag].into_iter().enumerate() {
        let was = if fresh { NOT_ACCOUNTED } else { g.hist()[i] };
        if was != now[i] {
            if was != NOT_ACCOUNTED {
                emit(h, was, -1);
            }
            emit(h, now[i], 1);
            let mut hist = g.hist();
            hist[i] = now[i];
            g.set_hist(hist);
        }
    }
}

/// Reports the removal of buckets a group was accounted in.
fn unbucket(hist: [u8; 2], emit: HistMoves) {
    for (i, h) in [Hist::Pel, Hist::Lag].into_iter().enumerate() {
        if hist[i] != NOT_ACCOUNTED {
            emit(h, hist[i], -1);
        }
    }
}

/// The metadata the lags were last brought up to date with, and for a stream with more than
/// [`WALK_MAX`] groups the index that spares walking them all at each append.
#[derive(Clone, Debug)]
struct LagMark {
    meta: Meta,
    index: Option<Box<LagIndex>>,
}

/// Groups by when appends alone move them to another lag bucket: (entries-added count, slab
/// index) of the groups whose lag is counted, and the slab indexes of those an append may
/// move any way, looked at after every append.
#[derive(Clone, Debug, Default)]
struct LagIndex {
    cross: std::collections::BTreeSet<(u64, u32)>,
    uncounted: std::collections::BTreeSet<u32>,
    /// By slab index, the key each group is filed under ([`UNFILED`] past the end). Here,
    /// not in the group: only a stream with more than [`WALK_MAX`] groups has an index, and
    /// 8 bytes in every group took it to a bigger size class.
    keys: Vec<u64>,
}

/// The key of a group in neither set of the index (not filed yet, or its lag never moves by
/// appends: unknown, or in the last bucket).
const UNFILED: u64 = u64::MAX;
/// The key of a group in `LagIndex::uncounted`.
const UNCOUNTED: u64 = u64::MAX - 1;

impl LagIndex {
    /// The key group `index` is filed under.
    fn key(&self, index: u32) -> u64 {
        self.keys.get(index as usize).copied().unwrap_or(UNFILED)
    }

    /// Takes group `index` out of the set it is filed in.
    fn remove(&mut self, index: u32) {
        match self.key(index) {
            UNFILED => {}
            UNCOUNTED => {
                self.uncounted.remove(&index);
            }
            c => {
                self.cross.remove(&(c, index));
            }
        }
        if let Some(k) = self.keys.get_mut(index as usize) {
            *k = UNFILED;
        }
    }

    /// Files group `index` (in no set) under `key`.
    fn file(&mut self, index: u32, key: u64) {
        match key {
            UNFILED => return,
            UNCOUNTED => {
                self.uncounted.insert(index);
            }
            c => {
                self.cross.insert((c, index));
            }
        }
        let at = index as usize;
        if self.keys.len() <= at {
            // Sized by a slab index, which exists.
            self.keys.resize(at + 1, UNFILED);
        }
        self.keys[at] = key;
    }
}

/// Up to this many groups, any change of the metadata walks them all (cheaper than the index).
pub const WALK_MAX: usize = 4;

/// Brings group `g` (slab `index`) to its buckets now, reporting the moves, and files it in
/// `ix` under its new key, unless it is filed there under that key already.
fn place(g: &mut Group, index: u32, meta: &Meta, fresh: bool, emit: HistMoves, ix: Option<&mut LagIndex>) {
    let (b, cross) = buckets_of(g, meta);
    rebucket(g, b, fresh, emit);
    let key = match cross {
        Some(c) if c < UNCOUNTED => c,
        Some(_) => UNFILED,
        None => UNCOUNTED,
    };
    if let Some(ix) = ix {
        if key != ix.key(index) {
            ix.remove(index);
            ix.file(index, key);
        }
    }
}

/// A stream's contribution to the totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    pub entries: u64,
    pub nodes: u64,
    pub groups: u64,
    pub consumers: u64,
    pub pending: u64,
}

/// A group's contribution to its stream's consumers and pending entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    pub consumers: u64,
    pub pending: u64,
}

impl Counted {
    #[inline]
    fn of(g: &Group) -> Counted {
        Counted { consumers: g.consumer_count() as u64, pending: g.pel().len() as u64 }
    }

    fn add(&mut self, o: Counted) {
        // Wrapping: partial sums may cross zero, the result is the true (non-negative) sum.
        self.consumers = self.consumers.wrapping_add(o.consumers);
        self.pending = self.pending.wrapping_add(o.pending);
    }

    fn sub(&mut self, o: Counted) {
        self.consumers = self.consumers.wrapping_sub(o.consumers);
        self.pending = self.pending.wrapping_sub(o.pending);
    }
}

/// Most groups recorded between two updates; past it the next update walks every group (a
/// command touching that many groups is O(groups) anyway), and the record stays small: the
/// look-ups in it are linear.
pub const TOUCHED_MAX: usize = 64;

/// The consumer groups of a stream, by name, with the record of what changed since the last
/// [`Census::update`]. Nothing is allocated before the first group.
#[derive(Clone, Debug, Default)]
pub struct GroupSet(Option<Box<Tracked>>);

#[derive(Clone, Debug, Default)]
struct Tracked {
    groups: Groups,
    /// The groups handed out mutably and those removed since the last update.
    changes: Changes,
    /// Every group may have changed (no group is then recorded as touched).
    all: bool,
    /// The last walk of the lags (None: none yet). Boxed: 80 bytes that would put every
    /// stream's first group in a bigger size class (376 bytes -> 304).
    lag: Option<Box<LagMark>>,
    /// The histograms' epoch the groups' buckets were accounted in (0: none).
    epoch: u32,
}

/// The groups removed since the last update.
#[derive(Clone, Debug, Default)]
struct Gone {
    /// Their accounted contributions.
    counted: Counted,
    /// The histogram buckets they were accounted in.
    hist: Vec<[u8; 2]>,
}

/// Records a touched group (slab index, snapshot), or marks every group as possibly changed
/// (`all`): past [`TOUCHED_MAX`] records, or when the stream has `few` groups (at most
/// [`WALK_MAX`]), whose walk at the next update costs no more than the record and saves
/// the record's allocation (32 bytes per stream, most streams having one group). The record
/// starts with room for one (most commands touch one group), not Vec's four.
fn record(changes: &mut Changes, all: &mut bool, few: bool, t: (u32, Counted)) {
    if few || changes.len() >= TOUCHED_MAX {
        *all = true;
        changes.clear_touched();
        return;
    }
    let v = &mut changes.0.get_or_insert_with(Default::default).touched;
    if v.capacity() == 0 {
        v.reserve_exact(1);
    }
    v.push(t);
}

/// The record of the groups touched and removed since the last update: boxed, as only a
/// stream with more than [`WALK_MAX`] groups records touched ones ([`record`]) and groups
/// are seldom removed. Inline, each part took every stream's record of its groups to a
/// bigger size class; in two boxes, the two pointers took it from 64 bytes to 80 (the box is
/// 64 bytes, where the touched groups' own was 32: a stream with more than four groups pays
/// the difference, once). Kept once the touched groups' record is made (with its room), like
/// the vector it holds.
#[derive(Clone, Debug, Default)]
struct Changes(Option<Box<Changed>>);

#[derive(Clone, Debug, Default)]
struct Changed {
    /// (slab index, contribution when first handed out) of the groups handed out mutably.
    touched: Vec<(u32, Counted)>,
    /// What the groups removed were accounted as (None: none removed).
    gone: Option<Gone>,
}

impl Changes {
    /// The touched groups' records.
    fn as_slice(&self) -> &[(u32, Counted)] {
        self.0.as_deref().map_or(&[], |c| &c.touched[..])
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Forgets the touched groups (keeping the record's room).
    fn clear_touched(&mut self) {
        if let Some(c) = self.0.as_deref_mut() {
            c.touched.clear();
        }
    }

    /// Forgets the touched groups and releases their record's room.
    fn release_touched(&mut self) {
        if let Some(c) = self.0.as_deref_mut() {
            c.touched = Vec::new();
        }
        self.drop_if_unused();
    }

    /// Takes out the record of group `index`, if any; returns its snapshot.
    fn take(&mut self, index: u32) -> Option<Counted> {
        let v = &mut self.0.as_deref_mut()?.touched;
        let at = v.iter().position(|&(i, _)| i == index)?;
        Some(v.swap_remove(at).1)
    }

    /// The removed groups' record, made if there is none.
    fn gone_mut(&mut self) -> &mut Gone {
        self.0.get_or_insert_with(Default::default).gone.get_or_insert_with(Default::default)
    }

    fn gone(&self) -> Option<&Gone> {
        self.0.as_deref()?.gone.as_ref()
    }

    fn gone_opt_mut(&mut self) -> Option<&mut Gone> {
        self.0.as_deref_mut()?.gone.as_mut()
    }

    /// Takes the removed groups' record out.
    fn take_gone(&mut self) -> Option<Gone> {
        let gone = self.0.as_deref_mut()?.gone.take();
        self.drop_if_unused();
        gone
    }

    /// Releases the box when it holds no room for touched groups and no removed groups.
    fn drop_if_unused(&mut self) {
        if self.0.as_deref().is_some_and(|c| c.touched.capacity() == 0 && c.gone.is_none()) {
            self.0 = None;
        }
    }
}

impl GroupSet {
    /// The groups (None before the first one).
    #[inline]
    pub fn get(&self) -> Option<&Groups> {
        self.0.as_deref().map(|t| &t.groups)
    }

    pub fn len(&self) -> usize {
        self.get().map_or(0, |g| g.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The group called `name`, recorded as possibly changed.
    #[inline]
    pub fn get_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        let Tracked { groups, changes, all, .. } = self.0.as_deref_mut()?;
        let few = groups.len() <= WALK_MAX;
        let (index, g) = groups.get_mut_indexed(name)?;
        if !*all && !changes.as_slice().iter().any(|&(i, _)| i == index) {
            record(changes, all, few, (index, Counted::of(g)));
        }
        Some(g)
    }

    /// Every group at once (for updates that do not add or remove groups), all recorded as
    /// possibly changed: the next update walks every group.
    pub fn all_mut(&mut self) -> Option<&mut Groups> {
        let t = self.0.as_deref_mut()?;
        t.all = true;
        t.changes.clear_touched();
        Some(&mut t.groups)
    }

    /// Adds a group unless the name exists; whether it was added.
    pub fn insert(&mut self, g: Group) -> bool {
        let t = self.0.get_or_insert_with(Default::default);
        // (Only empty groups are created; a loaded one is accounted by its stream's birth.)
        let fresh = Counted::of(&g) == Counted::default();
        let Ok(index) = t.groups.try_insert(g) else { return false };
        if !fresh {
            t.all = true;
            t.changes.clear_touched();
        } else if !t.all {
            // Nothing in the sums, but buckets to enter: recorded with a zero snapshot.
            record(&mut t.changes, &mut t.all, t.groups.len() <= WALK_MAX, (index, Counted::default()));
        }
        true
    }

    /// Removes the group called `name`; its accounted contribution leaves the totals at the
    /// next update.
    pub fn remove(&mut self, name: &[u8]) -> Option<Group> {
        let t = self.0.as_deref_mut()?;
        let (index, g) = t.groups.remove(name)?;
        if let Some(ix) = t.lag.as_mut().and_then(|m| m.index.as_deref_mut()) {
            ix.remove(index);
        }
        if !t.all {
            let accounted = t.changes.take(index).unwrap_or_else(|| Counted::of(&g));
            t.changes.gone_mut().counted.add(accounted);
        }
        if g.hist() != [NOT_ACCOUNTED; 2] {
            t.changes.gone_mut().hist.push(g.hist());
        }
        Some(g)
    }

    /// Removes every group (the next update walks the groups: none).
    pub fn clear(&mut self) {
        if let Some(t) = self.0.as_deref_mut() {
            if t.groups.values().any(|g| g.hist() != [NOT_ACCOUNTED; 2]) {
                let gone = t.changes.gone_mut();
                gone.hist.extend(t.groups.values().map(Group::hist).filter(|&h| h != [NOT_ACCOUNTED; 2]));
            }
            t.lag = None;
            t.groups = Groups::default();
            t.changes.release_touched();
            t.all = true;
        }
    }

    /// Bytes of the table (the tree and its slab; the groups' own heap not included).
    pub fn mem_bytes(&self) -> usize {
        self.get().map_or(0, |g| g.mem_bytes())
    }

    /// The consumers and pending entries now, given what they were as last accounted
    /// (`was`), and forgets the records: O(groups recorded), or O(groups) after
    /// [`GroupSet::all_mut`] or when `full`. With `hist`, the histogram moves (module doc):
    /// every group afresh when the stream was accounted in another epoch (or `full`: a stream
    /// entering the totals); without, the histograms' records are dropped.
    fn settle(&mut self, was: Counted, full: bool, hist: Option<(u32, Meta, HistMoves)>) -> Counted {
        let Some(t) = self.0.as_deref_mut() else { return Counted::default() };
        let fresh = full || hist.as_ref().is_some_and(|h| h.0 != t.epoch);
        if fresh || hist.is_none() {
            if let Some(g) = t.changes.gone_opt_mut() {
                g.hist.clear();
            }
        }
        let walk_all = full || t.all;
        let now = if walk_all {
            let mut now = Counted::default();
            for g in t.groups.values() {
                now.add(Counted::of(g));
            }
            now
        } else {
            let mut now = was;
            if let Some(g) = t.changes.gone() {
                now.sub(g.counted);
            }
            for &(index, snapshot) in t.changes.as_slice() {
                if let Some(g) = t.groups.slot(index) {
                    now.sub(snapshot);
                    now.add(Counted::of(g));
                }
            }
            now
        };
        // The lags. Unchanged metadata: the recorded groups only (their PEL or read counter may
        // have changed). Appends only: with the index, also the groups they take to their
        // bucket's end and those whose lag is not counted; without it (few groups), every group.
        // Anything else: every group, and the index built again.
        let Some((epoch, meta, emit)) = hist else {
            t.lag = None;
            t.epoch = 0;
            t.all = false;
            t.changes.clear_touched();
            t.changes.take_gone();
            return now;
        };
        for h in t.changes.take_gone().map(|g| g.hist).unwrap_or_default() {
            unbucket(h, emit);
        }
        t.epoch = epoch;
        // (appends, whether the metadata changed): (0, true) is a greater last ID alone (XSETID),
        // which moves only the lags an append could move another way.
        let appended = match &t.lag {
            Some(m) if !(fresh || t.all) && m.meta == meta => Some((0, false)),
            Some(m) if !(fresh || t.all) => meta.appended_since(&m.meta).map(|k| (k, true)),
            _ => None,
        };
        let indexed = t.groups.len() > WALK_MAX;
        let mut mark = t.lag.take().filter(|m| indexed == m.index.is_some());
        match (appended, mark.as_mut().and_then(|m| m.index.as_deref_mut())) {
            (Some((_, changed)), ix) if !changed || ix.is_some() => {
                let mut ix = ix;
                for &(index, _) in t.changes.as_slice() {
                    if let Some(g) = t.groups.slot_mut(index) {
                        place(g, index, &meta, false, emit, ix.as_deref_mut());
                    }
                }
                if let Some(ix) = ix.filter(|_| changed) {
                    let mut moved: Vec<u32> = Vec::new();
                    while let Some(&(c, index)) = ix.cross.first() {
                        if c > meta.entries_added {
                            break;
                        }
                        ix.cross.pop_first();
                        moved.push(index);
                    }
                    moved.extend(std::mem::take(&mut ix.uncounted));
                    for index in moved {
                        // Taken out of its set above.
                        if let Some(k) = ix.keys.get_mut(index as usize) {
                            *k = UNFILED;
                        }
                        if let Some(g) = t.groups.slot_mut(index) {
                            place(g, index, &meta, false, emit, Some(ix));
                        }
                    }
                }
                if let Some(m) = mark.as_mut() {
                    m.meta = meta;
                }
                t.lag = mark;
            }
            _ => {
                let mut ix = indexed.then(Box::<LagIndex>::default);
                for (index, g) in t.groups.values_mut_indexed() {
                    place(g, index, &meta, fresh, emit, ix.as_deref_mut());
                }
                let m = LagMark { meta, index: ix };
                // The box of the previous mark, if any, is reused (this runs after commands).
                t.lag = Some(match mark {
                    Some(mut b) => {
                        *b = m;
                        b
                    }
                    None => Box::new(m),
                });
            }
        }
        t.all = false;
        t.changes.clear_touched();
        t.changes.take_gone();
        now
    }

    /// Reports the removal of every bucket the groups are accounted in in `epoch` (the stream
    /// is freed).
    fn unaccount(&self, epoch: u32, emit: HistMoves) {
        let Some(t) = self.0.as_deref().filter(|t| t.epoch == epoch && epoch != 0) else { return };
        for &h in t.changes.gone().iter().flat_map(|g| g.hist.iter()) {
            unbucket(h, emit);
        }
        for g in t.groups.values() {
            unbucket(g.hist(), emit);
        }
    }
}

impl Census {
    /// The census computed from scratch, O(groups) (read only: the oracle of the tests and
    /// of debug checks).
    pub fn of(s: &Stream) -> Census {
        let mut c = Census { entries: s.length, nodes: s.rax_keys() as u64, groups: s.group_count() as u64, ..Census::default() };
        // The value slab, not a walk of the tree: the order does not matter here.
        if let Some(gs) = s.groups.get() {
            for g in gs.values() {
                c.consumers += g.consumer_count() as u64;
                c.pending += g.pel().len() as u64;
            }
        }
        c
    }

    /// A stream enters the totals (loaded, copied, created): its census from scratch, which
    /// becomes what it is accounted as, every group's contribution with it, and with `hist`
    /// every group's buckets (whatever a copied group stored is ignored). O(groups).
    pub fn reset(s: &mut Stream, hist: Option<HistCtx>) -> Census {
        let now = Census::compute(s, true, hist);
        s.accounted = now;
        now
    }

    /// After a write: (what the stream was accounted as, what it counts now), the latter
    /// becoming what it is accounted as; with `hist`, the groups' bucket moves. O(groups
    /// touched since the last update); the lags: module doc.
    pub fn update(s: &mut Stream, hist: Option<HistCtx>) -> (Census, Census) {
        let was = s.accounted;
        let now = Census::compute(s, false, hist);
        s.accounted = now;
        (was, now)
    }

    /// A stream leaves the totals (freed): every bucket its groups are accounted in during
    /// `epoch` goes to `emit` as a removal (none from another epoch). O(groups).
    pub fn unaccount(s: &Stream, epoch: u32, emit: HistMoves) {
        s.groups.unaccount(epoch, emit);
    }

    fn compute(s: &mut Stream, full: bool, hist: Option<HistCtx>) -> Census {
        let cp = if s.groups.0.is_some() {
            let was = Counted { consumers: s.accounted.consumers, pending: s.accounted.pending };
            let hist = hist.map(|h| (h.epoch, s.meta(h.rules), h.emit));
            s.groups.settle(was, full, hist)
        } else {
            Counted::default()
        };
        Census { entries: s.length, nodes: s.rax_keys() as u64, groups: s.group_count() as u64, consumers: cp.consumers, pending: cp.pending }
    }

    /// The histograms from scratch (the oracle of the tests): (histogram, bucket) -> groups.
    pub fn histograms_of(s: &Stream, rules: LagRules) -> std::collections::BTreeMap<(Hist, u8), i64> {
        let mut h = std::collections::BTreeMap::new();
        let meta = s.meta(rules);
        if let Some(gs) = s.groups.get() {
            for g in gs.values() {
                let (b, _) = buckets_of(g, &meta);
                *h.entry((Hist::Pel, b[0])).or_insert(0) += 1;
                *h.entry((Hist::Lag, b[1])).or_insert(0) += 1;
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::policy::RefPolicy;
    use crate::stream::queue::Reason;
    use crate::stream::tests::{seed, Rng};
    use crate::stream::{ClaimCount, DeliveryTime, IdSpec, LagRules, NackCount, NodeLimits, StreamId, Trim, TrimStrategy};

    #[test]
    fn counts_entries_nodes_groups_consumers_and_pending() {
        let mut s = Stream::new();
        let limits = NodeLimits { entries_max: 2, bytes_max: 4096 };
        for i in 1..=5u64 {
            s.append(&[b"f", b"v"], IdSpec::Explicit(StreamId { ms: i, seq: 0 }), 0, limits).unwrap();
        }
        assert_eq!(Census::of(&s), Census { entries: 5, nodes: 3, ..Census::default() });
        assert!(s.create_group(b"g", StreamId::default(), 0));
        let g = s.group_mut(b"g").unwrap();
        let a = g.create_consumer(b"a", 0).unwrap();
        g.create_consumer(b"b", 0).unwrap();
        g.deliver_new(StreamId { ms: 1, seq: 0 }, a, 0);
        g.deliver_new(StreamId { ms: 2, seq: 0 }, a, 0);
        assert_eq!(Census::of(&s), Census { entries: 5, nodes: 3, groups: 1, consumers: 2, pending: 2 });
    }

    /// The module's histogram totals as the tests keep them: (histogram, bucket) -> groups.
    type Totals = std::collections::BTreeMap<(Hist, u8), i64>;

    fn mover(t: &mut Totals) -> impl FnMut(Hist, u8, i64) + '_ {
        move |h, b, d| *t.entry((h, b)).or_insert(0) += d
    }

    /// Census::update with the histograms of `epoch` kept in `tot` (0: histograms off).
    fn update(s: &mut Stream, tot: &mut Totals, epoch: u32, rules: LagRules) -> (Census, Census) {
        let mut m = mover(tot);
        Census::update(s, (epoch != 0).then_some(HistCtx { epoch, rules, emit: &mut m }))
    }

    fn reset(s: &mut Stream, tot: &mut Totals, epoch: u32, rules: LagRules) -> Census {
        let mut m = mover(tot);
        Census::reset(s, (epoch != 0).then_some(HistCtx { epoch, rules, emit: &mut m }))
    }

    fn nonzero(t: &Totals) -> Totals {
        t.iter().filter(|(_, &v)| v != 0).map(|(k, v)| (*k, *v)).collect()
    }

    /// After every operation, the incremental census (what `stats::account` applies) equals
    /// the census from scratch; every group's accounted contribution is exact; and the
    /// histogram totals kept from the reported moves equal the histograms from scratch.
    fn check(s: &mut Stream, tot: &mut Totals, epoch: u32, rules: LagRules, what: &str) {
        let (_, now) = update(s, tot, epoch, rules);
        assert_eq!(now, Census::of(s), "{what}");
        assert_eq!(s.accounted, now, "{what}");
        if epoch != 0 {
            assert_eq!(nonzero(tot), Census::histograms_of(s, rules), "{what}: histograms");
        }
        let meta = s.meta(rules);
        for g in s.groups.get().into_iter().flat_map(|gs| gs.values()) {
            let lag = meta.lag(g);
            match meta.lag_form(g) {
                LagForm::Behind(r) => assert_eq!(lag, Some((meta.entries_added as i64).wrapping_sub(r)), "{what}"),
                LagForm::Unknown => assert_eq!(lag, None, "{what}"),
                LagForm::Volatile => {}
            }
        }
    }

    const GROUPS: &[&[u8]] = &[b"g0", b"g1", b"g2", b"g3", b"g4", b"g5", b"g6", b"g7"];
    const CONSUMERS: &[&[u8]] = &[b"c0", b"c1", b"c2"];

    fn run_seed(seed: u64, ops: usize) {
        let mut r = Rng::new(seed);
        let limits = NodeLimits { entries_max: 1 + r.below(4) as i64, bytes_max: 4096 };
        let rules = [LagRules::Redis7, LagRules::Valkey81, LagRules::Redis8][r.below(3) as usize];
        let mut tot = Totals::new();
        let mut epoch = 1u32;
        let mut s = Stream::new();
        reset(&mut s, &mut tot, epoch, rules);
        let mut next = 1u64;
        for op in 0..ops {
            let what = format!("seed {seed} op {op}");
            let g = GROUPS[r.below(GROUPS.len() as u64) as usize];
            let c = CONSUMERS[r.below(CONSUMERS.len() as u64) as usize];
            let id = StreamId { ms: 1 + r.below(next), seq: 0 };
            let now = op as i64;
            // Several operations between two updates now and then (a command touching many groups).
            let batch = if r.below(4) == 0 { 1 + r.below(6) } else { 1 };
            for _ in 0..batch {
                match r.below(20) {
                    0..=2 => {
                        let nid = StreamId { ms: next, seq: 0 };
                        next += 1;
                        s.append(&[b"f", b"v"], IdSpec::Explicit(nid), 0, limits).unwrap();
                        if r.below(4) == 0 {
                            s.record_delay(nid, now + r.below(5) as i64);
                        }
                    }
                    3 => {
                        // At the start, at the last ID or anywhere, the read counter known or not.
                        let (at, read) = match r.below(3) {
                            0 => (StreamId::default(), 0),
                            1 => (s.last_id, crate::stream::group::ENTRIES_READ_INVALID),
                            _ => (id, crate::stream::group::ENTRIES_READ_INVALID),
                        };
                        s.create_group(g, at, read);
                    }
                    4 => {
                        s.destroy_group(g);
                    }
                    5 => {
                        if let Some(gr) = s.group_mut(g) {
                            gr.create_consumer(c, now);
                        }
                    }
                    6 => {
                        if let Some(gr) = s.group_mut(g) {
                            gr.delete_consumer(c);
                        }
                    }
                    7 | 8 => {
                        // A `>` read of a few entries.
                        let slot = match s.group_mut(g) {
                            Some(gr) => gr.lookup_consumer(c, Some(now)).or_else(|| gr.create_consumer(c, now)),
                            None => None,
                        };
                        if let Some(slot) = slot {
                            let start = s.group(g).map_or(StreamId::default(), |gr| gr.last_id);
                            let mut skipped = Vec::new();
                            let n = 1 + r.below(3);
                            s.read_group_new(g, slot, start, n, r.below(5) == 0, now, LagRules::Redis7, Some(&mut skipped), |_, _, _| true);
                        }
                    }
                    9 | 10 => {
                        if let Some(gr) = s.group_mut(g) {
                            gr.ack(id);
                        }
                    }
                    11 => {
                        let count = if r.below(2) == 0 { ClaimCount::Increment } else { ClaimCount::Keep };
                        let create = r.below(2) == 0;
                        if let Some(gr) = s.group_mut(g) {
                            if let Some(slot) = gr.find_consumer(c) {
                                gr.claim(id, slot, DeliveryTime::Now(now), count, create);
                            }
                        }
                    }
                    12 => {
                        let rule = [NackCount::Silent, NackCount::Fail, NackCount::Fatal][r.below(3) as usize];
                        let create = r.below(2) == 0;
                        if let Some(gr) = s.group_mut(g) {
                            gr.nack_entry(id, rule, create);
                        }
                    }
                    13 => {
                        if let Some(gr) = s.group_mut(g) {
                            gr.dead_letter(id, Reason::Manual);
                        }
                    }
                    14 => {
                        let policy = [RefPolicy::KeepRef, RefPolicy::DelRef, RefPolicy::Acked][r.below(3) as usize];
                        let strategy = if r.below(2) == 0 { TrimStrategy::MaxLen(r.below(6)) } else { TrimStrategy::MinId(id) };
                        s.trim_with(&Trim { strategy, approx: r.below(2) == 0, limit: 0 }, policy);
                    }
                    15 => {
                        let policy = [RefPolicy::KeepRef, RefPolicy::DelRef, RefPolicy::Acked][r.below(3) as usize];
                        s.delete_ex(&[id, StreamId { ms: 1 + r.below(next), seq: 0 }], policy);
                    }
                    16 => {
                        let policy = [RefPolicy::KeepRef, RefPolicy::DelRef, RefPolicy::Acked][r.below(3) as usize];
                        s.ack_del(g, &[id], policy);
                    }
                    17 if r.below(3) == 0 => {
                        // XSETID: a greater last ID, entries added, the greatest deleted ID.
                        let top = StreamId { ms: next + r.below(3), seq: 0 };
                        next = top.ms + 1;
                        s.last_id = top;
                        if r.below(2) == 0 {
                            s.entries_added += r.below(3);
                        }
                        if r.below(3) == 0 {
                            s.max_deleted_entry_id = id;
                        }
                    }
                    17 => {
                        // XSETID's clamp of the read counters (every group).
                        if let Some(gs) = s.groups_all_mut() {
                            for gr in gs.values_mut() {
                                gr.entries_read = gr.entries_read.min(1);
                            }
                        }
                    }
                    18 => {
                        s.pass_over_delayed(g, now, LagRules::Redis7);
                        s.schedule_existing(g, id);
                    }
                    _ => {
                        if r.below(10) == 0 {
                            s.clear_groups();
                        } else if r.below(2) == 0 {
                            s.delete(id);
                            s.forget_delay(id);
                        } else if let Some(gr) = s.group_mut(g) {
                            // History reads: deliveries of pending entries.
                            if let Some(slot) = gr.find_consumer(c) {
                                s.read_group_history(g, slot, StreamId::default(), 2, now, false, |_, _| true);
                            }
                        }
                    }
                }
            }
            check(&mut s, &mut tot, epoch, rules, &what);
            // A copy (COPY) is accounted from scratch and goes on alike; freed, it leaves
            // nothing in the histograms.
            if r.below(50) == 0 && epoch != 0 {
                let mut t = s.clone();
                let mut tt = Totals::new();
                reset(&mut t, &mut tt, epoch, rules);
                assert_eq!(t.accounted, Census::of(&t), "{what}: copy");
                assert_eq!(nonzero(&tt), Census::histograms_of(&t, rules), "{what}: copy");
                Census::unaccount(&t, epoch, &mut mover(&mut tt));
                assert_eq!(nonzero(&tt), Totals::new(), "{what}: copy freed");
            }
            // The histograms switched off (the totals dropped), or on again: a new epoch, the
            // totals from zero, every stream accounted again (xstream.group-stats).
            if r.below(40) == 0 {
                tot.clear();
                if epoch == 0 {
                    epoch = 2 + r.below(1000) as u32;
                    update(&mut s, &mut tot, epoch, rules);
                } else {
                    epoch = 0;
                }
            }
        }
        // Freed after changes nobody accounted: exactly what was accounted leaves.
        if let Some(g) = s.group_mut(GROUPS[0]) {
            g.create_consumer(b"late", 0);
        }
        s.destroy_group(GROUPS[1]);
        Census::unaccount(&s, epoch, &mut mover(&mut tot));
        assert_eq!(nonzero(&tot), Totals::new(), "seed {seed}: freed");
        // Freed under another epoch than its own: nothing of it is taken away.
        Census::unaccount(&s, epoch.wrapping_add(1), &mut |_, _, _| panic!("seed {seed}: removed from another epoch"));
    }

    #[test]
    fn incremental_census_equals_the_census_from_scratch() {
        let base = seed();
        for i in 0..200 {
            run_seed(base.wrapping_add(i), 300);
        }
    }

    #[test]
    fn many_groups_touched_one_at_a_time_and_all_at_once() {
        let mut tot = Totals::new();
        let rules = LagRules::Redis7;
        let mut s = Stream::new();
        reset(&mut s, &mut tot, 1, rules);
        for i in 0..500u32 {
            assert!(s.create_group(format!("g{i}").as_bytes(), StreamId::default(), 0));
        }
        // More touched groups than the record holds: the update walks every group.
        for i in 0..500u32 {
            let g = s.group_mut(format!("g{i}").as_bytes()).unwrap();
            g.create_consumer(b"c", 0).unwrap();
        }
        assert_eq!(update(&mut s, &mut tot, 1, rules).1, Census::of(&s));
        assert_eq!(s.accounted.consumers, 500);
        for i in (0..500u32).step_by(7) {
            assert!(s.destroy_group(format!("g{i}").as_bytes()));
        }
        assert!(s.create_group(b"new", StreamId::default(), 0));
        s.group_mut(b"new").unwrap().create_consumer(b"x", 0).unwrap();
        assert_eq!(update(&mut s, &mut tot, 1, rules).1, Census::of(&s));
        // Within one update: a group changed then removed, its slab slot reused by a new group
        // that is changed too.
        s.group_mut(b"g1").unwrap().create_consumer(b"d", 0).unwrap();
        assert!(s.destroy_group(b"g1"));
        assert!(s.create_group(b"reuse", StreamId::default(), 0));
        s.group_mut(b"reuse").unwrap().create_consumer(b"y", 0).unwrap();
        s.group_mut(b"g2").unwrap().delete_consumer(b"c").unwrap();
        let (was, now) = update(&mut s, &mut tot, 1, rules);
        assert_eq!(now, Census::of(&s));
        assert_eq!(now.consumers, was.consumers - 1);
        assert_eq!(nonzero(&tot), Census::histograms_of(&s, rules));
    }

    /// A stream's first group allocates the record of its groups, in a size class of 64
    /// bytes (was 384 with the lag mark inline, 320 with the tree's buffers inline, 256 with
    /// the groups in a radix tree, 160 and 112 with the removed groups' and the touched
    /// groups' records inline, 96 with the roster's name index a vector, 80 with those two
    /// records in boxes of their own), and a slot for the group itself, in 160 (256 with the
    /// time list's renumbering vector inline, 240 with the slab's length field, 224 with the
    /// lag index's key and the free list of consumer slots in the group, 184 with the slab's
    /// chunk table and the consumers' slots as vectors and the policy and the schedule in
    /// boxes of their own).
    #[test]
    fn the_group_record_stays_small() {
        assert!(std::mem::size_of::<Tracked>() <= 64, "{}", std::mem::size_of::<Tracked>());
        assert!(std::mem::size_of::<Changed>() <= 64, "{}", std::mem::size_of::<Changed>());
        assert!(std::mem::size_of::<Option<Group>>() <= 160, "{}", std::mem::size_of::<Option<Group>>());
    }
}
