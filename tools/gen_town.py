#!/usr/bin/env python3
"""Generate the default town, Willowbrook: tileset art, tileset and Tiled map.

Writes (relative to the crate root):
  assets/tiles/willowbrook.png         the tileset image (procedural art, 32x32 tiles)
  assets/maps/willowbrook_tileset.tsx  the Tiled tileset
  assets/maps/willowbrook.tmx          the Tiled map (see docs/maps.md for the convention)

Python 3.11 standard library only. Deterministic: running it twice gives identical files.

Usage: python3 tools/gen_town.py [--preview out.png]
  --preview writes a composite render of the whole map (for eyeballing, not committed).
"""

from __future__ import annotations

import argparse
import math
import random
import struct
import sys
import zlib
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TILE = 32
COLUMNS = 8
MAP_W, MAP_H = 64, 48
WORLD = "Willowbrook"

# --------------------------------------------------------------------------------------------
# PNG and a tiny RGBA canvas
# --------------------------------------------------------------------------------------------


def write_png(path: Path, width: int, height: int, pixels: bytearray) -> None:
    """Write 8-bit RGBA pixels (row-major, 4 bytes each) as a PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    stride = width * 4
    raw = bytearray()
    for y in range(height):
        raw.append(0)  # filter: none
        raw.extend(pixels[y * stride:(y + 1) * stride])
    png = b"\x89PNG\r\n\x1a\n"
    png += chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(bytes(raw), 9))
    png += chunk(b"IEND", b"")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)


class Canvas:
    """An RGBA image with the few drawing operations the tiles need."""

    def __init__(self, w: int, h: int) -> None:
        self.w, self.h = w, h
        self.px = bytearray(w * h * 4)

    def put(self, x: int, y: int, c) -> None:
        """Alpha-blend colour c=(r,g,b[,a]) onto pixel (x, y)."""
        if not (0 <= x < self.w and 0 <= y < self.h):
            return
        r, g, b = c[0], c[1], c[2]
        a = c[3] if len(c) > 3 else 255
        i = (y * self.w + x) * 4
        if a >= 255:
            self.px[i:i + 4] = bytes((r, g, b, 255))
            return
        if a <= 0:
            return
        da = self.px[i + 3]
        out_a = a + da * (255 - a) // 255
        if out_a == 0:
            return
        for k, sc in enumerate((r, g, b)):
            dc = self.px[i + k]
            self.px[i + k] = (sc * a + dc * da * (255 - a) // 255) // out_a
        self.px[i + 3] = out_a

    def get(self, x: int, y: int):
        i = (y * self.w + x) * 4
        return tuple(self.px[i:i + 4])

    def rect(self, x: int, y: int, w: int, h: int, c) -> None:
        for yy in range(y, y + h):
            for xx in range(x, x + w):
                self.put(xx, yy, c)

    def frame(self, x: int, y: int, w: int, h: int, c, t: int = 1) -> None:
        self.rect(x, y, w, t, c)
        self.rect(x, y + h - t, w, t, c)
        self.rect(x, y, t, h, c)
        self.rect(x + w - t, y, t, h, c)

    def box(self, x: int, y: int, w: int, h: int, fill, outline, light=None) -> None:
        """A filled rectangle with an outline and an optional top-left highlight."""
        self.rect(x, y, w, h, fill)
        if light is not None:
            self.rect(x + 1, y + 1, w - 2, 1, light)
            self.rect(x + 1, y + 1, 1, h - 2, light)
        self.frame(x, y, w, h, outline)

    def disc(self, cx: float, cy: float, r: float, c) -> None:
        for yy in range(int(cy - r - 1), int(cy + r + 2)):
            for xx in range(int(cx - r - 1), int(cx + r + 2)):
                if (xx + 0.5 - cx) ** 2 + (yy + 0.5 - cy) ** 2 <= r * r:
                    self.put(xx, yy, c)

    def ellipse(self, cx: float, cy: float, rx: float, ry: float, c) -> None:
        for yy in range(int(cy - ry - 1), int(cy + ry + 2)):
            for xx in range(int(cx - rx - 1), int(cx + rx + 2)):
                if ((xx + 0.5 - cx) / rx) ** 2 + ((yy + 0.5 - cy) / ry) ** 2 <= 1.0:
                    self.put(xx, yy, c)

    def ring(self, cx: float, cy: float, r: float, c, t: float = 1.0) -> None:
        for yy in range(int(cy - r - 1), int(cy + r + 2)):
            for xx in range(int(cx - r - 1), int(cx + r + 2)):
                d = math.hypot(xx + 0.5 - cx, yy + 0.5 - cy)
                if r - t <= d <= r:
                    self.put(xx, yy, c)

    def line(self, x0: int, y0: int, x1: int, y1: int, c) -> None:
        n = max(abs(x1 - x0), abs(y1 - y0), 1)
        for i in range(n + 1):
            self.put(round(x0 + (x1 - x0) * i / n), round(y0 + (y1 - y0) * i / n), c)

    def speckle(self, rng: random.Random, colours, count: int, size: int = 1) -> None:
        for _ in range(count):
            x, y = rng.randrange(self.w), rng.randrange(self.h)
            self.rect(x, y, size, size, rng.choice(colours))

    def blit(self, other: "Canvas", ox: int, oy: int) -> None:
        for y in range(other.h):
            for x in range(other.w):
                c = other.get(x, y)
                if c[3]:
                    self.put(ox + x, oy + y, c)

    def shadow(self, x: int, y: int, w: int, h: int) -> None:
        """A soft drop shadow under furniture, offset down-right."""
        self.rect(x + 2, y + 2, w, h, (0, 0, 0, 50))


def darker(c, f: float = 0.75):
    return tuple(max(0, int(v * f)) for v in c[:3])


def lighter(c, f: float = 1.25):
    return tuple(min(255, int(v * f)) for v in c[:3])


OUTLINE = (40, 30, 28)
WOOD = (150, 100, 56)
WOOD_DARK = (104, 66, 36)
WOOD_LIGHT = (190, 140, 86)
WHITE = (240, 240, 236)
METAL = (150, 156, 164)

# --------------------------------------------------------------------------------------------
# The tiles. Each function draws one 32x32 tile; the order of TILES is the tileset order.
# --------------------------------------------------------------------------------------------


def grass(c: Canvas, rng: random.Random, flowers: bool = False, tufts: int = 18) -> None:
    c.rect(0, 0, TILE, TILE, (92, 158, 74))
    c.speckle(rng, [(80, 144, 64), (104, 170, 84), (86, 150, 70)], 120, 2)
    for _ in range(tufts):
        x, y = rng.randrange(1, TILE - 1), rng.randrange(2, TILE)
        c.put(x, y, (66, 124, 54))
        c.put(x, y - 1, (66, 124, 54))
        c.put(x + 1, y - 2, (120, 186, 96))
    if flowers:
        for _ in range(6):
            x, y = rng.randrange(2, TILE - 3), rng.randrange(2, TILE - 3)
            col = rng.choice([(250, 250, 250), (250, 220, 80), (240, 130, 170), (170, 140, 240)])
            c.rect(x, y, 2, 2, col)
            c.put(x + 2, y + 1, (250, 220, 80))


def t_grass(c, rng):
    grass(c, rng)


def t_grass2(c, rng):
    grass(c, rng, tufts=40)


def t_flowers(c, rng):
    grass(c, rng, flowers=True)


def t_dirt(c, rng):
    c.rect(0, 0, TILE, TILE, (200, 168, 118))
    c.speckle(rng, [(186, 152, 104), (212, 182, 134), (176, 142, 96)], 140, 2)
    for _ in range(5):
        x, y = rng.randrange(2, TILE - 3), rng.randrange(2, TILE - 3)
        c.rect(x, y, 2, 2, (150, 140, 128))


def t_cobble(c, rng):
    c.rect(0, 0, TILE, TILE, (110, 106, 100))
    for row in range(4):
        off = 0 if row % 2 == 0 else 5
        for col in range(-1, 4):
            x = col * 10 + off
            shade = rng.choice([(160, 156, 148), (150, 146, 140), (170, 166, 158), (142, 140, 136)])
            c.rect(x + 1, row * 8 + 1, 8, 6, shade)
            c.rect(x + 1, row * 8 + 1, 8, 1, lighter(shade, 1.12))
            c.rect(x + 1, row * 8 + 6, 8, 1, darker(shade, 0.85))


def t_water(c, rng):
    c.rect(0, 0, TILE, TILE, (58, 116, 196))
    c.speckle(rng, [(52, 106, 184), (66, 126, 206)], 80, 2)
    for _ in range(6):
        x, y = rng.randrange(0, TILE - 8), rng.randrange(2, TILE - 2)
        c.rect(x, y, 6, 1, (150, 196, 240))
        c.rect(x + 1, y - 1, 4, 1, (110, 168, 226))


def bridge(c, rng, rail_left: bool):
    t_water(c, rng)
    for y in range(0, TILE, 6):
        shade = rng.choice([(170, 122, 74), (160, 112, 66), (180, 130, 80)])
        c.rect(0, y, TILE, 5, shade)
        c.rect(0, y + 5, TILE, 1, WOOD_DARK)
    x = 0 if rail_left else TILE - 4
    c.rect(x, 0, 4, TILE, (120, 78, 42))
    c.rect(x + 1, 0, 1, TILE, (160, 110, 64))
    for y in (2, 17):
        c.rect(x, y, 4, 4, (90, 58, 30))


def t_bridge_l(c, rng):
    bridge(c, rng, True)


def t_bridge_r(c, rng):
    bridge(c, rng, False)


def t_wood_floor(c, rng):
    for row in range(4):
        seam = rng.randrange(4, 28)
        base = rng.choice([(176, 124, 76), (168, 118, 72), (184, 132, 82)])
        c.rect(0, row * 8, TILE, 8, base)
        c.rect(0, row * 8 + 7, TILE, 1, (128, 86, 50))
        c.rect(seam, row * 8, 1, 7, (128, 86, 50))
        for _ in range(3):
            gx, gy = rng.randrange(TILE - 6), row * 8 + rng.randrange(1, 6)
            c.rect(gx, gy, 5, 1, darker(base, 0.9))


def t_tile_floor(c, rng):
    for ty in range(4):
        for tx in range(4):
            col = (232, 228, 214) if (tx + ty) % 2 == 0 else (176, 204, 214)
            c.rect(tx * 8, ty * 8, 8, 8, col)
    for i in range(0, TILE, 8):
        c.rect(i, 0, 1, TILE, (150, 150, 146))
        c.rect(0, i, TILE, 1, (150, 150, 146))


def t_carpet(c, rng):
    c.rect(0, 0, TILE, TILE, (96, 110, 160))
    c.speckle(rng, [(88, 100, 150), (104, 118, 170)], 90)
    for y in range(4, TILE, 8):
        for x in range(4, TILE, 8):
            c.rect(x - 1, y, 3, 1, (136, 150, 196))
            c.rect(x, y - 1, 1, 3, (136, 150, 196))


def t_stone_floor(c, rng):
    c.rect(0, 0, TILE, TILE, (150, 150, 146))
    for ty in range(2):
        for tx in range(2):
            shade = rng.choice([(200, 198, 190), (192, 190, 184), (206, 204, 196)])
            c.rect(tx * 16 + 1, ty * 16 + 1, 15, 15, shade)
            c.speckle(rng, [darker(shade, 0.95)], 0)
    c.speckle(rng, [(180, 178, 172)], 30)


def wall_base(c, rng):
    c.rect(0, 0, TILE, TILE, (120, 74, 58))
    for row in range(4):
        off = 0 if row % 2 == 0 else 8
        for col in range(-1, 3):
            x = col * 16 + off
            shade = rng.choice([(168, 92, 70), (158, 86, 64), (176, 100, 76)])
            c.rect(x + 1, row * 8 + 1, 14, 6, shade)
            c.rect(x + 1, row * 8 + 1, 14, 1, lighter(shade, 1.15))
    c.frame(0, 0, TILE, TILE, (70, 42, 34))


def t_wall(c, rng):
    wall_base(c, rng)


def t_wall_window(c, rng):
    wall_base(c, rng)
    c.box(7, 7, 18, 18, (150, 200, 236), (236, 230, 214))
    c.rect(15, 8, 2, 16, (236, 230, 214))
    c.rect(8, 15, 16, 2, (236, 230, 214))
    c.rect(9, 9, 4, 2, (220, 240, 252))


def door(c, rng, horizontal: bool):
    t_wood_floor(c, rng)
    if horizontal:  # a gap in a horizontal wall: posts left and right
        c.box(0, 0, 5, TILE, (120, 74, 58), (70, 42, 34))
        c.box(TILE - 5, 0, 5, TILE, (120, 74, 58), (70, 42, 34))
        c.rect(5, 12, TILE - 10, 8, (96, 140, 96))
        c.frame(5, 12, TILE - 10, 8, (70, 104, 70))
    else:
        c.box(0, 0, TILE, 5, (120, 74, 58), (70, 42, 34))
        c.box(0, TILE - 5, TILE, 5, (120, 74, 58), (70, 42, 34))
        c.rect(12, 5, 8, TILE - 10, (96, 140, 96))
        c.frame(12, 5, 8, TILE - 10, (70, 104, 70))


def t_door_h(c, rng):
    door(c, rng, True)


def t_door_v(c, rng):
    door(c, rng, False)


def t_bed_top(c, rng):
    c.shadow(3, 2, 26, 30)
    c.box(3, 2, 26, 30, WOOD, OUTLINE, WOOD_LIGHT)
    c.rect(5, 4, 22, 28, (236, 236, 240))
    c.box(7, 6, 18, 10, WHITE, (170, 170, 180))
    c.rect(8, 14, 16, 2, (210, 210, 220))
    c.rect(5, 22, 22, 10, (70, 120, 190))
    c.rect(5, 22, 22, 2, (236, 236, 240))


def t_bed_bottom(c, rng):
    c.shadow(3, 0, 26, 29)
    c.rect(3, 0, 26, 29, WOOD)
    c.rect(3, 0, 1, 29, OUTLINE)
    c.rect(28, 0, 1, 29, OUTLINE)
    c.rect(3, 28, 26, 1, OUTLINE)
    c.rect(5, 0, 22, 24, (70, 120, 190))
    for y in range(3, 22, 6):
        c.rect(5, y, 22, 1, (90, 140, 206))
    c.rect(4, 24, 24, 4, WOOD_DARK)


def t_desk(c, rng):
    c.shadow(2, 4, 28, 22)
    c.box(2, 4, 28, 22, WOOD, OUTLINE, WOOD_LIGHT)
    c.box(6, 8, 10, 12, WHITE, (170, 170, 170))
    for y in (11, 14, 17):
        c.rect(8, y, 6, 1, (150, 150, 160))
    c.line(20, 10, 26, 16, (40, 40, 120))
    c.disc(24, 21, 2.5, (200, 80, 60))


def t_chair(c, rng):
    c.shadow(8, 8, 16, 18)
    c.box(8, 8, 16, 18, (160, 108, 62), OUTLINE, WOOD_LIGHT)
    c.box(8, 4, 16, 5, WOOD_DARK, OUTLINE)
    c.rect(11, 12, 10, 10, (176, 120, 72))


def t_closet(c, rng):
    c.shadow(2, 2, 28, 28)
    c.box(2, 2, 28, 28, (132, 86, 50), OUTLINE, (170, 118, 72))
    c.rect(15, 3, 2, 26, WOOD_DARK)
    c.rect(11, 13, 2, 6, (220, 190, 90))
    c.rect(19, 13, 2, 6, (220, 190, 90))
    c.rect(4, 26, 24, 2, WOOD_DARK)


def t_stove(c, rng):
    c.shadow(2, 2, 28, 28)
    c.box(2, 2, 28, 28, (70, 72, 78), OUTLINE, (100, 104, 112))
    for cx, cy in ((10, 10), (22, 10), (10, 21), (22, 21)):
        c.disc(cx, cy, 5, (30, 30, 34))
        c.ring(cx, cy, 4, (200, 80, 50), 1)
    c.rect(4, 27, 24, 2, (50, 50, 54))


def t_fridge(c, rng):
    c.shadow(3, 1, 26, 30)
    c.box(3, 1, 26, 30, (226, 232, 238), OUTLINE, WHITE)
    c.rect(4, 11, 24, 1, (160, 168, 176))
    c.rect(23, 4, 2, 5, (130, 136, 146))
    c.rect(23, 14, 2, 10, (130, 136, 146))
    c.rect(7, 16, 5, 4, (240, 120, 120))


def t_kitchen_counter(c, rng):
    c.shadow(0, 2, 32, 28)
    c.box(0, 2, 32, 28, (214, 204, 180), OUTLINE, (236, 228, 206))
    c.rect(1, 24, 30, 5, (150, 112, 74))
    c.rect(15, 25, 2, 3, (90, 70, 50))
    c.box(6, 8, 10, 8, (190, 150, 100), (120, 90, 60))
    c.disc(24, 12, 3, (230, 80, 60))


def t_table(c, rng):
    c.shadow(1, 3, 30, 26)
    c.box(1, 3, 30, 26, (164, 112, 64), OUTLINE, WOOD_LIGHT)
    for y in (9, 16, 23):
        c.rect(3, y, 26, 1, (146, 98, 56))
    c.disc(16, 16, 4, WHITE)
    c.disc(16, 16, 2, (220, 140, 60))


def t_round_table(c, rng):
    c.disc(18, 18, 12, (0, 0, 0, 50))
    c.disc(16, 16, 12, OUTLINE)
    c.disc(16, 16, 11, (164, 112, 64))
    c.disc(15, 15, 8, (180, 126, 74))
    c.disc(16, 16, 3, WHITE)
    c.disc(21, 12, 2, (200, 120, 60))


def t_shower(c, rng):
    c.box(1, 1, 30, 30, (200, 226, 236), (110, 130, 150))
    for i in range(1, TILE, 6):
        c.rect(i, 1, 1, 30, (176, 206, 220))
        c.rect(1, i, 30, 1, (176, 206, 220))
    c.disc(16, 17, 3, (120, 130, 140))
    c.box(12, 2, 8, 5, METAL, (80, 86, 96))


def t_sink(c, rng):
    c.shadow(3, 4, 26, 22)
    c.box(3, 4, 26, 22, (232, 232, 228), OUTLINE, WHITE)
    c.ellipse(16, 16, 9, 6, (190, 206, 214))
    c.disc(16, 17, 1.5, (100, 110, 120))
    c.rect(15, 5, 2, 6, METAL)
    c.rect(12, 5, 8, 2, METAL)


def t_toilet(c, rng):
    c.shadow(8, 3, 16, 26)
    c.box(9, 3, 14, 8, (236, 236, 232), OUTLINE, WHITE)
    c.ellipse(16, 19, 8, 10, OUTLINE)
    c.ellipse(16, 19, 7, 9, (240, 240, 236))
    c.ellipse(16, 20, 4, 6, (190, 214, 226))


def t_counter(c, rng):
    c.shadow(0, 3, 32, 26)
    c.box(0, 3, 32, 26, (110, 70, 40), OUTLINE, (150, 100, 60))
    c.rect(1, 4, 30, 8, (140, 94, 56))
    c.rect(1, 12, 30, 1, (80, 50, 28))
    for x in (6, 16, 26):
        c.rect(x, 15, 1, 12, (90, 58, 32))


def t_coffee_machine(c, rng):
    c.shadow(5, 3, 22, 26)
    c.box(5, 3, 22, 26, (54, 54, 60), OUTLINE, (90, 90, 100))
    c.box(8, 6, 16, 7, (180, 186, 194), (90, 96, 104))
    c.rect(10, 8, 5, 3, (90, 200, 120))
    c.disc(12, 21, 4, WHITE)
    c.disc(12, 21, 2.5, (110, 70, 40))
    c.disc(21, 21, 2, (200, 60, 50))


def t_bookshelf(c, rng):
    c.shadow(1, 1, 30, 30)
    c.box(1, 1, 30, 30, WOOD_DARK, OUTLINE)
    for row in range(3):
        y = 3 + row * 9
        x = 3
        while x < 28:
            w = rng.choice([2, 3, 3, 4])
            col = rng.choice([(180, 50, 50), (50, 90, 170), (60, 140, 80), (210, 170, 60),
                              (130, 70, 150), (220, 220, 210)])
            h = rng.choice([7, 8, 8])
            c.rect(x, y + 8 - h, min(w, 29 - x), h, col)
            x += w + (1 if rng.random() < 0.3 else 0)
        c.rect(2, y + 8, 28, 1, (70, 44, 24))


def t_shelf(c, rng):
    c.shadow(1, 1, 30, 30)
    c.box(1, 1, 30, 30, (180, 184, 190), (80, 84, 92))
    for row in range(3):
        y = 3 + row * 9
        for x in range(3, 28, 5):
            col = rng.choice([(220, 80, 60), (240, 200, 70), (80, 160, 210), (120, 190, 90),
                              (250, 250, 240), (210, 130, 60)])
            c.box(x, y + 1, 4, 7, col, darker(col, 0.7))
        c.rect(2, y + 8, 28, 1, (120, 124, 132))


def t_cash_register(c, rng):
    t_counter(c, rng)
    c.box(8, 4, 16, 12, (70, 74, 82), OUTLINE, (110, 114, 124))
    c.rect(10, 6, 12, 4, (120, 220, 140))
    for x in range(10, 22, 3):
        c.rect(x, 12, 2, 2, (220, 220, 220))


def t_produce_stand(c, rng):
    c.shadow(1, 3, 30, 27)
    c.box(1, 3, 30, 27, (176, 130, 76), OUTLINE, (206, 160, 100))
    for x0, col in ((3, (210, 50, 40)), (12, (240, 150, 40)), (21, (110, 180, 60))):
        c.rect(x0, 5, 8, 22, (140, 100, 56))
        for _ in range(9):
            x, y = x0 + rng.randrange(1, 6), rng.randrange(6, 24)
            c.disc(x + 1.5, y + 1.5, 2.2, col)
            c.put(x + 1, y, lighter(col, 1.3))


def t_bench(c, rng):
    c.shadow(1, 8, 30, 16)
    c.rect(3, 22, 3, 5, (60, 60, 60))
    c.rect(26, 22, 3, 5, (60, 60, 60))
    for y in (8, 13, 18):
        c.box(1, y, 30, 4, (170, 116, 66), OUTLINE)
    c.box(1, 4, 30, 3, (130, 86, 48), OUTLINE)


def fountain_part(qx: int, qy: int):
    """A quarter of the 2x2 fountain (qx, qy in {0, 1})."""

    def draw(c, rng):
        big = Canvas(64, 64)
        big.disc(32, 32, 30, (120, 120, 126))
        big.disc(32, 32, 28, (176, 176, 180))
        big.disc(32, 32, 24, (70, 140, 210))
        r2 = random.Random(7)
        for _ in range(14):
            x, y = r2.randrange(14, 48), r2.randrange(14, 48)
            if (x - 32) ** 2 + (y - 32) ** 2 < 20 * 20:
                big.rect(x, y, 4, 1, (160, 210, 245))
        big.disc(32, 32, 7, (176, 176, 180))
        big.disc(32, 32, 4, (200, 230, 250))
        big.disc(31, 31, 2, WHITE)
        c.blit(crop(big, qx * TILE, qy * TILE), 0, 0)

    return draw


def crop(src: Canvas, x0: int, y0: int) -> Canvas:
    out = Canvas(TILE, TILE)
    for y in range(TILE):
        for x in range(TILE):
            i = ((y0 + y) * src.w + x0 + x) * 4
            out.px[(y * TILE + x) * 4:(y * TILE + x) * 4 + 4] = src.px[i:i + 4]
    return out


def t_garden(c, rng):
    c.rect(0, 0, TILE, TILE, (120, 86, 56))
    c.speckle(rng, [(104, 74, 48), (136, 98, 64)], 60, 2)
    for row in range(3):
        y = 5 + row * 10
        for x in range(4, TILE, 8):
            c.disc(x, y, 3.5, (70, 150, 60))
            c.put(x - 1, y - 2, (120, 200, 100))
            if rng.random() < 0.5:
                c.rect(x, y - 1, 2, 2, rng.choice([(240, 90, 110), (250, 220, 80), (250, 250, 250)]))


def t_piano(c, rng):
    c.shadow(1, 4, 30, 26)
    c.box(1, 4, 30, 26, (30, 28, 30), (10, 10, 10), (70, 66, 70))
    c.rect(3, 6, 26, 8, (50, 46, 50))
    c.rect(2, 20, 28, 8, WHITE)
    for x in range(3, 30, 3):
        c.rect(x, 20, 1, 8, (120, 120, 120))
    for x in range(4, 29, 3):
        if x % 9 != 1:
            c.rect(x, 20, 2, 5, (20, 20, 20))


def t_dartboard(c, rng):
    c.shadow(6, 4, 20, 26)
    c.rect(14, 20, 4, 10, WOOD_DARK)
    c.rect(9, 28, 14, 3, WOOD_DARK)
    c.disc(16, 14, 11, (20, 20, 20))
    c.disc(16, 14, 9, (230, 220, 190))
    c.ring(16, 14, 9, (200, 40, 40), 2)
    c.disc(16, 14, 5.5, (40, 140, 60))
    c.disc(16, 14, 4, (230, 220, 190))
    c.disc(16, 14, 1.6, (200, 40, 40))
    c.line(16, 3, 16, 25, (20, 20, 20))
    c.line(5, 14, 27, 14, (20, 20, 20))


def t_lectern(c, rng):
    c.shadow(7, 6, 18, 22)
    c.rect(13, 18, 6, 10, WOOD_DARK)
    c.box(7, 6, 18, 14, WOOD, OUTLINE, WOOD_LIGHT)
    c.box(9, 8, 14, 9, WHITE, (150, 150, 150))
    c.rect(16, 8, 1, 9, (150, 150, 150))


def t_blackboard(c, rng):
    c.shadow(0, 4, 32, 20)
    c.box(0, 4, 32, 20, (40, 80, 56), (110, 76, 44))
    c.frame(1, 5, 30, 18, (150, 104, 60))
    c.line(5, 10, 14, 10, (230, 230, 230))
    c.line(5, 14, 22, 14, (230, 230, 230))
    c.line(5, 18, 11, 18, (230, 230, 230))
    c.line(18, 9, 26, 18, (230, 230, 200))
    c.rect(10, 24, 12, 2, (200, 200, 200))


def t_computer(c, rng):
    t_desk_plain(c, rng)
    c.box(8, 5, 16, 12, (40, 40, 46), OUTLINE)
    c.rect(9, 6, 14, 9, (80, 140, 210))
    c.rect(10, 7, 6, 1, (200, 230, 250))
    c.rect(14, 17, 4, 2, (60, 60, 66))
    c.box(7, 20, 18, 5, (200, 200, 204), (100, 100, 110))


def t_desk_plain(c, rng):
    c.shadow(2, 3, 28, 24)
    c.box(2, 3, 28, 24, WOOD, OUTLINE, WOOD_LIGHT)


def t_student_desk(c, rng):
    c.shadow(3, 6, 26, 18)
    c.box(3, 6, 26, 18, (190, 150, 100), OUTLINE, (214, 178, 126))
    c.box(8, 9, 12, 9, WHITE, (170, 170, 170))
    c.line(22, 10, 24, 20, (230, 200, 60))


def t_tree(c, rng):
    grass(c, rng)
    c.ellipse(18, 20, 13, 10, (0, 0, 0, 70))
    c.rect(14, 22, 5, 8, (96, 64, 36))
    c.disc(16, 14, 13, (34, 92, 44))
    c.disc(16, 13, 12, (52, 120, 56))
    for cx, cy, r in ((11, 10, 5), (20, 9, 5), (15, 17, 5), (22, 16, 4)):
        c.disc(cx, cy, r, (72, 146, 70))
    c.disc(11, 8, 2, (120, 190, 110))
    c.disc(19, 7, 2, (120, 190, 110))


def t_bush(c, rng):
    c.ellipse(17, 20, 12, 8, (0, 0, 0, 60))
    c.disc(16, 17, 11, (40, 104, 48))
    c.disc(12, 15, 6, (64, 136, 64))
    c.disc(20, 14, 6, (64, 136, 64))
    c.disc(16, 20, 5, (56, 126, 58))
    for _ in range(4):
        c.rect(rng.randrange(8, 22), rng.randrange(9, 22), 2, 2, (220, 80, 100))


def t_lamp_post(c, rng):
    c.ellipse(17, 29, 7, 2, (0, 0, 0, 70))
    c.disc(16, 9, 9, (255, 230, 140, 60))
    c.rect(15, 10, 3, 19, (40, 40, 44))
    c.rect(12, 27, 9, 3, (40, 40, 44))
    c.box(11, 3, 11, 9, (60, 60, 66), (20, 20, 24))
    c.rect(13, 5, 7, 5, (255, 232, 140))


def t_flower_pot(c, rng):
    c.ellipse(17, 27, 9, 3, (0, 0, 0, 60))
    c.box(10, 18, 13, 10, (190, 100, 60), (110, 56, 34), (216, 130, 84))
    c.disc(16, 13, 8, (60, 140, 60))
    for cx, cy in ((12, 10), (19, 11), (16, 15), (15, 8)):
        c.disc(cx, cy, 2, (240, 100, 130))
        c.put(cx, cy, (250, 220, 80))


def t_rock(c, rng):
    c.ellipse(17, 22, 12, 6, (0, 0, 0, 60))
    c.ellipse(16, 18, 12, 9, (96, 96, 100))
    c.ellipse(15, 16, 10, 7, (132, 132, 136))
    c.ellipse(12, 13, 4, 2, (170, 170, 172))


def t_barrel(c, rng):
    c.disc(18, 18, 12, (0, 0, 0, 60))
    c.disc(16, 16, 12, OUTLINE)
    c.disc(16, 16, 11, (150, 98, 54))
    c.ring(16, 16, 11, (80, 80, 86), 2)
    c.ring(16, 16, 6, (80, 80, 86), 1)
    c.disc(14, 14, 3, (176, 120, 70))


def t_mailbox(c, rng):
    c.ellipse(17, 29, 6, 2, (0, 0, 0, 70))
    c.rect(15, 16, 3, 13, WOOD_DARK)
    c.box(8, 7, 17, 10, (60, 90, 170), OUTLINE, (90, 124, 200))
    c.rect(23, 3, 2, 7, (200, 50, 40))
    c.rect(23, 3, 5, 3, (200, 50, 40))


def t_rug(c, rng):
    c.box(2, 2, 28, 28, (170, 60, 60), (110, 40, 40))
    c.frame(5, 5, 22, 22, (230, 190, 110))
    c.rect(12, 12, 8, 8, (230, 190, 110))
    c.rect(14, 14, 4, 4, (170, 60, 60))


def t_counter_sink(c, rng):
    t_kitchen_counter(c, rng)
    c.box(5, 6, 22, 14, (190, 196, 204), (100, 106, 116))
    c.rect(7, 8, 18, 10, (150, 170, 186))
    c.rect(15, 3, 2, 5, METAL)


def t_bottle_shelf(c, rng):
    c.shadow(0, 2, 32, 28)
    c.box(0, 2, 32, 28, WOOD_DARK, OUTLINE)
    for row in range(2):
        y = 5 + row * 12
        for x in range(3, 29, 4):
            col = rng.choice([(60, 130, 70), (130, 70, 40), (200, 190, 120), (90, 60, 110)])
            c.rect(x, y + 2, 3, 8, col)
            c.rect(x + 1, y, 1, 2, col)
        c.rect(1, y + 10, 30, 1, (60, 38, 20))


def t_collision(c, rng):
    c.rect(0, 0, TILE, TILE, (220, 40, 40, 90))
    c.frame(0, 0, TILE, TILE, (220, 40, 40, 200), 2)
    for i in range(TILE):
        c.put(i, i, (220, 40, 40, 200))
        c.put(TILE - 1 - i, i, (220, 40, 40, 200))


# (name, draw function, blocks movement when placed on the furniture layer)
TILES = [
    ("grass", t_grass, False),
    ("grass_tufts", t_grass2, False),
    ("grass_flowers", t_flowers, False),
    ("dirt", t_dirt, False),
    ("cobble", t_cobble, False),
    ("water", t_water, True),
    ("bridge_left", t_bridge_l, False),
    ("bridge_right", t_bridge_r, False),
    ("wood_floor", t_wood_floor, False),
    ("tile_floor", t_tile_floor, False),
    ("carpet", t_carpet, False),
    ("stone_floor", t_stone_floor, False),
    ("wall", t_wall, True),
    ("wall_window", t_wall_window, True),
    ("door_h", t_door_h, False),
    ("door_v", t_door_v, False),
    ("bed_top", t_bed_top, False),
    ("bed_bottom", t_bed_bottom, False),
    ("desk", t_desk, True),
    ("chair", t_chair, False),
    ("closet", t_closet, True),
    ("stove", t_stove, True),
    ("refrigerator", t_fridge, True),
    ("kitchen_counter", t_kitchen_counter, True),
    ("table", t_table, True),
    ("round_table", t_round_table, True),
    ("shower", t_shower, False),
    ("sink", t_sink, True),
    ("toilet", t_toilet, False),
    ("counter", t_counter, True),
    ("coffee_machine", t_coffee_machine, True),
    ("bookshelf", t_bookshelf, True),
    ("shelf", t_shelf, True),
    ("cash_register", t_cash_register, True),
    ("produce_stand", t_produce_stand, True),
    ("bench", t_bench, False),
    ("fountain_nw", fountain_part(0, 0), True),
    ("fountain_ne", fountain_part(1, 0), True),
    ("fountain_sw", fountain_part(0, 1), True),
    ("fountain_se", fountain_part(1, 1), True),
    ("garden", t_garden, False),
    ("piano", t_piano, True),
    ("dartboard", t_dartboard, True),
    ("lectern", t_lectern, True),
    ("blackboard", t_blackboard, True),
    ("computer", t_computer, True),
    ("student_desk", t_student_desk, True),
    ("tree", t_tree, True),
    ("bush", t_bush, True),
    ("lamp_post", t_lamp_post, True),
    ("flower_pot", t_flower_pot, True),
    ("rock", t_rock, True),
    ("barrel", t_barrel, True),
    ("mailbox", t_mailbox, True),
    ("rug", t_rug, False),
    ("counter_sink", t_counter_sink, True),
    ("bottle_shelf", t_bottle_shelf, True),
    ("collision", t_collision, True),
]
TILE_ID = {name: i for i, (name, _, _) in enumerate(TILES)}
BLOCKS = {name for name, _, blocks in TILES if blocks}


def render_tileset() -> Canvas:
    rows = (len(TILES) + COLUMNS - 1) // COLUMNS
    sheet = Canvas(COLUMNS * TILE, rows * TILE)
    for i, (name, draw, _) in enumerate(TILES):
        tile = Canvas(TILE, TILE)
        draw(tile, random.Random(f"willowbrook:{name}"))
        sheet.blit(tile, (i % COLUMNS) * TILE, (i // COLUMNS) * TILE)
    return sheet


# --------------------------------------------------------------------------------------------
# The town layout
# --------------------------------------------------------------------------------------------


class Town:
    """Layers of tile names plus the address rectangles (all in tile units)."""

    def __init__(self) -> None:
        self.ground = [["grass"] * MAP_W for _ in range(MAP_H)]
        self.walls: list[list[str | None]] = [[None] * MAP_W for _ in range(MAP_H)]
        self.furniture: list[list[str | None]] = [[None] * MAP_W for _ in range(MAP_H)]
        self.sectors: list[tuple[str, int, int, int, int]] = []
        self.arenas: list[tuple[str, int, int, int, int]] = []
        self.objects: list[tuple[str, int, int, int, int]] = []
        self.spawns: list[tuple[str, int, int]] = []

    # -- painting helpers --
    def fill(self, layer, x: int, y: int, w: int, h: int, name: str | None) -> None:
        for yy in range(y, y + h):
            for xx in range(x, x + w):
                layer[yy][xx] = name

    def put(self, x: int, y: int, name: str) -> None:
        self.furniture[y][x] = name

    def obj(self, name: str, x: int, y: int, w: int = 1, h: int = 1) -> None:
        self.objects.append((name, x, y, w, h))

    def building(self, x: int, y: int, w: int, h: int, floor: str) -> None:
        """Floor inside, walls around (with a few windows on the outside)."""
        self.fill(self.ground, x, y, w, h, floor)
        for xx in range(x, x + w):
            for yy in (y, y + h - 1):
                self.walls[yy][xx] = "wall_window" if (xx - x) % 5 == 2 and 0 < xx - x < w - 1 else "wall"
        for yy in range(y, y + h):
            for xx in (x, x + w - 1):
                self.walls[yy][xx] = "wall_window" if (yy - y) % 4 == 2 and 0 < yy - y < h - 1 else "wall"

    def hwall(self, x: int, y: int, w: int) -> None:
        self.fill(self.walls, x, y, w, 1, "wall")

    def vwall(self, x: int, y: int, h: int) -> None:
        self.fill(self.walls, x, y, 1, h, "wall")

    def door(self, x: int, y: int, horizontal: bool = True, arena: str | None = None) -> None:
        self.walls[y][x] = "door_h" if horizontal else "door_v"
        if arena is not None:
            self.arenas.append((arena, x, y, 1, 1))

    def blocked(self, x: int, y: int) -> bool:
        if self.ground[y][x] == "water":
            return True
        w = self.walls[y][x]
        if w is not None and w in BLOCKS:
            return True
        f = self.furniture[y][x]
        return f is not None and f in BLOCKS


def house(t: Town, x0: int, y0: int, beds: int, spawns: list[str]) -> None:
    """A 16x10 house: bedroom and bathroom at the back, kitchen at the front (door south)."""
    t.building(x0, y0, 16, 10, "wood_floor")
    t.fill(t.ground, x0 + 1, y0 + 1, 7, 4, "carpet")
    t.fill(t.ground, x0 + 9, y0 + 1, 6, 4, "tile_floor")
    t.fill(t.ground, x0 + 1, y0 + 6, 14, 3, "tile_floor")
    t.vwall(x0 + 8, y0 + 1, 4)
    t.hwall(x0 + 1, y0 + 5, 14)
    t.door(x0 + 6, y0 + 5, arena="bedroom")
    t.door(x0 + 10, y0 + 5, arena="bathroom")
    t.door(x0 + 7, y0 + 9, arena="kitchen")
    t.door(x0 + 8, y0 + 9, arena="kitchen")
    t.arenas += [
        ("bedroom", x0 + 1, y0 + 1, 7, 4),
        ("bathroom", x0 + 9, y0 + 1, 6, 4),
        ("kitchen", x0 + 1, y0 + 6, 14, 3),
    ]
    t.sectors.append((SECTOR_OF[x0, y0], x0, y0, 16, 10))
    # bedroom: beds (walkable, spawn on the pillow), desk with chair, closet
    for i in range(beds):
        bx = x0 + 1 + 2 * i
        t.put(bx, y0 + 1, "bed_top")
        t.put(bx, y0 + 2, "bed_bottom")
        t.obj("bed", bx, y0 + 1, 1, 2)
        t.spawns.append((spawns[i], bx, y0 + 1))
    t.put(x0 + 5, y0 + 1, "desk")
    t.put(x0 + 5, y0 + 2, "chair")
    t.obj("desk", x0 + 5, y0 + 1, 1, 2)
    t.put(x0 + 7, y0 + 1, "closet")
    t.obj("closet", x0 + 7, y0 + 1)
    t.put(x0 + 3, y0 + 4, "rug")
    t.put(x0 + 7, y0 + 4, "flower_pot")
    # bathroom
    t.put(x0 + 9, y0 + 1, "sink")
    t.obj("sink", x0 + 9, y0 + 1)
    t.put(x0 + 12, y0 + 1, "toilet")
    t.obj("toilet", x0 + 12, y0 + 1)
    t.put(x0 + 14, y0 + 1, "shower")
    t.put(x0 + 14, y0 + 2, "shower")
    t.obj("shower", x0 + 14, y0 + 1, 1, 2)
    # kitchen: appliances along the back wall, table with chairs in the middle
    t.put(x0 + 1, y0 + 6, "refrigerator")
    t.obj("refrigerator", x0 + 1, y0 + 6)
    t.put(x0 + 2, y0 + 6, "stove")
    t.obj("stove", x0 + 2, y0 + 6)
    for dx in (3, 4):
        t.put(x0 + dx, y0 + 6, "kitchen_counter")
    t.put(x0 + 5, y0 + 6, "counter_sink")
    t.obj("kitchen counter", x0 + 3, y0 + 6, 3, 1)
    t.put(x0 + 11, y0 + 7, "table")
    t.put(x0 + 12, y0 + 7, "table")
    t.put(x0 + 10, y0 + 7, "chair")
    t.put(x0 + 13, y0 + 7, "chair")
    t.obj("dining table", x0 + 10, y0 + 7, 4, 1)
    t.put(x0 + 14, y0 + 8, "flower_pot")


def cafe(t: Town, x0: int, y0: int) -> None:
    """Riverside Cafe: 16x11, door north, cafe in front, kitchen at the back."""
    t.building(x0, y0, 16, 11, "wood_floor")
    t.fill(t.ground, x0 + 1, y0 + 8, 14, 2, "tile_floor")
    t.hwall(x0 + 1, y0 + 7, 14)
    t.door(x0 + 7, y0, arena="cafe")
    t.door(x0 + 8, y0, arena="cafe")
    t.door(x0 + 11, y0 + 7, arena="cafe kitchen")
    t.sectors.append(("Riverside Cafe", x0, y0, 16, 11))
    t.arenas += [("cafe", x0 + 1, y0 + 1, 14, 6), ("cafe kitchen", x0 + 1, y0 + 8, 14, 2)]
    for tx, ty in ((3, 2), (11, 2), (11, 4)):
        t.put(x0 + tx, y0 + ty, "round_table")
        t.put(x0 + tx - 1, y0 + ty, "chair")
        t.put(x0 + tx + 1, y0 + ty, "chair")
        t.obj("customer table", x0 + tx - 1, y0 + ty, 3, 1)
    for dy in (1, 2, 3):
        t.put(x0 + 14, y0 + dy, "bookshelf")
    t.obj("bookshelf", x0 + 14, y0 + 1, 1, 3)
    for dx in range(1, 6):
        t.put(x0 + dx, y0 + 5, "counter")
    t.obj("cafe counter", x0 + 1, y0 + 5, 5, 1)
    t.put(x0 + 2, y0 + 6, "coffee_machine")
    t.obj("coffee machine", x0 + 2, y0 + 6)
    t.put(x0 + 1, y0 + 1, "flower_pot")
    t.put(x0 + 7, y0 + 3, "rug")
    t.put(x0 + 8, y0 + 3, "rug")
    # kitchen
    t.put(x0 + 3, y0 + 9, "stove")
    t.put(x0 + 4, y0 + 9, "stove")
    t.obj("stove", x0 + 3, y0 + 9, 2, 1)
    t.put(x0 + 6, y0 + 9, "counter_sink")
    t.obj("kitchen sink", x0 + 6, y0 + 9)
    t.put(x0 + 7, y0 + 9, "kitchen_counter")
    t.put(x0 + 1, y0 + 9, "refrigerator")
    t.put(x0 + 14, y0 + 9, "barrel")


def pub(t: Town, x0: int, y0: int) -> None:
    """Copper Kettle Pub: one big bar room, door north."""
    t.building(x0, y0, 16, 11, "wood_floor")
    t.door(x0 + 7, y0, arena="bar")
    t.door(x0 + 8, y0, arena="bar")
    t.sectors.append(("Copper Kettle Pub", x0, y0, 16, 11))
    t.arenas.append(("bar", x0 + 1, y0 + 1, 14, 9))
    for dx in range(9, 15):
        t.put(x0 + dx, y0 + 5, "counter")
    t.obj("bar counter", x0 + 9, y0 + 5, 6, 1)
    for dx in range(10, 15):
        t.put(x0 + dx, y0 + 9, "bottle_shelf")
    t.put(x0 + 14, y0 + 7, "barrel")
    for tx, ty in ((3, 3), (3, 7), (6, 5)):
        t.put(x0 + tx, y0 + ty, "round_table")
        t.put(x0 + tx - 1, y0 + ty, "chair")
        t.put(x0 + tx + 1, y0 + ty, "chair")
        t.obj("pub table", x0 + tx - 1, y0 + ty, 3, 1)
    t.put(x0 + 14, y0 + 1, "dartboard")
    t.obj("dartboard", x0 + 14, y0 + 1)
    t.put(x0 + 1, y0 + 9, "piano")
    t.put(x0 + 1, y0 + 8, "chair")
    t.obj("piano", x0 + 1, y0 + 8, 1, 2)
    t.put(x0 + 1, y0 + 1, "barrel")
    t.put(x0 + 11, y0 + 2, "rug")


def grocery(t: Town, x0: int, y0: int) -> None:
    """Elm Street Grocery: aisles of shelves, register by the door, produce at the back."""
    t.building(x0, y0, 16, 11, "stone_floor")
    t.door(x0 + 7, y0, arena="store")
    t.door(x0 + 8, y0, arena="store")
    t.sectors.append(("Elm Street Grocery", x0, y0, 16, 11))
    t.arenas.append(("store", x0 + 1, y0 + 1, 14, 9))
    for ax in (2, 5, 10, 13):
        for dy in range(3, 8):
            t.put(x0 + ax, y0 + dy, "shelf")
        t.obj("shelf", x0 + ax, y0 + 3, 1, 5)
    t.put(x0 + 11, y0 + 1, "cash_register")
    t.put(x0 + 12, y0 + 1, "counter")
    t.obj("cash register", x0 + 11, y0 + 1)
    for dx in (5, 6, 9, 10):
        t.put(x0 + dx, y0 + 9, "produce_stand")
    t.obj("produce stand", x0 + 5, y0 + 9, 2, 1)
    t.obj("produce stand", x0 + 9, y0 + 9, 2, 1)
    t.put(x0 + 1, y0 + 9, "barrel")
    t.put(x0 + 14, y0 + 9, "barrel")


def park(t: Town, x0: int, y0: int, w: int, h: int) -> None:
    """Maple Park: open grass with a fountain plaza, benches, a pond and a garden."""
    t.sectors.append(("Maple Park", x0, y0, w, h))
    t.arenas.append(("park", x0, y0, w, h))
    # paths: from the bridge down to the plaza, and across
    t.fill(t.ground, 20, y0, 2, 6, "dirt")
    t.fill(t.ground, x0 + 2, y0 + 5, w - 4, 2, "dirt")
    t.fill(t.ground, 13, y0 + 3, 6, 6, "cobble")
    t.put(15, y0 + 4, "fountain_nw")
    t.put(16, y0 + 4, "fountain_ne")
    t.put(15, y0 + 5, "fountain_sw")
    t.put(16, y0 + 5, "fountain_se")
    t.obj("fountain", 15, y0 + 4, 2, 2)
    for bx, by in ((12, y0 + 3), (19, y0 + 3), (12, y0 + 8), (19, y0 + 8)):
        t.put(bx, by, "bench")
        t.obj("bench", bx, by)
    # pond (water, blocked) with reeds of grass around
    for yy in range(y0 + 8, y0 + 13):
        for xx in range(x0 + 2, x0 + 8):
            corner = (xx in (x0 + 2, x0 + 7)) and (yy in (y0 + 8, y0 + 12))
            if not corner:
                t.ground[yy][xx] = "water"
    t.obj("pond", x0 + 2, y0 + 8, 6, 5)
    t.put(x0 + 9, y0 + 10, "bench")
    t.obj("bench", x0 + 9, y0 + 10)
    # garden beds
    t.fill(t.ground, x0 + 16, y0 + 10, 6, 3, "dirt")
    for xx in range(x0 + 16, x0 + 22):
        for yy in range(y0 + 10, y0 + 13):
            t.put(xx, yy, "garden")
    t.obj("garden", x0 + 16, y0 + 10, 6, 3)
    for tx, ty in ((x0 + 1, y0 + 1), (x0 + 5, y0 + 2), (x0 + 23, y0 + 1), (x0 + 10, y0 + 13),
                   (x0 + 23, y0 + 13), (x0 + 1, y0 + 5), (x0 + 9, y0 + 1)):
        t.put(tx, ty, "tree")
    for tx, ty in ((x0 + 13, y0 + 12), (x0 + 24, y0 + 8)):
        t.put(tx, ty, "bush")
    t.put(x0 + 11, y0 + 1, "lamp_post")
    t.put(x0 + 22, y0 + 7, "lamp_post")
    for xx, yy in ((x0 + 14, y0 + 1), (x0 + 3, y0 + 3), (x0 + 20, y0 + 13), (x0 + 12, y0 + 11)):
        t.ground[yy][xx] = "grass_flowers"


def college(t: Town, x0: int, y0: int) -> None:
    """Northgate College: 26x15, a corridor from the north door between four rooms."""
    t.building(x0, y0, 26, 15, "stone_floor")
    t.fill(t.ground, x0 + 1, y0 + 1, 10, 6, "wood_floor")
    t.fill(t.ground, x0 + 1, y0 + 8, 10, 6, "carpet")
    t.fill(t.ground, x0 + 15, y0 + 1, 10, 6, "wood_floor")
    t.fill(t.ground, x0 + 15, y0 + 8, 10, 6, "carpet")
    t.vwall(x0 + 11, y0 + 1, 13)
    t.vwall(x0 + 14, y0 + 1, 13)
    t.hwall(x0 + 1, y0 + 7, 10)
    t.hwall(x0 + 15, y0 + 7, 10)
    t.door(x0 + 12, y0)
    t.door(x0 + 13, y0)
    t.door(x0 + 11, y0 + 3, horizontal=False, arena="classroom")
    t.door(x0 + 11, y0 + 10, horizontal=False, arena="library")
    t.door(x0 + 14, y0 + 3, horizontal=False, arena="office")
    t.door(x0 + 14, y0 + 10, horizontal=False, arena="dorm room")
    t.sectors.append(("Northgate College", x0, y0, 26, 15))
    t.arenas += [
        ("classroom", x0 + 1, y0 + 1, 10, 6),
        ("library", x0 + 1, y0 + 8, 10, 6),
        ("office", x0 + 15, y0 + 1, 10, 6),
        ("dorm room", x0 + 15, y0 + 8, 10, 6),
    ]
    # classroom: blackboard on the back wall, lectern before it, rows of student desks
    for dx in (4, 5, 6):
        t.put(x0 + dx, y0 + 1, "blackboard")
    t.obj("blackboard", x0 + 4, y0 + 1, 3, 1)
    t.put(x0 + 5, y0 + 2, "lectern")
    t.obj("lectern", x0 + 5, y0 + 2)
    for dx in (2, 4, 6, 8):
        t.put(x0 + dx, y0 + 4, "student_desk")
        t.put(x0 + dx, y0 + 5, "chair")
        t.obj("student desk", x0 + dx, y0 + 4, 1, 2)
    t.put(x0 + 1, y0 + 1, "flower_pot")
    # library: shelves along the back wall and a free-standing row, reading table with chairs
    for dx in range(1, 9):
        t.put(x0 + dx, y0 + 8, "bookshelf")
    t.obj("bookshelf", x0 + 1, y0 + 8, 8, 1)
    for dx in range(1, 5):
        t.put(x0 + dx, y0 + 10, "bookshelf")
    t.obj("bookshelf", x0 + 1, y0 + 10, 4, 1)
    for dx, dy in ((6, 11), (7, 11), (6, 12), (7, 12)):
        t.put(x0 + dx, y0 + dy, "table")
    for dx, dy in ((5, 11), (5, 12), (8, 11), (8, 12)):
        t.put(x0 + dx, y0 + dy, "chair")
    t.obj("reading table", x0 + 5, y0 + 11, 4, 2)
    t.put(x0 + 1, y0 + 13, "flower_pot")
    # office: desk and computer desk, each with a chair
    t.put(x0 + 18, y0 + 2, "desk")
    t.put(x0 + 19, y0 + 2, "desk")
    t.put(x0 + 18, y0 + 3, "chair")
    t.obj("desk", x0 + 18, y0 + 2, 2, 2)
    t.put(x0 + 21, y0 + 2, "computer")
    t.put(x0 + 21, y0 + 3, "chair")
    t.obj("computer", x0 + 21, y0 + 2, 1, 2)
    t.put(x0 + 24, y0 + 1, "bookshelf")
    t.put(x0 + 24, y0 + 6, "flower_pot")
    t.put(x0 + 20, y0 + 5, "rug")
    # dorm room
    t.put(x0 + 23, y0 + 8, "bed_top")
    t.put(x0 + 23, y0 + 9, "bed_bottom")
    t.obj("bed", x0 + 23, y0 + 8, 1, 2)
    t.spawns.append(("dorm-bed", x0 + 23, y0 + 8))
    t.put(x0 + 16, y0 + 8, "desk")
    t.put(x0 + 16, y0 + 9, "chair")
    t.obj("desk", x0 + 16, y0 + 8, 1, 2)
    t.put(x0 + 24, y0 + 13, "closet")
    t.put(x0 + 20, y0 + 11, "rug")
    # the corridor has no arena: it is part of the college sector only


SECTOR_OF = {(2, 2): "Okafor house", (24, 2): "Reyes house", (46, 2): "Lindqvist house"}


def build_town() -> Town:
    t = Town()
    # river across the map with two bridges
    t.fill(t.ground, 0, 28, MAP_W, 3, "water")
    # streets
    t.fill(t.ground, 1, 13, MAP_W - 2, 2, "cobble")
    for sx in (20, 42):
        t.fill(t.ground, sx, 13, 2, 15, "cobble")
        t.ground[28][sx], t.ground[28][sx + 1] = "bridge_left", "bridge_right"
        t.ground[29][sx], t.ground[29][sx + 1] = "bridge_left", "bridge_right"
        t.ground[30][sx], t.ground[30][sx + 1] = "bridge_left", "bridge_right"
    t.fill(t.ground, 20, 31, 24, 1, "dirt")
    t.fill(t.ground, 42, 31, 2, 1, "dirt")
    # buildings
    house(t, 2, 2, 1, ["okafor-bed"])
    house(t, 24, 2, 2, ["reyes-bed-a", "reyes-bed-b"])
    house(t, 46, 2, 1, ["lindqvist-bed"])
    cafe(t, 2, 16)
    pub(t, 24, 16)
    grocery(t, 46, 16)
    park(t, 2, 32, 25, 15)
    college(t, 30, 32)
    # front paths from the doors to the main street
    for dx in (9, 31, 53):
        t.fill(t.ground, dx, 12, 2, 1, "dirt")
        t.fill(t.ground, dx, 15, 2, 1, "dirt")
    # a tree border and scattered trees/decorations outside
    for x in range(MAP_W):
        t.put(x, 0, "tree")
        t.put(x, MAP_H - 1, "tree")
    for y in range(MAP_H):
        t.put(0, y, "tree")
        t.put(MAP_W - 1, y, "tree")
    for x, y in ((19, 4), (22, 8), (41, 3), (44, 9), (19, 22), (22, 20),
                 (41, 24), (44, 18), (57, 34), (59, 38), (57, 42), (60, 44), (28, 44), (28, 38),
                 (1, 27), (62, 27)):
        t.put(x, y, "tree")
    for x, y in ((18, 12), (40, 12), (61, 12), (18, 15), (40, 15), (61, 15)):
        t.put(x, y, "bush")
    for x, y in ((5, 12), (27, 12), (49, 12), (5, 15), (27, 15), (49, 15), (23, 12), (45, 12)):
        t.put(x, y, "lamp_post")
    for x, y in ((12, 12), (34, 12), (56, 12)):
        t.put(x, y, "mailbox")
    for x, y in ((1, 1), (30, 27), (58, 27), (28, 33), (59, 45)):
        t.put(x, y, "rock")
    for x, y in ((4, 27), (10, 27), (26, 27), (48, 27), (36, 1), (14, 1), (57, 31)):
        t.ground[y][x] = "grass_flowers"
    for x, y in ((8, 1), (30, 1), (52, 1), (33, 27), (55, 27)):
        t.ground[y][x] = "grass_tufts"
    return t


# --------------------------------------------------------------------------------------------
# Checks (the Rust tests check the same on the loaded map; failing here is faster)
# --------------------------------------------------------------------------------------------


def check(t: Town) -> None:
    blocked = [[t.blocked(x, y) for x in range(MAP_W)] for y in range(MAP_H)]
    for name, x, y in t.spawns:
        assert not blocked[y][x], f"spawn {name} blocked"

    def reach(sx: int, sy: int) -> set[tuple[int, int]]:
        seen = {(sx, sy)}
        q = deque([(sx, sy)])
        while q:
            x, y = q.popleft()
            for nx, ny in ((x, y - 1), (x - 1, y), (x + 1, y), (x, y + 1)):
                if 0 <= nx < MAP_W and 0 <= ny < MAP_H and not blocked[ny][nx] and (nx, ny) not in seen:
                    seen.add((nx, ny))
                    q.append((nx, ny))
        return seen

    first = t.spawns[0]
    seen = reach(first[1], first[2])
    for name, x, y in t.spawns:
        assert (x, y) in seen, f"spawn {name} not connected to {first[0]}"
    for name, x, y, w, h in t.objects + t.arenas:
        ok = False
        for yy in range(y, y + h):
            for xx in range(x, x + w):
                for nx, ny in ((xx, yy), (xx, yy - 1), (xx - 1, yy), (xx + 1, yy), (xx, yy + 1)):
                    if (nx, ny) in seen:
                        ok = True
        assert ok, f"{name} at {(x, y)} unreachable"


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def csv_layer(grid) -> str:
    rows = []
    for y, row in enumerate(grid):
        cells = [str(TILE_ID[n] + 1) if n is not None else "0" for n in row]
        rows.append(",".join(cells) + ("," if y < len(grid) - 1 else ""))
    return "\n".join(rows)


def xml_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def write_tsx(path: Path, image_rel: str, width: int, height: int) -> None:
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<tileset version="1.10" tiledversion="1.10.2" name="willowbrook" tilewidth="{TILE}" '
        f'tileheight="{TILE}" tilecount="{len(TILES)}" columns="{COLUMNS}">',
        f' <image source="{image_rel}" width="{width}" height="{height}"/>',
    ]
    for i, (name, _, blocks) in enumerate(TILES):
        lines.append(f' <tile id="{i}" type="{name}">')
        lines.append("  <properties>")
        lines.append(f'   <property name="blocks" type="bool" value="{str(blocks).lower()}"/>')
        lines.append("  </properties>")
        lines.append(" </tile>")
    lines.append("</tileset>")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_tmx(path: Path, t: Town, tsx_rel: str) -> None:
    collision = [["collision" if t.blocked(x, y) else None for x in range(MAP_W)] for y in range(MAP_H)]
    layers = [("ground", t.ground, True), ("walls", t.walls, True),
              ("furniture", t.furniture, True), ("collision", collision, False)]
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<map version="1.10" tiledversion="1.10.2" orientation="orthogonal" renderorder="right-down" '
        f'width="{MAP_W}" height="{MAP_H}" tilewidth="{TILE}" tileheight="{TILE}" infinite="0" '
        f'nextlayerid="9" nextobjectid="NEXT_OBJECT_ID">',
        " <properties>",
        f'  <property name="world" value="{WORLD}"/>',
        " </properties>",
        f' <tileset firstgid="1" source="{tsx_rel}"/>',
    ]
    layer_id = 1
    for name, grid, visible in layers:
        vis = "" if visible else ' visible="0" opacity="0.5"'
        out.append(f' <layer id="{layer_id}" name="{name}" width="{MAP_W}" height="{MAP_H}"{vis}>')
        out.append('  <data encoding="csv">')
        out.append(csv_layer(grid))
        out.append("</data>")
        out.append(" </layer>")
        layer_id += 1
    object_id = 1
    colours = {"sectors": "#ff8c00", "arenas": "#00a0ff", "objects": "#ff00c8", "spawns": "#00e000"}
    groups = [("sectors", t.sectors), ("arenas", t.arenas), ("objects", t.objects),
              ("spawns", [(n, x, y, 1, 1) for n, x, y in t.spawns])]
    for name, rects in groups:
        out.append(f' <objectgroup id="{layer_id}" name="{name}" color="{colours[name]}">')
        for oname, x, y, w, h in rects:
            out.append(f'  <object id="{object_id}" name="{xml_escape(oname)}" x="{x * TILE}" y="{y * TILE}" '
                       f'width="{w * TILE}" height="{h * TILE}"/>')
            object_id += 1
        out.append(" </objectgroup>")
        layer_id += 1
    out.append("</map>")
    text = "\n".join(out) + "\n"
    text = text.replace("NEXT_OBJECT_ID", str(object_id)).replace('nextlayerid="9"', f'nextlayerid="{layer_id}"')
    path.write_text(text, encoding="utf-8")


def render_preview(path: Path, t: Town, sheet: Canvas) -> None:
    img = Canvas(MAP_W * TILE, MAP_H * TILE)
    tiles = {}
    for name in TILE_ID:
        i = TILE_ID[name]
        tiles[name] = crop(sheet, (i % COLUMNS) * TILE, (i // COLUMNS) * TILE)
    for grid in (t.ground, t.walls, t.furniture):
        for y in range(MAP_H):
            for x in range(MAP_W):
                if grid[y][x] is not None:
                    img.blit(tiles[grid[y][x]], x * TILE, y * TILE)
    write_png(path, img.w, img.h, img.px)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preview", type=Path, help="also write a composite render of the map")
    args = parser.parse_args(argv)

    sheet = render_tileset()
    town = build_town()
    check(town)
    png = ROOT / "assets/tiles/willowbrook.png"
    tsx = ROOT / "assets/maps/willowbrook_tileset.tsx"
    tmx = ROOT / "assets/maps/willowbrook.tmx"
    write_png(png, sheet.w, sheet.h, sheet.px)
    tmx.parent.mkdir(parents=True, exist_ok=True)
    write_tsx(tsx, "../tiles/willowbrook.png", sheet.w, sheet.h)
    write_tmx(tmx, town, "willowbrook_tileset.tsx")
    if args.preview:
        render_preview(args.preview, town, sheet)
    print(f"wrote {png.relative_to(ROOT)}, {tsx.relative_to(ROOT)}, {tmx.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
