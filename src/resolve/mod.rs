//! From a listed path to the keys the LSM hooks compare, used by the
//! resolver processes and by the launcher's `--check`: key derivation
//! ([`keys`]), the watches that tell an earlier answer is still true
//! ([`watch`]) and reading a list file ([`list_file`]).

pub mod keys;
pub mod list_file;
pub mod watch;
