#!/usr/bin/env python3
"""Generate Fernside, the project's 25-resident town (the paper's population), and its people.

Writes (relative to the crate root):
  assets/maps/fernside.tmx             the Tiled map, on the default town's tileset
  assets/personas/fernside/*.json      25 persona sheets: families sharing homes, jobs with
                                       early, day and late hours, friendships and rivalries

Fernside is an inland market town of fourteen homes along two lanes, a high street of seven
shops and halls between them (the Copper Kettle Cafe, where the Valentine's party scenario is
set, a grocery, a bakery, the library, the Lantern pub, the town hall, the post office), and
south of them a school, a clinic, a joinery and the Common. No name or text comes from the
original Smallville. Run as `smallville run --town fernside` or `cargo run --release -- --town
fernside`.

Python 3.11 standard library only; reuses tools/gen_town.py (tiles, checks, output) and the
cottage and hall builders of tools/gen_saltmere.py. Deterministic: running it twice gives
identical files.

Usage: python3 tools/gen_fernside.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_town as g  # noqa: E402
import gen_saltmere as s  # noqa: E402

g.WORLD = "Fernside"
SLOT = 19
SLOTS = 7
g.MAP_W, g.MAP_H = SLOT * SLOTS + 1, 59
T = g.Town

HOME_THINGS = {"bed": "bed", "desk": "desk", "closet": "wardrobe", "sink": "bathroom sink",
               "bath": "shower", "larder": "refrigerator", "stove": "cooktop",
               "table": "kitchen table"}

# (family, residents) for the north lane (row A) and the south lane (row C); a home has at
# most two beds.
HOMES_NORTH = [("Dalca", ["Rosa Dalca", "Luca Dalca"]), ("Marsh", ["Owen Marsh", "Clara Marsh"]),
               ("Ferris", ["Hugo Ferris", "Nell Ferris"]), ("Okoro", ["Ade Okoro", "Tess Okoro"]),
               ("Brandt", ["Karl Brandt", "Ilse Brandt"]), ("Sato", ["Mina Sato", "Kenji Sato"]),
               ("Quinn", ["Declan Quinn"])]
HOMES_SOUTH = [("Lind", ["Freya Lind", "Jonas Lind"]), ("Varga", ["Petra Varga", "Milo Varga"]),
               ("Achebe", ["Grace Achebe", "Samuel Achebe"]),
               ("Novak", ["Eva Novak", "Tomasz Novak"]), ("Reid", ["Callum Reid", "Ada Reid"]),
               ("Moreau", ["Lea Moreau"]), ("Hale", ["Iris Hale"])]


def slot_x(i: int) -> int:
    return 2 + SLOT * i


def spawn_id(name: str) -> str:
    return name.lower().replace(" ", "-") + "-bed"


def home_name(family: str) -> str:
    return f"{family} house"


def furnish_cafe(t: T, x0: int, y0: int) -> None:
    for dx in range(1, 7):
        t.put(x0 + dx, y0 + 5, "counter")
    t.obj("cafe counter", x0 + 1, y0 + 5, 6, 1)
    t.put(x0 + 2, y0 + 2, "coffee_machine")
    t.obj("coffee machine", x0 + 2, y0 + 2)
    t.put(x0 + 6, y0 + 2, "cash_register")
    t.obj("till", x0 + 6, y0 + 2)
    for tx, ty in ((x0 + 10, y0 + 2), (x0 + 13, y0 + 2), (x0 + 11, y0 + 5)):
        t.put(tx, ty, "round_table")
        t.put(tx - 1, ty, "chair")
        t.put(tx + 1, ty, "chair")
        t.obj("cafe table", tx - 1, ty, 3, 1)
    t.put(x0 + 14, y0 + 6, "piano")
    t.obj("piano", x0 + 14, y0 + 6)
    t.put(x0 + 3, y0 + 9, "stove")
    t.put(x0 + 4, y0 + 9, "stove")
    t.obj("oven", x0 + 3, y0 + 9, 2, 1)
    t.put(x0 + 7, y0 + 9, "kitchen_counter")
    t.put(x0 + 8, y0 + 9, "kitchen_counter")
    t.obj("prep counter", x0 + 7, y0 + 9, 2, 1)
    t.put(x0 + 12, y0 + 9, "refrigerator")
    t.obj("cold store", x0 + 12, y0 + 9)


def furnish_shop(t: T, x0: int, y0: int, stall: str, back_thing: str) -> None:
    for ax in (x0 + 3, x0 + 7):
        for dy in range(2, 6):
            t.put(ax, y0 + dy, "produce_stand")
        t.obj(stall, ax, y0 + 2, 1, 4)
    t.put(x0 + 12, y0 + 2, "cash_register")
    t.obj("till", x0 + 12, y0 + 2)
    for dx in range(2, 6):
        t.put(x0 + dx, y0 + 9, "shelf")
    t.obj(back_thing, x0 + 2, y0 + 9, 4, 1)


def furnish_bakery(t: T, x0: int, y0: int) -> None:
    for dx in range(1, 6):
        t.put(x0 + dx, y0 + 5, "counter")
    t.obj("bread counter", x0 + 1, y0 + 5, 5, 1)
    t.put(x0 + 12, y0 + 5, "cash_register")
    t.obj("till", x0 + 12, y0 + 5)
    t.put(x0 + 4, y0 + 9, "stove")
    t.put(x0 + 5, y0 + 9, "stove")
    t.obj("bread oven", x0 + 4, y0 + 9, 2, 1)
    t.put(x0 + 9, y0 + 9, "kitchen_counter")
    t.put(x0 + 10, y0 + 9, "kitchen_counter")
    t.obj("kneading table", x0 + 9, y0 + 9, 2, 1)


def furnish_library(t: T, x0: int, y0: int) -> None:
    for dx in range(2, 14):
        t.put(x0 + dx, y0 + 9, "bookshelf")
    t.obj("bookshelves", x0 + 2, y0 + 9, 12, 1)
    t.put(x0 + 12, y0 + 2, "desk")
    t.obj("lending desk", x0 + 12, y0 + 2)
    for tx in (x0 + 3, x0 + 7):
        t.put(tx, y0 + 5, "table")
        t.put(tx + 1, y0 + 5, "table")
        t.put(tx, y0 + 6, "chair")
        t.obj("reading table", tx, y0 + 5, 2, 1)


def furnish_pub(t: T, x0: int, y0: int) -> None:
    for dx in range(8, 14):
        t.put(x0 + dx, y0 + 5, "counter")
    t.obj("bar", x0 + 8, y0 + 5, 6, 1)
    for tx, ty in ((x0 + 3, y0 + 2), (x0 + 3, y0 + 5)):
        t.put(tx, ty, "round_table")
        t.put(tx - 1, ty, "chair")
        t.put(tx + 1, ty, "chair")
        t.obj("pub table", tx - 1, ty, 3, 1)
    t.put(x0 + 14, y0 + 1, "dartboard")
    t.obj("dartboard", x0 + 14, y0 + 1)
    t.put(x0 + 3, y0 + 9, "stove")
    t.put(x0 + 4, y0 + 9, "stove")
    t.obj("pub range", x0 + 3, y0 + 9, 2, 1)
    t.put(x0 + 8, y0 + 9, "kitchen_counter")
    t.obj("chopping block", x0 + 8, y0 + 9)


def furnish_offices(t: T, x0: int, y0: int, front_thing: str, back_thing: str) -> None:
    for dx in range(3, 13):
        t.put(x0 + dx, y0 + 4, "table")
    t.obj(front_thing, x0 + 3, y0 + 4, 10, 1)
    for dx in (3, 7, 11):
        t.put(x0 + dx, y0 + 5, "chair")
    t.put(x0 + 3, y0 + 9, "desk")
    t.put(x0 + 4, y0 + 9, "desk")
    t.obj(back_thing, x0 + 3, y0 + 9, 2, 1)
    t.put(x0 + 10, y0 + 9, "shelf")
    t.put(x0 + 11, y0 + 9, "shelf")
    t.obj("filing shelves", x0 + 10, y0 + 9, 2, 1)


def furnish_school(t: T, x0: int, y0: int) -> None:
    for dx in (2, 3, 4):
        t.put(x0 + dx, y0 + 1, "blackboard")
    t.obj("blackboard", x0 + 2, y0 + 1, 3, 1)
    for dx in (3, 6, 9, 12):
        t.put(x0 + dx, y0 + 4, "student_desk")
        t.obj("pupil desk", x0 + dx, y0 + 4)
    t.put(x0 + 13, y0 + 2, "desk")
    t.obj("teacher's desk", x0 + 13, y0 + 2)
    t.put(x0 + 4, y0 + 9, "desk")
    t.put(x0 + 5, y0 + 9, "desk")
    t.obj("marking desk", x0 + 4, y0 + 9, 2, 1)


def furnish_clinic(t: T, x0: int, y0: int) -> None:
    for dx in range(3, 9):
        t.put(x0 + dx, y0 + 2, "bench")
    t.obj("waiting bench", x0 + 3, y0 + 2, 6, 1)
    t.put(x0 + 12, y0 + 4, "desk")
    t.obj("reception desk", x0 + 12, y0 + 4)
    t.put(x0 + 3, y0 + 9, "bed_top")
    t.obj("examination couch", x0 + 3, y0 + 9)
    t.put(x0 + 8, y0 + 9, "desk")
    t.obj("doctor's desk", x0 + 8, y0 + 9)
    t.put(x0 + 12, y0 + 9, "sink")
    t.obj("basin", x0 + 12, y0 + 9)


def furnish_joinery(t: T, x0: int, y0: int) -> None:
    for dx in range(2, 7):
        t.put(x0 + dx, y0 + 3, "kitchen_counter")
    t.obj("workbench", x0 + 2, y0 + 3, 5, 1)
    for dx in range(9, 13):
        t.put(x0 + dx, y0 + 6, "table")
    t.obj("lathe", x0 + 9, y0 + 6, 4, 1)
    t.put(x0 + 3, y0 + 8, "barrel")
    t.put(x0 + 4, y0 + 8, "barrel")
    t.obj("timber rack", x0 + 3, y0 + 8, 2, 1)


def build_town() -> T:
    t = T()
    w = g.MAP_W
    # Lanes and the high street; grass between them is walkable, the cobbles are for the eye.
    for y in (13, 28, 42):
        t.fill(t.ground, 1, y, w - 2, 2, "cobble")
    for i in range(1, SLOTS):
        t.fill(t.ground, slot_x(i) - 2, 13, 2, 31, "cobble")

    for row, (y0, homes) in enumerate(((2, HOMES_NORTH), (31, HOMES_SOUTH))):
        for i, (family, people) in enumerate(homes):
            s.cottage(t, home_name(family), slot_x(i), y0, ("bedroom", "bathroom", "kitchen"),
                      HOME_THINGS, [spawn_id(p) for p in people])

    y0 = 16
    shops = [
        ("Copper Kettle Cafe", "cafe", "cafe kitchen", furnish_cafe),
        ("Fernside Grocery", "shop floor", "storeroom",
         lambda t, x, y: furnish_shop(t, x, y, "vegetable stall", "stock shelves")),
        ("Fernside Bakery", "bakery shop", "bakehouse", furnish_bakery),
        ("Fernside Library", "reading room", None, furnish_library),
        ("The Lantern", "taproom", "pub kitchen", furnish_pub),
        ("Fernside Town Hall", "council chamber", "clerk's office",
         lambda t, x, y: furnish_offices(t, x, y, "council table", "clerk's desk")),
        ("Fernside Post Office", "post counter", "sorting room",
         lambda t, x, y: furnish_offices(t, x, y, "post counter", "sorting desk")),
    ]
    for i, (name, front, back, furnish) in enumerate(shops):
        s.hall(t, name, slot_x(i), y0, front, back)
        furnish(t, slot_x(i), y0)

    y0 = 45
    s.hall(t, "Fernside School", slot_x(0), y0, "classroom", "staff room")
    furnish_school(t, slot_x(0), y0)
    s.hall(t, "Fernside Clinic", slot_x(1), y0, "waiting room", "consulting room")
    furnish_clinic(t, slot_x(1), y0)
    s.hall(t, "Brandt Joinery", slot_x(2), y0, "workshop", None)
    furnish_joinery(t, slot_x(2), y0)

    # Fernside Common: four slots of open grass, a pond, benches, a bandstand and gardens.
    cx, cw = slot_x(3), w - slot_x(3) - 2
    t.sectors.append(("Fernside Common", cx, y0, cw, 12))
    t.arenas.append(("common", cx, y0, cw, 12))
    t.fill(t.ground, cx + 30, y0 + 3, 8, 5, "water")
    t.obj("pond", cx + 30, y0 + 3, 8, 5)
    t.fill(t.ground, cx + 2, y0 + 6, cw - 4, 1, "dirt")
    for bx in (cx + 6, cx + 14, cx + 22, cx + 44, cx + 52):
        t.put(bx, y0 + 5, "bench")
        t.obj("bench", bx, y0 + 5)
    for xx in range(cx + 10, cx + 18):
        for yy in range(y0 + 8, y0 + 11):
            t.put(xx, yy, "garden")
    t.obj("vegetable garden", cx + 10, y0 + 8, 8, 3)
    for dx in range(4):
        t.put(cx + 44 + dx, y0 + 9, "table")
    t.obj("bandstand", cx + 44, y0 + 9, 4, 1)
    for tx, ty in ((cx + 2, y0 + 1), (cx + 26, y0 + 1), (cx + 40, y0 + 10), (cx + cw - 3, y0 + 1)):
        t.put(tx, ty, "tree")

    for x in range(w):
        t.put(x, 0, "tree")
        t.put(x, g.MAP_H - 1, "tree")
    for y in range(g.MAP_H):
        t.put(0, y, "tree")
        t.put(w - 1, y, "tree")
    for i in range(SLOTS):
        t.put(slot_x(i) + 4, 12, "lamp_post")
        t.put(slot_x(i) + 4, 44, "lamp_post")
    return t


CAFE = "Fernside:Copper Kettle Cafe:cafe"
CAFE_KITCHEN = "Fernside:Copper Kettle Cafe:cafe kitchen"
GROCERY = "Fernside:Fernside Grocery:shop floor"
BAKEHOUSE = "Fernside:Fernside Bakery:bakehouse"
LIBRARY = "Fernside:Fernside Library:reading room"
PUB = "Fernside:The Lantern:taproom"
PUB_KITCHEN = "Fernside:The Lantern:pub kitchen"
CHAMBER = "Fernside:Fernside Town Hall:council chamber"
CLERK = "Fernside:Fernside Town Hall:clerk's office"
POST = "Fernside:Fernside Post Office:post counter"
SORTING = "Fernside:Fernside Post Office:sorting room"
CLASSROOM = "Fernside:Fernside School:classroom"
CONSULTING = "Fernside:Fernside Clinic:consulting room"
WAITING = "Fernside:Fernside Clinic:waiting room"
WORKSHOP = "Fernside:Brandt Joinery:workshop"
COMMON = "Fernside:Fernside Common:common"

# name, age, innate, learned, currently, (wake, bed), workplace, daily plan
PEOPLE = [
    ("Rosa Dalca", 48, "warm, generous, a little stubborn",
     "Rosa Dalca owns the Copper Kettle Cafe, which she opened twenty years ago after moving to "
     "Fernside from the coast. She lives with her son Luca. She is old friends with Grace Achebe "
     "and has never quite forgiven Declan Quinn for selling cheap coffee at his grocery.",
     "Rosa Dalca is thinking about how to bring the town together at the cafe this winter.",
     (6, 22), CAFE, "Rosa Dalca opens the cafe at 7 am, works the counter until 3 pm and does the "
     "accounts in the evening."),
    ("Luca Dalca", 19, "curious, restless, kind",
     "Luca Dalca is Rosa Dalca's son. He is an apprentice at Brandt Joinery under Karl Brandt and "
     "helps at his mother's cafe on busy evenings. He is friends with Tess Okoro and Eva Novak.",
     "Luca Dalca is building his first chair on his own and wants Karl Brandt to approve of it.",
     (7, 23), WORKSHOP, "Luca Dalca works at the joinery from 8 am to 4 pm and sees friends after."),
    ("Owen Marsh", 52, "confident, talkative, proud",
     "Owen Marsh is the mayor of Fernside and works at the town hall. He is married to Clara Marsh. "
     "He and Iris Hale, a councillor, disagree about almost everything, above all the new car park.",
     "Owen Marsh is preparing to win the council vote on the car park by the Common.",
     (6, 23), CHAMBER, "Owen Marsh works at the town hall from 9 am to 5 pm and drinks at the "
     "Lantern on Fridays."),
    ("Clara Marsh", 50, "calm, precise, patient",
     "Clara Marsh is the town's doctor at Fernside Clinic, where Kenji Sato is her nurse. She is "
     "married to Owen Marsh and thinks he talks too much. She sings in a choir with Ada Reid.",
     "Clara Marsh is worried that the winter flu will reach the school.",
     (6, 22), CONSULTING, "Clara Marsh sees patients at the clinic from 8 am to 4 pm."),
    ("Hugo Ferris", 35, "jovial, quick-witted, sleeps late",
     "Hugo Ferris runs the Lantern, the town's pub, and works until after midnight. He is married to "
     "Nell Ferris. Callum Reid cooks in his kitchen. He is a good friend of Owen Marsh.",
     "Hugo Ferris is planning a quiz night at the Lantern.",
     (10, 1), PUB, "Hugo Ferris opens the pub at noon and serves until midnight."),
    ("Nell Ferris", 33, "organised, gossipy, cheerful",
     "Nell Ferris runs the Fernside Post Office and knows everyone's news before they do. She is "
     "married to Hugo Ferris, and Tomasz Novak delivers the post for her.",
     "Nell Ferris is sorting the parcels of the winter catalogue season.",
     (6, 22), POST, "Nell Ferris runs the post office from 8 am to 5 pm."),
    ("Ade Okoro", 41, "thoughtful, firm, fair",
     "Ade Okoro teaches the older class at Fernside School alongside Lea Moreau. He raises his "
     "daughter Tess Okoro alone since his wife died. He plays chess at the library with Samuel "
     "Achebe.",
     "Ade Okoro is marking essays and planning a science fair.",
     (6, 22), CLASSROOM, "Ade Okoro teaches at the school from 8 am to 3 pm and marks in the "
     "evening."),
    ("Tess Okoro", 17, "bright, sarcastic, ambitious",
     "Tess Okoro is Ade Okoro's daughter and in her last year at Fernside School. She wants to study "
     "medicine and helps Clara Marsh at the clinic on Saturdays. She is friends with Luca Dalca.",
     "Tess Okoro is studying for her exams and applying to universities.",
     (7, 23), CLASSROOM, "Tess Okoro is at school from 8 am to 3 pm and studies at the library after."),
    ("Karl Brandt", 60, "gruff, meticulous, secretly soft-hearted",
     "Karl Brandt owns Brandt Joinery, where Milo Varga and his apprentice Luca Dalca work. He is "
     "married to Ilse Brandt. He has argued with Declan Quinn about an unpaid bill for shelves.",
     "Karl Brandt is finishing new benches for the Common.",
     (5, 21), WORKSHOP, "Karl Brandt works at the joinery from 7 am to 5 pm."),
    ("Ilse Brandt", 58, "brisk, funny, early riser",
     "Ilse Brandt is the baker of Fernside Bakery and starts before dawn; Eva Novak is her "
     "assistant. She is married to Karl Brandt and supplies bread to the Copper Kettle Cafe.",
     "Ilse Brandt is trying a new rye loaf recipe for the cafe.",
     (4, 20), BAKEHOUSE, "Ilse Brandt bakes from 5 am to 1 pm and rests in the afternoon."),
    ("Mina Sato", 29, "quiet, curious, kind",
     "Mina Sato is the librarian of Fernside Library. She is married to Kenji Sato. She runs a book "
     "club that Grace Achebe and Petra Varga attend.",
     "Mina Sato is choosing the book club's next novel.",
     (7, 23), LIBRARY, "Mina Sato opens the library from 9 am to 5 pm."),
    ("Kenji Sato", 31, "steady, dry humour, tired",
     "Kenji Sato is the nurse at Fernside Clinic and works the late shift. He is married to Mina "
     "Sato and plays darts at the Lantern with Jonas Lind.",
     "Kenji Sato is covering the clinic's evening hours this month.",
     (10, 1), WAITING, "Kenji Sato works at the clinic from 2 pm to 10 pm."),
    ("Declan Quinn", 44, "shrewd, charming, competitive",
     "Declan Quinn owns Fernside Grocery and lives alone. He sells coffee by the cup, which Rosa "
     "Dalca resents, and owes Karl Brandt money for shelves he says were badly made.",
     "Declan Quinn is thinking of opening a coffee corner in his grocery.",
     (6, 22), GROCERY, "Declan Quinn runs the grocery from 8 am to 6 pm."),
    ("Freya Lind", 26, "lively, artistic, forgetful",
     "Freya Lind is the barista at the Copper Kettle Cafe and Rosa Dalca's right hand. She is married "
     "to Jonas Lind and paints with Petra Varga on Sundays.",
     "Freya Lind is designing a new menu board for the cafe.",
     (6, 23), CAFE, "Freya Lind works at the cafe from 7 am to 3 pm."),
    ("Jonas Lind", 28, "careful, loyal, shy",
     "Jonas Lind is the clerk at Fernside Town Hall and works for Owen Marsh, though he quietly "
     "agrees with Iris Hale. He is married to Freya Lind.",
     "Jonas Lind is counting the letters for and against the car park.",
     (7, 23), CLERK, "Jonas Lind works at the town hall from 9 am to 5 pm."),
    ("Petra Varga", 38, "dreamy, passionate, untidy",
     "Petra Varga is a painter who sells her work at the cafe and sketches on the Common. She is "
     "married to Milo Varga and belongs to Mina Sato's book club.",
     "Petra Varga is painting the Common in winter light for an exhibition at the library.",
     (8, 24), COMMON, "Petra Varga paints on the Common or at home most of the day."),
    ("Milo Varga", 40, "practical, easy-going, strong",
     "Milo Varga is a joiner at Brandt Joinery and has worked for Karl Brandt for fifteen years. He "
     "is married to Petra Varga and plays in the pub quiz team with Hugo Ferris.",
     "Milo Varga is building a new frame for his wife's exhibition.",
     (6, 22), WORKSHOP, "Milo Varga works at the joinery from 7 am to 4 pm."),
    ("Grace Achebe", 67, "wise, warm, talkative",
     "Grace Achebe is a retired teacher who volunteers at Fernside Library. She is married to Samuel "
     "Achebe and is Rosa Dalca's oldest friend in town.",
     "Grace Achebe is helping Mina Sato organise a reading hour for children.",
     (6, 21), LIBRARY, "Grace Achebe helps at the library in the morning and has tea at the cafe."),
    ("Samuel Achebe", 70, "gentle, stubborn, patient",
     "Samuel Achebe is retired and tends the vegetable garden on Fernside Common. He is married to "
     "Grace Achebe and plays chess with Ade Okoro.",
     "Samuel Achebe is protecting his winter vegetables from the frost.",
     (6, 21), COMMON, "Samuel Achebe gardens on the Common in the morning and reads after lunch."),
    ("Eva Novak", 24, "cheerful, hard-working, anxious",
     "Eva Novak is the baker's assistant at Fernside Bakery under Ilse Brandt. She is married to "
     "Tomasz Novak and is friends with Luca Dalca.",
     "Eva Novak is saving to open a cake stall at the market.",
     (4, 20), BAKEHOUSE, "Eva Novak bakes from 5 am to 1 pm."),
    ("Tomasz Novak", 27, "sociable, energetic, nosy",
     "Tomasz Novak delivers the post for Nell Ferris at Fernside Post Office and knows every door in "
     "town. He is married to Eva Novak.",
     "Tomasz Novak is training for a charity run around the Common.",
     (6, 22), SORTING, "Tomasz Novak sorts and delivers the post from 7 am to 3 pm."),
    ("Callum Reid", 36, "blunt, creative, night owl",
     "Callum Reid is the cook at the Lantern and works for Hugo Ferris until late. He lives with his "
     "sister Ada Reid and thinks Declan Quinn's vegetables are overpriced.",
     "Callum Reid is testing a winter stew for the pub menu.",
     (10, 1), PUB_KITCHEN, "Callum Reid cooks at the pub from 1 pm to 11 pm."),
    ("Ada Reid", 32, "musical, sensitive, sociable",
     "Ada Reid is a musician who gives piano lessons at Fernside School and plays at the Lantern in "
     "the evening. She lives with her brother Callum Reid and sings in a choir with Clara Marsh.",
     "Ada Reid is writing a song about Fernside for the spring fair.",
     (8, 24), PUB, "Ada Reid teaches piano at the school in the afternoon and plays at the pub "
     "from 8 pm."),
    ("Lea Moreau", 30, "energetic, idealistic, organised",
     "Lea Moreau teaches the younger class at Fernside School with Ade Okoro. She lives alone, moved "
     "to Fernside two years ago and wants to make more friends in town.",
     "Lea Moreau is planning a class trip to the Common to study birds.",
     (6, 22), CLASSROOM, "Lea Moreau teaches at the school from 8 am to 3 pm."),
    ("Iris Hale", 55, "sharp, principled, combative",
     "Iris Hale is a town councillor who works at Fernside Town Hall and lives alone. She opposes "
     "Owen Marsh's car park on the Common and has Samuel Achebe and Petra Varga on her side.",
     "Iris Hale is gathering signatures against the car park.",
     (6, 22), CHAMBER, "Iris Hale works at the town hall from 9 am to 4 pm and canvasses after."),
]


def clock(hour: int) -> str:
    hour %= 24
    if hour == 0:
        return "midnight"
    if hour == 12:
        return "noon"
    return f"{hour % 12} {'am' if hour < 12 else 'pm'}"


def sheets() -> list[dict]:
    home_of = {}
    for family, people in HOMES_NORTH + HOMES_SOUTH:
        for person in people:
            home_of[person] = home_name(family)
    out = []
    for name, age, innate, learned, currently, (wake, bed), workplace, plan in PEOPLE:
        first, last = name.split(" ", 1)
        out.append({
            "name": name,
            "first_name": first,
            "last_name": last,
            "age": age,
            "innate": innate,
            "learned": learned,
            "currently": currently,
            "lifestyle": f"{name} goes to bed around {clock(bed)}, wakes up around {clock(wake)}, "
                         f"and eats dinner around {clock(18 if 12 < bed < 24 else 19)}.",
            "living_area": f"Fernside:{home_of[name]}:bedroom",
            "workplace": workplace,
            "daily_plan_req": plan,
            "spawn": spawn_id(name),
        })
    return out


def main() -> int:
    town = build_town()
    g.check(town)
    tmx = g.ROOT / "assets/maps/fernside.tmx"
    g.write_tmx(tmx, town, "willowbrook_tileset.tsx")
    print(f"wrote {tmx.relative_to(g.ROOT)}")
    people = sheets()
    assert len(people) == 25, len(people)
    assert len({p["name"] for p in people}) == 25
    spawns = {name for name, _, _ in town.spawns}
    folder = g.ROOT / "assets/personas/fernside"
    folder.mkdir(parents=True, exist_ok=True)
    for person in people:
        assert person["spawn"] in spawns, person["spawn"]
        path = folder / (person["name"].lower().replace(" ", "_") + ".json")
        path.write_text(json.dumps(person, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {len(people)} sheets in {folder.relative_to(g.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
