//! [`ConfigError`]: an invalid configuration names its field.

use std::fmt;

/// An invalid [`Config`](super::Config): which field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    reason: String,
}

impl ConfigError {
    pub(crate) fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self {
            field,
            reason: reason.into(),
        }
    }

    /// The builder method (and attribute key) at fault, e.g. `"threshold"`.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// What is wrong with it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid breaker config: `{}` {}",
            self.field, self.reason
        )
    }
}

impl std::error::Error for ConfigError {}
