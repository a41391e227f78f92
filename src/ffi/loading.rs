//! How much `rdb_load` checks: the built-in's `sanitize-dump-payload` rule, with
//! RESTORE always deep.
//!
//! The built-in (rdbLoadObject) deep-checks a payload when `sanitize-dump-payload`
//! is `yes`, or when it is `clients` and the payload comes from a client's RESTORE;
//! with `no` (the default) it checks listpack headers only, for RESTORE too. We are
//! stricter on RESTORE, whose payload carries only a CRC anyone can compute: it is
//! always deep-checked. RDB files and full syncs are checked as the built-in
//! checks them: deeply with `yes`, headers only with `no` or `clients` (the core
//! reads unchecked node bodies totally: see `rdb::Check::Shallow`).
//!
//! Telling the two apart. In every host (7.0.15 to 8.0, Valkey 8.0) `rdb_load` is
//! called by `rdbLoadObject` for an RDB file, a full sync, an AOF's RDB preamble,
//! RESTORE and RM_LoadDataTypeFromString alike, with nothing in the IO handle that
//! says which. The signal is `REDISMODULE_CTX_FLAGS_LOADING` of
//! `RedisModule_GetContextFlags`, which is `server.loading && !server.async_loading`:
//! - set by `startLoading` for an RDB file (startup, DEBUG RELOAD), an AOF (its
//!   preamble, and the RESTORE commands it replays: the AOF is a local file as
//!   trusted as the RDB, and a RESTORE got into it only after passing the deep
//!   check when it first ran), and a full sync loaded from disk or from the socket
//!   into an empty DB (`repl-diskless-load on-empty-db`);
//! - never set while a client's command runs: during such loads the server answers
//!   every command without the `loading` flag with `-LOADING` (processCommand; EXEC
//!   too when a queued command lacks it), and RESTORE, MIGRATE, EVAL and FCALL lack
//!   it. No client, ACL user or script can set it;
//! - clear during the asynchronous load of `repl-diskless-load swapdb`
//!   (REDISMODULE_CTX_FLAGS_ASYNC_LOADING instead), where clients keep running
//!   commands: that load is deep-checked (the safe default), whatever the config.
//!
//! The config is read with CONFIG GET at module load and again when each load
//! starts (`REDISMODULE_EVENT_LOADING`, *_START subevents), so a `CONFIG SET
//! sanitize-dump-payload` before DEBUG RELOAD or a full sync is followed. Until it
//! has been read, or if it cannot be, loads are deep-checked.
//!
//! This file also owns the module's one subscription to the loading event (a
//! module has one callback per event): its ENDED subevent runs adoption
//! (adopt.rs) in takeover mode, then tells the time-driven jobs (timer.rs).

use super::{api, fence};
use crate::rdb::Check;
use redis_module::raw;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU8, Ordering};

/// `sanitize-dump-payload` as last read: SANITIZE_UNKNOWN until read.
static SANITIZE: AtomicU8 = AtomicU8::new(SANITIZE_UNKNOWN);
const SANITIZE_UNKNOWN: u8 = 0;
const SANITIZE_NO: u8 = 1;
const SANITIZE_YES: u8 = 2;
const SANITIZE_CLIENTS: u8 = 3;

/// Reads `sanitize-dump-payload` (CONFIG GET through RM_Call).
fn refresh(ctx: *mut raw::RedisModuleCtx) {
    let context = redis_module::Context::new(ctx);
    let value = match context.call("CONFIG", &["GET", "sanitize-dump-payload"]) {
        Ok(redis_module::RedisValue::Array(v)) => match v.get(1) {
            Some(redis_module::RedisValue::BulkString(s)) | Some(redis_module::RedisValue::SimpleString(s)) => s.clone(),
            Some(redis_module::RedisValue::BulkRedisString(s)) => s.try_as_str().unwrap_or("").to_string(),
            _ => String::new(),
        },
        _ => String::new(),
    };
    let code = match value.as_str() {
        "no" => SANITIZE_NO,
        "yes" => SANITIZE_YES,
        "clients" => SANITIZE_CLIENTS,
        _ => SANITIZE_UNKNOWN,
    };
    SANITIZE.store(code, Ordering::Relaxed);
}

/// What this `rdb_load` call checks (see the top of this file).
///
/// # Safety
/// `io` is the IO handle of the `rdb_load` callback that is running.
pub unsafe fn check_for(io: *mut raw::RedisModuleIO) -> Check {
    let sanitize = SANITIZE.load(Ordering::Relaxed);
    if sanitize != SANITIZE_NO && sanitize != SANITIZE_CLIENTS {
        return Check::Deep;
    }
    // SAFETY: `io` is the handle of the running rdb_load callback; the context it
    // returns belongs to it and is freed by Redis after the callback (rdb.c).
    let flags = unsafe {
        let ctx = api!(RedisModule_GetContextFromIO)(io);
        api!(RedisModule_GetContextFlags)(ctx)
    };
    if flags & raw::REDISMODULE_CTX_FLAGS_LOADING as c_int != 0 {
        Check::Shallow
    } else {
        Check::Deep
    }
}

/// At module load: reads the config and subscribes to the loading event.
pub fn start(context: &redis_module::Context) -> Result<(), String> {
    refresh(context.ctx);
    let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_LOADING, dataver: 1 };
    // SAFETY: valid OnLoad ctx; the callback lives as long as the module.
    let rc = unsafe { api!(RedisModule_SubscribeToServerEvent)(context.ctx, event, Some(on_loading)) };
    if rc != raw::REDISMODULE_OK as c_int {
        return Err("cannot subscribe to the loading event".into());
    }
    Ok(())
}

unsafe extern "C" fn on_loading(ctx: *mut raw::RedisModuleCtx, _eid: raw::RedisModuleEvent, sub: u64, _data: *mut c_void) {
    fence::guard("loading event", (), || {
        if sub == raw::REDISMODULE_SUBEVENT_LOADING_RDB_START
            || sub == raw::REDISMODULE_SUBEVENT_LOADING_AOF_START
            || sub == raw::REDISMODULE_SUBEVENT_LOADING_REPL_START
        {
            refresh(ctx);
            // Tiering on: the sealed nodes of the streams loaded go to disk as they are read
            // (src/rdb.rs), so that a load never needs a whole stream in RAM.
            let budget = crate::config::TIER_MEMORY.load(std::sync::atomic::Ordering::Relaxed).max(0) as u64;
            crate::tier::cold::set_load_budget(crate::tier::cold::is_open().then_some(budget));
        } else if sub == raw::REDISMODULE_SUBEVENT_LOADING_ENDED || sub == raw::REDISMODULE_SUBEVENT_LOADING_FAILED {
            crate::tier::cold::set_load_budget(None);
        }
        if sub == raw::REDISMODULE_SUBEVENT_LOADING_ENDED {
            super::adopt::loading_ended(ctx);
            super::timer::loading_ended(ctx);
        }
    })
}
