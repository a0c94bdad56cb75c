//! `smallville`: the default town, from the command line.
//!
//! Without a subcommand it runs the game. Until the window lands (feature `render`, issue 4) the
//! game is the headless demo: the town is loaded, the personas spawn and the clock runs, and
//! the terminal shows where everyone is.

use std::path::PathBuf;
use std::process::ExitCode;

use bevy::prelude::*;
use clap::{Parser, Subcommand};

use bevy_generative_agents::headless::{DemoOptions, run_demo};
use bevy_generative_agents::llm::LlmArgs;
use bevy_generative_agents::output::{RunArgs, run};

#[derive(Parser, Debug)]
#[command(
    name = "smallville",
    version,
    about = "Generative agents in a tile-map town"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    demo: DemoArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the headless demo (the default until the desktop window lands).
    Demo(DemoArgs),
    /// Simulate N game hours headless and write movement.jsonl, summary.json and usage.json.
    Run(RunArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct DemoArgs {
    /// Game hours to simulate.
    #[arg(long, default_value_t = 1.0)]
    hours: f64,
    /// How many of the town's personas to spawn (all by default).
    #[arg(long)]
    personas: Option<usize>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A Tiled map to use instead of the default town.
    #[arg(long)]
    map: Option<PathBuf>,
    /// A folder of persona sheets to use instead of the default ones.
    #[arg(long = "personas-dir")]
    personas_dir: Option<PathBuf>,
    #[command(flatten)]
    llm: LlmArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Demo(args)) => args,
        Some(Command::Run(args)) => return run_command(&args),
        None => cli.demo,
    };
    let llm = match args.llm.resolve() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let options = DemoOptions {
        hours: args.hours,
        personas: args.personas,
        seed: args.seed,
        map: args.map,
        personas_dir: args.personas_dir,
        llm,
    };
    match run_demo(&options, &mut std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            error!("{err}");
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `smallville run`: exit code 2 for unusable flags, 1 for a failed run.
fn run_command(args: &RunArgs) -> ExitCode {
    let options = match args.to_options() {
        Ok(options) => options,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(report) => {
            println!(
                "{} steps in {:.1} s, {} LLM calls; wrote {}, {} and {}",
                report.steps,
                report.wall.as_secs_f64(),
                report.usage.totals.calls,
                report.movement_path.display(),
                report.summary_path.display(),
                report.usage_path.display()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            error!("{err}");
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
