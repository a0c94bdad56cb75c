//! The build's early check for the local model's system packages (`build/deps.rs`, run by
//! `build.rs`): on a machine without cmake, a C++ compiler or libclang it names each missing
//! piece and the one command that installs them, before any long build starts.

#[path = "../build/deps.rs"]
mod deps;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use deps::{Missing, message, missing_for_local_llm};

/// A pretend machine: these files exist, nothing else.
struct Machine {
    files: BTreeSet<PathBuf>,
    env: Vec<(&'static str, String)>,
}

impl Machine {
    fn new(files: &[&str]) -> Self {
        Self {
            files: files.iter().map(PathBuf::from).collect(),
            env: vec![("PATH", "/usr/local/bin:/usr/bin:/bin".to_owned())],
        }
    }

    fn missing(&self) -> Vec<Missing> {
        missing_for_local_llm(
            &|var| {
                self.env
                    .iter()
                    .find(|(k, _)| *k == var)
                    .map(|(_, v)| v.clone())
            },
            &|path| self.files.contains(path),
            &|dir: &Path| {
                let mut entries: BTreeSet<PathBuf> = BTreeSet::new();
                for file in &self.files {
                    if let Ok(rest) = file.strip_prefix(dir)
                        && let Some(first) = rest.components().next()
                    {
                        entries.insert(dir.join(first));
                    }
                }
                entries.into_iter().collect()
            },
        )
    }
}

const DEBIAN_WITH_PACKAGES: &[&str] = &[
    "/usr/bin/cmake",
    "/usr/bin/g++",
    "/usr/lib/llvm-14/lib/libclang-14.so.1",
    "/usr/lib/llvm-14/lib/libclangAST.a",
];

#[test]
fn a_machine_with_the_packages_passes() {
    assert_eq!(Machine::new(DEBIAN_WITH_PACKAGES).missing(), vec![]);
    // libclang in the multiarch folder, clang++ as the compiler: also fine.
    let other = Machine::new(&[
        "/usr/local/bin/cmake",
        "/usr/bin/clang++",
        "/usr/lib/x86_64-linux-gnu/libclang.so.1",
    ]);
    assert_eq!(other.missing(), vec![]);
}

#[test]
fn a_bare_machine_is_told_everything_it_lacks() {
    // A fresh Debian with only the Rust toolchain and gcc (no g++): nothing of the three.
    let bare = Machine::new(&["/usr/bin/gcc", "/usr/lib/llvm-14/lib/libclang-cpp.so.14"]);
    assert_eq!(
        bare.missing(),
        vec![Missing::Cmake, Missing::CxxCompiler, Missing::Libclang]
    );
    let text = message(&bare.missing());
    assert!(text.contains("cmake"), "{text}");
    assert!(text.contains("libclang"), "{text}");
    assert!(text.contains("bash scripts/install-deps.sh"), "{text}");
    assert!(text.contains("--no-default-features"), "{text}");
}

#[test]
fn each_piece_is_checked_on_its_own() {
    let without = |gone: &str| {
        let files: Vec<&str> = DEBIAN_WITH_PACKAGES
            .iter()
            .copied()
            .filter(|f| *f != gone)
            .collect();
        Machine::new(&files).missing()
    };
    assert_eq!(without("/usr/bin/cmake"), vec![Missing::Cmake]);
    assert_eq!(without("/usr/bin/g++"), vec![Missing::CxxCompiler]);
    assert_eq!(
        without("/usr/lib/llvm-14/lib/libclang-14.so.1"),
        vec![Missing::Libclang]
    );
}

#[test]
fn environment_overrides_are_honoured() {
    let mut machine = Machine::new(&["/opt/cmake/bin/cmake", "/opt/cxx", "/opt/llvm/libclang.so"]);
    machine.env = vec![
        ("PATH", "/usr/bin".to_owned()),
        ("CMAKE", "/opt/cmake/bin/cmake".to_owned()),
        ("CXX", "/opt/cxx -std=c++17".to_owned()),
        ("LIBCLANG_PATH", "/opt/llvm".to_owned()),
    ];
    assert_eq!(machine.missing(), vec![]);
}

#[test]
fn this_machine_after_install_deps_has_everything() {
    // CI and the test command run scripts/install-deps.sh first, so the real check passes
    // here; were it not so, the build itself would have stopped before this test ran.
    let real = missing_for_local_llm(
        &|var| std::env::var(var).ok().filter(|v| !v.is_empty()),
        &|path| path.is_file(),
        &|dir| {
            std::fs::read_dir(dir)
                .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default()
        },
    );
    if cfg!(all(target_os = "linux", feature = "local-llm")) {
        assert_eq!(real, vec![], "{}", message(&real));
    }
}
