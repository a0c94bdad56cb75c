"""The towns the development sets are written in: Saltmere and Fernside as their maps name them
(read from the .tmx files), and Brackenford, a generated town that exists only here and in
assets/evals/dev/README.md."""

import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def map_tree(path):
    """sector -> arena -> [objects], by which rectangle holds which (the maps' own layout)."""
    root = ET.parse(path).getroot()
    groups = {}
    for group in root.findall("objectgroup"):
        groups[group.get("name")] = [
            (
                o.get("name"),
                float(o.get("x")),
                float(o.get("y")),
                float(o.get("width") or 0),
                float(o.get("height") or 0),
            )
            for o in group.findall("object")
        ]

    def inside(a, b):
        cx, cy = a[1] + a[3] / 2, a[2] + a[4] / 2
        return b[1] <= cx <= b[1] + b[3] and b[2] <= cy <= b[2] + b[4]

    tree = {}
    for sector in groups["sectors"]:
        arenas = {}
        for arena in groups["arenas"]:
            # One-tile arena marks are doors and spawn hints; the rooms are the large ones.
            if (arena[3] > 32 or arena[4] > 32) and inside(arena, sector):
                objects = {o[0] for o in groups["objects"] if inside(o, arena)}
                arenas[arena[0]] = sorted(set(arenas.get(arena[0], [])) | objects)
        tree[sector[0]] = arenas
    return tree


SALTMERE = map_tree(ROOT / "assets/maps/saltmere.tmx")
FERNSIDE = map_tree(ROOT / "assets/maps/fernside.tmx")

# Brackenford, a river town on a canal, invented for the held-out part. Nobody tuned on it.
BRACKENFORD = {
    "Hollis cottage": {
        "bedroom": ["bed", "dresser", "reading lamp"],
        "bathroom": ["bathtub", "sink", "mirror cabinet"],
        "kitchen": ["stove", "pantry", "breakfast table", "kettle"],
    },
    "Pell house": {
        "bedroom": ["bed", "dresser", "reading lamp"],
        "bathroom": ["bathtub", "sink", "mirror cabinet"],
        "kitchen": ["stove", "pantry", "breakfast table", "kettle"],
    },
    "Mercer flat": {
        "bedroom": ["bed", "dresser", "reading lamp"],
        "bathroom": ["bathtub", "sink", "mirror cabinet"],
        "kitchen": ["stove", "pantry", "breakfast table", "kettle"],
    },
    "Okafor house": {
        "bedroom": ["bed", "dresser", "reading lamp"],
        "bathroom": ["bathtub", "sink", "mirror cabinet"],
        "kitchen": ["stove", "pantry", "breakfast table", "kettle"],
    },
    "Millrace Pharmacy": {
        "dispensary": ["medicine shelves", "pill counter"],
        "front shop": ["till", "magazine rack", "blood pressure machine"],
    },
    "Brackenford Station": {
        "ticket hall": ["ticket window", "timetable board"],
        "platform": ["platform bench", "vending machine"],
    },
    "Riverside Laundrette": {
        "laundry room": ["washing machine", "tumble dryer", "folding table", "change machine"],
    },
    "Otter Inn": {
        "saloon bar": ["bar", "fireplace", "snooker table"],
        "inn kitchen": ["range cooker", "deep sink", "walk-in fridge"],
        "guest rooms": ["guest bed", "luggage rack"],
    },
    "St Wilfrid's Church": {
        "nave": ["pews", "organ", "lectern"],
        "vestry": ["robe cupboard", "parish register"],
    },
    "Brackenford Baths": {
        "pool hall": ["swimming pool", "diving board", "lifeguard chair"],
        "changing room": ["lockers", "showers"],
    },
    "Canal Allotments": {
        "plots": ["potting shed", "compost heap", "water butt", "bean rows"],
    },
    "Brackenford Garage": {
        "repair bay": ["car lift", "tool chest", "tyre machine"],
        "forecourt": ["petrol pump", "air pump", "car wash"],
    },
    "Heron Bookshop": {
        "shop floor": ["new books table", "till", "armchair"],
        "children's corner": ["picture book bin", "story rug"],
    },
    "Market Square": {
        "square": ["fountain", "war memorial", "market stalls"],
    },
    "Brackenford Vets": {
        "waiting area": ["reception desk", "pet scales"],
        "surgery": ["operating table", "x-ray machine", "medicine fridge"],
    },
    "Lock Keeper's Cafe": {
        "cafe": ["counter", "cake display", "window seat"],
    },
}


def persona(name, home, work, pronoun):
    return {"name": name, "first": name.split()[0], "home": home, "work": work, "she": pronoun}


SALTMERE_PEOPLE = [
    persona("Anna Visser", "Visser cottage", "Saltmere School", "she"),
    persona("Bram Visser", "Visser cottage", "Fish Market", "he"),
    persona("Ines Quill", "Quill cottage", "Harbour Bakery", "she"),
    persona("Otto Brenner", "Brenner cabin", "Tern Boatyard", "he"),
]

FERNSIDE_PEOPLE = [
    persona("Ada Reid", "Reid house", "The Lantern", "she"),
    persona("Ade Okoro", "Okoro house", "Fernside School", "he"),
    persona("Callum Reid", "Reid house", "The Lantern", "he"),
    persona("Clara Marsh", "Marsh house", "Fernside Clinic", "she"),
    persona("Declan Quinn", "Quinn house", "Fernside Grocery", "he"),
    persona("Eva Novak", "Novak house", "Fernside Bakery", "she"),
    persona("Freya Lind", "Lind house", "Copper Kettle Cafe", "she"),
    persona("Grace Achebe", "Achebe house", "Fernside Library", "she"),
    persona("Hugo Ferris", "Ferris house", "The Lantern", "he"),
    persona("Ilse Brandt", "Brandt house", "Fernside Bakery", "she"),
    persona("Iris Hale", "Hale house", "Fernside Town Hall", "she"),
    persona("Jonas Lind", "Lind house", "Fernside Town Hall", "he"),
    persona("Karl Brandt", "Brandt house", "Brandt Joinery", "he"),
    persona("Kenji Sato", "Sato house", "Fernside Clinic", "he"),
    persona("Lea Moreau", "Moreau house", "Fernside School", "she"),
    persona("Luca Dalca", "Dalca house", "Brandt Joinery", "he"),
    persona("Milo Varga", "Varga house", "Brandt Joinery", "he"),
    persona("Mina Sato", "Sato house", "Fernside Library", "she"),
    persona("Nell Ferris", "Ferris house", "Fernside Post Office", "she"),
    persona("Owen Marsh", "Marsh house", "Fernside Town Hall", "he"),
    persona("Rosa Dalca", "Dalca house", "Copper Kettle Cafe", "she"),
    persona("Tomasz Novak", "Novak house", "Fernside Post Office", "he"),
]

BRACKENFORD_PEOPLE = [
    persona("Maud Hollis", "Hollis cottage", "Millrace Pharmacy", "she"),
    persona("Arthur Hollis", "Hollis cottage", "Brackenford Garage", "he"),
    persona("Dev Pell", "Pell house", "Brackenford Station", "he"),
    persona("Sunita Pell", "Pell house", "Brackenford Vets", "she"),
    persona("Rory Mercer", "Mercer flat", "Otter Inn", "he"),
    persona("Chloe Okafor", "Okafor house", "Heron Bookshop", "she"),
    persona("Femi Okafor", "Okafor house", "Brackenford Baths", "he"),
    persona("Agnes Pell", "Pell house", "Lock Keeper's Cafe", "she"),
]
