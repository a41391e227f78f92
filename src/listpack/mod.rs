#![forbid(unsafe_code)]
//! Listpack: Redis 7.0's compact list of strings and integers (`listpack.c`),
//! re-implemented in safe Rust, byte-identical to the C code. Stream nodes are
//! listpacks, and a node's byte size decides when it is full
//! (`stream-node-max-bytes`), so every size here must match Redis exactly.
//!
//! ```text
//!   0                4          6                                   total-1
//!   +----------------+----------+---------+---------+-----+---------+------+
//!   | total-bytes    | num-ele  | entry 0 | entry 1 | ... | entry N | 0xFF |
//!   | u32 LE         | u16 LE   |         |         |     |         | EOF  |
//!   +----------------+----------+---------+---------+-----+---------+------+
//!   |<- header, HDR_SIZE = 6 -->|
//!
//!   num-ele is exact while < 65535; 65535 (NUMELE_UNKNOWN) means "walk to count".
//!
//!   entry:
//!   +----------+-------------------+--------------+
//!   | encoding | data (strings)    | backlen      |
//!   +----------+-------------------+--------------+
//!   |< enc_len, stored in backlen >|<-- 1..5 B -->|
//!
//!   backlen of enc_len L, 7 bits per byte, most significant group first:
//!     L <= 127          [L]
//!     L <  16383        [L>>7]         [L&127 | 0x80]
//!     L <  2097151      [L>>14] [(L>>7)&127 | 0x80] [L&127 | 0x80]   ...up to 5 bytes
//!   Read right to left from the byte before the next entry: low group first,
//!   bit 7 set means "one more byte to the left". Forward walks never read it:
//!   the encoding alone gives L, and the backlen size follows from L.
//! ```
//!
//! The encodings table is in `encoding.rs`, the validation rules in
//! `validate.rs`; `docs/listpack.md` has the full format.
//!
//! Differences from listpack.c worth knowing:
//! * The buffer is a `Box<[u8]>` we own, longer than the listpack while it has
//!   room to grow: the listpack is its first total-bytes bytes (the header's
//!   own field), the rest is room, so appends grow it amortised (doubling)
//!   instead of realloc'ing to the exact size. `alloc_bytes` reports the whole
//!   box for memory accounting, `shrink_to_fit` trims it. (A box, not a `Vec`:
//!   a stream keeps one handle per node, and the header already holds the
//!   length, so the handle is 16 bytes where a `Vec` and the packed form's
//!   pointer took 32; the built-in keeps an 8-byte pointer.)
//! * Offsets (`usize` from the start of the buffer) replace pointers. Any
//!   mutation invalidates offsets at or after the mutated element.
//! * No operation can take the listpack past MAX_BYTES: the `try_*` variants
//!   return `LpError::TooLarge`, the plain ones panic, in both cases before
//!   touching the buffer.

pub mod decoded;
mod encoding;
mod validate;

#[cfg(test)]
mod tests;

pub use encoding::{fmt_i64, string_to_i64, u64_digits, INT_STR_MAX_LEN};
pub use validate::{validate, Checked};

use encoding::{Encoded, EOF, HDR_SIZE, MAX_INT_ENCODING_LEN, NUMELE_UNKNOWN};

/// Bytes of an empty listpack: header (6) + terminator (1).
pub const EMPTY_BYTES: usize = HDR_SIZE + 1;
/// Largest listpack in bytes: the header's total-bytes field is a u32.
pub const MAX_BYTES: usize = u32::MAX as usize;
/// Header element count that means "unknown, walk to count".
pub const COUNT_UNKNOWN: u16 = NUMELE_UNKNOWN;

/// One element as stored: an integer encoding, or a byte string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl<'a> Value<'a> {
    /// Appends the element as Redis replies with it: integers as decimal
    /// ASCII, strings as their bytes.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match *self {
            Value::Int(v) => {
                let mut buf = [0u8; INT_STR_MAX_LEN];
                out.extend_from_slice(encoding::fmt_i64(v, &mut buf));
            }
            Value::Str(s) => out.extend_from_slice(s),
        }
    }

    /// The integer, for `Int` or for a `Str` that is a canonical integer
    /// (lpGetIntegerIfValid in t_stream.c).
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            Value::Int(v) => Some(v),
            Value::Str(s) => string_to_i64(s),
        }
    }

    /// lpCompare: the element's string form (integers in decimal) equals `b`.
    pub fn eq_bytes(&self, b: &[u8]) -> bool {
        match *self {
            Value::Int(v) => {
                let mut buf = [0u8; INT_STR_MAX_LEN];
                encoding::fmt_i64(v, &mut buf) == b
            }
            Value::Str(s) => s == b,
        }
    }
}

/// Why a byte string is not a valid listpack, or why an operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LpError {
    /// Shorter than EMPTY_BYTES (header + terminator).
    TooShort { len: usize },
    /// The header's total-bytes field differs from the buffer length.
    BadTotalBytes { header: u32, actual: usize },
    /// The last byte is not LP_EOF (0xFF).
    NoTerminator,
    /// Unknown encoding byte (0xF5..=0xFE) where an entry starts.
    BadEncoding { offset: usize },
    /// The entry starting here (header, data or backlen) runs into or past the terminator.
    EntryOverflow { offset: usize },
    /// The entry's backlen is not the canonical encoding of its size.
    BadBacklen { offset: usize },
    /// An LP_EOF byte where an entry should start, before the end.
    MisplacedTerminator { offset: usize },
    /// The header count (not NUMELE_UNKNOWN) differs from the number of entries.
    CountMismatch { header: u16, actual: usize },
    /// The operation would make the listpack larger than MAX_BYTES.
    TooLarge { bytes: usize },
    /// A compressed block that does not decode to the size it claims.
    BadBlock,
}

impl std::fmt::Display for LpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LpError::TooShort { len } => {
                write!(f, "listpack too short: {len} bytes, minimum {EMPTY_BYTES}")
            }
            LpError::BadTotalBytes { header, actual } => {
                write!(f, "listpack header says {header} bytes but buffer has {actual}")
            }
            LpError::NoTerminator => write!(f, "listpack does not end with 0xFF"),
            LpError::BadEncoding { offset } => {
                write!(f, "listpack entry at offset {offset} has an unknown encoding")
            }
            LpError::EntryOverflow { offset } => {
                write!(f, "listpack entry at offset {offset} extends past the end")
            }
            LpError::BadBacklen { offset } => {
                write!(f, "listpack entry at offset {offset} has a wrong backlen")
            }
            LpError::MisplacedTerminator { offset } => {
                write!(f, "listpack terminator at offset {offset} is not at the end")
            }
            LpError::CountMismatch { header, actual } => {
                write!(f, "listpack header counts {header} elements but has {actual}")
            }
            LpError::BadBlock => write!(f, "compressed listpack does not decode to its size"),
            LpError::TooLarge { bytes } => {
                write!(f, "listpack would grow to {bytes} bytes, maximum {MAX_BYTES}")
            }
        }
    }
}

impl std::error::Error for LpError {}

/// An owned, always-valid listpack.
///
/// It may be stored compressed ([`Listpack::pack`]: a sealed stream node with
/// `xstream.compression lz4|zstd`). Readers then go through [`Listpack::view`], which
/// decompresses it once into a slot kept with it until [`Listpack::release_cache`] (so one
/// command never decompresses a node twice), which hands the bytes to the decoded-node cache
/// ([`decoded`]) for the next command; a mutation decompresses it for good. A packed
/// listpack read without `view` reads as an empty listpack (its own buffer), never garbage.
#[derive(Debug)]
pub struct Listpack {
    repr: Repr,
}

#[derive(Debug)]
enum Repr {
    /// The bytes, then the room to grow into (see the module documentation). An empty box is
    /// a *vacancy*: no listpack at all, the form a tree's freed value slot holds
    /// ([`Listpack::vacant`]); it is never handed out.
    Plain(Box<[u8]>),
    /// The compressed form.
    Packed(Box<Packed>),
}

/// The listpack a box holds: its first total-bytes bytes (the whole box if the header says
/// more, which no listpack of ours does: every buffer taken in is validated).
#[inline(always)]
fn held(b: &[u8]) -> &[u8] {
    &b[..held_len(b)]
}

/// The length of [`held`]: the header's total-bytes field, at most the box's length.
#[inline(always)]
fn held_len(b: &[u8]) -> usize {
    let total = match b.first_chunk::<4>() {
        Some(h) => u32::from_le_bytes(*h) as usize,
        None => 0,
    };
    total.min(b.len())
}

/// Total size of the entry at `off` of listpack bytes `b` ending at `eof` (see
/// [`Listpack::entry_size`]).
#[inline(always)]
fn entry_size_in(b: &[u8], eof: usize, off: usize) -> Option<usize> {
    let head = encoding::read_head(b, off, eof).ok()?;
    head.enc_len.checked_add(encoding::backlen_size(head.enc_len))
}

/// Offset just past the entry at `off` of listpack bytes `b` ending at `eof`; None past the
/// terminator.
#[inline(always)]
fn skip_in(b: &[u8], eof: usize, off: usize) -> Option<usize> {
    let end = off.checked_add(entry_size_in(b, eof, off)?)?;
    if end <= eof {
        Some(end)
    } else {
        None
    }
}

/// Grows box `b` to hold at least `need` bytes: doubling (up to GROW_PAUSE while `need` fits
/// in it), the listpack's bytes kept, the new room zeroed, through the allocator's realloc.
#[cold]
#[inline(never)]
fn grow(b: &mut Box<[u8]>, need: usize) {
    let total = held_len(b);
    let mut to = need.max(b.len().saturating_mul(2));
    if need <= GROW_PAUSE {
        to = to.min(GROW_PAUSE);
    }
    let mut v = Vec::from(std::mem::take(b));
    v.truncate(total);
    v.reserve_exact(to - total);
    v.resize(to, 0);
    *b = v.into_boxed_slice();
}

/// How a packed listpack's bytes are compressed (the codec tag of RDB encoding 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// An LZ4 block (lz4_flex).
    Lz4,
    /// A zstd frame (libzstd, level ZSTD_LEVEL), with its content size.
    Zstd,
}

/// The zstd level nodes are compressed at (the library's default: on the benchmark's 4 KB
/// nodes, level 1 gives nearly the same ratio and level 6 2% better at twice the time).
pub const ZSTD_LEVEL: i32 = 3;

impl Codec {
    /// The tag stored in RDB encoding 6 (0 is a plain node).
    pub fn tag(self) -> u64 {
        match self {
            Codec::Lz4 => 1,
            Codec::Zstd => 2,
        }
    }

    pub fn from_tag(t: u64) -> Option<Codec> {
        match t {
            1 => Some(Codec::Lz4),
            2 => Some(Codec::Zstd),
            _ => None,
        }
    }
}

/// The largest plain size a compressed block may claim, per compressed byte: LZ4's own
/// bound (255:1). `pack` keeps a node plain rather than exceed it, so that loading can
/// refuse a larger claim before allocating (the allocation is sized by bytes that exist).
pub const MAX_RATIO: usize = 255;

#[derive(Debug)]
struct Packed {
    /// Never reused: the key of the decoded-node cache ([`decoded`]); a packed form's bytes
    /// never change (a write makes the listpack plain).
    id: u64,
    codec: Codec,
    /// The compressed block of the listpack's bytes, in RAM or in the segment store.
    data: Block,
    /// Bytes once decompressed.
    plain_len: usize,
    /// The decompressed listpack, while a reader needs it.
    cache: std::sync::OnceLock<Listpack>,
    /// Whether the decoded-node cache filled `cache` (then it is kept again when released).
    hit: std::sync::atomic::AtomicBool,
}

/// What the owner of a listpack keeps in RAM about it while its block is on disk, so as not to
/// read it back to know it (a stream node: its counts and last ID). Gone with the packed form:
/// a write makes the listpack plain.
pub type Note = [u64; 3];

/// Where a packed listpack's block is.
#[derive(Debug)]
enum Block {
    Mem(Box<[u8]>),
    /// A record of the segment store (`xstream.tier-dir`): a *cold* node. Released when the
    /// packed form is dropped (the node freed, or made plain by a write). Boxed: a packed
    /// node in RAM does not pay for what a cold one keeps.
    Disk(Box<Cold>),
}

/// Where a cold node's record is, and what its owner noted of it.
#[derive(Debug)]
struct Cold {
    loc: crate::tier::segment::Loc,
    /// What the owner noted of the node ([`Listpack::set_note`]).
    note: Option<Note>,
}

impl Block {
    fn disk(loc: crate::tier::segment::Loc) -> Block {
        Block::Disk(Box::new(Cold { loc, note: None }))
    }
}

impl Packed {
    fn new(codec: Codec, data: Box<[u8]>, plain_len: usize) -> Box<Packed> {
        Box::new(Packed { id: decoded::next_id(), codec, data: Block::Mem(data), plain_len, cache: std::sync::OnceLock::new(), hit: false.into() })
    }

    /// The block: borrowed from RAM, or read back from the store (checked; an error is a
    /// fault, counted by the store's handle).
    fn block(&self) -> Result<std::borrow::Cow<'_, [u8]>, crate::tier::segment::TierError> {
        match &self.data {
            Block::Mem(d) => Ok(std::borrow::Cow::Borrowed(&d[..])),
            Block::Disk(c) => crate::tier::cold::get(c.loc).map(std::borrow::Cow::Owned),
        }
    }

    /// Bytes of the block held in RAM (a cold node's: where its record is, and its note).
    fn mem_len(&self) -> usize {
        match &self.data {
            Block::Mem(d) => d.len(),
            Block::Disk(_) => std::mem::size_of::<Cold>(),
        }
    }

    /// The plain bytes: from the decoded-node cache (then true), or decompressed; None when
    /// the block could not be read back from disk.
    fn plain(&self) -> Option<(Vec<u8>, bool)> {
        match decoded::with(|c| c.take(self.id)).flatten() {
            Some(buf) => Some((buf, true)),
            None => unpack_block(self).map(|b| (b, false)),
        }
    }
}

impl Clone for Listpack {
    fn clone(&self) -> Self {
        // A clone starts without a cache (the fill count stays exact), its block in RAM (a
        // copy is a new key's, tiered on its own). A cold block that cannot be read back
        // copies as what the node reads as then.
        // A plain one is copied without its room (as a Vec's clone has none).
        match &self.repr {
            Repr::Plain(b) => Listpack { repr: Repr::Plain(Box::from(held(b))) },
            Repr::Packed(p) => match p.block() {
                Ok(d) => Listpack { repr: Repr::Packed(Packed::new(p.codec, d.into_owned().into_boxed_slice(), p.plain_len)) },
                Err(_) => Listpack::own(UNDECODABLE.to_vec()),
            },
        }
    }
}

impl Drop for Packed {
    fn drop(&mut self) {
        if let Block::Disk(c) = &self.data {
            crate::tier::cold::release(c.loc);
        }
    }
}

impl Drop for Listpack {
    fn drop(&mut self) {
        if let Repr::Packed(p) = &self.repr {
            if p.cache.get().is_some() {
                fills_sub(1);
            }
            decoded::freed(p.id);
        }
    }
}

impl PartialEq for Listpack {
    fn eq(&self, other: &Self) -> bool {
        self.view().buf() == other.view().buf()
    }
}
impl Eq for Listpack {}

thread_local! {
    /// Decompressed caches filled and not yet released (see `stream::release_caches`).
    static CACHE_FILLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Caches filled and not yet released on this thread.
pub fn cache_fills() -> u64 {
    CACHE_FILLS.with(|c| c.get())
}

fn fills_sub(n: u64) {
    CACHE_FILLS.with(|c| c.set(c.get().saturating_sub(n)));
}

/// A packed listpack's plain form, decompressed into its cache on first use. A cold block that
/// cannot be read back ends the command here: a panic with [`COLD_READ_PANIC`], which the
/// entry point's fence turns into an error reply (`ERR xstream: a node ... could not be read
/// back`), before anything was decided from what the node would have read as. Readers that can
/// go on without the node use [`Listpack::try_view`].
#[cold]
#[inline(never)]
fn packed_view(p: &Packed) -> &Listpack {
    match try_packed_view(p) {
        Some(lp) => lp,
        None => cold_read_failed(),
    }
}

/// The panic message of a cold read that failed (see [`packed_view`]).
pub const COLD_READ_PANIC: &str = "xstream: cold read failed";

/// Ends the command as a failed cold read does (see [`packed_view`]): for a blocked read
/// served later, whose error must replace its whole reply.
#[cold]
#[inline(never)]
pub fn cold_read_failed() -> ! {
    std::panic::panic_any(COLD_READ_PANIC)
}

/// [`packed_view`], None when a cold block cannot be read back (the slot stays empty).
fn try_packed_view(p: &Packed) -> Option<&Listpack> {
    if let Some(lp) = p.cache.get() {
        return Some(lp);
    }
    let (buf, hit) = p.plain()?;
    CACHE_FILLS.with(|c| c.set(c.get() + 1));
    p.hit.store(hit, std::sync::atomic::Ordering::Relaxed);
    Some(p.cache.get_or_init(|| Listpack::own(buf)))
}

/// Decompresses a packed listpack. A block that does not decode to a listpack with a valid
/// header and first element (never produced by `pack`; possible only in a block loaded
/// without the check, [`Listpack::from_packed_unchecked`]) reads as [`UNDECODABLE`]. None: a
/// cold block that could not be read back (a fault).
fn unpack_block(p: &Packed) -> Option<Vec<u8>> {
    let data = p.block().ok()?;
    Some(match decompress(p.codec, &data, p.plain_len) {
        Some(out) if validate(&out, false).is_ok() && out.get(HDR_SIZE).is_some_and(|&b| b != EOF) => out,
        _ => UNDECODABLE.to_vec(),
    })
}

/// What an undecodable block reads as: the listpack of four integers 0 (a stream node with
/// no entry and no master field, header-valid like any node loaded without the deep check).
pub const UNDECODABLE: [u8; 15] = [15, 0, 0, 0, 4, 0, 0, 1, 0, 1, 0, 1, 0, 1, EOF];

/// The `plain_len` bytes `data` decompresses to, or None if it does not decode to exactly
/// that many (never panics on any input).
fn decompress(codec: Codec, data: &[u8], plain_len: usize) -> Option<Vec<u8>> {
    if plain_len > data.len().saturating_mul(MAX_RATIO).saturating_add(16) {
        return None;
    }
    let mut out = vec![0u8; plain_len];
    match codec {
        Codec::Lz4 => match lz4_flex::block::decompress_into(data, &mut out) {
            Ok(n) if n == plain_len => Some(out),
            _ => None,
        },
        Codec::Zstd => ZSTD.with(|z| {
            let mut z = z.borrow_mut();
            let d = match &mut z.1 {
                Some(d) => d,
                slot => slot.insert(zstd::bulk::Decompressor::new().ok()?),
            };
            // Fails (never writes past `out`) on a frame that decodes to more bytes.
            match d.decompress_to_buffer(data, &mut out[..]) {
                Ok(n) if n == plain_len => Some(out),
                _ => None,
            }
        }),
    }
}

thread_local! {
    /// zstd contexts, made once per thread and reused (a context per call would cost an
    /// allocation of ~100 KB each time).
    static ZSTD: std::cell::RefCell<(Option<zstd::bulk::Compressor<'static>>, Option<zstd::bulk::Decompressor<'static>>)> =
        const { std::cell::RefCell::new((None, None)) };
}

/// The compressed form of `plain`; None if the codec failed (the node then stays plain).
fn compress(codec: Codec, plain: &[u8]) -> Option<Vec<u8>> {
    match codec {
        Codec::Lz4 => Some(lz4_flex::block::compress(plain)),
        Codec::Zstd => ZSTD.with(|z| {
            let mut z = z.borrow_mut();
            let c = match &mut z.0 {
                Some(c) => c,
                slot => slot.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL).ok()?),
            };
            c.compress(plain).ok()
        }),
    }
}

impl Default for Listpack {
    fn default() -> Self {
        Self::new()
    }
}

/// Doubling stops here when the bytes needed fit: a stream node's listpack grows to at most
/// 4 KB while its entries fit in it (the built-in preallocates 4 KB, STREAM_LISTPACK_MAX_PRE_ALLOCATE,
/// and stream-node-max-bytes is 4 KB by default), where doubling from 3.2 KB would hold 6.4 KB.
const GROW_PAUSE: usize = 4096;

/// Above this many bytes, try_append_all reserves what the values encode to, not a bound.
const EXACT_RESERVE_ABOVE: usize = 64 * 1024;

/// The bytes of an empty listpack (lpNew).
const EMPTY: [u8; EMPTY_BYTES] = [EMPTY_BYTES as u8, 0, 0, 0, 0, 0, EOF];

/// `cur - remove + add`, refused above MAX_BYTES.
fn checked_total(cur: usize, remove: usize, add: usize) -> Result<usize, LpError> {
    let t = cur.saturating_sub(remove).saturating_add(add);
    if t > MAX_BYTES {
        Err(LpError::TooLarge { bytes: t })
    } else {
        Ok(t)
    }
}

impl Listpack {
    /// An empty listpack (lpNew(0)).
    pub fn new() -> Self {
        Listpack::own(EMPTY.to_vec())
    }

    /// An empty listpack with room for `bytes` total bytes (lpNew(capacity)).
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = vec![0; bytes.max(EMPTY_BYTES)];
        buf[..EMPTY_BYTES].copy_from_slice(&EMPTY);
        Listpack::own(buf)
    }

    /// A plain listpack of `buf`, whose header is valid (its total-bytes field at most its
    /// length: beyond it is room).
    fn own(buf: Vec<u8>) -> Self {
        Listpack { repr: Repr::Plain(buf.into_boxed_slice()) }
    }

    /// No listpack: what a freed value slot of a tree holds (see [`Repr::Plain`]). Every
    /// method but [`Listpack::is_vacant`] and dropping assumes a listpack; never hand one out.
    pub fn vacant() -> Self {
        Listpack { repr: Repr::Plain(Box::default()) }
    }

    /// Is this [`Listpack::vacant`]?
    #[inline(always)]
    pub fn is_vacant(&self) -> bool {
        matches!(&self.repr, Repr::Plain(b) if b.is_empty())
    }

    /// The listpack's bytes (plain: without the room after them; packed: an empty
    /// listpack's, see [`Listpack::view`]).
    #[inline(always)]
    fn buf(&self) -> &[u8] {
        match &self.repr {
            Repr::Plain(b) => held(b),
            Repr::Packed(_) => &EMPTY,
        }
    }

    /// The whole box of a plain listpack, room included, to write in (nothing when packed:
    /// every writer makes the listpack plain first).
    #[inline(always)]
    fn raw_mut(&mut self) -> &mut [u8] {
        match &mut self.repr {
            Repr::Plain(b) => b,
            Repr::Packed(_) => &mut [],
        }
    }

    /// The box of a plain listpack with room for `need` total bytes: grown when short, by
    /// doubling (up to GROW_PAUSE while `need` fits in it; the room zeroed), through the
    /// allocator's realloc.
    #[inline]
    fn room(&mut self, need: usize) -> &mut [u8] {
        match &mut self.repr {
            Repr::Plain(b) => {
                if b.len() < need {
                    grow(b, need);
                }
                b
            }
            Repr::Packed(_) => &mut [],
        }
    }

    /// The compressed form, while packed.
    #[inline(always)]
    fn z(&self) -> Option<&Packed> {
        match &self.repr {
            Repr::Plain(_) => None,
            Repr::Packed(p) => Some(p),
        }
    }

    fn z_mut(&mut self) -> Option<&mut Packed> {
        match &mut self.repr {
            Repr::Plain(_) => None,
            Repr::Packed(p) => Some(p),
        }
    }

    /// The box of a plain listpack, the listpack left vacant (used on a cache's copy).
    fn take_plain(&mut self) -> Box<[u8]> {
        match std::mem::replace(&mut self.repr, Repr::Plain(Box::default())) {
            Repr::Plain(b) => b,
            Repr::Packed(p) => {
                self.repr = Repr::Packed(p);
                Box::default()
            }
        }
    }

    /// Takes ownership of `buf` after [`validate`]. With `deep = false` only
    /// the header and first entry are checked: reading stays memory-safe,
    /// terminating and panic-free on whatever follows (decoding is total, every
    /// walk advances), but may yield garbage values (see `encoding::GARBAGE`).
    pub fn from_vec(buf: Vec<u8>, deep: bool) -> Result<Self, LpError> {
        validate(&buf, deep)?;
        Ok(Listpack::own(buf))
    }

    /// The serialised listpack, exactly as Redis would store it (decompressed if packed).
    pub fn as_bytes(&self) -> &[u8] {
        self.view().buf()
    }

    pub fn into_vec(mut self) -> Vec<u8> {
        self.unpack();
        let total = self.bytes_len();
        let mut v = Vec::from(self.take_plain());
        v.truncate(total);
        v
    }

    /// The listpack to read: itself, or its decompressed form if packed (decompressed once,
    /// into the cache). One branch per node for the readers; element reads never branch.
    #[inline(always)]
    pub fn view(&self) -> &Listpack {
        match &self.repr {
            Repr::Plain(_) => self,
            Repr::Packed(p) => packed_view(p),
        }
    }

    /// A packed listpack's plain form as a new listpack, without filling the cache; None when
    /// plain; an error when the block does not decode to exactly its size (never produced by
    /// `pack`: only a block loaded unchecked). The bytes are not validated here.
    pub fn unpacked_copy(&self) -> Option<Result<Listpack, LpError>> {
        self.z().map(|p| match p.block().ok().and_then(|d| decompress(p.codec, &d, p.plain_len)) {
            Some(buf) => Ok(Listpack::own(buf)),
            None => Err(LpError::BadBlock),
        })
    }

    /// Stored compressed?
    pub fn is_packed(&self) -> bool {
        matches!(self.repr, Repr::Packed(_))
    }

    /// Compresses the listpack with `codec` when that saves at least an eighth of it; returns
    /// whether it is packed now (a packed one stays as it is, whatever its codec). (Sealed
    /// stream nodes: the tail, which takes appends, never is.)
    pub fn pack(&mut self, codec: Codec) -> bool {
        if self.is_packed() {
            return true;
        }
        let plain_len = self.buf().len();
        let Some(data) = compress(codec, self.buf()) else { return false };
        if data.len() + plain_len / 8 > plain_len || plain_len > data.len().saturating_mul(MAX_RATIO) {
            return false;
        }
        self.repr = Repr::Packed(Packed::new(codec, data.into_boxed_slice(), plain_len));
        true
    }

    /// The stored form of a packed listpack: (codec, plain bytes, compressed block); None
    /// when plain (RDB encoding 6 saves it as it is). A cold node's block is read back: an
    /// error when that fails.
    #[allow(clippy::type_complexity)]
    pub fn packed_parts(&self) -> Option<Result<(Codec, usize, std::borrow::Cow<'_, [u8]>), crate::tier::segment::TierError>> {
        self.z().map(|p| p.block().map(|d| (p.codec, p.plain_len, d)))
    }

    /// Is the block on disk (a cold node)?
    pub fn is_cold(&self) -> bool {
        self.z().is_some_and(|p| matches!(p.data, Block::Disk(_)))
    }

    /// Notes `n` with a listpack whose block is on disk (see [`Note`]); nothing otherwise.
    pub fn set_note(&mut self, n: Note) {
        if let Some(Block::Disk(c)) = self.z_mut().map(|p| &mut p.data) {
            c.note = Some(n);
        }
    }

    /// The note of a listpack whose block is on disk, if its owner left one.
    pub fn note(&self) -> Option<Note> {
        match self.z().map(|p| &p.data) {
            Some(Block::Disk(c)) => c.note,
            _ => None,
        }
    }

    /// The segment a cold node's record is in; None when its block is in RAM.
    pub fn cold_segment(&self) -> Option<u32> {
        match self.z().map(|p| &p.data) {
            Some(Block::Disk(c)) => Some(c.loc.seg),
            _ => None,
        }
    }

    /// Compaction: a cold node's record written anew in the active segment (the old one
    /// released); nothing to do when the node is not cold. On an error the node keeps its record
    /// (nothing changed). What the node reads as, its note and its decoded forms stay.
    pub fn rewrite_cold(&mut self) -> Result<(), crate::tier::segment::TierError> {
        if let Some(Block::Disk(c)) = self.z_mut().map(|p| &mut p.data) {
            c.loc = crate::tier::cold::rewrite(c.loc)?;
        }
        Ok(())
    }

    /// Bytes the node's record takes on disk (header included); 0 when it is in RAM.
    pub fn disk_bytes(&self) -> u64 {
        match self.z().map(|p| &p.data) {
            Some(Block::Disk(c)) => c.loc.size(),
            _ => 0,
        }
    }

    /// [`Listpack::view`] for a reader that can go on without the node: None (no panic) when
    /// its block is on disk and cannot be read back (a fault, counted and logged by the
    /// store's handle).
    pub fn try_view(&self) -> Option<&Listpack> {
        match &self.repr {
            Repr::Plain(_) => Some(self),
            Repr::Packed(p) => try_packed_view(p),
        }
    }

    /// Can the node be read (into its slot, for the rest of the command)? What a writer that
    /// can do without it checks before it changes a node that may be cold.
    pub fn readable(&self) -> bool {
        self.try_view().is_some()
    }

    /// Moves the node's block to the segment store (`xstream.tier-dir`): a plain listpack is
    /// packed first with `codec` (on disk even when that saves little: fewer bytes to read
    /// back), a packed one goes as it is. Returns whether it is cold now: false without a
    /// store or when its size is beyond what a block may claim; an error (the node stays as
    /// it was, in RAM) when the write fails. The decoded forms, if any, stay valid (same id).
    pub fn tier_out(&mut self, codec: Codec) -> Result<bool, crate::tier::segment::TierError> {
        if !crate::tier::cold::is_open() {
            return Ok(false);
        }
        if !self.is_packed() {
            let plain_len = self.buf().len();
            let Some(data) = compress(codec, self.buf()) else { return Ok(false) };
            if plain_len > data.len().saturating_mul(MAX_RATIO) || plain_len < EMPTY_BYTES + 2 {
                return Ok(false);
            }
            let Some(r) = crate::tier::cold::put(&data) else { return Ok(false) };
            let mut p = Packed::new(codec, Box::default(), plain_len);
            p.data = Block::disk(r?);
            self.repr = Repr::Packed(p);
            return Ok(true);
        }
        let Some(p) = self.z_mut() else { return Ok(false) };
        let Block::Mem(d) = &p.data else { return Ok(true) };
        let Some(r) = crate::tier::cold::put(d) else { return Ok(false) };
        p.data = Block::disk(r?);
        Ok(true)
    }

    /// A packed listpack from its stored form without decompressing it (RDB loading under the
    /// shallow check, as the built-in trusts its own files): only the claimed size is checked
    /// (at least a header and an element, at most MAX_RATIO per compressed byte, so that
    /// nothing larger than the input allows is ever allocated). A block that does not decode
    /// to a header-valid listpack reads as [`UNDECODABLE`] when first opened.
    pub fn from_packed_unchecked(codec: Codec, plain_len: usize, data: Vec<u8>) -> Result<Self, LpError> {
        if plain_len < EMPTY_BYTES + 2 || plain_len > data.len().saturating_mul(MAX_RATIO).saturating_add(16) {
            return Err(LpError::BadBlock);
        }
        Ok(Listpack { repr: Repr::Packed(Packed::new(codec, data.into_boxed_slice(), plain_len)) })
    }

    /// A packed listpack from its stored form (RDB encoding 6), checked as
    /// [`Listpack::from_vec`] checks a plain one: the block must decompress to exactly
    /// `plain_len` bytes that pass [`validate`] (`deep` or not) and hold an element. The
    /// decompressed bytes are dropped: the listpack stays packed, as saved.
    pub fn from_packed(codec: Codec, plain_len: usize, data: Vec<u8>, deep: bool) -> Result<Self, LpError> {
        let plain = decompress(codec, &data, plain_len).ok_or(LpError::BadBlock)?;
        validate(&plain, deep)?;
        let lp = Listpack::own(plain);
        if lp.first().is_none() {
            return Err(LpError::TooShort { len: plain_len });
        }
        Ok(Listpack { repr: Repr::Packed(Packed::new(codec, data.into_boxed_slice(), plain_len)) })
    }

    /// Decompresses for good (before a mutation; public for callers that read a node they
    /// are about to change).
    #[inline(always)]
    pub fn unpack(&mut self) {
        if self.is_packed() {
            self.unpack_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn unpack_slow(&mut self) {
        // A node whose block cannot be read back is never made plain: the write ends here
        // (see `packed_view`), the node as it was.
        self.view();
        if let Repr::Packed(p) = &mut self.repr {
            let plain = match p.cache.take() {
                Some(mut v) => {
                    fills_sub(1);
                    v.take_plain()
                }
                None => UNDECODABLE.to_vec().into_boxed_slice(),
            };
            // Drops the packed form (a cold node's record is released).
            self.repr = Repr::Plain(plain);
        }
    }

    /// Empties the decompressed slot of a packed listpack into the decoded-node cache (kept
    /// there within its budget, for the next command, when `last`: the node a reader stopped
    /// in; see [`decoded::Decoded::offer`] for the others); returns whether it was filled.
    pub fn release_cache(&mut self, last: bool) -> bool {
        let Repr::Packed(p) = &mut self.repr else { return false };
        if let Some(mut v) = p.cache.take() {
            fills_sub(1);
            let buf = Vec::from(v.take_plain());
            let hit = p.hit.swap(false, std::sync::atomic::Ordering::Relaxed);
            decoded::with(|c| c.offer(p.id, buf, last || hit));
            true
        } else {
            false
        }
    }

    /// Total bytes (lpBytes); equals the header's total-bytes field (packed: once decompressed).
    pub fn bytes_len(&self) -> usize {
        match &self.repr {
            Repr::Plain(b) => held_len(b),
            Repr::Packed(p) => p.plain_len,
        }
    }

    /// Allocated bytes (the box, room included; packed: the compressed block, its header and
    /// the cache if filled), for memory accounting.
    pub fn alloc_bytes(&self) -> usize {
        match &self.repr {
            Repr::Plain(b) => b.len(),
            Repr::Packed(p) => std::mem::size_of::<Packed>() + p.mem_len() + p.cache.get().map_or(0, Listpack::alloc_bytes),
        }
    }

    /// [`Listpack::alloc_bytes`] without a packed listpack's decompressed cache: what it holds
    /// between commands (caches are released after each one), so what freeing it gives back.
    pub fn stored_bytes(&self) -> usize {
        match &self.repr {
            Repr::Plain(b) => b.len(),
            Repr::Packed(p) => std::mem::size_of::<Packed>() + p.mem_len(),
        }
    }

    /// Releases unused capacity (lpShrinkToFit).
    pub fn shrink_to_fit(&mut self) {
        // (Packed: nothing to trim.)
        if let Repr::Plain(b) = &mut self.repr {
            let total = held_len(b);
            if total < b.len() {
                let mut v = Vec::from(std::mem::take(b));
                v.truncate(total);
                *b = v.into_boxed_slice();
            }
        }
    }

    /// The raw header count; NUMELE_UNKNOWN (65535) when not known.
    pub fn header_count(&self) -> u16 {
        let b = self.buf();
        u16::from_le_bytes([b[4], b[5]])
    }

    fn set_header_count(&mut self, n: u16) {
        self.raw_mut()[4..6].copy_from_slice(&n.to_le_bytes());
    }

    /// Writes the header's total-bytes field: the listpack's length from now on (the bytes
    /// after it are room). Every mutation has checked `total` against MAX_BYTES.
    fn set_total_bytes(&mut self, total: usize) {
        let total = u32::try_from(total).unwrap_or(u32::MAX);
        self.raw_mut()[0..4].copy_from_slice(&total.to_le_bytes());
    }

    /// Offset of the terminator.
    #[inline(always)]
    fn eof_offset(&self) -> usize {
        self.reader().eof
    }

    /// Number of elements (lpLength): the header count, or a walk when it is
    /// NUMELE_UNKNOWN. Unlike lpLength this does not write the walked count
    /// back (it takes `&self`).
    pub fn len(&self) -> usize {
        let n = self.header_count();
        if n != NUMELE_UNKNOWN {
            return usize::from(n);
        }
        self.walk_count()
    }

    fn walk_count(&self) -> usize {
        let mut count = 0;
        let mut p = self.first();
        while let Some(off) = p {
            count += 1;
            p = self.next(off);
        }
        count
    }

    pub fn is_empty(&self) -> bool {
        self.buf().get(HDR_SIZE).is_none_or(|&b| b == EOF)
    }

    /// Bytes that appending `v` adds: encoding + data + backlen (a `Str` that
    /// is a canonical integer is sized as that integer).
    pub fn encoded_size(v: Value) -> usize {
        Encoded::new(v).total_len()
    }

    /// lpAppend / lpAppendInteger. Panics, leaving the listpack unchanged, if
    /// the result would exceed MAX_BYTES; see [`Listpack::try_append`].
    pub fn append(&mut self, v: Value) {
        if let Err(e) = self.try_append(v) {
            panic!("listpack append: {e}");
        }
    }

    /// Appends `v`; a `Str` that is a canonical integer (lpStringToInt64) is
    /// stored with an integer encoding, as lpAppend does.
    pub fn try_append(&mut self, v: Value) -> Result<(), LpError> {
        self.try_append_all(std::iter::once(v))
    }

    pub fn append_int(&mut self, v: i64) {
        self.append(Value::Int(v));
    }

    /// Appends every value of `vals`, as that many [`try_append`](Self::try_append)s
    /// would (same bytes, same header count), with one reservation, one move of
    /// the terminator and one header update: what a stream entry's five or more
    /// elements cost on the XADD path. On error nothing is appended.
    pub fn try_append_all<'v, I>(&mut self, vals: I) -> Result<(), LpError>
    where
        I: Iterator<Item = Value<'v>> + Clone,
    {
        self.unpack();
        // An upper bound of the bytes added: a string takes at most a 5-byte
        // header and a 5-byte backlen, an integer at most 9 + 1.
        let (mut bound, mut n) = (0usize, 0usize);
        for v in vals.clone() {
            let data = match v {
                Value::Int(_) => 0,
                Value::Str(s) => s.len(),
            };
            bound = bound.saturating_add(data).saturating_add(MAX_INT_ENCODING_LEN + 1);
            n += 1;
        }
        // The bound is up to five times the bytes a run of short strings takes (2 bytes of
        // header and backlen, not 10). Reserving it would grow a listpack that has room for
        // the values themselves (a new node is allocated for its first entry only), and a node
        // that receives one large entry keeps what is reserved until it is sealed (a 1M-field
        // entry: 1.8x the built-in's memory). So when the bound does not fit in the room left,
        // or is past 64 KiB, the exact count is worth its second pass over the values.
        // (Plain after `unpack`; a vacant box is no listpack to append to.)
        let Repr::Plain(b) = &mut self.repr else { return Err(LpError::BadBlock) };
        let start = held_len(b);
        if start < EMPTY_BYTES {
            return Err(LpError::TooShort { len: start });
        }
        if bound > EXACT_RESERVE_ABOVE || bound > b.len() - start || checked_total(start, 0, bound).is_err() {
            bound = vals.clone().map(|v| Encoded::new(v).total_len()).fold(0usize, usize::saturating_add);
        }
        checked_total(start, 0, bound)?;
        if b.len() < start + bound {
            grow(b, start + bound);
        }
        // The values go over the terminator, which moves after them; `bound` is at least
        // what they take.
        let mut at = start - 1;
        for v in vals {
            let e = Encoded::new(v);
            let l = e.total_len();
            e.write_over(&mut b[at..at + l]);
            at += l;
        }
        b[at] = EOF;
        let total = u32::try_from(at + 1).unwrap_or(u32::MAX);
        b[0..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::from_le_bytes([b[4], b[5]]);
        if count != NUMELE_UNKNOWN {
            // Counting one by one reaches NUMELE_UNKNOWN and stays there.
            let new = (count as usize).saturating_add(n).min(NUMELE_UNKNOWN as usize);
            b[4..6].copy_from_slice(&(new as u16).to_le_bytes());
        }
        Ok(())
    }

    pub fn append_str(&mut self, s: &[u8]) {
        self.append(Value::Str(s));
    }

    /// The bytes to read elements from (see [`Reader`]); a packed listpack reads as an empty
    /// one (see [`Listpack::view`]).
    #[inline(always)]
    pub fn reader(&self) -> Reader<'_> {
        let b = self.buf();
        Reader { b, eof: b.len().saturating_sub(1) }
    }

    /// Offset of the first element (lpFirst).
    pub fn first(&self) -> Option<usize> {
        self.reader().first()
    }

    /// Offset of the last element (lpLast).
    pub fn last(&self) -> Option<usize> {
        self.reader().last()
    }

    /// Total size (encoding + data + backlen) of the entry at `off`, or None
    /// if `off` is not a readable entry.
    pub fn entry_size(&self, off: usize) -> Option<usize> {
        self.reader().entry_size(off)
    }

    /// lpSkip without the EOF check: offset just past the entry at `off`.
    fn skip(&self, off: usize) -> Option<usize> {
        self.reader().skip(off)
    }

    /// The element after `off` (lpNext); None at the end.
    pub fn next(&self, off: usize) -> Option<usize> {
        self.reader().next(off)
    }

    /// The element before `off` (lpPrev); None at the start. `off` may be the terminator's
    /// offset.
    #[inline]
    pub fn prev(&self, off: usize) -> Option<usize> {
        self.reader().prev(off)
    }

    /// The element at `index` (lpSeek with a non-negative index).
    pub fn seek(&self, index: usize) -> Option<usize> {
        self.reader().seek(index)
    }

    /// The element at `off` (lpGet); see [`Reader::get`].
    pub fn get(&self, off: usize) -> Value<'_> {
        self.reader().get(off)
    }

    /// The element at `off` and the offset of the next one; see [`Reader::get_next`].
    pub fn get_next(&self, off: usize) -> (Value<'_>, Option<usize>) {
        self.reader().get_next(off)
    }

    /// The integer at `off`; see [`Reader::get_int`].
    pub fn get_int(&self, off: usize) -> i64 {
        self.reader().get_int(off)
    }

    pub fn try_get_int(&self, off: usize) -> Option<i64> {
        self.reader().try_get_int(off)
    }

    /// Reads the integer at `*off` and moves `*off` on; see [`Reader::next_int`].
    pub fn next_int(&self, off: &mut Option<usize>) -> i64 {
        self.reader().next_int(off)
    }

    /// Replaces the element at `off` in place (lpReplace /
    /// lpReplaceInteger); bytes after it shift when the size changes. The
    /// count is unchanged. Panics, leaving the listpack unchanged, if `off`
    /// is not an element or the result would exceed MAX_BYTES.
    pub fn replace(&mut self, off: usize, v: Value) {
        if let Err(e) = self.try_replace(off, v) {
            panic!("listpack replace: {e}");
        }
    }

    pub fn try_replace(&mut self, off: usize, v: Value) -> Result<(), LpError> {
        self.unpack();
        // The element must end before the terminator (`skip` checks it: in a
        // listpack that was not deep-checked, an encoding may claim more bytes
        // than there are).
        let old = match self.skip(off) {
            Some(end) if off >= HDR_SIZE && off < self.eof_offset() => end - off,
            _ => return Err(LpError::BadEncoding { offset: off }),
        };
        let e = Encoded::new(v);
        let new = e.total_len();
        let total = self.bytes_len();
        let after = checked_total(total, old, new)?;
        let old_end = off + old;
        // Open or close a gap (one memmove of the tail), then overwrite.
        if new != old {
            self.room(after).copy_within(old_end..total, off + new);
            self.set_total_bytes(after);
        }
        e.write_over(&mut self.raw_mut()[off..off + new]);
        Ok(())
    }

    pub fn replace_int(&mut self, off: usize, v: i64) {
        self.replace(off, Value::Int(v));
    }

    /// Deletes up to `count` elements starting at `off` (lpDeleteRange from
    /// an entry); fewer if the listpack ends first. Like lpDeleteRange, the
    /// header count ends up exact when it fits (an unknown count is recounted).
    pub fn delete_range(&mut self, off: usize, count: usize) {
        self.unpack();
        if count == 0 || off < HDR_SIZE || off >= self.eof_offset() {
            return;
        }
        let mut end = off;
        let mut deleted = 0usize;
        while deleted < count && end < self.eof_offset() {
            match self.skip(end) {
                Some(n) => end = n,
                None => break,
            }
            deleted += 1;
        }
        if deleted == 0 {
            return;
        }
        let total = self.bytes_len();
        self.raw_mut().copy_within(end..total, off);
        self.set_total_bytes(total - (end - off));
        let n = self.header_count();
        let exact = if n != NUMELE_UNKNOWN { usize::from(n).saturating_sub(deleted) } else { self.walk_count() };
        self.set_header_count(u16::try_from(exact).unwrap_or(NUMELE_UNKNOWN));
    }

    /// Front-to-back (and, reversed, back-to-front) iteration over values.
    pub fn iter(&self) -> Iter<'_> {
        let lp = self.view();
        let r = lp.reader();
        Iter { lp, bytes: r.b, front: HDR_SIZE, back: r.eof }
    }
}

/// A plain listpack's bytes, for reads: what [`Listpack::reader`] gives, and what every element
/// read of a [`Listpack`] goes through. A walk that reads many elements of one node takes it once
/// (the bytes and the terminator's offset found once, not per element).
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    b: &'a [u8],
    /// Offset of the terminator.
    eof: usize,
}

impl<'a> Reader<'a> {
    /// The raw header count; NUMELE_UNKNOWN (65535) when not known.
    pub fn header_count(self) -> u16 {
        match self.b.get(4..6) {
            Some(h) => u16::from_le_bytes([h[0], h[1]]),
            None => 0,
        }
    }

    /// Total bytes (lpBytes).
    pub fn bytes_len(self) -> usize {
        self.b.len()
    }

    /// Offset of the first element (lpFirst).
    pub fn first(self) -> Option<usize> {
        if self.b.get(HDR_SIZE).is_none_or(|&b| b == EOF) {
            None
        } else {
            Some(HDR_SIZE)
        }
    }

    /// Offset of the last element (lpLast).
    pub fn last(self) -> Option<usize> {
        self.prev(self.eof)
    }

    /// Total size (encoding + data + backlen) of the entry at `off`, or None
    /// if `off` is not a readable entry.
    pub fn entry_size(self, off: usize) -> Option<usize> {
        let (b, eof) = (self.b, self.eof);
        entry_size_in(b, eof, off)
    }

    /// lpSkip without the EOF check: offset just past the entry at `off`.
    pub(crate) fn skip(self, off: usize) -> Option<usize> {
        let (b, eof) = (self.b, self.eof);
        skip_in(b, eof, off)
    }

    /// The element after `off` (lpNext), found from the encoding at `off`
    /// alone; None at the end.
    pub fn next(self, off: usize) -> Option<usize> {
        let (b, eof) = (self.b, self.eof);
        let n = skip_in(b, eof, off)?;
        if n >= eof {
            None
        } else {
            Some(n)
        }
    }

    /// The element before `off` (lpPrev), found through the backlen that ends
    /// at `off`; None at the start. `off` may be the terminator's offset.
    #[inline]
    pub fn prev(self, off: usize) -> Option<usize> {
        let (b, eof) = (self.b, self.eof);
        if off <= HDR_SIZE || off > eof {
            return None;
        }
        let last = b[off - 1];
        let p = if last & 0x80 == 0 {
            // Fast path: a 1-byte backlen (entries of up to 127 bytes).
            (off - 1).checked_sub(usize::from(last))?
        } else {
            let l = encoding::decode_backlen(b, off)?;
            off.checked_sub(l.checked_add(encoding::backlen_size(l))?)?
        };
        if p < HDR_SIZE {
            None
        } else {
            Some(p)
        }
    }

    /// The element at `index` (lpSeek with a non-negative index), walking
    /// from whichever end is nearer when the count is known.
    pub fn seek(self, index: usize) -> Option<usize> {
        let n = self.header_count();
        if n != NUMELE_UNKNOWN {
            let n = usize::from(n);
            if index >= n {
                return None;
            }
            if index > n / 2 {
                let mut p = self.last();
                for _ in 0..(n - 1 - index) {
                    p = self.prev(p?);
                }
                return p;
            }
        }
        let mut p = self.first();
        for _ in 0..index {
            p = self.next(p?);
        }
        p
    }

    /// The element at `off` (lpGet). Total: if `off` is not an element (only
    /// possible in a listpack taken with `from_vec(.., false)`), an empty string.
    pub fn get(self, off: usize) -> Value<'a> {
        encoding::decode(self.b, off).0
    }

    /// The element at `off` and the offset of the next one (None after the
    /// last), from one decode: the walk of a whole node in one pass.
    pub fn get_next(self, off: usize) -> (Value<'a>, Option<usize>) {
        let (b, eof) = (self.b, self.eof);
        let (v, enc_len) = encoding::decode(b, off);
        let n = off + enc_len + encoding::backlen_size(enc_len);
        (v, if n >= eof { None } else { Some(n) })
    }

    /// The integer at `off` (lpGetInteger in t_stream.c): an integer
    /// encoding, or a string that is a canonical integer. Where Redis asserts
    /// (not an integer: only in a node that was loaded without the deep check),
    /// 0; see [`Listpack::try_get_int`] to tell.
    pub fn get_int(self, off: usize) -> i64 {
        self.try_get_int(off).unwrap_or(0)
    }

    pub fn try_get_int(self, off: usize) -> Option<i64> {
        self.get(off).as_int()
    }

    /// Reads the integer at `*off` and moves `*off` to the next element
    /// (None after the last). Total: where a valid node always has an integer,
    /// a node loaded without the deep check may have none left (`*off` is None:
    /// 0, and `*off` stays None) or a string (0, and `*off` moves on).
    pub fn next_int(self, off: &mut Option<usize>) -> i64 {
        let Some(o) = *off else { return 0 };
        let (b, eof) = (self.b, self.eof);
        let (v, enc_len) = encoding::decode(b, o);
        let v = v.as_int().unwrap_or(0);
        let n = o + enc_len + encoding::backlen_size(enc_len);
        *off = if n >= eof { None } else { Some(n) };
        v
    }
}

/// Iterator over a listpack's values. Forward steps use the encoding, backward
/// steps the backlen; the two ends never cross.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    lp: &'a Listpack,
    /// Its bytes.
    bytes: &'a [u8],
    /// Offset of the next element to yield from the front.
    front: usize,
    /// Offset just past the next element to yield from the back.
    back: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Value<'a>;

    #[inline]
    fn next(&mut self) -> Option<Value<'a>> {
        if self.front >= self.back {
            return None;
        }
        let (v, enc_len) = encoding::decode(self.bytes, self.front);
        self.front += enc_len + encoding::backlen_size(enc_len);
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // Every entry is at least 2 bytes (encoding + backlen).
        let bytes = self.back.saturating_sub(self.front);
        (usize::from(bytes > 0), Some(bytes / 2))
    }
}

impl<'a> DoubleEndedIterator for Iter<'a> {
    fn next_back(&mut self) -> Option<Value<'a>> {
        if self.back <= self.front {
            return None;
        }
        let Some(p) = self.lp.prev(self.back) else {
            // Only reachable on a corrupt backlen: end both directions.
            self.back = self.front;
            return None;
        };
        if p < self.front {
            // Only reachable on a corrupt backlen: stop rather than cross.
            self.back = self.front;
            return None;
        }
        self.back = p;
        Some(self.lp.get(p))
    }
}

impl std::iter::FusedIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Listpack {
    type Item = Value<'a>;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}
