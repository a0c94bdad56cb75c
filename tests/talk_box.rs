//! The talk box in the real game window (under Xvfb): a player selects a persona with `Tab`,
//! opens the box with `Enter`, types a message key by key and sends it with `Enter` — all as
//! Bevy keyboard input, the same messages winit writes. The test then checks, in the running
//! game, that
//! - the request that went out is the typed text, said by the player to that persona;
//! - the typed keys reached no game shortcut (a `4` did not change the speed, an `f` did not
//!   toggle follow — turned off with `F` before the box opened — `a`/`d` did not pan the camera, `Tab` did not change the selection);
//! - the persona's answer ([`DialogueReplied`]) is in the inspector's talk box ([`TalkView`])
//!   and types out in full in the persona's dialogue bubble ([`ChatLine`]).
//!
//! Then it writes a screenshot of the window (`TALK_BOX_SCREENSHOT=path` keeps it; the one in
//! `docs/talk_box.png` was made so).
//!
//! The game runs on the offline scripted stand-in (canned answers, not a language model), so
//! the check is about the box and the pipeline, not about what a model would say.
//!
//! A window needs the main thread, so this test has its own `main` (`harness = false`): it
//! starts itself again under `xvfb-run` with a virtual display and software Vulkan. Set
//! `SMALLVILLE_SKIP_WINDOW_TEST=1` where no window can be opened at all.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use bevy::input::ButtonState;
use bevy::input::keyboard::{Key, KeyboardInput, NativeKeyCode};
use bevy::prelude::*;
use bevy::render::view::screenshot::{Screenshot, save_to_disk};
use bevy::window::PrimaryWindow;
use bevy_egui::input::EguiWantsInput;
use bevy_generative_agents::clock::{SimClock, SimSpeed};
use bevy_generative_agents::dialogue::{DialogueMode, DialogueReplied, DialogueRequest};
use bevy_generative_agents::llm::{BackendChoice, LlmConfig};
use bevy_generative_agents::persist::SaveIntegrity;
use bevy_generative_agents::persona::Persona;
use bevy_generative_agents::render::{
    ChatBubble, ChatLine, DEFAULT_GAME_START, GameCamera, GameOptions, PLAYER, Selected, TalkView,
    build_game_app,
};

/// What the player types (a `4`, an `f` and `w a s d` among the letters: game shortcuts).
const MESSAGE: &str = "Hi, what are you doing at 4? I was walking past with my dog.";
/// A guard against a hung window, not a speed assertion.
const GIVE_UP_AFTER: Duration = Duration::from_secs(300);
const INNER: &str = "TALK_BOX_IN_WINDOW";

fn main() -> ExitCode {
    if std::env::var_os("SMALLVILLE_SKIP_WINDOW_TEST").is_some_and(|v| v == "1") {
        eprintln!("talk_box: skipped (SMALLVILLE_SKIP_WINDOW_TEST=1)");
        return ExitCode::SUCCESS;
    }
    // `cargo test -- --list` and filters: this file is one test.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("the_talk_box_sends_typed_text_and_shows_the_reply: test");
        return ExitCode::SUCCESS;
    }
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-'))
        && !"the_talk_box_sends_typed_text_and_shows_the_reply".contains(filter.as_str())
    {
        return ExitCode::SUCCESS;
    }
    if std::env::var_os(INNER).is_some() {
        return in_window();
    }
    let exe = std::env::current_exe().expect("the test's own path");
    let mut cmd = if on_path("xvfb-run") {
        let mut c = Command::new("xvfb-run");
        c.args(["-a", "-s", "-screen 0 1600x1000x24"]).arg(exe);
        c
    } else if std::env::var_os("DISPLAY").is_some() {
        Command::new(exe)
    } else {
        eprintln!(
            "talk_box: no X display and no xvfb-run: run scripts/install-deps.sh, or set \
             SMALLVILLE_SKIP_WINDOW_TEST=1 on a machine that cannot open windows"
        );
        return ExitCode::FAILURE;
    };
    let status = cmd
        .env(INNER, "1")
        // Software Vulkan (lavapipe) works under Xvfb; OpenGL there does not.
        .env("WGPU_BACKEND", "vulkan")
        .env("RUST_LOG", "warn,wgpu=error,naga=warn")
        .status()
        .expect("the window test starts");
    println!(
        "test the_talk_box_sends_typed_text_and_shows_the_reply ... {}",
        if status.success() { "ok" } else { "FAILED" }
    );
    if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Where the script stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting for the town to be up.
    Start,
    /// `Tab` pressed: a persona gets selected (and followed).
    Selecting,
    /// `F` pressed: the camera stops following, so only a leaked key could move it.
    Unfollowing,
    /// `Enter` pressed: the box should take the keyboard.
    Opening,
    /// Typing the message, one key a frame.
    Typing(usize),
    /// `Enter` pressed: waiting for the reply.
    Sent,
    /// The reply is in the box and the bubble: the screenshot is on its way.
    Shooting,
}

/// The test's state, shared by its systems.
#[derive(Resource)]
struct Script {
    stage: Stage,
    frame: u32,
    started: Instant,
    /// The frame the stage started.
    since: u32,
    /// The key to release next frame.
    held: Option<(KeyCode, Key)>,
    selected: Option<Entity>,
    /// Speed, follow and camera before typing.
    before: Option<(SimSpeed, bool, f32)>,
    requests: Vec<DialogueRequest>,
    reply: Option<DialogueReplied>,
    failure: Option<String>,
    shot: PathBuf,
}

fn in_window() -> ExitCode {
    let shot = std::env::var_os("TALK_BOX_SCREENSHOT").map_or_else(
        || std::env::temp_dir().join(format!("talk_box-{}.png", std::process::id())),
        PathBuf::from,
    );
    let _ = std::fs::remove_file(&shot);
    let options = GameOptions {
        personas: Some(3),
        seed: 7,
        map: None,
        personas_dir: None,
        llm: LlmConfig {
            backend: BackendChoice::Scripted,
            ..LlmConfig::default()
        },
        speed: SimSpeed::X1,
        follow: None,
        screenshot: None,
        load: None,
        integrity: SaveIntegrity::Verify,
        save_dir: std::env::temp_dir().join(format!("talk_box-saves-{}", std::process::id())),
        start: DEFAULT_GAME_START,
        fast_forward_nights: false,
        directive: None,
        stage: None,
        lean: false,
    };
    let mut app = match build_game_app(&options) {
        Ok(app) => app,
        Err(err) => {
            eprintln!("talk_box: the game could not be built: {err}");
            return ExitCode::FAILURE;
        }
    };
    app.insert_resource(Script {
        stage: Stage::Start,
        frame: 0,
        started: Instant::now(),
        since: 0,
        held: None,
        selected: None,
        before: None,
        requests: Vec::new(),
        reply: None,
        failure: None,
        shot: shot.clone(),
    })
    .add_observer(|replied: On<DialogueReplied>, mut script: ResMut<Script>| {
        script.reply = Some(replied.event().clone());
    })
    // Keys go in before Bevy's and egui's input systems read them (PreUpdate).
    .add_systems(First, play_keys)
    .add_systems(Update, (hear_requests, check));
    let exit = app.run();
    // The window's runner keeps the world: the checks left their verdict here.
    let verdict = VERDICT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    match verdict {
        Some(Ok(summary)) if exit.is_success() && shot.is_file() => {
            eprintln!("talk_box: ok — {summary}; screenshot {}", shot.display());
            ExitCode::SUCCESS
        }
        Some(Err(failure)) => {
            eprintln!("talk_box: FAILED: {failure}");
            ExitCode::FAILURE
        }
        other => {
            eprintln!(
                "talk_box: FAILED: the game exited with {exit:?} (verdict {other:?}, screenshot \
                 written: {})",
                shot.is_file()
            );
            ExitCode::FAILURE
        }
    }
}

/// The checks' verdict, read after the window closed.
static VERDICT: std::sync::Mutex<Option<Result<String, String>>> = std::sync::Mutex::new(None);

/// Fails the test: the verdict, and the game exits with an error.
fn fail(why: impl Into<String>, script: &mut Script, exit: &mut MessageWriter<AppExit>) {
    let why = why.into();
    give_verdict(Err(why.clone()));
    script.failure = Some(why);
    exit.write(AppExit::error());
}

fn give_verdict(verdict: Result<String, String>) {
    *VERDICT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(verdict);
}

/// The key a character is typed with, and its logical key.
fn key_for(c: char) -> (KeyCode, Key) {
    let code = match c.to_ascii_lowercase() {
        'a' => KeyCode::KeyA,
        'b' => KeyCode::KeyB,
        'c' => KeyCode::KeyC,
        'd' => KeyCode::KeyD,
        'e' => KeyCode::KeyE,
        'f' => KeyCode::KeyF,
        'g' => KeyCode::KeyG,
        'h' => KeyCode::KeyH,
        'i' => KeyCode::KeyI,
        'j' => KeyCode::KeyJ,
        'k' => KeyCode::KeyK,
        'l' => KeyCode::KeyL,
        'm' => KeyCode::KeyM,
        'n' => KeyCode::KeyN,
        'o' => KeyCode::KeyO,
        'p' => KeyCode::KeyP,
        'q' => KeyCode::KeyQ,
        'r' => KeyCode::KeyR,
        's' => KeyCode::KeyS,
        't' => KeyCode::KeyT,
        'u' => KeyCode::KeyU,
        'v' => KeyCode::KeyV,
        'w' => KeyCode::KeyW,
        'x' => KeyCode::KeyX,
        'y' => KeyCode::KeyY,
        'z' => KeyCode::KeyZ,
        '4' => KeyCode::Digit4,
        ' ' => return (KeyCode::Space, Key::Space),
        ',' => KeyCode::Comma,
        '.' => KeyCode::Period,
        _ => KeyCode::Unidentified(NativeKeyCode::Unidentified),
    };
    (code, Key::Character(c.to_string().into()))
}

fn key_message(window: Entity, code: KeyCode, key: &Key, state: ButtonState) -> KeyboardInput {
    let text = match (key, state) {
        (Key::Character(c), ButtonState::Pressed) => Some(c.clone()),
        (Key::Space, ButtonState::Pressed) => Some(" ".into()),
        _ => None,
    };
    KeyboardInput {
        key_code: code,
        logical_key: key.clone(),
        state,
        text,
        repeat: false,
        window,
    }
}

/// Presses the script's keys: one key down a frame, up the next.
fn play_keys(
    mut script: ResMut<Script>,
    window: Query<Entity, With<PrimaryWindow>>,
    personas: Query<(), With<Persona>>,
    mut keys: MessageWriter<KeyboardInput>,
) {
    script.frame += 1;
    let Ok(window) = window.single() else { return };
    if let Some((code, key)) = script.held.take() {
        keys.write(key_message(window, code, &key, ButtonState::Released));
        return;
    }
    let frame = script.frame;
    let press = match script.stage {
        // A few dozen frames for the town, its sprites and the first egui pass.
        Stage::Start if frame > 60 && personas.iter().count() == 3 => {
            script.stage = Stage::Selecting;
            Some((KeyCode::Tab, Key::Tab))
        }
        Stage::Unfollowing if frame == script.since + 2 => {
            Some((KeyCode::KeyF, Key::Character("f".into())))
        }
        Stage::Opening if frame == script.since + 2 => Some((KeyCode::Enter, Key::Enter)),
        Stage::Typing(i) if frame > script.since + 4 => match MESSAGE.chars().nth(i) {
            Some(c) => {
                script.stage = Stage::Typing(i + 1);
                Some(key_for(c))
            }
            None => {
                script.stage = Stage::Sent;
                script.since = frame;
                Some((KeyCode::Enter, Key::Enter))
            }
        },
        _ => None,
    };
    if let Some((code, key)) = press {
        keys.write(key_message(window, code, &key, ButtonState::Pressed));
        script.held = Some((code, key));
    }
}

fn hear_requests(mut requests: MessageReader<DialogueRequest>, mut script: ResMut<Script>) {
    script.requests.extend(requests.read().cloned());
}

/// Checks each stage's outcome and moves the script on; fails with what it saw.
#[expect(clippy::too_many_arguments, reason = "everything the checks look at")]
fn check(
    mut script: ResMut<Script>,
    selected: Res<Selected>,
    clock: Res<SimClock>,
    camera: Query<&Transform, With<GameCamera>>,
    wants: Res<EguiWantsInput>,
    talk: Res<TalkView>,
    names: Query<&Name, With<Persona>>,
    children: Query<&Children>,
    bubbles: Query<(), With<ChatBubble>>,
    lines: Query<&ChatLine>,
    mut commands: Commands,
    mut exit: MessageWriter<AppExit>,
) {
    if let Some(failure) = &script.failure {
        give_verdict(Err(failure.clone()));
        return;
    }
    if script.started.elapsed() > GIVE_UP_AFTER {
        fail(
            format!(
                "stuck at {:?} after {} frames (requests {:?}, reply {:?}, talk box {:?})",
                script.stage, script.frame, script.requests, script.reply, talk.lines
            ),
            &mut script,
            &mut exit,
        );
        return;
    }
    let frame = script.frame;
    match script.stage {
        Stage::Selecting if script.held.is_none() => {
            let Some(entity) = selected.entity else {
                fail("Tab selected nobody", &mut script, &mut exit);
                return;
            };
            script.selected = Some(entity);
            script.stage = Stage::Unfollowing;
            script.since = frame;
        }
        Stage::Unfollowing if frame >= script.since + 6 => {
            if selected.follow {
                fail("F did not stop following", &mut script, &mut exit);
                return;
            }
            script.stage = Stage::Opening;
            script.since = frame;
        }
        Stage::Opening if frame >= script.since + 6 => {
            if !wants.wants_keyboard_input() {
                fail(
                    "Enter did not give the talk box the keyboard",
                    &mut script,
                    &mut exit,
                );
                return;
            }
            script.before = Some((clock.speed, selected.follow, camera_position(&camera)));
            script.stage = Stage::Typing(0);
            script.since = frame;
        }
        Stage::Sent => {
            let (Some(persona), Some(reply)) = (script.selected, script.reply.clone()) else {
                return;
            };
            // The typed keys reached no game shortcut.
            let after = (clock.speed, selected.follow, camera_position(&camera));
            if script.before != Some(after) || selected.entity != Some(persona) {
                fail(
                    format!(
                        "typing reached the game's shortcuts: speed/follow/camera {:?} → {after:?}, \
                     selection {:?} → {:?}",
                        script.before, script.selected, selected.entity
                    ),
                    &mut script,
                    &mut exit,
                );
                return;
            }
            let expected = DialogueRequest {
                persona,
                speaker: PLAYER.to_owned(),
                mode: DialogueMode::Say(MESSAGE.to_owned()),
            };
            if script.requests != [expected] {
                fail(
                    format!(
                        "the box sent {:?}, not the typed text once",
                        script.requests
                    ),
                    &mut script,
                    &mut exit,
                );
                return;
            }
            // The stand-in's reply is one short line about the persona (never prompt text).
            if reply.persona != persona
                || reply.reply.trim().is_empty()
                || reply.reply.contains('\n')
                || reply.reply.chars().count() > 200
            {
                fail(
                    format!("a reply from the wrong persona or empty: {reply:?}"),
                    &mut script,
                    &mut exit,
                );
                return;
            }
            let Ok(name) = names.get(persona) else { return };
            // In the inspector: the player's line and the reply.
            let in_box = talk.persona == Some(persona)
                && talk.lines.contains(&format!("{PLAYER}: {MESSAGE}"))
                && talk
                    .lines
                    .contains(&format!("{}: {}", name.as_str(), reply.reply));
            // In the bubble: the reply typed out in full.
            let in_bubble = children.get(persona).is_ok_and(|kids| {
                kids.iter().filter(|k| bubbles.contains(*k)).any(|bubble| {
                    children.get(bubble).is_ok_and(|texts| {
                        texts
                            .iter()
                            .any(|t| lines.get(t).is_ok_and(|l| l.0 == reply.reply))
                    })
                })
            });
            if in_box && in_bubble {
                commands
                    .spawn(Screenshot::primary_window())
                    .observe(save_to_disk(script.shot.clone()));
                script.stage = Stage::Shooting;
                script.since = frame;
            }
        }
        Stage::Shooting if script.shot.is_file() && frame > script.since + 10 => {
            give_verdict(Ok(format!(
                "{} frames; sent {:?}; reply {:?}",
                script.frame,
                MESSAGE,
                script.reply.as_ref().map(|r| r.reply.as_str())
            )));
            exit.write(AppExit::Success);
        }
        _ => {}
    }
}

/// Where the camera looks across (a leaked `a` or `d` moves it; the message has six `a`s and two
/// `d`s). Only x: the view's y follows the top bar, whose start-up hint goes away after 30 s.
fn camera_position(camera: &Query<&Transform, With<GameCamera>>) -> f32 {
    camera.single().map_or(f32::NAN, |t| t.translation.x)
}
