//! XS.DEL key id [id ...]

use crate::error::{Error, Result};
use crate::ffi::ctx::Ctx;
use crate::stream::StreamId;

pub fn run(c: &Ctx) -> Result<()> {
    let mut key = c.key(1, true);
    let Some(s) = key.existing_mut()? else {
        c.reply_int(0);
        return Ok(());
    };
    // Every ID is checked before anything is deleted: no partial execution.
    // The vector is bounded by argc, i.e. by what the client actually sent.
    let mut ids = Vec::with_capacity(c.argc().saturating_sub(2));
    for i in 2..c.argc() {
        let (id, _) = StreamId::parse(c.arg(i), 0, true, false).ok_or(Error::InvalidId)?;
        ids.push(id);
    }
    super::read_first(s, |s| s.read_nodes_of(ids.iter().copied()))?;
    let deleted = s.delete_ids(&ids);
    if deleted > 0 {
        crate::ops::trim::compact_touched(s, &ids);
        c.signal_modified(1);
        c.notify(c"xdel", 1);
        crate::ffi::stats::bump(&crate::ffi::stats::EVENTS.entries_deleted, deleted);
        c.replicate_verbatim();
        // The built-in counts one change per entry deleted.
        c.add_dirty(deleted - 1);
    }
    c.reply_int(deleted as i64);
    Ok(())
}
