//! Hostile Tiled maps: every one is a clear `MapError` within bounded memory (issue 21).
//!
//! Each map is generated here and loaded in a child process (this test binary, running the
//! ignored `load_map_in_child` helper) under a 4 GiB address-space limit; the child reports the
//! error and its peak resident memory (`VmHWM`), which must stay under 256 MiB for every map
//! file of at most 10 MB.

use std::path::{Path, PathBuf};
use std::process::Command;

use bevy_generative_agents::world::{MAX_MAP_TILES, TownMap};

const CHILD_ENV: &str = "BGA_HOSTILE_MAP_CHILD";
const PEAK_LIMIT_KIB: u64 = 256 * 1024;
const FILE_LIMIT: usize = 10 * 1000 * 1000;

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("bga-hostile-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    fn write(&self, name: &str, text: &[u8]) -> PathBuf {
        assert!(text.len() <= FILE_LIMIT, "{name} is {} bytes", text.len());
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The child's side: load the map named by the environment, print the outcome and the peak
/// resident memory.
#[test]
#[ignore = "helper: run by the other tests in a child process"]
fn load_map_in_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let outcome = match TownMap::load_tmx(&path) {
        Ok(map) => format!("OK {}x{}", map.width(), map.height()),
        Err(err) => format!("ERR {err}"),
    };
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM");
    println!(
        "\nOUTCOME {}",
        outcome.chars().take(2000).collect::<String>()
    );
    println!("PEAK_KIB {peak}");
}

/// Loads `path` in a child process; returns (outcome line, peak KiB).
fn load_in_child(path: &Path) -> (String, u64) {
    let exe = std::env::current_exe().expect("test binary");
    let output = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -v 4194304; exec "$0" "$@""#)
        .arg(exe)
        .args([
            "--ignored",
            "--exact",
            "load_map_in_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, path)
        .output()
        .expect("child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the child failed ({}): {stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let outcome = stdout
        .lines()
        .find_map(|l| l.strip_prefix("OUTCOME "))
        .expect("outcome")
        .to_owned();
    let peak = stdout
        .lines()
        .find_map(|l| l.strip_prefix("PEAK_KIB "))
        .and_then(|v| v.parse().ok())
        .expect("peak");
    eprintln!(
        "{}: {} bytes, peak {} KiB: {outcome}",
        path.display(),
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
        peak
    );
    (outcome, peak)
}

fn assert_refused(path: &Path, needles: &[&str]) -> u64 {
    let (outcome, peak) = load_in_child(path);
    assert!(outcome.starts_with("ERR "), "{outcome}");
    assert!(
        outcome.contains(&path.display().to_string()),
        "names the file: {outcome}"
    );
    for needle in needles {
        assert!(outcome.contains(needle), "{needle:?} in {outcome}");
    }
    assert!(outcome.len() < 1000, "a short error: {outcome}");
    assert!(peak <= PEAK_LIMIT_KIB, "peak {peak} KiB for {outcome}");
    peak
}

const TILESET: &str = r#"<tileset firstgid="1" name="t" tilewidth="16" tileheight="16" tilecount="4" columns="2"><image source="t.png" width="32" height="32"/></tileset>"#;

fn header(width: u64, height: u64) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<map version="1.10" orientation="orthogonal" renderorder="right-down" width="{width}" height="{height}" tilewidth="16" tileheight="16" infinite="0">
 <properties><property name="world" value="T"/></properties>
"#
    )
}

fn csv_layer(name: &str, width: u64, height: u64, value: &str) -> String {
    let cells = (width * height) as usize;
    let mut data = String::with_capacity(cells * 2);
    for i in 0..cells {
        if i > 0 {
            data.push(',');
        }
        data.push_str(value);
    }
    format!(
        r#" <layer name="{name}" width="{width}" height="{height}"><data encoding="csv">{data}</data></layer>
"#
    )
}

fn areas(width: u64, height: u64) -> String {
    let (w, h) = (width * 16, height * 16);
    format!(
        r#" <objectgroup name="sectors"><object id="1" name="home" x="0" y="0" width="{w}" height="{h}"/></objectgroup>
 <objectgroup name="arenas"><object id="2" name="room" x="0" y="0" width="{w}" height="{h}"/></objectgroup>
 <objectgroup name="objects"><object id="3" name="bed" x="0" y="0" width="16" height="16"/></objectgroup>
 <objectgroup name="spawns"><object id="4" name="start" x="24" y="24"><point/></object></objectgroup>
"#
    )
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A zlib stream that inflates to `reps × 258 + 1` zero bytes: one literal and then
/// back-references of the longest length (13 bits for 258 bytes).
fn zlib_bomb(reps: usize) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        acc: u64,
        n: u32,
    }
    impl Bits {
        fn put(&mut self, value: u64, bits: u32) {
            self.acc |= value << self.n;
            self.n += bits;
            while self.n >= 8 {
                self.out.push(self.acc as u8);
                self.acc >>= 8;
                self.n -= 8;
            }
        }
        /// Huffman codes go most significant bit first.
        fn code(&mut self, code: u32, len: u32) {
            self.put(u64::from(code.reverse_bits() >> (32 - len)), len);
        }
    }
    let mut bits = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        n: 0,
    };
    bits.put(1, 1); // final block
    bits.put(1, 2); // fixed Huffman codes
    bits.code(0x30, 8); // literal 0
    for _ in 0..reps {
        bits.code(0b1100_0101, 8); // length code 285 = 258
        bits.code(0, 5); // distance code 0 = 1
    }
    bits.code(0, 7); // end of block
    bits.put(0, 7);
    let len = (reps * 258 + 1) as u64;
    let adler = ((len % 65521) << 16) | 1;
    bits.out.extend_from_slice(&(adler as u32).to_be_bytes());
    bits.out
}

#[test]
fn a_tileset_declaring_four_billion_tiles_is_refused_without_allocating_them() {
    let dir = TempDir::new("tilecount");
    let text = format!(
        "{}<tileset firstgid=\"1\" name=\"evil\" tilewidth=\"16\" tileheight=\"16\" \
         tilecount=\"4294967295\" columns=\"1\"><image source=\"t.png\" width=\"16\" \
         height=\"16\"/></tileset>{}{}</map>",
        header(4, 4),
        csv_layer("collision", 4, 4, "0"),
        areas(4, 4)
    );
    let path = dir.write("tilecount.tmx", text.as_bytes());
    assert_refused(&path, &["tileset `evil`", "4294967295", "at most 131072"]);

    // The same in an external tileset: the error names the .tsx.
    dir.write(
        "evil.tsx",
        br#"<?xml version="1.0"?><tileset version="1.10" name="evil" tilewidth="16" tileheight="16" tilecount="4294967295" columns="1"><image source="t.png" width="16" height="16"/></tileset>"#,
    );
    let text = format!(
        "{}<tileset firstgid=\"1\" source=\"evil.tsx\"/>{}{}</map>",
        header(4, 4),
        csv_layer("collision", 4, 4, "0"),
        areas(4, 4)
    );
    let path = dir.write("external.tmx", text.as_bytes());
    assert_refused(&path, &["tileset `evil`", "4294967295"]);
}

#[test]
fn a_zlib_bomb_is_refused_before_it_inflates() {
    let dir = TempDir::new("bomb");
    // 3 M back-references: ~5 MB of compressed data that would inflate to 774 MB.
    let reps = 3_000_000;
    let data = base64(&zlib_bomb(reps));
    for compression in ["zlib", "gzip"] {
        let text = format!(
            "{}{TILESET}<layer name=\"collision\" width=\"512\" height=\"512\"><data \
             encoding=\"base64\" compression=\"{compression}\">{data}</data></layer>{}</map>",
            header(512, 512),
            areas(512, 512)
        );
        let path = dir.write(&format!("{compression}.tmx"), text.as_bytes());
        assert_refused(
            &path,
            &["collision", compression, "CSV or uncompressed Base64"],
        );
    }
}

#[test]
fn declared_sizes_beyond_the_limits_are_refused() {
    let dir = TempDir::new("sizes");
    // A map of ten billion tiles with a short layer.
    let text = format!(
        "{}{TILESET}<layer name=\"collision\" width=\"100000\" height=\"100000\"><data \
         encoding=\"csv\">0</data></layer>{}</map>",
        header(100_000, 100_000),
        areas(4, 4)
    );
    let path = dir.write("huge.tmx", text.as_bytes());
    assert_refused(&path, &["100000×100000", &MAX_MAP_TILES.to_string()]);

    // A small map whose layer claims to be huge, with no data behind it.
    let text = format!(
        "{}{TILESET}<layer name=\"collision\" width=\"4\" height=\"4\"><data \
         encoding=\"csv\">0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0</data></layer><layer name=\"liar\" \
         width=\"65535\" height=\"65535\"><data encoding=\"base64\">AAAAAA==</data></layer>{}</map>",
        header(4, 4),
        areas(4, 4)
    );
    let path = dir.write("liar.tmx", text.as_bytes());
    assert_refused(&path, &["liar"]);

    // Sixty thousand copies of a map-sized sector (same name, so they do not "overlap").
    let copies =
        "<object name=\"home\" x=\"0\" y=\"0\" width=\"8192\" height=\"8192\"/>".repeat(60_000);
    let text = format!(
        "{}{TILESET}{}{}</map>",
        header(512, 512),
        csv_layer("collision", 512, 512, "0"),
        areas(512, 512).replacen(
            "<objectgroup name=\"sectors\">",
            &format!("<objectgroup name=\"sectors\">{copies}"),
            1
        )
    );
    let path = dir.write("overlap.tmx", text.as_bytes());
    assert_refused(&path, &["sectors objects cover more than"]);

    // A one-megabyte world name is refused with a short error.
    let text = format!(
        "{}{}{}</map>",
        header(4, 4).replace("value=\"T\"", &format!("value=\"{}\"", "W".repeat(1 << 20))),
        csv_layer("collision", 4, 4, "0"),
        areas(4, 4)
    );
    let path = dir.write("longname.tmx", text.as_bytes());
    assert_refused(&path, &["longer than 256 bytes"]);
}

#[test]
fn the_largest_accepted_map_loads_within_bounded_memory() {
    let dir = TempDir::new("largest");
    // 512×512 tiles, a collision layer and fifteen drawn layers: 8.4 MB of CSV.
    let mut text = header(512, 512);
    text.push_str(TILESET);
    text.push_str(&csv_layer("collision", 512, 512, "0"));
    for i in 0..15 {
        text.push_str(&csv_layer(&format!("ground{i}"), 512, 512, "1"));
    }
    text.push_str(&areas(512, 512));
    text.push_str("</map>");
    let path = dir.write("largest.tmx", text.as_bytes());
    let (outcome, peak) = load_in_child(&path);
    assert_eq!(outcome, "OK 512x512");
    assert!(peak <= PEAK_LIMIT_KIB, "peak {peak} KiB");

    // The same with the element budget spent on notes objects.
    let notes = "<object id=\"9\"/>".repeat(190_000);
    let mut text = header(512, 512);
    text.push_str(TILESET);
    text.push_str(&csv_layer("collision", 512, 512, "0"));
    text.push_str(&format!(
        "<objectgroup name=\"notes\">{notes}</objectgroup>"
    ));
    text.push_str(&areas(512, 512));
    text.push_str("</map>");
    let path = dir.write("objects.tmx", text.as_bytes());
    let (outcome, peak) = load_in_child(&path);
    assert_eq!(outcome, "OK 512x512");
    assert!(peak <= PEAK_LIMIT_KIB, "peak {peak} KiB");
}
