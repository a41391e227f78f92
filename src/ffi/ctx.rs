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

/// An open key; closed on drop.
pub struct Key<'c> {
    ctx: &'c Ctx,
    key: *mut raw::RedisModuleKey,
    /// What the key holds, asked once (two API calls) and updated when we set a value.
    kind: Cell<Option<KeyKind>>,
    /// The stream `stream_mut` lent out, if it did: the INFO totals follow it when the key
    /// closes (src/ffi/stats.rs).
    touched: Cell<*mut Stream>,
    /// The name string, when the module created it (a key opened by name), freed on drop.
    owned_name: *mut raw::RedisModuleString,
}

impl Ctx {
    /// # Safety
    /// `ctx`, `argv` and `argc` must be the arguments Redis passed to a command
    /// callback, valid for the duration of the call; or a context Redis passed to
    /// a callback and `argc` strings of the caller's that outlive the `Ctx`
    /// (module-initiated work on keys: src/ffi/adopt.rs).
    pub unsafe fn new(ctx: *mut raw::RedisModuleCtx, argv: *mut *mut raw::RedisModuleString, argc: c_int) -> Self {
        Ctx { ctx, argv, argc: argc.max(0) as usize, command: false, retired: [const { Cell::new(ptr::null_mut()) }; REWRITE_MAX] }
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

    /// Wall clock in milliseconds (the built-in's `mstime()`): [`unix_ms`].
    pub fn now_ms(&self) -> u64 {
        unix_ms()
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
        Key { ctx: self, key: key.cast(), kind: Cell::new(None), touched: Cell::new(std::ptr::null_mut()), owned_name: ptr::null_mut() }
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
        Key { ctx: self, key: key.cast(), kind: Cell::new(None), touched: Cell::new(std::ptr::null_mut()), owned_name: name }
    }

    /// Keyspace event, WATCH signal and blocked-reader wake-up for an XADD to a key
    /// the module named (the dead-letter key).
    pub fn added_to_named(&self, name: &[u8]) {
        // SAFETY: a string from a valid buffer with a NULL ctx, freed below; valid ctx.
        unsafe {
            let n = api!(RedisModule_CreateString)(ptr::null_mut(), name.as_ptr().cast(), name.len());
            api!(RedisModule_SignalModifiedKey)(self.ctx, n);
            api!(RedisModule_NotifyKeyspaceEvent)(self.ctx, raw::REDISMODULE_NOTIFY_STREAM as c_int, c"xadd".as_ptr(), n);
            api!(RedisModule_SignalKeyAsReady)(self.ctx, n);
            api!(RedisModule_FreeString)(ptr::null_mut(), n);
        }
    }

    // ---- replies ----------------------------------------------------------

    pub fn reply_bulk(&self, b: &[u8]) {
        // SAFETY: b is valid for b.len() bytes; Redis copies it.
        unsafe { api!(RedisModule_ReplyWithStringBuffer)(self.ctx, b.as_ptr().cast::<c_char>(), b.len()) };
    }

    /// A listpack value as a bulk string (integers in decimal, as the built-in).
    pub fn reply_value(&self, v: Value) {
        match v {
            Value::Str(s) => self.reply_bulk(s),
            Value::Int(i) => {
                let mut buf = itoa_buf(i);
                self.reply_bulk(buf.as_slice());
                buf.clear();
            }
        }
    }

    pub fn reply_int(&self, v: i64) {
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_ReplyWithLongLong)(self.ctx, v) };
    }

    pub fn reply_array(&self, len: usize) {
        // SAFETY: valid ctx; the caller emits exactly `len` elements.
        unsafe { api!(RedisModule_ReplyWithArray)(self.ctx, len as c_long) };
    }

    /// An array whose length is set later with [`set_array_len`](Self::set_array_len).
    pub fn reply_array_postponed(&self) {
        // SAFETY: valid ctx; the caller sets the length before returning.
        unsafe { api!(RedisModule_ReplyWithArray)(self.ctx, raw::REDISMODULE_POSTPONED_LEN as c_long) };
    }

    pub fn set_array_len(&self, len: usize) {
        // SAFETY: a postponed array is open (caller's contract).
        unsafe { api!(RedisModule_ReplySetArrayLength)(self.ctx, len as c_long) };
    }

    /// A map whose length is set later with [`set_map_len`](Self::set_map_len).
    pub fn reply_map_postponed(&self) {
        // SAFETY: valid ctx; the caller sets the length before returning.
        unsafe { api!(RedisModule_ReplyWithMap)(self.ctx, raw::REDISMODULE_POSTPONED_LEN as c_long) };
    }

    pub fn set_map_len(&self, len: usize) {
        // SAFETY: a postponed map is open (caller's contract).
        unsafe { api!(RedisModule_ReplySetMapLength)(self.ctx, len as c_long) };
    }

    /// A stream ID as a bulk string.
    /// An integer as a bulk string (addReplyBulkLongLong), formatted on the stack.
    pub fn reply_bulk_int(&self, v: i64) {
        let mut buf = [0u8; crate::listpack::INT_STR_MAX_LEN];
        self.reply_bulk(crate::listpack::fmt_i64(v, &mut buf));
    }

    pub fn reply_id(&self, id: crate::stream::StreamId) {
        let mut buf = [0u8; 44];
        let n = id.write_to_slice(&mut buf);
        self.reply_bulk(&buf[..n]);
    }

    /// A map (RESP3) or a flat array of 2*len (RESP2), as the built-in's addReplyMapLen.
    pub fn reply_map(&self, len: usize) {
        // SAFETY: valid ctx; caller emits 2*len elements.
        unsafe { api!(RedisModule_ReplyWithMap)(self.ctx, len as c_long) };
    }

    pub fn reply_null(&self) {
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_ReplyWithNull)(self.ctx) };
    }

    pub fn reply_null_array(&self) {
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_ReplyWithNullArray)(self.ctx) };
    }

    pub fn reply_simple(&self, s: &str) {
        let c = cstring(s);
        // SAFETY: c is NUL-terminated and outlives the call.
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.ctx, c.as_ptr()) };
    }

    /// A status reply from a constant (no copy).
    pub fn reply_status(&self, s: &'static CStr) {
        // SAFETY: s is NUL-terminated and static.
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.ctx, s.as_ptr()) };
    }

    pub fn reply_ok(&self) {
        self.reply_simple("OK");
    }

    /// `msg` includes the error code ("ERR ...", "WRONGTYPE ...").
    pub fn reply_error(&self, msg: &str) {
        let c = cstring(msg);
        // SAFETY: c is NUL-terminated and outlives the call.
        unsafe { api!(RedisModule_ReplyWithError)(self.ctx, c.as_ptr()) };
    }

    /// `wrong number of arguments for '<fullname>' command`. RM_WrongArity prints
    /// the module's fullname (`xs.add`); a command that came through the takeover
    /// filter gets the built-in's (`xadd`, `xgroup|create`).
    pub fn reply_wrong_arity(&self) {
        if let Some(slot) = self.via_filter() {
            let full = super::takeover::standard_fullname(slot, self.arg(1));
            self.reply_error(&format!("ERR wrong number of arguments for '{full}' command"));
            return;
        }
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_WrongArity)(self.ctx) };
    }

    /// The takeover slot of the standard name this command came in with, if it
    /// came through the filter (argv[0] is then the filter's own string).
    fn via_filter(&self) -> Option<usize> {
        super::takeover::via_filter(self.arg_string(0))
    }

    /// argv[0] as the client typed it, which t_stream.c prints in some texts
    /// (`c->argv[0]->ptr`): through the takeover filter, the standard name as
    /// spelled (`xread`), otherwise the module's name as called (`XS.READ`).
    pub fn command_name(&self) -> Vec<u8> {
        match self.via_filter() {
            Some(slot) => super::takeover::typed_name(slot),
            None => self.arg(0).to_vec(),
        }
    }

    // ---- propagation and events ---------------------------------------------

    /// Propagates the command as received. In takeover mode argv[0] is already the
    /// module's name (the filter rewrote it), which is what the AOF needs (see
    /// ffi/takeover.rs).
    pub fn replicate_verbatim(&self) {
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_ReplicateVerbatim)(self.ctx) };
    }

    /// Propagates the command with the arguments at the given indexes replaced
    /// (`cmd` is the command name to use if it must be rebuilt).
    ///
    /// This is what t_stream.c does for XADD `*` and approximate trims: it
    /// rewrites its own argv (rewriteClientCommandArgument) and Redis propagates
    /// that argv. Where the host's dispatcher is known to hand the command the
    /// client's own argv ([`argv_rewrite`]), the new strings go into that argv and
    /// the command is propagated verbatim: no command lookup by name and no new
    /// argv, which made RedisModule_Replicate most of the cost of `XS.ADD *`
    /// (docs/BENCHMARKS.md). Elsewhere (an unknown release, a Ctx the module built,
    /// `xstream.argv-rewrite no`, more than REWRITE_MAX changes) the command goes
    /// out through RedisModule_Replicate with a new argv. Either way replicas and
    /// the AOF receive the same command. One difference remains visible: SLOWLOG
    /// and MONITOR show the rewritten argv (the built-in keeps the original for
    /// them through `c->original_argv`, which the module API cannot set).
    pub fn replicate_with(&self, cmd: &'static CStr, changes: &[(usize, &[u8])]) {
        let in_range = changes.iter().all(|&(i, _)| i >= 1 && i < self.argc);
        if !self.command || changes.len() > REWRITE_MAX || !in_range || !argv_rewrite() {
            // The slow path (hosts not known to pass the client's argv): a new argv.
            let mut args: Vec<Arg> = (1..self.argc).map(Arg::Orig).collect();
            for &(i, b) in changes {
                if let Some(slot) = i.checked_sub(1).and_then(|j| args.get_mut(j)) {
                    *slot = Arg::New(b);
                }
            }
            self.replicate_raw(cmd, &args);
            return;
        }
        for (k, &(i, b)) in changes.iter().enumerate() {
            // SAFETY: creating a string from a valid buffer; with a NULL ctx it is
            // not auto-memory managed: the client's argv owns it from here on and
            // freeClientArgv releases it after the command (as for any argument).
            let new = unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), b.as_ptr().cast(), b.len()) };
            // SAFETY: `command` says argv is the client's argv of this call and
            // 1 <= i < argc (checked above); no Rust reference into the array is
            // held across this write (arg() hands out the strings' bytes, not the
            // array). The old string stays alive in `retired` until the Ctx drops.
            let old = unsafe {
                let slot = self.argv.add(i);
                let old = *slot;
                *slot = new;
                old
            };
            let prev = self.retired[k].replace(old);
            if !prev.is_null() {
                // A second call on the same Ctx (not done today): release the
                // string the first one retired.
                // SAFETY: `prev` left the argv earlier; this reference is ours.
                unsafe { api!(RedisModule_FreeString)(ptr::null_mut(), prev) };
            }
        }
        self.replicate_verbatim();
    }

    /// Propagates `cmd args...` to replicas and the AOF. Arguments the client
    /// sent are passed by reference (Redis takes its own references); only new
    /// ones are created.
    pub fn replicate(&self, cmd: &'static CStr, args: &[Arg]) {
        self.replicate_raw(cmd, args);
    }

    /// The string for a propagated argument; `.1` tells whether it was created here.
    fn arg_ptr(&self, a: &Arg) -> (*mut raw::RedisModuleString, bool) {
        match a {
            Arg::Orig(i) => (self.arg_string(*i), false),
            // SAFETY: creating a string from a valid buffer; the caller frees it.
            Arg::New(b) => (unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), b.as_ptr().cast(), b.len()) }, true),
            Arg::Word(w) => match word(*w) {
                s if !s.is_null() => (s, false),
                _ => {
                    // Before init_words ran: a fresh string, freed by the caller.
                    let t = WORD_TEXT[*w as usize];
                    // SAFETY: creating a string from a valid buffer.
                    (unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), t.as_ptr().cast(), t.len()) }, true)
                }
            },
        }
    }

    fn replicate_raw(&self, cmd: &CStr, args: &[Arg]) {
        // Up to REPLICATE_INLINE arguments are gathered on the stack.
        let mut small = [(ptr::null_mut::<raw::RedisModuleString>(), false); REPLICATE_INLINE];
        let heap: Vec<(*mut raw::RedisModuleString, bool)>;
        let made: &[(*mut raw::RedisModuleString, bool)] = if args.len() <= REPLICATE_INLINE {
            for (slot, a) in small.iter_mut().zip(args) {
                *slot = self.arg_ptr(a);
            }
            &small[..args.len()]
        } else {
            heap = args.iter().map(|a| self.arg_ptr(a)).collect();
            &heap
        };
        let mut ptrs = [ptr::null_mut::<raw::RedisModuleString>(); REPLICATE_INLINE];
        let heap_ptrs: Vec<*mut raw::RedisModuleString>;
        let strings: &[*mut raw::RedisModuleString] = if made.len() <= REPLICATE_INLINE {
            for (slot, m) in ptrs.iter_mut().zip(made) {
                *slot = m.0;
            }
            &ptrs[..made.len()]
        } else {
            heap_ptrs = made.iter().map(|m| m.0).collect();
            &heap_ptrs
        };
        // SAFETY: "v" takes (RedisModuleString **, size_t); Redis takes its own
        // references to the strings, so the ones we created can be freed afterwards.
        unsafe {
            api!(RedisModule_Replicate)(self.ctx, cmd.as_ptr(), c"v".as_ptr(), strings.as_ptr(), strings.len());
        }
        for &(s, created) in made {
            if created {
                // SAFETY: created by arg_ptr with a NULL ctx, so we own it.
                unsafe { api!(RedisModule_FreeString)(ptr::null_mut(), s) };
            }
        }
    }

    /// Adds `n` to the server's dirty counter (`rdb_changes_since_last_save`, what
    /// `save <seconds> <changes>` counts) without propagating anything.
    ///
    /// A module has no API for the counter: RM_Replicate and RM_ReplicateVerbatim
    /// each add one (module.c), and nothing else a module calls does. The built-in
    /// commands add per change (XDEL and XTRIM per entry deleted, XACK per entry
    /// acknowledged, XCLAIM per entry claimed, one per consumer created) while
    /// propagating once, so where our propagation count is below theirs the rest
    /// comes from here: RM_Replicate with the `A` and `R` flags (no AOF, no
    /// replicas) propagates nothing (alsoPropagate returns on an empty target) and
    /// still counts one change. Each call costs a command lookup and a one-element
    /// argv (measured: 0.11 µs), so a single command adds at most
    /// [`DIRTY_EXACT_MAX`]: beyond that (an XTRIM of 100,000 entries would cost
    /// 11 ms where the built-in's whole trim takes 1 ms) the count saturates. At
    /// 128 the bench's XTRIM of half a 200k stream lost 9% against the built-in;
    /// at 32 the cost is about 3.5 µs.
    pub fn add_dirty(&self, n: u64) {
        for _ in 0..n.min(DIRTY_EXACT_MAX) {
            // SAFETY: valid ctx; "AR" are flags only (no arguments follow); XS.LEN is
            // registered, so the lookup succeeds; nothing is propagated.
            unsafe { api!(RedisModule_Replicate)(self.ctx, c"XS.LEN".as_ptr(), c"AR".as_ptr()) };
        }
    }

    /// Keyspace event of class `t` (streams) on key argument `i`.
    pub fn notify(&self, event: &CStr, i: usize) {
        // SAFETY: valid ctx, NUL-terminated event, live key argument.
        unsafe { api!(RedisModule_NotifyKeyspaceEvent)(self.ctx, raw::REDISMODULE_NOTIFY_STREAM as c_int, event.as_ptr(), self.arg_string(i)) };
    }

    /// `DUMP key` (key argument `i`) through RM_Call, handing the payload to `f`
    /// in place (no copy: a stream's payload is as large as the stream): `f`'s
    /// result, or None when the key does not exist. Not propagated.
    pub fn call_dump<R>(&self, i: usize, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>, String> {
        // SAFETY: "s" takes one RedisModuleString (a live argument). The reply is
        // freed before returning; the slice given to `f` points into it and does
        // not outlive the call of `f` (a panic in `f` leaks the reply, nothing worse).
        unsafe {
            let r = api!(RedisModule_Call)(self.ctx, c"DUMP".as_ptr(), c"s".as_ptr(), self.arg_string(i));
            if r.is_null() {
                return Err("DUMP failed".into());
            }
            let t = api!(RedisModule_CallReplyType)(r) as isize;
            let out = if t == raw::REDISMODULE_REPLY_STRING {
                let mut len = 0usize;
                let p = api!(RedisModule_CallReplyStringPtr)(r, &mut len);
                let payload: &[u8] = if p.is_null() { &[] } else { std::slice::from_raw_parts(p.cast::<u8>(), len) };
                Ok(Some(f(payload)))
            } else if t == raw::REDISMODULE_REPLY_NULL {
                Ok(None)
            } else {
                Err("DUMP did not return a payload".into())
            };
            api!(RedisModule_FreeCallReply)(r);
            out
        }
    }

    /// `RESTORE key <expire-at> payload REPLACE ABSTTL` (or `0 ... REPLACE` without an
    /// expire) through RM_Call (not propagated).
    pub fn call_restore(&self, i: usize, expire_at_ms: Option<i64>, payload: &[u8]) -> Result<(), String> {
        let ttl = expire_at_ms.unwrap_or(0).to_string();
        let last = if expire_at_ms.is_some() { c"ABSTTL" } else { c"REPLACE" };
        // SAFETY: "sbbc": a live argument string, two (ptr, len) buffers valid for the
        // call, a NUL-terminated C string; the reply is freed before returning.
        unsafe {
            let r = api!(RedisModule_Call)(
                self.ctx,
                c"RESTORE".as_ptr(),
                c"sbbcc".as_ptr(),
                self.arg_string(i),
                ttl.as_ptr(),
                ttl.len(),
                payload.as_ptr(),
                payload.len(),
                c"REPLACE".as_ptr(),
                last.as_ptr(),
            );
            if r.is_null() {
                return Err("RESTORE failed".into());
            }
            let t = api!(RedisModule_CallReplyType)(r) as isize;
            let out = if t == raw::REDISMODULE_REPLY_ERROR {
                let mut len = 0usize;
                let p = api!(RedisModule_CallReplyStringPtr)(r, &mut len);
                let msg =
                    if p.is_null() { String::new() } else { String::from_utf8_lossy(std::slice::from_raw_parts(p.cast::<u8>(), len)).into_owned() };
                Err(msg)
            } else {
                Ok(())
            };
            api!(RedisModule_FreeCallReply)(r);
            out
        }
    }

    // ---- TYPE and SCAN in takeover mode (XS.TYPE, XS.SCAN) -------------------

    /// What `TYPE` says of key argument `i`, looked up as typeCommand does
    /// (lookupKeyRead with NOTOUCH: the same hit/miss count, the same lazy expiry).
    pub fn type_of(&self, i: usize) -> TypeOf {
        let mode = raw::REDISMODULE_READ | raw::REDISMODULE_OPEN_KEY_NOTOUCH;
        // SAFETY: the key name is a live argument string; the key is closed in Drop.
        let key = unsafe { api!(RedisModule_OpenKey)(self.ctx, self.arg_string(i), mode as c_int) };
        Key { ctx: self, key: key.cast(), kind: Cell::new(None), touched: Cell::new(std::ptr::null_mut()), owned_name: ptr::null_mut() }.type_of()
    }

    /// Whether the key named `name` holds a stream, built-in or ours (looked up
    /// as SCAN's TYPE filter does: lookupKeyRead with NOTOUCH).
    pub fn is_any_stream(&self, name: &[u8]) -> bool {
        // SAFETY: a new string from a valid buffer, freed below.
        let s = unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), name.as_ptr().cast(), name.len()) };
        let mode = raw::REDISMODULE_READ | raw::REDISMODULE_OPEN_KEY_NOTOUCH;
        // SAFETY: s is a live string; the key is closed (Drop) before s is freed.
        let key = unsafe { api!(RedisModule_OpenKey)(self.ctx, s, mode as c_int) };
        let stream =
            match (Key { ctx: self, key: key.cast(), kind: Cell::new(None), touched: Cell::new(std::ptr::null_mut()), owned_name: ptr::null_mut() })
                .type_of()
            {
                TypeOf::Ours => true,
                TypeOf::Builtin(name) => name == c"stream",
                TypeOf::OtherModule => false,
            };
        // SAFETY: created above with a NULL ctx; the key took its own reference,
        // released by CloseKey (the Key was dropped above).
        unsafe { api!(RedisModule_FreeString)(ptr::null_mut(), s) };
        stream
    }

    /// Runs `cmd` with this command's arguments `args` (indexes) through RM_Call
    /// (not filtered: the filter is NOSELF). None if Redis refused to run it.
    /// `cmd` with literal arguments through RM_Call (no ACL, no propagation).
    pub fn call_words(&self, cmd: &CStr, args: &[&[u8]]) -> Option<CallReply<'_>> {
        let argv: Vec<*mut raw::RedisModuleString> = args
            .iter()
            // SAFETY: creating strings from valid buffers; freed below.
            .map(|a| unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), a.as_ptr().cast(), a.len()) })
            .collect();
        // SAFETY: as in call(); Redis takes its own references to the strings.
        let r = unsafe { api!(RedisModule_Call)(self.ctx, cmd.as_ptr(), c"v".as_ptr(), argv.as_ptr(), argv.len()) };
        for s in argv {
            // SAFETY: created above with a NULL ctx.
            unsafe { api!(RedisModule_FreeString)(ptr::null_mut(), s) };
        }
        (!r.is_null()).then_some(CallReply { r, _ctx: std::marker::PhantomData })
    }

    /// In cluster mode, when one of the key arguments `keys` (all in one slot) is gone, the
    /// redirect Redis's processCommand would answer at this moment: `MOVED slot host:port` when
    /// the slot is served elsewhere, `ASK slot host:port` when it is migrating away; None
    /// otherwise (the keys are all here, the slot is served here, or not in cluster mode). For what the built-in
    /// re-executes through processCommand and the module serves itself: a blocked group read
    /// woken because its key went away (7.2+), e.g. deleted by MIGRATE during a reshard.
    pub fn cluster_redirect(&self, keys: std::ops::Range<usize>) -> Option<String> {
        if self.flags() & raw::REDISMODULE_CTX_FLAGS_CLUSTER == 0 || keys.is_empty() {
            return None;
        }
        // Only a key gone away needs the look at the slot table (two RM_Calls): a slot that
        // moves under a blocked reader whose keys are still here is Redis's own business
        // (clusterRedirectBlockedClientIfNeeded, from clientsCron).
        if !keys.clone().any(|i| self.open_key(i, false).kind() == KeyKind::Empty) {
            return None;
        }
        let slot = self.call_words(c"CLUSTER", &[b"KEYSLOT", self.arg(keys.start)])?.as_ref().integer()?;
        let nodes = self.call_words(c"CLUSTER", &[b"NODES"])?;
        let text = String::from_utf8_lossy(nodes.as_ref().bytes()?).into_owned();
        let addr = |line: &str| -> Option<String> {
            let a = line.split_whitespace().nth(1)?;
            Some(a.split(['@', ',']).next()?.to_string())
        };
        let serves = |line: &str| {
            line.split_whitespace().skip(8).any(|r| {
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                matches!((a.parse::<i64>(), b.parse::<i64>()), (Ok(a), Ok(b)) if a <= slot && slot <= b)
            })
        };
        let myself = text.lines().find(|l| l.split_whitespace().nth(2).is_some_and(|f| f.contains("myself")))?;
        if serves(myself) {
            let tag = format!("[{slot}->-");
            let target = myself.split_whitespace().find_map(|w| w.strip_prefix(tag.as_str()))?.trim_end_matches(']');
            let to = text.lines().find(|l| l.starts_with(target))?;
            return Some(format!("ASK {slot} {}", addr(to)?));
        }
        let owner = text.lines().find(|l| serves(l))?;
        Some(format!("MOVED {slot} {}", addr(owner)?))
    }

    pub fn call(&self, cmd: &CStr, args: &[usize]) -> Option<CallReply<'_>> {
        let argv: Vec<*mut raw::RedisModuleString> = args.iter().map(|&i| self.arg_string(i)).filter(|p| !p.is_null()).collect();
        // SAFETY: "v" takes (RedisModuleString **, size_t): live argument strings,
        // each retained by Redis for the call; the reply is freed by CallReply's Drop.
        let r = unsafe { api!(RedisModule_Call)(self.ctx, cmd.as_ptr(), c"v".as_ptr(), argv.as_ptr(), argv.len()) };
        (!r.is_null()).then_some(CallReply { r, _ctx: std::marker::PhantomData })
    }

    /// Replies `r` exactly as the called command replied.
    pub fn reply_call(&self, r: CallReplyRef<'_>) {
        // SAFETY: valid ctx and a live reply (borrowed from its owner).
        unsafe { api!(RedisModule_ReplyWithCallReply)(self.ctx, r.0) };
    }

    /// Wakes clients blocked on key argument `i` (served after the command).
    pub fn signal_ready(&self, i: usize) {
        // SAFETY: valid ctx and key argument.
        unsafe { api!(RedisModule_SignalKeyAsReady)(self.ctx, self.arg_string(i)) };
    }

    /// signalModifiedKey (WATCH, client-side caching) on key argument `i`.
    pub fn signal_modified(&self, i: usize) {
        // SAFETY: valid ctx and key argument.
        unsafe { api!(RedisModule_SignalModifiedKey)(self.ctx, self.arg_string(i)) };
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

/// The answer of `TYPE` for a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeOf {
    /// The built-in's name for a built-in type (getObjectTypeName), or `none`.
    Builtin(&'static CStr),
    /// Our stream.
    Ours,
    /// Another module's type: only the server knows its name.
    OtherModule,
}

/// A reply of RM_Call, freed on drop.
pub struct CallReply<'c> {
    r: *mut raw::RedisModuleCallReply,
    _ctx: std::marker::PhantomData<&'c Ctx>,
}

/// A reply or an element of one, alive as long as the reply that owns it.
#[derive(Clone, Copy)]
pub struct CallReplyRef<'r>(*mut raw::RedisModuleCallReply, std::marker::PhantomData<&'r ()>);

impl CallReply<'_> {
    pub fn as_ref(&self) -> CallReplyRef<'_> {
        CallReplyRef(self.r, std::marker::PhantomData)
    }
}

impl Drop for CallReply<'_> {
    fn drop(&mut self) {
        // SAFETY: returned by RM_Call, freed once (elements go with it).
        unsafe { api!(RedisModule_FreeCallReply)(self.r) };
    }
}

impl<'r> CallReplyRef<'r> {
    /// An array reply's length (0 for anything else).
    pub fn len(&self) -> usize {
        // SAFETY: a live reply.
        let t = unsafe { api!(RedisModule_CallReplyType)(self.0) } as isize;
        if t != raw::REDISMODULE_REPLY_ARRAY {
            return 0;
        }
        // SAFETY: a live array reply.
        unsafe { api!(RedisModule_CallReplyLength)(self.0) }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` of an array reply.
    pub fn get(&self, i: usize) -> Option<CallReplyRef<'r>> {
        if i >= self.len() {
            return None;
        }
        // SAFETY: i < length of a live array reply; the element lives as long as it.
        let e = unsafe { api!(RedisModule_CallReplyArrayElement)(self.0, i) };
        (!e.is_null()).then_some(CallReplyRef(e, std::marker::PhantomData))
    }

    /// The value of an integer reply; None for other types.
    pub fn integer(&self) -> Option<i64> {
        // SAFETY: a live reply.
        let t = unsafe { api!(RedisModule_CallReplyType)(self.0) } as isize;
        if t != raw::REDISMODULE_REPLY_INTEGER {
            return None;
        }
        // SAFETY: a live integer reply.
        Some(unsafe { api!(RedisModule_CallReplyInteger)(self.0) })
    }

    /// The bytes of a string reply (bulk or status); None for other types.
    pub fn bytes(&self) -> Option<&'r [u8]> {
        // SAFETY: a live reply.
        let t = unsafe { api!(RedisModule_CallReplyType)(self.0) } as isize;
        if t != raw::REDISMODULE_REPLY_STRING {
            return None;
        }
        let mut len = 0usize;
        // SAFETY: a live string reply; the buffer lives as long as the reply.
        let p = unsafe { api!(RedisModule_CallReplyStringPtr)(self.0, &mut len) };
        // SAFETY: p points to len bytes owned by the reply.
        Some(if p.is_null() { &[] } else { unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) } })
    }
}

impl Key<'_> {
    pub fn kind(&self) -> KeyKind {
        if let Some(k) = self.kind.get() {
            return k;
        }
        let k = self.ask_kind();
        self.kind.set(Some(k));
        k
    }

    fn ask_kind(&self) -> KeyKind {
        if self.key.is_null() {
            return KeyKind::Empty;
        }
        // SAFETY: key is an open key.
        let t = unsafe { api!(RedisModule_KeyType)(self.key) } as isize;
        if t == raw::REDISMODULE_KEYTYPE_EMPTY {
            KeyKind::Empty
        } else if t == raw::REDISMODULE_KEYTYPE_MODULE
            // SAFETY: key is an open module key.
            && unsafe { api!(RedisModule_ModuleTypeGetType)(self.key) } == super::types::stream_type()
        {
            KeyKind::Stream
        } else {
            KeyKind::Other
        }
    }

    /// What TYPE says of this key.
    pub fn type_of(&self) -> TypeOf {
        if self.key.is_null() {
            return TypeOf::Builtin(c"none");
        }
        // SAFETY: key is an open key.
        let t = unsafe { api!(RedisModule_KeyType)(self.key) } as isize;
        let name = match t {
            raw::REDISMODULE_KEYTYPE_EMPTY => c"none",
            raw::REDISMODULE_KEYTYPE_STRING => c"string",
            raw::REDISMODULE_KEYTYPE_LIST => c"list",
            raw::REDISMODULE_KEYTYPE_SET => c"set",
            raw::REDISMODULE_KEYTYPE_ZSET => c"zset",
            raw::REDISMODULE_KEYTYPE_HASH => c"hash",
            raw::REDISMODULE_KEYTYPE_STREAM => c"stream",
            // SAFETY: key is an open module key.
            raw::REDISMODULE_KEYTYPE_MODULE if unsafe { api!(RedisModule_ModuleTypeGetType)(self.key) } == super::types::stream_type() => {
                return TypeOf::Ours
            }
            _ => return TypeOf::OtherModule,
        };
        TypeOf::Builtin(name)
    }

    /// The error for a key of another type: WRONGTYPE, or in takeover mode for a
    /// built-in stream (left as it is: `adopt no`, or its conversion failed, see
    /// src/ffi/adopt.rs), an error pointing at XS.IMPORT (never silent WRONGTYPE:
    /// the user's data is there, in the other format; XS.IMPORT tells what is wrong).
    pub fn wrong_type(&self) -> crate::error::Error {
        if super::takeover::active() && !self.key.is_null() {
            // SAFETY: key is an open key.
            let t = unsafe { api!(RedisModule_KeyType)(self.key) } as isize;
            if t == raw::REDISMODULE_KEYTYPE_STREAM {
                return crate::error::Error::Full(
                    "WRONGTYPE this key holds a built-in Redis stream; convert it with XS.IMPORT <key> to use it while xstream serves the stream commands".into(),
                );
            }
        }
        crate::error::Error::WrongType
    }

    /// The stream, if the key holds one of ours.
    pub fn stream(&self) -> Option<&Stream> {
        if self.kind() != KeyKind::Stream {
            return None;
        }
        // SAFETY: the key holds our type, whose values are Box<Stream> pointers.
        unsafe { api!(RedisModule_ModuleTypeGetValue)(self.key).cast::<Stream>().as_ref() }
    }

    /// The stream of a key that must hold one of our streams or nothing (the preamble of most
    /// commands): None when the key is empty, the WRONGTYPE error ([`Key::wrong_type`]) when
    /// it holds anything else.
    #[inline]
    pub fn existing(&self) -> Result<Option<&Stream>, crate::error::Error> {
        match self.kind() {
            KeyKind::Empty => Ok(None),
            KeyKind::Other => Err(self.wrong_type()),
            KeyKind::Stream => self.stream().map(Some).ok_or(crate::error::Error::WrongType),
        }
    }

    /// [`Key::existing`], for writing.
    #[inline]
    pub fn existing_mut(&mut self) -> Result<Option<&mut Stream>, crate::error::Error> {
        match self.kind() {
            KeyKind::Empty => Ok(None),
            KeyKind::Other => Err(self.wrong_type()),
            KeyKind::Stream => self.stream_mut().map(Some).ok_or(crate::error::Error::WrongType),
        }
    }

    pub fn stream_mut(&mut self) -> Option<&mut Stream> {
        if self.kind() != KeyKind::Stream {
            return None;
        }
        // SAFETY: as in stream(); the key is open for writing and we hold it exclusively.
        let p = unsafe { api!(RedisModule_ModuleTypeGetValue)(self.key).cast::<Stream>() };
        self.touched.set(p);
        // SAFETY: as above; p is null or the key's live value.
        unsafe { p.as_mut() }
    }

    /// Stores a new stream in an empty key and returns it.
    pub fn create_stream(&mut self, s: Stream) -> Option<&mut Stream> {
        let mut s = Box::new(s);
        super::stats::born(&mut s);
        let b = Box::into_raw(s);
        self.touched.set(std::ptr::null_mut());
        // SAFETY: ownership of the box passes to Redis, which frees it through our free callback.
        let rc = unsafe { api!(RedisModule_ModuleTypeSetValue)(self.key, super::types::stream_type(), b.cast()) };
        if rc != raw::REDISMODULE_OK as c_int {
            // SAFETY: Redis did not take the value: reclaim it.
            let s = unsafe { Box::from_raw(b) };
            super::stats::freed(&s);
            return None;
        }
        self.kind.set(Some(KeyKind::Stream));
        self.stream_mut()
    }

    pub fn ctx(&self) -> &Ctx {
        self.ctx
    }

    /// Whether the key holds a built-in Redis stream.
    pub fn is_native_stream(&self) -> bool {
        // SAFETY: key is an open key (or null, checked).
        !self.key.is_null() && unsafe { api!(RedisModule_KeyType)(self.key) } as isize == raw::REDISMODULE_KEYTYPE_STREAM
    }

    /// The absolute expire time (Unix ms), or None.
    pub fn expire_at_ms(&self) -> Option<i64> {
        if self.key.is_null() {
            return None;
        }
        // SAFETY: open key.
        let t = unsafe { api!(RedisModule_GetAbsExpire)(self.key) };
        if t == raw::REDISMODULE_NO_EXPIRE as i64 {
            None
        } else {
            Some(t)
        }
    }

    pub fn set_expire_at_ms(&self, at: i64) {
        // SAFETY: open writable key.
        unsafe { api!(RedisModule_SetAbsExpire)(self.key, at) };
    }

    /// Replaces whatever the key holds with our stream.
    pub fn replace_with_stream(&mut self, s: Stream) -> bool {
        let mut s = Box::new(s);
        super::stats::born(&mut s);
        let b = Box::into_raw(s);
        self.touched.set(std::ptr::null_mut());
        // SAFETY: as in create_stream; SetValue deletes the old value first.
        let rc = unsafe { api!(RedisModule_ModuleTypeSetValue)(self.key, super::types::stream_type(), b.cast()) };
        if rc != raw::REDISMODULE_OK as c_int {
            // SAFETY: Redis did not take the value.
            let s = unsafe { Box::from_raw(b) };
            super::stats::freed(&s);
            return false;
        }
        self.kind.set(Some(KeyKind::Stream));
        true
    }
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        // SAFETY: the value stream_mut lent out; the key is still open (closed below), so the
        // value is the key's, alive, and no borrow of it outlives the command's use of the key.
        // A value replaced meanwhile (create / replace_with_stream) resets the pointer first.
        if let Some(s) = unsafe { self.touched.get().as_mut() } {
            super::stats::account(s);
        }
        // Compressed nodes a reader opened: their decompressed copies go when the command is
        // done with the key (read or write).
        if crate::listpack::cache_fills() > 0 && self.kind.get() == Some(KeyKind::Stream) && !self.key.is_null() {
            // SAFETY: the key is still open and holds our type; no borrow of the value
            // outlives the command's use of the key (borrows are tied to &self of this Key).
            let p = unsafe { api!(RedisModule_ModuleTypeGetValue)(self.key).cast::<Stream>() };
            // SAFETY: p is null or the key's live value.
            if let Some(s) = unsafe { p.as_mut() } {
                s.release_caches();
            }
        }
        if !self.key.is_null() {
            // SAFETY: opened by Ctx::key, closed once.
            unsafe { api!(RedisModule_CloseKey)(self.key) };
        }
        if !self.owned_name.is_null() {
            // SAFETY: created by open_key_named with a NULL ctx, freed once, after CloseKey.
            unsafe { api!(RedisModule_FreeString)(ptr::null_mut(), self.owned_name) };
        }
    }
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
