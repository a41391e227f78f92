//! The module's one keyspace subscription: the generic events that bring a stream of ours
//! under a new name (`rename_to`, `move_to`, `copy_to`, `restore`). The indexes of the
//! time-driven jobs know a key by its old name (or, for RESTORE, not armed: rdb_load has no
//! context that may arm a timer), so each job hears of the arrival ([`super::timer::arrived`])
//! and indexes the stream again under its new name.

use super::api;
use super::ctx::Ctx;
use super::fence;
use redis_module::raw;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

/// Subscribes to the generic keyspace events (called from OnLoad).
pub fn start(context: &redis_module::Context) -> Result<(), String> {
    // SAFETY: valid OnLoad ctx; the callback lives as long as the module.
    let rc = unsafe { api!(RedisModule_SubscribeToKeyspaceEvents)(context.ctx, raw::REDISMODULE_NOTIFY_GENERIC as c_int, Some(on_event)) };
    if rc != raw::REDISMODULE_OK as c_int {
        return Err("cannot subscribe to keyspace events".into());
    }
    Ok(())
}

/// The DB of the last `move_from` event: the DB the MOVE runs in (see `move_to`).
static MOVE_SOURCE_DB: AtomicI32 = AtomicI32::new(-1);

unsafe extern "C" fn on_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const std::os::raw::c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    fence::guard("keyspace event", 0, || {
        // SAFETY: the event's context, valid during the callback.
        let c = unsafe { Ctx::for_callback(ctx) };
        // SAFETY: a NUL-terminated event name valid during the callback.
        let ev = unsafe { std::ffi::CStr::from_ptr(event) }.to_bytes();
        if ev == b"move_from" {
            MOVE_SOURCE_DB.store(c.selected_db(), Ordering::Relaxed);
            return 0;
        }
        if !matches!(ev, b"rename_to" | b"move_to" | b"copy_to" | b"restore") {
            return 0;
        }
        // SAFETY: the key name is valid during the callback.
        let name = unsafe { super::ctx::string_bytes(key) };
        if ev == b"move_to" {
            let source = MOVE_SOURCE_DB.swap(-1, Ordering::Relaxed);
            on_arrival(&c, name);
            if source >= 0 {
                // Valkey 8.1 (valkey-io/valkey #1819, fixed by #4024) runs this callback on the
                // client executing MOVE, selected to the destination DB and never selected back:
                // the client would go on in the destination DB. Select the source DB again (the
                // DB MOVE ran in; on other hosts the context's client is a temporary one, and
                // selecting it changes nothing a client sees).
                c.select_db(source);
            }
            return 0;
        }
        on_arrival(&c, name);
        0
    })
}

/// A key arrived under `name` in the event context's DB: if it holds a stream of ours, every
/// job hears. Opened for reading (no expiry deletion, no keyspace side effect); the jobs only
/// update their own marks in the stream.
fn on_arrival(c: &Ctx, name: &[u8]) {
    let db = c.selected_db();
    let mut k = c.open_key_named(name, false);
    if let Some(s) = k.stream_mut() {
        super::timer::arrived(c, db, name, s);
    }
}
