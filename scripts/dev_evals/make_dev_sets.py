#!/usr/bin/env python3
"""Writes assets/evals/dev/tuning.jsonl (Saltmere and Fernside) and
assets/evals/dev/held_out.jsonl (Brackenford, a generated town) from the hand-written errands,
events, lifestyles and situations beside this file.

Every answer is written by hand next to its errand or situation; this script only puts the
towns' real names around them, offers the options and shuffles them (seeded, so the files are
the same on every run): `python3 scripts/dev_evals/make_dev_sets.py`."""

import json
import random
import re

import places
import poignancy
import wake
import yes_no
from towns import (
    BRACKENFORD,
    BRACKENFORD_PEOPLE,
    FERNSIDE,
    FERNSIDE_PEOPLE,
    ROOT,
    SALTMERE,
    SALTMERE_PEOPLE,
)

HOUSES = ("cottage", "cabin", "house", "flat")


def adapt(errand, who):
    """The errand in the person's own pronouns (errands are written for anyone)."""
    swaps = (
        [("her", "his"), ("she", "he"), ("herself", "himself")]
        if who["she"] == "he"
        else [("his", "her"), ("he", "she"), ("himself", "herself")]
    )
    errand = errand.replace("{she}", who["she"])
    for old, new in swaps:
        errand = re.sub(rf"\b{old}\b", new, errand)
    return errand


def is_home(sector):
    return sector.split()[-1] in HOUSES


def place_items(rng, tree, people, errands):
    items = []
    sectors = list(tree)
    for index, (errand, answer, avoid) in enumerate(errands):
        # The person: for a workplace errand, someone who works there when the errand is a job.
        who = people[index % len(people)]
        if errand.startswith("@"):
            # A job: done by someone who works there.
            errand = errand[1:]
            who = next(p for p in people[index % len(people) :] + people if p["work"] == answer)
        target = {"HOME": who["home"], "WORK": who["work"]}.get(answer, answer)
        visit = answer != "HOME" and is_home(target)
        if visit and target == who["home"]:
            # Visiting someone else's home: pick a visitor who lives elsewhere.
            who = next(p for p in people if p["home"] != target)
        if not visit:
            errand = adapt(errand, who)
        must = [target, who["home"], who["work"]]
        must = list(dict.fromkeys(must))
        others = [s for s in sectors if s not in must and s not in avoid]
        # Other people's homes are offered now and then, as a persona knows a few.
        rng.shuffle(others)
        options = must + others[: 8 - len(must)]
        rng.shuffle(options)
        first = who["first"]
        # The subject's name opens the context, as the eval's reader of errands expects
        # (`eval::item_about` drops it; the simulation's errand has no name either).
        context = (
            f"{who['name']} wants to {errand}. "
            f"{first} lives in {who['home']} and works at {who['work']}. "
            f"Places {first} knows in town: {', '.join(options)}."
        )
        items.append(
            {
                "kind": "place",
                "context": context,
                "question": f"Which place should {first} go to?",
                "options": options,
                "answer": target,
            }
        )
    return items


def sector_of_type(tree, kind, people, index):
    """A sector of the given type ("cottage", "bakery", …) and someone plausible in it."""
    def matches(sector):
        lower = sector.lower()
        aliases = {
            "lantern": "the lantern",
            "inn": "otter inn",
            "vets": "vets",
            "home": None,
        }
        if kind == "home":
            return is_home(sector)
        return aliases.get(kind, kind) in lower

    sectors = [s for s in tree if matches(s)]
    sector = sectors[index % len(sectors)]
    residents = [p for p in people if p["home"] == sector or p["work"] == sector]
    who = (residents or people)[index % len(residents or people)]
    return sector, who


def arena_items(rng, tree, people, errands):
    items = []
    for index, (kind, errand, answer) in enumerate(errands):
        sector, who = sector_of_type(tree, kind, people, index)
        options = list(tree[sector])
        assert answer in options, (sector, answer)
        if len(options) < 2:
            continue
        rng.shuffle(options)
        first = who["first"]
        items.append(
            {
                "kind": "arena",
                "context": f"{who['name']} is at {sector} and wants to {adapt(errand, who)}.",
                "question": f"Which area of {sector} should {first} go to?",
                "options": options,
                "answer": answer,
            }
        )
    return items


def object_items(rng, tree, people, errands):
    items = []
    for index, (sector, arena, errand, answer) in enumerate(errands):
        options = list(tree[sector][arena])
        assert answer in options, (sector, arena, answer)
        rng.shuffle(options)
        residents = [p for p in people if p["home"] == sector or p["work"] == sector]
        who = (residents or people)[index % len(residents or people)]
        items.append(
            {
                "kind": "object",
                "context": f"{who['name']} is in the {arena} of {sector} and wants to {adapt(errand, who)}.",
                "question": "Which object should they use?",
                "options": options,
                "answer": answer,
            }
        )
    return items


POIGNANCY_QUESTION = (
    "On the scale of 1 to 10, where 1 is purely mundane (e.g., brushing teeth, making bed) "
    "and 10 is extremely poignant (e.g., a break up, college acceptance), rate the likely "
    "poignancy of this event for {first}."
)


def poignancy_items(events):
    return [
        {
            "kind": "poignancy",
            "context": event,
            "question": POIGNANCY_QUESTION.format(first=event.split()[0]),
            "options": [str(n) for n in range(1, 11)],
            "answer": str(rating),
            "tolerance": 2,
        }
        for event, rating in events
    ]


def wake_items(rng, names, lines, count, phrasings):
    items = []

    def item(name, line, hour):
        first = name.split()[0]
        return {
            "kind": "wake_up_hour",
            "context": f"Lifestyle: {line}",
            "question": f"At what hour does {first} usually wake up in the morning?",
            "options": [str(h) for h in range(4, 13)],
            "answer": str(hour),
            "tolerance": 1,
        }

    for line, hour in lines:
        items.append(item(line.split(" is ")[0].split("'s ")[0].split(" goes ")[0], line, hour))
    hours = list(range(4, 13))
    index = 0
    while len(items) < count:
        name, she, her = names[index % len(names)]
        hour = hours[index % len(hours)]
        phrasing = phrasings[(index * 5) % len(phrasings)]
        text, answer = phrasing(hour)
        line = text.format(n=name, she=she, her=her)
        items.append(item(name, line, answer))
        index += 1
    rng.shuffle(items)
    return items


def yes_no_items(situations):
    return [
        {
            "kind": "yes_no",
            "context": context,
            "question": question,
            "options": ["yes", "no"],
            "answer": answer,
        }
        for context, question, answer in situations
    ]


def talk_items(situations):
    items = []
    for time, who, doing, place, partner, partner_doing, answer in situations:
        first, partner_first = who.split()[0], partner.split()[0]
        items.append(
            {
                "kind": "yes_no",
                "context": f"It is {time}. {who} is {doing} at {place}. {partner} is {partner_doing}.",
                "question": f"Should {first} start a conversation with {partner_first} now?",
                "options": ["yes", "no"],
                "answer": answer,
            }
        )
    return items


def main():
    rng = random.Random(49)
    tuning = (
        place_items(rng, SALTMERE, SALTMERE_PEOPLE, places.SALTMERE_PLACES)
        + place_items(rng, FERNSIDE, FERNSIDE_PEOPLE, places.FERNSIDE_PLACES)
        + arena_items(rng, SALTMERE, SALTMERE_PEOPLE, places.SALTMERE_ARENAS)
        + arena_items(rng, FERNSIDE, FERNSIDE_PEOPLE, places.FERNSIDE_ARENAS)
        + object_items(rng, SALTMERE, SALTMERE_PEOPLE, places.SALTMERE_OBJECTS)
        + object_items(rng, FERNSIDE, FERNSIDE_PEOPLE, places.FERNSIDE_OBJECTS)
        + poignancy_items(poignancy.TUNING)
        + wake_items(rng, wake.NAMES_TUNING, wake.TUNING_LINES, 100, wake.PHRASINGS)
        + yes_no_items(yes_no.TUNING)
        + talk_items(yes_no.TALK_TUNING)
    )
    held_out = (
        place_items(rng, BRACKENFORD, BRACKENFORD_PEOPLE, places.BRACKENFORD_PLACES)
        + arena_items(rng, BRACKENFORD, BRACKENFORD_PEOPLE, places.BRACKENFORD_ARENAS)
        + object_items(rng, BRACKENFORD, BRACKENFORD_PEOPLE, places.BRACKENFORD_OBJECTS)
        + poignancy_items(poignancy.HELD_OUT)
        + wake_items(rng, wake.NAMES_HELD_OUT, wake.HELD_OUT_LINES, 54, wake.HELD_OUT_PHRASINGS)
        + yes_no_items(yes_no.HELD_OUT)
        + talk_items(yes_no.TALK_HELD_OUT)
    )
    for name, items in (("tuning", tuning), ("held_out", held_out)):
        path = ROOT / "assets/evals/dev" / f"{name}.jsonl"
        with open(path, "w", encoding="utf-8") as out:
            for item in items:
                out.write(json.dumps(item, ensure_ascii=False) + "\n")
        counts = {}
        for item in items:
            counts[item["kind"]] = counts.get(item["kind"], 0) + 1
        print(path.relative_to(ROOT), counts)


if __name__ == "__main__":
    main()
