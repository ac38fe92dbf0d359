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
//!
//! Small blocks (a trace's job ids and labels, one or two per job) come from
//! glibc's heaps: the main heap, which grows by `brk`, and the heaps of the
//! arenas of other threads (64 MiB regions, 64 MiB-aligned). The allocator
//! sets the heaps' growth step ([`TOP_PAD`]) and gives each new stretch of
//! the main heap, and each other heap once, the same hint, as glibc's
//! `glibc.malloc.hugetlb=1` tunable would.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Blocks of at least this many bytes get the hint (4 MiB: two huge pages).
pub const HUGE_MIN: usize = 4 << 20;

/// The system allocator with the huge-page hint.
pub struct HugePageAlloc;

/// The main heap grows by at least this many bytes beyond a request (glibc's
/// `M_TOP_PAD`, 128 KiB by default): steps this large let whole 2 MiB
/// stretches of the heap be huge pages. The step is address space only;
/// untouched pages take no memory.
pub const TOP_PAD: usize = 16 << 20;

/// The end of the part of the main heap already hinted: 0 before the first
/// allocation, 1 until the first block of the heap is seen.
static HEAP_HINTED: AtomicUsize = AtomicUsize::new(0);

/// The span and alignment of a glibc heap of a thread's arena (64-bit).
const ARENA_HEAP: usize = 64 << 20;

/// Blocks below this size never get a mapping of their own (glibc's mmap
/// threshold is 128 KiB, and fixed once `M_TOP_PAD` is set): one outside the
/// main heap lies in an arena's heap.
const ARENA_BLOCK_MAX: usize = 64 << 10;

thread_local! {
    /// The arena heap this thread last hinted.
    static ARENA_HINTED: Cell<usize> = const { Cell::new(0) };
}

unsafe extern "C" {
    /// The C library's `sbrk`; `sbrk(0)` returns the current end of the heap.
    fn sbrk(increment: libc::intptr_t) -> *mut libc::c_void;
}

/// Hints the part of the main heap that has grown since the last hint, when
/// the block `[ptr, ptr + size)` lies beyond it.
fn advise_heap(ptr: *mut u8, size: usize) {
    let end = ptr as usize + size;
    let hinted = HEAP_HINTED.load(Ordering::Relaxed);
    if end <= hinted {
        return;
    }
    if hinted == 0 {
        // SAFETY: mallopt only sets how far the heap grows at a time.
        unsafe {
            libc::mallopt(libc::M_TOP_PAD, TOP_PAD as libc::c_int);
        }
        HEAP_HINTED.store(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: sbrk(0) only reads the current end of the heap.
    let brk = unsafe { sbrk(0) } as usize;
    if end > brk {
        // Not on the main heap: a block mapped on its own, or one in the heap
        // of another thread's arena, which starts at the 64 MiB boundary below.
        if size < ARENA_BLOCK_MAX {
            let heap = ptr as usize & !(ARENA_HEAP - 1);
            if ARENA_HINTED.with(|h| h.replace(heap)) != heap {
                // SAFETY: advice only, on the heap's own mapping.
                unsafe {
                    libc::madvise(heap as *mut libc::c_void, ARENA_HEAP, libc::MADV_HUGEPAGE);
                }
            }
        }
        return;
    }
    let from = if hinted > 1 { hinted } else { ptr as usize & !4095 };
    if brk > from {
        // SAFETY: advice only, on pages of the heap; it never changes their contents.
        unsafe {
            libc::madvise(from as *mut libc::c_void, brk - from, libc::MADV_HUGEPAGE);
        }
    }
    HEAP_HINTED.store(brk, Ordering::Relaxed);
}

/// The hint for a block just allocated or grown.
fn hint(ptr: *mut u8, size: usize) {
    if ptr.is_null() {
        return;
    }
    if size >= HUGE_MIN {
        advise(ptr, size);
    } else {
        advise_heap(ptr, size);
    }
}

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
        hint(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        hint(p, layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        hint(p, new_size);
        p
    }
}
