//! Reading a file someone handed us, never more of it than its kind may hold.
//!
//! Saves, maps, model configs, eval items and question lists come from users, other tools
//! and earlier runs; a damaged or hostile one may be of any size (or a device that never
//! ends). Every loader reads through [`read_at_most`] with a limit of its own, so a bad file
//! is a clear error naming its size, never an allocation as large as the file.
//!
//! The crate's own files — the shipped towns, persona sheets, fonts — are found by
//! [`crate_file`]: where `BEVY_ASSET_ROOT` says (Bevy's variable for the folder holding
//! `assets/`), in the checkout the binary was built from, or beside the executable (a release
//! binary copied elsewhere with its `assets/` folder next to it).
//!
//! **Layer** (see `tests/layers.rs`): the ground, next to [`settings`](crate::settings).

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The crate's own file at `relative` (say `assets/maps/willowbrook.tmx`): the first that
/// exists under `BEVY_ASSET_ROOT`, the checkout the crate was built from, or the executable's
/// folder and the three above it (`target/release/` sits two below a checkout); else the path
/// in the checkout (so a missing file's error names where it was expected).
pub fn crate_file(relative: impl AsRef<Path>) -> PathBuf {
    let relative = relative.as_ref();
    let built_from = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let from_env = std::env::var_os("BEVY_ASSET_ROOT")
        .filter(|root| !root.is_empty())
        .map(PathBuf::from);
    let beside_exe: Vec<PathBuf> = std::env::current_exe()
        .ok()
        .map(|exe| {
            exe.ancestors()
                .skip(1)
                .take(4)
                .map(Path::to_path_buf)
                .collect()
        })
        .unwrap_or_default();
    let roots = from_env
        .into_iter()
        .chain([built_from.clone()])
        .chain(beside_exe);
    first_existing(relative, roots).unwrap_or_else(|| built_from.join(relative))
}

/// `path` as a save stores it: relative to the crate's asset root (`assets/maps/…`) when it is
/// the crate's own file there, so the save opens on another machine with its own checkout;
/// any other path as it is. [`resolve_crate_path`] finds it again.
pub fn portable_crate_path(path: &Path) -> PathBuf {
    let Some(suffix) = assets_suffix(path) else {
        return path.to_path_buf();
    };
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same(path, &crate_file(&suffix)) {
        suffix
    } else {
        path.to_path_buf()
    }
}

/// A path a save stored, as this machine finds it: an absolute path that exists as it is; a
/// relative one from the working folder if it is there, else as the crate's own file
/// ([`crate_file`]); an absolute path that does not exist here (a save written on another
/// machine before saves stored maps relative) by its part from `assets/` on, when this
/// machine's asset root has it.
pub fn resolve_crate_path(stored: &Path) -> PathBuf {
    if stored.is_absolute() {
        if stored.exists() {
            return stored.to_path_buf();
        }
        return match assets_suffix(stored).map(crate_file) {
            Some(found) if found.exists() => found,
            _ => stored.to_path_buf(),
        };
    }
    if stored.exists() {
        return stored.to_path_buf();
    }
    crate_file(stored)
}

/// The part of `path` from its last `assets` folder on (`assets/maps/willowbrook.tmx`).
fn assets_suffix(path: &Path) -> Option<PathBuf> {
    let parts: Vec<_> = path.components().collect();
    let at = parts
        .iter()
        .rposition(|c| matches!(c, std::path::Component::Normal(n) if *n == "assets"))?;
    let suffix: PathBuf = parts[at..].iter().collect();
    (parts.len() > at + 1).then_some(suffix)
}

/// `relative` under the first of `roots` that has it.
fn first_existing(relative: &Path, roots: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    roots
        .into_iter()
        .map(|root| root.join(relative))
        .find(|path| path.exists())
}

/// The most a font file may hold (64 MiB; the emoji font is about 10 MB): a path to something
/// else is skipped unread.
pub const MAX_FONT_BYTES: u64 = 64 << 20;

/// Why [`read_at_most`] read nothing.
#[derive(Debug)]
pub enum ReadError {
    /// The file could not be opened or read.
    Io(std::io::Error),
    /// The file holds more than the limit.
    TooLarge {
        /// Its size, or the bytes read before the limit was passed (a file whose size the
        /// file system does not report).
        bytes: u64,
        /// The limit.
        limit: u64,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(err) => err.fmt(f),
            Self::TooLarge { bytes, limit } => {
                write!(
                    f,
                    "{bytes} bytes, more than the {limit} such a file may have"
                )
            }
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(err) => Some(err),
            Self::TooLarge { .. } => None,
        }
    }
}

/// For loaders whose errors carry an I/O error: a file too large is `InvalidData`, its message
/// kept.
impl From<ReadError> for std::io::Error {
    fn from(err: ReadError) -> Self {
        match err {
            ReadError::Io(err) => err,
            too_large @ ReadError::TooLarge { .. } => {
                Self::new(std::io::ErrorKind::InvalidData, too_large.to_string())
            }
        }
    }
}

impl ReadError {
    /// The I/O error kind, if reading failed (`NotFound` for a missing file).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Self::Io(err) => Some(err.kind()),
            Self::TooLarge { .. } => None,
        }
    }
}

/// Reads the whole file at `path` if it holds at most `limit` bytes: a larger one is refused
/// by its reported size before anything is read, and a file that does not report its size is
/// read no further than one byte past the limit.
pub fn read_at_most(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let file = std::fs::File::open(path).map_err(ReadError::Io)?;
    let reported = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    if let Some(bytes) = reported
        && bytes > limit
    {
        return Err(ReadError::TooLarge { bytes, limit });
    }
    // The reported size (capped) is only a hint: a file may grow while it is read.
    let hint = reported.unwrap_or(0).min(limit);
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    let read = bytes.len() as u64;
    if read > limit {
        return Err(ReadError::TooLarge { bytes: read, limit });
    }
    Ok(bytes)
}

/// [`read_at_most`] for a text file: UTF-8, or an `InvalidData` error.
pub fn read_text_at_most(path: &Path, limit: u64) -> Result<String, ReadError> {
    let bytes = read_at_most(path, limit)?;
    String::from_utf8(bytes).map_err(|err| {
        ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text: {}", err.utf8_error()),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("bga-files-{name}-{}.bin", std::process::id()));
        std::fs::write(&path, bytes).expect("write");
        path
    }

    #[test]
    fn a_crate_file_is_found_in_the_first_root_that_has_it() {
        let base = std::env::temp_dir().join(format!("bga-files-roots-{}", std::process::id()));
        let (a, b) = (base.join("a"), base.join("b"));
        let file = Path::new("assets/maps/town.tmx");
        for root in [&a, &b] {
            std::fs::create_dir_all(root.join("assets/maps")).expect("dirs");
        }
        std::fs::write(b.join(file), b"b").expect("write");
        let roots = || [a.clone(), b.clone()];
        assert_eq!(first_existing(file, roots()), Some(b.join(file)));
        std::fs::write(a.join(file), b"a").expect("write");
        assert_eq!(first_existing(file, roots()), Some(a.join(file)));
        assert_eq!(first_existing(Path::new("assets/none"), roots()), None);
        let _ = std::fs::remove_dir_all(&base);
        // The shipped town is found (in the checkout the tests were built from).
        assert!(crate_file("assets/maps/willowbrook.tmx").is_file());
        let missing = crate_file("assets/definitely-not-here.tmx");
        assert!(
            missing.starts_with(env!("CARGO_MANIFEST_DIR")),
            "{missing:?}"
        );
    }

    #[test]
    fn reads_a_file_up_to_the_limit() {
        let path = temp("fits", b"hello");
        assert_eq!(read_at_most(&path, 5).expect("fits"), b"hello");
        assert_eq!(read_text_at_most(&path, 10).expect("fits"), "hello");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn refuses_a_file_past_the_limit_by_its_size() {
        let path = temp("large", b"hello!");
        let err = read_at_most(&path, 5).expect_err("too large");
        assert!(
            matches!(err, ReadError::TooLarge { bytes: 6, limit: 5 }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "6 bytes, more than the 5 such a file may have"
        );
        let _ = std::fs::remove_file(path);
    }

    #[cfg(unix)]
    #[test]
    fn an_endless_device_is_read_one_byte_past_the_limit() {
        let err = read_at_most(Path::new("/dev/zero"), 1 << 10).expect_err("endless");
        assert!(
            matches!(
                err,
                ReadError::TooLarge {
                    bytes: 1025,
                    limit: 1024
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_missing_file_and_bad_text_are_io_errors() {
        let missing = read_at_most(Path::new("/definitely/not/here"), 10).expect_err("missing");
        assert_eq!(missing.io_kind(), Some(std::io::ErrorKind::NotFound));
        let path = temp("latin1", &[0x66, 0xff, 0x6f]);
        let bad = read_text_at_most(&path, 10).expect_err("not UTF-8");
        assert_eq!(bad.io_kind(), Some(std::io::ErrorKind::InvalidData));
        assert!(bad.to_string().starts_with("not UTF-8 text"), "{bad}");
        let _ = std::fs::remove_file(path);
    }
}
