//! Everything that touches the Redis module API. The only hand-written `unsafe`
//! of the crate lives under this folder, each block with the reason it is sound.
//!
//! - `alloc`: the global allocator (Redis's inside a server).
//! - `fence`: catch_unwind around every entry point from Redis.
//! - `ctx`: the safe surface command handlers use (args, keys, replies, propagation).
//! - `types`: the data type and its callbacks.
//! - `register`: command creation, arity and key specs.
//! - `blocking`: blocked readers (BlockClientOnKeys).
//! - `takeover`: the command filter serving the standard names.
//! - `host`: which server the module runs in (for `xstream.compat host`).

pub mod alloc;
pub mod blocking;
pub mod ctx;
pub mod fence;
pub mod host;
pub mod register;
pub mod takeover;
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

/// Writes a warning to the server log (works outside a command context too).
pub fn log_warning(msg: &str) {
    let level = ctx::cstring("warning");
    let text = ctx::cstring(msg);
    // SAFETY: RedisModule_Log accepts a NULL ctx (logs as the module-less logger)
    // and a printf format; we pass "%s" so the message is never interpreted.
    unsafe {
        if let Some(log) = redis_module::raw::RedisModule_Log {
            log(std::ptr::null_mut(), level.as_ptr(), c"%s".as_ptr(), text.as_ptr());
        }
    }
}
