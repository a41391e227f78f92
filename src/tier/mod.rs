//! Tiered storage (issue 30): sealed stream nodes kept in files of `xstream.tier-dir` instead
//! of RAM. This is the pure part: the segment store ([`segment`]), which knows records of
//! bytes and nothing of streams. Which nodes go to disk, and when, is decided above it.
//!
//! What the store promises, and what it does not need to:
//! - A record read back is the bytes written, or an error (a checksum per record): never other
//!   bytes, never a panic, whatever happened to the file.
//! - One server per directory (an exclusive lock on `LOCK`, held while the store is open).
//! - Nothing from a previous run is trusted: opening a directory deletes the segments found
//!   there. The RDB / AOF stay the source of truth (a tiered stream saves all its entries), so
//!   the segments are a cache of RAM, rebuilt while loading; nothing is ever fsynced.
//! - Space comes back: a segment whose records are all released is deleted (a fork child reads
//!   through the descriptors it inherited, so a file deleted meanwhile stays readable to it;
//!   [`segment::Store::pin`] / [`segment::Store::unpin`] keep the files for a reader without
//!   them, and the module pins nothing today), and a sealed segment left at most half live is
//!   compacted: its live records written anew at the end ([`segment::Store::rewrite`], driven
//!   by src/jobs/tier.rs, which pauses while a fork child runs).

#![forbid(unsafe_code)]

pub mod cold;
pub mod segment;
