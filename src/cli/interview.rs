//! `smallville interview SAVE --persona NAME (--question TEXT | --questions FILE)`: the paper's
//! way of evaluating agents — ask a persona questions, one JSON line per answer on stdout. The
//! save is only read: interviews write no memory, and nothing is saved.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use bevy::prelude::*;
use bevy_generative_agents::clock::{SimClock, SimSpeed};
use bevy_generative_agents::dialogue::{DialogueReplied, DialogueRequest};
use bevy_generative_agents::persist::build_app_from_save_with;
use bevy_generative_agents::persona::Persona;

use super::args::LlmArgs;

/// The most questions read from a file, and the longest question.
const MAX_QUESTIONS: usize = 1_000;
const MAX_QUESTION_CHARS: usize = 4_000;

/// `smallville interview` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct InterviewArgs {
    /// The save folder (left untouched).
    pub save: PathBuf,
    /// The persona: its full name, or the start of it (case-insensitive, must be unique).
    #[arg(long)]
    pub persona: String,
    /// One question.
    #[arg(
        long,
        conflicts_with = "questions",
        required_unless_present = "questions"
    )]
    pub question: Option<String>,
    /// A file with one question per line (blank lines skipped).
    #[arg(long, value_name = "FILE")]
    pub questions: Option<PathBuf>,
    /// Load the save even if its files differ from its manifest.json (edited by hand, or
    /// saved before checksums existed).
    #[arg(long = "trust-edited-save")]
    pub trust_edited_save: bool,
    #[command(flatten)]
    pub llm: LlmArgs,
}

/// What the observer heard.
#[derive(Resource, Default)]
struct Answers(Vec<DialogueReplied>);

/// The most a `--questions` file may hold (1 MiB: thousands of questions).
const MAX_QUESTIONS_BYTES: u64 = 1 << 20;

fn questions(args: &InterviewArgs) -> Result<Vec<String>, String> {
    let list: Vec<String> = match (&args.question, &args.questions) {
        (Some(q), _) => vec![q.clone()],
        (None, Some(file)) => {
            let text = bevy_generative_agents::files::read_text_at_most(file, MAX_QUESTIONS_BYTES)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        }
        (None, None) => return Err("give --question or --questions".into()),
    };
    if list.is_empty() {
        return Err("no questions".into());
    }
    if list.len() > MAX_QUESTIONS {
        return Err(format!("at most {MAX_QUESTIONS} questions"));
    }
    if list.iter().any(|q| q.chars().count() > MAX_QUESTION_CHARS) {
        return Err(format!(
            "a question is longer than {MAX_QUESTION_CHARS} characters"
        ));
    }
    Ok(list)
}

/// Runs the command: exit 0 with every answer printed, 1 on a save/model setup error, 2 on
/// bad flags.
pub fn interview_command(args: &InterviewArgs) -> ExitCode {
    let questions = match questions(args) {
        Ok(q) => q,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let llm = match args.llm.resolve() {
        Ok(llm) => llm,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let integrity = super::args::integrity(args.trust_edited_save);
    let (mut app, _) =
        match build_app_from_save_with(&args.save, &llm, None, None, false, integrity) {
            Ok(built) => built,
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::FAILURE;
            }
        };
    // Time stands still: the interview happens between two steps.
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Paused;
    app.init_resource::<Answers>()
        .add_observer(|e: On<DialogueReplied>, mut a: ResMut<Answers>| a.0.push(e.clone()));
    let wanted = args.persona.to_lowercase();
    let mut query = app
        .world_mut()
        .query_filtered::<(Entity, &Name), With<Persona>>();
    let matches: Vec<(Entity, String)> = query
        .iter(app.world())
        .filter(|(_, n)| {
            let name = n.as_str().to_lowercase();
            name == wanted || name.starts_with(&wanted)
        })
        .map(|(e, n)| (e, n.as_str().to_owned()))
        .collect();
    let exact = matches
        .iter()
        .find(|(_, n)| n.to_lowercase() == wanted)
        .cloned();
    let (persona, name) = match (exact, matches.as_slice()) {
        (Some(found), _) => found,
        (None, [one]) => one.clone(),
        (None, []) => {
            eprintln!("error: no persona named {:?} in the save", args.persona);
            return ExitCode::from(2);
        }
        (None, _) => {
            eprintln!("error: {:?} names several personas", args.persona);
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout().lock();
    for question in questions {
        let before = app.world().resource::<Answers>().0.len();
        app.world_mut()
            .write_message(DialogueRequest::interview(persona, question.clone()));
        let mut answer = None;
        for _ in 0..600_000 {
            app.update();
            if let Some(reply) = app.world().resource::<Answers>().0.get(before) {
                answer = Some(reply.clone());
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
        let Some(answer) = answer else {
            eprintln!("error: no answer within the time limit");
            return ExitCode::FAILURE;
        };
        let tools: Vec<serde_json::Value> = answer
            .tool_calls
            .iter()
            .map(|c| serde_json::json!({"tool": c.tool, "args": c.args, "ok": c.result.is_ok()}))
            .collect();
        let line = serde_json::json!({
            "persona": name,
            "question": question,
            "answer": answer.reply,
            "time": answer.time.to_string(),
            "tools": tools,
        });
        if writeln!(out, "{line}").is_err() {
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
