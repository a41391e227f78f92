//! Command registration: CreateCommand / CreateSubcommand, then SetCommandInfo
//! for arity and key specs, and the trampoline every command runs through.

use super::ctx::{cstring, Ctx};
use super::docs::{extend_twin_doc, own_doc, twin_docs, twin_of, CDocs, Doc};
use super::{api, fence, log_warning};
use crate::error::Error;
use redis_module::raw;
use std::ffi::CString;
use std::mem::size_of;
use std::os::raw::c_int;

/// A command handler: parse, execute, reply. Errors are replied by the trampoline.
pub type Handler = fn(&Ctx) -> Result<(), Error>;

/// The C entry point Redis calls.
pub type CmdFunc = unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// Key spec flags of the command table (REDISMODULE_CMD_KEY_*), by what the key is used for.
pub const RW_UPDATE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;
pub const RW_INSERT: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_INSERT;
pub const RW_DELETE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_DELETE;
pub const RO_ACCESS: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
pub const RO: u32 = raw::REDISMODULE_CMD_KEY_RO;

/// Where a command's keys are, with ACL / cluster flags (REDISMODULE_CMD_KEY_*).
#[derive(Clone, Copy, Debug)]
pub struct KeyAt {
    /// The key's index, or (with `after_streams`) where the search for STREAMS starts.
    pub pos: i32,
    pub flags: u32,
    /// XREAD-style: the keys are the first half of the arguments after `STREAMS`.
    pub after_streams: bool,
}

/// A row of the command table.
pub struct Command {
    /// Full name (`XS.ADD`) or, inside a container, the subcommand name (`stream`).
    pub name: &'static str,
    pub func: Option<CmdFunc>,
    pub flags: &'static str,
    /// Redis arity: N exact, -N at least N (command name included).
    pub arity: i32,
    pub key: Option<KeyAt>,
    pub subcommands: &'static [Command],
}

/// Runs a handler inside the panic fence and replies its error, if any.
///
/// # Safety
/// The arguments are those Redis passed to a command callback.
pub unsafe fn run(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int, h: Handler) -> c_int {
    // SAFETY: the arguments come straight from Redis's command callback.
    let c = unsafe { Ctx::for_command(ctx, argv, argc) };
    if c.is_keys_position_request() {
        report_stream_keys(&c);
        return raw::REDISMODULE_OK as c_int;
    }
    // A command that may read a node kept on disk holds its replies back: a read that fails
    // ends the command (a panic, src/listpack `packed_view`) and its reply is an error, with
    // nothing of the reply before it (src/ffi/ctx/reply.rs).
    if crate::tier::cold::has_cold() {
        c.hold_replies();
    }
    let r = fence::catch(|| {
        let twin = super::takeover::active() || crate::config::ACL_TWIN.value.load(std::sync::atomic::Ordering::Relaxed);
        if twin && !c.must_obey() {
            // SAFETY: ctx and argv are this command's; must_obey() excluded primary and AOF.
            if let Err(msg) = unsafe { super::takeover::check_standard_acl(ctx, c.argv(), c.arg(0)) } {
                if c.in_script() {
                    // A script's call is refused as scriptVerifyACL words it (ACL_DENIED_CMD;
                    // key denials come from Redis's own check of the XS.* key specs): 7.2
                    // prefixes the ACL message, 7.0 has a text of its own.
                    if crate::config::host_level() >= crate::config::Level::V7_2 {
                        let detail = msg.strip_prefix("NOPERM ").unwrap_or(&msg);
                        return Err(Error::Full(format!("ERR ACL failure in script: {detail}")));
                    }
                    return Err(Error::Err("The user executing the script can't run this command or subcommand"));
                }
                return Err(Error::Full(msg));
            }
        }
        h(&c)
    });
    match r {
        Ok(Ok(())) => {}
        Ok(Err(Error::WrongArity)) => c.reply_wrong_arity(),
        Ok(Err(e)) => {
            // (Held replies made before the error go: the error is the whole reply.)
            c.drop_held();
            c.reply_error(&e.message());
        }
        Err(msg) if cold_read_failed(&c, &msg) => {}
        Err(msg) => {
            c.drop_held();
            let name = String::from_utf8_lossy(c.arg(0)).into_owned();
            log_warning(&format!("xstream: internal error in {name}: {msg}"));
            c.reply_error("ERR xstream internal error (see the server log)");
        }
    }
    c.send_held();
    raw::REDISMODULE_OK as c_int
}

/// After a command (or a blocked read served) ended by the panic `msg`: if it is a read of a
/// node on disk that failed, the held replies are dropped for the error reply, the faults are
/// logged, and true is returned.
pub(crate) fn cold_read_failed(c: &Ctx, msg: &str) -> bool {
    if msg != crate::listpack::COLD_READ_PANIC {
        return false;
    }
    c.drop_held();
    for f in crate::tier::cold::take_faults() {
        log_warning(&format!("xstream: {f}"));
    }
    c.reply_error(&crate::error::Error::Err(crate::error::COLD_READ_FAILED).message());
    true
}

/// The keys of XS.READ / XS.READGROUP (the only commands flagged `getkeys-api`), for Redis's
/// keys-position request. Redis 7.0 finds a module command's keys for cluster redirection
/// (getNodeByQuery -> getKeysFromCommand) only through this callback or the legacy first/last
/// key range, never through key specs, so without it an XS.READ sent to a node that does not own
/// the key ran there instead of answering -MOVED (tests/cluster.rs).
fn report_stream_keys(c: &Ctx) {
    let args: Vec<&[u8]> = (0..c.argc()).map(|i| c.arg(i)).collect();
    if let Some(keys) = stream_key_positions(&args) {
        for i in keys {
            c.key_at_pos(i);
        }
    }
}

/// Positions of the keys of an XREAD-style command as t_stream.c's xreadGetKeys finds them:
/// options are skipped up to the first `STREAMS`, then the first half of what follows are keys;
/// a malformed command has none (it fails with its syntax error wherever it runs).
/// MAXCOUNT / MAXSIZE (Redis 8.10, which the module accepts on every host) are skipped too.
pub fn stream_key_positions(args: &[&[u8]]) -> Option<std::ops::Range<usize>> {
    let mut i = 1;
    let mut streams_pos = None;
    while i < args.len() {
        let a = args[i];
        if a.eq_ignore_ascii_case(b"block")
            || a.eq_ignore_ascii_case(b"count")
            || a.eq_ignore_ascii_case(b"claim")
            || a.eq_ignore_ascii_case(b"maxcount")
            || a.eq_ignore_ascii_case(b"maxsize")
        {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"group") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"noack") {
        } else if a.eq_ignore_ascii_case(b"streams") {
            streams_pos = Some(i);
            break;
        } else {
            break;
        }
        i += 1;
    }
    let sp = streams_pos?;
    let num = args.len() - sp - 1;
    if num == 0 || !num.is_multiple_of(2) {
        return None;
    }
    Some(sp + 1..sp + 1 + num / 2)
}

static INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
};

/// `since` of every command: the module version (MODULE_VERSION = major*10000 + minor*100 + patch).
fn since() -> &'static std::ffi::CStr {
    static SINCE: std::sync::OnceLock<CString> = std::sync::OnceLock::new();
    SINCE.get_or_init(|| {
        let v = crate::MODULE_VERSION;
        CString::new(format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)).unwrap_or_default()
    })
}

fn set_info(cmd: *mut raw::RedisModuleCommand, c: &Command, doc: Option<&Doc>) -> Result<(), String> {
    // SAFETY: all-zero is a valid value for this plain C struct (null pointers,
    // zero integers; begin_search_type 0 terminates a key-spec array).
    let mut specs: [raw::RedisModuleCommandKeySpec; 3] = unsafe { std::mem::zeroed() };
    let mut nspecs = usize::from(c.key.is_some());
    if let Some(k) = c.key {
        specs[0].flags = u64::from(k.flags);
        specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        specs[0].fk.range.keystep = 1;
        if k.after_streams {
            specs[0].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
            specs[0].bs.keyword.keyword = c"STREAMS".as_ptr();
            specs[0].bs.keyword.startfrom = k.pos;
            // Up to the last argument, one key in two: the first half.
            specs[0].fk.range.lastkey = -1;
            specs[0].fk.range.limit = 2;
        } else {
            specs[0].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
            specs[0].bs.index.pos = k.pos;
            specs[0].fk.range.lastkey = 0;
            specs[0].fk.range.limit = 0;
        }
        if let Some((at, flags)) = second_key(c) {
            // A second key (XS.GROUP SETPOLICY ... DEADLETTER dlq-key; XS.GROUP REDRIVE dlq source).
            specs[1].flags = u64::from(flags);
            match at {
                SecondKey::Keyword(keyword, from) => {
                    specs[1].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
                    specs[1].bs.keyword.keyword = keyword.as_ptr();
                    specs[1].bs.keyword.startfrom = from;
                }
                SecondKey::Index(pos) => {
                    specs[1].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
                    specs[1].bs.index.pos = pos;
                }
            }
            specs[1].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            specs[1].fk.range.lastkey = 0;
            specs[1].fk.range.keystep = 1;
            specs[1].fk.range.limit = 0;
            nspecs = 2;
        }
    }
    // SAFETY: as above, zero is valid for every field.
    let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
    info.version = &INFO_VERSION;
    info.arity = c.arity;
    if c.key.is_some() {
        info.key_specs = specs.as_mut_ptr();
    }
    info.since = since().as_ptr();
    // The twin's summary, complexity and argument tree (src/ffi/docs.rs); `cdocs` owns
    // what the pointers point to until SetCommandInfo has copied it.
    let cdocs = doc.map(|d| CDocs::build(d, nspecs));
    if let Some(d) = &cdocs {
        info.summary = d.summary.unwrap_or(std::ptr::null());
        info.complexity = d.complexity.unwrap_or(std::ptr::null());
        info.args = d.args.unwrap_or(std::ptr::null_mut());
    }
    // SAFETY: cmd comes from GetCommand/CreateSubcommand; info and specs outlive
    // the call and Redis copies what it keeps.
    let rc = unsafe { api!(RedisModule_SetCommandInfo)(cmd, &info) };
    drop(cdocs);
    if rc == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(format!("SetCommandInfo failed for {}", c.name))
    }
}

/// Where a second key is.
enum SecondKey {
    /// After a keyword, searched from an index.
    Keyword(&'static std::ffi::CStr, i32),
    /// At an index.
    Index(i32),
}

/// The commands with a second key: SETPOLICY's dead-letter key after DEADLETTER (written by
/// later commands: RW INSERT), searched from the first option; REDRIVE's source key, the
/// third argument (RW INSERT).
fn second_key(c: &Command) -> Option<(SecondKey, u32)> {
    let rw_insert = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_INSERT;
    match c.name {
        "setpolicy" => Some((SecondKey::Keyword(c"DEADLETTER", 4), rw_insert)),
        "redrive" => Some((SecondKey::Index(3), rw_insert)),
        _ => None,
    }
}

fn key_range(c: &Command) -> (c_int, c_int, c_int) {
    match c.key {
        // XS.GROUP REDRIVE dlq source: both keys.
        Some(k) if c.name == "redrive" => (k.pos, k.pos + 1, 1),
        Some(k) if !k.after_streams => (k.pos, k.pos, 1),
        _ => (0, 0, 0),
    }
}

/// Creates a top-level command (and its subcommands, for a container).
pub fn create(context: &redis_module::Context, c: &Command) -> Result<(), String> {
    let ctx = context.ctx;
    let name = cstring(c.name);
    let flags = cstring(c.flags);
    let (first, last, step) = key_range(c);
    // SAFETY: called from OnLoad with its ctx; strings outlive the call (copied by Redis).
    let rc = unsafe { api!(RedisModule_CreateCommand)(ctx, name.as_ptr(), c.func, flags.as_ptr(), first, last, step) };
    if rc != raw::REDISMODULE_OK as c_int {
        return Err(format!("cannot create command {} (name taken?)", c.name));
    }
    // SAFETY: the command was just created by this module.
    let cmd = unsafe { api!(RedisModule_GetCommand)(ctx, name.as_ptr()) };
    if cmd.is_null() {
        return Err(format!("cannot look up command {}", c.name));
    }
    // The built-in twin's documentation, from this server (None without a twin).
    // With the module's own additions where the twin is older than the module's syntax, or the
    // module's own documentation when this host has no twin.
    let twin = twin_of(c.name);
    let doc = match twin.as_deref().and_then(|t| twin_docs(context, t)) {
        Some(mut d) => {
            extend_twin_doc(c.name, &mut d);
            Some(d)
        }
        None => own_doc(c.name),
    };
    if c.func.is_some() {
        set_info(cmd, c, doc.as_ref())?;
    }
    set_acl_categories(cmd, c);
    for sub in c.subcommands {
        let sname = cstring(sub.name);
        let sflags = cstring(sub.flags);
        let (first, last, step) = key_range(sub);
        // SAFETY: cmd is our container command; strings are copied by Redis.
        let rc = unsafe { api!(RedisModule_CreateSubcommand)(cmd, sname.as_ptr(), sub.func, sflags.as_ptr(), first, last, step) };
        if rc != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot create subcommand {}|{}", c.name, sub.name));
        }
        let full = cstring(&format!("{}|{}", c.name, sub.name));
        // SAFETY: the subcommand was just created by this module.
        let scmd = unsafe { api!(RedisModule_GetCommand)(ctx, full.as_ptr()) };
        if scmd.is_null() {
            return Err(format!("cannot look up subcommand {}|{}", c.name, sub.name));
        }
        let own = own_doc(&format!("{}|{}", c.name, sub.name));
        let sub_doc = match (&doc, &twin) {
            (Some(d), Some(t)) => d.subcommand(t, sub.name),
            _ => None,
        }
        .or(own.as_ref());
        set_info(scmd, sub, sub_doc)?;
        set_acl_categories(scmd, sub);
    }
    Ok(())
}

/// The built-in twin's ACL categories, from the command's flags as Redis derives
/// them (setImplicitACLCategories) plus `@stream`.
fn acl_categories(c: &Command) -> String {
    let flags: Vec<&str> = c.flags.split_whitespace().collect();
    let mut cats = vec!["stream"];
    if flags.contains(&"write") {
        cats.push("write");
    }
    if flags.contains(&"readonly") {
        cats.push("read");
    }
    if flags.contains(&"blocking") {
        cats.push("blocking");
    }
    cats.push(if flags.contains(&"fast") { "fast" } else { "slow" });
    cats.join(" ")
}

/// Redis 7.2+ (RedisModule_SetCommandACLCategories): XS.* commands join their
/// twin's categories, so `+@stream`, `-@write` and the like cover them without
/// `xstream.acl-twin`. Not in takeover mode: there a denial must name the
/// standard command (`'xadd'`), which the twin check does, while Redis's own
/// check would name `'xs.add'` first. On 7.0 the function is absent.
fn set_acl_categories(cmd: *mut raw::RedisModuleCommand, c: &Command) {
    if crate::config::TAKEOVER.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    // SAFETY: the API table is filled once by RedisModule_Init, before OnLoad runs
    // this, and never written again.
    let Some(f) = (unsafe { raw::RedisModule_SetCommandACLCategories }) else { return };
    let cats = cstring(&acl_categories(c));
    // SAFETY: cmd is a command of this module, created during OnLoad; the string is
    // parsed during the call.
    if unsafe { f(cmd, cats.as_ptr()) } != raw::REDISMODULE_OK as c_int {
        log_warning(&format!("xstream: cannot set the ACL categories of {}", c.name));
    }
}

/// Defines `unsafe extern "C" fn $name` that runs `$handler` through [`run`]. The unsafe code
/// is this macro's (src/commands denies unsafe code of its own: `make lint` checks the text).
#[macro_export]
macro_rules! command_entry {
    ($name:ident, $handler:path) => {
        #[allow(unsafe_code)]
        unsafe extern "C" fn $name(
            ctx: *mut redis_module::raw::RedisModuleCtx,
            argv: *mut *mut redis_module::raw::RedisModuleString,
            argc: std::os::raw::c_int,
        ) -> std::os::raw::c_int {
            // SAFETY: the arguments come straight from Redis's command callback.
            unsafe { $crate::ffi::register::run(ctx, argv, argc, $handler) }
        }
    };
}
