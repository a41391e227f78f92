//! The RDB encoding of a stream (see docs/rdb.md), against small Read/Write
//! traits so that it is tested on a `Vec` without a server.
//!
//! One decoder for every encoding version (a newer one adds sections under
//! `version >= n`): a file written by an older version of the module must keep
//! loading. Everything read is untrusted (RESTORE payloads
//! carry only a CRC anyone can compute): with [`Check::Deep`] listpacks pass
//! `listpack::validate(deep)` and the assembled stream `stream::validate`; with
//! [`Check::Shallow`] (RDB and full-sync loading under `sanitize-dump-payload no`,
//! as the built-in) each node's header only, and the core's readers stay total on
//! whatever the node bodies hold. Either way no allocation is sized by a count
//! read from the input.

#![forbid(unsafe_code)]

use crate::listpack::{Codec, Listpack};
use crate::stream::idmp::{self, Idmp};
use crate::stream::queue::{AckTimeout, DeadLetter, QueuePolicy, BACKOFF_MAX, MS_MAX};
use crate::stream::validate::StreamCheck;
use crate::stream::{Stream, StreamId};

/// The encoding version written by this build (the data type's encver).
pub const ENCVER: i32 = 7;

/// How much loading checks (docs/rdb.md, "What loading checks").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Everything: every element of every node, the node structure, the counters.
    /// RESTORE always; RDB / full-sync loading under `sanitize-dump-payload yes`.
    Deep,
    /// As the built-in with `sanitize-dump-payload no`: each listpack's header
    /// and first element (a node is never empty); node keys, groups and PELs
    /// fully. Node bodies and the length are taken as they are (the core reads
    /// them totally: a corrupt body gives wrong answers, never a crash or a hang).
    /// Nothing more than the built-in checks, so that a server that loaded a
    /// corrupt body and then ran commands on it can always reload what it saved.
    Shallow,
}

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
            LoadError::Version(v) if *v > ENCVER => {
                write!(f, "encoding version {v} is newer than this build's ({ENCVER}): it was written by a newer xstream; load it with that one")
            }
            LoadError::Version(v) => write!(f, "unknown encoding version {v}"),
            LoadError::Invalid(s) => write!(f, "invalid stream: {s}"),
        }
    }
}

/// Where a save writes.
pub trait RdbOut {
    fn put_u64(&mut self, v: u64);
    fn put_bytes(&mut self, b: &[u8]);
    /// What was to be saved cannot be read (a cold node's record: `why`). The save must not
    /// complete as if it were whole: the module's writer ends a fork child (the save fails,
    /// the previous file stays).
    fn fail(&mut self, why: &str);
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

/// Writes `s` in the current encoding (version 7; version 6 writes the records of a group
/// an item per field, as told after the layout; version 4 lacks the codec tags,
/// version 3 also the retention section, version 2 also the section marked v3, version 1
/// also the two marked v2; version 5 is another branch's, not written here):
///
/// ```text
/// u64 node-count
///   node-count × { bytes master-id (16, big endian) ;
///                  v6: u64 codec (0 plain, 1 LZ4 block, 2 zstd frame) ; [codec != 0: u64 plain-bytes] ;
///                  bytes listpack (codec 0) or its compressed block }
/// u64 length ; u64 entries-added
/// u64 last-id.ms ; u64 last-id.seq
/// u64 first-id.ms ; u64 first-id.seq
/// u64 max-deleted-id.ms ; u64 max-deleted-id.seq
/// u64 group-count
///   group-count × {
///     bytes name ; u64 last-id.ms ; u64 last-id.seq ; u64 entries-read (i64, -1 = unknown)
///     u64 pel-count ; PEL records: { id (16, big endian) ; delivery-time (i64 ms) ; delivery-count }
///     u64 consumer-count ; consumer-count × {
///       bytes name ; u64 seen-time (i64) ; u64 active-time (i64, -1 = never)
///       u64 pel-count ; ID records   (each one a NACK of the group PEL)
///     }
///     v2: u64 nack-zone-count ; ID records   (unowned, in zone order)
///     v2: u64 time-count ; ID records   (the other NACKs, in time-list order)
///     v3: u64 policy-parts (bits: 1 MAXDELIVERIES, 2 ACKTIMEOUT, 4 CONSUMERTTL; 0 = no policy)
///         1: u64 n ; u64 target (0 DROP, 1 key) ; [target 1: bytes dlq-key]
///         2: u64 ms ; u64 backoff (f64 bits) ; u64 maxbackoff (0 = none)
///         4: u64 ttl
///   }
/// -- version 2 on: the IDMP state (8.6), after the groups --
/// u64 idmp-duration (s) ; u64 idmp-max-entries ; u64 iids-added ; u64 iids-duplicates
/// u64 producer-count
///   producer-count × { bytes pid ; u64 iid-count ; iid-count × { bytes iid ; u64 id.ms ; u64 id.seq } }
///   (producers in pid order, iids in insertion order, oldest first)
/// -- version 4 on: retention by age (issue 17), after the IDMP state --
/// u64 max-age-ms (0 = no retention) ; u64 max-age-flags (bit 1: EXACT; 0 without retention)
/// -- version 5 on: delayed delivery (issue 17), last: see [`save_delayed`] --
/// ```
///
/// How `n` records go out (see [`Records`]): version 7 packs them into strings of at most
/// [`CHUNK_BYTES`] (`ceil(n / per-chunk)` strings, every one full but the last; a PEL
/// record is 32 bytes: the ID, then the time and the count as 8 bytes little endian; an ID
/// record is the 16-byte ID). Version 6 and before: an item per field (a PEL record is
/// `bytes id ; u64 time ; u64 count`, an ID record `bytes id`). The built-in writes these
/// raw; a module's every item is an opcode and a length besides its value, and a stream
/// with many pending entries was mostly that framing to save, DUMP and load.
pub fn save(s: &Stream, out: &mut impl RdbOut) {
    save_as(s, out, ENCVER);
}

/// The largest string of records that version 7 writes: 32 KiB (1,024 PEL records, 2,048
/// IDs). Bounds what a save or a load holds at once whatever the PEL's size.
pub const CHUNK_BYTES: usize = 32 * 1024;

/// The records of one list of a group (see [`save`]): a PEL (ID, time, count) or a list of
/// IDs, written in the form of encoding `version`.
struct Records<'o, O: RdbOut> {
    out: &'o mut O,
    packed: bool,
    size: usize,
    buf: Vec<u8>,
}

impl<'o, O: RdbOut> Records<'o, O> {
    /// Puts the count, then is ready for `count` records of `size` bytes (32 or 16).
    fn start(out: &'o mut O, version: i32, count: usize, size: usize) -> Self {
        out.put_u64(count as u64);
        let packed = version >= 7;
        let cap = if packed { count.saturating_mul(size).min(CHUNK_BYTES) } else { 0 };
        Records { out, packed, size, buf: Vec::with_capacity(cap) }
    }
    fn id(&mut self, key: &[u8]) {
        if self.packed {
            self.buf.extend_from_slice(key);
            self.flush_full();
        } else {
            self.out.put_bytes(key);
        }
    }
    fn nack(&mut self, key: &[u8], time: i64, count: u64) {
        if self.packed {
            self.buf.extend_from_slice(key);
            self.buf.extend_from_slice(&time.to_le_bytes());
            self.buf.extend_from_slice(&count.to_le_bytes());
            self.flush_full();
        } else {
            self.out.put_bytes(key);
            self.out.put_u64(time as u64);
            self.out.put_u64(count);
        }
    }
    fn flush_full(&mut self) {
        if self.buf.len() + self.size > CHUNK_BYTES {
            self.out.put_bytes(&self.buf);
            self.buf.clear();
        }
    }
    fn finish(self) {
        if !self.buf.is_empty() {
            self.out.put_bytes(&self.buf);
        }
    }
}

/// Reads `count` records of `size` bytes written by [`Records`] in encoding `version`,
/// handing each to `each` (its bytes: the ID, then for a PEL record time and count). Version 7:
/// every string holds exactly the records it must (full chunks, then the rest); before, an
/// item per field. Nothing is allocated from `count`: only what a string read holds.
fn load_records(
    inp: &mut impl RdbIn,
    version: i32,
    count: u64,
    size: usize,
    what: &str,
    mut each: impl FnMut(&[u8]) -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    if version < 7 {
        let mut rec = [0u8; 32];
        for _ in 0..count {
            let id = inp.get_bytes()?;
            if id.len() != 16 {
                return Err(LoadError::Invalid(format!("{what} ID is not 16 bytes")));
            }
            rec[..16].copy_from_slice(&id);
            if size == 32 {
                rec[16..24].copy_from_slice(&inp.get_u64()?.to_le_bytes());
                rec[24..32].copy_from_slice(&inp.get_u64()?.to_le_bytes());
            }
            each(&rec[..size])?;
        }
        return Ok(());
    }
    let per_chunk = (CHUNK_BYTES / size) as u64;
    let mut left = count;
    while left > 0 {
        let want = left.min(per_chunk);
        let chunk = inp.get_bytes()?;
        if chunk.len() as u64 != want * size as u64 {
            return Err(LoadError::Invalid(format!("{what} records: a string of {} bytes where {want} records of {size} go", chunk.len())));
        }
        for rec in chunk.chunks_exact(size) {
            each(rec)?;
        }
        left -= want;
    }
    Ok(())
}

/// The three fields of a 32-byte PEL record.
fn nack_fields(rec: &[u8]) -> (StreamId, i64, u64) {
    let word = |at: usize| rec.get(at..at + 8).and_then(|b| <[u8; 8]>::try_from(b).ok()).unwrap_or_default();
    let id = rec.get(..16).and_then(StreamId::from_be_bytes).unwrap_or_default();
    (id, i64::from_le_bytes(word(16)), u64::from_le_bytes(word(24)))
}

/// [`save`] in encoding `version` (7 or 6: the form of the group records; tests write the
/// older encodings from version 6's items).
pub(crate) fn save_as(s: &Stream, out: &mut impl RdbOut, version: i32) {
    out.put_u64(s.rax_keys() as u64);
    // Packed nodes as they are (no decompression on save, no compression on load).
    for (master, lp) in s.stored_nodes() {
        out.put_bytes(&master.to_be_bytes());
        match lp.packed_parts() {
            Some(Ok((codec, plain_len, data))) => {
                out.put_u64(codec.tag());
                out.put_u64(plain_len as u64);
                out.put_bytes(&data);
            }
            Some(Err(e)) => {
                out.fail(&format!("node {master} of a stream: {e}"));
                out.put_u64(0);
                out.put_bytes(&crate::listpack::UNDECODABLE);
            }
            None => {
                out.put_u64(0);
                out.put_bytes(lp.as_bytes());
            }
        }
    }
    out.put_u64(s.length);
    out.put_u64(s.entries_added);
    put_id(out, s.last_id);
    put_id(out, s.first_id);
    put_id(out, s.max_deleted_entry_id);
    out.put_u64(s.group_count() as u64);
    if let Some(it) = s.groups_iter() {
        for (name, g) in it {
            out.put_bytes(name);
            put_id(out, g.last_id);
            out.put_u64(g.entries_read as u64);
            let mut r = Records::start(out, version, g.pel().len(), 32);
            let mut p = g.pel().iter();
            while let Some((k, n)) = p.next() {
                r.nack(k, n.delivery_time, n.delivery_count);
            }
            r.finish();
            out.put_u64(g.consumer_count() as u64);
            let mut ci = g.consumers();
            while let Some((_, c)) = ci.next_consumer() {
                out.put_bytes(&c.name);
                out.put_u64(c.seen_time as u64);
                out.put_u64(c.active_time as u64);
                let mut r = Records::start(out, version, c.pel().len(), 16);
                let mut p = c.pel().iter();
                while let Some((k, _)) = p.next() {
                    r.id(k);
                }
                r.finish();
            }
            let zone = g.nacked_count();
            let mut order = g.by_time();
            let mut r = Records::start(out, version, zone, 16);
            for (id, _) in order.by_ref().take(zone) {
                r.id(&id.to_be_bytes());
            }
            r.finish();
            let mut r = Records::start(out, version, g.pel().len() - zone, 16);
            for (id, _) in order {
                r.id(&id.to_be_bytes());
            }
            r.finish();
            save_policy(g.policy(), out);
        }
    }
    save_idmp(s, out);
    match s.max_age.as_deref() {
        Some(a) => {
            out.put_u64(a.ms);
            out.put_u64(u64::from(a.exact));
        }
        None => {
            out.put_u64(0);
            out.put_u64(0);
        }
    }
    save_delayed(s, out);
}

/// The delayed-delivery section (version 5, issue 17), last:
///
/// ```text
/// u64 record-count ; record-count × { u64 id.ms ; u64 id.seq ; u64 due (i64 unix ms) }   (ID order)
/// u64 scheduling-groups ; × { bytes group-name ; u64 n ; n × { u64 id.ms ; u64 id.seq } } (ID order)
/// ```
fn save_delayed(s: &Stream, out: &mut impl RdbOut) {
    match s.delayed.as_deref() {
        Some(m) => {
            out.put_u64(m.len() as u64);
            for (id, due) in m {
                put_id(out, *id);
                out.put_u64(*due as u64);
            }
        }
        None => out.put_u64(0),
    }
    // Names copied (the group iterator lends them): groups with a schedule only.
    let mut with: Vec<Vec<u8>> = Vec::new();
    if let Some(it) = s.groups_iter() {
        for (name, g) in it {
            if g.schedule().is_some() {
                with.push(name.to_vec());
            }
        }
    }
    out.put_u64(with.len() as u64);
    for name in with {
        let Some(sch) = s.group(&name).and_then(|g| g.schedule()) else { continue };
        out.put_bytes(&name);
        out.put_u64(sch.len() as u64);
        for id in sch.ids() {
            put_id(out, id);
        }
    }
}

/// Reads [`save_delayed`]'s section: records in increasing ID order, schedules of
/// existing groups (once each) naming recorded IDs at or before the group's last
/// ID, not pending, once each.
fn load_delayed(s: &mut Stream, inp: &mut impl RdbIn, deep: bool) -> Result<(), LoadError> {
    let invalid = |m: &str| LoadError::Invalid(m.to_string());
    let records = inp.get_u64()?;
    let mut prev: Option<StreamId> = None;
    for _ in 0..records {
        let id = get_id(inp)?;
        let due = inp.get_u64()? as i64;
        if prev.is_some_and(|p| id <= p) {
            return Err(invalid("delayed-entry records not in increasing ID order"));
        }
        prev = Some(id);
        s.record_delay(id, due);
    }
    let groups = inp.get_u64()?;
    for _ in 0..groups {
        let name = inp.get_bytes()?;
        let n = inp.get_u64()?;
        if s.group(&name).is_none_or(|g| g.schedule().is_some()) {
            return Err(invalid("schedule of a missing group, or listed twice"));
        }
        for _ in 0..n {
            let id = get_id(inp)?;
            let due = s.delay_of(id).ok_or_else(|| invalid("scheduled entry without a delayed-entry record"))?;
            let g = s.group_mut(&name).ok_or_else(|| invalid("group vanished"))?;
            if id > g.last_id || g.nack(id).is_some() || !g.schedule_entry(id, due) {
                return Err(invalid("scheduled entry after the group's last ID, pending, or listed twice"));
            }
        }
        if n == 0 {
            return Err(invalid("empty schedule"));
        }
    }
    crate::stream::delay::check_delayed(s, deep).map_err(invalid)
}

/// The IDMP section (version 2): always written, the defaults and zeros for a stream
/// that never used IDMP.
fn save_idmp(s: &Stream, out: &mut impl RdbOut) {
    let (duration, max) = s.idmp_window();
    out.put_u64(u64::from(duration));
    out.put_u64(u64::from(max));
    let Some(m) = s.idmp.as_deref() else {
        for _ in 0..3 {
            out.put_u64(0);
        }
        return;
    };
    out.put_u64(m.iids_added);
    out.put_u64(m.iids_duplicates);
    out.put_u64(m.pids_tracked() as u64);
    for (pid, p) in m.producers() {
        out.put_bytes(pid);
        out.put_u64(p.len() as u64);
        for (iid, id) in p.entries() {
            out.put_bytes(iid);
            put_id(out, id);
        }
    }
}

/// Reads the IDMP section. Checked either way (it is small and nothing else reads
/// it totally): window in range, producers non-empty and within the max, no pid or
/// iid twice. Loops run on what is read, never preallocated from a count.
fn load_idmp(s: &mut Stream, inp: &mut impl RdbIn) -> Result<(), LoadError> {
    let invalid = |m: &str| LoadError::Invalid(m.to_string());
    let duration = inp.get_u64()?;
    let max = inp.get_u64()?;
    if !(idmp::DURATION_S_MIN as u64..=idmp::DURATION_S_MAX as u64).contains(&duration)
        || !(idmp::MAX_ENTRIES_MIN as u64..=idmp::MAX_ENTRIES_MAX as u64).contains(&max)
    {
        return Err(invalid("IDMP window out of range"));
    }
    let mut m = Idmp::new(duration as u32, max as u32);
    m.iids_added = inp.get_u64()?;
    m.iids_duplicates = inp.get_u64()?;
    let producers = inp.get_u64()?;
    for _ in 0..producers {
        let pid = inp.get_bytes()?;
        if pid.is_empty() || m.has_producer(&pid) {
            return Err(invalid("IDMP producer ID empty or repeated"));
        }
        let n = inp.get_u64()?;
        if n == 0 || n > max {
            return Err(invalid("IDMP producer size out of range"));
        }
        for _ in 0..n {
            let iid = inp.get_bytes()?;
            let id = get_id(inp)?;
            if iid.is_empty() || !m.load_entry(&pid, &iid, id) {
                return Err(invalid("IDMP iid empty or repeated in a producer"));
            }
        }
    }
    m.check().map_err(invalid)?;
    if !m.is_default() {
        s.idmp = Some(Box::new(m));
    }
    Ok(())
}

const POLICY_MAXDEL: u64 = 1;
const POLICY_ACKTIMEOUT: u64 = 2;
const POLICY_TTL: u64 = 4;

fn save_policy(p: Option<&QueuePolicy>, out: &mut impl RdbOut) {
    let Some(p) = p else {
        out.put_u64(0);
        return;
    };
    let parts = if p.max_deliveries.is_some() { POLICY_MAXDEL } else { 0 }
        | if p.ack_timeout.is_some() { POLICY_ACKTIMEOUT } else { 0 }
        | if p.consumer_ttl.is_some() { POLICY_TTL } else { 0 };
    out.put_u64(parts);
    if let Some((n, t)) = &p.max_deliveries {
        out.put_u64(*n);
        match t {
            DeadLetter::Drop => out.put_u64(0),
            DeadLetter::Key(k) => {
                out.put_u64(1);
                out.put_bytes(k);
            }
        }
    }
    if let Some(at) = &p.ack_timeout {
        out.put_u64(at.ms as u64);
        out.put_u64(at.backoff.to_bits());
        out.put_u64(at.max_backoff.unwrap_or(0) as u64);
    }
    if let Some(t) = p.consumer_ttl {
        out.put_u64(t as u64);
    }
}

/// A policy as SETPOLICY could have set it, or an error.
fn load_policy(inp: &mut impl RdbIn) -> Result<Option<QueuePolicy>, LoadError> {
    let invalid = |m: &str| LoadError::Invalid(m.to_string());
    let parts = inp.get_u64()?;
    if parts == 0 {
        return Ok(None);
    }
    if parts & !(POLICY_MAXDEL | POLICY_ACKTIMEOUT | POLICY_TTL) != 0 {
        return Err(invalid("unknown queue policy part"));
    }
    let ms = |v: u64| (1..=MS_MAX as u64).contains(&v).then_some(v as i64);
    let mut p = QueuePolicy::default();
    if parts & POLICY_MAXDEL != 0 {
        let n = inp.get_u64()?;
        if n == 0 {
            return Err(invalid("MAXDELIVERIES 0"));
        }
        let t = match inp.get_u64()? {
            0 => DeadLetter::Drop,
            1 => DeadLetter::Key(inp.get_bytes()?.into()),
            _ => return Err(invalid("unknown dead-letter target")),
        };
        p.max_deliveries = Some((n, t));
    }
    if parts & POLICY_ACKTIMEOUT != 0 {
        let t = ms(inp.get_u64()?).ok_or_else(|| invalid("ACKTIMEOUT out of range"))?;
        let f = f64::from_bits(inp.get_u64()?);
        if !(f.is_finite() && (1.0..=BACKOFF_MAX).contains(&f)) {
            return Err(invalid("BACKOFF out of range"));
        }
        let m = match inp.get_u64()? {
            0 => None,
            v => Some(ms(v).filter(|&m| m >= t).ok_or_else(|| invalid("MAXBACKOFF out of range"))?),
        };
        p.ack_timeout = Some(AckTimeout { ms: t, backoff: f, max_backoff: m });
    }
    if parts & POLICY_TTL != 0 {
        p.consumer_ttl = Some(ms(inp.get_u64()?).ok_or_else(|| invalid("CONSUMERTTL out of range"))?);
    }
    Ok(Some(p))
}

/// Reads the next node: its key (above `prev`, the previous node's) and its listpack, a
/// compressed one as it is (its header and first element checked, or its claimed size only).
fn read_node(inp: &mut impl RdbIn, version: i32, prev: Option<StreamId>) -> Result<(StreamId, Listpack), LoadError> {
    let invalid = |m: &str| LoadError::Invalid(m.to_string());
    let key = inp.get_bytes()?;
    let master = StreamId::from_be_bytes(&key).ok_or_else(|| invalid("node key is not 16 bytes"))?;
    if prev.is_some_and(|p| master <= p) {
        return Err(invalid("node keys not increasing"));
    }
    let codec = if version >= 6 { inp.get_u64()? } else { 0 };
    let lp = if codec == 0 {
        Listpack::from_vec(inp.get_bytes()?, false)
    } else {
        // A compressed node, kept compressed, taken here with its claimed size checked
        // only. Deep: the check decompresses the block once (a copy, dropped at once) and
        // refuses one that does not decode to exactly its size or whose bytes break any
        // rule. Shallow: as the built-in takes its own files' node bodies; a block that does
        // not decode reads as a node with no entry (listpack::UNDECODABLE), which the core
        // reads totally.
        let codec = Codec::from_tag(codec).ok_or_else(|| invalid("unknown node codec"))?;
        let plain_len = usize::try_from(inp.get_u64()?).map_err(|_| invalid("node size out of range"))?;
        Listpack::from_packed_unchecked(codec, plain_len, inp.get_bytes()?)
    }
    .map_err(|e| LoadError::Invalid(format!("listpack: {e}")))?;
    if !lp.is_packed() && lp.first().is_none() {
        // (from_packed checked a packed one.) As rdbLoadObject (the deep check refuses it too, later).
        return Err(invalid("empty listpack inside stream"));
    }
    Ok((master, lp))
}

/// Reads `nodes` nodes into `s`, each checked as soon as it is read when `check` is given
/// (while its bytes are in the CPU's caches), and tiered while loading when `tier` is on.
fn load_nodes(
    s: &mut Stream,
    inp: &mut impl RdbIn,
    nodes: u64,
    version: i32,
    mut check: Option<&mut StreamCheck>,
    tier: bool,
) -> Result<(), LoadError> {
    // Tiering while loading (`xstream.tier-dir`, a server's load): a node is sealed once the
    // next one is read (the last stays). The newest sealed nodes that fit what is left of the
    // load's budget stay in RAM, as the background step keeps them (the tail's neighbours are
    // what reads want): each sealed node is kept, and the oldest kept go to disk while the kept
    // ones are over the budget. RAM holds at most the budget and one node more.
    let room = if tier { crate::tier::cold::load_budget_left() } else { 0 };
    let mut kept: std::collections::VecDeque<(StreamId, u64)> = std::collections::VecDeque::new();
    let mut kept_bytes = 0u64;
    let mut prev: Option<StreamId> = None;
    // No preallocation from `nodes`: each iteration reads real bytes or fails.
    for _ in 0..nodes {
        let (master, lp) = read_node(inp, version, prev)?;
        if let Some(check) = check.as_deref_mut() {
            // Every element and the node's structure, in one pass.
            check.node(master, &lp).map_err(|e| LoadError::Invalid(e.to_string()))?;
        }
        s.insert_node(master, lp);
        if tier {
            if let Some(sealed) = prev {
                let bytes = s.node_stored_bytes(sealed) as u64;
                kept.push_back((sealed, bytes));
                kept_bytes += bytes;
                while kept_bytes > room {
                    let Some((oldest, b)) = kept.pop_front() else { break };
                    kept_bytes -= b;
                    // A write that fails keeps the node in RAM (counted by the store's handle).
                    let _ = s.tier_node(oldest);
                }
            }
        }
        prev = Some(master);
    }
    if tier {
        crate::tier::cold::load_kept(kept_bytes);
    }
    Ok(())
}

/// From this many nodes on, a deep load checks the nodes on a second thread while this one
/// reads the next ones (RESTORE of a 1M-entry stream, 10,000 nodes: the check was 20 of its
/// 61 ms). Below it, starting a thread (tens of microseconds) costs more than it saves.
pub const CHECK_ASIDE_MIN_NODES: u64 = 128;

/// Nodes handed to the checking thread at a time, and batches in flight: bounds the nodes
/// read and not yet checked (640 nodes: 2.5 MB of 4 KB nodes, bytes the stream holds once
/// loaded), and wakes the thread once per batch (a wake-up costs microseconds: 32 at a time
/// measured a little slower on the 1M-entry RESTORE, within the run's noise).
const CHECK_BATCH: usize = 128;
const CHECK_QUEUE: usize = 4;

/// A deep load of a big stream: this thread reads the nodes (in a server, Redis's decoding of
/// the payload: LZF, lengths) and inserts them once checked; a scoped thread runs the same
/// check as [`load_nodes`], node by node in key order, on batches it is handed and hands back.
/// Nothing is inserted before it is checked, and the first error in key order is the one
/// returned, as when checking inline: a node's failed check comes before any read error of a
/// later node. The thread allocates through the same allocator (Redis's is thread-safe) and
/// touches no server state; it is joined before this returns. If it cannot be started, the
/// nodes are checked here.
fn load_nodes_checking_aside(s: &mut Stream, inp: &mut impl RdbIn, nodes: u64, version: i32) -> Result<StreamCheck, LoadError> {
    type Batch = Vec<(StreamId, Listpack)>;
    std::thread::scope(|scope| {
        let (to_check, inbox) = std::sync::mpsc::sync_channel::<Batch>(CHECK_QUEUE);
        let (to_insert, checked) = std::sync::mpsc::channel::<Batch>();
        let worker = std::thread::Builder::new().name("xstream-check".into()).spawn_scoped(scope, move || {
            let mut check = StreamCheck::default();
            for batch in inbox {
                for (master, lp) in &batch {
                    check.node(*master, lp)?;
                }
                if to_insert.send(batch).is_err() {
                    break;
                }
            }
            Ok::<StreamCheck, crate::stream::validate::Invalid>(check)
        });
        let Ok(worker) = worker else {
            let mut check = StreamCheck::default();
            load_nodes(s, inp, nodes, version, Some(&mut check), false)?;
            return Ok(check);
        };
        // The nodes read and not yet handed over: on a read error they go to the check too
        // (one of them may fail it, and that error comes first in key order).
        let mut batch = Vec::with_capacity(CHECK_BATCH);
        let mut read = || -> Result<(), LoadError> {
            let mut prev = None;
            for _ in 0..nodes {
                let (master, lp) = read_node(inp, version, prev)?;
                prev = Some(master);
                batch.push((master, lp));
                if batch.len() == CHECK_BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(CHECK_BATCH));
                    if to_check.send(full).is_err() {
                        // The check failed and stopped: its error is the one returned.
                        return Ok(());
                    }
                }
                while let Ok(done) = checked.try_recv() {
                    insert_all(s, done);
                }
            }
            Ok(())
        };
        let read = read();
        if !batch.is_empty() {
            // Fails only if the check stopped on an error, which is then the one returned.
            let _ = to_check.send(batch);
        }
        drop(to_check);
        let check = match worker.join() {
            Ok(check) => check,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        let check = check.map_err(|e| LoadError::Invalid(e.to_string()))?;
        read?;
        for done in checked.try_iter() {
            insert_all(s, done);
        }
        Ok(check)
    })
}

fn insert_all(s: &mut Stream, batch: Vec<(StreamId, Listpack)>) {
    for (master, lp) in batch {
        s.insert_node(master, lp);
    }
}

/// Reads a stream written with encoding `encver`, checking it as `check` says.
///
/// One function for every version: version 2 adds sections (the IDMP state after the
/// groups), read only when `version >= 2`; version 3 the group policies, version 4
/// the retention by age.
pub fn load(encver: i32, inp: &mut impl RdbIn, check: Check) -> Result<Stream, LoadError> {
    load_aside_from(encver, inp, check, CHECK_ASIDE_MIN_NODES)
}

/// [`load`], checking on a second thread from `aside_from` nodes on (tests: 0 and never, to
/// prove the two ways load and refuse alike).
fn load_aside_from(encver: i32, inp: &mut impl RdbIn, check: Check, aside_from: u64) -> Result<Stream, LoadError> {
    if !(1..=ENCVER).contains(&encver) {
        return Err(LoadError::Version(encver));
    }
    let version = encver;
    let invalid = |m: &str| LoadError::Invalid(m.to_string());
    let nodes = inp.get_u64()?;
    let mut s = Stream::new();
    let deep = check == Check::Deep;
    // Deep: each node is checked as soon as it is read, while its bytes are in the caches (on a
    // second thread for a big stream).
    let mut checked = StreamCheck::default();
    let tier = crate::tier::cold::tier_on_load();
    if deep && !tier && nodes >= aside_from {
        checked = load_nodes_checking_aside(&mut s, inp, nodes, version)?;
    } else {
        load_nodes(&mut s, inp, nodes, version, deep.then_some(&mut checked), tier)?;
    }
    s.length = inp.get_u64()?;
    s.entries_added = inp.get_u64()?;
    s.last_id = get_id(inp)?;
    s.first_id = get_id(inp)?;
    s.max_deleted_entry_id = get_id(inp)?;
    let groups = inp.get_u64()?;
    for _ in 0..groups {
        let name = inp.get_bytes()?;
        let last_id = get_id(inp)?;
        // Any value: the built-in's counter can wrap (XSETID ENTRIESADDED near 2^63).
        let entries_read = inp.get_u64()? as i64;
        if !s.create_group(&name, last_id, entries_read) {
            return Err(invalid("duplicate group name"));
        }
        let g = s.group_mut(&name).ok_or_else(|| invalid("group vanished"))?;
        let pel = inp.get_u64()?;
        load_records(inp, version, pel, 32, "PEL", |rec| {
            let (id, time, count) = nack_fields(rec);
            if g.load_nack(id, time, count) {
                Ok(())
            } else {
                Err(invalid("duplicate PEL entry"))
            }
        })?;
        let consumers = inp.get_u64()?;
        for _ in 0..consumers {
            let cname = inp.get_bytes()?;
            let seen = inp.get_u64()? as i64;
            let active = inp.get_u64()? as i64;
            let slot = g.load_consumer(&cname, seen, active).ok_or_else(|| invalid("duplicate consumer name"))?;
            let cpel = inp.get_u64()?;
            load_records(inp, version, cpel, 16, "PEL", |rec| match StreamId::from_be_bytes(rec) {
                Some(id) if g.load_owner(slot, id) => Ok(()),
                _ => Err(invalid("consumer PEL entry not in the group PEL, or owned twice")),
            })?;
        }
        if version >= 2 {
            let zone = inp.get_u64()?;
            load_records(inp, version, zone, 16, "NACK zone", |rec| match StreamId::from_be_bytes(rec) {
                Some(id) if g.load_zone(id) => Ok(()),
                _ => Err(invalid("NACK zone entry not an unowned PEL entry, or listed twice")),
            })?;
            let timed = inp.get_u64()?;
            load_records(inp, version, timed, 16, "time order", |rec| match StreamId::from_be_bytes(rec) {
                Some(id) if g.load_time(id) => Ok(()),
                _ => Err(invalid("time order entry not an owned PEL entry, or listed twice")),
            })?;
        }
        if version >= 3 {
            g.set_policy(load_policy(inp)?);
        }
        // Encoding 1 has no order: rebuilt as sorted insertions in ID order.
        g.load_finish(version < 2).map_err(invalid)?;
    }
    if version >= 2 {
        load_idmp(&mut s, inp)?;
    }
    if version >= 4 {
        let ms = inp.get_u64()?;
        let flags = inp.get_u64()?;
        if flags > 1 || (ms == 0 && flags != 0) || ms > crate::stream::retention::MAX_AGE_MS {
            return Err(invalid("MAXAGE section out of range"));
        }
        if ms > 0 {
            s.max_age = Some(Box::new(crate::stream::MaxAge::new(ms, flags == 1)));
        }
    }
    if deep {
        let done = checked.finish(&s).map_err(|e| LoadError::Invalid(e.to_string()));
        // Whatever the check read through a node's cache goes.
        s.release_caches();
        done?;
    }
    // After the nodes were validated: the deep check looks the records' entries up.
    if version >= 5 {
        load_delayed(&mut s, inp, deep)?;
    }
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
    fn fail(&mut self, why: &str) {
        self.items.push(VecItem::Bytes(format!("FAILED: {why}").into_bytes()));
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
    use crate::stream::{IdSpec, NackCount, NodeLimits, Trim, TrimStrategy, ENTRIES_READ_INVALID};

    fn sample() -> Stream {
        let mut s = Stream::new();
        let l = NodeLimits { entries_max: 3, bytes_max: 0 };
        for i in 1..=20u64 {
            let v = i.to_string();
            s.append(&[b"f", v.as_bytes(), b"g", b"x"], IdSpec::Explicit(StreamId::new(i, 0)), 0, l).unwrap();
        }
        s.delete_ids(&[StreamId::new(5, 0), StreamId::new(1, 0)]);
        s.trim(&Trim { strategy: TrimStrategy::MaxLen(15), approx: false, limit: 0 });
        s.create_group(b"g1", StreamId::new(9, 0), 7);
        s.create_group(b"g2", StreamId::MIN, ENTRIES_READ_INVALID);
        let g = s.group_mut(b"g1").unwrap();
        let a = g.create_consumer(b"alice", 100).unwrap();
        let b = g.create_consumer(b"bob", 200).unwrap();
        g.create_consumer(b"idle", 300).unwrap();
        g.deliver_new(StreamId::new(6, 0), a, 1000);
        g.deliver_new(StreamId::new(7, 0), b, 1001);
        g.deliver_new(StreamId::new(8, 0), a, 1002);
        g.deliver_new(StreamId::new(9, 0), b, 1003);
        g.claim(StreamId::new(9, 0), b, crate::stream::DeliveryTime::At(999), crate::stream::ClaimCount::Keep, false);
        // The NACK zone: 7-0 NACKed, 10-0 created by FORCE.
        g.nack_entry(StreamId::new(7, 0), NackCount::Fail, false);
        g.nack_entry(StreamId::new(10, 0), NackCount::Set(3), true);
        // v3: a queue policy on g1 (every part), none on g2.
        g.set_policy(Some(crate::stream::queue::QueuePolicy {
            max_deliveries: Some((3, crate::stream::queue::DeadLetter::Key(b"dlq"[..].into()))),
            ack_timeout: Some(crate::stream::queue::AckTimeout { ms: 100, backoff: 1.5, max_backoff: Some(5000) }),
            consumer_ttl: Some(60_000),
            counters: Default::default(),
            ttl_check_at: 0,
            ttl_scheduled_at: 0,
        }));
        // IDMP: a non-default window, two producers (one with an evicted iid), counters.
        let m = s.idmp_mut();
        m.configure(Some(30), Some(3));
        for (pid, iid, n) in [(&b"p1"[..], &b"a"[..], 6), (b"p1", b"b", 7), (b"p2", b"a", 8), (b"p1", b"c", 9), (b"p1", b"d", 10)] {
            m.record(pid, iid, StreamId::new(n, 0));
        }
        m.iids_duplicates = 4;
        s
    }

    fn order(g: &crate::stream::Group) -> Vec<(StreamId, crate::stream::Nack, Vec<u8>)> {
        g.by_time().map(|(id, n)| (id, *n, g.owner_name(n).to_vec())).collect()
    }

    /// `items` with item `i` changed by `v`: a number replaced by it, a string with one byte
    /// (at `v` modulo its length) flipped.
    fn mutated(items: &[VecItem], i: usize, v: u64) -> Vec<VecItem> {
        let mut m = items.to_vec();
        match &mut m[i] {
            VecItem::U64(x) => *x = v,
            VecItem::Bytes(b) => {
                let at = (v as usize) % b.len().max(1);
                if let Some(byte) = b.get_mut(at) {
                    *byte ^= (v as u8) | 1;
                }
            }
        }
        m
    }

    /// Every group of a loaded stream passes the former group check too (a lookup per entry:
    /// `Group::check_by_lookups`), which the walk that loading runs replaced.
    fn lookups_agree(s: &Stream) {
        if let Some(it) = s.groups_iter() {
            for (name, g) in it {
                g.check_by_lookups().unwrap_or_else(|e| panic!("group {name:?}: {e}"));
            }
        }
    }

    type Entries = Vec<(StreamId, Vec<(Vec<u8>, Vec<u8>)>)>;

    fn dump(s: &Stream) -> Entries {
        s.range(StreamId::MIN, StreamId::MAX, false).map(|e| (e.id(), e.fields())).collect()
    }

    #[test]
    fn round_trip() {
        let s = sample();
        let mut io = VecIo::default();
        save(&s, &mut io);
        let t = load(ENCVER, &mut io, Check::Deep).unwrap();
        assert_eq!(dump(&s), dump(&t));
        assert_eq!(
            (s.length, s.last_id, s.first_id, s.max_deleted_entry_id, s.entries_added),
            (t.length, t.last_id, t.first_id, t.max_deleted_entry_id, t.entries_added)
        );
        assert_eq!(s.rax_nodes(), t.rax_nodes());
        let (ga, gb) = (s.group(b"g1").unwrap(), t.group(b"g1").unwrap());
        assert_eq!(
            (ga.last_id, ga.entries_read, ga.pel().len(), ga.consumer_count()),
            (gb.last_id, gb.entries_read, gb.pel().len(), gb.consumer_count())
        );
        let n = gb.nack(StreamId::new(8, 0)).unwrap();
        assert_eq!((n.delivery_time, n.delivery_count, gb.owner_name(n)), (1002, 1, &b"alice"[..]));
        assert_eq!(t.group(b"g2").unwrap().entries_read, ENTRIES_READ_INVALID);
        gb.check().unwrap();
        // The time list: the zone (7-0, 10-0), then 9-0 (claimed at 999), 6-0, 8-0.
        let want: Vec<u64> = vec![7, 10, 9, 6, 8];
        assert_eq!(order(ga).iter().map(|x| x.0.ms).collect::<Vec<_>>(), want);
        assert_eq!(order(ga), order(gb));
        assert_eq!(gb.nacked_count(), 2);
        assert_eq!(ga.policy(), gb.policy());
        assert!(gb.policy().is_some() && t.group(b"g2").unwrap().policy().is_none());
        assert_eq!(s.idmp, t.idmp);
        let m = t.idmp.as_deref().unwrap();
        assert_eq!((m.duration_s, m.max_entries, m.iids_added, m.iids_duplicates, m.iids_tracked()), (30, 3, 5, 4, 4));
        let order: Vec<String> = m
            .producers()
            .flat_map(|(p, pr)| pr.entries().map(move |(i, id)| format!("{}/{}/{}", p.escape_ascii(), i.escape_ascii(), id.ms)))
            .collect();
        assert_eq!(order, ["p1/b/7", "p1/c/9", "p1/d/10", "p2/a/8"]);
        // A stream that never used IDMP comes back without an Idmp.
        let mut plain = Stream::new();
        plain.append(&[b"f", b"v"], IdSpec::Explicit(StreamId::new(1, 0)), 0, NodeLimits::default()).unwrap();
        let mut io = VecIo::default();
        save(&plain, &mut io);
        assert!(load(ENCVER, &mut io, Check::Deep).unwrap().idmp.is_none());
    }

    /// A group of 3,000 pending entries (owned by two consumers, 500 NACKed, claimed out of ID
    /// order): version 7 writes each list in strings of at most CHUNK_BYTES, the same stream
    /// loads back from version 7 and from version 6, and a string of the wrong size, a
    /// missing one or an extra one is refused.
    #[test]
    fn version_7_packs_group_records_in_chunks() {
        let mut s = Stream::new();
        for i in 1..=3000u64 {
            s.append(&[b"f", b"v"], IdSpec::Explicit(StreamId::new(i, 0)), 0, NodeLimits::default()).unwrap();
        }
        s.create_group(b"g", StreamId::MIN, 0);
        let g = s.group_mut(b"g").unwrap();
        let (a, b) = (g.create_consumer(b"a", 1).unwrap(), g.create_consumer(b"b", 2).unwrap());
        for i in 1..=3000u64 {
            g.deliver_new(StreamId::new(i, 0), if i % 3 == 0 { b } else { a }, 1000 + i as i64);
        }
        for i in (1..=3000u64).step_by(6) {
            g.nack_entry(StreamId::new(i, 0), NackCount::Set(i), false);
        }
        for i in (2..=3000u64).step_by(7) {
            g.claim(StreamId::new(i, 0), b, crate::stream::DeliveryTime::At(7 + i as i64), crate::stream::ClaimCount::Set(u64::MAX - i), false);
        }
        let mut io = VecIo::default();
        save(&s, &mut io);
        let items = io.items.clone();
        let sizes: Vec<usize> = items.iter().filter_map(|it| if let VecItem::Bytes(b) = it { Some(b.len()) } else { None }).collect();
        assert!(sizes.iter().all(|&n| n <= CHUNK_BYTES));
        // The PEL: 2 full strings of 1,024 records and one of 952.
        assert!(sizes.windows(3).any(|w| w == [CHUNK_BYTES, CHUNK_BYTES, 952 * 32]), "{sizes:?}");
        let same = |t: &Stream| {
            let (ga, gb) = (s.group(b"g").unwrap(), t.group(b"g").unwrap());
            gb.check().unwrap();
            assert_eq!(order(ga), order(gb));
            assert_eq!(ga.nacked_count(), gb.nacked_count());
            let owned = |g: &crate::stream::Group| {
                let (mut v, mut it) = (Vec::new(), g.consumers());
                while let Some((_, c)) = it.next_consumer() {
                    v.push((c.name.to_vec(), c.pel().len()));
                }
                v
            };
            assert_eq!(owned(ga), owned(gb));
        };
        same(&load(ENCVER, &mut VecIo { items: items.clone(), pos: 0 }, Check::Deep).unwrap());
        same(&load(6, &mut VecIo { items: save_v6(&s), pos: 0 }, Check::Deep).unwrap());
        assert!(items.len() * 100 < save_v6(&s).len(), "{} items against {}", items.len(), save_v6(&s).len());
        let first_chunk = items.iter().position(|it| matches!(it, VecItem::Bytes(b) if b.len() == CHUNK_BYTES)).unwrap();
        let refused = |m: Vec<VecItem>| load(ENCVER, &mut VecIo { items: m, pos: 0 }, Check::Deep).is_err();
        let mut m = items.clone();
        let VecItem::Bytes(b) = &mut m[first_chunk] else { unreachable!() };
        b.truncate(CHUNK_BYTES - 32);
        assert!(refused(m));
        let mut m = items.clone();
        m.remove(first_chunk);
        assert!(refused(m));
        let mut m = items.clone();
        m.insert(first_chunk, items[first_chunk].clone());
        assert!(refused(m));
        // Two records swapped inside a string: still a valid PEL (the loader sorts nothing
        // out of it but the IDs' set), and it loads.
        let mut m = items.clone();
        let VecItem::Bytes(b) = &mut m[first_chunk] else { unreachable!() };
        let (x, y) = b.split_at_mut(32);
        x.swap_with_slice(&mut y[..32]);
        assert!(!refused(m));
        // One record's ID made another's: a duplicate PEL entry.
        let mut m = items.clone();
        let VecItem::Bytes(b) = &mut m[first_chunk] else { unreachable!() };
        let id = b[..16].to_vec();
        b[32..48].copy_from_slice(&id);
        assert_eq!(load(ENCVER, &mut VecIo { items: m, pos: 0 }, Check::Deep).err(), Some(LoadError::Invalid("duplicate PEL entry".into())));
    }

    /// The version-6 items of `s`: version 7 with an item per field of each group record.
    fn save_v6(s: &Stream) -> Vec<VecItem> {
        let mut io = VecIo::default();
        save_as(s, &mut io, 6);
        io.items
    }

    /// The version-5 items of `s`: version 6 without the per-node codec tags (plain nodes).
    fn save_v5(s: &Stream) -> Vec<VecItem> {
        let mut items = save_v6(s);
        for i in (0..s.rax_keys()).rev() {
            let at = 2 + 3 * i;
            assert_eq!(items[at], VecItem::U64(0), "node {i} is plain");
            items.remove(at);
        }
        items
    }

    /// The version-4 items of `s`: version 5 without its (empty) delayed-delivery section.
    fn save_v4(s: &Stream) -> Vec<VecItem> {
        let mut items = save_v5(s);
        let n = items.len();
        assert_eq!(items[n - 2..], [VecItem::U64(0), VecItem::U64(0)], "no delayed entries");
        items.truncate(n - 2);
        items
    }

    #[test]
    fn version_1_has_no_idmp_section_and_bad_idmp_sections_are_refused() {
        let s = sample();
        let io = VecIo { items: save_v4(&s), pos: 0 };
        let items = io.items.clone();
        // The IDMP section is the tail before v4's retention (2 items): 5 counters/window
        // items, then 2 producers.
        let at = items.len() - (5 + 2 + 3 * 3 + 2 + 3) - 2;
        // Version 1: the same stream without its groups (whose version-2 sections version 1
        // does not have) and without the IDMP tail loads with no IDMP state.
        let mut groupless = s.clone();
        groupless.clear_groups();
        let io1 = VecIo { items: save_v4(&groupless), pos: 0 };
        let cut = io1.items.len() - (5 + 2 + 3 * 3 + 2 + 3) - 2;
        let v1 = load(1, &mut VecIo { items: io1.items[..cut].to_vec(), pos: 0 }, Check::Deep).unwrap();
        assert!(v1.idmp.is_none());
        assert_eq!(v1.length, s.length);
        let mutate = |i: usize, v: VecItem| {
            let mut m = items.clone();
            m[i] = v;
            load(4, &mut VecIo { items: m, pos: 0 }, Check::Shallow).err()
        };
        let bad = |m: &str| Some(LoadError::Invalid(m.into()));
        assert_eq!(mutate(at, VecItem::U64(0)), bad("IDMP window out of range"));
        assert_eq!(mutate(at + 1, VecItem::U64(10_001)), bad("IDMP window out of range"));
        // A producer larger than the max, a repeated iid, a repeated pid.
        assert_eq!(mutate(at + 6, VecItem::U64(4)), bad("IDMP producer size out of range"));
        assert_eq!(mutate(at + 10, VecItem::Bytes(b"b".to_vec())), bad("IDMP iid empty or repeated in a producer"));
        assert_eq!(mutate(at + 16, VecItem::Bytes(b"p1".to_vec())), bad("IDMP producer ID empty or repeated"));
        // A producer count far beyond the input: refused on the first missing item.
        assert_eq!(mutate(at + 4, VecItem::U64(u64::MAX)), Some(LoadError::Io));
    }

    #[test]
    fn version_4_retention_round_trips_and_version_3_loads_without_it() {
        let mut s = sample();
        s.max_age = Some(Box::new(crate::stream::MaxAge::new(60_000, true)));
        let io = VecIo { items: save_v4(&s), pos: 0 };
        let n = io.items.len();
        assert_eq!(io.items[n - 2..], [VecItem::U64(60_000), VecItem::U64(1)]);
        let t = load(4, &mut VecIo { items: io.items.clone(), pos: 0 }, Check::Deep).unwrap();
        let a = t.max_age.unwrap();
        assert_eq!((a.ms, a.exact, a.indexed_due_ms), (60_000, true, 0));
        // Without retention: two zeros.
        let mut plain = VecIo { items: save_v4(&sample()), pos: 0 };
        let m = plain.items.len();
        assert_eq!(plain.items[m - 2..], [VecItem::U64(0), VecItem::U64(0)]);
        assert!(load(4, &mut plain, Check::Deep).unwrap().max_age.is_none());
        // A version 3 payload is a version 4 one without the section.
        let v3 = io.items[..n - 2].to_vec();
        let t = load(3, &mut VecIo { items: v3, pos: 0 }, Check::Deep).unwrap();
        assert!(t.max_age.is_none());
        assert_eq!(dump(&s), dump(&t));
        // Bad sections are refused; a missing one is an I/O error.
        for (ms, flags) in [(0, 1), (5, 2), (u64::MAX, 0)] {
            let mut items = io.items.clone();
            items[n - 2] = VecItem::U64(ms);
            items[n - 1] = VecItem::U64(flags);
            assert_eq!(load(4, &mut VecIo { items, pos: 0 }, Check::Deep).err(), Some(LoadError::Invalid("MAXAGE section out of range".into())));
        }
        assert_eq!(load(4, &mut VecIo { items: io.items[..n - 1].to_vec(), pos: 0 }, Check::Deep).err(), Some(LoadError::Io));
    }

    #[test]
    fn version_5_delayed_delivery_round_trips_and_bad_sections_are_refused() {
        let mut s = sample();
        // The sample's last entries, delayed; group "g1" passes over them.
        let ids: Vec<StreamId> = s.range(StreamId::MIN, StreamId::MAX, false).map(|e| e.id()).collect();
        let n = ids.len();
        let (a, b) = (ids[n - 2], ids[n - 1]);
        s.record_delay(a, 5_000);
        s.record_delay(b, 4_000);
        s.create_group(b"late", b, 0);
        assert!(s.schedule_existing(b"late", a));
        assert!(s.schedule_existing(b"late", b));
        let mut io = VecIo::default();
        save(&s, &mut io);
        let t = load(ENCVER, &mut VecIo { items: io.items.clone(), pos: 0 }, Check::Deep).unwrap();
        assert_eq!(t.delayed, s.delayed);
        assert_eq!(t.group(b"late").unwrap().schedule(), s.group(b"late").unwrap().schedule());
        let shallow = load(ENCVER, &mut VecIo { items: io.items.clone(), pos: 0 }, Check::Shallow).unwrap();
        assert_eq!(shallow.group(b"late").unwrap().scheduled_count(), 2);
        // Every truncation is an I/O error; a mutation of the section refused or consistent.
        let m = io.items.len();
        for cut in m - 12..m {
            assert_eq!(load(ENCVER, &mut VecIo { items: io.items[..cut].to_vec(), pos: 0 }, Check::Deep).err(), Some(LoadError::Io));
        }
        for i in m - 12..m {
            for v in [VecItem::U64(0), VecItem::U64(1), VecItem::U64(u64::MAX), VecItem::Bytes(b"late".to_vec()), VecItem::Bytes(b"x".to_vec())] {
                let mut items = io.items.clone();
                items[i] = v;
                if let Ok(t) = load(ENCVER, &mut VecIo { items, pos: 0 }, Check::Deep) {
                    crate::stream::delay::check_delayed(&t, true).unwrap();
                }
            }
        }
        // A record of an entry that does not exist: refused by the deep check only.
        let mut u = sample();
        u.record_delay(StreamId::new(999_999, 0), 1);
        let mut io = VecIo::default();
        save(&u, &mut io);
        assert!(load(ENCVER, &mut VecIo { items: io.items.clone(), pos: 0 }, Check::Deep).is_err());
        assert!(load(ENCVER, &mut VecIo { items: io.items, pos: 0 }, Check::Shallow).is_ok());
    }

    #[test]
    fn version_2_payload_still_loads_without_policies() {
        // A v2 payload is a v3 one without the per-group policy word.
        let mut s = sample();
        s.group_mut(b"g1").unwrap().set_policy(None);
        let io = VecIo { items: save_v4(&s), pos: 0 };
        // Every group's policy word is a 0 just before the next group's name (or the end).
        let mut items = io.items.clone();
        // (v4's retention section, the last two items, goes first.)
        items.truncate(items.len() - 2);
        let mut cut = Vec::new();
        let groups_at = 1 + 2 * s.rax_keys() + 2 + 6;
        let mut at = groups_at + 1;
        for _ in 0..s.group_count() {
            // Walk one group: name, last-id (2), entries-read, pel, consumers, zone, time.
            at += 4;
            let VecItem::U64(pel) = items[at] else { panic!() };
            at += 1 + 3 * pel as usize;
            let VecItem::U64(cons) = items[at] else { panic!() };
            at += 1;
            for _ in 0..cons {
                at += 3;
                let VecItem::U64(n) = items[at] else { panic!() };
                at += 1 + n as usize;
            }
            for _ in 0..2 {
                let VecItem::U64(n) = items[at] else { panic!() };
                at += 1 + n as usize;
            }
            assert_eq!(items[at], VecItem::U64(0));
            cut.push(at);
            at += 1;
        }
        for &i in cut.iter().rev() {
            items.remove(i);
        }
        let t = load(2, &mut VecIo { items, pos: 0 }, Check::Deep).unwrap();
        assert_eq!(dump(&s), dump(&t));
        assert_eq!(order(s.group(b"g1").unwrap()), order(t.group(b"g1").unwrap()));
    }

    #[test]
    fn every_truncation_and_item_mutation_is_refused_or_valid() {
        let s = sample();
        let mut io = VecIo::default();
        save(&s, &mut io);
        let items = io.items.clone();
        for n in 0..items.len() {
            let mut t = VecIo { items: items[..n].to_vec(), pos: 0 };
            assert!(load(ENCVER, &mut t, Check::Deep).is_err(), "prefix {n} accepted");
        }
        let specials = [0u64, 1, 15, 16, 17, u32::MAX as u64, 1 << 32, 1 << 63, u64::MAX];
        for i in 0..items.len() {
            for &v in &specials {
                let m = mutated(&items, i, v);
                let mut t = VecIo { items: m, pos: 0 };
                if let Ok(st) = load(ENCVER, &mut t, Check::Deep) {
                    crate::stream::validate::validate_stream(&st).unwrap();
                    lookups_agree(&st);
                    let _ = dump(&st);
                }
            }
        }
        assert_eq!(load(ENCVER + 1, &mut VecIo::default(), Check::Deep).err(), Some(LoadError::Version(ENCVER + 1)));
    }

    /// A stream of 200 nodes (two entries each), with groups: enough for the check on a second
    /// thread to get a batch or more.
    fn big_sample() -> Stream {
        let mut s = sample();
        let l = NodeLimits { entries_max: 2, bytes_max: 0 };
        for i in 21..=420u64 {
            let v = (i * 7).to_string();
            let fields: &[&[u8]] = if i % 5 == 0 { &[b"other", v.as_bytes()] } else { &[b"f", v.as_bytes(), b"g", b"x"] };
            s.append(fields, IdSpec::Explicit(StreamId::new(i, i % 3)), 0, l).unwrap();
        }
        s.delete_ids(&[StreamId::new(100, 1), StreamId::new(300, 0)]);
        s
    }

    /// The check on a second thread accepts and refuses exactly what the inline one does, with
    /// the same error (the first in key order): on every truncation and on mutations of every
    /// item of a 200-node payload.
    #[test]
    fn checking_aside_loads_and_refuses_as_checking_inline() {
        let s = big_sample();
        assert!(s.rax_keys() >= 200);
        let mut io = VecIo::default();
        save(&s, &mut io);
        let items = io.items.clone();
        let both = |items: Vec<VecItem>| {
            let aside = load_aside_from(ENCVER, &mut VecIo { items: items.clone(), pos: 0 }, Check::Deep, 0);
            let inline = load_aside_from(ENCVER, &mut VecIo { items, pos: 0 }, Check::Deep, u64::MAX);
            match (aside, inline) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(dump(&a), dump(&b));
                    lookups_agree(&a);
                    assert_eq!((a.length, a.rax_keys()), (b.length, b.rax_keys()));
                    true
                }
                (a, b) => {
                    assert_eq!(a.err(), b.err());
                    false
                }
            }
        };
        assert!(both(items.clone()));
        let t = load(ENCVER, &mut VecIo { items: items.clone(), pos: 0 }, Check::Deep).unwrap();
        assert_eq!(dump(&s), dump(&t));
        for n in (0..items.len()).step_by(7) {
            assert!(!both(items[..n].to_vec()), "prefix {n} accepted");
        }
        let mut refused = 0;
        for i in 0..items.len() {
            for v in [0u64, 3, 17, 1 << 63] {
                let m = mutated(&items, i, v);
                refused += usize::from(!both(m));
            }
        }
        assert!(refused > items.len(), "{refused} mutations refused");
        // A bad node early, then a payload cut short: the node's error, as inline.
        let mut m = items.clone();
        let bad = m.iter().position(|it| matches!(it, VecItem::Bytes(b) if b.len() > 16)).unwrap();
        if let VecItem::Bytes(b) = &mut m[bad] {
            let last = b.len() - 2;
            b[last] ^= 0x40;
        }
        // Cut a few items later, many nodes later (more than a batch), anywhere: a batch
        // not yet full when the read fails is checked all the same.
        for cut in [bad + 1, bad + 4, bad + 40, bad + 3 * CHECK_BATCH + 5, m.len() / 2, m.len() - 1] {
            let cut = m[..cut.min(m.len() - 1)].to_vec();
            let err = load(ENCVER, &mut VecIo { items: cut.clone(), pos: 0 }, Check::Deep).err();
            assert!(matches!(err, Some(LoadError::Invalid(_))), "{} items: {err:?}", cut.len());
            assert!(!both(cut));
        }
    }

    #[test]
    fn shallow_checks_headers_counts_and_groups_only() {
        let s = sample();
        let io = VecIo { items: save_v4(&s), pos: 0 };
        let items = io.items.clone();
        let load_with = |items: &[VecItem], check| load(4, &mut VecIo { items: items.to_vec(), pos: 0 }, check);
        let t = load_with(&items, Check::Shallow).unwrap();
        assert_eq!(dump(&s), dump(&t));
        // A node body broken after its first element: deep refuses, shallow takes it.
        let VecItem::Bytes(node) = &items[2] else { panic!("node 1 is item 2") };
        let mut bad = node.clone();
        let at = bad.len() - 3;
        bad[at] = 0xF7; // an unknown encoding
        let mut m = items.clone();
        m[2] = VecItem::Bytes(bad);
        assert!(matches!(load_with(&m, Check::Deep), Err(LoadError::Invalid(_))));
        let t = load_with(&m, Check::Shallow).unwrap();
        let _ = dump(&t); // total: whatever it reads, it returns
                          // Refused either way: a bad header, an empty node.
        let mut m = items.clone();
        let VecItem::Bytes(b) = &mut m[2] else { panic!() };
        b[0] ^= 1;
        assert!(load_with(&m, Check::Shallow).is_err());
        let mut m = items.clone();
        m[2] = VecItem::Bytes(Listpack::new().into_vec());
        assert_eq!(load_with(&m, Check::Shallow).err(), Some(LoadError::Invalid("empty listpack inside stream".into())));
        // Taken as it is, as the built-in takes it: a length that disagrees with the nodes.
        let length_at = 1 + 2 * s.rax_keys();
        let mut m = items.clone();
        m[length_at] = VecItem::U64(s.length + 1);
        assert!(matches!(load_with(&m, Check::Deep), Err(LoadError::Invalid(_))));
        assert_eq!(load_with(&m, Check::Shallow).map(|t| t.length), Ok(s.length + 1));
    }

    #[test]
    fn version_6_keeps_packed_nodes_packed_and_refuses_bad_blocks() {
        crate::stream::set_compression(true);
        let mut s = Stream::new();
        let l = NodeLimits { entries_max: 0, bytes_max: 4096 };
        for i in 1..=400u64 {
            let v = format!("{{\"user\":\"u{}\",\"action\":\"click\",\"ts\":{}}}", i % 13, 1_700_000_000_000u64 + i);
            s.append(&[b"data", v.as_bytes()], IdSpec::Explicit(StreamId::new(i, 0)), 0, l).unwrap();
        }
        s.pack_queued(usize::MAX, || true);
        crate::stream::set_compression(false);
        let packed = s.packed_nodes();
        assert!(packed >= 3 && packed == s.rax_keys() as u64 - 1, "{packed}");
        let mut io = VecIo::default();
        save(&s, &mut io);
        // Node 1: key, codec 1 (LZ4), plain size, block; the last node is plain (codec 0).
        assert_eq!(io.items[2], VecItem::U64(1));
        let items = io.items.clone();
        for check in [Check::Deep, Check::Shallow] {
            let before = crate::listpack::cache_fills();
            let mut t = load(ENCVER, &mut VecIo { items: items.clone(), pos: 0 }, check).unwrap();
            // Loaded without recompression, and the deep check's caches are gone; what the
            // module does next with compression on (packing the plain sealed nodes) opens none.
            crate::stream::set_compression(true);
            t.pack_sealed();
            crate::stream::set_compression(false);
            assert_eq!(crate::listpack::cache_fills(), before);
            assert_eq!(t.packed_nodes(), packed);
            assert_eq!(dump(&s), dump(&t));
            t.release_caches();
            s.release_caches();
            assert_eq!(crate::listpack::cache_fills(), 0);
        }
        let bad = |m: Vec<VecItem>| load(ENCVER, &mut VecIo { items: m, pos: 0 }, Check::Deep).err();
        let mut m = items.clone();
        m[2] = VecItem::U64(7);
        assert_eq!(bad(m), Some(LoadError::Invalid("unknown node codec".into())));
        let mut m = items.clone();
        let VecItem::U64(n) = m[3] else { panic!("plain size") };
        m[3] = VecItem::U64(n + 1);
        assert!(matches!(bad(m), Some(LoadError::Invalid(_))));
        let mut m = items.clone();
        m[3] = VecItem::U64(u64::MAX);
        assert!(matches!(bad(m.clone()), Some(LoadError::Invalid(_))));
        // Shallow: the block is not decompressed at load; only its claimed size is checked.
        assert!(matches!(load(ENCVER, &mut VecIo { items: m, pos: 0 }, Check::Shallow), Err(LoadError::Invalid(_))));
        let mut m = items.clone();
        m[3] = VecItem::U64(n + 1);
        let mut t = load(ENCVER, &mut VecIo { items: m, pos: 0 }, Check::Shallow).unwrap();
        // The undecodable node reads as a node with no entry: the others read on.
        let got = dump(&t);
        assert!(got.len() < dump(&s).len() && !got.is_empty());
        t.release_caches();
        s.release_caches();
        // Every byte of the first block flipped: refused or a valid stream, never a panic.
        let VecItem::Bytes(block) = &items[4] else { panic!("block") };
        for at in 0..block.len() {
            let mut m = items.clone();
            let VecItem::Bytes(b) = &mut m[4] else { panic!() };
            b[at] ^= 0x5A;
            for check in [Check::Deep, Check::Shallow] {
                if let Ok(t) = load(ENCVER, &mut VecIo { items: m.clone(), pos: 0 }, check) {
                    let _ = dump(&t);
                    let mut t = t;
                    // Writes too: a delete, a trim, an append.
                    t.delete_ids(&[StreamId::new(5, 0), StreamId::new(40, 0)]);
                    let tr = Trim { strategy: TrimStrategy::MaxLen(100), approx: false, limit: 0 };
                    let _ = t.trim(&tr);
                    let _ = t.append(&[b"f", b"v"], IdSpec::Auto, 1_000_000, l);
                    let _ = dump(&t);
                    t.release_caches();
                }
            }
        }
        assert_eq!(crate::listpack::cache_fills(), 0);
    }
}
