//! Module configuration: `xstream.node-max-entries`, `xstream.node-max-bytes`,
//! `idmp-duration`, `idmp-maxsize`,
//! `takeover`, `acl-twin`, `adopt` (CONFIG GET/SET, or `loadmodule ... node-max-entries 100`
//! arguments).
//!
//! They play the role of the server's `stream-node-max-entries` and
//! `stream-node-max-bytes` for our streams, with the same defaults and the same
//! meaning of 0 ("no cap"). Configs are not replicated: whatever they change in
//! the data is propagated as explicit commands (approximate trims go out exact).

#![forbid(unsafe_code)]

use crate::stream::{NodeLimits, NODE_BYTES_DEFAULT, NODE_ENTRIES_DEFAULT};
use redis_module::configuration::{ConfigurationContext, ConfigurationValue};
use redis_module::{RedisError, RedisString};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};

/// Entries per node (live + deleted) before a new node is started; 0 = no cap.
pub static NODE_MAX_ENTRIES: NotInTakeover<AtomicI64> = NotInTakeover {
    value: AtomicI64::new(NODE_ENTRIES_DEFAULT),
    refusal: "xstream.node-max-entries has no effect in takeover mode: set the server's stream-node-max-entries",
};
/// Bytes per node before a new node is started; 0 = only the 1 GB hard cap.
pub static NODE_MAX_BYTES: NotInTakeover<AtomicI64> = NotInTakeover {
    value: AtomicI64::new(NODE_BYTES_DEFAULT),
    refusal: "xstream.node-max-bytes has no effect in takeover mode: set the server's stream-node-max-bytes",
};

/// Set at the end of the module's load: from then on a CONFIG SET is a user's.
pub static LOADED: AtomicBool = AtomicBool::new(false);

/// A setting that takeover mode overrides (the node limits follow the server's
/// `stream-node-max-*`, the ACL twin check is always on): once loaded, a CONFIG SET that
/// would change it is refused with `refusal` rather than accepted without effect. Values
/// from redis.conf or the module arguments are taken as they are (refusing them would
/// stop the server from starting); the load logs that they are overridden.
pub struct NotInTakeover<T> {
    pub value: T,
    refusal: &'static str,
}

impl<T> NotInTakeover<T> {
    fn refuse(&self, changes: bool) -> Result<(), RedisError> {
        if changes && TAKEOVER.load(Ordering::Relaxed) && LOADED.load(Ordering::Relaxed) {
            return Err(RedisError::Str(self.refusal));
        }
        Ok(())
    }
}

impl ConfigurationValue<i64> for NotInTakeover<AtomicI64> {
    fn get(&self, _ctx: &ConfigurationContext) -> i64 {
        self.value.load(Ordering::Relaxed)
    }

    fn set(&self, _ctx: &ConfigurationContext, val: i64) -> Result<(), RedisError> {
        self.refuse(val != self.value.load(Ordering::Relaxed))?;
        self.value.store(val, Ordering::Relaxed);
        Ok(())
    }
}

impl ConfigurationValue<bool> for NotInTakeover<AtomicBool> {
    /// In takeover mode the check is on whatever was configured: CONFIG GET says so.
    fn get(&self, _ctx: &ConfigurationContext) -> bool {
        self.value.load(Ordering::Relaxed) || TAKEOVER.load(Ordering::Relaxed)
    }

    fn set(&self, ctx: &ConfigurationContext, val: bool) -> Result<(), RedisError> {
        self.refuse(val != self.get(ctx))?;
        self.value.store(val, Ordering::Relaxed);
        Ok(())
    }
}

/// In takeover mode, the settings of ours that the server's own replace, with the values
/// they were given (for the load's log line).
pub fn overridden_in_takeover() -> Vec<String> {
    let mut v = Vec::new();
    for (name, s, default) in
        [("xstream.node-max-entries", &NODE_MAX_ENTRIES, NODE_ENTRIES_DEFAULT), ("xstream.node-max-bytes", &NODE_MAX_BYTES, NODE_BYTES_DEFAULT)]
    {
        let val = s.value.load(Ordering::Relaxed);
        if val != default {
            v.push(format!("{name} {val}"));
        }
    }
    v
}

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
pub static ACL_TWIN: NotInTakeover<AtomicBool> =
    NotInTakeover { value: AtomicBool::new(false), refusal: "xstream.acl-twin is always on in takeover mode" };

/// `adopt yes` (the default): in takeover mode, built-in streams become ours
/// (src/ffi/adopt.rs): every one found at the end of loading (RDB, AOF, full sync),
/// and one met later by a stream command (RESTORE, MIGRATE) before that command runs.
/// With `adopt no` such a key answers `WRONGTYPE ... XS.IMPORT`. No effect without
/// takeover (the XS.* names never meet a built-in stream by accident there).
pub static ADOPT: AtomicBool = AtomicBool::new(true);

/// `xstream.group-stats` (default no): INFO xstream counts the consumer groups by PEL size and
/// by lag (log-2 buckets, kept incrementally: src/stream/census.rs). Off, nothing of it runs on
/// the write path; switched on, every stream is counted once, right after the command that
/// switched it.
pub static GROUP_STATS: AtomicBool = AtomicBool::new(false);

/// `xstream.argv-rewrite`: XS.ADD `*` (and approximate trims) put the concrete
/// ID / threshold into the client's argv and propagate it verbatim, as the
/// built-in does, on hosts known to pass commands the client's argv
/// (ffi::ctx::replicate_with); `no` always builds a new command with
/// RedisModule_Replicate (slower, same replicas and AOF).
pub static ARGV_REWRITE: AtomicBool = AtomicBool::new(true);

/// `xstream.idmp-duration` / `xstream.idmp-maxsize` (the server's `stream-idmp-duration`
/// / `stream-idmp-maxsize` of 8.6, REDIS8.md §5.6): the IDMP window of streams created
/// from now on (seconds, iids per producer). Existing streams keep theirs (XS.CFGSET
/// changes one stream). Not replicated: a replica seeds its streams from its own
/// configs only for streams it creates itself, which it never does (every creation
/// comes from the primary's command; see docs/redis8.md for the consequence).
pub static IDMP_DURATION: AtomicI64 = AtomicI64::new(crate::stream::idmp::DURATION_S_DEFAULT);
pub static IDMP_MAXSIZE: AtomicI64 = AtomicI64::new(crate::stream::idmp::MAX_ENTRIES_DEFAULT);

/// The IDMP window a new stream gets now (duration s, max entries), clamped to the
/// ranges (CONFIG SET refuses values outside them anyway).
pub fn idmp_window() -> (u32, u32) {
    use crate::stream::idmp::*;
    let d = IDMP_DURATION.load(Ordering::Relaxed).clamp(DURATION_S_MIN, DURATION_S_MAX);
    let m = IDMP_MAXSIZE.load(Ordering::Relaxed).clamp(MAX_ENTRIES_MIN, MAX_ENTRIES_MAX);
    (d as u32, m as u32)
}

/// `xstream.compact-deleted`: a node whose deleted entries reach this percentage of
/// its entries is rewritten without them (and merged with neighbours that fit) by the
/// write that deleted them; 0 = never. -1 (the default) = `auto`, which is off at every
/// level: at a host level the built-in's node boundaries (which `~` trims follow) are the
/// reference, and `latest` follows the newest Redis release, which compacts nothing
/// (its XINFO STREAM has no `deleted-entries` and its radix-tree-keys never shrink on
/// XDEL). An explicit value applies at every level. [`COMPACT_AUTO_LATEST`] is the value
/// the docs recommend when opting in.
pub static COMPACT_DELETED: AtomicI64 = AtomicI64::new(-1);
/// The threshold `auto` means at level `latest`.
pub const COMPACT_AUTO_LATEST: u8 = 50;

/// The compaction threshold in force (0 = off).
pub fn compact_deleted() -> u8 {
    match COMPACT_DELETED.load(Ordering::Relaxed) {
        v if v < 0 => 0,
        v => v.min(100) as u8,
    }
}

/// `xstream.compression`: `off` (default), `lz4` or `zstd`: sealed nodes (every node but the
/// tail, which takes appends) are compressed by the background step (src/jobs/pack.rs).
/// Kept per thread in the core (`stream::set_codec`); configs are set on the main thread.
/// Nodes packed before a change keep their codec (each node carries its own) and stay packed
/// (readable) until a write rewrites them.
pub struct CompressionConfig;

pub static COMPRESSION_CONFIG: CompressionConfig = CompressionConfig;

impl ConfigurationValue<RedisString> for CompressionConfig {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        interned(match crate::stream::codec() {
            None => "off",
            Some(crate::listpack::Codec::Lz4) => "lz4",
            Some(crate::listpack::Codec::Zstd) => "zstd",
        })
    }

    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let s = val.to_string_lossy();
        if s.eq_ignore_ascii_case("off") {
            crate::stream::set_codec(None);
        } else if s.eq_ignore_ascii_case("lz4") {
            crate::stream::set_codec(Some(crate::listpack::Codec::Lz4));
        } else if s.eq_ignore_ascii_case("zstd") {
            crate::stream::set_codec(Some(crate::listpack::Codec::Zstd));
        } else {
            return Err(RedisError::Str("xstream.compression must be one of off, lz4, zstd"));
        }
        Ok(())
    }
}

/// `xstream.compression-cache`: bytes of decoded compressed nodes kept between commands
/// (src/listpack/decoded.rs), so that reads which come back to a node (a consumer reading a
/// few entries at a time) do not decompress it again; 0 = none. Kept per thread in the core,
/// like the codec.
pub struct CompressionCacheConfig;

pub static COMPRESSION_CACHE: CompressionCacheConfig = CompressionCacheConfig;

impl ConfigurationValue<i64> for CompressionCacheConfig {
    fn get(&self, _ctx: &ConfigurationContext) -> i64 {
        i64::try_from(crate::listpack::decoded::budget()).unwrap_or(i64::MAX)
    }

    fn set(&self, _ctx: &ConfigurationContext, val: i64) -> Result<(), RedisError> {
        crate::listpack::decoded::set_budget(usize::try_from(val).unwrap_or(0));
        Ok(())
    }
}

/// `xstream.tier-dir`: the directory of the segment store (src/tier, src/jobs/tier.rs), where
/// sealed nodes beyond `xstream.tier-memory` go; empty = tiering off (the default). Opening it
/// takes its lock (one server per directory) and deletes the segments a previous run left.
/// Changing or clearing it is refused while nodes are on disk in the current one.
pub struct TierDirConfig;

pub static TIER_DIR_CONFIG: TierDirConfig = TierDirConfig;

static TIER_DIR: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// `xstream.tier-dir` as set.
pub fn tier_dir() -> String {
    TIER_DIR.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

impl ConfigurationValue<RedisString> for TierDirConfig {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        interned(tier_dir())
    }

    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let dir = val.to_string_lossy();
        if dir == tier_dir() {
            return Ok(());
        }
        if crate::tier::cold::busy() {
            return Err(RedisError::String(format!("xstream.tier-dir: nodes are on disk in {}: it cannot change while they are", tier_dir())));
        }
        if dir.is_empty() {
            crate::tier::cold::close();
        } else {
            crate::tier::cold::open(std::path::Path::new(&dir), crate::tier::segment::SEGMENT_BYTES_DEFAULT)
                .map_err(|e| RedisError::String(format!("xstream.tier-dir {dir}: {e}")))?;
        }
        *TIER_DIR.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = dir;
        Ok(())
    }
}

/// `xstream.tier-memory`: bytes of sealed nodes kept in RAM across all streams when tiering is
/// on; beyond it the oldest go to disk (src/jobs/tier.rs). 0: every sealed node.
pub static TIER_MEMORY: AtomicI64 = AtomicI64::new(TIER_MEMORY_DEFAULT);
pub const TIER_MEMORY_DEFAULT: i64 = 64 << 20;

/// The server's `stream-node-max-entries` / `-bytes`, kept in sync in takeover mode.
pub static SERVER_NODE_MAX_ENTRIES: AtomicI64 = AtomicI64::new(NODE_ENTRIES_DEFAULT);
pub static SERVER_NODE_MAX_BYTES: AtomicI64 = AtomicI64::new(NODE_BYTES_DEFAULT);

/// The limits in force now: the server's in takeover mode, ours otherwise.
pub fn limits() -> NodeLimits {
    if TAKEOVER.load(Ordering::Relaxed) {
        NodeLimits { entries_max: SERVER_NODE_MAX_ENTRIES.load(Ordering::Relaxed), bytes_max: SERVER_NODE_MAX_BYTES.load(Ordering::Relaxed) }
    } else {
        NodeLimits { entries_max: NODE_MAX_ENTRIES.value.load(Ordering::Relaxed), bytes_max: NODE_MAX_BYTES.value.load(Ordering::Relaxed) }
    }
}

// ---- reply level (`xstream.compat`) ----------------------------------------------

/// The stream behaviour of a Redis release, where replies of existing commands
/// changed after 7.0. New commands and options are available at every level; a
/// level only selects what an existing command answers. Valkey's releases follow
/// Redis 7.2 and then went their own way: a [`Valkey`] family on top of a level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    /// Redis 7.0.
    V7_0 = 70,
    /// Redis 7.2 (and Valkey 7.2 to 9.1): consumers' active-time, `inactive`,
    /// consumers created by reads and claims that deliver nothing, blocked
    /// XREADGROUP re-executed, XSETID below the max deleted ID refused, the
    /// `'xread'` / `'xreadgroup'` unbalanced-list texts.
    V7_2 = 72,
    /// Redis 7.4: XREADGROUP's group ID always propagated and counted only when
    /// something went out; BLOCK allowed from scripts; `XREAD ... +` as 7.4.x.
    V7_4 = 74,
    /// Redis 8.0 (calibrated on 8.0.2, the GA release): lag and entries-read
    /// fixes, the 8.0 unbalanced-list texts.
    V8_0 = 80,
    /// Redis 8.2 (calibrated on 8.2.3): XGROUP CREATE / SETID ENTRIESREAD clamped
    /// to entries-added (8.2.2).
    V8_2 = 82,
    /// The newest Redis this module implements (8.4 to 8.10, from the spec).
    Latest = 255,
}

/// A Valkey release family whose streams differ from the Redis level they
/// follow (7.2). Ordered: each includes the changes of the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Valkey {
    /// Valkey 7.2 / 8.0: Redis 7.2's streams, but scripts may pass BLOCK (as 7.4).
    V8_0 = 80,
    /// Valkey 8.1 (calibrated on 8.1.8; 9.1.2 answers the same): the Redis 8.0
    /// read counter (tombstones looked for after the group's last ID, estimated
    /// again behind the first entry) and estimate (a tombstone after an ID makes
    /// it unknown), without 8.0's lag shortcuts (empty stream, group behind the
    /// first entry).
    V8_1 = 81,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::V7_0 => "7.0",
            Level::V7_2 => "7.2",
            Level::V7_4 => "7.4",
            Level::V8_0 => "8.0",
            Level::V8_2 => "8.2",
            Level::Latest => "latest",
        }
    }

    /// The level of a release from its `redis_version` (Valkey reports the Redis
    /// release it is compatible with, 7.2.4). 7.9.x are the 8.0 milestones, 8.1.x
    /// the 8.2 ones.
    pub fn of_redis_version(v: &str) -> Level {
        let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        match (major, minor) {
            (0..=6, _) | (7, 0..=1) => Level::V7_0,
            (7, 2..=3) => Level::V7_2,
            (7, 4..=8) => Level::V7_4,
            (7, _) | (8, 0) => Level::V8_0,
            _ => Level::V8_2,
        }
    }
}

impl Valkey {
    /// The family of a Valkey release from its `valkey_version` (empty: Valkey 7.2,
    /// which reports none).
    pub fn of_valkey_version(v: &str) -> Valkey {
        let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if (major, minor) >= (8, 1) {
            Valkey::V8_1
        } else {
            Valkey::V8_0
        }
    }

    fn name(self) -> &'static str {
        match self {
            Valkey::V8_0 => "valkey-8.0",
            Valkey::V8_1 => "valkey-8.1",
        }
    }
}

/// A reply level with its family: what `xstream.compat` names, and what the host is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compat {
    pub level: Level,
    pub valkey: Option<Valkey>,
}

impl Compat {
    /// The name `xstream.compat` takes for it (`7.2`, `valkey-8.1`, ...).
    pub fn name(self) -> &'static str {
        self.valkey.map_or(self.level.name(), Valkey::name)
    }

    fn code(self) -> u8 {
        match self.valkey {
            Some(v) => 100 + v as u8,
            None => self.level as u8,
        }
    }

    fn from_code(v: u8) -> Compat {
        let redis = |level| Compat { level, valkey: None };
        match v {
            72 => redis(Level::V7_2),
            74 => redis(Level::V7_4),
            80 => redis(Level::V8_0),
            82 => redis(Level::V8_2),
            255 => redis(Level::Latest),
            180 => Compat { level: Level::V7_2, valkey: Some(Valkey::V8_0) },
            181 => Compat { level: Level::V7_2, valkey: Some(Valkey::V8_1) },
            _ => redis(Level::V7_0),
        }
    }

    /// The host's, from INFO server: Valkey follows Redis 7.2 in its family.
    pub fn of_host(redis_version: &str, valkey: bool, valkey_version: &str) -> Compat {
        if valkey {
            Compat { level: Level::V7_2, valkey: Some(Valkey::of_valkey_version(valkey_version)) }
        } else {
            Compat { level: Level::of_redis_version(redis_version), valkey: None }
        }
    }
}

/// The host server's reply level, detected at load (INFO server).
static HOST_COMPAT: AtomicU8 = AtomicU8::new(Level::V7_0 as u8);
/// The configured level; 0 = `host`.
static COMPAT: AtomicU8 = AtomicU8::new(0);

pub fn set_host(c: Compat) {
    HOST_COMPAT.store(c.code(), Ordering::Relaxed);
}

pub fn host_compat() -> Compat {
    Compat::from_code(HOST_COMPAT.load(Ordering::Relaxed))
}

/// The level and family replies follow now.
pub fn compat() -> Compat {
    match COMPAT.load(Ordering::Relaxed) {
        0 => host_compat(),
        v => Compat::from_code(v),
    }
}

/// Scripts may call XREAD / XREADGROUP with BLOCK (answered without blocking):
/// Redis 7.4, and every Valkey from 8.0.
pub fn scripts_may_block() -> bool {
    let c = compat();
    c.level >= Level::V7_4 || c.valkey.is_some()
}

pub fn host_level() -> Level {
    host_compat().level
}

/// The level replies follow now.
pub fn level() -> Level {
    compat().level
}

/// The DELREF / ACKED trim rules of the level in force: 8.2's own at level 8.2
/// (the first release with them, as 8.2.3 trims), the later ones everywhere else
/// (the options are the module's own below 8.2).
pub fn ref_trim_rules() -> crate::stream::RefTrimRules {
    if compat() == (Compat { level: Level::V8_2, valkey: None }) {
        crate::stream::RefTrimRules::Redis82
    } else {
        crate::stream::RefTrimRules::Latest
    }
}

/// The lag / entries-read rules of the level in force.
pub fn lag_rules() -> crate::stream::LagRules {
    let c = compat();
    if c.valkey >= Some(Valkey::V8_1) {
        crate::stream::LagRules::Valkey81
    } else if c.level >= Level::V8_0 {
        crate::stream::LagRules::Redis8
    } else {
        crate::stream::LagRules::Redis7
    }
}

/// `xstream.compat`: `host` (default: as this server's built-in streams), or a
/// level (`7.0`, `7.2`, `7.4`, `8.0`, `8.2`, `valkey-8.0`, `valkey-8.1`, `latest`).
/// CONFIG SET refuses anything else.
pub struct CompatConfig;

pub static COMPAT_CONFIG: CompatConfig = CompatConfig;

/// The `xstream.compat` setting's name (`host`, `7.2`, ...).
pub fn compat_name() -> &'static str {
    match COMPAT.load(Ordering::Relaxed) {
        0 => "host",
        v => Compat::from_code(v).name(),
    }
}

/// The values `xstream.compat` takes.
pub const COMPAT_VALUES: &[(&str, u8)] = &[
    ("host", 0),
    ("7.0", Level::V7_0 as u8),
    ("7.2", Level::V7_2 as u8),
    ("7.4", Level::V7_4 as u8),
    ("8.0", Level::V8_0 as u8),
    ("8.2", Level::V8_2 as u8),
    ("valkey-8.0", 100 + Valkey::V8_0 as u8),
    ("valkey-8.1", 100 + Valkey::V8_1 as u8),
    ("latest", Level::Latest as u8),
];

/// A string config's value for Redis, created once per distinct value and kept for the life
/// of the module. The crate's getter hands Redis `get(..).take()` (Redis copies it and frees
/// nothing), so a fresh string per call leaked one allocation per CONFIG GET, and per CONFIG
/// SET (Redis reads the old value to roll back a failed SET): LeakSanitizer's finding. The
/// wrapper returned here does not own the cached string: `take()` passes the pointer on and
/// nothing ever frees it (the crate never drops a getter's value otherwise).
/// Values a user sets (the keyspace log's key and pattern) are cached the same way: one string
/// per distinct value ever set, a few bytes each.
pub fn interned(value: impl AsRef<[u8]>) -> RedisString {
    static CACHE: std::sync::Mutex<Vec<(Vec<u8>, usize)>> = std::sync::Mutex::new(Vec::new());
    let value = value.as_ref();
    let mut cache = CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let ptr = match cache.iter().find(|(v, _)| v == value) {
        Some(&(_, p)) => p,
        None => {
            let r = RedisString::create(None, value);
            let p = r.inner as usize;
            std::mem::forget(r); // kept for the life of the module
            cache.push((value.to_vec(), p));
            p
        }
    };
    RedisString::from_redis_module_string(std::ptr::null_mut(), ptr as *mut redis_module::raw::RedisModuleString)
}

impl ConfigurationValue<RedisString> for CompatConfig {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        interned(compat_name())
    }

    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let s = val.to_string_lossy();
        match COMPAT_VALUES.iter().find(|(n, _)| n.eq_ignore_ascii_case(&s)) {
            Some((_, v)) => {
                COMPAT.store(*v, Ordering::Relaxed);
                Ok(())
            }
            None => Err(RedisError::String(format!(
                "xstream.compat must be one of {}",
                COMPAT_VALUES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

// ---- the keyspace log (`xstream.keyspace-log*`, issue 33) -------------------------------------

/// The keyspace log's settings (docs/keyspace-log.md): every notification of a class in
/// `classes` on a key matching `pattern` is appended to the stream `key` (database 0), trimmed
/// to about `maxlen` entries (0: never). Off while `key` is empty.
pub struct KeyLog {
    pub key: Vec<u8>,
    /// REDISMODULE_NOTIFY_* bits.
    pub classes: u32,
    /// None: `*`.
    pub pattern: Option<Vec<u8>>,
}

pub static KEYLOG: std::sync::Mutex<KeyLog> =
    std::sync::Mutex::new(KeyLog { key: Vec::new(), classes: redis_module::raw::REDISMODULE_NOTIFY_ALL as u32, pattern: None });
/// `xstream.keyspace-log-maxlen`.
pub static KEYLOG_MAXLEN: AtomicI64 = AtomicI64::new(KEYLOG_MAXLEN_DEFAULT);
pub const KEYLOG_MAXLEN_DEFAULT: i64 = 1_000_000;

/// `xstream.keyspace-log` is set (read first by every notification, without the lock).
pub static KEYLOG_ON: AtomicBool = AtomicBool::new(false);

pub fn keylog() -> std::sync::MutexGuard<'static, KeyLog> {
    KEYLOG.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The letters of `notify-keyspace-events` for classes of keys' events, in the server's order
/// (keyspaceEventsFlagsToString), with their bits. `A` is `g$lshzxetd`.
const CLASS_LETTERS: [(u8, u32); 12] = {
    use redis_module::raw::*;
    [
        (b'g', REDISMODULE_NOTIFY_GENERIC as u32),
        (b'$', REDISMODULE_NOTIFY_STRING as u32),
        (b'l', REDISMODULE_NOTIFY_LIST as u32),
        (b's', REDISMODULE_NOTIFY_SET as u32),
        (b'h', REDISMODULE_NOTIFY_HASH as u32),
        (b'z', REDISMODULE_NOTIFY_ZSET as u32),
        (b'x', REDISMODULE_NOTIFY_EXPIRED as u32),
        (b'e', REDISMODULE_NOTIFY_EVICTED as u32),
        (b't', REDISMODULE_NOTIFY_STREAM as u32),
        (b'd', REDISMODULE_NOTIFY_MODULE as u32),
        (b'm', REDISMODULE_NOTIFY_KEY_MISS as u32),
        (b'n', REDISMODULE_NOTIFY_NEW as u32),
    ]
};

/// The classes named by `letters` (the server's letters; `A` for all but `m` and `n`), or None
/// for a letter that names no class of key events.
pub fn parse_classes(letters: &[u8]) -> Option<u32> {
    let mut mask = 0;
    for &l in letters {
        mask |= match l {
            b'A' => redis_module::raw::REDISMODULE_NOTIFY_ALL as u32,
            _ => CLASS_LETTERS.iter().find(|(c, _)| *c == l)?.1,
        };
    }
    Some(mask)
}

/// `classes` in letters, as the server shows `notify-keyspace-events`: `A` when all of it.
pub fn classes_text(classes: u32) -> String {
    let all = redis_module::raw::REDISMODULE_NOTIFY_ALL as u32;
    let mut out = String::new();
    let mut rest = classes;
    if classes & all == all {
        out.push('A');
        rest &= !all;
    }
    for (l, bit) in CLASS_LETTERS {
        if rest & bit != 0 {
            out.push(l as char);
        }
    }
    out
}

/// `xstream.keyspace-log`: the log's key; empty = off. Refused on a server without
/// post-notification jobs (before Redis 7.2): nothing there lets a module write safely in
/// reaction to a notification.
pub struct KeyLogKeyConfig;
pub static KEYLOG_KEY_CONFIG: KeyLogKeyConfig = KeyLogKeyConfig;

/// The refusal on servers without RedisModule_AddPostNotificationJob.
pub const KEYLOG_NEEDS_72: &str = "xstream.keyspace-log needs Redis 7.2 or later (or Valkey): this server's module API has no post-notification jobs (RedisModule_AddPostNotificationJob), the only safe way to write in reaction to a keyspace event";

impl ConfigurationValue<RedisString> for KeyLogKeyConfig {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        interned(keylog().key.clone())
    }

    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let key = val.as_slice().to_vec();
        if !key.is_empty() && !crate::ffi::keyspace::post_jobs_available() {
            return Err(RedisError::Str(KEYLOG_NEEDS_72));
        }
        if !key.is_empty() && LOADED.load(Ordering::Relaxed) {
            crate::jobs::keylog::check_log_key(&key).map_err(RedisError::String)?;
        }
        KEYLOG_ON.store(!key.is_empty(), Ordering::Relaxed);
        keylog().key = key;
        Ok(())
    }
}

/// `xstream.keyspace-log-events`: the classes logged, in `notify-keyspace-events` letters.
pub struct KeyLogEventsConfig;
pub static KEYLOG_EVENTS_CONFIG: KeyLogEventsConfig = KeyLogEventsConfig;

impl ConfigurationValue<RedisString> for KeyLogEventsConfig {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        interned(classes_text(keylog().classes))
    }

    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let classes = parse_classes(val.as_slice()).ok_or(RedisError::Str(
            "xstream.keyspace-log-events takes the letters g $ l s h z x e t m d n and A (as notify-keyspace-events, without K and E)",
        ))?;
        keylog().classes = classes;
        Ok(())
    }
}

/// `xstream.keyspace-log-pattern`: a glob on key names (as KEYS and PSUBSCRIBE match).
pub struct KeyLogPatternConfig;
pub static KEYLOG_PATTERN_CONFIG: KeyLogPatternConfig = KeyLogPatternConfig;

impl ConfigurationValue<RedisString> for KeyLogPatternConfig {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        interned(keylog().pattern.clone().unwrap_or_else(|| b"*".to_vec()))
    }

    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let p = val.as_slice();
        keylog().pattern = (p != b"*").then(|| p.to_vec());
        Ok(())
    }
}
