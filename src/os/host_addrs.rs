//! The host's own IP addresses, and a route netlink socket that says when
//! they change (rtnetlink(7): the RTMGRP_IPV4_IFADDR and RTMGRP_IPV6_IFADDR
//! groups carry every RTM_NEWADDR and RTM_DELADDR of the network namespace).

use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::sys::socket::{
    self, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType,
};

/// An address as the `host_addrs` map keys it: IPv6, or IPv4 as the
/// IPv4-mapped IPv6 address `::ffff:a.b.c.d`; 16 bytes in network order.
pub fn addr_key(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// Every IPv4 and IPv6 address of every interface of this network
/// namespace, and every IPv4 subnet broadcast address (a UDP datagram sent
/// there loops back to this host's wildcard sockets) (getifaddrs(3)), as
/// [`addr_key`]s, sorted, each once.
///
/// # Errors
/// getifaddrs' errno.
pub fn host_addrs() -> io::Result<Vec<[u8; 16]>> {
    let key = |a: &nix::sys::socket::SockaddrStorage| {
        if let Some(v4) = a.as_sockaddr_in() {
            Some(addr_key(IpAddr::V4(v4.ip())))
        } else {
            a.as_sockaddr_in6().map(|v6| addr_key(IpAddr::V6(v6.ip())))
        }
    };
    let mut out: Vec<[u8; 16]> = nix::ifaddrs::getifaddrs()
        .map_err(io::Error::from)?
        .flat_map(|ifa| {
            [
                ifa.address.as_ref().and_then(key),
                ifa.broadcast.as_ref().and_then(key),
            ]
        })
        .flatten()
        .filter(|k| *k != Ipv6Addr::UNSPECIFIED.octets())
        .collect();
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// A non-blocking route netlink socket subscribed to address changes.
pub struct AddrWatch {
    fd: OwnedFd,
}

impl AddrWatch {
    /// Opens the socket and joins the IPv4 and IPv6 address groups.
    ///
    /// # Errors
    /// The errno of socket(2) or bind(2).
    pub fn open() -> io::Result<AddrWatch> {
        let fd = socket::socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            SockProtocol::NetlinkRoute,
        )
        .map_err(io::Error::from)?;
        let groups = (libc::RTMGRP_IPV4_IFADDR | libc::RTMGRP_IPV6_IFADDR) as u32;
        socket::bind(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &NetlinkAddr::new(0, groups),
        )
        .map_err(io::Error::from)?;
        Ok(AddrWatch { fd })
    }

    /// Reads every waiting message. Returns whether there was any, or
    /// whether some were lost (ENOBUFS): either way the addresses may have
    /// changed and should be read again.
    pub fn drain(&self) -> bool {
        let mut buf = [0u8; 8192];
        let mut changed = false;
        loop {
            match socket::recv(
                std::os::fd::AsRawFd::as_raw_fd(&self.fd),
                &mut buf,
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(0) => return changed,
                Ok(_) => changed = true,
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::ENOBUFS) => changed = true,
                Err(_) => return changed,
            }
        }
    }
}

impl AsFd for AddrWatch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn v4_keys_are_mapped() {
        let k = addr_key(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)));
        assert_eq!(k, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 2]);
        let k = addr_key(IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(k[15], 1);
        assert!(k[..15].iter().all(|&b| b == 0));
    }

    #[test]
    fn this_host_has_a_loopback_address() {
        let all = host_addrs().unwrap();
        assert!(
            all.contains(&addr_key(IpAddr::V4(Ipv4Addr::LOCALHOST))),
            "{all:?}"
        );
    }
}
