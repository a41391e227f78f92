//! Propagation to replicas and the AOF, the dirty counter, keyspace events and signals.

use super::*;

impl Ctx {
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

    /// Propagates `cmd` with eight arguments given as bytes (RM_Replicate's `b` format: Redis
    /// makes its own strings from the buffers; no module string is created and freed per
    /// argument). For a write of the module's own that propagates often (the keyspace log's
    /// `XS.ADD log id event .. key .. db ..`): a third of the cost of [`Ctx::replicate`] there.
    pub fn replicate_bytes8(&self, cmd: &'static CStr, a: [&[u8]; 8]) {
        // SAFETY: valid ctx; "bbbbbbbb" takes eight (char *, size_t) pairs, each a live buffer
        // read during the call (Redis copies them into its own strings).
        unsafe {
            api!(RedisModule_Replicate)(
                self.ctx,
                cmd.as_ptr(),
                c"bbbbbbbb".as_ptr(),
                a[0].as_ptr().cast::<c_char>(),
                a[0].len(),
                a[1].as_ptr().cast::<c_char>(),
                a[1].len(),
                a[2].as_ptr().cast::<c_char>(),
                a[2].len(),
                a[3].as_ptr().cast::<c_char>(),
                a[3].len(),
                a[4].as_ptr().cast::<c_char>(),
                a[4].len(),
                a[5].as_ptr().cast::<c_char>(),
                a[5].len(),
                a[6].as_ptr().cast::<c_char>(),
                a[6].len(),
                a[7].as_ptr().cast::<c_char>(),
                a[7].len(),
            )
        };
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

    /// [`Ctx::add_dirty`] without its bound: `n` changes counted one by one. For a
    /// caller whose `n` is bounded by work it already does per change (XS.CLAIM and
    /// XS.AUTOCLAIM, which reply per claimed entry), replacing a propagation per
    /// change that cost more than this does.
    pub fn add_dirty_exact(&self, n: u64) {
        for _ in 0..n {
            // SAFETY: as in add_dirty: valid ctx, flags only, a registered command.
            unsafe { api!(RedisModule_Replicate)(self.ctx, c"XS.LEN".as_ptr(), c"AR".as_ptr()) };
        }
    }

    /// Keyspace event of the module class (`d`) named `event` on key argument `i` (test builds).
    #[cfg(feature = "test-hooks")]
    pub fn notify_module_class(&self, event: &[u8], i: usize) {
        let event = std::ffi::CString::new(event.to_vec()).unwrap_or_default();
        // SAFETY: valid ctx, NUL-terminated event, live key argument.
        unsafe { api!(RedisModule_NotifyKeyspaceEvent)(self.ctx, raw::REDISMODULE_NOTIFY_MODULE as c_int, event.as_ptr(), self.arg_string(i)) };
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
}
