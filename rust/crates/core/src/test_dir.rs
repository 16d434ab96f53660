//! Temporary directories for the crate's tests, removed when dropped. Written here rather than
//! taken from a crate: a test-only dependency changes the features its own dependencies are
//! built with, and the release build of the extension could then not be reused by `cargo test`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A new empty directory under the system's temporary directory, unique to this process and call.
pub fn tempdir() -> std::io::Result<TestDir> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let name = format!(
        "postwire-core-test-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let path = std::env::temp_dir().join(name);
    std::fs::create_dir(&path)?;
    Ok(TestDir { path })
}
