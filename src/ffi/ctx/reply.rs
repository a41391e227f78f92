//! Replies of a command.
//!
//! Replies go straight to the client, or are held back while a command may still fail on a
//! read of a node kept on disk (`xstream.tier-dir`, [`Ctx::hold_replies`]): a read that fails
//! half way through a reply must become an error reply, and nothing of the reply may have gone
//! out before it. Held replies are sent as they were made ([`Ctx::send_held`]) or dropped for
//! the error ([`Ctx::drop_held`]).

use super::*;

/// A reply held back.
pub(crate) enum Held {
    /// Bytes `off..off + len` of [`HeldReplies::bytes`].
    Bulk {
        off: usize,
        len: usize,
    },
    Int(i64),
    Array(c_long),
    SetArrayLen(c_long),
    Map(c_long),
    SetMapLen(c_long),
    Null,
    NullArray,
    Simple(std::ffi::CString),
    Status(&'static CStr),
    Error(std::ffi::CString),
    WrongArity,
}

/// The replies held back, in order; the bytes of their bulk strings in one buffer (a reply
/// of many small strings costs no allocation per string).
#[derive(Default)]
pub(crate) struct HeldReplies {
    items: Vec<Held>,
    bytes: Vec<u8>,
}

/// The buffers of the last held replies, emptied, for the next command that holds. Once any
/// node is on disk every command holds its replies, and fresh buffers for each are grown by
/// doubling to a tail read's ~20 KB: allocations, and new pages of memory, the untiered stream
/// does not pay (tail reads of a tiered stream took 3.6-3.9 page faults per call against 3.15
/// untiered at 20M entries, docs/tiering.md). Main thread only: the mutex is never contended.
static SPARE: std::sync::Mutex<Option<HeldReplies>> = std::sync::Mutex::new(None);

/// Buffers above this capacity (bytes) are freed rather than kept in [`SPARE`]: a large reply
/// does not pin its memory.
const SPARE_MAX_BYTES: usize = 256 * 1024;

impl HeldReplies {
    /// Empty buffers: the spare ones if there are.
    fn take_spare() -> HeldReplies {
        SPARE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take().unwrap_or_default()
    }

    /// Empties `self` and keeps its buffers for the next command, unless they are large.
    fn recycle(mut self) {
        if self.bytes.capacity() + self.items.capacity() * std::mem::size_of::<Held>() > SPARE_MAX_BYTES {
            return;
        }
        self.items.clear();
        self.bytes.clear();
        *SPARE.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(self);
    }
}

impl Ctx {
    // ---- held replies -----------------------------------------------------

    /// From now on replies are held back until [`Ctx::send_held`] or [`Ctx::drop_held`].
    pub fn hold_replies(&self) {
        let mut h = self.held.borrow_mut();
        if h.is_none() {
            *h = Some(HeldReplies::take_spare());
        }
        self.holding.set(true);
    }

    /// Holds bulk string `b` if replies are held; false: send it now.
    #[inline(always)]
    fn held_bulk(&self, b: &[u8]) -> bool {
        if !self.holding.get() {
            return false;
        }
        self.hold_bulk(b)
    }

    #[cold]
    #[inline(never)]
    fn hold_bulk(&self, b: &[u8]) -> bool {
        self.with_held(|h| {
            let off = h.bytes.len();
            h.bytes.extend_from_slice(b);
            h.items.push(Held::Bulk { off, len: b.len() });
        })
    }

    /// Holds `r` if replies are held; false: send it now.
    #[inline(always)]
    fn held(&self, r: impl FnOnce() -> Held) -> bool {
        if !self.holding.get() {
            return false;
        }
        self.hold(r)
    }

    #[cold]
    #[inline(never)]
    fn hold(&self, r: impl FnOnce() -> Held) -> bool {
        self.with_held(|h| h.items.push(r()))
    }

    /// Runs `f` on the held replies; false (nothing done: send the reply now) when replies are
    /// not held or are being sent.
    fn with_held(&self, f: impl FnOnce(&mut HeldReplies)) -> bool {
        match self.held.try_borrow_mut() {
            Ok(mut h) => match h.as_mut() {
                Some(h) => {
                    f(h);
                    true
                }
                None => false,
            },
            Err(_) => false,
        }
    }

    /// Sends the held replies, in order, and stops holding.
    pub fn send_held(&self) {
        self.holding.set(false);
        let Some(mut held) = self.held.borrow_mut().take() else { return };
        for r in held.items.drain(..) {
            match r {
                Held::Bulk { off, len } => self.reply_bulk(held.bytes.get(off..off + len).unwrap_or_default()),
                Held::Int(v) => self.reply_int(v),
                Held::Array(n) => {
                    // SAFETY: valid ctx; a length the command gave, replayed in its order.
                    unsafe { api!(RedisModule_ReplyWithArray)(self.ctx, n) };
                }
                Held::SetArrayLen(n) => {
                    // SAFETY: valid ctx; a length the command gave, replayed in its order.
                    unsafe { api!(RedisModule_ReplySetArrayLength)(self.ctx, n) };
                }
                Held::Map(n) => {
                    // SAFETY: valid ctx; a length the command gave, replayed in its order.
                    unsafe { api!(RedisModule_ReplyWithMap)(self.ctx, n) };
                }
                Held::SetMapLen(n) => {
                    // SAFETY: valid ctx; a length the command gave, replayed in its order.
                    unsafe { api!(RedisModule_ReplySetMapLength)(self.ctx, n) };
                }
                Held::Null => self.reply_null(),
                Held::NullArray => self.reply_null_array(),
                Held::Simple(c) => {
                    // SAFETY: NUL-terminated, alive during the call.
                    unsafe { api!(RedisModule_ReplyWithSimpleString)(self.ctx, c.as_ptr()) };
                }
                Held::Status(c) => self.reply_status(c),
                Held::Error(c) => {
                    // SAFETY: NUL-terminated, alive during the call.
                    unsafe { api!(RedisModule_ReplyWithError)(self.ctx, c.as_ptr()) };
                }
                Held::WrongArity => self.reply_wrong_arity(),
            };
        }
        held.recycle();
    }

    /// Drops the held replies (an error replaces them) and stops holding.
    pub fn drop_held(&self) {
        self.holding.set(false);
        let held = self.held.borrow_mut().take();
        if let Some(h) = held {
            h.recycle();
        }
    }

    // ---- replies ----------------------------------------------------------

    pub fn reply_bulk(&self, b: &[u8]) {
        if self.held_bulk(b) {
            return;
        }
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
        if self.held(|| Held::Int(v)) {
            return;
        }
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_ReplyWithLongLong)(self.ctx, v) };
    }

    pub fn reply_array(&self, len: usize) {
        if self.held(|| Held::Array(len as c_long)) {
            return;
        }
        // SAFETY: valid ctx; the caller emits exactly `len` elements.
        unsafe { api!(RedisModule_ReplyWithArray)(self.ctx, len as c_long) };
    }

    /// An array whose length is set later with [`set_array_len`](Self::set_array_len).
    pub fn reply_array_postponed(&self) {
        if self.held(|| Held::Array(raw::REDISMODULE_POSTPONED_LEN as c_long)) {
            return;
        }
        // SAFETY: valid ctx; the caller sets the length before returning.
        unsafe { api!(RedisModule_ReplyWithArray)(self.ctx, raw::REDISMODULE_POSTPONED_LEN as c_long) };
    }

    pub fn set_array_len(&self, len: usize) {
        if self.held(|| Held::SetArrayLen(len as c_long)) {
            return;
        }
        // SAFETY: a postponed array is open (caller's contract).
        unsafe { api!(RedisModule_ReplySetArrayLength)(self.ctx, len as c_long) };
    }

    /// A map whose length is set later with [`set_map_len`](Self::set_map_len).
    pub fn reply_map_postponed(&self) {
        if self.held(|| Held::Map(raw::REDISMODULE_POSTPONED_LEN as c_long)) {
            return;
        }
        // SAFETY: valid ctx; the caller sets the length before returning.
        unsafe { api!(RedisModule_ReplyWithMap)(self.ctx, raw::REDISMODULE_POSTPONED_LEN as c_long) };
    }

    pub fn set_map_len(&self, len: usize) {
        if self.held(|| Held::SetMapLen(len as c_long)) {
            return;
        }
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
        if self.held(|| Held::Map(len as c_long)) {
            return;
        }
        // SAFETY: valid ctx; caller emits 2*len elements.
        unsafe { api!(RedisModule_ReplyWithMap)(self.ctx, len as c_long) };
    }

    pub fn reply_null(&self) {
        if self.held(|| Held::Null) {
            return;
        }
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_ReplyWithNull)(self.ctx) };
    }

    pub fn reply_null_array(&self) {
        if self.held(|| Held::NullArray) {
            return;
        }
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_ReplyWithNullArray)(self.ctx) };
    }

    pub fn reply_simple(&self, s: &str) {
        let c = cstring(s);
        if self.held(|| Held::Simple(c.clone())) {
            return;
        }
        // SAFETY: c is NUL-terminated and outlives the call.
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.ctx, c.as_ptr()) };
    }

    /// A status reply from a constant (no copy).
    pub fn reply_status(&self, s: &'static CStr) {
        if self.held(|| Held::Status(s)) {
            return;
        }
        // SAFETY: s is NUL-terminated and static.
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.ctx, s.as_ptr()) };
    }

    pub fn reply_ok(&self) {
        self.reply_simple("OK");
    }

    /// `msg` includes the error code ("ERR ...", "WRONGTYPE ...").
    pub fn reply_error(&self, msg: &str) {
        let c = cstring(msg);
        if self.held(|| Held::Error(c.clone())) {
            return;
        }
        // SAFETY: c is NUL-terminated and outlives the call.
        unsafe { api!(RedisModule_ReplyWithError)(self.ctx, c.as_ptr()) };
    }

    /// `wrong number of arguments for '<fullname>' command`. RM_WrongArity prints
    /// the module's fullname (`xs.add`); a command that came through the takeover
    /// filter gets the built-in's (`xadd`, `xgroup|create`).
    pub fn reply_wrong_arity(&self) {
        if self.held(|| Held::WrongArity) {
            return;
        }
        if let Some(slot) = self.via_filter() {
            let full = crate::ffi::takeover::standard_fullname(slot, self.arg(1));
            self.reply_error(&format!("ERR wrong number of arguments for '{full}' command"));
            return;
        }
        // SAFETY: valid ctx.
        unsafe { api!(RedisModule_WrongArity)(self.ctx) };
    }

    /// The takeover slot of the standard name this command came in with, if it
    /// came through the filter (argv[0] is then the filter's own string).
    fn via_filter(&self) -> Option<usize> {
        crate::ffi::takeover::via_filter(self.arg_string(0))
    }

    /// argv[0] as the client typed it, which t_stream.c prints in some texts
    /// (`c->argv[0]->ptr`): through the takeover filter, the standard name as
    /// spelled (`xread`), otherwise the module's name as called (`XS.READ`).
    pub fn command_name(&self) -> Vec<u8> {
        match self.via_filter() {
            Some(slot) => crate::ffi::takeover::typed_name(slot),
            None => self.arg(0).to_vec(),
        }
    }
}
