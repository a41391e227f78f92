//! XS.ACK key group id [id ...]

use crate::error::{Error, Result};
use crate::ffi::ctx::Ctx;
use crate::stream::StreamId;

pub fn run(c: &Ctx) -> Result<()> {
    let mut key = c.key(1, true);
    let Some(s) = key.existing_mut()? else {
        c.reply_int(0);
        return Ok(());
    };
    let Some(g) = s.group_mut(c.arg(2)) else {
        c.reply_int(0);
        return Ok(());
    };
    // All IDs are parsed before any is acknowledged (bounded by argc).
    let mut ids = Vec::with_capacity(c.argc().saturating_sub(3));
    for i in 3..c.argc() {
        ids.push(StreamId::parse(c.arg(i), 0, true, false).ok_or(Error::InvalidId)?.0);
    }
    let acked = ids.iter().filter(|&&id| g.ack(id)).count();
    // A group with a queue policy counts them (XS.INFO GROUPS `acked`).
    g.count_acks(acked as u64);
    c.reply_int(acked as i64);
    // Propagated as is when it changed something; the built-in XACK neither
    // notifies nor signals the key.
    if acked > 0 {
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_acked, acked as u64);
        c.replicate_verbatim();
        // The built-in counts one change per entry acknowledged.
        c.add_dirty(acked as u64 - 1);
    }
    Ok(())
}
