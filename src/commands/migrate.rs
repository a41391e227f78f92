//! XS.IMPORT key: a built-in stream becomes a module stream.
//! XS.EXPORT key: a module stream becomes a built-in stream.
//!
//! Both go through the built-in's serialized form (src/native.rs): DUMP of the
//! built-in stream decoded into ours, or ours encoded and RESTOREd, so nothing is
//! lost either way: entries with their IDs and node layout, tombstones, last ID,
//! entries-added, max-deleted ID, groups, consumers (with seen-times) and PELs
//! with delivery times and counts. The TTL is kept. A key of any other kind, or
//! a payload that fails validation, is an error and the key is left untouched.
//!
//! Replication: each command is deterministic given the key's content, which
//! replicas share, so it is propagated verbatim (under its own name: the
//! built-in has no twin).

use crate::error::{Error, Result};
use crate::ffi::ctx::{Ctx, KeyKind};

pub fn run_import(c: &Ctx) -> Result<()> {
    let mut key = c.key(1, true);
    match key.kind() {
        KeyKind::Empty => return Err(Error::NoSuchKey),
        KeyKind::Stream => return Err(Error::Err("the key already holds an xstream stream")),
        KeyKind::Other if !key.is_native_stream() => return Err(Error::WrongType),
        KeyKind::Other => {}
    }
    let expire_at = key.expire_at_ms();
    let payload = c.call_dump(1).map_err(|e| Error::Full(format!("ERR XS.IMPORT: {e}")))?.ok_or(Error::NoSuchKey)?;
    let s = crate::native::decode_dump(&payload).map_err(|e| Error::Full(format!("ERR XS.IMPORT: unexpected stream payload: {e}")))?;
    let n = s.length;
    if !key.replace_with_stream(s) {
        return Err(Error::Err("XS.IMPORT: cannot store the stream"));
    }
    if let Some(at) = expire_at {
        key.set_expire_at_ms(at);
    }
    c.replicate_verbatim();
    c.reply_int(n as i64);
    Ok(())
}

pub fn run_export(c: &Ctx) -> Result<()> {
    let key = c.key(1, true);
    let (payload, ttl, n) = match key.kind() {
        KeyKind::Empty => return Err(Error::NoSuchKey),
        KeyKind::Other if key.is_native_stream() => return Err(Error::Err("the key already holds a built-in stream")),
        KeyKind::Other => return Err(Error::WrongType),
        KeyKind::Stream => {
            let s = key.stream().ok_or(Error::WrongType)?;
            (crate::native::encode_dump(s, crate::config::host_level() >= crate::config::Level::V7_2), key.expire_at_ms(), s.length)
        }
    };
    drop(key);
    c.call_restore(1, ttl, &payload).map_err(|e| Error::Full(format!("ERR XS.EXPORT: {e}")))?;
    c.replicate_verbatim();
    c.reply_int(n as i64);
    Ok(())
}
