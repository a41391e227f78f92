//! The built-in stream's serialized form (a `DUMP` payload of a Redis stream), so
//! that XS.IMPORT / XS.EXPORT move a stream between the built-in type and ours
//! with nothing lost: the nodes are the same listpacks in both (the built-in's
//! node layout is ours), tombstones, counters, groups, PEL delivery times and
//! counts, and consumers' seen-times included.
//!
//! ```text
//! DUMP payload = <type> <object> <rdb version: u16 LE> <crc64 jones: u64 LE>
//! object (RDB_TYPE_STREAM_LISTPACKS_2 = 19, Redis 7.0):
//!   len nodes ; nodes × { string key(16) ; string listpack }
//!   len length ; len last.ms ; len last.seq
//!   len first.ms ; len first.seq ; len maxdel.ms ; len maxdel.seq ; len entries-added   (types 19, 21)
//!   len groups ; groups × {
//!     string name ; len last.ms ; len last.seq ; len entries-read (types 19, 21)
//!     len pel ; pel × { raw id(16) ; i64 LE delivery-time ; len delivery-count }
//!     len consumers ; consumers × { string name ; i64 LE seen-time ;
//!                                   i64 LE active-time (type 21 only) ; len pel ; pel × raw id(16) } }
//! ```
//! "len" is the RDB length encoding; "string" the RDB string encoding (plain,
//! integer or LZF-compressed). Decoding is as strict as `rdb::load`: every
//! listpack and the assembled stream go through the same validators.
//!
//! Architecture invariant: pure Rust, no module API.

#![forbid(unsafe_code)]

use crate::listpack::Listpack;
use crate::stream::validate::StreamCheck;
use crate::stream::{Stream, StreamId, ENTRIES_READ_INVALID};

/// RDB object types of streams.
pub const RDB_TYPE_STREAM_LISTPACKS: u8 = 15;
pub const RDB_TYPE_STREAM_LISTPACKS_2: u8 = 19;
pub const RDB_TYPE_STREAM_LISTPACKS_3: u8 = 21;
/// The RDB version written in exported payloads (Redis 7.0's; newer servers accept it).
pub const RDB_VERSION_EXPORT: u16 = 10;
/// The RDB version of a type-21 payload (Redis 7.2).
pub const RDB_VERSION_EXPORT_3: u16 = 11;
/// Largest string a payload may declare (a listpack cannot exceed 4 GB).
const STRING_LEN_MAX: u64 = u32::MAX as u64;

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeError(pub String);

impl std::fmt::Display for NativeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(m: &str) -> Result<T, NativeError> {
    Err(NativeError(m.to_string()))
}

// ---- CRC64 (Jones, reflected, as Redis's crc64.c) --------------------------------

const CRC64_POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

/// Slicing-by-8 tables: `CRC64_TABLES[0]` is the byte table of crc64.c;
/// `CRC64_TABLES[k][i]` is the CRC of byte `i` followed by `k` zero bytes (as
/// crcspeed.c builds them), so eight bytes are folded per step.
const CRC64_TABLES: [[u64; 256]; 8] = crc64_tables();

const fn crc64_tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ CRC64_POLY_REFLECTED } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

/// Redis's crc64(0, data).
pub fn crc64(data: &[u8]) -> u64 {
    let t = &CRC64_TABLES;
    let mut crc = 0u64;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let x = crc ^ u64::from_le_bytes(w);
        crc = t[7][(x & 0xff) as usize]
            ^ t[6][((x >> 8) & 0xff) as usize]
            ^ t[5][((x >> 16) & 0xff) as usize]
            ^ t[4][((x >> 24) & 0xff) as usize]
            ^ t[3][((x >> 32) & 0xff) as usize]
            ^ t[2][((x >> 40) & 0xff) as usize]
            ^ t[1][((x >> 48) & 0xff) as usize]
            ^ t[0][(x >> 56) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

// ---- reading -----------------------------------------------------------------------

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], NativeError> {
        let end = self.pos.checked_add(n).ok_or_else(|| NativeError("length overflow".into()))?;
        let s = self.b.get(self.pos..end).ok_or_else(|| NativeError("payload too short".into()))?;
        self.pos = end;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, NativeError> {
        Ok(self.take(1)?[0])
    }

    /// Returns (value, is_encoded_special).
    fn len_or_enc(&mut self) -> Result<(u64, bool), NativeError> {
        let b = self.byte()?;
        match b >> 6 {
            0 => Ok((u64::from(b & 0x3f), false)),
            1 => Ok(((u64::from(b & 0x3f) << 8) | u64::from(self.byte()?), false)),
            3 => Ok((u64::from(b & 0x3f), true)),
            _ => match b {
                0x80 => Ok((u64::from(u32::from_be_bytes(self.take(4)?.try_into().unwrap_or([0; 4]))), false)),
                0x81 => Ok((u64::from_be_bytes(self.take(8)?.try_into().unwrap_or([0; 8])), false)),
                _ => err("bad length encoding"),
            },
        }
    }

    fn len(&mut self) -> Result<u64, NativeError> {
        match self.len_or_enc()? {
            (v, false) => Ok(v),
            _ => err("encoded value where a length was expected"),
        }
    }

    fn i64_le(&mut self) -> Result<i64, NativeError> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().unwrap_or([0; 8])))
    }

    fn string(&mut self) -> Result<Vec<u8>, NativeError> {
        let (v, enc) = self.len_or_enc()?;
        if !enc {
            if v > STRING_LEN_MAX {
                return err("string too long");
            }
            return Ok(self.take(v as usize)?.to_vec());
        }
        match v {
            0 => Ok((self.byte()? as i8).to_string().into_bytes()),
            1 => Ok(i16::from_le_bytes(self.take(2)?.try_into().unwrap_or([0; 2])).to_string().into_bytes()),
            2 => Ok(i32::from_le_bytes(self.take(4)?.try_into().unwrap_or([0; 4])).to_string().into_bytes()),
            3 => {
                let clen = self.len()?;
                let len = self.len()?;
                if clen > STRING_LEN_MAX || len > STRING_LEN_MAX {
                    return err("compressed string too long");
                }
                let data = self.take(clen as usize)?;
                lzf_decompress(data, len as usize)
            }
            _ => err("unknown string encoding"),
        }
    }
}

/// RDB_MODULE_OPCODE_UINT / _STRING: the tag Redis writes before each item of a module value
/// (RM_SaveUnsigned, RM_SaveStringBuffer).
const MODULE_OPCODE_UINT: u64 = 2;
const MODULE_OPCODE_STRING: u64 = 5;

/// The items of one of our values as Redis frames them in an RDB or a DUMP payload (after the
/// type's ID): each an opcode, then an RDB length (RM_LoadUnsigned) or an RDB string, plain,
/// integer-encoded or LZF-compressed (RM_LoadStringBuffer). What the server's module IO does,
/// without a server: for the `rdb_load` fuzz target, which feeds raw bytes to [`crate::rdb::load`]
/// through it. Bytes after the value are not looked at.
pub struct ModuleValue<'a> {
    r: Reader<'a>,
}

impl<'a> ModuleValue<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        ModuleValue { r: Reader { b: bytes, pos: 0 } }
    }

    fn opcode(&mut self, want: u64) -> Result<(), crate::rdb::LoadError> {
        match self.r.len() {
            Ok(op) if op == want => Ok(()),
            _ => Err(crate::rdb::LoadError::Io),
        }
    }
}

impl crate::rdb::RdbIn for ModuleValue<'_> {
    fn get_u64(&mut self) -> Result<u64, crate::rdb::LoadError> {
        self.opcode(MODULE_OPCODE_UINT)?;
        self.r.len().map_err(|_| crate::rdb::LoadError::Io)
    }

    fn get_bytes(&mut self) -> Result<Vec<u8>, crate::rdb::LoadError> {
        self.opcode(MODULE_OPCODE_STRING)?;
        self.r.string().map_err(|_| crate::rdb::LoadError::Io)
    }
}

/// LZF decompression (lzf_d.c), bounded by the declared output length: the
/// output buffer never grows past `out_len`, which is checked against the input
/// size first (LZF expands at most ~264x).
fn lzf_decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, NativeError> {
    if out_len > input.len().saturating_mul(264) {
        return err("implausible LZF expansion");
    }
    let mut out: Vec<u8> = Vec::with_capacity(out_len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(ip..ip + n).ok_or_else(|| NativeError("LZF literal past the end".into()))?;
            if out.len() + n > out_len {
                return err("LZF output too long");
            }
            out.extend_from_slice(lit);
            ip += n;
        } else {
            let mut len = ctrl >> 5;
            let mut back = (ctrl & 0x1f) << 8;
            if len == 7 {
                len += *input.get(ip).ok_or_else(|| NativeError("LZF truncated".into()))? as usize;
                ip += 1;
            }
            back += *input.get(ip).ok_or_else(|| NativeError("LZF truncated".into()))? as usize;
            ip += 1;
            len += 2;
            let start = out.len().checked_sub(back + 1).ok_or_else(|| NativeError("LZF back reference before start".into()))?;
            if out.len() + len > out_len {
                return err("LZF output too long");
            }
            // Copy `len` bytes from `back + 1` bytes behind the end; when they overlap the
            // bytes being written (a run), copy one period at a time.
            let period = back + 1;
            let mut left = len;
            let mut from = start;
            while left > 0 {
                let c = left.min(period);
                out.extend_from_within(from..from + c);
                from += c;
                left -= c;
            }
        }
    }
    if out.len() != out_len {
        return err("LZF length mismatch");
    }
    Ok(out)
}

fn id_of(raw: &[u8]) -> Result<StreamId, NativeError> {
    StreamId::from_be_bytes(raw).ok_or_else(|| NativeError("ID is not 16 bytes".into()))
}

/// Decodes a DUMP payload of a built-in stream into our stream.
pub fn decode_dump(payload: &[u8]) -> Result<Stream, NativeError> {
    if payload.len() < 11 {
        return err("payload too short");
    }
    let (body, footer) = payload.split_at(payload.len() - 8);
    let crc = u64::from_le_bytes(footer.try_into().unwrap_or([0; 8]));
    if crc != crc64(body) {
        return err("bad CRC");
    }
    let (obj, _ver) = body.split_at(body.len() - 2);
    let mut r = Reader { b: obj, pos: 0 };
    let ty = r.byte()?;
    if ![RDB_TYPE_STREAM_LISTPACKS, RDB_TYPE_STREAM_LISTPACKS_2, RDB_TYPE_STREAM_LISTPACKS_3].contains(&ty) {
        return err("not a stream");
    }
    let v2 = ty >= RDB_TYPE_STREAM_LISTPACKS_2;
    let mut s = Stream::new();
    let nodes = r.len()?;
    let mut prev: Option<StreamId> = None;
    // Each node is checked as soon as it is read (every element and its structure, one pass),
    // while its bytes are in the CPU's caches.
    let mut checked = StreamCheck::default();
    for _ in 0..nodes {
        let master = id_of(&r.string()?)?;
        if prev.is_some_and(|p| master <= p) {
            return err("node keys not increasing");
        }
        prev = Some(master);
        let lp = Listpack::from_vec(r.string()?, false).map_err(|e| NativeError(format!("listpack: {e}")))?;
        if lp.is_empty() {
            return err("empty listpack");
        }
        checked.node(master, &lp).map_err(|e| NativeError(e.to_string()))?;
        s.insert_node(master, lp);
    }
    s.length = r.len()?;
    s.last_id = StreamId { ms: r.len()?, seq: r.len()? };
    if v2 {
        s.first_id = StreamId { ms: r.len()?, seq: r.len()? };
        s.max_deleted_entry_id = StreamId { ms: r.len()?, seq: r.len()? };
        s.entries_added = r.len()?;
    } else {
        s.first_id = s.edge_id(true, true);
        if s.length == 0 {
            s.first_id = StreamId::MIN;
        }
        s.entries_added = s.length;
    }
    let groups = r.len()?;
    for _ in 0..groups {
        let name = r.string()?;
        let last = StreamId { ms: r.len()?, seq: r.len()? };
        let entries_read = if v2 { r.len()? as i64 } else { ENTRIES_READ_INVALID };
        if !s.create_group(&name, last, entries_read) {
            return err("duplicate group");
        }
        let g = s.group_mut(&name).ok_or_else(|| NativeError("group vanished".into()))?;
        let pel = r.len()?;
        for _ in 0..pel {
            let id = id_of(r.take(16)?)?;
            let time = r.i64_le()?;
            let count = r.len()?;
            if !g.load_nack(id, time, count) {
                return err("duplicate PEL entry");
            }
        }
        let consumers = r.len()?;
        for _ in 0..consumers {
            let cname = r.string()?;
            let seen = r.i64_le()?;
            // A 7.0 payload has no active-time: Redis 7.2 loads it as the seen-time
            // (REDIS8.md §1.2, "Loading from legacy").
            let active = if ty >= RDB_TYPE_STREAM_LISTPACKS_3 { r.i64_le()? } else { seen };
            let slot = g.load_consumer(&cname, seen, active).ok_or_else(|| NativeError("duplicate consumer".into()))?;
            let cpel = r.len()?;
            for _ in 0..cpel {
                let id = id_of(r.take(16)?)?;
                if !g.load_owner(slot, id) {
                    return err("consumer PEL entry not in the group PEL");
                }
            }
        }
        // The built-in's formats up to 8.2 have no time order: rebuilt as 8.4
        // does, sorted insertions in ID order.
        g.load_finish(true).map_err(|e| NativeError(e.to_string()))?;
    }
    if r.pos != obj.len() {
        return err("trailing bytes");
    }
    checked.finish(&s).map_err(|e| NativeError(e.to_string()))?;
    Ok(s)
}

// ---- writing -------------------------------------------------------------------------

fn put_len(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.push(((v >> 8) as u8) | 0x40);
        out.push(v as u8);
    } else if v <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(v as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Encodes our stream as a DUMP payload of a built-in stream, for RESTORE: type
/// 19 (RDB 10, Redis 7.0) or, with `active_times` (a 7.2+ server), type 21 (RDB
/// 11) which also carries the consumers' active-times. A 7.0 server cannot read
/// type 21; a 7.2 server reading type 19 takes active-time = seen-time.
pub fn encode_dump(s: &Stream, active_times: bool) -> Vec<u8> {
    let mut out = vec![if active_times { RDB_TYPE_STREAM_LISTPACKS_3 } else { RDB_TYPE_STREAM_LISTPACKS_2 }];
    put_len(&mut out, s.rax_keys() as u64);
    for (master, lp) in s.nodes() {
        put_string(&mut out, &master.to_be_bytes());
        put_string(&mut out, lp.as_bytes());
    }
    for v in
        [s.length, s.last_id.ms, s.last_id.seq, s.first_id.ms, s.first_id.seq, s.max_deleted_entry_id.ms, s.max_deleted_entry_id.seq, s.entries_added]
    {
        put_len(&mut out, v);
    }
    put_len(&mut out, s.group_count() as u64);
    if let Some(it) = s.groups_iter() {
        for (name, g) in it {
            put_string(&mut out, name);
            put_len(&mut out, g.last_id.ms);
            put_len(&mut out, g.last_id.seq);
            put_len(&mut out, g.entries_read as u64);
            put_len(&mut out, g.pel().len() as u64);
            let mut p = g.pel().iter();
            while let Some((k, n)) = p.next() {
                out.extend_from_slice(k);
                out.extend_from_slice(&n.delivery_time.to_le_bytes());
                put_len(&mut out, n.delivery_count);
            }
            put_len(&mut out, g.consumer_count() as u64);
            let mut ci = g.consumers();
            while let Some((_, c)) = ci.next_consumer() {
                put_string(&mut out, &c.name);
                out.extend_from_slice(&c.seen_time.to_le_bytes());
                if active_times {
                    out.extend_from_slice(&c.active_time.to_le_bytes());
                }
                put_len(&mut out, c.pel().len() as u64);
                let mut p = c.pel().iter();
                while let Some((k, _)) = p.next() {
                    out.extend_from_slice(k);
                }
            }
        }
    }
    out.extend_from_slice(&(if active_times { RDB_VERSION_EXPORT_3 } else { RDB_VERSION_EXPORT }).to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{IdSpec, NodeLimits};

    /// The items of one of our values framed as Redis frames them (the inverse of
    /// [`ModuleValue`], strings uncompressed).
    fn encode_module_value(items: &[crate::rdb::VecItem]) -> Vec<u8> {
        let mut out = Vec::new();
        for it in items {
            match it {
                crate::rdb::VecItem::U64(v) => {
                    put_len(&mut out, MODULE_OPCODE_UINT);
                    put_len(&mut out, *v);
                }
                crate::rdb::VecItem::Bytes(b) => {
                    put_len(&mut out, MODULE_OPCODE_STRING);
                    put_string(&mut out, b);
                }
            }
        }
        out
    }

    /// A stream's RDB items framed as in an RDB (module opcodes, RDB lengths and strings, one
    /// of them LZF-compressed as Redis may write it) load back through ModuleValue to the same
    /// stream; a wrong opcode or a short input is an I/O error, never a panic.
    #[test]
    fn module_value_frames_round_trip() {
        let mut s = Stream::new();
        let limits = NodeLimits { entries_max: 3, bytes_max: 0 };
        for i in 1..=10u64 {
            let v = format!("value-{i}");
            s.append(&[b"f".as_slice(), v.as_bytes()], IdSpec::Explicit(StreamId::new(i, 0)), 0, limits).expect("appended");
        }
        s.create_group(b"g", StreamId::new(4, 0), 0);
        let mut io = crate::rdb::VecIo::default();
        crate::rdb::save(&s, &mut io);
        let bytes = encode_module_value(&io.items);
        let back = crate::rdb::load(crate::rdb::ENCVER, &mut ModuleValue::new(&bytes), crate::rdb::Check::Deep).expect("loads");
        let mut io2 = crate::rdb::VecIo::default();
        crate::rdb::save(&back, &mut io2);
        assert_eq!(io.items, io2.items);
        // An LZF string ("aaaaaaaaaa": a literal, then a back reference of 9 from 1 back).
        let lzf = [0xC3u8, 5, 10, 0x00, b'a', 0xE0, 0x00, 0x00];
        let mut framed = vec![MODULE_OPCODE_STRING as u8];
        framed.extend_from_slice(&lzf);
        assert_eq!(crate::rdb::RdbIn::get_bytes(&mut ModuleValue::new(&framed)), Ok(b"aaaaaaaaaa".to_vec()));
        assert_eq!(crate::rdb::RdbIn::get_u64(&mut ModuleValue::new(&framed)), Err(crate::rdb::LoadError::Io));
        for cut in 0..bytes.len() {
            assert!(crate::rdb::load(crate::rdb::ENCVER, &mut ModuleValue::new(&bytes[..cut]), crate::rdb::Check::Deep).is_err());
        }
    }

    #[test]
    fn crc64_check_value() {
        // The check value of CRC-64/Jones as used by Redis (crc64.c test).
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn lzf_overlapping_back_references() {
        // "ab", then 8 bytes from 2 back (a run of period 2), then 5 bytes from 1 back
        // (period 1), then 3 bytes from 10 back (no overlap).
        let input = [0x01, b'a', b'b', 0xC0, 0x01, 0x60, 0x00, 0x20, 0x09];
        let want = b"ababababab".iter().chain(b"bbbbb").chain(b"bab").copied().collect::<Vec<u8>>();
        assert_eq!(lzf_decompress(&input, want.len()), Ok(want.clone()));
        assert!(lzf_decompress(&input, want.len() - 1).is_err());
        // A back reference before the start.
        assert!(lzf_decompress(&[0x00, b'a', 0x20, 0x05], 4).is_err());
    }

    #[test]
    fn lzf_garbage_never_panics() {
        // xorshift: random inputs and declared lengths; every outcome is Ok or Err.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let n = (next() % 40) as usize;
            let input: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            let out_len = (next() % 300) as usize;
            if let Ok(out) = lzf_decompress(&input, out_len) {
                assert_eq!(out.len(), out_len);
            }
        }
    }

    #[test]
    fn crc64_sliced_equals_bytewise() {
        let bytewise = |d: &[u8]| d.iter().fold(0u64, |crc, &b| CRC64_TABLES[0][((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8));
        let data: Vec<u8> = (0..300u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for start in 0..9 {
            for end in start..data.len() {
                assert_eq!(crc64(&data[start..end]), bytewise(&data[start..end]), "{start}..{end}");
            }
        }
    }

    #[test]
    fn lzf_round_trip_of_a_known_stream() {
        // "aaaaaaaaaa" compressed by LZF: literal 'a', back-reference len 8 distance 1.
        let compressed = [0x00, b'a', 0xc0, 0x00, 0x00, b'a'];
        // ctrl 0xc0: len = 6 + 2 = 8 copies of the previous byte; then literal 'a'.
        assert_eq!(lzf_decompress(&compressed, 10).unwrap(), b"aaaaaaaaaa".to_vec());
        assert!(lzf_decompress(&compressed, 9).is_err());
        assert!(lzf_decompress(&[0x20, 0x05], 3).is_err());
    }

    #[test]
    fn encode_decode_round_trip() {
        let mut s = Stream::new();
        let l = NodeLimits { entries_max: 4, bytes_max: 0 };
        for i in 1..=30u64 {
            s.append(&[b"f", i.to_string().as_bytes()], IdSpec::Explicit(StreamId::new(i, 1)), 0, l).unwrap();
        }
        s.delete_ids(&[StreamId::new(3, 1)]);
        s.create_group(b"g", StreamId::new(10, 1), 9);
        let g = s.group_mut(b"g").unwrap();
        let a = g.create_consumer(b"a", 77).unwrap();
        g.deliver_new(StreamId::new(5, 1), a, 1234);
        g.consumer_mut(a).unwrap().active_time = 4321;
        // Type 21 (7.2) keeps active-times; type 19 (7.0) has none (the seen-time, 77,
        // when read back, as 7.2 loads a 7.0 RDB).
        for (active_times, expect) in [(true, 4321), (false, 77)] {
            let t = decode_dump(&encode_dump(&s, active_times)).unwrap();
            let g = t.group(b"g").unwrap();
            let slot = g.find_consumer(b"a").unwrap();
            assert_eq!(g.consumer(slot).unwrap().active_time, expect);
        }
        let payload = encode_dump(&s, false);
        let t = decode_dump(&payload).unwrap();
        assert_eq!(t.length, s.length);
        assert_eq!(t.rax_nodes(), s.rax_nodes());
        let g = t.group(b"g").unwrap();
        assert_eq!(g.nack(StreamId::new(5, 1)).unwrap().delivery_time, 1234);
        let mut bad = payload.clone();
        bad[3] ^= 1;
        assert!(decode_dump(&bad).is_err());
        for n in 0..payload.len() {
            let _ = decode_dump(&payload[..n]);
        }
    }
}
