//! The binary's allocator: the system allocator, plus a transparent-huge-page
//! hint for large blocks.
//!
//! A trace replay builds a few vectors of tens of MiB (trace records, job
//! specs, job states) and touches each page once. With 4 KiB pages that is
//! one page fault per 4 KiB, about a third of a 70,000-job replay's wall
//! time on a small VM. Blocks of at least [`HUGE_MIN`] bytes are marked
//! `MADV_HUGEPAGE`, so that where the kernel's transparent huge pages are in
//! `madvise` or `always` mode, each 2 MiB-aligned stretch faults once (glibc
//! offers the same through `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`). The hint
//! changes nothing else: where huge pages are off, `madvise` just fails and
//! is ignored. Linux only.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes get the hint (4 MiB: two huge pages).
pub const HUGE_MIN: usize = 4 << 20;

/// The system allocator with the huge-page hint.
pub struct HugePageAlloc;

/// Asks for transparent huge pages on the 2 MiB-aligned part of a block.
fn advise(ptr: *mut u8, size: usize) {
    const HUGE: usize = 2 << 20;
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + size) & !(HUGE - 1);
    if end > start {
        // SAFETY: [start, end) lies inside the block just allocated, and
        // MADV_HUGEPAGE is advice only: it never changes the memory's contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

// SAFETY: every call is forwarded to `System` unchanged; the hint does not
// change what the blocks hold or who owns them.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && layout.size() >= HUGE_MIN {
            advise(p, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && layout.size() >= HUGE_MIN {
            advise(p, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && new_size >= HUGE_MIN {
            advise(p, new_size);
        }
        p
    }
}
