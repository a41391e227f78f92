//! A command's view of Redis: arguments, keys, replies, propagation, events.
//!
//! Command handlers (src/commands) see only this safe surface; every raw call
//! lives here with the reason it is sound.

use super::api;
use crate::listpack::Value;
use crate::stream::Stream;
use redis_module::raw;
use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_long};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

mod call;
mod key;
mod replicate;
mod reply;

pub use call::*;
pub use key::*;

/// The command being executed.
pub struct Ctx {
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: usize,
    /// `argv` is the argument vector Redis passed to a command callback (the
    /// client's own, see [`set_argv_rewrite`]), not one the module made.
    command: bool,
    /// Arguments replaced by [`Ctx::replicate_with`], released when the Ctx drops
    /// (so that a slice of one taken earlier stays valid for the whole command).
    retired: [Cell<*mut raw::RedisModuleString>; REWRITE_MAX],
    /// The clock as first read in this call (0: not read yet): one time per command, as
    /// the built-in's `commandTimeSnapshot()` (7.2+), so that a due time computed while
    /// parsing and the ID of the same XS.ADD agree to the millisecond.
    now: Cell<u64>,
    /// Replies held back (see [`Ctx::hold_replies`]): None while replies go straight out.
    held: std::cell::RefCell<Option<reply::HeldReplies>>,
    /// `held` is Some (one load per reply on the common path, where it is not).
    holding: Cell<bool>,
}

/// The most arguments one command replaces in its argv (XS.ADD: the ID, `~` and
/// the trim threshold).
const REWRITE_MAX: usize = 3;

/// The host's command dispatcher passes the client's own argv, the one
/// RedisModule_ReplicateVerbatim propagates (decided at load from the host's
/// version: [`super::host::Host::passes_client_argv`]).
static ARGV_IS_CLIENTS: AtomicBool = AtomicBool::new(false);

/// Called once at load with the host check's verdict.
pub fn set_argv_rewrite(host_passes_client_argv: bool) {
    ARGV_IS_CLIENTS.store(host_passes_client_argv, Ordering::Relaxed);
}

/// Whether [`Ctx::replicate_with`] rewrites the argv (host check and the
/// `xstream.argv-rewrite` config).
pub fn argv_rewrite() -> bool {
    ARGV_IS_CLIENTS.load(Ordering::Relaxed) && crate::config::ARGV_REWRITE.load(Ordering::Relaxed)
}

/// What a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Empty,
    Stream,
    Other,
}

/// Arguments of a propagated command gathered on the stack.
const REPLICATE_INLINE: usize = 24;

/// The most changes one command adds to the dirty counter beyond its propagation
/// (see [`Ctx::add_dirty`]).
pub const DIRTY_EXACT_MAX: u64 = 32;

/// An argument of a propagated command.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// The client's argument at this index, passed through.
    Orig(usize),
    /// New bytes.
    New(&'a [u8]),
    /// A constant word, created once at load (see [`Word`]).
    Word(Word),
}

/// A name a write refers to (a key, a group): an argument of the running command, passed on
/// by reference when propagated, or bytes the module holds (a timer's key, a dead-letter
/// key), created as a string where Redis needs one. Writes shared by commands and
/// time-driven jobs (src/ops) take names, never argv positions alone.
#[derive(Clone, Copy, Debug)]
pub enum Name<'a> {
    Arg(usize),
    Bytes(&'a [u8]),
}

impl<'a> From<Name<'a>> for Arg<'a> {
    fn from(n: Name<'a>) -> Self {
        match n {
            Name::Arg(i) => Arg::Orig(i),
            Name::Bytes(b) => Arg::New(b),
        }
    }
}

/// Constant arguments of propagated commands, kept as strings for the module's
/// lifetime so that propagating a delivery (XCLAIM ... TIME ... RETRYCOUNT ...)
/// creates only the strings that vary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word {
    Zero,
    Time,
    RetryCount,
    Force,
    JustId,
    LastId,
    SetId,
    EntriesRead,
    CreateConsumer,
}

const WORD_TEXT: [&str; 9] = ["0", "TIME", "RETRYCOUNT", "FORCE", "JUSTID", "LASTID", "SETID", "ENTRIESREAD", "CREATECONSUMER"];

static WORDS: [std::sync::atomic::AtomicPtr<raw::RedisModuleString>; 9] = [const { std::sync::atomic::AtomicPtr::new(ptr::null_mut()) }; 9];

/// Creates the constant words (at load, once).
pub fn init_words() {
    for (slot, text) in WORDS.iter().zip(WORD_TEXT) {
        // SAFETY: a string with a NULL ctx is owned by the module and never freed.
        let s = unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), text.as_ptr().cast(), text.len()) };
        slot.store(s, std::sync::atomic::Ordering::Relaxed);
    }
}

fn word(w: Word) -> *mut raw::RedisModuleString {
    WORDS[w as usize].load(std::sync::atomic::Ordering::Relaxed)
}

impl Drop for Ctx {
    fn drop(&mut self) {
        for r in &self.retired {
            let s = r.replace(ptr::null_mut());
            if !s.is_null() {
                // SAFETY: a string replace_with took out of the client's argv: the
                // argv's reference became ours, and nothing else refers to it
                // through us (alsoPropagate took its own references, if any).
                unsafe { api!(RedisModule_FreeString)(ptr::null_mut(), s) };
            }
        }
    }
}

impl Ctx {
    /// # Safety
    /// `ctx`, `argv` and `argc` must be the arguments Redis passed to a command
    /// callback, valid for the duration of the call; or a context Redis passed to
    /// a callback and `argc` strings of the caller's that outlive the `Ctx`
    /// (module-initiated work on keys: src/ffi/adopt.rs).
    pub unsafe fn new(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int) -> Self {
        Ctx {
            ctx,
            argv,
            argc: argc.max(0) as usize,
            command: false,
            retired: [const { Cell::new(ptr::null_mut()) }; REWRITE_MAX],
            now: Cell::new(0),
            held: std::cell::RefCell::new(None),
            holding: Cell::new(false),
        }
    }

    /// A command callback's context.
    ///
    /// # Safety
    /// `ctx`, `argv` and `argc` are exactly what Redis passed to a command
    /// callback (RedisModuleCommandDispatcher), valid for the duration of the call.
    pub unsafe fn for_command(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int) -> Self {
        // SAFETY: forwarded from the caller's contract.
        let mut c = unsafe { Ctx::new(ctx, argv, argc) };
        c.command = true;
        c
    }

    /// The context of a callback that is not a command (a timer, a server or keyspace
    /// event): no arguments; keys are opened by name.
    ///
    /// # Safety
    /// `ctx` is the context Redis passed to the running callback, valid for its duration.
    pub(super) unsafe fn for_callback(ctx: *mut raw::RedisModuleCtx) -> Self {
        // SAFETY: forwarded from the caller's contract; no argv (argc 0: never read).
        unsafe { Ctx::new(ctx, ptr::null_mut(), 0) }
    }

    pub(super) fn raw(&self) -> *mut raw::RedisModuleCtx {
        self.ctx
    }

    /// The database the context's client has selected.
    pub fn selected_db(&self) -> i32 {
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_GetSelectedDb)(self.ctx) }
    }

    /// Selects database `db` for the context's client (a callback's temporary client):
    /// false if it does not exist.
    pub fn select_db(&self, db: i32) -> bool {
        // SAFETY: valid ctx; SelectDb fails for a database that does not exist.
        unsafe { api!(RedisModule_SelectDb)(self.ctx, db) == raw::REDISMODULE_OK as c_int }
    }

    /// The bytes of a name.
    pub fn name_bytes<'s>(&'s self, n: Name<'s>) -> &'s [u8] {
        match n {
            Name::Arg(i) => self.arg(i),
            Name::Bytes(b) => b,
        }
    }

    /// Opens a key by name: an argument as [`Ctx::key`] opens it (adoption included), bytes
    /// as [`Ctx::open_key_named`].
    pub fn open(&self, n: Name<'_>, write: bool) -> Key<'_> {
        match n {
            Name::Arg(i) => self.key(i, write),
            Name::Bytes(b) => self.open_key_named(b, write),
        }
    }

    /// Runs `f` with the string of a name (created and freed here for bytes).
    fn with_string(&self, n: Name<'_>, f: impl FnOnce(*mut raw::RedisModuleString)) {
        match n {
            Name::Arg(i) => f(self.arg_string(i)),
            Name::Bytes(b) => {
                // SAFETY: a string from a valid buffer, NULL ctx: ours, freed below; Redis
                // takes its own reference where it keeps one.
                let s = unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), b.as_ptr().cast(), b.len()) };
                f(s);
                // SAFETY: created above.
                unsafe { api!(RedisModule_FreeString)(ptr::null_mut(), s) };
            }
        }
    }

    /// Keyspace event of class `t` (streams) on a key by name.
    pub fn notify_name(&self, event: &CStr, n: Name<'_>) {
        self.with_string(n, |s| {
            // SAFETY: valid ctx, NUL-terminated event, live string.
            unsafe { api!(RedisModule_NotifyKeyspaceEvent)(self.ctx, raw::REDISMODULE_NOTIFY_STREAM as c_int, event.as_ptr(), s) };
        });
    }

    /// signalModifiedKey on a key by name.
    pub fn signal_modified_name(&self, n: Name<'_>) {
        // SAFETY: valid ctx and live string.
        self.with_string(n, |s| unsafe {
            api!(RedisModule_SignalModifiedKey)(self.ctx, s);
        });
    }

    /// Blocked readers of a key by name may be served (SignalKeyAsReady, in the selected DB).
    pub fn signal_ready_name(&self, n: Name<'_>) {
        super::blocking::written();
        self.signal_ready_quietly(n);
    }

    /// SignalKeyAsReady without telling the blocked readers' registry that a write did it
    /// (the time-driven wake-ups, src/ffi/blocking.rs `wake_on_time`).
    pub(in crate::ffi) fn signal_ready_quietly(&self, n: Name<'_>) {
        // SAFETY: valid ctx and live string.
        self.with_string(n, |s| unsafe {
            api!(RedisModule_SignalKeyAsReady)(self.ctx, s);
        });
    }

    /// Whether the server acts on time-driven work now: a primary that is not loading, with
    /// clients not paused. A replica (or a loading server) leaves its clock alone and waits
    /// for what its primary propagates. While clients are paused (`CLIENT PAUSE`, the
    /// FAILOVER and Cluster manual failover pauses) nothing may be propagated: Redis asserts
    /// it in `propagatePendingCommands` and aborts, as a timer's trim, expiry or wake-up
    /// would make it (found with a MAXAGE stream, a replica and `CLIENT PAUSE 3000 WRITE`).
    /// Redis pauses its own key expiry then; the module's time-driven work waits the same
    /// way, and a failover that follows leaves it to the new primary.
    pub fn acts_on_time(&self) -> bool {
        let f = self.flags();
        f & raw::REDISMODULE_CTX_FLAGS_MASTER != 0 && f & raw::REDISMODULE_CTX_FLAGS_LOADING == 0 && !paused()
    }

    /// A primary that is not loading (the keyspace log's notifications count only there).
    pub fn is_primary_serving(&self) -> bool {
        let f = self.flags();
        f & raw::REDISMODULE_CTX_FLAGS_MASTER != 0 && f & raw::REDISMODULE_CTX_FLAGS_LOADING == 0
    }

    pub fn argc(&self) -> usize {
        self.argc
    }

    /// Argument `i` as bytes (empty past the end).
    pub fn arg(&self, i: usize) -> &[u8] {
        if i >= self.argc {
            return &[];
        }
        // SAFETY: i < argc, and argv holds argc valid strings for this call.
        let s = unsafe { *self.argv.add(i) };
        // SAFETY: s is an argument of this call, valid while the Ctx (borrowed by the result) lives.
        unsafe { string_bytes(s) }
    }

    /// The raw argument vector.
    pub fn argv(&self) -> &[*mut raw::RedisModuleString] {
        if self.argv.is_null() || self.argc == 0 {
            return &[];
        }
        // SAFETY: argv holds argc valid pointers for the duration of the call.
        unsafe { std::slice::from_raw_parts(self.argv, self.argc) }
    }

    pub fn arg_string(&self, i: usize) -> *mut raw::RedisModuleString {
        if i >= self.argc {
            return ptr::null_mut();
        }
        // SAFETY: i < argc (checked above).
        unsafe { *self.argv.add(i) }
    }

    /// Redis asks for the command's key positions (commands flagged `getkeys-api`).
    pub fn is_keys_position_request(&self) -> bool {
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_IsKeysPositionRequest)(self.ctx) != 0 }
    }

    /// Reports argument `i` as a key (during a keys-position request).
    pub fn key_at_pos(&self, i: usize) {
        // SAFETY: valid ctx in a keys-position request; i < argc (callers pass positions of argv).
        unsafe { api!(RedisModule_KeyAtPos)(self.ctx, i as c_int) };
    }

    fn flags(&self) -> u32 {
        // SAFETY: valid ctx for the duration of the call.
        unsafe { api!(RedisModule_GetContextFlags)(self.ctx) as u32 }
    }

    /// The built-in's `mustObeyClient`: the command comes from the primary or the AOF.
    pub fn must_obey(&self) -> bool {
        self.flags() & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) != 0
    }

    /// The server runs in cluster mode.
    pub fn in_cluster(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_CLUSTER != 0
    }

    /// A fork child (BGSAVE, BGREWRITEAOF, a full sync's RDB) is running.
    pub fn active_child(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_ACTIVE_CHILD != 0
    }

    /// The client speaks RESP3.
    pub fn is_resp3(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_RESP3 != 0
    }

    /// Called from a Lua script (the built-in's CLIENT_SCRIPT).
    pub fn in_script(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_LUA != 0
    }

    /// The client may not block (MULTI, scripts, DENY_BLOCKING).
    pub fn deny_blocking(&self) -> bool {
        self.flags() & (raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING | raw::REDISMODULE_CTX_FLAGS_MULTI | raw::REDISMODULE_CTX_FLAGS_LUA) != 0
    }

    /// Wall clock in milliseconds ([`unix_ms`]), read once per call: every read in one
    /// command (or one timer tick) gives the first one's value, as the built-in's
    /// `commandTimeSnapshot()`. A DELAY's due time and the entry's ID then come from the
    /// same millisecond (read twice, a millisecond boundary between the two let a delayed
    /// entry be delivered 1 ms before its ID's time plus the delay).
    pub fn now_ms(&self) -> u64 {
        match self.now.get() {
            0 => {
                let t = unix_ms();
                self.now.set(t);
                t
            }
            t => t,
        }
    }

    /// Opens key argument `i`: every command opens its keys here. In takeover
    /// mode with `adopt yes`, a built-in stream found there is converted into ours
    /// first, so the command finds one of our streams; a write (`write`) propagates
    /// `XS.IMPORT key` ahead of its own propagation, a read propagates nothing
    /// (src/ffi/adopt.rs). The conversion opens the key for writing on its own,
    /// whatever `write` is.
    pub fn key(&self, i: usize, write: bool) -> Key<'_> {
        let mut key = self.open_key(i, write);
        if super::adopt::active() {
            if key.is_native_stream() {
                drop(key);
                super::adopt::adopt_key(self, i, write);
                return self.open_key(i, write);
            }
            if write {
                super::adopt::send_unsent_import(self, i, &mut key);
            }
        }
        key
    }

    /// Opens key argument `i` as it is, without adoption (XS.IMPORT, XS.EXPORT).
    pub fn open_key(&self, i: usize, write: bool) -> Key<'_> {
        let mode = if write { raw::REDISMODULE_READ | raw::REDISMODULE_WRITE } else { raw::REDISMODULE_READ };
        // SAFETY: the key name is a live argument string; the key is closed in Drop.
        let key = unsafe { api!(RedisModule_OpenKey)(self.ctx, self.arg_string(i), mode as c_int) };
        Key::wrap(self, key.cast(), ptr::null_mut())
    }

    /// Opens a key the module names itself (not an argument): a queue policy's
    /// dead-letter key (src/commands/queue.rs). No adoption.
    pub fn open_key_named(&self, name: &[u8], write: bool) -> Key<'_> {
        let mode = if write { raw::REDISMODULE_READ | raw::REDISMODULE_WRITE } else { raw::REDISMODULE_READ };
        // SAFETY: a string from a valid buffer, NULL ctx: ours, freed when the Key drops
        // (after CloseKey); the key is closed in Drop.
        let (name, key) = unsafe {
            let n = api!(RedisModule_CreateString)(ptr::null_mut(), name.as_ptr().cast(), name.len());
            (n, api!(RedisModule_OpenKey)(self.ctx, n, mode as c_int))
        };
        Key::wrap(self, key.cast(), name)
    }

    /// Whether the client running this command may write `name`, a key the module names
    /// itself (a queue policy's dead-letter key), by the ACL key patterns of its user: the
    /// check the server makes for the keys a command declares. True when there is no user to
    /// check (the primary, the AOF, a timer). A denial is written to `ACL LOG` as the server
    /// writes a denied key (reason `key`, the key as object).
    pub fn may_write_named(&self, name: &[u8]) -> bool {
        // SAFETY: valid ctx; the user name, the module user and the key string are made and
        // freed here; RM_ACLCheckKeyPermissions only reads them.
        unsafe {
            let uname = api!(RedisModule_GetCurrentUserName)(self.ctx);
            if uname.is_null() {
                return true;
            }
            let user = api!(RedisModule_GetModuleUserFromUserName)(uname);
            api!(RedisModule_FreeString)(self.ctx, uname);
            if user.is_null() {
                return true;
            }
            let key = api!(RedisModule_CreateString)(self.ctx, name.as_ptr().cast(), name.len());
            let flags = (raw::REDISMODULE_CMD_KEY_INSERT | raw::REDISMODULE_CMD_KEY_UPDATE) as c_int;
            let ok = api!(RedisModule_ACLCheckKeyPermissions)(user, key, flags) == raw::REDISMODULE_OK as c_int;
            if !ok {
                api!(RedisModule_ACLAddLogEntry)(self.ctx, user, key, raw::RedisModuleACLLogEntryReason_REDISMODULE_ACL_LOG_KEY);
            }
            api!(RedisModule_FreeString)(self.ctx, key);
            api!(RedisModule_FreeModuleUser)(user);
            ok
        }
    }

    /// Keyspace event, WATCH signal and blocked-reader wake-up for an XADD to a key
    /// the module named (the dead-letter key).
    pub fn added_to_named(&self, name: &[u8]) {
        self.appended_to_named(name, true);
    }

    /// [`Ctx::added_to_named`], the keyspace event (`xadd`) only with `notify`.
    pub fn appended_to_named(&self, name: &[u8], notify: bool) {
        // SAFETY: a string from a valid buffer with a NULL ctx, freed below; valid ctx.
        unsafe {
            let n = api!(RedisModule_CreateString)(ptr::null_mut(), name.as_ptr().cast(), name.len());
            api!(RedisModule_SignalModifiedKey)(self.ctx, n);
            if notify {
                api!(RedisModule_NotifyKeyspaceEvent)(self.ctx, raw::REDISMODULE_NOTIFY_STREAM as c_int, c"xadd".as_ptr(), n);
            }
            api!(RedisModule_SignalKeyAsReady)(self.ctx, n);
            api!(RedisModule_FreeString)(ptr::null_mut(), n);
        }
    }
}

/// The module's one clock: Unix time in milliseconds as the server reads it
/// (RedisModule_Milliseconds, the built-in's `mstime()`). Commands read it through
/// [`Ctx::now_ms`]; the timers arm against it.
pub fn unix_ms() -> u64 {
    // SAFETY: no arguments; plain clock read.
    let ms = unsafe { api!(RedisModule_Milliseconds)() };
    ms.max(0) as u64
}

/// Clients are paused (RM_AvoidReplicaTraffic: `CLIENT PAUSE` WRITE or ALL, a FAILOVER or a
/// Cluster manual failover in progress): nothing may be propagated now.
pub fn paused() -> bool {
    // SAFETY: no arguments; reads the server's pause state (main thread).
    unsafe { api!(RedisModule_AvoidReplicaTraffic)() != 0 }
}

/// Bytes of a RedisModuleString (empty for NULL).
///
/// # Safety
/// `s` is NULL or a valid RedisModuleString that outlives `'a` (an argument of
/// the running command or callback).
pub unsafe fn string_bytes<'a>(s: *mut raw::RedisModuleString) -> &'a [u8] {
    if s.is_null() {
        return &[];
    }
    let mut len = 0usize;
    // SAFETY: s is valid for 'a (the caller's contract); StringPtrLen returns its
    // buffer, alive as long as the string.
    unsafe {
        let p = api!(RedisModule_StringPtrLen)(s, &mut len);
        if p.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(p.cast::<u8>(), len)
        }
    }
}

/// A NUL-terminated copy (interior NULs cut the string, as C would).
pub fn cstring(s: &str) -> std::ffi::CString {
    let bytes: Vec<u8> = s.bytes().take_while(|&b| b != 0).collect();
    std::ffi::CString::new(bytes).unwrap_or_default()
}

/// Decimal form of an integer.
pub fn itoa_buf(v: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(20);
    if v < 0 {
        out.push(b'-');
    }
    crate::stream::id::push_u64(&mut out, v.unsigned_abs());
    out
}
