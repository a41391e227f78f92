//! Everything that touches the Redis module API. The only hand-written `unsafe`
//! of the crate lives under this folder, each block with the reason it is sound.
//!
//! - `alloc`: the global allocator (Redis's inside a server).
//! - `fence`: catch_unwind around every entry point from Redis.
//! - `ctx`: the safe surface command handlers use: arguments, flags, names and the clock
//!   (`ctx/mod.rs`), keys (`key.rs`), replies (`reply.rs`), propagation and events
//!   (`replicate.rs`), calls into the server (`call.rs`).
//! - `types`: the data type and its callbacks.
//! - `register`: command creation, arity and key specs.
//! - `blocking`: blocked readers (BlockClientOnKeys).
//! - `takeover`: the command filter serving the standard names.
//! - `host`: which server the module runs in (for `xstream.compat host`).
//! - `adopt`: built-in streams become ours in takeover mode (end of loading, on the fly).
//! - `timer`: time-driven work, the mechanism: indexes by due time with one timer each, over
//!   `trait Job` (the jobs themselves are in src/jobs).
//! - `keyspace`: the one keyspace subscription (a stream arrives under a new name).
//! - `stats`: INFO xstream.
//! - `loading`: what `rdb_load` checks (`sanitize-dump-payload`, RESTORE always deep); the loading event.

pub mod adopt;
pub mod alloc;
pub mod blocking;
pub mod ctx;
pub mod docs;
pub mod fence;
pub mod host;
pub mod keyspace;
pub mod loading;
pub mod register;
pub mod stats;
pub mod takeover;
pub mod timer;
pub mod types;

/// Calls a module API function pointer, panicking (inside the fence) if the
/// running server lacks it. Every function used through this macro exists in
/// Redis 7.0; newer ones are checked with `is_some()` at their call site.
macro_rules! api {
    ($name:ident) => {
        match redis_module::raw::$name {
            Some(f) => f,
            None => $crate::ffi::missing_api(stringify!($name)),
        }
    };
}
pub(crate) use api;

#[cold]
pub(crate) fn missing_api(name: &str) -> ! {
    panic!("module API {name} is not available on this server")
}

/// The server's process id, recorded at load: a different one is a fork child's (an RDB save,
/// an AOF rewrite, a full sync to a replica).
static MAIN_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Records the server's process id (module load).
pub fn remember_pid() {
    MAIN_PID.store(std::process::id(), std::sync::atomic::Ordering::Relaxed);
}

/// Runs in a fork child of the server?
pub fn in_fork_child() -> bool {
    let main = MAIN_PID.load(std::sync::atomic::Ordering::Relaxed);
    main != 0 && main != std::process::id()
}

/// Ends a fork child at once, with status 1 (its parent logs the save as failed and keeps the
/// previous file), without the exit handlers (as Redis's own exitFromChild).
pub fn exit_fork_child() -> ! {
    // SAFETY: _exit takes no pointer and never returns; called only in a fork child.
    unsafe { libc::_exit(1) }
}

/// Writes a warning to the server log (works outside a command context too).
pub fn log_warning(msg: &str) {
    log(std::ptr::null_mut(), "warning", msg);
}

/// Writes a notice to the server log, prefixed with the module's name when
/// `ctx` is a module context (NULL: the module-less logger).
pub fn log_notice(ctx: *mut redis_module::raw::RedisModuleCtx, msg: &str) {
    log(ctx, "notice", msg);
}

fn log(ctx: *mut redis_module::raw::RedisModuleCtx, level: &str, msg: &str) {
    let level = ctx::cstring(level);
    let text = ctx::cstring(msg);
    // SAFETY: RedisModule_Log accepts a NULL ctx (logs as the module-less logger)
    // or a valid module context; we pass "%s" so the message is never interpreted.
    unsafe {
        if let Some(log) = redis_module::raw::RedisModule_Log {
            log(ctx, level.as_ptr(), c"%s".as_ptr(), text.as_ptr());
        }
    }
}
