//! `manifest.json`: a SHA-256 checksum of every file of a save.
//!
//! The manifest is the last file of every save (`format::encode` adds
//! it) and is written with the rest of the folder in its atomic swap, so it always describes the
//! files next to it. Loading checks every file the loader read against it — the checksum of the
//! bytes it decoded, taken as it read them — *after* the files decoded (a damaged file still
//! fails with its field), and refuses any difference naming the file: [`PersistError::Edited`].
//! A file the loader reads that the manifest does not list is refused the same way, so a new
//! kind of file in a save is sealed the moment the loader reads it, or the load fails. A hand-edited save loads with
//! [`SaveIntegrity::TrustEdited`] (`--trust-edited-save` on the command line), which skips the
//! check.
//!
//! Saves written before checksums existed have no manifest; they are refused the same way
//! ([`PersistError::Edited`] naming `manifest.json`) and load with `TrustEdited` — a missing
//! manifest cannot be told apart from a removed one. Saving such a save again (or forking it
//! with `TrustEdited`) gives it a manifest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::PersistError;
#[cfg(test)]
use super::files::read_file;
use super::files::read_file_at_most;

/// The manifest's file name in a save.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The only checksum algorithm written and read.
pub(crate) const MANIFEST_ALGORITHM: &str = "sha256";
/// The largest manifest read, in bytes.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// Whether loading checks a save's files against its manifest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SaveIntegrity {
    /// Every file must match `manifest.json` (the default).
    #[default]
    Verify,
    /// Load a hand-edited save (or one written before checksums) without checking.
    TrustEdited,
}

/// The content of `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    /// `MANIFEST_ALGORITHM`.
    pub algorithm: String,
    /// Lower-case hex checksum per file, by path relative to the save with `/` separators.
    pub files: BTreeMap<String, String>,
}

/// A relative path with `/` separators, as the manifest keys it.
fn key_of(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn checksum(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Appends `manifest.json` describing `files` (paths relative to the save) as the last file.
pub(crate) fn seal(files: &mut Vec<(PathBuf, Vec<u8>)>) -> Result<(), PersistError> {
    let manifest = Manifest {
        algorithm: MANIFEST_ALGORITHM.to_owned(),
        files: files
            .iter()
            .map(|(path, bytes)| (key_of(path), checksum(bytes)))
            .collect(),
    };
    let mut bytes = serde_json::to_vec_pretty(&manifest).map_err(|err| PersistError::Invalid {
        file: MANIFEST_FILE.into(),
        field: String::new(),
        message: format!("cannot serialise: {err}"),
    })?;
    bytes.push(b'\n');
    files.push((MANIFEST_FILE.into(), bytes));
    Ok(())
}

fn edited(file: PathBuf, why: &str) -> PersistError {
    PersistError::Edited {
        file,
        why: why.to_owned(),
    }
}

/// Checks the files the loader read — `(path relative to root, checksum of the bytes read)` —
/// against `root/manifest.json`; the first file unlisted or different is an error naming it.
pub(crate) fn verify(root: &Path, read: &[(PathBuf, String)]) -> Result<(), PersistError> {
    let manifest_path = root.join(MANIFEST_FILE);
    let size = std::fs::metadata(&manifest_path).map(|m| m.len());
    match size {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(edited(
                manifest_path,
                "missing: the save has no checksums (written before they existed, or the \
                 manifest was removed)",
            ));
        }
        Ok(len) if len > MAX_MANIFEST_BYTES => {
            return Err(edited(manifest_path, "too large to be a manifest"));
        }
        _ => {}
    }
    let manifest: Manifest = super::format::parse(
        &manifest_path,
        &read_file_at_most(&manifest_path, MAX_MANIFEST_BYTES)?,
    )?;
    if manifest.algorithm != MANIFEST_ALGORITHM {
        return Err(PersistError::Invalid {
            file: manifest_path,
            field: "algorithm".into(),
            message: format!(
                "expected {MANIFEST_ALGORITHM:?}, found {}",
                crate::persona::quote_clipped(&manifest.algorithm, 40)
            ),
        });
    }
    for (relative, sum) in read {
        let path = root.join(relative);
        let Some(want) = manifest.files.get(&key_of(relative)) else {
            return Err(edited(path, "not listed in manifest.json"));
        };
        if sum != want {
            return Err(edited(path, "differs from its checksum in manifest.json"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_folder_verifies_and_any_change_is_named() {
        let root = std::env::temp_dir().join(format!("bga-manifest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut files = vec![
            (PathBuf::from("meta.json"), b"{\"step\": 10}\n".to_vec()),
            (PathBuf::from("personas/Ada/body.json"), b"{}".to_vec()),
        ];
        seal(&mut files).expect("seal");
        assert_eq!(
            files.last().map(|f| f.0.as_path()),
            Some(Path::new(MANIFEST_FILE))
        );
        for (path, bytes) in &files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
            std::fs::write(path, bytes).expect("write");
        }
        let read_now = |paths: &[PathBuf]| -> Vec<(PathBuf, String)> {
            paths
                .iter()
                .map(|p| {
                    (
                        p.clone(),
                        checksum(&read_file(&root.join(p)).expect("read")),
                    )
                })
                .collect()
        };
        let expected = vec![
            PathBuf::from("meta.json"),
            PathBuf::from("personas/Ada/body.json"),
        ];
        verify(&root, &read_now(&expected)).expect("intact");

        // One digit.
        std::fs::write(root.join("meta.json"), b"{\"step\": 11}\n").expect("edit");
        let err = verify(&root, &read_now(&expected))
            .expect_err("edited")
            .to_string();
        assert!(
            err.contains("meta.json") && err.contains("checksum"),
            "{err}"
        );
        std::fs::write(root.join("meta.json"), b"{\"step\": 10}\n").expect("restore");

        std::fs::write(root.join("pending.json"), b"{}").expect("unlisted file");
        let more = [expected.clone(), vec![PathBuf::from("pending.json")]].concat();
        let err = verify(&root, &read_now(&more))
            .expect_err("unlisted")
            .to_string();
        assert!(err.contains("pending.json"), "{err}");

        std::fs::remove_file(root.join(MANIFEST_FILE)).expect("rm");
        let err = verify(&root, &read_now(&expected))
            .expect_err("no manifest")
            .to_string();
        assert!(
            err.contains("manifest.json") && err.contains("missing"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
