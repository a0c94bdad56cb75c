//! A reader for the `safetensors` format: an 8-byte little-endian header length, a JSON header
//! `{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`, then the
//! tensors' bytes. Only what the model asks for is read, and only after its name, dtype, shape
//! and byte range were checked against the file, so a truncated or hostile file is an error
//! before any large allocation.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;

/// Largest header accepted (the real one is 11 KB).
const MAX_HEADER_BYTES: u64 = 16 << 20;

#[derive(Debug, Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

/// An opened file whose header was read and checked.
pub(super) struct SafeTensors {
    file: File,
    /// Where the tensor data starts in the file.
    data_start: u64,
    data_len: u64,
    entries: HashMap<String, Entry>,
}

impl SafeTensors {
    /// Opens `path` and reads its header.
    pub(super) fn open(path: &Path) -> Result<Self, String> {
        let mut file = File::open(path).map_err(|e| e.to_string())?;
        let file_len = file.metadata().map_err(|e| e.to_string())?.len();
        let mut len = [0u8; 8];
        file.read_exact(&mut len)
            .map_err(|_| "shorter than the 8-byte header length".to_owned())?;
        let header_len = u64::from_le_bytes(len);
        if header_len > MAX_HEADER_BYTES || header_len > file_len - 8 {
            return Err(format!(
                "header length {header_len} does not fit the {file_len}-byte file"
            ));
        }
        // Bounded just above.
        let mut header = vec![0u8; header_len as usize];
        file.read_exact(&mut header)
            .map_err(|e| format!("reading the header: {e}"))?;
        let mut raw: HashMap<String, serde_json::Value> =
            serde_json::from_slice(&header).map_err(|e| format!("header is not JSON: {e}"))?;
        raw.remove("__metadata__");
        let mut entries = HashMap::with_capacity(raw.len());
        for (name, value) in raw {
            let entry: Entry = serde_json::from_value(value)
                .map_err(|e| format!("tensor {name}: bad header entry: {e}"))?;
            entries.insert(name, entry);
        }
        let data_start = 8 + header_len;
        Ok(Self {
            file,
            data_start,
            data_len: file_len - data_start,
            entries,
        })
    }

    /// The `f32` tensor `name`, which must have exactly `shape`, as a flat row-major vector of
    /// finite numbers.
    pub(super) fn f32_tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let entry = self
            .entries
            .get(name)
            .ok_or_else(|| format!("tensor {name} is missing"))?;
        if entry.dtype != "F32" {
            return Err(format!("tensor {name} is {} (expected F32)", entry.dtype));
        }
        if entry.shape.len() != shape.len()
            || entry.shape.iter().zip(shape).any(|(&a, &b)| a != b as u64)
        {
            return Err(format!(
                "tensor {name} has shape {:?} (expected {shape:?})",
                entry.shape
            ));
        }
        let count: usize = shape.iter().product();
        let [begin, end] = entry.data_offsets;
        let bytes = count as u64 * 4;
        if begin > end || end - begin != bytes || end > self.data_len {
            return Err(format!(
                "tensor {name}: bytes {begin}..{end} do not hold {count} f32 values inside the \
                 {}-byte data section (truncated file?)",
                self.data_len
            ));
        }
        self.file
            .seek(SeekFrom::Start(self.data_start + begin))
            .map_err(|e| format!("tensor {name}: {e}"))?;
        // `bytes` lies inside the file, whose size the file system vouches for.
        let mut buffer = vec![0u8; bytes as usize];
        self.file
            .read_exact(&mut buffer)
            .map_err(|e| format!("tensor {name}: {e}"))?;
        let values: Vec<f32> = buffer
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!("tensor {name} has a non-finite value at {at}"));
        }
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(
        dir: &Path,
        name: &str,
        header: &str,
        data: &[u8],
        declared: Option<u64>,
    ) -> std::path::PathBuf {
        let path = dir.join(name);
        let mut bytes = declared
            .unwrap_or(header.len() as u64)
            .to_le_bytes()
            .to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        std::fs::write(&path, bytes).expect("write");
        path
    }

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ga-safetensors-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    #[test]
    fn reads_a_checked_tensor() {
        let dir = temp_dir("ok");
        let data: Vec<u8> = [1.0f32, -2.5, 3.0, 0.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let header = r#"{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"i":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}"#;
        let path = write(&dir, "ok.safetensors", header, &data, None);
        let mut file = SafeTensors::open(&path).expect("open");
        assert_eq!(
            file.f32_tensor("w", &[2, 2]).unwrap(),
            vec![1.0, -2.5, 3.0, 0.5]
        );
        assert!(file.f32_tensor("w", &[4]).unwrap_err().contains("shape"));
        assert!(file.f32_tensor("i", &[1]).unwrap_err().contains("I64"));
        assert!(
            file.f32_tensor("nope", &[1])
                .unwrap_err()
                .contains("missing")
        );
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn hostile_or_truncated_files_are_errors() {
        let dir = temp_dir("bad");
        // A header length far beyond the file: refused before allocating it.
        let huge = write(&dir, "huge.safetensors", "{}", &[], Some(u64::MAX));
        assert!(
            SafeTensors::open(&huge)
                .err()
                .unwrap()
                .contains("does not fit")
        );
        let short = dir.join("short.safetensors");
        std::fs::write(&short, [1u8, 2]).unwrap();
        assert!(SafeTensors::open(&short).is_err());
        let not_json = write(&dir, "json.safetensors", "{nope", &[], None);
        assert!(SafeTensors::open(&not_json).err().unwrap().contains("JSON"));
        // Offsets past the data (a truncated download), or not matching the shape.
        let header =
            r#"{"w":{"dtype":"F32","shape":[1000000,1000],"data_offsets":[0,4000000000]}}"#;
        let truncated = write(&dir, "cut.safetensors", header, &[0; 16], None);
        let mut file = SafeTensors::open(&truncated).expect("header is fine");
        assert!(
            file.f32_tensor("w", &[1_000_000, 1000])
                .unwrap_err()
                .contains("truncated")
        );
        let header = r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[4,0]}}"#;
        let backwards = write(&dir, "back.safetensors", header, &[0; 16], None);
        assert!(
            SafeTensors::open(&backwards)
                .unwrap()
                .f32_tensor("w", &[2])
                .is_err()
        );
        let nan: Vec<u8> = [1.0f32, f32::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let header = r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        let nan = write(&dir, "nan.safetensors", header, &nan, None);
        assert!(
            SafeTensors::open(&nan)
                .unwrap()
                .f32_tensor("w", &[2])
                .unwrap_err()
                .contains("non-finite")
        );
        let header = r#"{"w":{"dtype":"F32","shape":"big","data_offsets":[0,8]}}"#;
        let odd = write(&dir, "odd.safetensors", header, &[0; 8], None);
        assert!(
            SafeTensors::open(&odd)
                .err()
                .unwrap()
                .contains("bad header entry")
        );
        std::fs::remove_dir_all(dir).ok();
    }
}
