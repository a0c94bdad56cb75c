//! Folder-level file handling: atomic swaps of a whole save folder, recovery after a crash in the
//! middle of a swap, and reading files with errors that name them.
//!
//! A save is written into a hidden sibling (`.NAME.saving`), every file synced, the folder
//! synced; then the old save is renamed aside (`.NAME.previous`), the new one renamed into
//! place, and the old one deleted. The two renames are the only window in which `NAME` is
//! missing; a crash there leaves `.NAME.previous` (the last complete save), which
//! [`recover_interrupted_save`] puts back before anything is read. A crash at any other point
//! leaves `NAME` untouched (the `.saving` sibling is simply discarded by the next save).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::PersistError;
use crate::files::{ReadError, read_at_most};

/// A save's files: paths relative to the save folder, and their bytes.
pub(crate) type SaveFiles = Vec<(PathBuf, Vec<u8>)>;

/// The hidden sibling a save is written into before the swap.
pub(crate) fn saving_path(dir: &Path) -> PathBuf {
    sibling(dir, "saving")
}

/// The hidden sibling the previous save is moved to during the swap.
pub(crate) fn previous_path(dir: &Path) -> PathBuf {
    sibling(dir, "previous")
}

fn sibling(dir: &Path, tag: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "save".to_owned());
    dir.with_file_name(format!(".{name}.{tag}"))
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> PersistError + '_ {
    move |source| PersistError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Syncs a directory so renames and new entries in it survive a power cut. Some platforms
/// cannot open directories for syncing; there the rename is still atomic, only less durable.
fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}

/// If a swap into `dir` was interrupted between its two renames (`dir` missing,
/// `.dir.previous` present), moves the previous save back. Returns whether it did.
pub fn recover_interrupted_save(dir: &Path) -> Result<bool, PersistError> {
    let previous = previous_path(dir);
    if dir.exists() || !previous.is_dir() {
        return Ok(false);
    }
    std::fs::rename(&previous, dir).map_err(io_err(dir))?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent);
    }
    Ok(true)
}

/// Writes `files` (paths relative to `dir`) as the complete new content of `dir`, atomically:
/// see the [module docs](self). On error `dir` is left as it was.
pub(crate) fn write_folder_atomic(
    dir: &Path,
    files: &[(PathBuf, Vec<u8>)],
) -> Result<(), PersistError> {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io_err(&parent))?;
    recover_interrupted_save(dir)?;
    let staging = saving_path(dir);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io_err(&staging))?;
    }
    let result = write_tree(&staging, files);
    if let Err(err) = result {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(err);
    }
    sync_dir(&parent);

    let previous = previous_path(dir);
    if previous.exists() {
        std::fs::remove_dir_all(&previous).map_err(io_err(&previous))?;
    }
    let had_old = dir.exists();
    if had_old {
        std::fs::rename(dir, &previous).map_err(io_err(dir))?;
    }
    if let Err(source) = std::fs::rename(&staging, dir) {
        if had_old {
            // Put the old save back; it is still complete.
            let _ = std::fs::rename(&previous, dir);
        }
        return Err(PersistError::Io {
            path: dir.to_owned(),
            source,
        });
    }
    sync_dir(&parent);
    if had_old {
        std::fs::remove_dir_all(&previous).map_err(io_err(&previous))?;
    }
    Ok(())
}

fn write_tree(root: &Path, files: &[(PathBuf, Vec<u8>)]) -> Result<(), PersistError> {
    std::fs::create_dir_all(root).map_err(io_err(root))?;
    let mut dirs: Vec<PathBuf> = vec![root.to_owned()];
    for (relative, bytes) in files {
        let path = root.join(relative);
        if let Some(parent) = path.parent()
            && !dirs.iter().any(|d| d == parent)
        {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
            dirs.push(parent.to_owned());
        }
        let mut file = File::create(&path).map_err(io_err(&path))?;
        file.write_all(bytes).map_err(io_err(&path))?;
        file.sync_all().map_err(io_err(&path))?;
    }
    // Deepest first, so every new entry is durable before its parent is.
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in &dirs {
        sync_dir(d);
    }
    Ok(())
}

/// The most one file of a save may hold: 1 GiB (a persona's memories after a simulated day
/// are about 4 MB).
pub const MAX_SAVE_FILE_BYTES: u64 = 1 << 30;

/// Reads a file of a save, naming it in the error (a missing file is [`PersistError::Missing`],
/// one larger than [`MAX_SAVE_FILE_BYTES`] is refused before it is read).
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, PersistError> {
    read_file_at_most(path, MAX_SAVE_FILE_BYTES)
}

/// [`read_file`] with a limit of its own.
pub(crate) fn read_file_at_most(path: &Path, limit: u64) -> Result<Vec<u8>, PersistError> {
    read_at_most(path, limit).map_err(|err| match err {
        ReadError::Io(source) if source.kind() == std::io::ErrorKind::NotFound => {
            PersistError::Missing {
                path: path.to_owned(),
            }
        }
        ReadError::Io(source) => PersistError::Io {
            path: path.to_owned(),
            source,
        },
        too_large @ ReadError::TooLarge { .. } => PersistError::Invalid {
            file: path.to_owned(),
            field: String::new(),
            message: too_large.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bga-persist-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    fn files(text: &str) -> Vec<(PathBuf, Vec<u8>)> {
        vec![
            (PathBuf::from("meta.json"), text.as_bytes().to_vec()),
            (PathBuf::from("a/b/c.json"), b"{}".to_vec()),
        ]
    }

    #[test]
    fn siblings_are_hidden_next_to_the_folder() {
        assert_eq!(
            saving_path(Path::new("/x/runs/save")),
            PathBuf::from("/x/runs/.save.saving")
        );
        assert_eq!(
            previous_path(Path::new("/x/runs/save")),
            PathBuf::from("/x/runs/.save.previous")
        );
    }

    #[test]
    fn a_new_save_replaces_the_old_one_whole() {
        let root = temp("swap");
        let dir = root.join("save");
        write_folder_atomic(&dir, &files("one")).expect("first");
        std::fs::write(dir.join("stale.json"), b"old").expect("stale");
        write_folder_atomic(&dir, &files("two")).expect("second");
        assert_eq!(std::fs::read(dir.join("meta.json")).expect("meta"), b"two");
        assert_eq!(
            std::fs::read(dir.join("a/b/c.json")).expect("nested"),
            b"{}"
        );
        assert!(
            !dir.join("stale.json").exists(),
            "the folder is swapped, not merged"
        );
        assert!(!saving_path(&dir).exists());
        assert!(!previous_path(&dir).exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn an_interrupted_swap_is_recovered_from_the_previous_save() {
        let root = temp("recover");
        let dir = root.join("save");
        write_folder_atomic(&dir, &files("good")).expect("save");
        // Simulate a crash between the two renames.
        std::fs::rename(&dir, previous_path(&dir)).expect("aside");
        std::fs::create_dir_all(saving_path(&dir)).expect("half-written new save");
        assert!(recover_interrupted_save(&dir).expect("recover"));
        assert_eq!(std::fs::read(dir.join("meta.json")).expect("meta"), b"good");
        assert!(!recover_interrupted_save(&dir).expect("nothing to do"));
        // The next save cleans the stale staging folder.
        write_folder_atomic(&dir, &files("next")).expect("next");
        assert_eq!(std::fs::read(dir.join("meta.json")).expect("meta"), b"next");
        assert!(!saving_path(&dir).exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn missing_files_are_named() {
        let err = read_file(Path::new("/definitely/not/here.json")).expect_err("missing");
        assert!(matches!(err, PersistError::Missing { .. }));
        assert!(err.to_string().contains("/definitely/not/here.json"));
    }
}
