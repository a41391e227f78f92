//! Blocking reads: a small safe layer over RedisModule_BlockClientOnKeys.
//!
//! Who waits for what: a client blocked by XS.READ / XS.READGROUP BLOCK waits on
//! its keys with a [`crate::commands::read::BlockState`] (the IDs it waits after,
//! COUNT, NOACK) as private data. Every write that can satisfy a waiter calls
//! `SignalKeyAsReady` (XS.ADD; XS.GROUP DESTROY so that waiters learn their group
//! is gone); Redis also signals a key when it is created. After the command,
//! Redis calls [`on_ready`] for each client blocked on a signalled key, in the
//! order they blocked: serving it (reply + return OK) unblocks it, returning ERR
//! keeps it waiting ("two waiters, one entry"). On timeout or CLIENT UNBLOCK,
//! [`on_timeout`] replies a null array, as XREAD does. The private data is freed
//! on every path (served, timeout, disconnect, unblock) by [`free_state`].
//!
//! As in Redis 7.0, a deleted key does not wake waiters, and a key that becomes
//! another type keeps them waiting; if the key comes back as a stream without
//! the group, a group waiter gets NOGROUP (all decided in `serve_blocked`).

use super::api;
use super::ctx::{string_bytes, Ctx};
use super::fence;
use crate::commands::read::{serve_blocked, BlockState};
use redis_module::raw;
use std::os::raw::{c_int, c_void};

/// Blocks the client of `c` on the key arguments `key_args` (indexes into argv)
/// for `timeout_ms` (0 = forever) with `state`.
pub fn block_on_keys(c: &Ctx, key_args: &[usize], timeout_ms: i64, state: BlockState) -> bool {
    let mut keys: Vec<*mut raw::RedisModuleString> = key_args.iter().map(|&i| c.arg_string(i)).collect();
    let data = Box::into_raw(Box::new(state));
    // SAFETY: the key strings are the command's live arguments (Redis retains what it
    // needs); `data` is owned by Redis from here on and handed back to free_state
    // exactly once, whatever ends the block.
    let bc = unsafe {
        api!(RedisModule_BlockClientOnKeys)(
            c.raw(),
            Some(on_ready),
            Some(on_timeout),
            Some(free_state),
            timeout_ms,
            keys.as_mut_ptr(),
            keys.len() as c_int,
            data.cast(),
        )
    };
    if bc.is_null() {
        // SAFETY: Redis did not take the private data.
        drop(unsafe { Box::from_raw(data) });
        return false;
    }
    true
}

unsafe extern "C" fn on_ready(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int) -> c_int {
    // SAFETY: Redis passes the blocked command's arguments with the callback's ctx.
    let c = unsafe { Ctx::new(ctx, argv, argc) };
    let served = fence::catch(|| {
        // SAFETY: valid callback ctx.
        let key = unsafe { api!(RedisModule_GetBlockedClientReadyKey)(ctx) };
        // SAFETY: the private data is the Box<BlockState> given to block_on_keys,
        // alive until free_state runs (after this callback).
        let state = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx).cast::<BlockState>().as_ref() };
        match state {
            Some(st) => serve_blocked(&c, st, string_bytes(key)),
            None => false,
        }
    });
    match served {
        Ok(true) => raw::REDISMODULE_OK as c_int,
        Ok(false) => raw::REDISMODULE_ERR as c_int,
        Err(msg) => {
            super::log_warning(&format!("xstream: internal error serving a blocked read: {msg}"));
            c.reply_error("ERR xstream internal error (see the server log)");
            raw::REDISMODULE_OK as c_int
        }
    }
}

unsafe extern "C" fn on_timeout(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int) -> c_int {
    // SAFETY: Redis passes the blocked command's arguments with the callback's ctx.
    let c = unsafe { Ctx::new(ctx, argv, argc) };
    fence::guard("blocked read timeout", (), || c.reply_null_array());
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn free_state(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    fence::guard("blocked read cleanup", (), || {
        if !data.is_null() {
            // SAFETY: the Box<BlockState> leaked in block_on_keys; Redis calls this once.
            drop(unsafe { Box::from_raw(data.cast::<BlockState>()) });
        }
    })
}
