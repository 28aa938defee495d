//! The map the loopback programs (src/bpf/loopback.bpf.h) read to tell the
//! host's own addresses from remote ones: `host_addrs`.

use std::collections::HashSet;

use libbpf_rs::{MapCore, MapFlags};

use crate::kernel::error::{BpfError, lb};
use crate::kernel::programs::Bpf;
use crate::kernel::sandboxes::PRESENT;

impl Bpf {
    /// Makes `addrs` (16-byte `struct host_addr` keys: IPv6, or IPv4 as
    /// `::ffff:a.b.c.d`, network byte order; [`crate::os::host_addrs`]
    /// makes them) exactly the host addresses in `host_addrs`. Returns how
    /// many were added and removed.
    ///
    /// # Errors
    /// [`BpfError::Libbpf`] for the first failed update or delete.
    pub fn set_host_addrs(&self, addrs: &[[u8; 16]]) -> Result<(usize, usize), BpfError> {
        let map = &self.skel.maps.host_addrs;
        let want: HashSet<&[u8]> = addrs.iter().map(|a| a.as_slice()).collect();
        let stale: Vec<Vec<u8>> = map
            .keys()
            .filter(|k| !want.contains(k.as_slice()))
            .collect();
        for k in &stale {
            map.delete(k).map_err(lb("delete a host_addrs entry"))?;
        }
        let mut added = 0;
        for k in &want {
            if map.lookup(k, MapFlags::ANY).ok().flatten().is_none() {
                map.update(k, &PRESENT, MapFlags::ANY)
                    .map_err(lb("add a host_addrs entry"))?;
                added += 1;
            }
        }
        Ok((added, stale.len()))
    }
}
