//! The global allocator: Redis's allocator inside the server, the system one elsewhere.
//!
//! Inside redis-server every Rust allocation must go through `RedisModule_Alloc`
//! so that `used_memory`, `maxmemory` and MEMORY USAGE see our data. Unit tests,
//! benches and fuzz targets link the same crate without a server: there the API
//! pointers are unset and we fall back to the system allocator. The choice is
//! made per call from the same pointer for alloc and free; the pointers are set
//! once in `RedisModule_OnLoad` before any allocation of ours, and never change.

use redis_module::alloc::RedisAlloc;
use redis_module::raw;
use std::alloc::{GlobalAlloc, Layout, System};

/// Redis's allocator when loaded in a server, `System` otherwise.
#[derive(Default, Debug, Clone, Copy)]
pub struct XAlloc;

fn in_server() -> bool {
    // SAFETY: reading a function pointer written once by RedisModule_Init before
    // any other code of the module runs; Option<fn> is Copy.
    let f = unsafe { raw::RedisModule_Alloc };
    f.is_some()
}

// SAFETY: both delegates are valid GlobalAllocs; a block is always freed by the
// allocator that allocated it because `in_server()` never changes once the module
// is initialised (and is constant false outside a server).
unsafe impl GlobalAlloc for XAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if in_server() {
            super::stats::BYTES.fetch_add(layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
            // SAFETY: forwarded contract of GlobalAlloc::alloc.
            unsafe { RedisAlloc.alloc(layout) }
        } else {
            // SAFETY: forwarded contract of GlobalAlloc::alloc.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if in_server() {
            super::stats::BYTES.fetch_sub(layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
            // SAFETY: ptr came from RedisAlloc (see the impl comment).
            unsafe { RedisAlloc.dealloc(ptr, layout) }
        } else {
            // SAFETY: ptr came from System (see the impl comment).
            unsafe { System.dealloc(ptr, layout) }
        }
    }
}

/// XS.DEBUG-DOUBLE-FREE (feature `test-hooks` only, never in a release build): frees one block of
/// Redis's allocator twice, on purpose, so that `make test-asan` proves a real memory error of
/// the module reaches the sanitizer report and fails the test (tests/harness.rs). On a server
/// built with jemalloc this corrupts the heap: only the ASan pass calls it.
#[cfg(feature = "test-hooks")]
pub fn debug_double_free() {
    // SAFETY: none, deliberately: the second RedisModule_Free of the same pointer is the memory
    // error under test. Both calls are made with the API pointer set (inside a command callback).
    unsafe {
        let p = crate::ffi::api!(RedisModule_Alloc)(16);
        crate::ffi::api!(RedisModule_Free)(p);
        crate::ffi::api!(RedisModule_Free)(p);
    }
}
