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

    /// Through `RedisModule_Realloc` (zrealloc): the default method allocates, copies and
    /// frees, where jemalloc resizes in place when the new size stays in the block's size
    /// class or the pages after a large block are free, and moves the block otherwise. A
    /// vector growing by doubling and a node shrunk when sealed take one call either way.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !in_server() {
            // SAFETY: forwarded contract of GlobalAlloc::realloc; ptr came from System.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        if layout.align() > MALLOC_ALIGN {
            // SAFETY: forwarded contract; the default method keeps the alignment.
            let p = unsafe { self.alloc(Layout::from_size_align_unchecked(new_size, layout.align())) };
            if !p.is_null() {
                // SAFETY: both blocks are live and at least min(old, new) bytes long.
                unsafe {
                    std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
            }
            return p;
        }
        // Rounded as RedisAlloc rounds an allocation's size: a size that is a multiple of the
        // alignment gets a block of a size class aligned as well.
        let rounded = (new_size + layout.align() - 1) & !(layout.align() - 1);
        // SAFETY: reading a function pointer set once at load (as in_server above).
        let f = unsafe { super::api!(RedisModule_Realloc) };
        // SAFETY: ptr came from RedisModule_Alloc (see the impl comment); zrealloc keeps
        // malloc's alignment (MALLOC_ALIGN, which covers `layout`'s) and aborts the server
        // on out-of-memory rather than return NULL, as zmalloc does for alloc.
        let p = unsafe { f(ptr.cast(), rounded) }.cast::<u8>();
        // Counted as alloc and dealloc count (the sizes of the layouts, not rounded).
        super::stats::BYTES.fetch_add(new_size as i64 - layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
        p
    }
}

/// The alignment every block of zmalloc has (jemalloc's and glibc's malloc: 16 bytes on the
/// 64-bit targets Redis builds for).
const MALLOC_ALIGN: usize = 16;

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
