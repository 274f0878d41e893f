//! Test-only modules that span the whole engine, kept out of the production rooms.
//!
//! | module | what it holds |
//! | --- | --- |
//! | `loom` | `cfg(breaker_loom)`: the engine's races, every interleaving explored by loom |
//! | `reference` | DESIGN.md's *Semantics* as plain sequential code, and a property test holding the engine to it step by step |
//! | `overload_model` | the adaptive limit as Netflix's formulas write it, and a property test holding `Limiter` to it |
//! | `keyed_model` | a property test of the keyed map against its promises, under an adversary's key streams |

#[cfg(not(breaker_loom))]
mod keyed_model;
#[cfg(breaker_loom)]
mod loom;
mod overload_model;
#[cfg(not(breaker_loom))]
mod reference;
