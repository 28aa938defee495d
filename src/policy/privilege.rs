//! Users the product cannot protect: members of groups that are root by
//! another name. An agent running as such a user can start a root process
//! outside every sandbox (a container with the home mounted, a VM with the
//! disk attached, a raw read of the block device) and read any file
//! through it; no hook of a sandbox sees that read. Pure: the names in,
//! the warning out.

/// The groups whose members are root by another name, and why.
pub const ROOT_EQUIVALENT: &[(&str, &str)] = &[
    (
        "docker",
        "the Docker daemon runs a container as root with any host path mounted (docker run -v ~:/h)",
    ),
    (
        "lxd",
        "LXD runs a privileged container with host paths mounted",
    ),
    (
        "incus-admin",
        "Incus runs a privileged container with host paths mounted",
    ),
    ("incus", "Incus runs containers with host paths mounted"),
    (
        "libvirt",
        "libvirtd (root) starts a virtual machine with a host disk or directory attached",
    ),
    (
        "disk",
        "the group may read the block devices, and so every file on them",
    ),
];

/// The root-equivalent groups among `groups` (group names), each with why,
/// in [`ROOT_EQUIVALENT`]'s order.
pub fn root_equivalent<S: AsRef<str>>(groups: &[S]) -> Vec<(&'static str, &'static str)> {
    ROOT_EQUIVALENT
        .iter()
        .filter(|(g, _)| groups.iter().any(|n| n.as_ref() == *g))
        .copied()
        .collect()
}

/// The one warning for a user in `found` (from [`root_equivalent`]) and,
/// with `sudo_nopasswd`, one whose sudo needs no password now; None when
/// neither holds.
pub fn warning(found: &[(&str, &str)], sudo_nopasswd: bool) -> Option<String> {
    let mut why: Vec<String> = found
        .iter()
        .map(|(g, w)| format!("the {g} group ({w})"))
        .collect();
    if sudo_nopasswd {
        why.push("sudo without a password".into());
    }
    if why.is_empty() {
        return None;
    }
    Some(format!(
        "you are root by another name through {}: an agent you run can read any file through it, \
         and no sandbox can stop that; leave the group (or require a sudo password) to be protected",
        why.join(" and ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_groups_that_are_root() {
        let found = root_equivalent(&["users", "docker", "audio", "disk"]);
        assert_eq!(
            found.iter().map(|f| f.0).collect::<Vec<_>>(),
            ["docker", "disk"]
        );
        assert!(root_equivalent(&["sudo", "adm", "users"]).is_empty());
        assert!(root_equivalent::<&str>(&[]).is_empty());
    }

    #[test]
    fn one_warning_names_every_cause() {
        assert_eq!(warning(&[], false), None);
        let w = warning(&root_equivalent(&["docker"]), true).unwrap();
        assert!(w.contains("the docker group ("), "{w}");
        assert!(w.contains("and sudo without a password"), "{w}");
        let w = warning(&[], true).unwrap();
        assert!(
            w.starts_with("you are root by another name through sudo without a password"),
            "{w}"
        );
    }
}
