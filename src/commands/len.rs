//! XS.LEN key

use crate::error::Result;
use crate::ffi::ctx::Ctx;

pub fn run(c: &Ctx) -> Result<()> {
    let key = c.key(1, false);
    c.reply_int(key.existing()?.map_or(0, |s| s.length) as i64);
    Ok(())
}
