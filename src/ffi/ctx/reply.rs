//! Replies of a command.

use super::*;

impl Ctx {
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
