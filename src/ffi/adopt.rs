//! Adoption: in takeover mode with `adopt yes`, built-in streams become ours.
//!
//! A server switched to takeover on an existing dataset holds built-in streams
//! (from an RDB or AOF written without the module, a full sync from a primary
//! without it, RESTORE / MIGRATE of a built-in DUMP payload). The standard names
//! now reach our commands, which cannot serve the built-in type; adoption
//! converts such keys with the conversion of XS.IMPORT
//! ([`import_in_place`]: DUMP through RM_Call, decode
//! and validate, replace the value, restore the absolute expire), so nothing
//! XS.IMPORT keeps is lost. Two places:
//!
//! - At the end of loading (`REDISMODULE_EVENT_LOADING`, subevent `ENDED`: fired by
//!   `stopLoading()` after an RDB load at startup or DEBUG RELOAD, after the whole
//!   AOF (base and increments, one event), and after a replica's full sync, also
//!   the diskless `swapdb` one, where it fires after the swap): every DB is
//!   scanned and each built-in stream converted. Not propagated: the same
//!   conversion happens again at the next load of the same data, and a replica
//!   converts its own copy. One notice line says how many keys and entries, and
//!   how long it took.
//! - On the fly ([`adopt_key`], called from [`Ctx::key`], through which every
//!   command opens its keys): a built-in stream met by a command is converted
//!   first. A write propagates `XS.IMPORT key` ahead of its own propagation, so
//!   replicas and the AOF convert it at the same point of the history. A read
//!   (the key opened without WRITE: XLEN, XRANGE, XINFO, XREAD, ...) propagates
//!   nothing: a read may run where a write may not (clients paused with CLIENT
//!   PAUSE WRITE, where Redis asserts that nothing is propagated and aborts,
//!   `propagatePendingCommands`; EVAL_RO and `no-writes` scripts; a replica's
//!   clients), and it need not: the conversion changes the encoding, not the
//!   content. The stream is marked ([`Stream::import_unsent`]) and the first write
//!   that opens it propagates `XS.IMPORT key` ahead of its own propagation
//!   ([`send_unsent_import`]), so replicas (also those without takeover) and the
//!   AOF convert their copy before the first change, as they would have before the
//!   read. Until then a replica's copy may still be built-in (its own stream
//!   commands convert it there, silently too); the replies are the same either way
//!   (tests/adopt.rs `read_adoption_while_writes_are_paused`).
//!   This also runs while the AOF is replayed (a command logged after an earlier
//!   adoption meets the built-in key again); nothing is propagated while
//!   loading. A replayed XS.IMPORT on a key that is already ours succeeds without
//!   doing anything (src/commands/migrate.rs).
//!
//! A stream whose payload fails validation stays as it is, with a warning: the
//! commands then answer `WRONGTYPE ... XS.IMPORT <key>`, and XS.IMPORT gives the
//! reason.
//!
//! [`Stream::import_unsent`]: crate::stream::Stream::import_unsent

use super::api;
use super::ctx::{Arg, Ctx, Key, KeyKind};
use super::fence;
use crate::error::Error;
use redis_module::raw;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::Ordering;

/// Failures reported one line each at the end of loading; the rest are counted.
const FAILURES_LOGGED: usize = 10;

/// Whether adoption is on: takeover mode and `xstream.adopt yes`.
pub fn active() -> bool {
    super::takeover::active() && crate::config::ADOPT.load(Ordering::Relaxed)
}

/// On the fly: converts the built-in stream in key argument `i` and, for a
/// write, propagates `XS.IMPORT key` (the command's own propagation follows; a
/// read propagates nothing, see the module doc). On failure the key is left as
/// it is and the command answers as for any built-in stream.
pub fn adopt_key(c: &Ctx, i: usize, write: bool) {
    match import_in_place(c, i) {
        Ok(_) => {
            super::stats::bump(&super::stats::EVENTS.streams_adopted, 1);
            if write {
                c.replicate(c"XS.IMPORT", &[Arg::Orig(i)])
            } else if let Some(s) = c.open_key(i, true).stream_mut() {
                s.set_import_unsent(true);
            }
        }
        Err(Error::NoSuchKey) => {}
        Err(e) => super::log_warning(&format!(
            "xstream: cannot adopt the built-in stream at key '{}': {}; the key is left as it is",
            String::from_utf8_lossy(c.arg(i)),
            e.message()
        )),
    }
}

/// A write meets a stream that a read converted without propagating: `XS.IMPORT
/// key` goes first (a no-op where the copy is already ours), so a replica whose copy
/// is still built-in, or that runs without takeover, converts it before the write.
pub fn send_unsent_import(c: &Ctx, i: usize, key: &mut Key) {
    if key.stream().is_some_and(|s| s.import_unsent()) {
        if let Some(s) = key.stream_mut() {
            s.set_import_unsent(false);
        }
        c.replicate(c"XS.IMPORT", &[Arg::Orig(i)]);
    }
}

/// End of a load (the loading event's ENDED subevent, dispatched by loading.rs):
/// converts every built-in stream when adoption is on.
pub fn loading_ended(ctx: *mut raw::RedisModuleCtx) {
    if active() {
        adopt_all(ctx);
    }
}

/// What one pass over the keyspace did.
#[derive(Default)]
struct Tally {
    keys: u64,
    entries: u64,
    failed: usize,
}

/// Converts every built-in stream of every DB (end of loading).
fn adopt_all(ctx: *mut raw::RedisModuleCtx) {
    let t0 = std::time::Instant::now();
    let mut tally = Tally::default();
    // SAFETY: the event's context has a (temporary) client, whose DB we select
    // and restore; SelectDb fails past the last DB.
    let home = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
    for db in 0.. {
        // SAFETY: as above.
        if unsafe { api!(RedisModule_SelectDb)(ctx, db) } != raw::REDISMODULE_OK as c_int {
            break;
        }
        // Names first, conversions after: replacing a value deletes and re-adds its
        // dict entry, which a scan in progress may not see safely (module.c, RM_Scan).
        for name in native_stream_names(ctx) {
            adopt_one(ctx, &name, &mut tally);
        }
    }
    // SAFETY: as above; `home` was valid.
    unsafe { api!(RedisModule_SelectDb)(ctx, home) };
    let ms = t0.elapsed().as_millis();
    let mut line =
        format!("xstream: adopted {} built-in stream{} ({} entries) in {} ms", tally.keys, if tally.keys == 1 { "" } else { "s" }, tally.entries, ms);
    if tally.failed > 0 {
        line.push_str(&format!("; {} left built-in (see the warnings above)", tally.failed));
    }
    super::log_notice(ctx, &line);
}

/// Converts one key of the selected DB, counting the outcome.
fn adopt_one(ctx: *mut raw::RedisModuleCtx, name: &[u8], tally: &mut Tally) {
    // SAFETY: a new string owned here (NULL ctx), freed below.
    let s = unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), name.as_ptr().cast(), name.len()) };
    let mut argv = [s];
    let outcome = {
        // SAFETY: the event's context is valid during the callback, and `argv` holds
        // one live string that outlives `c` (this block).
        let c = unsafe { Ctx::new(ctx, argv.as_mut_ptr(), 1) };
        import_in_place(&c, 0)
    };
    match outcome {
        Ok(n) => {
            super::stats::bump(&super::stats::EVENTS.streams_adopted, 1);
            tally.keys += 1;
            tally.entries += n;
        }
        // Expired since it was seen (and deleted by the lookup): nothing to adopt.
        Err(Error::NoSuchKey) => {}
        Err(e) => {
            tally.failed += 1;
            if tally.failed <= FAILURES_LOGGED {
                super::log_warning(&format!(
                    "xstream: cannot adopt the built-in stream at key '{}' (db {}): {}; the key is left as it is",
                    String::from_utf8_lossy(name),
                    // SAFETY: valid context.
                    unsafe { api!(RedisModule_GetSelectedDb)(ctx) },
                    e.message()
                ));
            }
        }
    }
    // SAFETY: created above with a NULL ctx; no longer referenced.
    unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), s) };
}

/// The names of the built-in streams in the selected DB.
fn native_stream_names(ctx: *mut raw::RedisModuleCtx) -> Vec<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = Vec::new();
    // SAFETY: a cursor owned here, destroyed below.
    let cursor = unsafe { api!(RedisModule_ScanCursorCreate)() };
    if cursor.is_null() {
        return names;
    }
    let data: *mut Vec<Vec<u8>> = &mut names;
    // SAFETY: valid context and cursor; the callback runs synchronously inside
    // RM_Scan and gets `data`, which points at `names`, alive across the loop.
    while unsafe { api!(RedisModule_Scan)(ctx, cursor, Some(collect), data.cast()) } != 0 {}
    // SAFETY: created above, not used afterwards.
    unsafe { api!(RedisModule_ScanCursorDestroy)(cursor) };
    names
}

/// RM_Scan callback: remembers the key if it holds a built-in stream (or if Redis
/// gave no key handle: the conversion checks the type itself).
unsafe extern "C" fn collect(_ctx: *mut raw::RedisModuleCtx, keyname: *mut raw::RedisModuleString, key: *mut raw::RedisModuleKey, data: *mut c_void) {
    fence::guard("keyspace scan", (), || {
        // SAFETY: `data` is the Vec passed by native_stream_names, alive during RM_Scan.
        let Some(names) = (unsafe { data.cast::<Vec<Vec<u8>>>().as_mut() }) else { return };
        // SAFETY: `key` is NULL or a key handle valid during the callback.
        let native = key.is_null() || unsafe { api!(RedisModule_KeyType)(key) } as isize == raw::REDISMODULE_KEYTYPE_STREAM;
        if native {
            // SAFETY: the key name is valid during the callback; we copy it.
            names.push(unsafe { super::ctx::string_bytes(keyname) }.to_vec());
        }
    })
}

/// Converts the built-in stream in key argument `i` into ours, in place: DUMP
/// through RM_Call, decoded and validated (src/native.rs), the value replaced,
/// the absolute expire time restored. Returns the entry count. Propagates
/// nothing (the caller does). On any error the key is left untouched.
pub fn import_in_place(c: &Ctx, i: usize) -> crate::error::Result<u64> {
    let mut key = c.open_key(i, true);
    match key.kind() {
        KeyKind::Empty => return Err(Error::NoSuchKey),
        KeyKind::Stream => return Err(Error::Err("the key already holds an xstream stream")),
        KeyKind::Other if !key.is_native_stream() => return Err(Error::WrongType),
        KeyKind::Other => {}
    }
    let expire_at = key.expire_at_ms();
    let s = c
        .call_dump(i, crate::native::decode_dump)
        .map_err(|e| Error::Full(format!("ERR XS.IMPORT: {e}")))?
        .ok_or(Error::NoSuchKey)?
        .map_err(|e| Error::Full(format!("ERR XS.IMPORT: unexpected stream payload: {e}")))?;
    let n = s.length;
    if !key.replace_with_stream(s) {
        return Err(Error::Err("XS.IMPORT: cannot store the stream"));
    }
    if let Some(at) = expire_at {
        key.set_expire_at_ms(at);
    }
    Ok(n)
}
