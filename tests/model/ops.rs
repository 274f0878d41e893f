//! The named operations of the model test, and the proptest strategies that generate them.
//! Every operation is plain data with a `Debug` form, so a shrunk counterexample reads as a
//! story: `Start(Answer::Fail)`, `Advance(1500)`, `Manual(Reset)`…

use proptest::prelude::*;

/// Milliseconds: every duration of the model is a whole number of them, as tokio's timer
/// wheel counts (so a timer fires exactly at its deadline under paused time).
pub type Ms = u64;

/// How a call's dependency answers when the test lets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Ok,
    Fail,
    /// An error the classifier judges the caller's fault.
    Neutral,
    /// The dependency's future panics.
    Panic,
    /// An answer the classifier judges `Verdict::OpenFor(ms)` (a `Retry-After`).
    OpenFor(Ms),
}

/// What the breaker's own probe (`Config::probe`) does when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeAnswer {
    Ok,
    Fail,
    Panic,
    /// Never answers: its lease ends it.
    Hang,
}

/// An operator's hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manual {
    Reset,
    ForceOpen,
    Disable,
}

/// The configuration knobs the exact model covers (the random ones, jitter and the overload
/// mechanisms, are the keyed part's; see `model.rs`). Durations in milliseconds, multiples
/// of 10 so that the harness can stand between deadlines.
#[derive(Debug, Clone, PartialEq)]
pub struct Knobs {
    pub threshold: Option<u32>,
    /// (percent, window calls, min calls)
    pub rate: Option<(u32, u32, u32)>,
    pub cool_off: Ms,
    pub max_cool_off: Option<Ms>,
    pub probes: u32,
    pub success_threshold: Option<u32>,
    pub max_concurrent: Option<u32>,
    pub slow_call: Option<Ms>,
    pub timeout: Option<Ms>,
    pub dry_run: bool,
    /// The recovery ramp and the adaptive bulkhead's `max`: fixed for a breaker's life
    /// (`reconfigure` refuses to change them).
    pub ramp: Option<Ms>,
    pub adaptive: Option<u32>,
    pub hedge: Option<Hedge>,
}

/// `Config::hedge(hedges)`, its delay and its budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hedge {
    pub hedges: u32,
    /// `HedgeDelay::Fixed` (a quarter-second step and one millisecond, so a hedge's timer
    /// never fires at the instant of another event), or `None`: the default percentile
    /// (no hedge before 100 samples, which a case never reaches).
    pub delay: Option<Ms>,
    /// `hedge_budget`, percent of first attempts (5 by default).
    pub budget: Option<u32>,
}

impl Knobs {
    /// The threshold in force: without a rate, the default of 5 applies.
    pub fn threshold(&self) -> Option<u32> {
        match (self.threshold, self.rate) {
            (None, None) => Some(5),
            (t, _) => t,
        }
    }

    /// `success_threshold` in force: `probes` by default.
    pub fn success_threshold(&self) -> u32 {
        self.success_threshold.unwrap_or(self.probes)
    }

    /// How long a half-open probe holds its slot: the `timeout`, else the base cool-off.
    pub fn lease(&self) -> Ms {
        self.timeout.unwrap_or(self.cool_off)
    }
}

pub fn knobs() -> impl Strategy<Value = Knobs> {
    (
        (
            prop::option::of(1u32..4),
            prop::option::of((30u32..=80, 2u32..6, 1u32..6)),
            1u64..5,
            prop::option::of(5u64..20),
            1u32..4,
        ),
        (
            prop::option::of(1u32..4),
            prop::option::of(1u32..4),
            prop::option::of(1u64..8),
            prop::option::of(2u64..12),
            prop::bool::weighted(0.15),
        ),
        (
            prop::option::weighted(0.25, 1u64..8),
            prop::option::weighted(0.25, 1u32..6),
            prop::option::weighted(0.5, hedge()),
        ),
    )
        .prop_map(
            |(
                (threshold, rate, cool, cap, probes),
                (st, max, slow, timeout, dry_run),
                (ramp, adaptive, hedge),
            )| Knobs {
                threshold,
                rate: rate.map(|(p, w, m)| (p, w, m.min(w))),
                cool_off: cool * 500,
                max_cool_off: cap.map(|c| c * 1000),
                probes,
                success_threshold: st.map(|s| s.min(probes)),
                max_concurrent: max,
                slow_call: slow.map(|s| s * 250),
                timeout: timeout.map(|t| t * 250),
                dry_run,
                ramp: ramp.map(|r| r * 250),
                // One bulkhead: fixed or adaptive.
                adaptive: adaptive.filter(|_| max.is_none()),
                hedge,
            },
        )
}

fn hedge() -> impl Strategy<Value = Hedge> {
    (
        1u32..=4,
        // Often a millisecond: hedges one after another, past the budget's floor.
        prop::option::weighted(
            0.8,
            prop_oneof![Just(1), (1u64..8).prop_map(|q| q * 250 + 1)],
        ),
        prop::option::of(prop_oneof![Just(5u32), Just(50), Just(100)]),
    )
        .prop_map(|(hedges, delay, budget)| Hedge {
            hedges,
            delay,
            budget,
        })
}

/// One key of a `ConfigPatch` (feature `serde`): `None` values write `null`, the default.
#[derive(Debug, Clone, PartialEq)]
pub enum PatchKey {
    Threshold(u32),
    CoolOff(Ms),
    SlowCall(Option<Ms>),
    Timeout(Option<Ms>),
    MaxConcurrent(Option<u32>),
    DryRun(bool),
}

fn patch_key() -> impl Strategy<Value = PatchKey> {
    prop_oneof![
        (1u32..4).prop_map(PatchKey::Threshold),
        (1u64..5).prop_map(|c| PatchKey::CoolOff(c * 500)),
        prop::option::of(1u64..8).prop_map(|s| PatchKey::SlowCall(s.map(|s| s * 250))),
        prop::option::of(2u64..12).prop_map(|t| PatchKey::Timeout(t.map(|t| t * 250))),
        prop::option::of(1u32..4).prop_map(PatchKey::MaxConcurrent),
        prop::bool::weighted(0.2).prop_map(PatchKey::DryRun),
    ]
}

/// What a keyed breaker's key answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAnswer {
    Ok,
    Fail,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// A call through the breaker; it waits for `Finish` (or its timeout, or a `Cancel`).
    Start,
    /// The `i`th call in flight (modulo their number) gets its answer.
    Finish(usize, Answer),
    /// The `i`th call in flight is dropped at its await (its task aborted).
    Cancel(usize),
    /// Time passes (paused tokio time: every timer fires at its deadline on the way).
    Advance(Ms),
    /// `breaker.state()` (moves an open breaker whose cool-off ended to half-open).
    ReadState,
    Manual(Manual),
    /// `reconfigure` with a whole new configuration (the probe kept, if any).
    Reconfigure(Knobs),
    /// `apply` of a `ConfigPatch` naming these keys (feature `serde`).
    Patch(Vec<PatchKey>),
    /// What the breaker's own probe answers from now on.
    SetProbe(ProbeAnswer),
    /// A task waits on `ready()` of a `ready_when_closed` tower service over the breaker
    /// (feature `tower`).
    WaitReady,
    /// A hedged call (`call_hedged_classified`), one at a time: its attempts are answered
    /// by `Finish` (after the plain calls in their numbering), cancelled whole by `Cancel`
    /// (numbered after the plain calls).
    StartHedged,
    /// The breaker is dropped (its calls cancelled, its waiters gone) and a new one made.
    Replace(Knobs, bool),
    /// A call to key `k` of the keyed breaker, answered at once.
    KeyCall(u8, KeyAnswer),
    /// A retried call to key `k` that fails every attempt; `cancel`: dropped in its backoff.
    KeyRetried(u8, bool),
    /// The operator's hand on key `k`.
    KeyManual(u8, Manual),
    /// `retain_active()` on the keyed breaker.
    KeySweep,
    /// Calls to host `h` of the outlier pool, answered at once: so many successes, then so
    /// many failures.
    HostCalls(u8, u8, u8),
}

/// Keys: a few steady ones (0..4) and a stream of new ones (churn past `max_keys`).
pub const STEADY_KEYS: u8 = 4;

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => Just(Op::Start),
        4 => Just(Op::StartHedged),
        8 => (any::<usize>(), prop_oneof![
            4 => Just(Answer::Ok),
            4 => Just(Answer::Fail),
            1 => Just(Answer::Neutral),
            1 => Just(Answer::Panic),
            1 => (1u64..8).prop_map(|d| Answer::OpenFor(d * 250)),
        ]).prop_map(|(i, a)| Op::Finish(i, a)),
        2 => any::<usize>().prop_map(Op::Cancel),
        // Quarter-second steps land on cool-off, lease, timeout and slow-call boundaries.
        5 => (1u64..12).prop_map(|q| Op::Advance(q * 250)),
        1 => Just(Op::ReadState),
        2 => prop_oneof![Just(Manual::Reset), Just(Manual::ForceOpen), Just(Manual::Disable)]
            .prop_map(Op::Manual),
        1 => knobs().prop_map(Op::Reconfigure),
        1 => prop::collection::vec(patch_key(), 1..3).prop_map(Op::Patch),
        1 => prop_oneof![
            Just(ProbeAnswer::Ok),
            Just(ProbeAnswer::Fail),
            Just(ProbeAnswer::Panic),
            Just(ProbeAnswer::Hang),
        ]
        .prop_map(Op::SetProbe),
        1 => Just(Op::WaitReady),
        1 => (knobs(), any::<bool>()).prop_map(|(k, p)| Op::Replace(k, p)),
        // Mostly the steady keys, sometimes new ones (churn past `max_keys`).
        4 => (prop_oneof![3 => 0u8..STEADY_KEYS, 1 => STEADY_KEYS..12], prop_oneof![Just(KeyAnswer::Ok), Just(KeyAnswer::Fail)])
            .prop_map(|(k, a)| Op::KeyCall(k, a)),
        1 => (0u8..STEADY_KEYS, any::<bool>()).prop_map(|(k, c)| Op::KeyRetried(k, c)),
        2 => (0u8..STEADY_KEYS, prop_oneof![2 => Just(Manual::Reset), 1 => Just(Manual::ForceOpen), 1 => Just(Manual::Disable)])
            .prop_map(|(k, m)| Op::KeyManual(k, m)),
        2 => Just(Op::KeySweep),
        3 => (0u8..8, 0u8..12, prop_oneof![2 => Just(0u8), 1 => 1u8..12])
            .prop_map(|(h, ok, fail)| Op::HostCalls(h, ok, fail)),
    ]
}

/// The keyed breaker's knobs, fixed for a case (its overload keys cannot change while it
/// runs).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyedKnobs {
    pub threshold: u32,
    pub max_keys: usize,
    pub throttle: bool,
    pub dry_run: bool,
}

pub fn keyed_knobs() -> impl Strategy<Value = KeyedKnobs> {
    (1u32..4, 2usize..6, any::<bool>(), any::<bool>()).prop_map(
        |(threshold, max_keys, throttle, dry_run)| KeyedKnobs {
            threshold,
            max_keys,
            throttle,
            dry_run,
        },
    )
}
