//! The panic fence: every entry point from Redis runs inside `catch_unwind`.
//!
//! A Rust panic that crosses an `extern "C"` boundary aborts redis-server and
//! takes every key of every application with it. A panic here is a bug of ours;
//! it must become an error reply (commands) or a failed load (type callbacks) plus
//! a log line, and the server must go on.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`; on panic logs `what` with the panic message and returns `fallback`.
pub fn guard<R>(what: &str, fallback: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = panic_message(&*payload);
            super::log_warning(&format!("xstream: internal error in {what}: {msg}"));
            fallback
        }
    }
}

/// [`guard`] for a value's save (RDB, AOF rewrite): in a fork child (BGSAVE, BGREWRITEAOF, a
/// full sync) a panic ends the child, so the save fails as a whole and the previous file stays
/// (a value cut short would make a file that does not load, or loads without entries).
pub fn guard_save(what: &str, f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        let msg = panic_message(&*payload);
        if super::in_fork_child() {
            super::log_warning(&format!("xstream: {what} failed in the fork child, which ends (the save fails): {msg}"));
            super::exit_fork_child();
        }
        super::log_warning(&format!("xstream: internal error in {what}: {msg}"));
    }
}

/// The text of a panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Like [`guard`] but hands the panic message to the caller.
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| panic_message(&*p))
}
