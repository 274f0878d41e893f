//! The breaker's state, and the packed word that carries it with its generation.

use std::fmt;

/// The state of a breaker.
///
/// ```
/// use breaker::{Breaker, Config, State};
/// let b = Breaker::new("docs::state", Config::default());
/// assert_eq!(b.state(), State::Closed);
/// b.handle().force_open();
/// assert_eq!(b.state(), State::ForcedOpen);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
pub enum State {
    /// Calls pass; outcomes are counted.
    Closed,
    /// Calls fail fast until the cool-off ends.
    Open,
    /// A few probe calls pass to test the dependency; the rest fail fast.
    HalfOpen,
    /// Opened by hand ([`Handle::force_open`](crate::Handle::force_open)): every call fails
    /// fast until [`reset`](crate::Handle::reset).
    ForcedOpen,
    /// Switched off by hand ([`Handle::disable`](crate::Handle::disable)): every call passes,
    /// outcomes are still counted, the state never changes by itself.
    Disabled,
}

impl State {
    const ALL: [State; 5] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
    ];

    /// The name used in logs: `closed`, `open`, `half_open`, `forced_open`, `disabled`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Bits of the word that hold the [`State`] tag.
const STATE_BITS: u32 = 3;
const STATE_MASK: u64 = (1 << STATE_BITS) - 1;

/// The state and its generation, packed in one `u64` so one atomic load reads both:
///
/// ```text
///  63                                   3 2     0
/// +--------------------------------------+-------+
/// |             generation (61)          | state |
/// +--------------------------------------+-------+
/// ```
///
/// Every transition starts a new generation; a call remembers the generation that admitted
/// it, and its outcome changes nothing once the generation has moved on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word(pub(crate) u64);

impl Word {
    pub(crate) const INITIAL: Word = Word::new(State::Closed, 0);

    pub(crate) const fn new(state: State, generation: u64) -> Word {
        Word((generation << STATE_BITS) | state as u64)
    }

    /// Whether the word holds `state`, without decoding the tag.
    #[inline]
    pub(crate) fn is(self, state: State) -> bool {
        self.0 & STATE_MASK == state as u64
    }

    #[inline]
    pub(crate) fn state(self) -> State {
        State::ALL[(self.0 & STATE_MASK) as usize]
    }

    #[inline]
    pub(crate) fn generation(self) -> u64 {
        self.0 >> STATE_BITS
    }

    /// The word after a transition to `to`: a new generation (wrapping after 2^61
    /// transitions, which no process lives to see).
    pub(crate) fn next(self, to: State) -> Word {
        Word::new(
            to,
            self.generation().wrapping_add(1) & (u64::MAX >> STATE_BITS),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_round_trips_every_state_and_generation() {
        for state in State::ALL {
            for generation in [0, 1, 77, u64::MAX >> STATE_BITS] {
                let w = Word::new(state, generation);
                assert_eq!(w.state(), state);
                assert_eq!(w.generation(), generation);
            }
        }
    }

    #[test]
    fn next_moves_the_generation_on_and_wraps() {
        let w = Word::new(State::Closed, 4).next(State::Open);
        assert_eq!((w.state(), w.generation()), (State::Open, 5));
        let last = Word::new(State::Open, u64::MAX >> STATE_BITS).next(State::HalfOpen);
        assert_eq!((last.state(), last.generation()), (State::HalfOpen, 0));
    }
}
