//! From a listed path to the keys the LSM hooks compare, used by the
//! resolver processes and by the launcher's `--check`: key derivation
//! ([`keys`]), what it tells of what it reads ([`witness`]), the watches
//! that tell an earlier answer is still true ([`watch`], a witness) and
//! reading a list file ([`list_file`]).

pub mod keys;
pub mod list_file;
pub mod watch;
pub mod witness;
