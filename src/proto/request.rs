//! The request protocol, both sides: one message each way on an `AF_UNIX`
//! `SOCK_SEQPACKET` connection.
//!
//! ```text
//! /run/agent-sandbox-exec/           0755 root (systemd RuntimeDirectory)
//! ├── ready                          daemon pid; exists only while it serves
//! ├── failure                        why the daemon last failed (until it serves)
//! └── socket                         0666 root: listening SOCK_SEQPACKET socket
//! ```
//! The launcher connects and sends one request; the daemon sends one reply
//! on the same connection and closes it. The requester's identity is what
//! the kernel recorded at connect(2) (`SO_PEERCRED`: the connecting
//! process's pid and uid), not anything the message says; see
//! [`crate::daemon`] for how that process is authenticated. Nothing is
//! written to the file system per request, so no user can make the daemon
//! keep a byte of /run.
//!
//! A request is `key=value` lines: `version=2`, `pid=<pid>` (which must be
//! the connecting process), `op=status` for a status question (see
//! [`StatusReply`]: nothing is moved, nothing is applied), the sockets to
//! allow (`socket=`, [`AllowedSocket`]) and the launcher's descriptors of
//! files and directories (`fd=`, [`Descriptor`]); unknown keys are
//! ignored. A reply is
//! `status=ok` or `status=refused`, optional `reason=<text>`, and any number
//! of `warning=<text>` and `notice=<text>` lines. Each is one packet: a
//! sequenced-packet socket delivers a message whole or not at all, so
//! there are no partial messages to wait for.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use nix::sys::socket::{self, AddressFamily, MsgFlags, SockFlag, SockType, UnixAddr};

use crate::lists::denylist::{Transport, parse_port};
use crate::lists::entries::{FileKey, KIND_OPEN};

/// Largest request accepted, in bytes: room for [`MAX_DESCRIPTORS`]
/// descriptor lines (at most 66 bytes each) and [`MAX_SOCKETS`] socket
/// lines with paths of a few hundred bytes.
pub const MAX_REQUEST_BYTES: usize = 8192;
/// Largest reply sent, in bytes: one packet, well below the default socket
/// send buffer (`net.core.wmem_default`, 208 KiB), so one send never blocks
/// on an empty buffer and never fails with EMSGSIZE.
pub const MAX_REPLY_BYTES: usize = 64 << 10;
/// Longest warning or notice line kept in a reply, in bytes.
pub const MAX_LINE_BYTES: usize = 2048;
/// Protocol version written by this launcher and understood by this daemon
/// (1 was the file protocol of 0.5.0).
pub const VERSION: u32 = 2;

/// Errors of parsing protocol messages and of the socket calls.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A system call failed.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        cause: io::Error,
    },
    /// The message is larger than allowed.
    #[error("a message of {size} bytes, more than the {max} allowed")]
    TooLarge {
        /// The message's length.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The content does not follow the protocol.
    #[error("malformed: {0}")]
    Malformed(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(nix::errno::Errno) -> RequestError {
    let what = what.into();
    move |e| RequestError::Io {
        what,
        cause: io::Error::from(e),
    }
}

/// Most `socket=` lines one request may carry.
pub const MAX_SOCKETS: usize = 8;

/// A bound Unix socket the launcher asks its sandbox to be allowed to reach
/// (a `socket` line of the user's lists, resolved by the launcher with its
/// own environment and credentials). Only a launch from outside every
/// sandbox makes the daemon apply it. Sent as `socket=<dev>:<ino>:<subvol>:<path>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedSocket {
    /// The key of the socket file's inode, as the socket hooks read it.
    pub key: FileKey,
    /// Where the launcher found it (for messages; UTF-8, no newline).
    pub path: String,
}

impl AllowedSocket {
    fn encode(&self) -> String {
        format!(
            "socket={}:{}:{}:{}\n",
            self.key.dev, self.key.ino, self.key.subvol, self.path
        )
    }

    fn parse(value: &str) -> Option<AllowedSocket> {
        let mut parts = value.splitn(4, ':');
        let dev = parts.next()?.parse().ok()?;
        let ino = parts.next()?.parse().ok()?;
        let subvol = parts.next()?.parse().ok()?;
        let path = parts.next()?.to_owned();
        Some(AllowedSocket {
            key: FileKey {
                dev,
                ino,
                subvol,
                kind: KIND_OPEN,
            },
            path,
        })
    }
}

/// Most `port=` lines one request may carry.
pub const MAX_PORTS: usize = 16;

/// A loopback port where the launcher asks its sandbox to be allowed to
/// reach the user's own server (a `socket tcp:PORT` or `socket udp:PORT`
/// line of the user's lists). Only a launch from outside every sandbox makes
/// the daemon apply it. Sent as `port=tcp:<port>` or `port=udp:<port>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AllowedPort {
    /// TCP (MPTCP too) or UDP.
    pub transport: Transport,
    /// The port, 1 to 65535.
    pub port: u16,
}

impl AllowedPort {
    fn encode(&self) -> String {
        format!("port={}\n", self)
    }

    fn parse(value: &str) -> Option<AllowedPort> {
        let (name, digits) = value.split_once(':')?;
        Some(AllowedPort {
            transport: Transport::from_name(name.as_bytes())?,
            port: parse_port(digits.as_bytes())?,
        })
    }
}

impl std::fmt::Display for AllowedPort {
    /// `tcp:11434`, as list lines spell it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.transport.name(), self.port)
    }
}

/// Most `fd=` lines one request may carry: a launch that inherits more
/// descriptors of files and directories is refused by the launcher.
pub const MAX_DESCRIPTORS: usize = 64;

/// A descriptor of a regular file or directory that the launcher holds and
/// PROGRAM would inherit, with the key of its file
/// ([`crate::resolve::keys::descriptor_keys`]). The daemon refuses the launch if its
/// sandbox denies that key ([`crate::policy::rules::denied_descriptor`]). Sent as
/// `fd=<fd>:<dev>:<ino>:<subvol>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// The descriptor number in the launcher.
    pub fd: i32,
    /// Its file's key, kind [`KIND_OPEN`].
    pub key: FileKey,
}

impl Descriptor {
    fn encode(&self) -> String {
        format!(
            "fd={}:{}:{}:{}\n",
            self.fd, self.key.dev, self.key.ino, self.key.subvol
        )
    }

    fn parse(value: &str) -> Option<Descriptor> {
        let mut parts = value.split(':');
        let fd = parts.next()?.parse().ok().filter(|fd: &i32| *fd >= 0)?;
        let dev = parts.next()?.parse().ok()?;
        let ino = parts.next()?.parse().ok()?;
        let subvol = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(Descriptor {
            fd,
            key: FileKey {
                dev,
                ino,
                subvol,
                kind: KIND_OPEN,
            },
        })
    }
}

/// A parsed request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// The process to move into the sandbox: the launcher itself, which
    /// must be the process that connected.
    pub pid: i32,
    /// `op=status`: the requester asks what is enforced for its uid
    /// ([`StatusReply`]) and is not moved anywhere.
    pub status: bool,
    /// `op=denials` with `after=<n>`: the requester asks for its uid's
    /// refusals numbered above n ([`DenialsReply`]) and is not moved anywhere.
    pub denials_after: Option<u64>,
    /// Sockets to allow, at most [`MAX_SOCKETS`].
    pub sockets: Vec<AllowedSocket>,
    /// Loopback ports to allow, at most [`MAX_PORTS`].
    pub ports: Vec<AllowedPort>,
    /// The launcher's descriptors of files and directories, at most
    /// [`MAX_DESCRIPTORS`].
    pub descriptors: Vec<Descriptor>,
}

impl Request {
    /// The message for this request.
    pub fn encode(&self) -> String {
        let mut m = format!("version={VERSION}\npid={}\n", self.pid);
        if self.status {
            m.push_str("op=status\n");
        }
        if let Some(after) = self.denials_after {
            m.push_str(&format!("op=denials\nafter={after}\n"));
        }
        for s in &self.sockets {
            m.push_str(&s.encode());
        }
        for p in &self.ports {
            m.push_str(&p.encode());
        }
        for d in &self.descriptors {
            m.push_str(&d.encode());
        }
        m
    }

    /// Parses a request message. Unknown keys are ignored; `version` must be
    /// [`VERSION`]; `pid` must be a positive decimal; each `socket` line
    /// `<dev>:<ino>:<subvol>:<path>` in decimal, at most [`MAX_SOCKETS`];
    /// each `port` line `tcp:<port>` or `udp:<port>`, at most [`MAX_PORTS`];
    /// each `fd` line `<fd>:<dev>:<ino>:<subvol>` in decimal, at most
    /// [`MAX_DESCRIPTORS`].
    ///
    /// # Errors
    /// [`RequestError::Malformed`] naming the problem.
    pub fn parse(content: &[u8]) -> Result<Request, RequestError> {
        if content.is_empty() {
            return Err(RequestError::Malformed("an empty message".into()));
        }
        let text = std::str::from_utf8(content)
            .map_err(|_| RequestError::Malformed("not UTF-8".into()))?;
        let mut version = None;
        let mut pid = None;
        let mut status = false;
        let mut denials = false;
        let mut after = None;
        let mut sockets = Vec::new();
        let mut ports = Vec::new();
        let mut descriptors = Vec::new();
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                return Err(RequestError::Malformed(format!(
                    "line without '=': {:?}",
                    shorten(line)
                )));
            };
            match key {
                "version" => version = Some(value),
                "pid" => pid = Some(value),
                "op" if value == "status" => status = true,
                "op" if value == "denials" => denials = true,
                "after" => {
                    after = Some(value.parse::<u64>().map_err(|_| {
                        RequestError::Malformed(format!("bad after {:?}", shorten(value)))
                    })?);
                }
                "op" => {
                    return Err(RequestError::Malformed(format!(
                        "unknown op {:?}",
                        shorten(value)
                    )));
                }
                "socket" => push_bounded(
                    &mut sockets,
                    AllowedSocket::parse(value),
                    MAX_SOCKETS,
                    "socket",
                    value,
                )?,
                "port" => push_bounded(
                    &mut ports,
                    AllowedPort::parse(value),
                    MAX_PORTS,
                    "port",
                    value,
                )?,
                "fd" => push_bounded(
                    &mut descriptors,
                    Descriptor::parse(value),
                    MAX_DESCRIPTORS,
                    "fd",
                    value,
                )?,
                _ => {}
            }
        }
        match version {
            Some(v) if v == VERSION.to_string() => {}
            Some(v) => {
                return Err(RequestError::Malformed(format!(
                    "protocol version {:?}, this daemon speaks {VERSION}",
                    shorten(v)
                )));
            }
            None => return Err(RequestError::Malformed("no version".into())),
        }
        let pid = pid.ok_or_else(|| RequestError::Malformed("no pid".into()))?;
        match pid.parse::<i32>() {
            Ok(p) if p > 0 && !pid.starts_with('+') => Ok(Request {
                pid: p,
                status,
                denials_after: denials.then(|| after.unwrap_or(0)),
                sockets,
                ports,
                descriptors,
            }),
            _ => Err(RequestError::Malformed(format!(
                "bad pid {:?}",
                shorten(pid)
            ))),
        }
    }
}

/// At most 40 characters of a user's text, for an error message.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// The daemon's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// None: the requester is in its sandbox; Some(reason): refused.
    pub refusal: Option<String>,
    /// Problems with the requester's own list, one line each.
    pub warnings: Vec<String>,
    /// Other things the user should know, not tied to a list line.
    pub notices: Vec<String>,
}

/// Replaces control characters so a text stays on one protocol line, and
/// cuts it to [`MAX_LINE_BYTES`] (at a character boundary, marked `…`).
pub fn one_line(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if out.len() + c.len_utf8() > MAX_LINE_BYTES {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { '?' } else { c });
    }
    out
}

impl Reply {
    /// A refusal with no warnings.
    pub fn refused(why: impl Into<String>) -> Reply {
        Reply {
            refusal: Some(why.into()),
            warnings: vec![],
            notices: vec![],
        }
    }

    /// The message for this reply, at most [`MAX_REPLY_BYTES`]: the status
    /// and reason always, then the notices and warnings that fit, and a
    /// notice counting the lines left out, if any.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        match &self.refusal {
            None => out.push_str("status=ok\n"),
            Some(reason) => {
                out.push_str("status=refused\n");
                out.push_str(&format!("reason={}\n", one_line(reason)));
            }
        }
        // Room kept for the notice about lines left out.
        let budget = MAX_REPLY_BYTES - 100;
        let mut left_out = 0;
        let lines = self
            .notices
            .iter()
            .map(|n| ("notice", n))
            .chain(self.warnings.iter().map(|w| ("warning", w)));
        for (key, text) in lines {
            let line = format!("{key}={}\n", one_line(text));
            if out.len() + line.len() > budget {
                left_out += 1;
            } else {
                out.push_str(&line);
            }
        }
        if left_out > 0 {
            out.push_str(&format!(
                "notice={left_out} more lines of this answer are not shown (it is limited to {} KiB)\n",
                MAX_REPLY_BYTES >> 10
            ));
        }
        out
    }

    /// Parses a reply message.
    ///
    /// # Errors
    /// [`RequestError::Malformed`] when there is no valid status line.
    pub fn parse(content: &[u8]) -> Result<Reply, RequestError> {
        let text = String::from_utf8_lossy(content);
        let mut status = None;
        let mut reason = None;
        let mut warnings = Vec::new();
        let mut notices = Vec::new();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("status", v)) => status = Some(v.to_owned()),
                Some(("reason", v)) => reason = Some(v.to_owned()),
                Some(("warning", v)) => warnings.push(v.to_owned()),
                Some(("notice", v)) => notices.push(v.to_owned()),
                _ => {}
            }
        }
        let refusal = match status.as_deref() {
            Some("ok") => None,
            Some("refused") => Some(reason.unwrap_or_else(|| "no reason given".into())),
            other => return Err(RequestError::Malformed(format!("reply status {other:?}"))),
        };
        Ok(Reply {
            refusal,
            warnings,
            notices,
        })
    }
}

/// Adds `parsed` (the `key=value` line's value, parsed) to `list`, which
/// may hold at most `max`.
///
/// # Errors
/// [`RequestError::Malformed`] for a value that did not parse or a line
/// past the bound.
fn push_bounded<T>(
    list: &mut Vec<T>,
    parsed: Option<T>,
    max: usize,
    key: &str,
    value: &str,
) -> Result<(), RequestError> {
    let item = parsed
        .ok_or_else(|| RequestError::Malformed(format!("bad {key} line {:?}", shorten(value))))?;
    if list.len() == max {
        return Err(RequestError::Malformed(format!(
            "more than {max} {key} lines"
        )));
    }
    list.push(item);
    Ok(())
}

/// The daemon's answer to `op=status`: what the requester's uid's sandbox
/// holds now. Encoded as `status=ok`, `sandbox=yes|no` (its cgroup exists),
/// `files=<n>` (files whose open is denied), `names=<n>` (listed names
/// watched) and `marks=<n>` (directories and symlinks on the way), then the
/// warnings of its last apply as `warning=` lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusReply {
    /// The uid's sandbox cgroup exists.
    pub sandbox: bool,
    /// deny_map entries of kind open for the sandbox.
    pub files: usize,
    /// name_map entries for the sandbox.
    pub names: usize,
    /// deny_map marks (path, listed-directory and folding-directory kinds).
    pub marks: usize,
    /// The warnings about the uid's own list at its last apply.
    pub warnings: Vec<String>,
    /// The optional parts of the BPF programs the daemon loaded without, one
    /// line each ([`crate::kernel::variant::Variant::describe`]); encoded as
    /// `without=` lines.
    pub without: Vec<String>,
}

impl StatusReply {
    /// The message for this answer (at most [`MAX_REPLY_BYTES`]; warnings
    /// that do not fit are left out).
    pub fn encode(&self) -> String {
        let mut out = format!(
            "status=ok\nsandbox={}\nfiles={}\nnames={}\nmarks={}\n",
            if self.sandbox { "yes" } else { "no" },
            self.files,
            self.names,
            self.marks
        );
        let lines = self
            .without
            .iter()
            .map(|w| ("without", w))
            .chain(self.warnings.iter().map(|w| ("warning", w)));
        for (key, w) in lines {
            let line = format!("{key}={}\n", one_line(w));
            if out.len() + line.len() > MAX_REPLY_BYTES - 100 {
                break;
            }
            out.push_str(&line);
        }
        out
    }

    /// Parses an answer to `op=status`.
    ///
    /// # Errors
    /// [`RequestError::Malformed`] without `status=ok` and the counts (a
    /// refusal's reason is the error's text).
    pub fn parse(content: &[u8]) -> Result<StatusReply, RequestError> {
        let text = String::from_utf8_lossy(content);
        let mut r = StatusReply::default();
        let (mut ok, mut counts, mut reason) = (false, 0, None);
        for line in text.lines() {
            let num = |v: &str| {
                v.parse::<usize>()
                    .map_err(|_| RequestError::Malformed(format!("bad count {v:?}")))
            };
            match line.split_once('=') {
                Some(("status", v)) => ok = v == "ok",
                Some(("reason", v)) => reason = Some(v.to_owned()),
                Some(("sandbox", v)) => r.sandbox = v == "yes",
                Some(("files", v)) => (r.files, counts) = (num(v)?, counts + 1),
                Some(("names", v)) => (r.names, counts) = (num(v)?, counts + 1),
                Some(("marks", v)) => (r.marks, counts) = (num(v)?, counts + 1),
                Some(("warning", v)) => r.warnings.push(v.to_owned()),
                Some(("without", v)) => r.without.push(v.to_owned()),
                _ => {}
            }
        }
        if !ok {
            return Err(RequestError::Malformed(
                reason.unwrap_or_else(|| "no status=ok in the answer".into()),
            ));
        }
        if counts != 3 {
            return Err(RequestError::Malformed(
                "an answer without the counts (a daemon older than this launcher?)".into(),
            ));
        }
        Ok(r)
    }
}

/// The daemon's answer to `op=denials`: the requester's uid's recent
/// refusals, oldest first, as one line of JSON each
/// ([`crate::policy::denials::to_json`]); `status=ok`, `next=<n>` (the
/// number to ask after next time), `lost=<n>` (records the kernel lost to a
/// full ring buffer, all uids, since its map was made), `more=1` when the
/// rest did not fit ([`MAX_REPLY_BYTES`]), then `denial=<json>` lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DenialsReply {
    /// The number of the last record sent (0: none).
    pub next: u64,
    /// Records the kernel lost (all uids).
    pub lost: u64,
    /// More records wait: ask again after `next`.
    pub more: bool,
    /// The records, one JSON object each.
    pub records: Vec<String>,
    bytes: usize,
}

impl DenialsReply {
    /// Room kept for the header lines (`status`, `next`, `lost`, `more`).
    const HEADER_ROOM: usize = 256;
    /// A record's bytes beside its JSON: `denial=` and the newline.
    const RECORD_OVERHEAD: usize = "denial=\n".len();

    /// Adds record `json` (one JSON object: serde_json escapes every
    /// control character, so it holds no newline) numbered `seq`; false
    /// (and nothing added) when it would not fit one reply. A record is
    /// never cut: cut JSON would not parse, and the record would vanish
    /// from `--denials` (its fields are bounded where it is made,
    /// [`crate::policy::denials::to_json`]).
    pub fn push(&mut self, json: String, seq: u64) -> bool {
        let json = if json.contains('\n') {
            json.replace('\n', "\\n")
        } else {
            json
        };
        let size = json.len() + Self::RECORD_OVERHEAD;
        if self.bytes + size > MAX_REPLY_BYTES - Self::HEADER_ROOM {
            return false;
        }
        self.bytes += size;
        self.records.push(json);
        self.next = seq;
        true
    }

    /// The message for this answer.
    pub fn encode(&self) -> String {
        let mut m = format!(
            "status=ok\nnext={}\nlost={}\nmore={}\n",
            self.next,
            self.lost,
            u8::from(self.more)
        );
        for r in &self.records {
            m.push_str("denial=");
            m.push_str(r);
            m.push('\n');
        }
        m
    }

    /// Parses an answer to `op=denials`.
    ///
    /// # Errors
    /// [`RequestError::Malformed`] for a refusal (with its reason) or a
    /// message without `status=ok` and `next`.
    pub fn parse(content: &[u8]) -> Result<DenialsReply, RequestError> {
        let text = std::str::from_utf8(content)
            .map_err(|_| RequestError::Malformed("not UTF-8".into()))?;
        let mut r = DenialsReply::default();
        let (mut ok, mut next) = (false, false);
        let mut reason = None;
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            let num = || {
                v.parse::<u64>()
                    .map_err(|_| RequestError::Malformed(format!("bad {k} {:?}", shorten(v))))
            };
            match k {
                "status" => ok = v == "ok",
                "reason" => reason = Some(v.to_owned()),
                "next" => {
                    r.next = num()?;
                    next = true;
                }
                "lost" => r.lost = num()?,
                "more" => r.more = v == "1",
                "denial" => r.records.push(v.to_owned()),
                _ => {}
            }
        }
        if !ok {
            return Err(RequestError::Malformed(
                reason.unwrap_or_else(|| "no status=ok".into()),
            ));
        }
        if !next {
            return Err(RequestError::Malformed("no next".into()));
        }
        Ok(r)
    }
}

/// What one receive of a packet found.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// A whole message of at most the allowed size.
    Message(Vec<u8>),
    /// A message of this many bytes, more than allowed; it was discarded.
    TooLarge(usize),
    /// Nothing yet (EAGAIN on a non-blocking receive).
    Nothing,
    /// The peer closed the connection, or sent an empty message (a
    /// sequenced-packet receive returns 0 for both).
    Closed,
}

/// Receives one packet of at most `max` bytes from `fd` without blocking.
/// A larger packet is consumed and reported as [`Received::TooLarge`]
/// (`MSG_TRUNC` makes the receive return its real length, socket(7) and
/// unix(7)); at most `max + 1` bytes are ever copied.
///
/// # Errors
/// The recv(2) error other than EAGAIN/EINTR.
pub fn recv_packet(fd: BorrowedFd<'_>, max: usize) -> Result<Received, RequestError> {
    let mut buf = vec![0u8; max + 1];
    loop {
        match socket::recv(
            fd.as_raw_fd(),
            &mut buf,
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_TRUNC,
        ) {
            Ok(0) => return Ok(Received::Closed),
            Ok(n) if n > max => return Ok(Received::TooLarge(n)),
            Ok(n) => {
                buf.truncate(n);
                return Ok(Received::Message(buf));
            }
            Err(nix::errno::Errno::EAGAIN) => return Ok(Received::Nothing),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(io_err("receive")(e)),
        }
    }
}

/// Sends one packet without blocking and without SIGPIPE.
///
/// # Errors
/// The send(2) error (EPIPE: the peer is gone; EAGAIN: its buffer is full).
pub fn send_packet(fd: BorrowedFd<'_>, bytes: &[u8]) -> Result<(), RequestError> {
    let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    loop {
        match socket::send(fd.as_raw_fd(), bytes, flags) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(io_err("send")(e)),
        }
    }
}

/// The credentials the kernel recorded for the peer of a connected socket
/// (`SO_PEERCRED`, unix(7)): for an accepted connection, those of the
/// process that called connect(2), at that time; for the launcher's
/// connection, those of the process that called listen(2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Its pid (in the daemon's pid namespace).
    pub pid: i32,
    /// Its effective uid.
    pub uid: u32,
}

/// `SO_PEERCRED` of `fd`.
///
/// # Errors
/// The getsockopt(2) error.
pub fn peer_of(fd: BorrowedFd<'_>) -> Result<Peer, RequestError> {
    let cred = socket::getsockopt(&fd, socket::sockopt::PeerCredentials)
        .map_err(io_err("getsockopt SO_PEERCRED"))?;
    Ok(Peer {
        pid: cred.pid(),
        uid: cred.uid(),
    })
}

fn seqpacket(flags: SockFlag) -> Result<OwnedFd, RequestError> {
    socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        flags | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io_err("socket(AF_UNIX, SOCK_SEQPACKET)"))
}

/// Binds a non-blocking listening socket at `path` with this `backlog`
/// (replacing a socket left there by an earlier daemon) and makes it mode
/// 0666, so any user may connect. The caller must own the directory.
///
/// # Errors
/// The first failing call.
pub fn listen_at(path: &Path, backlog: i32) -> Result<OwnedFd, RequestError> {
    let shown = path.display();
    let fd = seqpacket(SockFlag::SOCK_NONBLOCK)?;
    match std::fs::symlink_metadata(path) {
        Ok(_) => std::fs::remove_file(path).map_err(|cause| RequestError::Io {
            what: format!("remove the old {shown}"),
            cause,
        })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(cause) => {
            return Err(RequestError::Io {
                what: format!("stat {shown}"),
                cause,
            });
        }
    }
    let addr = UnixAddr::new(path).map_err(io_err(format!("address {shown}")))?;
    socket::bind(fd.as_raw_fd(), &addr).map_err(io_err(format!("bind {shown}")))?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666)).map_err(
        |cause| RequestError::Io {
            what: format!("chmod {shown}"),
            cause,
        },
    )?;
    let backlog = socket::Backlog::new(backlog).map_err(io_err("listen backlog"))?;
    socket::listen(&fd, backlog).map_err(io_err(format!("listen on {shown}")))?;
    Ok(fd)
}

/// Accepts one pending connection without blocking: Ok(None) when there is
/// none. The new socket is non-blocking and close-on-exec (a resolver the
/// daemon starts later inherits none).
///
/// # Errors
/// The accept4(2) error other than EAGAIN, EINTR and ECONNABORTED.
pub fn accept(listener: BorrowedFd<'_>) -> Result<Option<OwnedFd>, RequestError> {
    loop {
        match socket::accept4(listener, SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC) {
            Ok(fd) => return Ok(Some(fd)),
            Err(nix::errno::Errno::EAGAIN) => return Ok(None),
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::ECONNABORTED) => continue,
            Err(e) => return Err(io_err("accept")(e)),
        }
    }
}

/// Connects to the daemon's socket at `path`, waiting at most `timeout`
/// for room in its listen queue (the wait of a blocking connect(2) on a
/// Unix socket is bounded by `SO_SNDTIMEO`, unix(7)); the socket stays
/// blocking, with that send timeout.
///
/// # Errors
/// The failing call (ENOENT/ECONNREFUSED: no daemon listens; EAGAIN: the
/// queue stayed full for `timeout`).
pub fn connect_to(path: &Path, timeout: Duration) -> Result<OwnedFd, RequestError> {
    let shown = path.display();
    let fd = seqpacket(SockFlag::empty())?;
    let tv = nix::sys::time::TimeVal::new(
        timeout.as_secs() as libc::time_t,
        timeout.subsec_micros() as libc::suseconds_t,
    );
    socket::setsockopt(&fd, socket::sockopt::SendTimeout, &tv)
        .map_err(io_err("setsockopt SO_SNDTIMEO"))?;
    let addr = UnixAddr::new(path).map_err(io_err(format!("address {shown}")))?;
    loop {
        match socket::connect(fd.as_fd().as_raw_fd(), &addr) {
            Ok(()) => return Ok(fd),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(io_err(format!("connect to {shown}"))(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_question_and_answer() {
        let q = Request {
            pid: 77,
            denials_after: Some(41),
            ..Default::default()
        };
        assert_eq!(q.encode(), "version=2\npid=77\nop=denials\nafter=41\n");
        assert_eq!(Request::parse(q.encode().as_bytes()).unwrap(), q);
        let first = Request::parse(b"version=2\npid=77\nop=denials\n").unwrap();
        assert_eq!(first.denials_after, Some(0), "no after: from the start");
        assert!(Request::parse(b"version=2\npid=77\nop=denials\nafter=-1\n").is_err());
        let mut a = DenialsReply {
            lost: 3,
            ..Default::default()
        };
        assert!(a.push("{\"seq\":5}".into(), 5));
        assert!(a.push("{\"seq\":9}".into(), 9));
        let back = DenialsReply::parse(a.encode().as_bytes()).unwrap();
        assert_eq!((back.next, back.lost, back.more), (9, 3, false));
        assert_eq!(back.records, ["{\"seq\":5}", "{\"seq\":9}"]);
        // A reply never outgrows one packet: the records that do not fit wait.
        let mut full = DenialsReply::default();
        let big = "x".repeat(1000);
        let n = (1..).take_while(|i| full.push(big.clone(), *i)).count();
        assert!(n > 10 && full.encode().len() <= MAX_REPLY_BYTES, "{n}");
        assert_eq!(full.next, n as u64);
        // A record longer than a protocol line is sent whole (cut JSON would not parse).
        let mut long = DenialsReply::default();
        let json = serde_json::json!({ "path": "/x".repeat(3000) + "\u{1b}" }).to_string();
        assert!(long.push(json.clone(), 1));
        let back = DenialsReply::parse(long.encode().as_bytes()).unwrap();
        assert_eq!(back.records, std::slice::from_ref(&json));
        let v: serde_json::Value = serde_json::from_str(&back.records[0]).unwrap();
        assert_eq!(v["path"].as_str().unwrap().len(), 6001);
        let refused = DenialsReply::parse(b"status=refused\nreason=bad request\n").unwrap_err();
        assert!(refused.to_string().contains("bad request"));
        assert!(DenialsReply::parse(b"status=ok\n").is_err(), "no next");
    }

    #[test]
    fn status_reply_round_trip() {
        let r = StatusReply {
            sandbox: true,
            files: 3,
            names: 4,
            marks: 9,
            warnings: vec!["a:1: w".into()],
            without: vec!["walk-memos (left out): slower".into()],
        };
        assert_eq!(StatusReply::parse(r.encode().as_bytes()).unwrap(), r);
        // A refusal's reason, and a launch reply without counts, are errors.
        let e = StatusReply::parse(b"status=refused\nreason=nope\n").unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        let e = StatusReply::parse(b"status=ok\n").unwrap_err();
        assert!(e.to_string().contains("without the counts"), "{e}");
        assert!(StatusReply::parse(b"status=ok\nfiles=x\nnames=1\nmarks=1\n").is_err());
    }

    #[test]
    fn request_sockets_round_trip_and_limits() {
        let sock = |ino: u64, path: &str| AllowedSocket {
            key: FileKey {
                dev: 23,
                ino,
                subvol: 0,
                kind: KIND_OPEN,
            },
            path: path.into(),
        };
        let r = Request {
            pid: 9,
            sockets: vec![sock(5, "/tmp/ssh-x/agent.1"), sock(6, "/odd:name")],
            ..Default::default()
        };
        assert_eq!(Request::parse(r.encode().as_bytes()).unwrap(), r);
        for bad in ["socket=1:2\n", "socket=a:2:0:/x\n", "socket=1:2:0\n"] {
            let msg = format!("version=2\npid=3\n{bad}");
            assert!(
                matches!(
                    Request::parse(msg.as_bytes()),
                    Err(RequestError::Malformed(_))
                ),
                "{bad}"
            );
        }
        let too_many = Request {
            pid: 9,
            sockets: (0..=MAX_SOCKETS as u64).map(|i| sock(i, "/s")).collect(),
            ..Default::default()
        };
        assert!(Request::parse(too_many.encode().as_bytes()).is_err());
    }

    #[test]
    fn request_ports_round_trip_and_limits() {
        let port = |transport, port| AllowedPort { transport, port };
        let r = Request {
            pid: 9,
            ports: vec![port(Transport::Tcp, 11434), port(Transport::Udp, 53)],
            ..Default::default()
        };
        assert!(r.encode().contains("port=tcp:11434\nport=udp:53\n"));
        assert_eq!(Request::parse(r.encode().as_bytes()).unwrap(), r);
        for bad in [
            "port=tcp\n",
            "port=sctp:1\n",
            "port=tcp:0\n",
            "port=udp:70000\n",
        ] {
            let msg = format!("version={VERSION}\npid=3\n{bad}");
            assert!(
                matches!(
                    Request::parse(msg.as_bytes()),
                    Err(RequestError::Malformed(_))
                ),
                "{bad}"
            );
        }
        let too_many = Request {
            pid: 9,
            ports: (1..=MAX_PORTS as u16 + 1)
                .map(|p| port(Transport::Tcp, p))
                .collect(),
            ..Default::default()
        };
        assert!(Request::parse(too_many.encode().as_bytes()).is_err());
    }

    #[test]
    fn request_descriptors_round_trip_and_limits() {
        let d = |fd: i32, ino: u64| Descriptor {
            fd,
            key: FileKey {
                dev: 8 << 20 | 1,
                ino,
                subvol: 256,
                kind: KIND_OPEN,
            },
        };
        let r = Request {
            pid: 9,
            descriptors: vec![d(0, 12), d(3, u64::MAX)],
            ..Default::default()
        };
        assert!(
            r.encode()
                .contains("fd=3:8388609:18446744073709551615:256\n")
        );
        assert_eq!(Request::parse(r.encode().as_bytes()).unwrap(), r);
        for bad in [
            "fd=3:1:2\n",
            "fd=-1:1:2:0\n",
            "fd=3:1:2:0:9\n",
            "fd=x:1:2:0\n",
        ] {
            let msg = format!("version=2\npid=3\n{bad}");
            assert!(
                matches!(
                    Request::parse(msg.as_bytes()),
                    Err(RequestError::Malformed(_))
                ),
                "{bad}"
            );
        }
        // The largest request a launcher sends fits the daemon's limit.
        let longest = "/".repeat(120);
        let full = Request {
            pid: i32::MAX,
            sockets: (0..MAX_SOCKETS as u64)
                .map(|i| AllowedSocket {
                    key: FileKey {
                        dev: u32::MAX,
                        ino: u64::MAX - i,
                        subvol: u64::MAX,
                        kind: KIND_OPEN,
                    },
                    path: longest.clone(),
                })
                .collect(),
            descriptors: (0..MAX_DESCRIPTORS as i32)
                .map(|i| Descriptor {
                    fd: i32::MAX - i,
                    key: FileKey {
                        dev: u32::MAX,
                        ino: u64::MAX,
                        subvol: u64::MAX,
                        kind: KIND_OPEN,
                    },
                })
                .collect(),
            ..Default::default()
        };
        assert!(
            full.encode().len() <= MAX_REQUEST_BYTES,
            "{}",
            full.encode().len()
        );
        assert_eq!(Request::parse(full.encode().as_bytes()).unwrap(), full);
        let mut too_many = full;
        too_many.descriptors.push(d(1, 1));
        assert!(Request::parse(too_many.encode().as_bytes()).is_err());
    }

    #[test]
    fn request_round_trip_and_rejections() {
        let r = Request {
            pid: 4242,
            ..Default::default()
        };
        assert_eq!(Request::parse(r.encode().as_bytes()).unwrap(), r);
        let s = Request {
            pid: 4242,
            status: true,
            ..Default::default()
        };
        assert_eq!(s.encode(), "version=2\npid=4242\nop=status\n");
        assert_eq!(Request::parse(s.encode().as_bytes()).unwrap(), s);
        assert_eq!(
            Request::parse(b"future=1\nversion=2\npid=7\n").unwrap(),
            Request {
                pid: 7,
                ..Default::default()
            }
        );
        for bad in [
            &b""[..],
            b"pid=7\n",
            b"version=1\npid=7\n",
            b"version=3\npid=7\n",
            b"version=2\n",
            b"version=2\npid=-1\n",
            b"version=2\npid=0\n",
            b"version=2\npid=+5\n",
            b"version=2\npid=99999999999\n",
            b"version=2\ngarbage\npid=5\n",
            b"version=2\npid=\xff\n",
            b"version=2\npid=5\nop=launch-as-root\n",
            b"\xff\xfe garbage",
        ] {
            assert!(
                matches!(Request::parse(bad), Err(RequestError::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // A user's long text is cut in the error.
        let long = format!("version=2\n{}\n", "x".repeat(500));
        let e = Request::parse(long.as_bytes()).unwrap_err().to_string();
        assert!(e.len() < 120, "{e}");
    }

    #[test]
    fn reply_round_trip() {
        let ok = Reply {
            refusal: None,
            warnings: vec!["a:1: x".into(), "line\nbreak".into()],
            notices: vec!["2 files".into()],
        };
        let parsed = Reply::parse(ok.encode().as_bytes()).unwrap();
        assert_eq!(parsed.refusal, None);
        assert_eq!(
            parsed.warnings,
            vec!["a:1: x".to_string(), "line?break".to_string()]
        );
        assert_eq!(parsed.notices, vec!["2 files".to_string()]);
        let no = Reply {
            refusal: Some("map full".into()),
            warnings: vec![],
            notices: vec![],
        };
        assert_eq!(Reply::parse(no.encode().as_bytes()).unwrap(), no);
        assert!(Reply::parse(b"status=maybe\n").is_err());
        assert!(Reply::parse(b"").is_err());
    }

    #[test]
    fn reply_is_bounded() {
        let big = Reply {
            refusal: Some("r".repeat(10_000)),
            warnings: (0..500)
                .map(|i| format!("{i}: {}", "w".repeat(5000)))
                .collect(),
            notices: vec!["kept".into()],
        };
        let text = big.encode();
        assert!(text.len() <= MAX_REPLY_BYTES, "{}", text.len());
        let parsed = Reply::parse(text.as_bytes()).unwrap();
        assert!(parsed.refusal.unwrap().len() <= MAX_LINE_BYTES + 3);
        assert_eq!(parsed.notices[0], "kept");
        let shown = parsed.warnings.len();
        assert!(shown > 0 && shown < 500);
        assert!(
            parsed
                .notices
                .last()
                .unwrap()
                .starts_with(&format!("{} more lines", 500 - shown))
        );
        // Multi-byte characters are cut at a boundary.
        assert!(one_line(&"é".repeat(3000)).len() <= MAX_LINE_BYTES + 3);
    }

    #[test]
    fn packets_over_a_socket_pair() {
        let (a, b) = socket::socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        assert_eq!(recv_packet(b.as_fd(), 16).unwrap(), Received::Nothing);
        send_packet(a.as_fd(), b"hello").unwrap();
        send_packet(a.as_fd(), &[b'x'; 100]).unwrap();
        send_packet(a.as_fd(), b"after").unwrap();
        assert_eq!(
            recv_packet(b.as_fd(), 16).unwrap(),
            Received::Message(b"hello".to_vec())
        );
        // An oversized packet is reported with its length and consumed whole.
        assert_eq!(recv_packet(b.as_fd(), 16).unwrap(), Received::TooLarge(100));
        assert_eq!(
            recv_packet(b.as_fd(), 16).unwrap(),
            Received::Message(b"after".to_vec())
        );
        let me = peer_of(b.as_fd()).unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        assert_eq!(me.uid, nix::unistd::getuid().as_raw());
        drop(a);
        assert_eq!(recv_packet(b.as_fd(), 16).unwrap(), Received::Closed);
        assert!(send_packet(b.as_fd(), b"x").is_err());
    }

    #[test]
    fn listen_accept_connect() {
        let dir = std::env::temp_dir().join(format!("asx-sock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("socket");
        let path = path.as_path();
        // A file left at the path is replaced.
        std::fs::write(path, b"stale").unwrap();
        let l = listen_at(path, 4).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::symlink_metadata(path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o666);
        assert!(accept(l.as_fd()).unwrap().is_none());
        let c = connect_to(path, Duration::from_secs(1)).unwrap();
        let s = accept(l.as_fd()).unwrap().unwrap();
        assert_eq!(peer_of(s.as_fd()).unwrap().pid, std::process::id() as i32);
        assert_eq!(peer_of(c.as_fd()).unwrap().pid, std::process::id() as i32);
        send_packet(
            c.as_fd(),
            Request {
                pid: 1,
                ..Default::default()
            }
            .encode()
            .as_bytes(),
        )
        .unwrap();
        match recv_packet(s.as_fd(), MAX_REQUEST_BYTES).unwrap() {
            Received::Message(m) => assert_eq!(Request::parse(&m).unwrap().pid, 1),
            other => panic!("{other:?}"),
        }
        drop(l);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(connect_to(path, Duration::from_millis(100)).is_err());
    }
}
