//! Takeover: serve the standard stream command names with our commands.
//!
//! A command filter rewrites argv[0] `XADD` -> `XS.ADD` (and every other stream
//! command) before Redis looks the command up, so plain calls, MULTI/EXEC, EVAL,
//! FCALL and commands replayed from a primary or the AOF all reach the module.
//! (Registering `XADD` itself is impossible while the built-in exists, and
//! `rename-command` plus such a registration crashes 7.0: PLATFORM.md.)
//!
//! No reply may show that a module serves the standard names:
//!
//! - Errors Redis gives before running a command (processCommand: unknown
//!   subcommand of a container, arity of the command or subcommand) and `HELP`
//!   (touches no key) are left to the built-in: the filter leaves argv[0] alone,
//!   so the reply is the built-in's own (`'xadd'`, `'xgroup|help'`,
//!   `Try XGROUP HELP.`), at queue time in MULTI (EXECABORT) as for the built-in,
//!   and as `Wrong number of args calling Redis command from script` in scripts.
//!   The filter knows the arities and subcommands from the command table handed
//!   to [`start`].
//! - Errors our handlers give that name the command: argv[0] is one of the
//!   filter's own strings ([`via_filter`]), so the handler formats the standard
//!   name ([`standard_name`], lower case as `addReplyErrorArity`) or the client's
//!   spelling ([`typed_name`], as t_stream.c's `argv[0]->ptr`).
//! - `TYPE key` becomes XS.TYPE (our streams are `stream`), and
//!   `SCAN cursor [MATCH p] [COUNT n] TYPE stream` becomes XS.SCAN (our streams
//!   match too), so `redis-cli --bigkeys` / `--memkeys` see them.
//!
//! The filter sees every command the server runs: for anything else it costs
//! two API calls (argument 0 and its bytes), a length check and a first-byte
//! check; stream commands, TYPE and SCAN add a few byte compares. Calls the
//! module makes itself (RM_Call: XS.SCAN, XS.IMPORT / XS.EXPORT) are not
//! filtered (NOSELF).

use super::api;
use super::register::Command;
use redis_module::raw;
use std::ffi::CStr;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};
use std::sync::OnceLock;

/// (standard name, module name), upper case: the 21 stream commands (15 of
/// Redis 7.0, XDELEX and XACKDEL of 8.2, XCFGSET and XIDMPRECORD of 8.6, XNACK of
/// 8.8, served also where the host lacks them),
/// then TYPE and SCAN. The index is the command's slot in the tables below.
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
    (c"XDELEX", c"XS.DELEX"),
    (c"XACKDEL", c"XS.ACKDEL"),
    (c"XNACK", c"XS.NACK"),
    (c"XCFGSET", c"XS.CFGSET"),
    (c"XIDMPRECORD", c"XS.IDMPRECORD"),
    (c"TYPE", c"XS.TYPE"),
    (c"SCAN", c"XS.SCAN"),
];

/// Slots: the stream commands are 0..STREAM_SLOTS.
const STREAM_SLOTS: usize = 20;
const TYPE_SLOT: usize = 20;
const SCAN_SLOT: usize = 21;
const SLOTS: usize = 22;

/// Shortest and longest standard name.
const NAME_LEN_MIN: usize = 4;
const NAME_LEN_MAX: usize = 11;

/// The module name for a standard stream command name, if it is one.
pub fn module_name_for(arg0: &[u8]) -> Option<&'static CStr> {
    stream_slot(arg0).map(|i| NAMES[i].1)
}

fn stream_slot(arg0: &[u8]) -> Option<usize> {
    if arg0.len() < NAME_LEN_MIN || arg0.len() > NAME_LEN_MAX || !matches!(arg0.first(), Some(b'x' | b'X')) {
        return None;
    }
    NAMES[..STREAM_SLOTS].iter().position(|(std, _)| std.to_bytes().eq_ignore_ascii_case(arg0))
}

/// The standard name for a module command name (`XS.ADD` -> `XADD`, `XS.TYPE` -> `TYPE`), if any.
pub fn standard_name_for(name: &[u8]) -> Option<&'static CStr> {
    NAMES.iter().find(|(_, m)| m.to_bytes().eq_ignore_ascii_case(name)).map(|(s, _)| *s)
}

// ---- what the filter knows, set once by `start` ------------------------------------

/// A standard name as the filter sees it.
struct Spec {
    /// Redis arity of the command (N exact, -N at least N).
    arity: i32,
    /// Subcommands of a container (XGROUP, XINFO), from the module's table: the
    /// built-in's, with the same names and arities.
    subs: &'static [Command],
    /// The built-in command exists under this name (not renamed away): only then
    /// can it answer the errors it gives before running, and only then are TYPE
    /// and SCAN taken over (a disabled TYPE stays disabled).
    builtin: bool,
}

static SPECS: OnceLock<[Spec; SLOTS]> = OnceLock::new();

/// The argv[0] the filter puts in place of each standard name: module-owned
/// strings, created at start and never freed. The filter retains one reference
/// per replacement, which the client's argv releases; so the count never falls
/// below 2 while a command holds it, and nothing that reuses or re-encodes an
/// argument only when it is its sole owner (the Lua argument cache of
/// freeLuaRedisArgv, tryObjectEncoding) ever touches it. A handler recognises
/// a command that came through the filter by this pointer ([`via_filter`]).
static ARGV0: [AtomicPtr<raw::RedisModuleString>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

/// argv[0] as the client spelled it, the last time the filter rewrote each
/// name. Read by the handler right after (scripts run the filter and then the
/// command; only the BLOCK-from-scripts error echoes the spelling verbatim, the
/// other texts upper-case it).
static SPELLING: [[AtomicU8; NAME_LEN_MAX]; SLOTS] = [const { [const { AtomicU8::new(0) }; NAME_LEN_MAX] }; SLOTS];
static SPELLING_LEN: [AtomicU8; SLOTS] = [const { AtomicU8::new(0) }; SLOTS];

/// Redis's arity check (commandCheckArity).
fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = i64::try_from(argc).unwrap_or(i64::MAX);
    let arity = i64::from(arity);
    !((arity > 0 && arity != argc) || argc < -arity)
}

/// Case-insensitive compare with C-string semantics (strcasecmp on an sds: an
/// argument ends at its first NUL byte).
fn c_eq_ic(arg: &[u8], word: &[u8]) -> bool {
    arg.split(|&b| b == 0).next().unwrap_or_default().eq_ignore_ascii_case(word)
}

/// An option of SCAN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanOpt {
    Count,
    Match,
    Type,
}

/// Walks SCAN's options as scanGenericCommand parses them (from argument 2, each
/// keyword with one value), calling `each(option, index of its keyword)`.
/// False if the built-in would answer a syntax error (unknown keyword or a
/// keyword without its value).
pub fn scan_options<'a>(argc: usize, arg: impl Fn(usize) -> &'a [u8], mut each: impl FnMut(ScanOpt, usize)) -> bool {
    let mut i = 2;
    while i < argc {
        let a = arg(i);
        let opt = if c_eq_ic(a, b"count") {
            ScanOpt::Count
        } else if c_eq_ic(a, b"match") {
            ScanOpt::Match
        } else if c_eq_ic(a, b"type") {
            ScanOpt::Type
        } else {
            return false;
        };
        if argc - i < 2 {
            return false;
        }
        each(opt, i);
        i += 2;
    }
    true
}

/// Whether a SCAN type name selects streams (the built-in compares with strcasecmp).
pub fn is_stream_type_name(name: &[u8]) -> bool {
    c_eq_ic(name, b"stream")
}

/// The slot of the standard name a command came in with, if it came through the
/// filter: argv[0] is then the filter's string.
pub fn via_filter(argv0: *mut raw::RedisModuleString) -> Option<usize> {
    if argv0.is_null() {
        return None;
    }
    ARGV0.iter().position(|p| p.load(Ordering::Relaxed) == argv0)
}

/// The standard name of a slot (`XADD`).
pub fn standard_name(slot: usize) -> &'static [u8] {
    NAMES.get(slot).map_or(&[][..], |(s, _)| s.to_bytes())
}

/// The built-in's `fullname` of a command that came through the filter, as
/// addReplyErrorArity prints it: lower case, `xgroup|create` for a subcommand
/// (`sub` is argument 1, which the lookup matched case-insensitively).
pub fn standard_fullname(slot: usize, sub: &[u8]) -> String {
    let mut full = String::from_utf8_lossy(standard_name(slot)).to_lowercase();
    let container = SPECS.get().and_then(|s| s.get(slot)).is_some_and(|s| !s.subs.is_empty());
    if container {
        full.push('|');
        full.push_str(&String::from_utf8_lossy(sub).to_lowercase());
    }
    full
}

/// argv[0] as the client spelled it for the last command of this slot.
pub fn typed_name(slot: usize) -> Vec<u8> {
    let (Some(buf), Some(len)) = (SPELLING.get(slot), SPELLING_LEN.get(slot)) else { return Vec::new() };
    let len = usize::from(len.load(Ordering::Relaxed)).min(NAME_LEN_MAX);
    buf.iter().take(len).map(|b| b.load(Ordering::Relaxed)).collect()
}

// ---- the filter ----------------------------------------------------------------------

static FILTER: AtomicPtr<raw::RedisModuleCommandFilter> = AtomicPtr::new(std::ptr::null_mut());

/// Argument `i` of the filtered command.
///
/// # Safety
/// `fctx` is the filter context of the running callback and `i` < its argument count.
unsafe fn farg<'a>(fctx: *mut raw::RedisModuleCommandFilterCtx, i: usize) -> &'a [u8] {
    // SAFETY: the caller's contract; the string lives until the filter returns
    // or the argument is replaced (callers do not replace while holding it).
    unsafe { super::ctx::string_bytes(api!(RedisModule_CommandFilterArgGet)(fctx, i as c_int)) }
}

/// # Safety
/// `fctx` is the filter context of the running callback.
unsafe fn fargc(fctx: *mut raw::RedisModuleCommandFilterCtx) -> usize {
    // SAFETY: the caller's contract.
    let n = unsafe { api!(RedisModule_CommandFilterArgsCount)(fctx) };
    usize::try_from(n).unwrap_or(0)
}

/// Whether the module should run this stream command (slot `i`): not when the
/// built-in would refuse it before running (its error text is the reference),
/// and not for HELP (the built-in's, touching no key).
///
/// # Safety
/// `fctx` is the filter context of the running callback.
unsafe fn take_stream(fctx: *mut raw::RedisModuleCommandFilterCtx, spec: &Spec) -> bool {
    if !spec.builtin {
        // Nothing else can answer: the module serves every call (its own arity texts).
        return true;
    }
    // SAFETY: the caller's contract.
    let argc = unsafe { fargc(fctx) };
    if spec.subs.is_empty() {
        return arity_ok(spec.arity, argc);
    }
    if argc < 2 {
        // The container alone: the built-in's arity error.
        return false;
    }
    // SAFETY: argc >= 2.
    let sub = unsafe { farg(fctx, 1) };
    // lookupSubcommand: case-insensitive, whole argument (the dict hashes its length).
    match spec.subs.iter().find(|s| s.name.as_bytes().eq_ignore_ascii_case(sub)) {
        Some(s) => s.name != "help" && arity_ok(s.arity, argc),
        None => false,
    }
}

/// `SCAN cursor [options]` whose last TYPE is `stream`, with options the built-in accepts.
///
/// # Safety
/// `fctx` is the filter context of the running callback.
unsafe fn take_scan(fctx: *mut raw::RedisModuleCommandFilterCtx) -> bool {
    // SAFETY: the caller's contract.
    let argc = unsafe { fargc(fctx) };
    let mut type_at = None;
    // SAFETY: scan_options asks only for indexes below argc.
    let ok = scan_options(
        argc,
        |i| unsafe { farg(fctx, i) },
        |opt, i| {
            if opt == ScanOpt::Type {
                type_at = Some(i + 1);
            }
        },
    );
    // SAFETY: a TYPE value index is below argc (scan_options checked it).
    ok && type_at.is_some_and(|i| is_stream_type_name(unsafe { farg(fctx, i) }))
}

/// The slot whose module command should run this command, if any.
///
/// # Safety
/// `fctx` is the filter context of the running callback; `name` is its argument 0.
unsafe fn decide(fctx: *mut raw::RedisModuleCommandFilterCtx, name: &[u8]) -> Option<usize> {
    let slot = match name {
        [b'x' | b'X', ..] => stream_slot(name)?,
        [b't' | b'T', _, _, _] if name.eq_ignore_ascii_case(b"TYPE") => TYPE_SLOT,
        [b's' | b'S', _, _, _] if name.eq_ignore_ascii_case(b"SCAN") => SCAN_SLOT,
        _ => return None,
    };
    let spec = SPECS.get()?.get(slot)?;
    let take = match slot {
        // SAFETY: the caller's contract.
        TYPE_SLOT => spec.builtin && unsafe { fargc(fctx) } == 2,
        // SAFETY: the caller's contract.
        SCAN_SLOT => spec.builtin && unsafe { take_scan(fctx) },
        // SAFETY: the caller's contract.
        _ => unsafe { take_stream(fctx, spec) },
    };
    take.then_some(slot)
}

unsafe extern "C" fn filter(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // No allocation anywhere in the filter; catch_unwind costs nothing when
    // nothing unwinds.
    super::fence::guard("command filter", (), || {
        // SAFETY: fctx is valid for the duration of the callback; argument 0 exists
        // (Redis never runs a filter on an empty command).
        let name = unsafe { farg(fctx, 0) };
        // Everything that is not XADD..XSETID, TYPE or SCAN leaves here: a length
        // check and a first-byte check.
        if name.len() < NAME_LEN_MIN || name.len() > NAME_LEN_MAX {
            return;
        }
        // SAFETY: fctx is the running filter context and name its argument 0.
        let Some(slot) = (unsafe { decide(fctx, name) }) else { return };
        let Some(s) = ARGV0.get(slot).map(|p| p.load(Ordering::Relaxed)).filter(|p| !p.is_null()) else { return };
        // The spelling, before argument 0 (which `name` borrows) is released.
        if let (Some(buf), Some(len)) = (SPELLING.get(slot), SPELLING_LEN.get(slot)) {
            for (d, &b) in buf.iter().zip(name) {
                d.store(b, Ordering::Relaxed);
            }
            len.store(name.len().min(NAME_LEN_MAX) as u8, Ordering::Relaxed);
        }
        // SAFETY: s is a module-owned string that is never freed; the retained
        // reference passes to the command's argv (ArgReplace releases the old
        // argument and owns the new one), so every replacement is balanced by
        // the release of that argv.
        unsafe {
            api!(RedisModule_RetainString)(std::ptr::null_mut(), s);
            api!(RedisModule_CommandFilterArgReplace)(fctx, 0, s);
        }
    })
}

/// Whether the server has the built-in command `name` (COMMAND INFO; renamed or
/// disabled commands are not found under their old name).
fn builtin_exists(context: &redis_module::Context, name: &str) -> bool {
    matches!(
        context.call("COMMAND", &["INFO", name]),
        Ok(redis_module::RedisValue::Array(v)) if v.first().is_some_and(|e| matches!(e, redis_module::RedisValue::Array(_)))
    )
}

/// Fills the filter's tables from the command table (once).
fn prepare(context: &redis_module::Context, table: &'static [Command]) -> Result<(), String> {
    if SPECS.get().is_some() {
        return Ok(());
    }
    let mut specs = Vec::with_capacity(SLOTS);
    for (i, (std, module)) in NAMES.iter().enumerate() {
        let module = module.to_str().map_err(|e| e.to_string())?;
        let row = table.iter().find(|c| c.name.eq_ignore_ascii_case(module)).ok_or_else(|| format!("{module} is not in the command table"))?;
        let std = std.to_str().map_err(|e| e.to_string())?;
        specs.push(Spec { arity: row.arity, subs: row.subcommands, builtin: builtin_exists(context, std) });
        // SAFETY: a string with a NULL ctx is owned by the module; it is never freed.
        let s = unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), module.as_ptr().cast(), module.len()) };
        ARGV0[i].store(s, Ordering::Relaxed);
    }
    let specs: [Spec; SLOTS] = specs.try_into().map_err(|_| "command table size".to_string())?;
    let _ = SPECS.set(specs);
    Ok(())
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
    let Some(slot) = argv.first().and_then(|&a| via_filter(a)).or_else(|| NAMES.iter().position(|(_, m)| m.to_bytes().eq_ignore_ascii_case(argv0)))
    else {
        return Ok(());
    };
    let std = standard_name(slot);
    let std_name = standard_string(slot);
    if std_name.is_null() {
        return Ok(());
    }
    let user_name: String;
    let user: *mut raw::RedisModuleUser;
    // SAFETY: a command context of a client with a user (the caller excludes the
    // primary and AOF clients, whose user is NULL); the user name and the module
    // user are freed here; std_name is module-owned (ACLCheckCommandPermissions
    // only reads the vector); errno is this thread's, read right after the call.
    unsafe {
        let name = api!(RedisModule_GetCurrentUserName)(ctx);
        if name.is_null() {
            return Ok(());
        }
        user_name = String::from_utf8_lossy(super::ctx::string_bytes(name)).into_owned();
        user = api!(RedisModule_GetModuleUserFromUserName)(name);
        api!(RedisModule_FreeString)(ctx, name);
        if user.is_null() {
            return Ok(());
        }
        // The standard name and the command's arguments, on the stack up to ACL_INLINE.
        let mut small = [std::ptr::null_mut::<raw::RedisModuleString>(); ACL_INLINE];
        let mut heap: Vec<*mut raw::RedisModuleString> = Vec::new();
        let args: &mut [*mut raw::RedisModuleString] = if argv.len() <= ACL_INLINE {
            small[0] = std_name;
            for (d, &a) in small.iter_mut().skip(1).zip(argv.iter().skip(1)) {
                *d = a;
            }
            &mut small[..argv.len().max(1)]
        } else {
            heap.push(std_name);
            heap.extend_from_slice(argv.get(1..).unwrap_or(&[]));
            &mut heap
        };
        *libc::__errno_location() = 0;
        let rc = api!(RedisModule_ACLCheckCommandPermissions)(user, args.as_mut_ptr(), args.len() as c_int);
        // ENOENT: the server has no such command (`rename-command XADD ...`): there
        // is no twin to check, and Redis has checked the XS.* command itself.
        let missing = *libc::__errno_location() == libc::ENOENT;
        if rc == raw::REDISMODULE_OK as c_int || missing {
            api!(RedisModule_FreeModuleUser)(user);
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
    // An ACL LOG entry as the server writes for a denied command (reason `command`, object
    // the command's full name, the user's name). Its `context` reads `module` where the
    // server's says `toplevel`, `multi` or `lua`: RM_ACLAddLogEntry sets it.
    // SAFETY: valid command context; `user` is the module user made above, freed here once;
    // the object string is created and freed here.
    unsafe {
        let object = api!(RedisModule_CreateString)(ctx, full.as_ptr().cast(), full.len());
        api!(RedisModule_ACLAddLogEntry)(ctx, user, object, raw::RedisModuleACLLogEntryReason_REDISMODULE_ACL_LOG_CMD);
        api!(RedisModule_FreeString)(ctx, object);
        api!(RedisModule_FreeModuleUser)(user);
    }
    // The server's own text: 7.2 names the user (getAclErrorMessage).
    if crate::config::host_level() >= crate::config::Level::V7_2 {
        Err(format!("NOPERM User {user_name} has no permissions to run the '{full}' command"))
    } else {
        Err(format!("NOPERM this user has no permissions to run the '{full}' command"))
    }
}

/// Arguments of an ACL twin check gathered on the stack.
const ACL_INLINE: usize = 16;

/// The standard names as strings (`XADD`), for the ACL twin check: module-owned,
/// created on first use, never freed.
static STD_STRINGS: [AtomicPtr<raw::RedisModuleString>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

fn standard_string(slot: usize) -> *mut raw::RedisModuleString {
    let Some(cell) = STD_STRINGS.get(slot) else { return std::ptr::null_mut() };
    let p = cell.load(Ordering::Relaxed);
    if !p.is_null() {
        return p;
    }
    let name = standard_name(slot);
    // SAFETY: a string with a NULL ctx is owned by the module; kept for its lifetime.
    let s = unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), name.as_ptr().cast(), name.len()) };
    cell.store(s, Ordering::Relaxed);
    s
}

// ---- the server's node limits ----------------------------------------------------

/// Reads `stream-node-max-entries` / `stream-node-max-bytes` into the limits
/// used in takeover mode (CONFIG GET through RM_Call; NOSELF keeps it unfiltered).
pub fn sync_server_node_limits(ctx: *mut raw::RedisModuleCtx) {
    let context = redis_module::Context::new(ctx);
    for (name, slot) in
        [("stream-node-max-entries", &crate::config::SERVER_NODE_MAX_ENTRIES), ("stream-node-max-bytes", &crate::config::SERVER_NODE_MAX_BYTES)]
    {
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

/// Turns takeover on at load: the filter (its arities and subcommands from
/// `table`, the module's command table), and the server's node limits kept in
/// sync through the config-change event.
pub fn start(context: &redis_module::Context, table: &'static [Command]) -> Result<(), String> {
    let ctx = context.ctx;
    prepare(context, table)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        assert_eq!(module_name_for(b"xadd"), Some(c"XS.ADD"));
        assert_eq!(module_name_for(b"XReadGroup"), Some(c"XS.READGROUP"));
        assert_eq!(module_name_for(b"XS.ADD"), None);
        assert_eq!(module_name_for(b"SET"), None);
        assert_eq!(module_name_for(b"TYPE"), None);
        assert_eq!(module_name_for(b"x"), None);
        assert_eq!(standard_name_for(b"xs.autoclaim"), Some(c"XAUTOCLAIM"));
        assert_eq!(standard_name_for(b"xs.type"), Some(c"TYPE"));
        assert_eq!(NAMES.len(), SLOTS);
        for (s, m) in &NAMES[..STREAM_SLOTS] {
            assert!(s.to_bytes().len() >= NAME_LEN_MIN && s.to_bytes().len() <= NAME_LEN_MAX);
            assert_eq!(module_name_for(s.to_bytes()), Some(*m));
        }
        assert_eq!(NAMES[TYPE_SLOT].0, c"TYPE");
        assert_eq!(NAMES[SCAN_SLOT].0, c"SCAN");
    }

    #[test]
    fn arity_as_redis() {
        assert!(arity_ok(2, 2) && !arity_ok(2, 1) && !arity_ok(2, 3));
        assert!(arity_ok(-5, 5) && arity_ok(-5, 9) && !arity_ok(-5, 4));
    }

    #[test]
    fn scan_options_as_redis() {
        let run = |args: &[&str]| {
            let mut seen = Vec::new();
            let ok = scan_options(args.len(), |i| args[i].as_bytes(), |o, i| seen.push((o, i)));
            (ok, seen)
        };
        assert_eq!(run(&["SCAN", "0"]), (true, vec![]));
        assert_eq!(
            run(&["scan", "0", "match", "a*", "TYPE", "stream", "Count", "5"]),
            (true, vec![(ScanOpt::Match, 2), (ScanOpt::Type, 4), (ScanOpt::Count, 6)])
        );
        assert!(!run(&["SCAN", "0", "TYPE"]).0);
        assert!(!run(&["SCAN", "0", "FOO", "x"]).0);
        assert!(run(&["SCAN", "0", "type\0x", "stream"]).0);
        assert!(is_stream_type_name(b"STREAM") && is_stream_type_name(b"stream\0junk") && !is_stream_type_name(b"streams"));
    }
}
