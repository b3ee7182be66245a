//! Small JSON files under `<store root>/config/`: written whole, atomically.
//!
//! Owns: the write-temp, fsync, rename, fsync-directory sequence. Must never: leave a torn
//! file where the old one was — a crash mid-write keeps the previous version.

use std::path::Path;

/// Replaces `path` with `contents` so that a crash leaves either the old or the new file.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_data()?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Reads `path` if it exists; a missing file is `Ok(None)`.
pub fn read_if_exists(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
