//! XS.LEN key

use crate::error::Result;
use crate::ffi::ctx::{Ctx, KeyKind};

pub fn run(c: &Ctx) -> Result<()> {
    let key = c.key(1, false);
    match key.kind() {
        KeyKind::Empty => c.reply_int(0),
        KeyKind::Other => return Err(key.wrong_type()),
        KeyKind::Stream => c.reply_int(key.stream().map_or(0, |s| s.length) as i64),
    }
    Ok(())
}
