//! The RDB encoding of a stream (see docs/rdb.md), against small Read/Write
//! traits so that it is tested on a `Vec` without a server.
//!
//! One decoder arm per encoding version: a file written by an older version of
//! the module must keep loading. Everything read is untrusted (RESTORE payloads
//! carry only a CRC anyone can compute): listpacks pass `listpack::validate`, the
//! assembled stream passes `stream::validate`, and no allocation is sized by a
//! count read from the input.

#![forbid(unsafe_code)]

use crate::listpack::Listpack;
use crate::stream::validate::validate_stream;
use crate::stream::{Stream, StreamId};

/// The encoding version written by this build (the data type's encver).
pub const ENCVER: i32 = 1;

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// The source ran dry or reported an I/O error.
    Io,
    /// An encoding version this build does not know.
    Version(i32),
    /// The bytes decode but describe an impossible stream.
    Invalid(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Io => f.write_str("short read or I/O error"),
            LoadError::Version(v) => write!(f, "unknown encoding version {v}"),
            LoadError::Invalid(s) => write!(f, "invalid stream: {s}"),
        }
    }
}

/// Where a save writes.
pub trait RdbOut {
    fn put_u64(&mut self, v: u64);
    fn put_bytes(&mut self, b: &[u8]);
}

/// Where a load reads.
pub trait RdbIn {
    fn get_u64(&mut self) -> Result<u64, LoadError>;
    fn get_bytes(&mut self) -> Result<Vec<u8>, LoadError>;
}

fn put_id(out: &mut impl RdbOut, id: StreamId) {
    out.put_u64(id.ms);
    out.put_u64(id.seq);
}

fn get_id(inp: &mut impl RdbIn) -> Result<StreamId, LoadError> {
    Ok(StreamId { ms: inp.get_u64()?, seq: inp.get_u64()? })
}

/// Writes `s` in the current encoding (version 1):
///
/// ```text
/// u64 node-count
///   node-count × { bytes master-id (16, big endian) ; bytes listpack }
/// u64 length ; u64 entries-added
/// u64 last-id.ms ; u64 last-id.seq
/// u64 first-id.ms ; u64 first-id.seq
/// u64 max-deleted-id.ms ; u64 max-deleted-id.seq
/// u64 group-count (0: consumer groups are not encoded by this version yet)
/// ```
pub fn save(s: &Stream, out: &mut impl RdbOut) {
    out.put_u64(s.rax_keys() as u64);
    for (master, lp) in s.nodes() {
        out.put_bytes(&master.to_be_bytes());
        out.put_bytes(lp.as_bytes());
    }
    out.put_u64(s.length);
    out.put_u64(s.entries_added);
    put_id(out, s.last_id);
    put_id(out, s.first_id);
    put_id(out, s.max_deleted_entry_id);
    out.put_u64(0);
}

/// Reads a stream written with encoding `encver`.
pub fn load(encver: i32, inp: &mut impl RdbIn) -> Result<Stream, LoadError> {
    match encver {
        1 => load_v1(inp),
        v => Err(LoadError::Version(v)),
    }
}

fn load_v1(inp: &mut impl RdbIn) -> Result<Stream, LoadError> {
    let invalid = |m: &str| LoadError::Invalid(m.to_string());
    let nodes = inp.get_u64()?;
    let mut s = Stream::new();
    let mut prev: Option<StreamId> = None;
    // No preallocation from `nodes`: each iteration reads real bytes or fails.
    for _ in 0..nodes {
        let key = inp.get_bytes()?;
        let master = StreamId::from_be_bytes(&key).ok_or_else(|| invalid("node key is not 16 bytes"))?;
        if prev.is_some_and(|p| master <= p) {
            return Err(invalid("node keys not increasing"));
        }
        prev = Some(master);
        let lp = Listpack::from_vec(inp.get_bytes()?, true).map_err(|e| LoadError::Invalid(format!("listpack: {e}")))?;
        s.insert_node(master, lp);
    }
    s.length = inp.get_u64()?;
    s.entries_added = inp.get_u64()?;
    s.last_id = get_id(inp)?;
    s.first_id = get_id(inp)?;
    s.max_deleted_entry_id = get_id(inp)?;
    let groups = inp.get_u64()?;
    if groups != 0 {
        return Err(invalid("consumer groups are not supported by this build"));
    }
    validate_stream(&s).map_err(|e| LoadError::Invalid(e.to_string()))?;
    Ok(s)
}

/// An in-memory encoding, for tests, fuzzing and COPY-like uses.
#[derive(Default, Debug)]
pub struct VecIo {
    pub items: Vec<VecItem>,
    pub pos: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VecItem {
    U64(u64),
    Bytes(Vec<u8>),
}

impl RdbOut for VecIo {
    fn put_u64(&mut self, v: u64) {
        self.items.push(VecItem::U64(v));
    }
    fn put_bytes(&mut self, b: &[u8]) {
        self.items.push(VecItem::Bytes(b.to_vec()));
    }
}

impl RdbIn for VecIo {
    fn get_u64(&mut self) -> Result<u64, LoadError> {
        match self.items.get(self.pos) {
            Some(VecItem::U64(v)) => {
                self.pos += 1;
                Ok(*v)
            }
            _ => Err(LoadError::Io),
        }
    }
    fn get_bytes(&mut self) -> Result<Vec<u8>, LoadError> {
        match self.items.get(self.pos) {
            Some(VecItem::Bytes(b)) => {
                self.pos += 1;
                Ok(b.clone())
            }
            _ => Err(LoadError::Io),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{IdSpec, NodeLimits, Trim, TrimStrategy};

    fn sample() -> Stream {
        let mut s = Stream::new();
        let l = NodeLimits { entries_max: 3, bytes_max: 0 };
        for i in 1..=20u64 {
            let v = i.to_string();
            s.append(&[b"f", v.as_bytes(), b"g", b"x"], IdSpec::Explicit(StreamId::new(i, 0)), 0, l).unwrap();
        }
        s.delete_ids(&[StreamId::new(5, 0), StreamId::new(1, 0)]);
        s.trim(&Trim { strategy: TrimStrategy::MaxLen(15), approx: false, limit: 0 });
        s
    }

    fn dump(s: &Stream) -> Vec<(StreamId, Vec<(Vec<u8>, Vec<u8>)>)> {
        s.range(StreamId::MIN, StreamId::MAX, false).map(|e| (e.id(), e.fields())).collect()
    }

    #[test]
    fn round_trip() {
        let s = sample();
        let mut io = VecIo::default();
        save(&s, &mut io);
        let t = load(ENCVER, &mut io).unwrap();
        assert_eq!(dump(&s), dump(&t));
        assert_eq!((s.length, s.last_id, s.first_id, s.max_deleted_entry_id, s.entries_added),
                   (t.length, t.last_id, t.first_id, t.max_deleted_entry_id, t.entries_added));
        assert_eq!(s.rax_nodes(), t.rax_nodes());
    }

    #[test]
    fn every_truncation_and_item_mutation_is_refused_or_valid() {
        let s = sample();
        let mut io = VecIo::default();
        save(&s, &mut io);
        let items = io.items.clone();
        for n in 0..items.len() {
            let mut t = VecIo { items: items[..n].to_vec(), pos: 0 };
            assert!(load(ENCVER, &mut t).is_err(), "prefix {n} accepted");
        }
        let specials = [0u64, 1, 15, 16, 17, u32::MAX as u64, 1 << 32, 1 << 63, u64::MAX];
        for i in 0..items.len() {
            for &v in &specials {
                let mut m = items.clone();
                match &mut m[i] {
                    VecItem::U64(x) => *x = v,
                    VecItem::Bytes(b) => {
                        let at = (v as usize) % b.len().max(1);
                        if let Some(byte) = b.get_mut(at) {
                            *byte ^= (v as u8) | 1;
                        }
                    }
                }
                let mut t = VecIo { items: m, pos: 0 };
                if let Ok(st) = load(ENCVER, &mut t) {
                    validate_stream(&st).unwrap();
                    let _ = dump(&st);
                }
            }
        }
        assert_eq!(load(7, &mut VecIo::default()).err(), Some(LoadError::Version(7)));
    }
}
