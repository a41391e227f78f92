//! XS.GROUP REDRIVE dlq-key source-key [COUNT n] (ours, issue 31): dead letters go back to
//! the stream they came from.
//!
//! A queue policy's dead-letter stream holds, per entry, `source-key`, `source-id`, `group`,
//! `consumer`, `deliveries`, `reason`, then the entry's own fields (src/commands/queue.rs,
//! `DeadLetters::take`). REDRIVE takes the dead letters of `dlq-key` whose `source-key` is
//! `source-key`, oldest first, at most COUNT (default 100), appends each entry's own fields
//! to `source-key` as a new entry (a new ID: the groups reading it see it as new work), with a
//! field `redrives` counting how often it was redriven (incremented when the entry already
//! carries one), and deletes the dead letters. Entries of other sources, and entries not in
//! the dead-letter form (added by hand), are left where they are. Replies with the number of
//! entries moved.
//!
//! Replication: ordinary writes, `XS.ADD source-key <new ID> fields...` per entry, then one
//! `XS.DEL dlq-key id...`. Both keys are declared (key specs): in a cluster they must hash to
//! the same slot (a hash tag: `{orders}` and `{orders}:dead`), as SETPOLICY's DEADLETTER key
//! must for the dead letters to be written.

use super::{is_kw, parse_ll};
use crate::error::{Error, Result};
use crate::ffi::ctx::{Arg, Ctx, Name};
use crate::stream::{IdSpec, Stream, StreamId};

/// Entries moved by one call without COUNT.
const COUNT_DEFAULT: u64 = 100;

/// The metadata a dead letter starts with, in order.
const META: [&[u8]; 6] = [b"source-key", b"source-id", b"group", b"consumer", b"deliveries", b"reason"];

/// The field counting redrives.
const REDRIVES: &[u8] = b"redrives";

pub fn run(c: &Ctx) -> Result<()> {
    let (dlq_i, src_i) = (2, 3);
    let mut count = COUNT_DEFAULT;
    let mut i = 4;
    while i < c.argc() {
        if is_kw(c.arg(i), "COUNT") && i + 1 < c.argc() {
            count = parse_ll(c.arg(i + 1)).ok().filter(|&n| n > 0).ok_or(Error::Err("COUNT must be a positive integer"))? as u64;
            i += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    if c.arg(dlq_i) == c.arg(src_i) {
        return Err(Error::Err("the dead-letter key and the source key are the same key"));
    }
    let mut dlq_key = c.key(dlq_i, true);
    let mut src_key = c.key(src_i, true);
    // Both keys checked before anything changes.
    src_key.existing()?;
    let Some(dlq) = dlq_key.existing_mut()? else {
        c.reply_int(0);
        return Ok(());
    };
    let taken = dead_letters_of(dlq, c.arg(src_i), count);
    if taken.is_empty() {
        c.reply_int(0);
        return Ok(());
    }
    if src_key.existing()?.is_none() {
        src_key.create_stream(Stream::new()).ok_or(Error::Err("cannot create the stream"))?;
    }
    let src = src_key.stream_mut().ok_or(Error::WrongType)?;
    let queued = src.pack_queue().len();
    let mut moved: Vec<StreamId> = Vec::with_capacity(taken.len());
    for (old_id, fields) in &taken {
        let refs: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
        // An append that fails (the source's IDs exhausted, an entry too large) stops the
        // move: that dead letter and the ones after it stay.
        let Ok(new_id) = src.append(&refs, IdSpec::Auto, c.now_ms(), crate::config::limits()) else { break };
        let idb = new_id.to_bytes();
        let mut rep: Vec<Arg> = vec![Arg::Orig(src_i), Arg::New(&idb)];
        rep.extend(refs.iter().map(|f| Arg::New(f)));
        c.replicate(c"XS.ADD", &rep);
        moved.push(*old_id);
    }
    if src.pack_queue().len() > queued {
        crate::ops::due::sealed(c, Name::Arg(src_i));
    }
    drop(src_key);
    if moved.is_empty() {
        c.reply_int(0);
        return Ok(());
    }
    let n = moved.len() as u64;
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_added, n);
    c.notify(c"xadd", src_i);
    c.signal_modified(src_i);
    c.signal_ready(src_i);
    let deleted = dlq.delete_ids(&moved);
    crate::ops::trim::compact_touched(dlq, &moved);
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_deleted, deleted);
    crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_redriven, n);
    let texts: Vec<Vec<u8>> = moved.iter().map(|id| id.to_bytes()).collect();
    let mut rep: Vec<Arg> = vec![Arg::Orig(dlq_i)];
    rep.extend(texts.iter().map(|t| Arg::New(t)));
    c.replicate(c"XS.DEL", &rep);
    c.notify(c"xdel", dlq_i);
    c.signal_modified(dlq_i);
    c.reply_int(n as i64);
    Ok(())
}

/// The first `count` dead letters of `dlq` from `source`, oldest first: (ID in the dead-letter
/// stream, the fields to append: the entry's own, with `redrives` counted).
fn dead_letters_of(dlq: &Stream, source: &[u8], count: u64) -> Vec<(StreamId, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut it = dlq.range(StreamId::MIN, StreamId::MAX, false);
    while (out.len() as u64) < count {
        let Some(e) = it.next_entry() else { break };
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = e.fields();
        let is_dead_letter = pairs.len() > META.len() && pairs.iter().zip(META).all(|((f, _), m)| f.as_slice() == m);
        if !is_dead_letter || pairs.first().is_none_or(|(_, k)| k.as_slice() != source) {
            continue;
        }
        let mut fields: Vec<Vec<u8>> = Vec::with_capacity((pairs.len() - META.len() + 1) * 2);
        let mut counted = false;
        for (f, v) in pairs.into_iter().skip(META.len()) {
            let v = if f == REDRIVES && !counted {
                counted = true;
                let n = crate::stream::id::string2ll(&v).filter(|&n| n >= 0).unwrap_or(0);
                n.saturating_add(1).to_string().into_bytes()
            } else {
                v
            };
            fields.push(f);
            fields.push(v);
        }
        if !counted {
            fields.push(REDRIVES.to_vec());
            fields.push(b"1".to_vec());
        }
        out.push((e.id(), fields));
    }
    out
}
