//! Calls into the server (RM_Call): DUMP / RESTORE of a key, TYPE and SCAN in takeover mode,
//! and the replies they give.

use super::*;

impl Ctx {
    // ---- TYPE and SCAN in takeover mode (XS.TYPE, XS.SCAN) -------------------

    /// What `TYPE` says of key argument `i`, looked up as typeCommand does
    /// (lookupKeyRead with NOTOUCH: the same hit/miss count, the same lazy expiry).
    pub fn type_of(&self, i: usize) -> TypeOf {
        let mode = raw::REDISMODULE_READ | raw::REDISMODULE_OPEN_KEY_NOTOUCH;
        // SAFETY: the key name is a live argument string; the key is closed in Drop.
        let key = unsafe { api!(RedisModule_OpenKey)(self.ctx, self.arg_string(i), mode as c_int) };
        Key::wrap(self, key.cast(), ptr::null_mut()).type_of()
    }

    /// Whether the key named `name` holds a stream, built-in or ours (looked up
    /// as SCAN's TYPE filter does: lookupKeyRead with NOTOUCH).
    pub fn is_any_stream(&self, name: &[u8]) -> bool {
        // SAFETY: a new string from a valid buffer, freed below.
        let s = unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), name.as_ptr().cast(), name.len()) };
        let mode = raw::REDISMODULE_READ | raw::REDISMODULE_OPEN_KEY_NOTOUCH;
        // SAFETY: s is a live string; the key is closed (Drop) before s is freed.
        let key = unsafe { api!(RedisModule_OpenKey)(self.ctx, s, mode as c_int) };
        let stream = match (Key::wrap(self, key.cast(), ptr::null_mut())).type_of() {
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

    /// In cluster mode, the slots this node serves now (16,384 bits), from `CLUSTER NODES`'
    /// `myself` line: its ranges, not the slots it imports or the ones migrating away
    /// (bracketed). None when not in cluster mode or the line cannot be read.
    pub fn owned_slots(&self) -> Option<Vec<u64>> {
        if !self.in_cluster() {
            return None;
        }
        let nodes = self.call_words(c"CLUSTER", &[b"NODES"])?;
        let text = String::from_utf8_lossy(nodes.as_ref().bytes()?).into_owned();
        let myself = text.lines().find(|l| l.split_whitespace().nth(2).is_some_and(|f| f.contains("myself")))?;
        let mut bits = vec![0u64; 16384 / 64];
        for r in myself.split_whitespace().skip(8).filter(|r| !r.starts_with('[')) {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) else { continue };
            for slot in a..=b.min(16383) {
                if let Some(w) = bits.get_mut(slot / 64) {
                    *w |= 1 << (slot % 64);
                }
            }
        }
        Some(bits)
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
        // (Not held: what was held goes first, then this, and nothing more is held.)
        self.send_held();
        // SAFETY: valid ctx and a live reply (borrowed from its owner).
        unsafe { api!(RedisModule_ReplyWithCallReply)(self.ctx, r.0) };
    }

    /// Wakes clients blocked on key argument `i` (served after the command).
    pub fn signal_ready(&self, i: usize) {
        super::super::blocking::written();
        // SAFETY: valid ctx and key argument.
        unsafe { api!(RedisModule_SignalKeyAsReady)(self.ctx, self.arg_string(i)) };
    }

    /// signalModifiedKey (WATCH, client-side caching) on key argument `i`.
    pub fn signal_modified(&self, i: usize) {
        // SAFETY: valid ctx and key argument.
        unsafe { api!(RedisModule_SignalModifiedKey)(self.ctx, self.arg_string(i)) };
    }
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
