//! The executor's state machine (SPEC §10, seed 001): states are an enum, transitions one pure
//! function. The systems in `director::run` feed it inputs and act on the state it returns;
//! every change is a [`DirectorStateChanged`](super::DirectorStateChanged) event.
//!
//! ```text
//! IDLE → PLANNING → AWAITING_CONFIRMATION → EXECUTING ⇄ STEP_COMPLETE → REVIEWING → COMPLETED
//!                                  ↑                      │   ↑
//!                                  └──── (per_step) ──────┘   └── AWAITING_USER_INPUT
//! EXECUTING / STEP_COMPLETE ⇄ PAUSED;   any live state → FAILED | CANCELLED
//! ```

use serde::{Deserialize, Serialize};

/// Where a directive is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExecutorState {
    /// Nothing asked yet.
    Idle,
    /// The model reads the directive and writes the plan.
    Planning,
    /// The plan (or the next step, under `per_step`) waits for the user's yes.
    AwaitingConfirmation,
    /// A step runs.
    Executing,
    /// A step finished; its result is being validated (continue, replan or ask the user).
    StepComplete,
    /// The validator asked the user a question.
    AwaitingUserInput,
    /// Every step is done; the reviewer checks the outcome in the town.
    Reviewing,
    /// Reviewed (terminal).
    Completed,
    /// Gave up, with a reason (terminal).
    Failed,
    /// Cancelled by the user; the town was rolled back (terminal).
    Cancelled,
    /// Paused by the user; resumes where it was.
    Paused(Resume),
}

/// What a paused executor resumes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Resume {
    /// A step was running (or about to).
    Executing,
    /// A finished step was being validated.
    StepComplete,
    /// The next step was waiting for confirmation.
    AwaitingConfirmation,
}

impl ExecutorState {
    /// Whether the directive is over.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// The state's name as SPEC §10 writes it (`AWAITING_CONFIRMATION`, …).
    pub fn label(self) -> &'static str {
        match self {
            Self::Idle => "IDLE",
            Self::Planning => "PLANNING",
            Self::AwaitingConfirmation => "AWAITING_CONFIRMATION",
            Self::Executing => "EXECUTING",
            Self::StepComplete => "STEP_COMPLETE",
            Self::AwaitingUserInput => "AWAITING_USER_INPUT",
            Self::Reviewing => "REVIEWING",
            Self::Completed => "COMPLETED",
            Self::Failed => "FAILED",
            Self::Cancelled => "CANCELLED",
            Self::Paused(_) => "PAUSED",
        }
    }
}

/// What happened, as the state machine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorInput {
    /// A directive arrived.
    Directive,
    /// The plan is written and valid; `confirm` when the policy wants a yes first.
    Planned {
        /// Whether to wait for confirmation.
        confirm: bool,
    },
    /// The user said yes.
    Confirm,
    /// The running step finished (done, failed or skipped).
    StepFinished,
    /// Validation said go on with the next step; `confirm` under `per_step`.
    Continue {
        /// Whether to wait for confirmation.
        confirm: bool,
    },
    /// Validation asked the user something.
    AskUser,
    /// The user answered; validation runs again with the answer.
    Answer,
    /// No step is left.
    AllStepsDone,
    /// The review is written.
    Reviewed,
    /// Something could not go on.
    Fail,
    /// The user cancelled.
    Cancel,
    /// The user paused.
    Pause,
    /// The user resumed.
    Resume,
}

/// An input the state does not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not possible in {}", state.label())]
pub struct TransitionError {
    /// The state.
    pub state: ExecutorState,
    /// The input.
    pub input: ExecutorInput,
}

/// The state after `input` in `state`, or why not.
pub fn transition(
    state: ExecutorState,
    input: ExecutorInput,
) -> Result<ExecutorState, TransitionError> {
    use ExecutorInput as I;
    use ExecutorState as S;
    let next = match (state, input) {
        (S::Idle, I::Directive) => S::Planning,
        (S::Planning, I::Planned { confirm: true }) => S::AwaitingConfirmation,
        (S::Planning, I::Planned { confirm: false }) => S::Executing,
        (S::AwaitingConfirmation, I::Confirm) => S::Executing,
        (S::Executing, I::StepFinished) => S::StepComplete,
        (S::StepComplete, I::Continue { confirm: true }) => S::AwaitingConfirmation,
        (S::StepComplete, I::Continue { confirm: false }) => S::Executing,
        (S::StepComplete, I::AskUser) => S::AwaitingUserInput,
        (S::AwaitingUserInput, I::Answer) => S::StepComplete,
        (S::StepComplete | S::Executing, I::AllStepsDone) => S::Reviewing,
        (S::Reviewing, I::Reviewed) => S::Completed,
        (S::Executing, I::Pause) => S::Paused(Resume::Executing),
        (S::StepComplete, I::Pause) => S::Paused(Resume::StepComplete),
        (S::AwaitingConfirmation, I::Pause) => S::Paused(Resume::AwaitingConfirmation),
        (S::Paused(Resume::Executing), I::Resume) => S::Executing,
        (S::Paused(Resume::StepComplete), I::Resume) => S::StepComplete,
        (S::Paused(Resume::AwaitingConfirmation), I::Resume) => S::AwaitingConfirmation,
        (s, I::Fail) if !s.is_terminal() && s != S::Idle => S::Failed,
        (s, I::Cancel) if !s.is_terminal() && s != S::Idle => S::Cancelled,
        (state, input) => return Err(TransitionError { state, input }),
    };
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExecutorInput as I;
    use ExecutorState as S;

    const INPUTS: [ExecutorInput; 15] = [
        I::Directive,
        I::Planned { confirm: true },
        I::Planned { confirm: false },
        I::Confirm,
        I::StepFinished,
        I::Continue { confirm: true },
        I::Continue { confirm: false },
        I::AskUser,
        I::Answer,
        I::AllStepsDone,
        I::Reviewed,
        I::Fail,
        I::Cancel,
        I::Pause,
        I::Resume,
    ];

    #[test]
    fn the_happy_path_with_a_question_and_a_pause() {
        let path = [
            (I::Directive, S::Planning),
            (I::Planned { confirm: true }, S::AwaitingConfirmation),
            (I::Confirm, S::Executing),
            (I::Pause, S::Paused(Resume::Executing)),
            (I::Resume, S::Executing),
            (I::StepFinished, S::StepComplete),
            (I::AskUser, S::AwaitingUserInput),
            (I::Answer, S::StepComplete),
            (I::Continue { confirm: false }, S::Executing),
            (I::StepFinished, S::StepComplete),
            (I::AllStepsDone, S::Reviewing),
            (I::Reviewed, S::Completed),
        ];
        let mut state = S::Idle;
        for (input, expected) in path {
            state = transition(state, input).expect("allowed");
            assert_eq!(state, expected, "after {input:?}");
        }
    }

    #[test]
    fn terminal_states_accept_nothing_and_idle_only_a_directive() {
        for terminal in [S::Completed, S::Failed, S::Cancelled] {
            for input in INPUTS {
                assert!(
                    transition(terminal, input).is_err(),
                    "{terminal:?} {input:?}"
                );
            }
        }
        for input in INPUTS {
            assert_eq!(
                transition(S::Idle, input).is_ok(),
                input == I::Directive,
                "{input:?}"
            );
        }
    }

    #[test]
    fn every_live_state_can_be_cancelled_or_failed_and_paused_states_resume_where_they_were() {
        let live = [
            S::Planning,
            S::AwaitingConfirmation,
            S::Executing,
            S::StepComplete,
            S::AwaitingUserInput,
            S::Reviewing,
            S::Paused(Resume::Executing),
            S::Paused(Resume::StepComplete),
            S::Paused(Resume::AwaitingConfirmation),
        ];
        for state in live {
            assert_eq!(transition(state, I::Cancel), Ok(S::Cancelled));
            assert_eq!(transition(state, I::Fail), Ok(S::Failed));
        }
        for (from, paused) in [
            (S::Executing, Resume::Executing),
            (S::StepComplete, Resume::StepComplete),
            (S::AwaitingConfirmation, Resume::AwaitingConfirmation),
        ] {
            let p = transition(from, I::Pause).expect("pausable");
            assert_eq!(p, S::Paused(paused));
            assert_eq!(transition(p, I::Resume), Ok(from));
            assert!(
                transition(p, I::StepFinished).is_err(),
                "a paused run does nothing"
            );
        }
        assert!(transition(S::Planning, I::Pause).is_err());
    }
}
