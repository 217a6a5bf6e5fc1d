//! How the C allocator treats the daemon's large, short-lived buffers.

/// Allocations this large are mapped on their own and unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Fix glibc's threshold for mapping an allocation on its own at `MMAP_THRESHOLD` (its
/// default, which it otherwise raises, up to 32 MiB, each time such a block is freed). Raised,
/// every later large buffer (a `policy/list` answer of 10,000 rules is 2 MiB of JSON) comes
/// from the arena of the thread that made it and stays in the daemon's resident memory once
/// freed: five `policy list`s of 10,000 rules kept 20 MiB, one per worker thread's arena; with
/// the threshold fixed they keep 1.5 MiB (issue 39). To be called first thing in `main`,
/// before any thread starts. Elsewhere than glibc, nothing to do.
pub(crate) fn settle_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(
        unsafe_code,
        reason = "mallopt(3) only sets one of the allocator's parameters; it touches no memory of \
                  ours and is called before any other thread exists"
    )]
    // SAFETY: see the reason above.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// Give the allocator's free memory back to the system (`malloc_trim(3)`): after a large
/// structure made of many small allocations was dropped (a server's listing that went past
/// its cap), which the allocator would otherwise keep as the daemon's resident memory.
/// Elsewhere than glibc, nothing to do.
pub(crate) fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(
        unsafe_code,
        reason = "malloc_trim(3) only returns free pages of the allocator's heaps to the system; \
                  it is safe to call from any thread at any time"
    )]
    // SAFETY: see the reason above.
    unsafe {
        libc::malloc_trim(0);
    }
}
