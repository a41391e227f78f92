//! The segment store: append-only files of checksummed records.
//!
//! ```text
//!   <dir>/LOCK                  exclusive lock, held while the store is open
//!   <dir>/seg-00000001.xst      segment 1 (sealed: full, read only)
//!   <dir>/seg-00000002.xst      segment 2 (active: records are appended here)
//!
//!   record, at a segment offset that the writer returns as its Loc:
//!   +----------+----------+------------------+-----------------+
//!   | magic u32| len u32  | xxh3-64 of the   | len bytes       |
//!   | "XSR1"   | LE       | payload, LE u64  | (the payload)   |
//!   +----------+----------+------------------+-----------------+
//!   |<-------------- HEADER = 16 bytes ------>|
//! ```
//!
//! A [`Loc`] (segment, offset, length) is all a reader needs: one positioned read of
//! `HEADER + len` bytes, the header checked against the Loc, the payload against its hash.
//! Segments are sealed at `segment_bytes` and deleted once every record in them is released
//! (deferred while pinned). A sealed segment left at most half live is [`Store::sparse`]: its
//! live records can be written anew at the end ([`Store::rewrite`]) until it empties.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const MAGIC: [u8; 4] = *b"XSR1";
pub const HEADER: usize = 16;
/// The largest payload a record may hold (a stream node is at most 1 GB, Redis's own bound
/// on a listpack; nodes are a few KB in practice).
pub const MAX_RECORD: usize = 1 << 30;
/// Sealed at this size by default.
pub const SEGMENT_BYTES_DEFAULT: u64 = 64 << 20;

/// Where a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc {
    pub seg: u32,
    pub off: u64,
    pub len: u32,
}

impl Loc {
    /// Bytes the record takes in its segment.
    pub fn size(&self) -> u64 {
        HEADER as u64 + u64::from(self.len)
    }
}

#[derive(Debug)]
pub enum TierError {
    /// The record read back is not what was written (header or checksum).
    Corrupt { loc: Loc, why: &'static str },
    /// No such segment (released, or never written).
    NoSegment(u32),
    /// The file system said no.
    Io(io::Error),
    /// Another server holds the directory.
    Locked(PathBuf),
    /// A payload over MAX_RECORD.
    TooLarge(usize),
}

impl std::fmt::Display for TierError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TierError::Corrupt { loc, why } => write!(f, "corrupt record in segment {} at {} ({} bytes): {why}", loc.seg, loc.off, loc.len),
            TierError::NoSegment(s) => write!(f, "no segment {s}"),
            TierError::Io(e) => write!(f, "I/O error: {e}"),
            TierError::Locked(p) => write!(f, "{} is in use by another server", p.display()),
            TierError::TooLarge(n) => write!(f, "record of {n} bytes, over the maximum"),
        }
    }
}

impl std::error::Error for TierError {}

/// Why [`Store::rewrite`] left a record where it was.
#[derive(Debug)]
pub enum RewriteError {
    /// It could not be read back (a fault of that record: its node's reads fail too).
    Read(TierError),
    /// It could not be written anew (the disk: counted as a write error, compaction pauses).
    Write(TierError),
}

impl From<io::Error> for TierError {
    fn from(e: io::Error) -> Self {
        TierError::Io(e)
    }
}

/// What INFO shows of the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes in segment files (records live or released, headers included).
    pub file_bytes: u64,
    /// Bytes of records not released.
    pub live_bytes: u64,
    pub live_records: u64,
    pub segments: u64,
    pub reads: u64,
    pub write_errors: u64,
    pub read_errors: u64,
    pub checksum_errors: u64,
    /// Segments deleted since the store opened.
    pub segments_deleted: u64,
}

struct Segment {
    file: File,
    path: PathBuf,
    /// Bytes written (the next record's offset while active).
    len: u64,
    live_bytes: u64,
    live_records: u64,
}

/// Faults to inject (tests, and a debug command of test builds): the next `writes` appends
/// fail after writing half of their record (a disk that filled up mid-write), the next `reads`
/// reads fail with EIO once `reads_after` more reads have succeeded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    pub writes: u32,
    pub reads: u32,
    pub reads_after: u32,
}

/// An open segment store.
pub struct Store {
    faults: Faults,
    dir: PathBuf,
    _lock: File,
    segment_bytes: u64,
    segments: BTreeMap<u32, Segment>,
    active: u32,
    /// While > 0, segments with nothing live are kept (a fork child may read them).
    pins: u32,
    stats: Stats,
}

fn seg_name(n: u32) -> String {
    format!("seg-{n:08}.xst")
}

fn is_seg_name(name: &str) -> bool {
    name.len() == 16 && name.starts_with("seg-") && name.ends_with(".xst") && name[4..12].bytes().all(|b| b.is_ascii_digit())
}

impl Store {
    /// Opens (creating it if needed) the store in `dir`: takes the directory's lock and deletes
    /// the segments a previous run left (never trusted: the RDB / AOF rebuild what is needed).
    pub fn open(dir: &Path, segment_bytes: u64) -> Result<Store, TierError> {
        std::fs::create_dir_all(dir)?;
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("LOCK"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(TierError::Locked(dir.to_path_buf())),
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            if e.file_name().to_str().is_some_and(is_seg_name) {
                std::fs::remove_file(e.path())?;
            }
        }
        let mut s = Store {
            faults: Faults::default(),
            dir: dir.to_path_buf(),
            _lock: lock,
            segment_bytes: segment_bytes.max(HEADER as u64 + 1),
            segments: BTreeMap::new(),
            active: 0,
            pins: 0,
            stats: Stats::default(),
        };
        s.new_segment()?;
        Ok(s)
    }

    fn new_segment(&mut self) -> Result<(), TierError> {
        let n = self.active.checked_add(1).ok_or(TierError::NoSegment(u32::MAX))?;
        let path = self.dir.join(seg_name(n));
        let file = OpenOptions::new().create_new(true).read(true).write(true).open(&path)?;
        self.segments.insert(n, Segment { file, path, len: 0, live_bytes: 0, live_records: 0 });
        let sealed = std::mem::replace(&mut self.active, n);
        self.stats.segments += 1;
        // The segment just sealed may hold nothing live already (all its records released
        // while it was active): `release` left it for this moment.
        if self.pins == 0 && self.segments.get(&sealed).is_some_and(|s| s.live_records == 0) {
            self.delete(sealed);
        }
        Ok(())
    }

    /// Appends a record; returns where it is. On an error nothing is recorded (the caller
    /// keeps the bytes in RAM): the segment's length stays, and the next record is written
    /// over whatever part of this one reached the file.
    pub fn put(&mut self, payload: &[u8]) -> Result<Loc, TierError> {
        if payload.len() > MAX_RECORD {
            return Err(TierError::TooLarge(payload.len()));
        }
        let r = self.append(payload);
        if r.is_err() {
            self.stats.write_errors += 1;
        }
        r
    }

    fn append(&mut self, payload: &[u8]) -> Result<Loc, TierError> {
        let full = self.segments.get(&self.active).is_none_or(|s| s.len > 0 && s.len + HEADER as u64 + payload.len() as u64 > self.segment_bytes);
        if full {
            self.new_segment()?;
        }
        let seg = self.segments.get_mut(&self.active).ok_or(TierError::NoSegment(self.active))?;
        let len = u32::try_from(payload.len()).map_err(|_| TierError::TooLarge(payload.len()))?;
        let mut rec = Vec::with_capacity(HEADER + payload.len());
        rec.extend_from_slice(&MAGIC);
        rec.extend_from_slice(&len.to_le_bytes());
        rec.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(payload).to_le_bytes());
        rec.extend_from_slice(payload);
        let loc = Loc { seg: self.active, off: seg.len, len };
        // At the segment's length, not at the file's end: after a failed (partial) write the
        // two differ, and the next record overwrites the partial one.
        if self.faults.writes > 0 {
            self.faults.writes -= 1;
            seg.file.write_all_at(&rec[..rec.len() / 2], loc.off)?;
            return Err(io::Error::new(io::ErrorKind::StorageFull, "injected: no space left on device").into());
        }
        seg.file.write_all_at(&rec, loc.off)?;
        seg.len += loc.size();
        self.stats.file_bytes += loc.size();
        seg.live_bytes += loc.size();
        seg.live_records += 1;
        self.stats.live_bytes += loc.size();
        self.stats.live_records += 1;
        Ok(loc)
    }

    /// The payload of the record at `loc`, checked; an error if it is not what was written.
    pub fn get(&mut self, loc: Loc) -> Result<Vec<u8>, TierError> {
        self.stats.reads += 1;
        let r = if self.faults.reads > 0 && self.faults.reads_after > 0 {
            self.faults.reads_after -= 1;
            self.read(loc)
        } else if self.faults.reads > 0 {
            self.faults.reads -= 1;
            Err(TierError::Io(io::Error::other("injected: input/output error")))
        } else {
            self.read(loc)
        };
        match &r {
            Err(TierError::Corrupt { .. }) => self.stats.checksum_errors += 1,
            Err(_) => self.stats.read_errors += 1,
            Ok(_) => {}
        }
        r
    }

    fn read(&self, loc: Loc) -> Result<Vec<u8>, TierError> {
        let seg = self.segments.get(&loc.seg).ok_or(TierError::NoSegment(loc.seg))?;
        let corrupt = |why| TierError::Corrupt { loc, why };
        if loc.off.checked_add(loc.size()).is_none_or(|end| end > seg.len) {
            return Err(corrupt("beyond the end of its segment"));
        }
        // Sized by the Loc, which this store made (never by bytes read from the file).
        let mut buf = vec![0u8; HEADER + loc.len as usize];
        seg.file.read_exact_at(&mut buf, loc.off).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                corrupt("the file is shorter than written")
            } else {
                TierError::Io(e)
            }
        })?;
        let (head, payload) = buf.split_at(HEADER);
        if head[..4] != MAGIC {
            return Err(corrupt("bad magic"));
        }
        if head[4..8] != loc.len.to_le_bytes() {
            return Err(corrupt("length differs from the index"));
        }
        if head[8..16] != xxhash_rust::xxh3::xxh3_64(payload).to_le_bytes() {
            return Err(corrupt("checksum mismatch"));
        }
        buf.drain(..HEADER);
        Ok(buf)
    }

    /// The record at `loc` is no longer needed (its node was trimmed, deleted, rewritten or
    /// brought back to RAM). A sealed segment left with nothing live is deleted, unless pinned.
    pub fn release(&mut self, loc: Loc) {
        let Some(seg) = self.segments.get_mut(&loc.seg) else { return };
        seg.live_bytes = seg.live_bytes.saturating_sub(loc.size());
        seg.live_records = seg.live_records.saturating_sub(1);
        self.stats.live_bytes = self.stats.live_bytes.saturating_sub(loc.size());
        self.stats.live_records = self.stats.live_records.saturating_sub(1);
        if seg.live_records == 0 && loc.seg != self.active && self.pins == 0 {
            self.delete(loc.seg);
        }
    }

    fn delete(&mut self, n: u32) {
        if let Some(seg) = self.segments.remove(&n) {
            self.stats.file_bytes = self.stats.file_bytes.saturating_sub(seg.len);
            self.stats.segments = self.stats.segments.saturating_sub(1);
            self.stats.segments_deleted += 1;
            // A file that cannot be removed is only disk space; its records are gone from
            // the index either way.
            let _ = std::fs::remove_file(&seg.path);
        }
    }

    /// Sealed segments that at most half their bytes are live in, sparsest first: what
    /// compaction empties by writing their live records anew ([`Store::rewrite`]).
    pub fn sparse(&self) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> = self
            .segments
            .iter()
            .filter(|(&n, s)| n != self.active && s.live_records > 0 && s.live_bytes.saturating_mul(2) <= s.len)
            .map(|(&n, s)| (s.live_bytes, n))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, n)| n).collect()
    }

    /// Compaction's step: the record at `loc`, read back (checked), appended anew, and the
    /// old one released. On an error nothing changed (the record stays where it was); the
    /// error says which of the two steps failed.
    pub fn rewrite(&mut self, loc: Loc) -> Result<Loc, RewriteError> {
        let payload = self.get(loc).map_err(RewriteError::Read)?;
        let moved = self.put(&payload).map_err(RewriteError::Write)?;
        self.release(loc);
        Ok(moved)
    }

    /// A fork child will read the segments as they are now: keep every file until
    /// [`Store::unpin`].
    pub fn pin(&mut self) {
        self.pins += 1;
    }

    /// Is a fork child reading the segments (files are kept until it is gone)?
    pub fn pinned(&self) -> bool {
        self.pins > 0
    }

    /// The fork child is gone: delete the sealed segments left with nothing live.
    pub fn unpin(&mut self) {
        self.pins = self.pins.saturating_sub(1);
        if self.pins > 0 {
            return;
        }
        let dead: Vec<u32> = self.segments.iter().filter(|(&n, s)| n != self.active && s.live_records == 0).map(|(&n, _)| n).collect();
        for n in dead {
            self.delete(n);
        }
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Seals segments at `n` bytes from now on (tests: many small segments).
    pub fn set_segment_bytes(&mut self, n: u64) {
        self.segment_bytes = n.max(HEADER as u64 + 1);
    }

    /// Injects faults (see [`Faults`]); replaces those not yet used.
    pub fn inject(&mut self, f: Faults) {
        self.faults = f;
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of segment `n` (tests: to damage it).
    pub fn segment_path(&self, n: u32) -> Option<&Path> {
        self.segments.get(&n).map(|s| s.path.as_path())
    }
}

#[cfg(test)]
#[path = "segment_tests.rs"]
mod tests;
