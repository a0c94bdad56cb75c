#!/usr/bin/env python3
"""Generate Saltmere, the project's second town: a harbour village with its own names and trades.

Writes (relative to the crate root):
  assets/maps/saltmere.tmx   the Tiled map, on the default town's tileset (willowbrook_tileset.tsx)

The persona sheets that live in it are hand-written: assets/personas/saltmere/*.json.
Saltmere shares no sector name with Willowbrook and names its rooms and things in its own words
(a loft and a galley, a bakehouse, a market hall, a taproom, a schoolroom, a workshop), so the
offline town script is tested on names it was not written for (tests/other_town.rs).

Python 3.11 standard library only; reuses tools/gen_town.py for tiles, checks and output.
Deterministic: running it twice gives identical files.

Usage: python3 tools/gen_saltmere.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_town as g  # noqa: E402

g.WORLD = "Saltmere"
T = g.Town


def cottage(t: T, name: str, x0: int, y0: int, rooms: tuple[str, str, str], things: dict,
            spawns: list[str]) -> None:
    """A 16x10 dwelling: sleeping room and wash room at the back, kitchen at the front."""
    sleep, wash, cook = rooms
    t.building(x0, y0, 16, 10, "wood_floor")
    t.fill(t.ground, x0 + 1, y0 + 1, 7, 4, "carpet")
    t.fill(t.ground, x0 + 9, y0 + 1, 6, 4, "tile_floor")
    t.fill(t.ground, x0 + 1, y0 + 6, 14, 3, "tile_floor")
    t.vwall(x0 + 8, y0 + 1, 4)
    t.hwall(x0 + 1, y0 + 5, 14)
    t.door(x0 + 6, y0 + 5, arena=sleep)
    t.door(x0 + 10, y0 + 5, arena=wash)
    t.door(x0 + 7, y0 + 9, arena=cook)
    t.door(x0 + 8, y0 + 9, arena=cook)
    t.arenas += [(sleep, x0 + 1, y0 + 1, 7, 4), (wash, x0 + 9, y0 + 1, 6, 4),
                 (cook, x0 + 1, y0 + 6, 14, 3)]
    t.sectors.append((name, x0, y0, 16, 10))
    for i, spawn in enumerate(spawns):
        bx = x0 + 1 + 2 * i
        t.put(bx, y0 + 1, "bed_top")
        t.put(bx, y0 + 2, "bed_bottom")
        t.obj(things["bed"], bx, y0 + 1, 1, 2)
        t.spawns.append((spawn, bx, y0 + 1))
    t.put(x0 + 5, y0 + 1, "desk")
    t.obj(things["desk"], x0 + 5, y0 + 1)
    t.put(x0 + 7, y0 + 1, "closet")
    t.obj(things["closet"], x0 + 7, y0 + 1)
    t.put(x0 + 9, y0 + 1, "sink")
    t.obj(things["sink"], x0 + 9, y0 + 1)
    t.put(x0 + 14, y0 + 1, "shower")
    t.put(x0 + 14, y0 + 2, "shower")
    t.obj(things["bath"], x0 + 14, y0 + 1, 1, 2)
    t.put(x0 + 1, y0 + 6, "refrigerator")
    t.obj(things["larder"], x0 + 1, y0 + 6)
    t.put(x0 + 2, y0 + 6, "stove")
    t.obj(things["stove"], x0 + 2, y0 + 6)
    t.put(x0 + 11, y0 + 7, "table")
    t.put(x0 + 12, y0 + 7, "table")
    t.put(x0 + 10, y0 + 7, "chair")
    t.obj(things["table"], x0 + 10, y0 + 7, 3, 1)


def hall(t: T, name: str, x0: int, y0: int, front: str, back: str | None) -> None:
    """A 16x11 building, door north; one big front room, or a front and a back room."""
    t.building(x0, y0, 16, 11, "wood_floor")
    t.door(x0 + 7, y0, arena=front)
    t.door(x0 + 8, y0, arena=front)
    t.sectors.append((name, x0, y0, 16, 11))
    if back is None:
        t.arenas.append((front, x0 + 1, y0 + 1, 14, 9))
    else:
        t.fill(t.ground, x0 + 1, y0 + 8, 14, 2, "tile_floor")
        t.hwall(x0 + 1, y0 + 7, 14)
        t.door(x0 + 11, y0 + 7, arena=back)
        t.arenas += [(front, x0 + 1, y0 + 1, 14, 6), (back, x0 + 1, y0 + 8, 14, 2)]


def build_town() -> T:
    t = T()
    t.fill(t.ground, 0, 28, g.MAP_W, 3, "water")
    t.fill(t.ground, 1, 13, g.MAP_W - 2, 2, "cobble")
    for sx in (20, 42):
        t.fill(t.ground, sx, 13, 2, 15, "cobble")
        for yy in (28, 29, 30):
            t.ground[yy][sx], t.ground[yy][sx + 1] = "bridge_left", "bridge_right"
    t.fill(t.ground, 20, 31, 24, 1, "dirt")

    cottage(t, "Visser cottage", 2, 2, ("bedroom", "washroom", "kitchen"),
            {"bed": "bed", "desk": "writing desk", "closet": "wardrobe", "sink": "washstand",
             "bath": "tin bath", "larder": "larder", "stove": "hearth", "table": "kitchen table"},
            ["visser-bed-a", "visser-bed-b"])
    cottage(t, "Quill cottage", 24, 2, ("bedroom", "washroom", "kitchen"),
            {"bed": "bed", "desk": "writing desk", "closet": "wardrobe", "sink": "washstand",
             "bath": "tin bath", "larder": "larder", "stove": "hearth", "table": "kitchen table"},
            ["quill-bed"])
    cottage(t, "Brenner cabin", 46, 2, ("loft", "washroom", "galley"),
            {"bed": "bunk", "desk": "chart table", "closet": "sea chest", "sink": "washstand",
             "bath": "tin bath", "larder": "larder", "stove": "galley stove",
             "table": "galley table"},
            ["brenner-bunk"])

    hall(t, "Harbour Bakery", 2, 16, "shop floor", "bakehouse")
    for dx in range(1, 6):
        t.put(2 + dx, 16 + 5, "counter")
    t.obj("bread counter", 3, 21, 5, 1)
    t.put(12, 21, "cash_register")
    t.obj("till", 12, 21)
    t.put(12, 18, "round_table")
    t.obj("window table", 11, 18, 3, 1)
    t.put(5, 25, "stove")
    t.put(6, 25, "stove")
    t.obj("oven", 5, 25, 2, 1)
    t.put(9, 25, "kitchen_counter")
    t.put(10, 25, "kitchen_counter")
    t.obj("kneading table", 9, 25, 2, 1)
    t.put(14, 25, "barrel")
    t.obj("flour bin", 14, 25)

    hall(t, "Fish Market", 24, 16, "market hall", None)
    for ax in (27, 31):
        for dy in range(19, 24):
            t.put(ax, dy, "produce_stand")
        t.obj("fish stall", ax, 19, 1, 5)
    t.put(35, 18, "cash_register")
    t.obj("scales", 35, 18)
    t.put(37, 24, "barrel")
    t.put(38, 24, "barrel")
    t.obj("ice chest", 37, 24, 2, 1)

    hall(t, "Anchor Tavern", 46, 16, "taproom", None)
    for dx in range(55, 61):
        t.put(dx, 21, "counter")
    t.obj("bar", 55, 21, 6, 1)
    for tx, ty in ((49, 19), (49, 23), (52, 21)):
        t.put(tx, ty, "round_table")
        t.put(tx - 1, ty, "chair")
        t.put(tx + 1, ty, "chair")
        t.obj("tavern table", tx - 1, ty, 3, 1)
    t.put(60, 17, "dartboard")
    t.obj("dartboard", 60, 17)
    t.put(47, 25, "piano")
    t.put(47, 24, "chair")
    t.obj("fiddle corner", 47, 24, 1, 2)

    # Lighthouse Green: open grass by the water, benches and flower beds.
    t.sectors.append(("Lighthouse Green", 2, 32, 25, 15))
    t.arenas.append(("green", 2, 32, 25, 15))
    t.fill(t.ground, 20, 32, 2, 6, "dirt")
    t.fill(t.ground, 4, 37, 21, 2, "dirt")
    for bx, by in ((8, 35), (16, 35), (8, 40), (16, 40)):
        t.put(bx, by, "bench")
        t.obj("bench", bx, by)
    for xx in range(6, 12):
        for yy in range(42, 45):
            t.put(xx, yy, "garden")
    t.obj("flower bed", 6, 42, 6, 3)
    for tx, ty in ((3, 33), (25, 33), (13, 45), (24, 45)):
        t.put(tx, ty, "tree")

    # Saltmere School: schoolroom in front, staff room at the back.
    t.building(30, 32, 16, 15, "stone_floor")
    t.fill(t.ground, 31, 33, 14, 7, "wood_floor")
    t.fill(t.ground, 31, 41, 14, 5, "carpet")
    t.hwall(31, 40, 14)
    t.door(37, 32, arena="schoolroom")
    t.door(38, 32, arena="schoolroom")
    t.door(41, 40, arena="staff room")
    t.sectors.append(("Saltmere School", 30, 32, 16, 15))
    t.arenas += [("schoolroom", 31, 33, 14, 7), ("staff room", 31, 41, 14, 5)]
    for dx in (35, 36, 37):
        t.put(dx, 33, "blackboard")
    t.obj("chalkboard", 35, 33, 3, 1)
    for dx in (33, 36, 39, 42):
        t.put(dx, 37, "student_desk")
        t.obj("pupil desk", dx, 37)
    t.put(40, 35, "desk")
    t.obj("teacher's desk", 40, 35)
    t.put(33, 43, "desk")
    t.put(34, 43, "desk")
    t.obj("marking desk", 33, 43, 2, 1)
    for dx in range(38, 44):
        t.put(dx, 45, "bookshelf")
    t.obj("bookshelf", 38, 45, 6, 1)

    # Tern Boatyard: a workshop by the slipway.
    t.building(48, 32, 14, 9, "stone_floor")
    t.door(54, 32, arena="workshop")
    t.door(55, 32, arena="workshop")
    t.sectors.append(("Tern Boatyard", 48, 32, 14, 15))
    t.arenas += [("workshop", 49, 33, 12, 7), ("slipway", 48, 41, 14, 6)]
    for dx in range(50, 54):
        t.put(dx, 35, "kitchen_counter")
    t.obj("workbench", 50, 35, 4, 1)
    for dx in range(56, 60):
        t.put(dx, 37, "table")
    t.obj("boat hull", 56, 37, 4, 1)
    t.fill(t.ground, 48, 41, 14, 6, "dirt")
    t.put(52, 43, "barrel")
    t.obj("tar barrel", 52, 43)
    t.put(57, 44, "bench")
    t.obj("sawhorse", 57, 44)

    for dx in (9, 31, 53):
        t.fill(t.ground, dx, 12, 2, 1, "dirt")
        t.fill(t.ground, dx, 15, 2, 1, "dirt")
    for x in range(g.MAP_W):
        t.put(x, 0, "tree")
        t.put(x, g.MAP_H - 1, "tree")
    for y in range(g.MAP_H):
        t.put(0, y, "tree")
        t.put(g.MAP_W - 1, y, "tree")
    for x, y in ((5, 12), (27, 12), (49, 12), (23, 12), (45, 12)):
        t.put(x, y, "lamp_post")
    return t


def main() -> int:
    town = build_town()
    g.check(town)
    tmx = g.ROOT / "assets/maps/saltmere.tmx"
    g.write_tmx(tmx, town, "willowbrook_tileset.tsx")
    print(f"wrote {tmx.relative_to(g.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
