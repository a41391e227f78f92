//! xstream: Redis Streams re-implemented natively as a Redis module.
//!
//! Module entry: the data type, the command table and the configs. Nothing else.
//!
//! Architecture invariants (see ARCHITECTURE.md):
//! - `rax`, `listpack`, `stream` and `rdb` are pure Rust: no `redis_module`, no `unsafe`.
//! - All FFI lives in `ffi/`, every unsafe block with a `// SAFETY:` line.
//! - Every entry point from Redis runs inside the panic fence (`ffi::fence`).

pub mod listpack;
pub mod native;
pub mod rax;
pub mod rdb;
pub mod stream;
pub mod tier;

pub mod commands;
pub mod config;
pub mod error;
pub mod ffi;
pub mod jobs;
pub mod ops;

use redis_module::configuration::ConfigurationFlags;
use redis_module::{redis_module, Context, RedisString, Status};

/// Module name (MODULE LIST) and version (major*10000 + minor*100 + patch).
pub const MODULE_NAME: &str = "xstream";
pub const MODULE_VERSION: i32 = 100;

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    ctx.set_module_options(redis_module::raw::ModuleOptions::HANDLE_IO_ERRORS | redis_module::raw::ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED);
    ffi::ctx::init_words();
    ffi::remember_pid();
    let host = ffi::host::detect(ctx);
    ffi::host::remember(&host);
    if let Err(e) = ffi::stats::register(ctx) {
        ctx.log_warning(&format!("xstream: {e}"));
        return Status::Err;
    }
    config::set_host(config::Compat::of_host(&host.redis_version, host.valkey, &host.valkey_version));
    ffi::ctx::set_argv_rewrite(host.passes_client_argv());
    if !host.passes_client_argv() {
        ctx.log_notice("xstream: unknown server release: XS.ADD * propagates through RedisModule_Replicate");
    }
    ctx.log_notice(&format!(
        "xstream: host {} redis_version {}: replies at level {} (xstream.compat {})",
        if host.valkey { "valkey" } else { "redis" },
        host.redis_version,
        config::host_compat().name(),
        config::compat().name()
    ));
    if let Err(e) = ffi::blocking::init(ctx) {
        ctx.log_warning(&format!("xstream: {e}"));
        return Status::Err;
    }
    jobs::init();
    if let Err(e) = ffi::keyspace::start(ctx) {
        ctx.log_warning(&format!("xstream: {e}"));
        return Status::Err;
    }
    if let Err(e) = ffi::loading::start(ctx) {
        ctx.log_warning(&format!("xstream: {e}"));
        return Status::Err;
    }
    for c in commands::COMMANDS {
        if let Err(e) = ffi::register::create(ctx, c) {
            ctx.log_warning(&format!("xstream: {e}"));
            return Status::Err;
        }
    }
    if config::TAKEOVER.load(std::sync::atomic::Ordering::Relaxed) {
        if let Err(e) = ffi::takeover::start(ctx, commands::COMMANDS) {
            ctx.log_warning(&format!("xstream: takeover: {e}"));
            return Status::Err;
        }
        ctx.log_notice("xstream: takeover on: XADD, XREAD, ... are served by the module");
        let ignored = config::overridden_in_takeover();
        if !ignored.is_empty() {
            ctx.log_warning(&format!("xstream: takeover: {} ignored (the server's stream-node-max-* apply)", ignored.join(", ")));
        }
    }
    config::LOADED.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Err(e) = keylog_subscribe() {
        ctx.log_warning(&format!("xstream: keyspace log: {e}"));
        return Status::Err;
    }
    Status::Ok
}

redis_module! {
    name: MODULE_NAME,
    version: MODULE_VERSION,
    allocator: (ffi::alloc::XAlloc, ffi::alloc::XAlloc),
    data_types: [STREAM_TYPE],
    init: init,
    configurations: [
        i64: [
            ["node-max-entries", &config::NODE_MAX_ENTRIES, stream::NODE_ENTRIES_DEFAULT, 0, i64::MAX, ConfigurationFlags::DEFAULT, None],
            ["compact-deleted", &config::COMPACT_DELETED, -1, -1, 100, ConfigurationFlags::DEFAULT, None],
            ["node-max-bytes", &config::NODE_MAX_BYTES, stream::NODE_BYTES_DEFAULT, 0, i64::MAX, ConfigurationFlags::MEMORY, None],
            ["idmp-duration", &config::IDMP_DURATION, stream::idmp::DURATION_S_DEFAULT, stream::idmp::DURATION_S_MIN, stream::idmp::DURATION_S_MAX, ConfigurationFlags::DEFAULT, None],
            ["keyspace-log-maxlen", &config::KEYLOG_MAXLEN, config::KEYLOG_MAXLEN_DEFAULT, 0, i64::MAX, ConfigurationFlags::DEFAULT, None],
            ["tier-memory", &config::TIER_MEMORY, config::TIER_MEMORY_DEFAULT, 0, i64::MAX, ConfigurationFlags::MEMORY, Some(Box::new(on_tier))],
            ["compression-cache", &config::COMPRESSION_CACHE, crate::listpack::decoded::DEFAULT_BUDGET as i64, 0, 1 << 40, ConfigurationFlags::MEMORY, None],
            ["idmp-maxsize", &config::IDMP_MAXSIZE, stream::idmp::MAX_ENTRIES_DEFAULT, stream::idmp::MAX_ENTRIES_MIN, stream::idmp::MAX_ENTRIES_MAX, ConfigurationFlags::DEFAULT, None],
        ],
        string: [
            ["compat", &config::COMPAT_CONFIG, "host", ConfigurationFlags::DEFAULT, Some(Box::new(on_compat))],
            ["compression", &config::COMPRESSION_CONFIG, "off", ConfigurationFlags::DEFAULT, None],
            ["tier-dir", &config::TIER_DIR_CONFIG, "", ConfigurationFlags::DEFAULT, Some(Box::new(on_tier))],
            ["keyspace-log", &config::KEYLOG_KEY_CONFIG, "", ConfigurationFlags::DEFAULT, Some(Box::new(on_keylog))],
            ["keyspace-log-events", &config::KEYLOG_EVENTS_CONFIG, "A", ConfigurationFlags::DEFAULT, Some(Box::new(on_keylog))],
            ["keyspace-log-pattern", &config::KEYLOG_PATTERN_CONFIG, "*", ConfigurationFlags::DEFAULT, Some(Box::new(on_keylog))],
        ],
        bool: [
            ["takeover", &config::TAKEOVER, false, ConfigurationFlags::IMMUTABLE, None],
            ["acl-twin", &config::ACL_TWIN, false, ConfigurationFlags::DEFAULT, None],
            ["adopt", &config::ADOPT, true, ConfigurationFlags::DEFAULT, None],
            ["group-stats", &config::GROUP_STATS, false, ConfigurationFlags::DEFAULT, Some(Box::new(on_group_stats))],
            ["argv-rewrite", &config::ARGV_REWRITE, true, ConfigurationFlags::DEFAULT, None],
        ],
        enum: [],
        module_args_as_configuration: true,
    ]
}

use ffi::types::STREAM_TYPE;

/// `xstream.compat` set: the lag rules may have changed, and the group histograms with them.
fn on_compat(_: &redis_module::configuration::ConfigurationContext, _: &str, _: &'static config::CompatConfig) {
    ffi::stats::lag_rules_changed();
}

/// `xstream.group-stats` set: the histograms start (or stop) keeping (src/ffi/stats.rs).
fn on_group_stats(_: &redis_module::configuration::ConfigurationContext, _: &str, v: &'static std::sync::atomic::AtomicBool) {
    ffi::stats::group_stats_changed(v.load(std::sync::atomic::Ordering::Relaxed));
}

/// `xstream.keyspace-log*` set: the classes the log now needs are subscribed (from the end of
/// the load on; values from redis.conf or the module arguments are subscribed by `init`).
fn on_keylog<T>(_: &redis_module::configuration::ConfigurationContext, _: &str, _: &'static T) {
    if config::LOADED.load(std::sync::atomic::Ordering::Relaxed) {
        if let Err(e) = keylog_subscribe() {
            ffi::log_warning(&format!("xstream: keyspace log: {e}"));
        }
    }
}

/// `xstream.tier-dir` / `-memory` set after the load: the streams already there are queued
/// for tiering (at load, the end of the RDB / AOF load queues them).
fn on_tier<T>(_: &redis_module::configuration::ConfigurationContext, _: &str, _: &'static T) {
    if config::LOADED.load(std::sync::atomic::Ordering::Relaxed) {
        ffi::keyspace::with_module_ctx(jobs::pack::tiering_changed);
    }
}

fn keylog_subscribe() -> Result<(), String> {
    let classes = {
        let s = config::keylog();
        if s.key.is_empty() {
            return Ok(());
        }
        s.classes
    };
    ffi::keyspace::subscribe(classes)
}
