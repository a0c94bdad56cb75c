//! A game's own town, drawn with the crate's render plugins: a map built in code (no Tiled
//! file), two persona sheets written in code, the simulation in Realtime, and the game's
//! window plugins (`GameRenderPlugins`: tiles, sprites, bubbles, camera, HUD, inspector).
//!
//! ```sh
//! cargo run --example own_town
//! cargo run --example own_town -- --frames 300 --screenshot own_town.png   # render and exit
//! ```
//!
//! The personas think with the offline town script (canned answers, not a model): insert
//! another `LlmClient` for a real one. A map without Tiled tile layers is drawn as plain
//! squares, each sector in its own colour.

use std::path::PathBuf;

use bevy::prelude::*;
use bevy::render::view::screenshot::{Screenshot, save_to_disk};
use bevy_egui::EguiPlugin;
use bevy_generative_agents::headless::{simulation_task_pools, spawn_crowd};
use bevy_generative_agents::llm::town_script_client;
use bevy_generative_agents::prelude::*;
use bevy_generative_agents::render::GameRenderPlugins;
use chrono::NaiveDate;

/// The town, row by row: `#` walls, `.` open ground, letters are places (see the legend).
const ROWS: &[&str] = &[
    "##########################",
    "#aaaaaA#kkkkkK#bbbbbbbbbB#",
    "#aaaaaa#kkkkSk#bbbbbbbbbb#",
    "#aaaaaa#kkkkkk#bbbbbCbbbb#",
    "###.#######.#######.######",
    "#..1.......2.............#",
    "#...pppppppppppppppppp...#",
    "#...pppppppppPpppppppp...#",
    "#...pppppppppppppppppp...#",
    "#........................#",
    "##########################",
];

/// What each letter of [`ROWS`] is.
const LEGEND: &[(char, &str)] = &[
    ('a', "Brookhaven:Ada's cottage:bedroom"),
    ('A', "Brookhaven:Ada's cottage:bedroom:bed"),
    ('k', "Brookhaven:Ben's flat:main room"),
    ('K', "Brookhaven:Ben's flat:main room:bed"),
    ('S', "Brookhaven:Ben's flat:main room:stove"),
    ('b', "Brookhaven:Crumb Bakery:shop floor"),
    ('B', "Brookhaven:Crumb Bakery:shop floor:oven"),
    ('C', "Brookhaven:Crumb Bakery:shop floor:counter"),
    ('p', "Brookhaven:Village green:lawn"),
    ('P', "Brookhaven:Village green:lawn:bench"),
    ('1', "<spawn_loc>ada"),
    ('2', "<spawn_loc>ben"),
];

fn sheets() -> Vec<PersonaSheet> {
    vec![
        PersonaSheet {
            name: "Ada Lovell".into(),
            first_name: "Ada".into(),
            last_name: "Lovell".into(),
            age: 34,
            innate: "early riser, cheerful, precise".into(),
            learned: "Ada Lovell is the baker of Crumb Bakery; she knows everyone in Brookhaven \
                      by their favourite loaf."
                .into(),
            currently: "Ada Lovell is trying out a rye recipe for the village fair.".into(),
            lifestyle: "Ada Lovell goes to bed around 9 pm, wakes up around 5 am, and bakes \
                        from 6 am to 2 pm."
                .into(),
            living_area: "Brookhaven:Ada's cottage:bedroom".into(),
            workplace: Some("Brookhaven:Crumb Bakery:shop floor".into()),
            daily_plan_req: "Ada Lovell bakes at Crumb Bakery from 6 am to 2 pm.".into(),
            spawn: "ada".into(),
            known_sectors: None,
            params: None,
        },
        PersonaSheet {
            name: "Ben Okoro".into(),
            first_name: "Ben".into(),
            last_name: "Okoro".into(),
            age: 71,
            innate: "curious, talkative, patient".into(),
            learned: "Ben Okoro is a retired schoolteacher who feeds the birds on the village \
                      green."
                .into(),
            currently: "Ben Okoro is writing a short history of Brookhaven.".into(),
            lifestyle: "Ben Okoro goes to bed around 10 pm and wakes up around 7 am.".into(),
            living_area: "Brookhaven:Ben's flat:main room".into(),
            workplace: None,
            daily_plan_req: "Ben Okoro buys bread every morning and writes in the afternoon."
                .into(),
            spawn: "ben".into(),
            known_sectors: None,
            params: None,
        },
    ]
}

/// `--frames N`: render N frames, then exit (saving `--screenshot PATH` first, if given).
#[derive(Resource, Debug, Default)]
struct ExitAfter {
    frames: Option<u32>,
    screenshot: Option<PathBuf>,
    seen: u32,
}

fn main() -> Result<AppExit, Box<dyn std::error::Error>> {
    let mut exit_after = ExitAfter::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--frames" => exit_after.frames = Some(args.next().ok_or("--frames N")?.parse()?),
            "--screenshot" => {
                exit_after.screenshot = Some(args.next().ok_or("--screenshot PATH")?.into());
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }

    let map = TownMap::from_ascii("Brookhaven", ROWS, LEGEND)?;
    let morning = NaiveDate::from_ymd_opt(2023, 2, 13)
        .and_then(|d| d.and_hms_opt(7, 0, 0))
        .ok_or("bad start time")?;

    let mut app = App::new();
    app.add_plugins(
        DefaultPlugins
            .set(ImagePlugin::default_nearest())
            .set(simulation_task_pools()),
    )
    .add_plugins(EguiPlugin::default())
    .insert_resource(town_script_client(3))
    .insert_resource(
        SimClock::new(morning, 10)
            .with_mode(TimeMode::Realtime)
            .with_speed(SimSpeed::X8),
    )
    .add_plugins(GenerativeAgentsPlugins)
    .add_plugins(GameRenderPlugins)
    .insert_resource(exit_after)
    .add_systems(Last, exit_after_frames);
    spawn_crowd(&mut app, map, &sheets(), 3)?;
    Ok(app.run())
}

fn exit_after_frames(
    mut commands: Commands,
    mut state: ResMut<ExitAfter>,
    mut exit: MessageWriter<AppExit>,
) {
    let Some(frames) = state.frames else {
        return;
    };
    state.seen += 1;
    if state.seen == frames
        && let Some(path) = state.screenshot.clone()
    {
        commands
            .spawn(Screenshot::primary_window())
            .observe(save_to_disk(path));
    }
    // A few frames for the screenshot to be captured and written.
    if state.seen >= frames + 10 {
        exit.write(AppExit::Success);
    }
}
