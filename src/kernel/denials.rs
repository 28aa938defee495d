//! The denial events' ring buffer (`denials` in src/bpf/maps.bpf.h) from
//! the daemon's side: a reader whose descriptor joins the poll loop
//! ([`DenialReader`]), the decoding of one record (`struct denial` in
//! src/bpf/agent_sandbox.h) into a [`Denial`], and the kernel's counters of
//! records lost and refusals rate-limited ([`Bpf::denial_stats`],
//! [`Bpf::denial_dropped`]).

use std::cell::RefCell;
use std::os::fd::{BorrowedFd, RawFd};
use std::rc::Rc;

use libbpf_rs::{MapCore, MapFlags};

use crate::kernel::error::BpfError;
use crate::kernel::programs::Bpf;
use crate::kernel::skel::types;
use crate::policy::denials::{Denial, Op};

/// `AGENT_SANDBOX_DENIAL_PATH` (agent_sandbox.h): the path ends at this offset.
const PATH_END: usize = types::agent_sandbox_denial_path::AGENT_SANDBOX_DENIAL_PATH.0 as usize;
/// `AGENT_SANDBOX_DENIAL_PATH_TRUNCATED`.
const PATH_TRUNCATED: u16 = 1;
/// `AGENT_SANDBOX_DENIAL_PATH_FS`.
const PATH_FS: u16 = 2;

/// Decodes one ring-buffer record.
///
/// # Errors
/// A record shorter than `struct denial` (one from another build of the
/// program), or a path offset past the path's end: the reason, in words.
pub fn decode(bytes: &[u8]) -> Result<Denial, String> {
    let size = std::mem::size_of::<types::denial>();
    if bytes.len() < size {
        return Err(format!(
            "a denial record of {} bytes, {size} expected",
            bytes.len()
        ));
    }
    // SAFETY: `bytes` holds at least size_of::<denial>() bytes (checked
    // above); `denial` is plain old data (integers and byte arrays, every
    // bit pattern valid), read unaligned.
    let raw: types::denial = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
    let off = usize::from(raw.path_off);
    if off > PATH_END {
        return Err(format!("a denial record with path offset {off}"));
    }
    let comm_len = raw
        .comm
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(raw.comm.len());
    let comm: Vec<u8> = raw.comm[..comm_len].iter().map(|&c| c as u8).collect();
    let path = (off < PATH_END).then(|| raw.path[off..PATH_END].iter().map(|&c| c as u8).collect());
    Ok(Denial {
        boot_ns: raw.boot_ns,
        cgid: raw.cgid,
        ino: raw.ino,
        dev: raw.dev,
        uid: raw.uid,
        pid: raw.pid,
        op: Op::from_code(raw.op),
        suppressed: raw.suppressed,
        comm: String::from_utf8_lossy(&comm).into_owned(),
        path,
        path_truncated: raw.flags & PATH_TRUNCATED != 0,
        path_fs_relative: raw.flags & PATH_FS != 0,
    })
}

/// The reader of the `denials` ring buffer: poll [`DenialReader::fd`],
/// then [`DenialReader::drain`].
pub struct DenialReader {
    ring: libbpf_rs::RingBuffer<'static>,
    queue: Rc<RefCell<Vec<Result<Denial, String>>>>,
}

impl DenialReader {
    /// The descriptor that polls readable when records wait (an epoll
    /// descriptor of libbpf's).
    pub fn fd(&self) -> BorrowedFd<'_> {
        let fd: RawFd = self.ring.epoll_fd();
        // SAFETY: the epoll descriptor belongs to `self.ring`, which
        // outlives the returned borrow (tied to `&self`).
        unsafe { BorrowedFd::borrow_raw(fd) }
    }

    /// Every record waiting, decoded (a record that does not decode is its
    /// reason, for the log).
    pub fn drain(&self) -> Vec<Result<Denial, String>> {
        if let Err(e) = self.ring.consume() {
            log::warn!("cannot read the denials ring buffer: {e}");
        }
        std::mem::take(&mut *self.queue.borrow_mut())
    }
}

impl Bpf {
    /// A reader of the `denials` ring buffer.
    ///
    /// # Errors
    /// [`BpfError::Kernel`] if libbpf cannot map the ring.
    pub fn denial_reader(&self) -> Result<DenialReader, BpfError> {
        let queue: Rc<RefCell<Vec<Result<Denial, String>>>> = Rc::default();
        let sink = Rc::clone(&queue);
        let mut builder = libbpf_rs::RingBufferBuilder::new();
        builder
            .add(&self.maps.denials, move |bytes: &[u8]| {
                sink.borrow_mut().push(decode(bytes));
                0
            })
            .map_err(|cause| BpfError::Kernel {
                what: "add the denials ring buffer".into(),
                cause,
            })?;
        let ring = builder.build().map_err(|cause| BpfError::Kernel {
            what: "map the denials ring buffer".into(),
            cause,
        })?;
        Ok(DenialReader { ring, queue })
    }

    /// Per sandbox cgroup id: the refusals its rate limit dropped since the
    /// sandbox's first (`denial_dropped`), for the sandboxes with any.
    pub fn denial_dropped(&self) -> Vec<(u64, u64)> {
        let map = &self.maps.denial_dropped;
        map.keys()
            .filter_map(|k| {
                let v = map.lookup(&k, MapFlags::ANY).ok()??;
                Some((
                    u64::from_ne_bytes(k.get(..8)?.try_into().ok()?),
                    u64::from_ne_bytes(v.get(..8)?.try_into().ok()?),
                ))
            })
            .collect()
    }

    /// The kernel's counters since the map was made: (records lost because
    /// the ring was full, refusals its rate limit dropped); zeros if
    /// unreadable.
    pub fn denial_stats(&self) -> (u64, u64) {
        let read = |slot: u32| {
            self.maps
                .denial_stats
                .lookup(&slot.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|v| Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?)))
                .unwrap_or(0)
        };
        (read(0), read(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of(d: &types::denial) -> Vec<u8> {
        let size = std::mem::size_of::<types::denial>();
        // SAFETY: `d` is a plain struct of `size` bytes, read as bytes.
        unsafe { std::slice::from_raw_parts((d as *const types::denial).cast::<u8>(), size) }
            .to_vec()
    }

    #[test]
    fn decodes_what_the_program_writes() {
        assert_eq!(
            std::mem::size_of::<types::denial>(),
            1344,
            "agent_sandbox.h"
        );
        let mut d = types::denial {
            boot_ns: 5,
            cgid: 77,
            ino: 12,
            dev: 8 << 20 | 1,
            uid: 1000,
            pid: 4242,
            op: 1,
            suppressed: 3,
            flags: PATH_TRUNCATED,
            ..Default::default()
        };
        for (i, c) in b"cat".iter().enumerate() {
            d.comm[i] = *c as _;
        }
        let p = b"/home/u/.ssh/id";
        d.path_off = (PATH_END - p.len()) as u16;
        for (i, c) in p.iter().enumerate() {
            d.path[PATH_END - p.len() + i] = *c as _;
        }
        let got = decode(&bytes_of(&d)).unwrap();
        assert_eq!(got.op, Op::Open);
        assert_eq!(got.comm, "cat");
        assert_eq!(got.path.as_deref(), Some(&p[..]));
        assert!(got.path_truncated && !got.path_fs_relative);
        assert_eq!(
            (got.uid, got.pid, got.suppressed, got.cgid),
            (1000, 4242, 3, 77)
        );
        d.path_off = PATH_END as u16;
        assert_eq!(decode(&bytes_of(&d)).unwrap().path, None, "no path");
        d.path_off = PATH_END as u16 + 1;
        assert!(decode(&bytes_of(&d)).unwrap_err().contains("offset"));
        assert!(decode(&[0u8; 10]).unwrap_err().contains("10 bytes"));
    }
}
