//! What the embedded local model's build (llama.cpp through `llama-cpp-sys-2`, feature
//! `local-llm`) needs from the system, checked before the long build starts: cmake, a C++
//! compiler and libclang (for the generated bindings). Shared by `build.rs` and
//! `tests/build_deps.rs`.

use std::path::{Path, PathBuf};

/// A system tool or library the build needs and does not find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// `cmake` on `PATH` (or `$CMAKE`).
    Cmake,
    /// A C++ compiler on `PATH` (`$CXX`, `c++`, `g++` or `clang++`).
    CxxCompiler,
    /// `libclang.so` in `$LIBCLANG_PATH` or the usual library folders.
    Libclang,
}

impl Missing {
    /// What it is, for the message.
    pub fn what(&self) -> &'static str {
        match self {
            Missing::Cmake => "cmake",
            Missing::CxxCompiler => "a C++ compiler (g++ or clang++)",
            Missing::Libclang => "libclang (for llama.cpp's generated bindings)",
        }
    }
}

/// Whether `program` is an executable file in one of `path`'s folders (or is a path itself).
fn on_path(program: &str, path: Option<&str>, exists: &dyn Fn(&Path) -> bool) -> bool {
    if program.contains('/') {
        return exists(Path::new(program));
    }
    path.unwrap_or_default()
        .split(':')
        .filter(|dir| !dir.is_empty())
        .any(|dir| exists(&Path::new(dir).join(program)))
}

/// The folders libclang is looked for in, as clang-sys (bindgen's loader) does on Linux.
fn libclang_dirs(
    env: &dyn Fn(&str) -> Option<String>,
    list: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = env("LIBCLANG_PATH") {
        dirs.push(PathBuf::from(dir));
    }
    for base in [
        "/usr/lib",
        "/usr/lib64",
        "/usr/local/lib",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
    ] {
        dirs.push(PathBuf::from(base));
    }
    // /usr/lib/llvm-N/lib, /usr/lib64/llvm*/lib …
    for base in ["/usr/lib", "/usr/lib64", "/usr/local"] {
        for entry in list(Path::new(base)) {
            let name = entry
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.starts_with("llvm") {
                dirs.push(entry.join("lib"));
            }
        }
    }
    dirs
}

/// What the local model's build needs and this system lacks. `env` reads environment
/// variables, `exists` tells whether a file exists, `list` lists a folder.
pub fn missing_for_local_llm(
    env: &dyn Fn(&str) -> Option<String>,
    exists: &dyn Fn(&Path) -> bool,
    list: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> Vec<Missing> {
    let path = env("PATH");
    let mut missing = Vec::new();
    let cmake = env("CMAKE").unwrap_or_else(|| "cmake".to_owned());
    if !on_path(&cmake, path.as_deref(), exists) {
        missing.push(Missing::Cmake);
    }
    let cxx = env("CXX");
    let has_cxx = match &cxx {
        Some(cxx) => on_path(
            cxx.split_whitespace().next().unwrap_or(cxx),
            path.as_deref(),
            exists,
        ),
        None => ["c++", "g++", "clang++"]
            .iter()
            .any(|p| on_path(p, path.as_deref(), exists)),
    };
    if !has_cxx {
        missing.push(Missing::CxxCompiler);
    }
    let has_libclang = libclang_dirs(env, list).iter().any(|dir| {
        list(dir).iter().any(|file| {
            file.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .is_some_and(|n| {
                    n.starts_with("libclang") && n.contains(".so") && !n.starts_with("libclang-cpp")
                })
        })
    });
    if !has_libclang {
        missing.push(Missing::Libclang);
    }
    missing
}

/// The message a build that lacks `missing` stops with: what is missing and the one command
/// that fixes it.
pub fn message(missing: &[Missing]) -> String {
    let what: Vec<&str> = missing.iter().map(Missing::what).collect();
    format!(
        "the embedded local model (feature `local-llm`, on by default) is built from llama.cpp \
         and needs {} — not found on this machine.\n\
         Fix it with one command (Debian/Ubuntu):\n\n    bash scripts/install-deps.sh\n\n\
         (it installs cmake, clang and libclang-dev, and what the game window needs), or play \
         with `bash scripts/play.sh`, which does it for you. To build without the local model \
         instead: cargo run --release --no-default-features --features cli,render,http,mimalloc",
        what.join(", ")
    )
}
