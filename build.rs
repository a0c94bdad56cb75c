//! Stops the build at once, with the command that fixes it, when the system lacks what the
//! embedded local model's C++ build needs — instead of failing deep inside llama.cpp's build
//! script many minutes in (see `build/deps.rs`). Only with the `local-llm` feature, only on
//! Linux; `GA_SKIP_DEPS_CHECK=1` skips it.

#[path = "build/deps.rs"]
mod deps;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/deps.rs");
    println!("cargo:rerun-if-env-changed=GA_SKIP_DEPS_CHECK");
    let wanted = std::env::var_os("CARGO_FEATURE_LOCAL_LLM").is_some()
        && std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("GA_SKIP_DEPS_CHECK").as_deref() != Ok("1");
    if !wanted {
        return;
    }
    let missing = deps::missing_for_local_llm(
        &|var| std::env::var(var).ok().filter(|v| !v.is_empty()),
        &|path| path.is_file(),
        &|dir| {
            std::fs::read_dir(dir)
                .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default()
        },
    );
    if !missing.is_empty() {
        eprintln!("\nerror: {}\n", deps::message(&missing));
        std::process::exit(1);
    }
}
