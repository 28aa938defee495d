//! Reading a list file safely: never blocking on a FIFO, never more than
//! [`MAX_LIST_BYTES`], from its start whoever else shares the open file.

use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Largest list file read, in bytes (16 MiB: about 200,000 typical paths).
pub const MAX_LIST_BYTES: u64 = 16 << 20;

/// Opens a list file: Ok(None) when it does not exist. Opened without
/// blocking (a FIFO cannot hang us); must be a regular file of at most
/// [`MAX_LIST_BYTES`]. A symlink as the list file itself is followed.
///
/// # Errors
/// The open or fstat error, or `InvalidInput` for another file type or size.
pub fn open_list(path: &Path) -> io::Result<Option<fs::File>> {
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let md = file.metadata()?;
    if !md.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if md.len() > MAX_LIST_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} bytes, more than the {MAX_LIST_BYTES} allowed", md.len()),
        ));
    }
    Ok(Some(file))
}

/// Reads a list file opened by [`open_list`] from its start, with pread(2):
/// the base list's open file is shared by two processes, so its offset is
/// not used.
pub fn read_all(file: &fs::File) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = Vec::with_capacity(file.metadata()?.len() as usize);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match file.read_at(&mut chunk, buf.len() as u64) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(buf);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() as u64 > MAX_LIST_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "grew past the size limit",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_file_limits() {
        let dir = std::env::temp_dir().join(format!("asx-rl-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert!(open_list(&dir.join("absent")).unwrap().is_none());
        fs::write(dir.join("l"), b"/a\n").unwrap();
        let l = open_list(&dir.join("l")).unwrap().unwrap();
        assert_eq!(read_all(&l).unwrap(), b"/a\n");
        assert!(open_list(&dir).is_err(), "a directory is not a list");
        let fifo = dir.join("fifo");
        let _ = fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(open_list(&fifo).is_err(), "a FIFO must not block or pass");
        fs::remove_dir_all(&dir).unwrap();
    }
}
