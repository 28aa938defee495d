//! In-process tests of how the modes fit together: the daemon's side of a
//! resolver ([`crate::daemon::pool`]) talking to the resolver's own loop
//! ([`crate::resolver`]) over a socket pair. Only tests live here; main.rs,
//! above every mode, declares it.

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::path::Path;

    use nix::unistd::Pid;

    use crate::daemon::pool::Worker;
    use crate::lists::entries::KIND_OPEN;
    use crate::proto::resolver::{Role, parse_output};
    use crate::resolve::list_file::{open_list, read_all};
    use crate::resolver::{receive, serve};

    #[test]
    fn request_carries_the_base_list() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let w = Worker {
            pid: Pid::from_raw(0),
            sock: ours,
        };
        let dir = std::env::temp_dir().join(format!("asx-rq-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("base"), b"/a\n").unwrap();
        let base = open_list(&dir.join("base")).unwrap().unwrap();
        w.send(Some(&base)).unwrap();
        w.send(None).unwrap();
        let got = receive(&theirs).unwrap().unwrap().unwrap().unwrap();
        assert_eq!(read_all(&got).unwrap(), b"/a\n");
        // Both processes read the shared open file from its start.
        assert_eq!(read_all(&got).unwrap(), b"/a\n");
        assert!(receive(&theirs).unwrap().unwrap().unwrap().is_none());
        // "B" without a descriptor is fatal, not "no base list".
        (&w.sock).write_all(b"B").unwrap();
        assert!(receive(&theirs).unwrap().unwrap().is_err());
        drop(w);
        assert!(receive(&theirs).unwrap().is_none(), "closed: serve ends");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Asks a base-list process in a thread of this test, as the daemon
    /// does, and returns its records.
    fn ask(w: &Worker, base: &fs::File) -> Vec<u8> {
        w.send(Some(base)).unwrap();
        let mut len = [0u8; 8];
        (&w.sock).read_exact(&mut len).unwrap();
        let mut out = vec![0u8; u64::from_ne_bytes(len) as usize];
        (&w.sock).read_exact(&mut out).unwrap();
        out
    }

    #[test]
    fn an_answer_is_reused_only_while_nothing_it_read_changed() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let w = Worker {
            pid: Pid::from_raw(0),
            sock: ours,
        };
        let daemon = nix::unistd::getppid();
        let server = std::thread::spawn(move || serve(Role::Base, &theirs, daemon));
        let dir = std::env::temp_dir().join(format!("asx-reuse-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("d")).unwrap();
        let secret = dir.join("d/secret");
        fs::write(&secret, b"x").unwrap();
        fs::write(dir.join("base"), format!("{}\n", secret.display())).unwrap();
        let base = open_list(&dir.join("base")).unwrap().unwrap();
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let file_key = |out: &[u8]| {
            let deny = parse_output(&[out]).deny;
            let open: Vec<_> = deny
                .files()
                .iter()
                .filter(|f| f.kind == KIND_OPEN)
                .collect();
            assert_eq!(open.len(), 1);
            open[0].ino
        };

        let first = ask(&w, &base);
        assert_eq!(file_key(&first), ino(&secret));
        assert_eq!(ask(&w, &base), first, "nothing changed");
        // The listed file's directory replaced: the new file is found.
        fs::rename(dir.join("d"), dir.join("d.old")).unwrap();
        fs::create_dir(dir.join("d")).unwrap();
        fs::write(&secret, b"y").unwrap();
        let second = ask(&w, &base);
        assert_eq!(file_key(&second), ino(&secret));
        assert_ne!(second, first);
        // The list changed: read again.
        fs::write(
            dir.join("base"),
            format!("{}\n", dir.join("d.old/secret").display()),
        )
        .unwrap();
        assert_eq!(file_key(&ask(&w, &base)), ino(&dir.join("d.old/secret")));
        drop(w);
        assert_eq!(server.join().unwrap(), 0);
        fs::remove_dir_all(&dir).unwrap();
    }
}
