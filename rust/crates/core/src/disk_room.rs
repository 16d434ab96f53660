//! Disk space for the spool's file, allocated before LMDB writes into it.
//!
//! LMDB (without a write map) writes dirty pages with `pwrite` at commit, so a full disk is an
//! `ENOSPC` from the commit, never a fault. [`DiskRoom`] keeps a reserve of blocks allocated
//! (`fallocate`) past the data's end: when the disk fills, a batch that enqueues is refused
//! before it is applied while the reserve stays for delivery's outcomes and acks — the same
//! split as the map's intake reserve, applied to the filesystem.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

extern "C" {
    // glibc's fallocate(2) wrapper; off_t is 64 bits on every target Postwire builds for.
    fn fallocate(fd: i32, mode: i32, offset: i64, len: i64) -> i32;
}

/// Whether an I/O error means the filesystem has no room left (or the user's quota is spent).
pub fn is_disk_full(err: &io::Error) -> bool {
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    matches!(err.raw_os_error(), Some(ENOSPC | EDQUOT))
}

/// Allocate `len` bytes of `file` from `offset` (the file grows to cover them). Blocks already
/// allocated stay as they are, so this is cheap over a range that needs nothing.
pub fn allocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    if len == 0 {
        return Ok(());
    }
    loop {
        // SAFETY: a plain syscall on a descriptor `file` keeps open.
        if unsafe { fallocate(file.as_raw_fd(), 0, offset, len) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The least the allocation grows by. Intake may use what lies past the reserve, so this is also
/// how much intake a disk that has just filled still takes: small.
pub const GROWTH_STEP: u64 = 1 << 20;

/// Blocks allocated past the end of the spool's data file, owned by the committer thread.
pub struct DiskRoom {
    file: File,
    /// Bytes of the file known to be allocated from its start (by this process; another process
    /// on the same spool allocates for its own commits, and a repeated allocation is a no-op).
    allocated: u64,
    /// Bytes kept allocated past the data's end for writes that are not intake.
    reserve: u64,
}

impl DiskRoom {
    pub fn open(data_file: &Path, reserve: u64) -> io::Result<DiskRoom> {
        let file = std::fs::OpenOptions::new().write(true).open(data_file)?;
        Ok(DiskRoom {
            file,
            allocated: 0,
            reserve,
        })
    }

    /// Make sure the file is allocated through `end` plus the reserve plus `adding`; errors
    /// (the disk is full) are the caller's to weigh. Grows by at least [`GROWTH_STEP`] at a time,
    /// so that commits seldom pay for a system call.
    pub fn ensure(&mut self, end: u64, adding: u64) -> io::Result<()> {
        let target = end.saturating_add(self.reserve).saturating_add(adding);
        if target <= self.allocated {
            return Ok(());
        }
        // The first call covers the whole file: a file written through a sparse write map may
        // hold holes below its end.
        let from = self.allocated;
        let generous = target.saturating_add(GROWTH_STEP);
        if allocate(&self.file, from, generous - from).is_err() {
            allocate(&self.file, from, target - from)?;
            self.allocated = target;
            return Ok(());
        }
        self.allocated = generous;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_grows_the_file_with_real_blocks() {
        use std::os::unix::fs::MetadataExt;
        let dir = crate::test_dir::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, b"x").unwrap();
        let mut room = DiskRoom::open(&path, 1 << 20).unwrap();
        room.ensure(4096, 0).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 4096 + (1 << 20) + GROWTH_STEP);
        assert!(meta.blocks() * 512 >= meta.len());
        assert_eq!(std::fs::read(&path).unwrap()[0], b'x');
        // Within what is allocated: nothing to do.
        room.ensure(8192, 1000).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), meta.len());
    }

    #[test]
    fn a_disk_full_error_is_recognised() {
        assert!(is_disk_full(&io::Error::from_raw_os_error(28)));
        assert!(!is_disk_full(&io::Error::from_raw_os_error(5)));
    }
}
