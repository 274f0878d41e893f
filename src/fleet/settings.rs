//! A fleet's settings, as its builder made them: where Redis is and how the fleet names
//! itself there. The task and the links read them; they import nothing of the fleet.

use redis::Client;

/// Where Redis is.
pub(crate) enum Target {
    One(Box<Client>),
    /// A cluster's nodes (some of them: the client discovers the rest).
    Cluster(Vec<String>),
}

pub(crate) struct Settings {
    pub(crate) target: Target,
    pub(crate) url: String,
    pub(crate) instance: String,
    pub(crate) prefix: String,
    pub(crate) channel: String,
    pub(crate) quorum: u32,
}
