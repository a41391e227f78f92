//! XS.COMPACT key [LIMIT nodes]
//!
//! Rewrites the stream's nodes without their deleted entries and merges
//! neighbouring nodes that fit the node limits together (src/stream/compact.rs),
//! whatever `xstream.compact-deleted` says. Replies with the bytes of node
//! allocations freed. `LIMIT nodes` bounds the nodes rewritten (0 = all).
//!
//! Only the node layout changes: no keyspace event, no change of the key's
//! content. The command is propagated as it is, so replicas (and the AOF) lay
//! their nodes out the same way; they would answer every read the same without it.

use super::{is_kw, parse_ll};
use crate::error::{Error, Result};
use crate::ffi::ctx::Ctx;

pub fn run(c: &Ctx) -> Result<()> {
    let mut limit = 0u64;
    let mut i = 2;
    while i < c.argc() {
        if is_kw(c.arg(i), "LIMIT") && i + 1 < c.argc() {
            let n = parse_ll(c.arg(i + 1))?;
            if n < 0 {
                return Err(Error::Err("The LIMIT argument must be >= 0."));
            }
            limit = n as u64;
            i += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    let mut key = c.key(1, true);
    let Some(s) = key.existing_mut()? else {
        c.reply_int(0);
        return Ok(());
    };
    let done = s.compact_all(limit, crate::config::limits());
    crate::ops::trim::count_compaction(&done);
    if done.nodes_rewritten > 0 {
        c.replicate_verbatim();
    }
    c.reply_int(i64::try_from(done.bytes_freed).unwrap_or(i64::MAX));
    Ok(())
}
