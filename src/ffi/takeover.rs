//! Takeover: serve the standard stream command names with our commands.
//!
//! A command filter rewrites argv[0] `XADD` -> `XS.ADD` (and every other stream
//! command) before Redis looks the command up, so plain calls, MULTI/EXEC, EVAL,
//! FCALL and commands replayed from a primary or the AOF all reach the module.
//! (Registering `XADD` itself is impossible while the built-in exists, and
//! `rename-command` plus such a registration crashes 7.0: PLATFORM.md.)
//!
//! The filter sees every command the server runs, so it costs a length check
//! and a first-byte check for everything that is not a stream command, and a
//! few byte compares for the rest. Calls the module makes itself (RM_Call, used
//! by XS.IMPORT / XS.EXPORT to reach the built-in) are not filtered (NOSELF).

use super::api;
use redis_module::raw;
use std::ffi::CStr;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, Ordering};

/// (standard name, module name), upper case.
pub const NAMES: &[(&CStr, &CStr)] = &[
    (c"XADD", c"XS.ADD"),
    (c"XLEN", c"XS.LEN"),
    (c"XRANGE", c"XS.RANGE"),
    (c"XREVRANGE", c"XS.REVRANGE"),
    (c"XREAD", c"XS.READ"),
    (c"XREADGROUP", c"XS.READGROUP"),
    (c"XGROUP", c"XS.GROUP"),
    (c"XACK", c"XS.ACK"),
    (c"XPENDING", c"XS.PENDING"),
    (c"XCLAIM", c"XS.CLAIM"),
    (c"XAUTOCLAIM", c"XS.AUTOCLAIM"),
    (c"XINFO", c"XS.INFO"),
    (c"XDEL", c"XS.DEL"),
    (c"XTRIM", c"XS.TRIM"),
    (c"XSETID", c"XS.SETID"),
];

/// Shortest and longest standard name.
const NAME_LEN_MIN: usize = 4;
const NAME_LEN_MAX: usize = 10;

/// The module name for a standard stream command name, if it is one.
pub fn module_name_for(arg0: &[u8]) -> Option<&'static CStr> {
    if arg0.len() < NAME_LEN_MIN || arg0.len() > NAME_LEN_MAX || !matches!(arg0[0], b'x' | b'X') {
        return None;
    }
    NAMES.iter().find(|(std, _)| std.to_bytes().eq_ignore_ascii_case(arg0)).map(|(_, m)| *m)
}

/// The standard name for a module command name (`XS.ADD` -> `XADD`), if any.
pub fn standard_name_for(name: &[u8]) -> Option<&'static CStr> {
    NAMES.iter().find(|(_, m)| m.to_bytes().eq_ignore_ascii_case(name)).map(|(s, _)| *s)
}

static FILTER: AtomicPtr<raw::RedisModuleCommandFilter> = AtomicPtr::new(std::ptr::null_mut());

unsafe extern "C" fn filter(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // No fence allocation on the hot path: the body cannot panic (no indexing
    // beyond checked lengths, no allocation until a stream command is found), and
    // catch_unwind around it anyway costs nothing when nothing unwinds.
    super::fence::guard("command filter", (), || {
        // SAFETY: fctx is valid for the duration of the callback; argument 0 exists
        // (Redis never runs a filter on an empty command).
        let arg0 = unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, 0) };
        // SAFETY: argument 0 of the filtered command, alive during the callback.
        let Some(name) = module_name_for(unsafe { super::ctx::string_bytes(arg0) }) else { return };
        let name = name.to_bytes();
        // SAFETY: a new string owned by the filter context once replaced (Redis
        // frees the old argument and keeps the new one).
        unsafe {
            let s = api!(RedisModule_CreateString)(std::ptr::null_mut(), name.as_ptr().cast(), name.len());
            api!(RedisModule_CommandFilterArgReplace)(fctx, 0, s);
        }
    })
}

/// Installs the filter (idempotent).
fn install(ctx: *mut raw::RedisModuleCtx) -> bool {
    if !FILTER.load(Ordering::Relaxed).is_null() {
        return true;
    }
    // SAFETY: valid ctx (OnLoad or a config callback); the filter lives until removed.
    let f = unsafe { api!(RedisModule_RegisterCommandFilter)(ctx, Some(filter), raw::REDISMODULE_CMDFILTER_NOSELF as c_int) };
    FILTER.store(f, Ordering::Relaxed);
    !f.is_null()
}

/// Whether takeover is active.
pub fn active() -> bool {
    !FILTER.load(Ordering::Relaxed).is_null()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        assert_eq!(module_name_for(b"xadd"), Some(c"XS.ADD"));
        assert_eq!(module_name_for(b"XReadGroup"), Some(c"XS.READGROUP"));
        assert_eq!(module_name_for(b"XS.ADD"), None);
        assert_eq!(module_name_for(b"SET"), None);
        assert_eq!(module_name_for(b"x"), None);
        assert_eq!(standard_name_for(b"xs.autoclaim"), Some(c"XAUTOCLAIM"));
        for (s, m) in NAMES {
            assert!(s.to_bytes().len() >= NAME_LEN_MIN && s.to_bytes().len() <= NAME_LEN_MAX);
            assert_eq!(module_name_for(s.to_bytes()), Some(*m));
        }
    }
}

// ---- propagation names ---------------------------------------------------------
//
// Propagation and AOF rewrite keep the module's names (XS.ADD ...) in takeover
// mode too. Redis 7.0 replays the AOF by calling commands directly, without the
// command filter, so an AOF written with standard names would be replayed by the
// built-in streams at the next start (a key of the wrong type, writes refused:
// data loss). Replicas run the filter, but their AOF is the same stream. The
// module's names work everywhere the module is loaded, with or without takeover.

// ---- ACL for the standard names ---------------------------------------------------

/// Redis checks the ACL against the XS.* name only: on 7.0 module commands belong
/// to no ACL category, so a user denied `@write` could run XS.ADD, and in takeover
/// mode a user denied `XADD` would get through the filter. So each command also
/// checks the user's permission for its built-in twin (same arguments, standard
/// name) and refuses as the built-in would: always in takeover mode, otherwise
/// when `xstream.acl-twin` is on. Commands from the primary or the AOF are exempt
/// (their client has no user). Err holds the error reply.
///
/// # Safety
/// `ctx` is the running command's context and `argv` its arguments, and the
/// command does not come from the primary or the AOF (whose client has no user).
pub unsafe fn check_standard_acl(ctx: *mut raw::RedisModuleCtx, argv: &[*mut raw::RedisModuleString], argv0: &[u8]) -> Result<(), String> {
    let Some(std) = standard_name_for(argv0) else { return Ok(()) };
    let std = std.to_bytes();
    // SAFETY: a command context of a client with a user (the caller excludes the
    // primary and AOF clients, whose user is NULL); every string created here is freed.
    let user_name: String;
    unsafe {
        let name = api!(RedisModule_GetCurrentUserName)(ctx);
        if name.is_null() {
            return Ok(());
        }
        user_name = String::from_utf8_lossy(super::ctx::string_bytes(name)).into_owned();
        let user = api!(RedisModule_GetModuleUserFromUserName)(name);
        api!(RedisModule_FreeString)(ctx, name);
        if user.is_null() {
            return Ok(());
        }
        let std_name = api!(RedisModule_CreateString)(std::ptr::null_mut(), std.as_ptr().cast(), std.len());
        let mut args: Vec<*mut raw::RedisModuleString> = Vec::with_capacity(argv.len());
        args.push(std_name);
        args.extend_from_slice(argv.get(1..).unwrap_or(&[]));
        let rc = api!(RedisModule_ACLCheckCommandPermissions)(user, args.as_mut_ptr(), args.len() as c_int);
        api!(RedisModule_FreeString)(std::ptr::null_mut(), std_name);
        api!(RedisModule_FreeModuleUser)(user);
        if rc == raw::REDISMODULE_OK as c_int {
            return Ok(());
        }
    }
    // The built-in's text names the command in lower case, with its subcommand.
    let mut full = String::from_utf8_lossy(std).to_lowercase();
    if (std == b"XGROUP" || std == b"XINFO") && argv.len() > 1 {
        // SAFETY: argv holds the running command's arguments (the caller's contract).
        let sub = unsafe { super::ctx::string_bytes(argv[1]) };
        full.push('|');
        full.push_str(&String::from_utf8_lossy(sub).to_lowercase());
    }
    // The server's own text: 7.2 names the user (getAclErrorMessage).
    if crate::config::host_level() >= crate::config::Level::V7_2 {
        Err(format!("NOPERM User {user_name} has no permissions to run the '{full}' command"))
    } else {
        Err(format!("NOPERM this user has no permissions to run the '{full}' command"))
    }
}

// ---- the server's node limits ----------------------------------------------------

/// Reads `stream-node-max-entries` / `stream-node-max-bytes` into the limits
/// used in takeover mode (CONFIG GET through RM_Call; NOSELF keeps it unfiltered).
pub fn sync_server_node_limits(ctx: *mut raw::RedisModuleCtx) {
    let context = redis_module::Context::new(ctx);
    for (name, slot) in [
        ("stream-node-max-entries", &crate::config::SERVER_NODE_MAX_ENTRIES),
        ("stream-node-max-bytes", &crate::config::SERVER_NODE_MAX_BYTES),
    ] {
        if let Ok(redis_module::RedisValue::Array(v)) = context.call("CONFIG", &["GET", name]) {
            let value = match v.get(1) {
                Some(redis_module::RedisValue::BulkString(s)) => s.parse::<i64>().ok(),
                Some(redis_module::RedisValue::SimpleString(s)) => s.parse::<i64>().ok(),
                Some(redis_module::RedisValue::BulkRedisString(s)) => s.try_as_str().ok().and_then(|s| s.parse().ok()),
                _ => None,
            };
            if let Some(v) = value {
                slot.store(v, Ordering::Relaxed);
            }
        }
    }
}

unsafe extern "C" fn on_config_change(ctx: *mut raw::RedisModuleCtx, _eid: raw::RedisModuleEvent, _sub: u64, data: *mut std::os::raw::c_void) {
    super::fence::guard("config change event", (), || {
        // SAFETY: for REDISMODULE_EVENT_CONFIG the data is a RedisModuleConfigChange
        // with num_changes valid C strings.
        let change = unsafe { data.cast::<raw::RedisModuleConfigChange>().as_ref() };
        let Some(change) = change else { return };
        let mut ours = false;
        for i in 0..change.num_changes as usize {
            // SAFETY: i < num_changes, each a NUL-terminated name.
            let name = unsafe { std::ffi::CStr::from_ptr(*change.config_names.add(i)) };
            ours |= name.to_bytes().starts_with(b"stream-node-max-");
        }
        if ours {
            sync_server_node_limits(ctx);
        }
    })
}

/// Turns takeover on at load: the filter, and the server's node limits kept in
/// sync through the config-change event.
pub fn start(context: &redis_module::Context) -> Result<(), String> {
    let ctx = context.ctx;
    if !install(ctx) {
        return Err("cannot register the command filter".into());
    }
    sync_server_node_limits(ctx);
    let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_CONFIG, dataver: 1 };
    // SAFETY: valid OnLoad ctx; the callback lives as long as the module.
    let rc = unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx, event, Some(on_config_change)) };
    if rc != raw::REDISMODULE_OK as c_int {
        return Err("cannot subscribe to config changes".into());
    }
    Ok(())
}
