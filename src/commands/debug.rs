//! Test builds only (feature `test-hooks`):
//! - XS.DEBUG-PANIC panics on purpose so tests can prove the fence turns a bug into an error
//!   reply, not a dead server.
//! - XS.DEBUG-DOUBLE-FREE frees a block twice on purpose (see ffi::alloc::debug_double_free): the
//!   ASan pass proves a real memory error fails the test. Never called on a jemalloc server.
//! - XS.DEBUG-NOTIFY key event raises a keyspace notification of the module class (`d`), which
//!   no command of this module raises: the keyspace log's tests log one.
//! - XS.DEBUG-TIER-FAULTS writes reads [after]: the next `writes` records written to the segment
//!   store fail half way (a full disk), the next `reads` reads fail with EIO once `after` more
//!   have succeeded (`xstream.tier-dir`).

use crate::error::Result;
use crate::ffi::ctx::Ctx;

pub fn run_panic(_c: &Ctx) -> Result<()> {
    panic!("XS.DEBUG-PANIC called")
}

pub fn run_double_free(c: &Ctx) -> Result<()> {
    crate::ffi::alloc::debug_double_free();
    // Reached only without a sanitizer (the allocator did not notice).
    c.reply_int(0);
    Ok(())
}

pub fn run_notify(c: &Ctx) -> Result<()> {
    c.notify_module_class(c.arg(2), 1);
    c.reply_ok();
    Ok(())
}

/// XS.DEBUG-TIER-FAULTS writes reads [reads-after]: faults injected into the segment store;
/// XS.DEBUG-TIER-FAULTS SEGMENT-BYTES n: segments sealed at n bytes from now on.
pub fn run_tier_faults(c: &Ctx) -> Result<()> {
    if super::is_kw(c.arg(1), "SEGMENT-BYTES") {
        let n = super::parse_ll(c.arg(2))?.max(0) as u64;
        if !crate::tier::cold::set_segment_bytes(n) {
            return Err(crate::error::Error::Err("xstream.tier-dir is not set"));
        }
        c.reply_ok();
        return Ok(());
    }
    let writes = super::parse_ll(c.arg(1))?.clamp(0, u32::MAX as i64) as u32;
    let reads = super::parse_ll(c.arg(2))?.clamp(0, u32::MAX as i64) as u32;
    let reads_after = if c.argc() > 3 { super::parse_ll(c.arg(3))?.clamp(0, u32::MAX as i64) as u32 } else { 0 };
    if !crate::tier::cold::inject(crate::tier::segment::Faults { writes, reads, reads_after }) {
        return Err(crate::error::Error::Err("xstream.tier-dir is not set"));
    }
    c.reply_ok();
    Ok(())
}
