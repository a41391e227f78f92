//! The `xs-stream` data type and its callbacks (persistence, AOF, memory, digest, copy).
//!
//! Every callback runs inside the panic fence. Loading returns NULL on any
//! error: with HANDLE_IO_ERRORS set, Redis then answers `ERR Bad data format`
//! to RESTORE (or refuses the RDB) and goes on.

use super::{api, fence};
use crate::rdb::{self, LoadError, RdbIn, RdbOut};
use crate::stream::{Stream, StreamId};
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

/// The type name TYPE reports: exactly 9 characters.
pub const TYPE_NAME: &str = "xs-stream";

pub static STREAM_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    rdb::ENCVER,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: Some(free_effort),
        unlink: None,
        copy: Some(copy),
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: Some(unlink2),
    },
);

/// The registered type pointer (null before registration).
pub fn stream_type() -> *mut raw::RedisModuleType {
    *STREAM_TYPE.raw_type.borrow()
}

struct IoIn(*mut raw::RedisModuleIO);

impl IoIn {
    fn failed(&self) -> bool {
        // SAFETY: valid IO handle for the duration of the callback.
        unsafe { api!(RedisModule_IsIOError)(self.0) != 0 }
    }
}

impl RdbIn for IoIn {
    fn get_u64(&mut self) -> Result<u64, LoadError> {
        // SAFETY: valid IO handle; errors are reported through IsIOError.
        let v = unsafe { api!(RedisModule_LoadUnsigned)(self.0) };
        if self.failed() {
            Err(LoadError::Io)
        } else {
            Ok(v)
        }
    }

    fn get_bytes(&mut self) -> Result<Vec<u8>, LoadError> {
        let mut len = 0usize;
        // SAFETY: valid IO handle; the buffer (if any) is ours to free with RedisModule_Free.
        let p = unsafe { api!(RedisModule_LoadStringBuffer)(self.0, &mut len) };
        if self.failed() || p.is_null() {
            if !p.is_null() {
                // SAFETY: allocated by Redis for us.
                unsafe { api!(RedisModule_Free)(p.cast()) };
            }
            return Err(LoadError::Io);
        }
        if len == 0 {
            // SAFETY: allocated by Redis for us, freed once.
            unsafe { api!(RedisModule_Free)(p.cast()) };
            return Ok(Vec::new());
        }
        // The buffer is adopted, not copied (a node is loaded without a second
        // allocation and memcpy). SAFETY: p is a live allocation of at least len
        // bytes from Redis's allocator (zmalloc family, as every LoadStringBuffer
        // result), owned by us; inside a server our global allocator is that same
        // allocator and frees with RedisModule_Free (zfree), which ignores the
        // layout, so a Vec with capacity len may own and later free it.
        Ok(unsafe { Vec::from_raw_parts(p.cast::<u8>(), len, len) })
    }
}

struct IoOut(*mut raw::RedisModuleIO);

impl RdbOut for IoOut {
    fn put_u64(&mut self, v: u64) {
        // SAFETY: valid IO handle for the duration of the callback.
        unsafe { api!(RedisModule_SaveUnsigned)(self.0, v) };
    }
    fn put_bytes(&mut self, b: &[u8]) {
        // SAFETY: b valid for b.len() bytes; Redis copies it.
        unsafe { api!(RedisModule_SaveStringBuffer)(self.0, b.as_ptr().cast::<c_char>(), b.len()) };
    }
    /// In a fork child (BGSAVE, a full sync, an RDB-preamble rewrite) the child ends: the
    /// save fails as a whole, the previous file stays. In the server itself (SAVE, DEBUG
    /// RELOAD) there is no way to fail a module value's save: the node is written as an empty
    /// one, and the log says which.
    fn fail(&mut self, why: &str) {
        if super::in_fork_child() {
            super::log_warning(&format!("xstream: saving failed, a cold node cannot be read: {why}"));
            super::exit_fork_child();
        }
        super::log_warning(&format!("xstream: SAVED WITHOUT ITS ENTRIES, a cold node cannot be read: {why}"));
    }
}

/// The (db, key) a running `rdb_load` loads, when the server tells the loader (7.0+: not for
/// every load path).
///
/// # Safety
/// `io` is the IO handle of the running rdb_load callback.
unsafe fn key_of_io(io: *mut raw::RedisModuleIO) -> Option<(i32, Vec<u8>)> {
    // SAFETY: optional API (7.0+), looked up without panicking; the handle is the callback's.
    let (Some(name_of), Some(db_of)) = (unsafe { raw::RedisModule_GetKeyNameFromIO }, unsafe { raw::RedisModule_GetDbIdFromIO }) else {
        return None;
    };
    // SAFETY: the IO handle of the running callback; the name (if any) lives as long as it.
    let (name, db) = unsafe { (name_of(io), db_of(io)) };
    if name.is_null() || db < 0 {
        return None;
    }
    // SAFETY: a live string of the callback (checked non-null); copied.
    Some((db, unsafe { super::ctx::string_bytes(name.cast_mut()) }.to_vec()))
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    fence::guard("rdb_load", ptr::null_mut(), || {
        // SAFETY: `rdb` is this callback's IO handle.
        let check = unsafe { super::loading::check_for(rdb) };
        match rdb::load(encver, &mut IoIn(rdb), check) {
            Ok(s) => {
                let mut s = Box::new(s);
                if crate::stream::compression() {
                    s.pack_sealed();
                }
                super::stats::born(&mut s);
                // The time-driven jobs index what they need (by name when the server says it).
                // SAFETY: `rdb` is this callback's IO handle.
                let at = unsafe { key_of_io(rdb) };
                super::timer::rdb_value(at.as_ref().map(|(db, k)| (*db, k.as_slice())), &s);
                Box::into_raw(s).cast()
            }
            Err(e) => {
                if e != LoadError::Io {
                    super::log_warning(&format!("xstream: refusing stream payload: {e}"));
                }
                super::stats::bump(&super::stats::EVENTS.restore_rejected, 1);
                ptr::null_mut()
            }
        }
    })
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    fence::guard_save("rdb_save", || {
        // SAFETY: Redis passes a value of our type.
        if let Some(s) = unsafe { value.cast::<Stream>().as_mut() } {
            rdb::save(s, &mut IoOut(rdb));
            s.release_caches();
        }
    })
}

/// Emits `cmd key args...` into the AOF being rewritten.
fn emit(aof: *mut raw::RedisModuleIO, cmd: &'static std::ffi::CStr, key: *mut raw::RedisModuleString, args: &[&[u8]]) {
    emit_sub(aof, cmd, None, key, args)
}

/// Emits `cmd [sub] key args...` (a subcommand goes before the key, as XGROUP's).
fn emit_sub(
    aof: *mut raw::RedisModuleIO,
    cmd: &'static std::ffi::CStr,
    sub: Option<&std::ffi::CStr>,
    key: *mut raw::RedisModuleString,
    args: &[&[u8]],
) {
    let strings: Vec<*mut raw::RedisModuleString> = args
        .iter()
        // SAFETY: creating strings from valid buffers; freed below.
        .map(|a| unsafe { api!(RedisModule_CreateString)(ptr::null_mut(), a.as_ptr().cast(), a.len()) })
        .collect();
    // SAFETY: "sv" = the key as a RedisModuleString, then (RedisModuleString **, size_t);
    // "csv" puts a C string first. The key goes with "s" (it is a stack object in the
    // rewrite child: PLATFORM.md).
    unsafe {
        match sub {
            None => api!(RedisModule_EmitAOF)(aof, cmd.as_ptr(), c"sv".as_ptr(), key, strings.as_ptr(), strings.len()),
            Some(sub) => api!(RedisModule_EmitAOF)(aof, cmd.as_ptr(), c"csv".as_ptr(), sub.as_ptr(), key, strings.as_ptr(), strings.len()),
        }
    };
    for s in strings {
        // SAFETY: created above with a NULL ctx: ours to free.
        unsafe { api!(RedisModule_FreeString)(ptr::null_mut(), s) };
    }
}

/// AOF rewrite, as the built-in's rewriteStreamObject: one XS.ADD per entry (or
/// `XS.ADD key MAXLEN 0 0-1 x y` for an empty stream), then XS.SETID with
/// ENTRIESADDED and MAXDELETEDID so the metadata comes back exactly.
unsafe extern "C" fn aof_rewrite(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString, value: *mut c_void) {
    fence::guard_save("aof_rewrite", || {
        // SAFETY: Redis passes a value of our type, not borrowed elsewhere during the callback.
        let Some(s) = (unsafe { value.cast::<Stream>().as_mut() }) else { return };
        if s.length > 0 {
            let mut owned: Vec<Vec<u8>> = Vec::new();
            for e in s.range(StreamId::MIN, StreamId::MAX, false) {
                owned.clear();
                // Delayed delivery: `NOTBEFORE due` (from the AOF, recorded whatever the clock).
                if let Some(due) = s.delay_of(e.id()) {
                    owned.push(b"NOTBEFORE".to_vec());
                    owned.push(due.to_string().into_bytes());
                }
                owned.push(e.id().to_bytes());
                e.for_each_field(|f, v| {
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    f.write_to(&mut a);
                    v.write_to(&mut b);
                    owned.push(a);
                    owned.push(b);
                });
                let args: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
                emit(aof, c"XS.ADD", key, &args);
            }
        } else {
            emit(aof, c"XS.ADD", key, &[b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
        }
        let last = s.last_id.to_bytes();
        let added = s.entries_added.to_string();
        let maxdel = s.max_deleted_entry_id.to_bytes();
        emit(aof, c"XS.SETID", key, &[&last, b"ENTRIESADDED", added.as_bytes(), b"MAXDELETEDID", &maxdel]);
        aof_rewrite_idmp(aof, key, s);
        if let Some(a) = s.max_age.as_deref() {
            let ms = a.ms.to_string();
            if a.exact {
                emit(aof, c"XS.CFGSET", key, &[b"MAXAGE", ms.as_bytes(), b"EXACT"]);
            } else {
                emit(aof, c"XS.CFGSET", key, &[b"MAXAGE", ms.as_bytes()]);
            }
        }
        // Groups: XS.GROUP CREATE with ENTRIESREAD; XS.GROUP CREATECONSUMER for
        // consumers without pending entries; one XS.CLAIM ... TIME t RETRYCOUNT n
        // JUSTID FORCE per owned pending entry, in the group's time order (each
        // replayed XCLAIM TIME is a sorted insertion from the tail, so the order comes
        // back: the list is sorted by time unless the clock went backwards); then the
        // NACK zone in order as XS.NACK ... FAIL IDS n ... RETRYCOUNT c FORCE, batches
        // of at most NACK_BATCH consecutive IDs with the same count (FORCE creates the
        // unowned entry, RETRYCOUNT sets its count, each appended to the zone).
        // Ghosts (pending entries whose stream entry is gone) do not survive: XCLAIM
        // and XNACK FORCE skip missing entries, as the built-in's rewrite (owned
        // ghosts) and 8.8's (NACKed ones) drop them; NACKed ghosts are not emitted.
        // The entries were read: decompressed copies of packed nodes go.
        s.release_caches();
        let Some(groups) = s.groups_iter() else { return };
        for (gname, g) in groups {
            let gl = g.last_id.to_bytes();
            let er = g.entries_read.to_string();
            emit_sub(aof, c"XS.GROUP", Some(c"CREATE"), key, &[gname, &gl, b"ENTRIESREAD", er.as_bytes()]);
            let mut cons = g.consumers();
            while let Some((_, c)) = cons.next_consumer() {
                if c.pel().is_empty() {
                    emit_sub(aof, c"XS.GROUP", Some(c"CREATECONSUMER"), key, &[gname, &c.name]);
                }
            }
            for (id, n) in g.by_time().skip(g.nacked_count()) {
                let id = id.to_bytes();
                let time = n.delivery_time.to_string();
                // A long long, as rewriteStreamObject writes it.
                let count = (n.delivery_count as i64).to_string();
                let owner = g.owner_name(n);
                emit(
                    aof,
                    c"XS.CLAIM",
                    key,
                    &[gname, owner, b"0", &id, b"TIME", time.as_bytes(), b"RETRYCOUNT", count.as_bytes(), b"JUSTID", b"FORCE"],
                );
            }
            let mut batch: Vec<Vec<u8>> = Vec::new();
            let mut batch_count = 0u64;
            let flush = |batch: &mut Vec<Vec<u8>>, count: u64| {
                if batch.is_empty() {
                    return;
                }
                let n = batch.len().to_string();
                // As the long long the count reads as (XPENDING's view): a count wrapped past
                // LLONG_MAX (below compat latest) is negative, which XS.NACK accepts from the AOF.
                let c = (count as i64).to_string();
                let mut args: Vec<&[u8]> = vec![gname, b"FAIL", b"IDS", n.as_bytes()];
                args.extend(batch.iter().map(Vec::as_slice));
                args.extend([&b"RETRYCOUNT"[..], c.as_bytes(), b"FORCE"]);
                emit(aof, c"XS.NACK", key, &args);
                batch.clear();
            };
            for (id, n) in g.by_time().take(g.nacked_count()) {
                if !s.contains(id) {
                    continue;
                }
                let count = n.delivery_count;
                if !batch.is_empty() && (batch_count != count || batch.len() == NACK_BATCH) {
                    flush(&mut batch, batch_count);
                }
                batch_count = count;
                batch.push(id.to_bytes());
            }
            flush(&mut batch, batch_count);
            // The schedule (delayed delivery), after the PEL: XS.GROUP SCHEDULE in batches.
            if let Some(sch) = g.schedule() {
                let ids: Vec<Vec<u8>> = sch.ids().map(|id| id.to_bytes()).collect();
                for chunk in ids.chunks(NACK_BATCH) {
                    let mut args: Vec<&[u8]> = vec![gname];
                    args.extend(chunk.iter().map(Vec::as_slice));
                    emit_sub(aof, c"XS.GROUP", Some(c"SCHEDULE"), key, &args);
                }
            }
            // The queue policy last (commands from the AOF never apply it).
            if let Some(p) = g.policy() {
                let args = p.setpolicy_args();
                let mut all: Vec<&[u8]> = vec![gname, b"RESET"];
                all.extend(args.iter().map(Vec::as_slice));
                emit_sub(aof, c"XS.GROUP", Some(c"SETPOLICY"), key, &all);
            }
        }
    })
}

/// IDs per XS.NACK line of an AOF rewrite (REDIS8.md §6.4).
const NACK_BATCH: usize = 64;

/// The IDMP state: `XS.CFGSET key IDMP-DURATION d IDMP-MAXSIZE m` when the window is
/// not the default (the replay created the stream with the default window: a stream
/// created by a command from the AOF or a primary always is, see add.rs), then one
/// `XS.IDMPRECORD key pid iid id` per iid, producers in pid order, iids oldest first,
/// which restores the lists in insertion order; then the lifetime counters with
/// `XS.CFGSET key IIDS-ADDED n IIDS-DUPLICATES n`, options accepted only from the AOF
/// or a primary (the records counted themselves; the counters are set after them).
fn aof_rewrite_idmp(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString, s: &Stream) {
    let Some(m) = s.idmp.as_deref().filter(|m| !m.is_default()) else { return };
    let (d, x) = (m.duration_s, m.max_entries);
    if (d, x) != crate::stream::idmp::DEFAULT_WINDOW {
        let (d, x) = (d.to_string(), x.to_string());
        emit(aof, c"XS.CFGSET", key, &[b"IDMP-DURATION", d.as_bytes(), b"IDMP-MAXSIZE", x.as_bytes()]);
    }
    for (pid, p) in m.producers() {
        for (iid, id) in p.entries() {
            let id = id.to_bytes();
            emit(aof, c"XS.IDMPRECORD", key, &[pid, iid, &id]);
        }
    }
    let (a, d) = (m.iids_added.to_string(), m.iids_duplicates.to_string());
    emit(aof, c"XS.CFGSET", key, &[b"IIDS-ADDED", a.as_bytes(), b"IIDS-DUPLICATES", d.as_bytes()]);
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    fence::guard("mem_usage", 0, || {
        // SAFETY: Redis passes a value of our type.
        unsafe { value.cast::<Stream>().as_ref() }.map_or(0, Stream::mem_bytes)
    })
}

/// DEBUG DIGEST-VALUE: the logical content (entries and metadata), independent of
/// node layout, so that AOF rewrite and replication (which may cut nodes
/// differently) keep the digest.
unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    fence::guard("digest", (), || {
        // SAFETY: Redis passes a value of our type, not borrowed elsewhere during the callback.
        let Some(s) = (unsafe { value.cast::<Stream>().as_mut() }) else { return };
        let add = |b: &[u8]| {
            // SAFETY: valid digest handle; b valid for its length.
            unsafe { api!(RedisModule_DigestAddStringBuffer)(md, b.as_ptr().cast(), b.len()) };
        };
        let mut buf = Vec::new();
        for e in s.range(StreamId::MIN, StreamId::MAX, false) {
            add(&e.id().to_be_bytes());
            e.for_each_field(|f, v| {
                buf.clear();
                f.write_to(&mut buf);
                add(&buf);
                buf.clear();
                v.write_to(&mut buf);
                add(&buf);
            });
            // SAFETY: valid digest handle.
            unsafe { api!(RedisModule_DigestEndSequence)(md) };
        }
        for v in [
            s.length,
            s.entries_added,
            s.last_id.ms,
            s.last_id.seq,
            s.first_id.ms,
            s.first_id.seq,
            s.max_deleted_entry_id.ms,
            s.max_deleted_entry_id.seq,
        ] {
            add(&v.to_be_bytes());
        }
        // SAFETY: valid digest handle.
        unsafe { api!(RedisModule_DigestEndSequence)(md) };
        // IDMP: the window, the counters, every producer's iids in insertion order.
        // Nothing for a stream that never used it (its digest stays what it was).
        if let Some(m) = s.idmp.as_deref().filter(|m| !m.is_default()) {
            for v in [u64::from(m.duration_s), u64::from(m.max_entries), m.iids_added, m.iids_duplicates] {
                add(&v.to_be_bytes());
            }
            for (pid, p) in m.producers() {
                add(pid);
                for (iid, id) in p.entries() {
                    add(iid);
                    add(&id.to_be_bytes());
                }
            }
            // SAFETY: valid digest handle.
            unsafe { api!(RedisModule_DigestEndSequence)(md) };
        }
        // Retention by age: only when set (a plain stream's digest stays what it was).
        if let Some(a) = s.max_age.as_deref() {
            add(b"max-age");
            add(&a.ms.to_be_bytes());
            add(&[u8::from(a.exact)]);
            // SAFETY: valid digest handle.
            unsafe { api!(RedisModule_DigestEndSequence)(md) };
        }
        // Delayed delivery: the records, only when there are some.
        if let Some(m) = s.delayed.as_deref() {
            add(b"delayed");
            for (id, due) in m {
                add(&id.to_be_bytes());
                add(&due.to_be_bytes());
            }
            // SAFETY: valid digest handle.
            unsafe { api!(RedisModule_DigestEndSequence)(md) };
        }
        // Groups: names, positions, PELs with owners, consumers with their PELs.
        // Seen/active times are left out: they are not replicated by the built-in
        // either (a replica or an AOF replay sets them to its own clock).
        // The entries were read: decompressed copies of packed nodes go.
        s.release_caches();
        let Some(groups) = s.groups_iter() else { return };
        for (gname, g) in groups {
            add(gname);
            add(&g.last_id.to_be_bytes());
            add(&g.entries_read.to_be_bytes());
            let mut p = g.pel().iter();
            while let Some((k, n)) = p.next() {
                add(k);
                add(&n.delivery_time.to_be_bytes());
                add(&n.delivery_count.to_be_bytes());
                add(g.owner_name(n));
            }
            let mut cons = g.consumers();
            while let Some((_, c)) = cons.next_consumer() {
                add(&c.name);
                add(&(c.pel().len() as u64).to_be_bytes());
            }
            // The time list: the NACK zone's size, then every pending ID in order.
            add(&(g.nacked_count() as u64).to_be_bytes());
            for (id, _) in g.by_time() {
                add(&id.to_be_bytes());
            }
            // The queue policy, only when there is one (a plain group's digest is unchanged).
            if let Some(p) = g.policy() {
                add(b"policy");
                for a in p.setpolicy_args() {
                    add(&a);
                }
            }
            // The schedule, only when there is one.
            if let Some(sch) = g.schedule() {
                add(b"schedule");
                for (due, id) in sch.iter() {
                    add(&due.to_be_bytes());
                    add(&id.to_be_bytes());
                }
            }
            // SAFETY: valid digest handle.
            unsafe { api!(RedisModule_DigestEndSequence)(md) };
        }
    })
}

/// A stream leaves the keyspace (DEL, expiry, RENAME, overwrite...): blocked
/// group readers of that key may have to be released (see ffi/blocking.rs).
unsafe extern "C" fn unlink2(ctx: *mut raw::RedisModuleKeyOptCtx, _value: *const c_void) {
    fence::guard("unlink", (), || {
        // SAFETY: valid key-opt context for the duration of the callback.
        let (db, key) = unsafe { (api!(RedisModule_GetDbIdFromOptCtx)(ctx), api!(RedisModule_GetKeyNameFromOptCtx)(ctx)) };
        // SAFETY: the key name of the opt context, valid during the callback.
        super::blocking::key_unlinked(db, unsafe { super::ctx::string_bytes(key.cast_mut()) });
    })
}

unsafe extern "C" fn free(value: *mut c_void) {
    fence::guard("free", (), || {
        if !value.is_null() {
            // SAFETY: every value of our type is a Box<Stream> handed over in
            // create_stream / rdb_load / copy; Redis frees each exactly once.
            let s = unsafe { Box::from_raw(value.cast::<Stream>()) };
            super::stats::freed(&s);
            drop(s);
        }
    })
}

unsafe extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    fence::guard("free_effort", 1, || {
        // SAFETY: Redis passes a value of our type.
        unsafe { value.cast::<Stream>().as_ref() }.map_or(1, |s| s.rax_keys().max(1))
    })
}

unsafe extern "C" fn copy(_from: *mut raw::RedisModuleString, _to: *mut raw::RedisModuleString, value: *const c_void) -> *mut c_void {
    fence::guard("copy", ptr::null_mut(), || {
        // SAFETY: Redis passes a value of our type.
        match unsafe { value.cast::<Stream>().as_ref() } {
            Some(s) => {
                let mut copy = Box::new(s.clone());
                super::stats::born(&mut copy);
                Box::into_raw(copy).cast()
            }
            None => ptr::null_mut(),
        }
    })
}
