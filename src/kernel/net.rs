//! The map the loopback programs (src/bpf/loopback.bpf.h) read to tell the
//! host's own addresses from remote ones: `host_addrs`.

use std::collections::HashSet;

use crate::kernel::error::BpfError;
use crate::kernel::programs::Bpf;
use crate::kernel::sandboxes::set_exactly;

impl Bpf {
    /// Makes `addrs` (16-byte `struct host_addr` keys: IPv6, or IPv4 as
    /// `::ffff:a.b.c.d`, network byte order; [`crate::os::host_addrs`]
    /// makes them) exactly the host addresses in `host_addrs`. Returns how
    /// many were added and removed.
    ///
    /// # Errors
    /// [`BpfError::Libbpf`] for the first failed update or delete.
    pub fn set_host_addrs(&self, addrs: &[[u8; 16]]) -> Result<(usize, usize), BpfError> {
        let want: HashSet<Vec<u8>> = addrs.iter().map(|a| a.to_vec()).collect();
        set_exactly(&self.maps.host_addrs, "host_addrs", &want, |_| true)
    }
}
