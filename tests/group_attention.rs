//! The attention model of group conversations (SPEC §8), checked as properties over random
//! sequences of what can happen to a persona: time passing, messages heard (named or not),
//! replies, `no_reply` plans, join answers and changes of social state.
//!
//! At every step: no sub-flow ever goes from ABSENT straight to FOCUSED; the limits of the
//! social state hold (PEEKING 1/1, NORMAL 3/2, FOCUSED 4/4 — followed / focused); OFFLINE
//! leaves every stream; a persona whose action is not social (issue 49) is focused only on a
//! stream that addressed it and no focused cycle answered yet, and at a household's table it
//! is asked to join only such a stream; interest, willingness and the chance to focus stay in
//! their ranges.
//! The decays and caps are checked against the formulas, and the reply probability against
//! 10,000 seeded draws.

use bevy_generative_agents::group::{
    Attention, AttentionSettings, Change, ChatState, Engagement, SocialState, SubFlow,
    reply_probability,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Debug, Clone)]
enum Op {
    Pass(f32),
    Hear {
        stream: u8,
        relevance: f32,
        named: bool,
    },
    Spoke(u8),
    NoReply(u8),
    Social(SocialState),
    AskJoin(bool),
    Engage(Engagement),
    Address(u8),
    Answered(u8),
}

fn social() -> impl Strategy<Value = SocialState> {
    prop_oneof![
        Just(SocialState::Offline),
        Just(SocialState::Peeking),
        Just(SocialState::Normal),
        Just(SocialState::Focused),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0.0f32..120.0).prop_map(Op::Pass),
        4 => (0u8..6, 0.0f32..1.0, any::<bool>())
            .prop_map(|(stream, relevance, named)| Op::Hear { stream, relevance, named }),
        1 => (0u8..6).prop_map(Op::Spoke),
        2 => (0u8..6).prop_map(Op::NoReply),
        1 => social().prop_map(Op::Social),
        3 => any::<bool>().prop_map(Op::AskJoin),
        1 => prop_oneof![
            Just(Engagement::Social),
            Just(Engagement::Listening),
            Just(Engagement::AtTable),
        ]
        .prop_map(Op::Engage),
        2 => (0u8..6).prop_map(Op::Address),
        1 => (0u8..6).prop_map(Op::Answered),
    ]
}

fn check(attention: &Attention<u8>, changes: &[(u8, Change)], settings: &AttentionSettings) {
    for (stream, Change::Moved { from, to }) in changes {
        assert!(
            !(*from == ChatState::Absent && *to == ChatState::Focused),
            "stream {stream} went from ABSENT straight to FOCUSED"
        );
    }
    let limits = attention.social.limits();
    assert!(
        attention.following() <= limits.following,
        "{:?}: {} streams followed",
        attention.social,
        attention.following()
    );
    assert!(
        attention.count(ChatState::Focused) <= limits.focused,
        "{:?}: {} focused",
        attention.social,
        attention.count(ChatState::Focused)
    );
    if attention.engagement != Engagement::Social {
        for (stream, flow) in &attention.flows {
            assert!(
                flow.state != ChatState::Focused || flow.is_addressed(),
                "{:?}: stream {stream} focused unaddressed",
                attention.engagement
            );
        }
    }
    if attention.engagement == Engagement::AtTable
        && let Some(stream) = attention.join_candidate()
    {
        assert!(
            attention.flows[&stream].is_addressed(),
            "at the table, asked to join the unaddressed stream {stream}"
        );
    }
    if attention.social == SocialState::Offline {
        assert!(
            attention
                .flows
                .values()
                .all(|f| f.state == ChatState::Absent)
        );
    }
    for flow in attention.flows.values() {
        assert!(
            (0.0..=settings.interest_cap).contains(&flow.interest),
            "{flow:?}"
        );
        assert!(
            (0.0..=settings.willingness_cap).contains(&flow.willingness),
            "{flow:?}"
        );
        assert!((0.0..=1.0).contains(&flow.focus_chance), "{flow:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_rules_hold_at_every_step(ops in prop::collection::vec(op(), 1..120), seed in any::<u64>()) {
        let settings = AttentionSettings::default();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut attention: Attention<u8> = Attention::default();
        for op in ops {
            let changes: Vec<(u8, Change)> = match op {
                Op::Pass(secs) => attention.tick(secs, &settings, &mut rng),
                Op::Hear { stream, relevance, named } => {
                    attention.flow(&stream).hear(relevance, named, &settings);
                    vec![]
                }
                Op::Spoke(stream) => {
                    attention.flow(&stream).spoke(&settings);
                    vec![]
                }
                Op::NoReply(stream) => attention
                    .planned_no_reply(&stream, &settings)
                    .map(|c| vec![(stream, c)])
                    .unwrap_or_default(),
                Op::Social(state) => attention.set_social(state),
                Op::AskJoin(yes) => match attention.join_candidate() {
                    Some(stream) => attention
                        .answer_join(&stream, yes, &settings)
                        .map(|c| vec![(stream, c)])
                        .unwrap_or_default(),
                    None => vec![],
                },
                Op::Engage(engagement) => attention.set_engagement(engagement),
                Op::Address(stream) => {
                    attention.flow(&stream).addressed(&settings);
                    vec![]
                }
                // As the heart flow does when a focused cycle starts.
                Op::Answered(stream) => {
                    attention.flow(&stream).answered();
                    attention.set_engagement(attention.engagement)
                }
            };
            check(&attention, &changes, &settings);
        }
    }

    #[test]
    fn decay_and_caps_follow_the_formulas(
        interest in 0.0f32..15.0,
        willingness in 0.0f32..3.0,
        secs in 0.0f32..300.0,
        hits in 0usize..20,
    ) {
        let settings = AttentionSettings::default();
        let mut flow = SubFlow { interest, willingness, ..SubFlow::default() };
        flow.pass(secs, &settings);
        let want_interest = f64::from(interest) * 0.98f64.powf(f64::from(secs));
        let want_willingness = f64::from(willingness) * 0.9f64.powf(f64::from(secs));
        prop_assert!((f64::from(flow.interest) - want_interest).abs() <= 1e-4 * (1.0 + want_interest));
        prop_assert!((f64::from(flow.willingness) - want_willingness).abs() <= 1e-4 * (1.0 + want_willingness));
        for _ in 0..hits {
            flow.hear(1.0, true, &settings);
        }
        let expect_interest = (want_interest as f32 + hits as f32 * 8.0).min(15.0);
        prop_assert!((flow.interest - expect_interest).abs() < 1e-3, "{} vs {}", flow.interest, expect_interest);
        let expect_willingness = (want_willingness as f32 + hits as f32).min(3.0);
        prop_assert!((flow.willingness - expect_willingness).abs() < 1e-3);
        flow.spoke(&settings);
        prop_assert!((flow.willingness - (expect_willingness - 1.8).max(0.0)).abs() < 1e-3);
    }
}

#[test]
fn reply_probability_matches_10000_seeded_draws() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x00C0_FFEE);
    for amp in [0.5f32, 1.0, 2.0] {
        let settings = AttentionSettings {
            reply_amplifier: amp,
            ..AttentionSettings::default()
        };
        for willingness in [0.0f32, 0.55, 0.7, 0.9, 1.2, 2.0, 3.0] {
            let flow = SubFlow {
                state: ChatState::Chat,
                willingness,
                ..SubFlow::default()
            };
            let want = ((willingness - 0.5).max(0.01) * amp * 2.0).min(1.0);
            assert!((reply_probability(willingness, amp) - want).abs() < 1e-6);
            let replies = (0..10_000)
                .filter(|_| flow.wants_to_reply(rng.random(), &settings))
                .count();
            let share = replies as f32 / 10_000.0;
            assert!(
                (share - want).abs() <= 0.02,
                "w {willingness}, amp {amp}: {share} of draws against p = {want}"
            );
        }
    }
}

#[test]
fn a_joined_stream_that_keeps_the_persona_interested_turns_focused() {
    let settings = AttentionSettings::default();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut attention: Attention<u8> = Attention::default();
    attention.flow(&1).hear(1.0, true, &settings);
    assert_eq!(attention.join_candidate(), Some(1));
    assert!(attention.answer_join(&1, true, &settings).is_some());
    let mut focused_at = None;
    for second in 0..120 {
        attention.flow(&1).hear(0.5, false, &settings);
        attention.tick(1.0, &settings, &mut rng);
        if attention.flows[&1].state == ChatState::Focused {
            focused_at = Some(second);
            break;
        }
    }
    let at = focused_at.expect("focused within two minutes of high interest");
    // The chance rises 0.1 per second from 0 and is drawn every 5 s: never before 5 s.
    assert!(at >= 4, "focused after {at} s");
    // Asleep: everything is dropped.
    let changes = attention.set_social(SocialState::Offline);
    assert_eq!(
        changes,
        vec![(
            1,
            Change::Moved {
                from: ChatState::Focused,
                to: ChatState::Absent
            }
        )]
    );
    assert_eq!(attention.following(), 0);
}
