//! The wire formats between the processes: launcher ↔ daemon
//! ([`request`]) and daemon ↔ resolver ([`resolver`]), each side by side
//! with its parser so one change updates both ends.

pub mod ready;
pub mod request;
pub mod resolver;
