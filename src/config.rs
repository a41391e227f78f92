//! Module configuration: `xstream.node-max-entries`, `xstream.node-max-bytes`,
//! `takeover`, `acl-twin`, `adopt` (CONFIG GET/SET, or `loadmodule ... node-max-entries 100`
//! arguments).
//!
//! They play the role of the server's `stream-node-max-entries` and
//! `stream-node-max-bytes` for our streams, with the same defaults and the same
//! meaning of 0 ("no cap"). Configs are not replicated: whatever they change in
//! the data is propagated as explicit commands (approximate trims go out exact).

use crate::stream::{NodeLimits, NODE_BYTES_DEFAULT, NODE_ENTRIES_DEFAULT};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Entries per node (live + deleted) before a new node is started; 0 = no cap.
pub static NODE_MAX_ENTRIES: AtomicI64 = AtomicI64::new(NODE_ENTRIES_DEFAULT);
/// Bytes per node before a new node is started; 0 = only the 1 GB hard cap.
pub static NODE_MAX_BYTES: AtomicI64 = AtomicI64::new(NODE_BYTES_DEFAULT);

/// `takeover yes`: serve the standard command names (XADD ...) through a command
/// filter, propagate with them, and follow the server's stream-node-* configs.
/// Set at load only (module argument or `xstream.takeover` in redis.conf).
pub static TAKEOVER: AtomicBool = AtomicBool::new(false);

/// `acl-twin yes`: every XS.* command also needs the ACL permission of its built-in
/// twin (XS.ADD needs XADD's). Redis 7.0 cannot put module commands in ACL
/// categories, so a user denied `@write` can run XS.ADD unless this is on; with it
/// on, a user granted only `+xs.range` also needs `+xrange`. Off by default (rules
/// naming XS.* commands work as written); always on in takeover mode, where
/// clients send the standard names and ACL rules name them.
pub static ACL_TWIN: AtomicBool = AtomicBool::new(false);

/// `adopt yes` (the default): in takeover mode, built-in streams become ours
/// (src/ffi/adopt.rs): every one found at the end of loading (RDB, AOF, full sync),
/// and one met later by a stream command (RESTORE, MIGRATE) before that command runs.
/// With `adopt no` such a key answers `WRONGTYPE ... XS.IMPORT`. No effect without
/// takeover (the XS.* names never meet a built-in stream by accident there).
pub static ADOPT: AtomicBool = AtomicBool::new(true);

/// The server's `stream-node-max-entries` / `-bytes`, kept in sync in takeover mode.
pub static SERVER_NODE_MAX_ENTRIES: AtomicI64 = AtomicI64::new(NODE_ENTRIES_DEFAULT);
pub static SERVER_NODE_MAX_BYTES: AtomicI64 = AtomicI64::new(NODE_BYTES_DEFAULT);

/// The limits in force now: the server's in takeover mode, ours otherwise.
pub fn limits() -> NodeLimits {
    if TAKEOVER.load(Ordering::Relaxed) {
        NodeLimits {
            entries_max: SERVER_NODE_MAX_ENTRIES.load(Ordering::Relaxed),
            bytes_max: SERVER_NODE_MAX_BYTES.load(Ordering::Relaxed),
        }
    } else {
        NodeLimits {
            entries_max: NODE_MAX_ENTRIES.load(Ordering::Relaxed),
            bytes_max: NODE_MAX_BYTES.load(Ordering::Relaxed),
        }
    }
}
