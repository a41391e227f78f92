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
//!
//! [`import_in_place`] is the one conversion from the built-in type: XS.IMPORT
//! and adoption in takeover mode (src/ffi/adopt.rs) both use it. Adoption
//! propagates `XS.IMPORT key` ahead of the command that met the built-in key,
//! and a replica or an AOF replay may have adopted the key already (at the end
//! of its own load): an XS.IMPORT replayed from the primary or the AOF on a key
//! that is already ours is therefore a success that changes nothing. A user's
//! XS.IMPORT on such a key is still an error.

use crate::error::{Error, Result};
use crate::ffi::ctx::{Ctx, KeyKind};

pub fn run_import(c: &Ctx) -> Result<()> {
    if c.must_obey() {
        // From the primary or the AOF, on a key already ours: adopted here before
        // (end of loading, or on the fly during the AOF replay). Nothing to do.
        let key = c.open_key(1, false);
        if let Some(s) = key.stream() {
            let n = s.length;
            drop(key);
            c.replicate_verbatim();
            c.reply_int(n as i64);
            return Ok(());
        }
    }
    let n = crate::ffi::adopt::import_in_place(c, 1)?;
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.streams_imported, 1);
    c.replicate_verbatim();
    c.reply_int(n as i64);
    Ok(())
}

pub fn run_export(c: &Ctx) -> Result<()> {
    // `XS.EXPORT key [DROPPOLICIES]`: a built-in stream has no queue policies (issue 16).
    let drop_policies = match c.argc() {
        2 => false,
        3 if super::is_kw(c.arg(2), "DROPPOLICIES") => true,
        _ => return Err(Error::Syntax),
    };
    let key = c.open_key(1, true);
    let (payload, ttl, n) = match key.kind() {
        KeyKind::Empty => return Err(Error::NoSuchKey),
        KeyKind::Other if key.is_native_stream() => return Err(Error::Err("the key already holds a built-in stream")),
        KeyKind::Other => return Err(Error::WrongType),
        KeyKind::Stream => {
            let s = key.stream().ok_or(Error::WrongType)?;
            // The nodes go into the built-in type byte for byte, and the built-in's
            // RESTORE checks only their headers under `sanitize-dump-payload no`: a
            // node loaded from an RDB without the deep check (rdb::Check::Shallow)
            // is checked here, or C code would read it.
            crate::stream::validate::validate_stream(s).map_err(|e| Error::Full(format!("ERR XS.EXPORT: the stream is corrupt ({e})")))?;
            // A NACKed entry has no owner, which the built-in streams of the hosts
            // (before 8.8) cannot hold: their loader refuses it, or keeps a PEL entry
            // whose consumer is NULL for XACK / XCLAIM to dereference.
            if s.has_nacked() {
                return Err(Error::Err("XS.EXPORT: the stream has NACKed entries (XS.NACK), which a built-in stream of this server cannot hold"));
            }
            if !drop_policies && s.groups_iter().is_some_and(|mut it| it.any(|(_, g)| g.policy().is_some())) {
                return Err(Error::Err("XS.EXPORT: the stream's groups have queue policies (XS.GROUP SETPOLICY), which a built-in stream cannot hold; XS.EXPORT key DROPPOLICIES converts it without them"));
            }
            // Retention by age (issue 17): refused as the policies are, dropped with them.
            if !drop_policies && s.max_age.is_some() {
                return Err(Error::Err("XS.EXPORT: the stream has a retention by age (XS.CFGSET MAXAGE), which a built-in stream cannot hold; XS.EXPORT key DROPPOLICIES converts it without it"));
            }
            // Delayed delivery (issue 17): entries a group passed over and has not served
            // would be lost; the records alone are dropped with DROPPOLICIES.
            if s.groups_iter().is_some_and(|mut it| it.any(|(_, g)| g.schedule().is_some())) {
                return Err(Error::Err(
                    "XS.EXPORT: the stream's groups have scheduled entries (XS.ADD NOTBEFORE/DELAY), which a built-in stream cannot hold",
                ));
            }
            if !drop_policies && s.delayed.is_some() {
                return Err(Error::Err("XS.EXPORT: the stream has delayed entries (XS.ADD NOTBEFORE/DELAY), which a built-in stream cannot hold; XS.EXPORT key DROPPOLICIES converts it without them"));
            }
            (crate::native::encode_dump(s, crate::config::host_level() >= crate::config::Level::V7_2), key.expire_at_ms(), s.length)
        }
    };
    drop(key);
    c.call_restore(1, ttl, &payload).map_err(|e| Error::Full(format!("ERR XS.EXPORT: {e}")))?;
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.streams_exported, 1);
    c.replicate_verbatim();
    c.reply_int(n as i64);
    Ok(())
}
