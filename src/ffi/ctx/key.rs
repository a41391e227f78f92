//! An open key: what it holds, its stream, its expiry.

use super::*;

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

impl<'c> Key<'c> {
    /// A key handle RM_OpenKey returned (NULL: no such key, for reads); `owned_name`: the name
    /// string the module created for it (freed after the key closes), or NULL.
    pub(super) fn wrap(ctx: &'c Ctx, key: *mut raw::RedisModuleKey, owned_name: *mut raw::RedisModuleString) -> Self {
        Key { ctx, key, kind: Cell::new(None), touched: Cell::new(std::ptr::null_mut()), owned_name }
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
            && unsafe { api!(RedisModule_ModuleTypeGetType)(self.key) } == crate::ffi::types::stream_type()
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
            raw::REDISMODULE_KEYTYPE_MODULE if unsafe { api!(RedisModule_ModuleTypeGetType)(self.key) } == crate::ffi::types::stream_type() => {
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
        if crate::ffi::takeover::active() && !self.key.is_null() {
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
        if !self.replace_with_stream(s) {
            return None;
        }
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
        crate::ffi::stats::born(&mut s);
        let b = Box::into_raw(s);
        self.touched.set(std::ptr::null_mut());
        // SAFETY: ownership of the box passes to Redis, which frees it through our free
        // callback; SetValue deletes the old value first (none for an empty key).
        let rc = unsafe { api!(RedisModule_ModuleTypeSetValue)(self.key, crate::ffi::types::stream_type(), b.cast()) };
        if rc != raw::REDISMODULE_OK as c_int {
            // SAFETY: Redis did not take the value: reclaim it.
            let s = unsafe { Box::from_raw(b) };
            crate::ffi::stats::freed(&s);
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
            crate::ffi::stats::account(s);
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
