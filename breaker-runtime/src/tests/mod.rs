//! Test-only modules that span the whole engine, kept out of the production rooms.
//!
//! | module | what it holds |
//! | --- | --- |
//! | `loom` | `cfg(breaker_loom)`: the engine's races, every interleaving explored by loom |
//! | `reference` | DESIGN.md's *Semantics* as plain sequential code, and a property test holding the engine to it step by step |

#[cfg(breaker_loom)]
mod loom;
#[cfg(not(breaker_loom))]
mod reference;
