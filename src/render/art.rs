//! The game's own procedural art: one character sprite sheet per persona and the bubble frame.
//!
//! Everything is drawn into plain RGBA buffers by pure functions (tested without an app), then
//! turned into Bevy images. A persona's look — skin, hair colour and style, shirt, trousers — is
//! derived from a hash of its name, so the same persona always looks the same and different
//! personas look different, with no art files to license.

/// Side of one sprite frame in pixels (one map tile).
pub(crate) const FRAME: u32 = 32;
/// Walk frames per facing: standing, left foot forward, right foot forward.
pub(crate) const FRAMES_PER_FACING: u32 = 3;

/// Which way a persona looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Facing {
    /// Towards the viewer (down the map).
    #[default]
    Down,
    /// To the left.
    Left,
    /// To the right.
    Right,
    /// Away from the viewer (up the map).
    Up,
}

impl Facing {
    /// All facings, in sprite-sheet row order.
    pub(crate) const ALL: [Facing; 4] = [Facing::Down, Facing::Left, Facing::Right, Facing::Up];

    /// The facing of a step by `(dx, dy)` tiles (y down, as on the map); `None` for no move.
    /// Horizontal wins a diagonal, since side views read best while walking.
    pub(crate) fn of_step(dx: f32, dy: f32) -> Option<Facing> {
        if dx.abs() < 1e-3 && dy.abs() < 1e-3 {
            return None;
        }
        Some(if dx.abs() >= dy.abs() {
            if dx < 0.0 {
                Facing::Left
            } else {
                Facing::Right
            }
        } else if dy < 0.0 {
            Facing::Up
        } else {
            Facing::Down
        })
    }

    /// The row of this facing in a sprite sheet.
    pub fn row(self) -> u32 {
        match self {
            Facing::Down => 0,
            Facing::Left => 1,
            Facing::Right => 2,
            Facing::Up => 3,
        }
    }

    /// The sprite-sheet frame index for this facing and walk frame (`frame % 3`).
    pub(crate) fn atlas_index(self, frame: u32) -> usize {
        (self.row() * FRAMES_PER_FACING + frame % FRAMES_PER_FACING) as usize
    }
}

/// An RGBA colour.
pub(crate) type Rgba = [u8; 4];

const SKINS: [Rgba; 6] = [
    [255, 219, 180, 255],
    [241, 194, 150, 255],
    [224, 172, 125, 255],
    [198, 134, 86, 255],
    [141, 85, 52, 255],
    [98, 60, 37, 255],
];
const HAIRS: [Rgba; 8] = [
    [40, 28, 22, 255],
    [86, 52, 30, 255],
    [160, 100, 50, 255],
    [222, 190, 110, 255],
    [176, 64, 36, 255],
    [90, 90, 96, 255],
    [225, 225, 230, 255],
    [20, 20, 30, 255],
];
const SHIRTS: [Rgba; 10] = [
    [214, 64, 64, 255],
    [56, 118, 214, 255],
    [60, 170, 90, 255],
    [236, 176, 40, 255],
    [150, 80, 200, 255],
    [240, 120, 170, 255],
    [40, 170, 170, 255],
    [236, 120, 40, 255],
    [245, 245, 245, 255],
    [70, 70, 80, 255],
];
const TROUSERS: [Rgba; 6] = [
    [50, 60, 110, 255],
    [60, 50, 40, 255],
    [40, 40, 45, 255],
    [120, 100, 70, 255],
    [90, 110, 60, 255],
    [130, 40, 50, 255],
];
const OUTLINE: Rgba = [30, 24, 30, 255];
const EYE: Rgba = [20, 20, 28, 255];
const SHOE: Rgba = [45, 35, 30, 255];

/// How a persona's hair is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HairStyle {
    /// Short all round.
    Short,
    /// Down to the shoulders.
    Long,
    /// Tied up in a bun on top.
    Bun,
}

/// A persona's colours and hair style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Look {
    /// Skin colour.
    pub skin: Rgba,
    /// Hair colour.
    pub hair: Rgba,
    /// Hair style.
    pub style: HairStyle,
    /// Shirt colour.
    pub shirt: Rgba,
    /// Trousers colour.
    pub trousers: Rgba,
}

impl Look {
    /// The look of the persona called `name`.
    pub(crate) fn from_name(name: &str) -> Self {
        // FNV-1a, so looks are stable across runs and platforms (std's hasher is randomly
        // seeded).
        let mut h = crate::persona::name_hash(name);
        let mut pick = |n: usize| {
            let i = (h % n as u64) as usize;
            h = h.rotate_right(13).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            i
        };
        let skin = SKINS[pick(SKINS.len())];
        let hair = HAIRS[pick(HAIRS.len())];
        let style = [HairStyle::Short, HairStyle::Long, HairStyle::Bun][pick(3)];
        let shirt = SHIRTS[pick(SHIRTS.len())];
        let trousers = TROUSERS[pick(TROUSERS.len())];
        Self {
            skin,
            hair,
            style,
            shirt,
            trousers,
        }
    }

    /// The shirt colour as linear-free sRGB floats, for tinting the name label.
    pub(crate) fn shirt_srgb(&self) -> [f32; 3] {
        [
            self.shirt[0] as f32 / 255.0,
            self.shirt[1] as f32 / 255.0,
            self.shirt[2] as f32 / 255.0,
        ]
    }
}

/// An RGBA pixel buffer with the few drawing operations the art needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canvas {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Row-major RGBA bytes, top row first.
    pub pixels: Vec<u8>,
}

impl Canvas {
    /// A transparent canvas.
    pub fn new(width: u32, height: u32) -> Self {
        Self {
            width,
            height,
            pixels: vec![0; (width * height * 4) as usize],
        }
    }

    /// The pixel at `(x, y)`, transparent outside.
    pub fn get(&self, x: i32, y: i32) -> Rgba {
        if x < 0 || y < 0 || x as u32 >= self.width || y as u32 >= self.height {
            return [0; 4];
        }
        let i = ((y as u32 * self.width + x as u32) * 4) as usize;
        let mut out = [0u8; 4];
        out.copy_from_slice(&self.pixels[i..i + 4]);
        out
    }

    /// Sets the pixel at `(x, y)`; outside is ignored.
    pub fn put(&mut self, x: i32, y: i32, c: Rgba) {
        if x < 0 || y < 0 || x as u32 >= self.width || y as u32 >= self.height {
            return;
        }
        let i = ((y as u32 * self.width + x as u32) * 4) as usize;
        self.pixels[i..i + 4].copy_from_slice(&c);
    }

    /// Fills the rectangle `[x0, x1) × [y0, y1)`.
    pub(crate) fn rect(&mut self, x0: i32, y0: i32, x1: i32, y1: i32, c: Rgba) {
        for y in y0..y1 {
            for x in x0..x1 {
                self.put(x, y, c);
            }
        }
    }

    /// Paints `c` on every transparent pixel next to an opaque one (a one-pixel outline).
    pub(crate) fn outline(&mut self, c: Rgba) {
        let src = self.clone();
        for y in 0..self.height as i32 {
            for x in 0..self.width as i32 {
                if src.get(x, y)[3] != 0 {
                    continue;
                }
                let near = [(1, 0), (-1, 0), (0, 1), (0, -1)]
                    .iter()
                    .any(|(dx, dy)| src.get(x + dx, y + dy)[3] != 0);
                if near {
                    self.put(x, y, c);
                }
            }
        }
    }

    /// Copies `src` with its top-left corner at `(x, y)`.
    pub(crate) fn blit(&mut self, src: &Canvas, x: i32, y: i32) {
        for sy in 0..src.height as i32 {
            for sx in 0..src.width as i32 {
                let c = src.get(sx, sy);
                if c[3] != 0 {
                    self.put(x + sx, y + sy, c);
                }
            }
        }
    }
}

fn shade(c: Rgba, f: f32) -> Rgba {
    let s = |v: u8| ((v as f32) * f).clamp(0.0, 255.0) as u8;
    [s(c[0]), s(c[1]), s(c[2]), c[3]]
}

/// Draws one 32×32 frame of a character: `frame` 0 stands, 1 and 2 are the two walking poses.
pub fn draw_character(look: &Look, facing: Facing, frame: u32) -> Canvas {
    let mut c = Canvas::new(FRAME, FRAME);
    let skin = look.skin;
    let hair = look.hair;
    let shirt = look.shirt;
    let shirt_dark = shade(shirt, 0.75);
    let trousers = look.trousers;
    let step = frame % FRAMES_PER_FACING;

    // Legs and shoes (rows 23..30): the walking poses lift one foot.
    let (left_lift, right_lift) = match step {
        1 => (2, 0),
        2 => (0, 2),
        _ => (0, 0),
    };
    match facing {
        Facing::Down | Facing::Up => {
            c.rect(12, 23, 15, 29 - left_lift, trousers);
            c.rect(17, 23, 20, 29 - right_lift, trousers);
            c.rect(12, 29 - left_lift, 15, 30 - left_lift, SHOE);
            c.rect(17, 29 - right_lift, 20, 30 - right_lift, SHOE);
        }
        Facing::Left | Facing::Right => {
            // In profile the legs scissor back and forth.
            let spread = if step == 0 { 0 } else { 2 };
            c.rect(14 - spread, 23, 17 - spread, 29, trousers);
            c.rect(15 + spread, 23, 18 + spread, 29, shade(trousers, 0.8));
            let toe = if facing == Facing::Left { -1 } else { 1 };
            c.rect(
                14 - spread + toe.min(0),
                29,
                17 - spread + toe.max(0),
                30,
                SHOE,
            );
            c.rect(
                15 + spread + toe.min(0),
                29,
                18 + spread + toe.max(0),
                30,
                SHOE,
            );
        }
    }

    // Torso (rows 15..23) and arms, which swing with the legs.
    c.rect(11, 15, 21, 23, shirt);
    c.rect(11, 21, 21, 23, shirt_dark);
    let swing = match step {
        1 => 1,
        2 => -1,
        _ => 0,
    };
    match facing {
        Facing::Down | Facing::Up => {
            c.rect(9, 16 + swing, 11, 22 + swing, shirt_dark);
            c.rect(21, 16 - swing, 23, 22 - swing, shirt_dark);
            c.rect(9, 22 + swing, 11, 23 + swing, skin);
            c.rect(21, 22 - swing, 23, 23 - swing, skin);
        }
        Facing::Left | Facing::Right => {
            let x = if facing == Facing::Left { 14 } else { 16 };
            c.rect(x + swing, 16, x + 2 + swing, 22, shirt_dark);
            c.rect(x + swing, 22, x + 2 + swing, 23, skin);
        }
    }
    // Neck.
    c.rect(14, 14, 18, 15, shade(skin, 0.85));

    // Head (rows 4..14).
    c.rect(10, 5, 22, 14, skin);
    c.rect(11, 4, 21, 5, skin);
    // Hair.
    c.rect(10, 3, 22, 6, hair);
    c.rect(11, 2, 21, 3, hair);
    match facing {
        Facing::Down => {
            c.rect(10, 6, 11, 9, hair);
            c.rect(21, 6, 22, 9, hair);
            // Eyes, cheeks, mouth.
            c.rect(13, 9, 15, 11, EYE);
            c.rect(17, 9, 19, 11, EYE);
            c.put(13, 9, [255, 255, 255, 255]);
            c.put(17, 9, [255, 255, 255, 255]);
            c.rect(12, 11, 13, 12, shade([240, 120, 120, 255], 1.0));
            c.rect(19, 11, 20, 12, shade([240, 120, 120, 255], 1.0));
            c.rect(15, 12, 17, 13, shade(skin, 0.7));
        }
        Facing::Up => {
            c.rect(10, 5, 22, 13, hair);
        }
        Facing::Left => {
            c.rect(15, 5, 22, 11, hair);
            c.rect(11, 9, 13, 11, EYE);
            c.put(9, 10, skin);
            c.rect(17, 8, 19, 11, shade(skin, 0.9));
        }
        Facing::Right => {
            c.rect(10, 5, 17, 11, hair);
            c.rect(19, 9, 21, 11, EYE);
            c.put(22, 10, skin);
            c.rect(13, 8, 15, 11, shade(skin, 0.9));
        }
    }
    match look.style {
        HairStyle::Short => {}
        HairStyle::Long => match facing {
            Facing::Down => {
                c.rect(9, 5, 11, 17, hair);
                c.rect(21, 5, 23, 17, hair);
            }
            Facing::Up => c.rect(10, 5, 22, 18, hair),
            Facing::Left => c.rect(18, 5, 22, 17, hair),
            Facing::Right => c.rect(10, 5, 14, 17, hair),
        },
        HairStyle::Bun => {
            c.rect(13, 0, 19, 2, hair);
            c.rect(14, 0, 18, 1, shade(hair, 1.2));
        }
    }
    c.outline(OUTLINE);
    // A soft shadow under the feet, drawn last and only on empty pixels.
    for x in 10..22 {
        for y in 30..32 {
            if c.get(x, y)[3] == 0 {
                c.put(x, y, [0, 0, 0, 70]);
            }
        }
    }
    c
}

/// The full sprite sheet of a look: one row per [`Facing`] (in `Facing::ALL` order), three
/// walk frames per row, 32×32 each.
pub fn character_sheet(look: &Look) -> Canvas {
    let mut sheet = Canvas::new(FRAME * FRAMES_PER_FACING, FRAME * 4);
    for facing in Facing::ALL {
        for frame in 0..FRAMES_PER_FACING {
            let art = draw_character(look, facing, frame);
            sheet.blit(&art, (frame * FRAME) as i32, (facing.row() * FRAME) as i32);
        }
    }
    sheet
}

/// Corner radius of the bubble frame, also its nine-slice border.
pub(crate) const BUBBLE_CORNER: u32 = 6;

/// A rounded white rectangle with a dark border (`size × size`), to nine-slice behind bubbles.
pub fn bubble_frame(size: u32, fill: Rgba, border: Rgba) -> Canvas {
    let mut c = Canvas::new(size, size);
    let r = BUBBLE_CORNER as f32;
    let s = size as f32;
    for y in 0..size {
        for x in 0..size {
            // Distance from the rectangle shrunk by the radius, so corners become arcs.
            let px = x as f32 + 0.5;
            let py = y as f32 + 0.5;
            let cx = px.clamp(r, s - r);
            let cy = py.clamp(r, s - r);
            let d = ((px - cx).powi(2) + (py - cy).powi(2)).sqrt();
            if d <= r - 1.5 {
                c.put(x as i32, y as i32, fill);
            } else if d <= r {
                c.put(x as i32, y as i32, border);
            }
        }
    }
    c
}

/// An ellipse outline (`width × height`) drawn under the selected persona's feet.
pub(crate) fn selection_ring(width: u32, height: u32, colour: Rgba) -> Canvas {
    let mut c = Canvas::new(width, height);
    let (a, b) = (width as f32 / 2.0, height as f32 / 2.0);
    for y in 0..height {
        for x in 0..width {
            let dx = (x as f32 + 0.5 - a) / a;
            let dy = (y as f32 + 0.5 - b) / b;
            let d = (dx * dx + dy * dy).sqrt();
            // About two pixels thick at the ends of the long axis.
            if (0.78..=1.0).contains(&d) {
                c.put(x as i32, y as i32, colour);
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_are_stable_and_differ_between_names() {
        assert_eq!(
            Look::from_name("Mira Okafor"),
            Look::from_name("Mira Okafor")
        );
        let names = [
            "Mira Okafor",
            "Elena Reyes",
            "Tomas Reyes",
            "Sam Lindqvist",
            "Priya Natarajan",
        ];
        let looks: std::collections::HashSet<Look> =
            names.iter().map(|n| Look::from_name(n)).collect();
        assert_eq!(
            looks.len(),
            names.len(),
            "every default persona looks different"
        );
    }

    #[test]
    fn facing_of_step() {
        assert_eq!(Facing::of_step(0.0, 0.0), None);
        assert_eq!(Facing::of_step(1.0, 0.0), Some(Facing::Right));
        assert_eq!(Facing::of_step(-1.0, 0.0), Some(Facing::Left));
        assert_eq!(Facing::of_step(0.0, -1.0), Some(Facing::Up));
        assert_eq!(Facing::of_step(0.0, 1.0), Some(Facing::Down));
        // Diagonals read as side views.
        assert_eq!(Facing::of_step(-1.0, 1.0), Some(Facing::Left));
        assert_eq!(Facing::Up.atlas_index(4), 10);
        assert_eq!(Facing::Down.atlas_index(0), 0);
    }

    #[test]
    fn a_frame_is_a_figure_on_a_transparent_background() {
        let look = Look::from_name("Sam Lindqvist");
        let art = draw_character(&look, Facing::Down, 0);
        assert_eq!(art.pixels.len(), (FRAME * FRAME * 4) as usize);
        // Corners are empty; the torso is the shirt colour; the face has eyes.
        assert_eq!(art.get(0, 0)[3], 0);
        assert_eq!(art.get(31, 0)[3], 0);
        assert_eq!(art.get(16, 18), look.shirt);
        assert_eq!(art.get(14, 10), EYE);
        // The back view has no eyes: hair covers the head.
        let back = draw_character(&look, Facing::Up, 0);
        assert_eq!(back.get(14, 10), look.hair);
    }

    #[test]
    fn walking_frames_differ_from_standing() {
        let look = Look::from_name("Elena Reyes");
        for facing in Facing::ALL {
            let stand = draw_character(&look, facing, 0);
            assert_ne!(stand, draw_character(&look, facing, 1), "{facing:?}");
            assert_ne!(
                draw_character(&look, facing, 1),
                draw_character(&look, facing, 2),
                "{facing:?}"
            );
        }
    }

    #[test]
    fn sheet_rows_hold_the_facings() {
        let look = Look::from_name("Priya Natarajan");
        let sheet = character_sheet(&look);
        assert_eq!((sheet.width, sheet.height), (96, 128));
        let right = draw_character(&look, Facing::Right, 2);
        for y in 0..32 {
            for x in 0..32 {
                assert_eq!(sheet.get(64 + x, 64 + y), right.get(x, y));
            }
        }
    }

    #[test]
    fn bubble_frame_has_round_corners_and_a_border() {
        let white = [255, 255, 255, 255];
        let dark = [40, 40, 40, 255];
        let f = bubble_frame(24, white, dark);
        assert_eq!(f.get(0, 0)[3], 0, "corner is cut");
        assert_eq!(f.get(12, 12), white, "inside is filled");
        assert_eq!(f.get(12, 0), dark, "edge is border");
    }

    #[test]
    fn selection_ring_is_hollow() {
        let gold = [255, 210, 0, 255];
        let ring = selection_ring(28, 12, gold);
        assert_eq!(ring.get(14, 6)[3], 0, "centre is empty");
        assert_eq!(ring.get(0, 6), gold, "left end is drawn");
        assert_eq!(ring.get(0, 0)[3], 0, "bounding-box corner is outside");
    }
}
