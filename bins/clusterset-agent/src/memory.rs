//! The process's memory: no transparent huge pages.
//!
//! The agent allocates through mimalloc, which reserves its heap in 1 GiB arenas and, unless
//! told otherwise, asks the kernel to back them with transparent huge pages (THP): with THP
//! on (`always`, or `madvise`, the usual default, as mimalloc advises its arenas), the first
//! touch of any 4 KiB page of a 2 MiB range makes all 2 MiB resident, however little of it is
//! in use. In the scale bench's 2,000 exports, huge pages were 54 of the east agent's 135 MiB
//! peak RSS, and without them the peak is 97 MiB (docs/benchmarks.md). The agent's heap is many
//! small objects spread over many pages: huge pages buy it nothing measurable, so they are off:
//! mimalloc is built with `no_thp` (it does not advise its arenas), and [`disable_thp`] turns
//! THP off for the whole process (which also covers a kernel set to `always`).

/// Turns transparent huge pages off for this process (`prctl(PR_SET_THP_DISABLE)`), as early
/// as possible in `main`: memory touched from then on is backed by 4 KiB pages. On other
/// systems than Linux it does nothing.
///
/// # Errors
///
/// When the kernel refuses the `prctl` (older than 3.15): the agent runs on with THP as the
/// kernel decides.
pub fn disable_thp() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    nix::sys::prctl::set_thp_disable(true).map_err(std::io::Error::from)?;
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn thp_is_off_for_the_process_after_disable_thp() {
        assert!(super::disable_thp().is_ok());
        assert_eq!(nix::sys::prctl::get_thp_disable(), Ok(true));
    }
}
