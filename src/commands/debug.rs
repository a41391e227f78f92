//! XS.DEBUG-PANIC (test builds only, feature `test-hooks`): panics on purpose so
//! tests can prove the fence turns a bug into an error reply, not a dead server.

use crate::error::Result;
use crate::ffi::ctx::Ctx;

pub fn run_panic(_c: &Ctx) -> Result<()> {
    panic!("XS.DEBUG-PANIC called")
}
