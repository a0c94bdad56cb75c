//! The size checks a Tiled file passes *before* the `tiled` crate parses it.
//!
//! The `tiled` crate allocates from what a file declares: a tileset's `tilecount` becomes a
//! hash map of that capacity (4 294 967 295 asks for terabytes), compressed layer data is
//! inflated without a limit (a zip bomb), and every element becomes a struct. So every file the
//! loader opens — the map and each tileset or template it names — is first streamed through an
//! XML reader (the same `quick-xml` the `tiled` crate uses) that only counts, and anything over
//! the limits below is a clear [`MapProblem`] before anything large is allocated. With these
//! limits a map file of up to 10 MB loads (or fails) within about 256 MB (a test measures it).
//!
//! The limits are far above any hand-made town (the default town is 100×70 tiles with a few
//! hundred objects).

use quick_xml::events::{BytesStart, Event};

use super::error::MapProblem;

/// The largest file the loader reads (the map and each tileset or template), in bytes.
pub const MAX_MAP_FILE_BYTES: u64 = 64 << 20;
/// The most tiles a map may have (`width × height`), e.g. 512×512.
pub const MAX_MAP_TILES: u64 = 512 * 512;
/// The most tiles all tile layers together may hold (the sum of their `width × height`):
/// sixteen full layers of the largest map.
pub const MAX_LAYER_TILES: u64 = 16 * MAX_MAP_TILES;
/// The most tiles all tilesets together may declare (`tilecount`), e.g. two 4096×4096 px
/// images of 16 px tiles.
pub const MAX_TILESET_TILES: u64 = 1 << 17;
/// The most XML elements all files of a map together may have (objects, properties, tileset
/// tiles…; tile data is text, not elements).
pub const MAX_ELEMENTS: u64 = 200_000;
/// The longest name (map property `world`, object names) in bytes.
pub const MAX_NAME_BYTES: usize = 256;

/// Running totals over every file of one map.
#[derive(Debug, Default)]
pub(crate) struct Prescan {
    elements: u64,
    tileset_tiles: u64,
    layer_tiles: u64,
}

/// The tile layer whose `<data>` is being read.
struct OpenLayer {
    name: String,
    expected: u64,
    in_data: bool,
    format: Option<DataFormat>,
    count: DataCount,
}

#[derive(Clone, Copy, PartialEq)]
enum DataFormat {
    Csv,
    Base64,
}

/// Counts tiles in data text that may arrive in several pieces.
#[derive(Default)]
struct DataCount {
    /// CSV: commas seen; Base64: non-whitespace characters seen.
    units: u64,
    /// CSV: whether any value was seen; Base64: trailing `=` seen so far.
    any: bool,
    padding: u64,
}

impl DataCount {
    fn push(&mut self, format: DataFormat, text: &str) {
        for b in text.bytes() {
            if b.is_ascii_whitespace() {
                continue;
            }
            match format {
                DataFormat::Csv => {
                    self.any = true;
                    if b == b',' {
                        self.units += 1;
                    }
                }
                DataFormat::Base64 => {
                    self.units += 1;
                    if b == b'=' {
                        self.padding += 1;
                    } else {
                        self.padding = 0;
                    }
                }
            }
        }
    }

    fn tiles(&self, format: DataFormat) -> u64 {
        match format {
            DataFormat::Csv if self.any => self.units + 1,
            DataFormat::Csv => 0,
            DataFormat::Base64 => (self.units / 4 * 3).saturating_sub(self.padding) / 4,
        }
    }
}

/// `Some(value)` of attribute `key`, unescaped; `Err` on malformed attributes.
fn attribute(element: &BytesStart<'_>, key: &str) -> Result<Option<String>, MapProblem> {
    for attr in element.attributes() {
        let attr = attr.map_err(|e| MapProblem::Xml(e.to_string()))?;
        if attr.key.as_ref() == key.as_bytes() {
            let value = attr
                .unescape_value()
                .map_err(|e| MapProblem::Xml(e.to_string()))?;
            return Ok(Some(value.into_owned()));
        }
    }
    Ok(None)
}

/// A numeric attribute; absent or unparsable is `None` (the `tiled` parser reports those).
fn number(element: &BytesStart<'_>, key: &str) -> Result<Option<u64>, MapProblem> {
    Ok(attribute(element, key)?.and_then(|v| v.trim().parse::<u64>().ok()))
}

/// At most `max` characters of `text`, for error messages.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}… ({} bytes)", &text[..cut], text.len()),
        None => text.to_owned(),
    }
}

impl Prescan {
    /// Checks one file's bytes, adding to the totals.
    pub(crate) fn scan(&mut self, bytes: &[u8]) -> Result<(), MapProblem> {
        let mut reader = quick_xml::Reader::from_reader(bytes);
        let mut layer: Option<OpenLayer> = None;
        loop {
            let event = reader.read_event().map_err(|e| {
                MapProblem::Xml(format!("at byte {}: {e}", reader.buffer_position()))
            })?;
            match event {
                Event::Eof => break,
                Event::Start(element) => {
                    self.element(&element, &mut layer, false)?;
                }
                Event::Empty(element) => {
                    self.element(&element, &mut layer, true)?;
                }
                Event::End(end) => match end.name().as_ref() {
                    b"data" => {
                        if let Some(open) = layer.as_mut() {
                            open.in_data = false;
                        }
                    }
                    b"layer" => {
                        if let Some(open) = layer.take() {
                            finish_layer(&open)?;
                        }
                    }
                    _ => {}
                },
                Event::Text(text) => {
                    if let Some(open) = layer.as_mut().filter(|l| l.in_data)
                        && let Some(format) = open.format
                    {
                        let text = text
                            .unescape()
                            .map_err(|e| MapProblem::Xml(e.to_string()))?;
                        open.count.push(format, &text);
                    }
                }
                Event::CData(data) => {
                    if let Some(open) = layer.as_mut().filter(|l| l.in_data)
                        && let Some(format) = open.format
                    {
                        open.count
                            .push(format, &String::from_utf8_lossy(&data.into_inner()));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn element(
        &mut self,
        element: &BytesStart<'_>,
        layer: &mut Option<OpenLayer>,
        empty: bool,
    ) -> Result<(), MapProblem> {
        self.elements += 1;
        if self.elements > MAX_ELEMENTS {
            return Err(MapProblem::TooManyElements {
                limit: MAX_ELEMENTS,
            });
        }
        match element.name().as_ref() {
            b"map" => {
                if attribute(element, "infinite")?.is_some_and(|v| v.trim() == "1") {
                    return Err(MapProblem::Infinite);
                }
                let (w, h) = (number(element, "width")?, number(element, "height")?);
                if let (Some(width), Some(height)) = (w, h)
                    && width.saturating_mul(height) > MAX_MAP_TILES
                {
                    return Err(MapProblem::TooManyTiles {
                        width,
                        height,
                        limit: MAX_MAP_TILES,
                    });
                }
            }
            b"tileset" => {
                if let Some(count) = number(element, "tilecount")? {
                    self.tileset_tiles = self.tileset_tiles.saturating_add(count);
                    if self.tileset_tiles > MAX_TILESET_TILES {
                        let name = attribute(element, "name")?.unwrap_or_default();
                        return Err(MapProblem::TooManyTilesetTiles {
                            tileset: clip(&name, 80),
                            tilecount: count,
                            limit: MAX_TILESET_TILES,
                        });
                    }
                }
            }
            b"chunk" => return Err(MapProblem::Infinite),
            b"layer" => {
                let name = clip(&attribute(element, "name")?.unwrap_or_default(), 80);
                let width = number(element, "width")?.unwrap_or(0);
                let height = number(element, "height")?.unwrap_or(0);
                let expected = width.saturating_mul(height);
                self.layer_tiles = self.layer_tiles.saturating_add(expected);
                if self.layer_tiles > MAX_LAYER_TILES {
                    return Err(MapProblem::TooManyLayerTiles {
                        layer: name,
                        limit: MAX_LAYER_TILES,
                    });
                }
                let open = OpenLayer {
                    name,
                    expected,
                    in_data: false,
                    format: None,
                    count: DataCount::default(),
                };
                if empty {
                    finish_layer(&open)?;
                } else {
                    *layer = Some(open);
                }
            }
            b"data" => {
                let Some(open) = layer.as_mut() else {
                    return Ok(());
                };
                let encoding = attribute(element, "encoding")?;
                let compression = attribute(element, "compression")?;
                open.format = match (encoding.as_deref(), compression.as_deref()) {
                    (Some("csv"), None) => Some(DataFormat::Csv),
                    (Some("base64"), None) => Some(DataFormat::Base64),
                    (encoding, compression) => {
                        // Compressed data is refused before anything inflates it.
                        return Err(MapProblem::UnsupportedLayerFormat {
                            layer: open.name.clone(),
                            format: format!(
                                "encoding {:?} with compression {:?}",
                                clip(encoding.unwrap_or("xml"), 40),
                                clip(compression.unwrap_or("none"), 40)
                            ),
                        });
                    }
                };
                open.in_data = !empty;
            }
            _ => {}
        }
        Ok(())
    }
}

fn finish_layer(layer: &OpenLayer) -> Result<(), MapProblem> {
    let found = layer.format.map_or(0, |f| layer.count.tiles(f));
    let too = |expected: u64, found: u64| (expected as usize, found as usize);
    if found < layer.expected {
        let (expected, found) = too(layer.expected, found);
        return Err(MapProblem::LayerDataTooShort {
            layer: layer.name.clone(),
            expected,
            found,
        });
    }
    if found > layer.expected {
        let (expected, found) = too(layer.expected, found);
        return Err(MapProblem::LayerDataTooLong {
            layer: layer.name.clone(),
            expected,
            found,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(xml: &str) -> Result<(), MapProblem> {
        Prescan::default().scan(xml.as_bytes())
    }

    #[test]
    fn short_and_long_csv_data_is_caught() {
        let xml = r#"<map><layer id="1" name="g" width="2" height="2"><data encoding="csv">1,2,3</data></layer></map>"#;
        assert!(matches!(
            scan(xml),
            Err(MapProblem::LayerDataTooShort {
                expected: 4,
                found: 3,
                ..
            })
        ));
        let ok = r#"<map><layer name="g" width="2" height="1"><data encoding="csv">
1,0
</data></layer></map>"#;
        assert!(scan(ok).is_ok());
        let long = r#"<map><layer name="g" width="1" height="1"><data encoding="csv">1,0</data></layer></map>"#;
        assert!(matches!(
            scan(long),
            Err(MapProblem::LayerDataTooLong { found: 2, .. })
        ));
    }

    #[test]
    fn base64_lengths_and_compression() {
        // 8 bytes = 2 tiles; the layer needs 2.
        let xml = r#"<layer name="g" width="2" height="1"><data encoding="base64">AQAAAAIAAAA=</data></layer>"#;
        assert!(scan(xml).is_ok());
        let short = r#"<layer name="g" width="3" height="1"><data encoding="base64">AQAAAAIAAAA=</data></layer>"#;
        assert!(matches!(
            scan(short),
            Err(MapProblem::LayerDataTooShort { found: 2, .. })
        ));
        for compression in ["zlib", "gzip", "zstd", "&#122;lib"] {
            let zlib = format!(
                r#"<layer name="g" width="1" height="1"><data encoding="base64" compression="{compression}">eJw=</data></layer>"#
            );
            assert!(
                matches!(scan(&zlib), Err(MapProblem::UnsupportedLayerFormat { .. })),
                "{compression}"
            );
        }
    }

    #[test]
    fn declared_sizes_are_bounded() {
        let tileset = r#"<map width="2" height="2"><tileset firstgid="1" name="t" tilewidth="8" tileheight="8" tilecount="4294967295" columns="1"/></map>"#;
        assert!(matches!(
            scan(tileset),
            Err(MapProblem::TooManyTilesetTiles {
                tilecount: 4_294_967_295,
                ..
            })
        ));
        let huge = r#"<map width="100000" height="100000"/>"#;
        assert!(matches!(scan(huge), Err(MapProblem::TooManyTiles { .. })));
        assert!(matches!(
            scan(r#"<map infinite="1"/>"#),
            Err(MapProblem::Infinite)
        ));
        // Seventeen full-size layers (still open: the total is checked as each one starts).
        let layers = format!(
            "<map>{}",
            r#"<layer name="l" width="512" height="512">"#.repeat(17)
        );
        assert!(matches!(
            scan(&layers),
            Err(MapProblem::TooManyLayerTiles { .. })
        ));
        let many = format!("<map>{}</map>", "<object/>".repeat(MAX_ELEMENTS as usize));
        assert!(matches!(
            scan(&many),
            Err(MapProblem::TooManyElements { .. })
        ));
        assert!(matches!(
            scan("<map><layer></map>"),
            Err(MapProblem::Xml(_))
        ));
    }

    #[test]
    fn clip_keeps_short_text_and_cuts_long_text() {
        assert_eq!(clip("abc", 5), "abc");
        let long = "é".repeat(1000);
        let clipped = clip(&long, 10);
        assert!(clipped.starts_with(&"é".repeat(10)));
        assert!(clipped.ends_with("(2000 bytes)"), "{clipped}");
    }
}
