//! The real game in a real (virtual) window: `smallville --screenshot PATH --frames N` runs the
//! town with the sim going, writes a PNG of the window and exits 0; the PNG must be the window's
//! size and show a drawn town, not a blank or single-colour frame.
//!
//! Runs under `xvfb-run` with Mesa's software Vulkan (`scripts/install-deps.sh` installs both).
//! On a machine with a display and no Xvfb it uses the display. Set
//! `SMALLVILLE_SKIP_WINDOW_TEST=1` to skip it where no window can be opened at all.
#![cfg(feature = "render")]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bevy::asset::RenderAssetUsages;
use bevy::image::{CompressedImageFormats, Image, ImageSampler, ImageType};
use bevy_generative_agents::render::WINDOW_SIZE;

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("smallville-screenshot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Runs the game binary in screenshot mode; returns its combined log on failure.
fn take_screenshot(out: &Path, frames: u32) -> Result<(), String> {
    let bin = env!("CARGO_BIN_EXE_smallville");
    let game_args = [
        "--screenshot".to_string(),
        out.display().to_string(),
        "--frames".to_string(),
        frames.to_string(),
        "--speed".to_string(),
        "32".to_string(),
        "--llm-backend".to_string(),
        "scripted".to_string(),
    ];
    let mut cmd = if on_path("xvfb-run") {
        let mut c = Command::new("xvfb-run");
        c.args(["-a", "-s", "-screen 0 1600x1000x24", bin]);
        c
    } else if std::env::var_os("DISPLAY").is_some() {
        Command::new(bin)
    } else {
        panic!(
            "no X display and no xvfb-run: run scripts/install-deps.sh, or set \
             SMALLVILLE_SKIP_WINDOW_TEST=1 on a machine that cannot open windows"
        );
    };
    let log_path = out.with_extension("log");
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    let log_err = log.try_clone().map_err(|e| e.to_string())?;
    let mut child = cmd
        .args(&game_args)
        // Software Vulkan (lavapipe) works under Xvfb; OpenGL there does not.
        .env("WGPU_BACKEND", "vulkan")
        .env("RUST_LOG", "info,wgpu=error,naga=warn")
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .spawn()
        .map_err(|e| format!("cannot start the game: {e}"))?;
    // A guard against a hung window, not a speed assertion.
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "game did not exit within 10 minutes; log:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if !status.success() {
        return Err(format!(
            "game exited with {status}; log:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        ));
    }
    Ok(())
}

#[test]
fn screenshot_mode_writes_a_png_of_the_drawn_town() {
    if std::env::var_os("SMALLVILLE_SKIP_WINDOW_TEST").is_some_and(|v| v == "1") {
        eprintln!("skipped: SMALLVILLE_SKIP_WINDOW_TEST=1");
        return;
    }
    let dir = scratch_dir();
    let out = dir.join("town.png");
    if let Err(log) = take_screenshot(&out, 60) {
        panic!("{log}");
    }

    let bytes = std::fs::read(&out).expect("the screenshot file exists");
    let image = Image::from_buffer(
        &bytes,
        ImageType::Extension("png"),
        CompressedImageFormats::NONE,
        true,
        ImageSampler::Default,
        RenderAssetUsages::default(),
    )
    .expect("the screenshot is a PNG");
    assert_eq!(
        (image.width(), image.height()),
        WINDOW_SIZE,
        "the PNG has the window's size"
    );
    let data = image.data.as_ref().expect("pixels");
    let pixels = (image.width() * image.height()) as usize;
    assert_eq!(data.len(), pixels * 4, "RGBA8 pixels");

    let mut colours = HashSet::new();
    let mut counts = std::collections::HashMap::<[u8; 3], usize>::new();
    for px in data.chunks_exact(4) {
        let rgb = [px[0], px[1], px[2]];
        colours.insert(rgb);
        *counts.entry(rgb).or_default() += 1;
    }
    let most_common = counts.values().copied().max().unwrap_or(0);
    assert!(
        colours.len() > 500,
        "a drawn town has many colours, got {}",
        colours.len()
    );
    assert!(
        most_common * 2 < pixels,
        "not a blank frame: the most common colour covers {most_common} of {pixels} pixels"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
