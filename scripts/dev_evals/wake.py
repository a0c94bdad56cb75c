"""Lifestyle lines and the hour a reader would say the person wakes up. Most say the hour
plainly in one of many ways, as the personas' lifestyles do; some give it as a routine a
reader works out (an hour before the shop opens, eight hours after bed)."""


def clock(hour):
    """A 24-hour hour as people say it: 5 am, noon, 1 pm, midnight."""
    hour %= 24
    if hour == 0:
        return "midnight"
    if hour == 12:
        return "noon"
    return f"{hour} am" if hour < 12 else f"{hour - 12} pm"


# (lifestyle line with {n} for the name, {she}/{her} pronouns, wake hour) — the hour is how the
# line reads to a person; `h` is the wake hour the line is written for.
PHRASINGS = [
    lambda h: ("{n} goes to bed around %s, wakes up around %s, and eats dinner around 6 pm." % (clock(h + 16), clock(h)), h),
    lambda h: ("{n} gets up at %s every morning and is in bed by %s." % (clock(h), clock(h + 15)), h),
    lambda h: ("{n} usually wakes at %s o'clock and goes to sleep around %s." % (h, clock(h + 16)), h),
    lambda h: ("{n} rises at %s, has breakfast straight away and starts work at %s." % (clock(h), clock(h + 2)), h),
    lambda h: ("{n}'s alarm goes off at %s every day; {she} goes to bed around %s." % (clock(h), clock(h + 16)), h),
    lambda h: ("{n} wakes up around %s and goes to bed around %s." % (clock(h), clock(h - 8)), h),
    lambda h: ("{n} sleeps from about %s until %s." % (clock(h - 8), clock(h)), h),
    lambda h: ("{n} is up by %s most days and never stays up past %s." % (clock(h), clock(h + 16)), h),
    # Worked out: eight hours after bed, an hour before work, half an hour to dress.
    lambda h: ("{n} goes to bed at %s and always sleeps exactly eight hours." % clock(h - 8), h),
    lambda h: ("{n} starts work at %s and gets up one hour before to get ready." % clock(h + 1), h),
    lambda h: ("{n} gets up two hours before {her} shift, which starts at %s." % clock(h + 2), h),
    lambda h: ("{n} goes to sleep at %s and wakes up seven hours later." % clock(h - 7), h),
]

NAMES_TUNING = [
    ("Anna Visser", "she", "her"),
    ("Bram Visser", "he", "his"),
    ("Ines Quill", "she", "her"),
    ("Otto Brenner", "he", "his"),
    ("Ada Reid", "she", "her"),
    ("Ade Okoro", "he", "his"),
    ("Callum Reid", "he", "his"),
    ("Clara Marsh", "she", "her"),
    ("Declan Quinn", "he", "his"),
    ("Eva Novak", "she", "her"),
    ("Freya Lind", "she", "her"),
    ("Grace Achebe", "she", "her"),
    ("Hugo Ferris", "he", "his"),
    ("Ilse Brandt", "she", "her"),
    ("Iris Hale", "she", "her"),
    ("Jonas Lind", "he", "his"),
    ("Karl Brandt", "he", "his"),
    ("Kenji Sato", "he", "his"),
    ("Lea Moreau", "she", "her"),
    ("Luca Dalca", "he", "his"),
    ("Milo Varga", "he", "his"),
    ("Mina Sato", "she", "her"),
    ("Nell Ferris", "she", "her"),
    ("Owen Marsh", "he", "his"),
    ("Petra Varga", "she", "her"),
    ("Rosa Dalca", "she", "her"),
    ("Samuel Achebe", "he", "his"),
    ("Tess Okoro", "she", "her"),
    ("Tomasz Novak", "he", "his"),
]

NAMES_HELD_OUT = [
    ("Maud Hollis", "she", "her"),
    ("Arthur Hollis", "he", "his"),
    ("Dev Pell", "he", "his"),
    ("Sunita Pell", "she", "her"),
    ("Rory Mercer", "he", "his"),
    ("Chloe Okafor", "she", "her"),
    ("Femi Okafor", "he", "his"),
    ("Agnes Pell", "she", "her"),
]

# Hand-written lines, each with the hour a reader would give.
TUNING_LINES = [
    ("Bram Visser is an early riser: he is up at 4 am to meet the boats and opens his stall at 5 am.", 4),
    ("Ines Quill starts baking at 6 am and likes an hour at home first, so she gets up at 5 am.", 5),
    ("Otto Brenner goes to bed around 11 pm, wakes up around 7 am, and works at the boatyard from 9 am to 5 pm.", 7),
    ("Callum Reid cooks at the Lantern until after midnight, goes to bed around 2 am and sleeps until 10 am.", 10),
    ("Hugo Ferris closes the pub at 1 am and is never out of bed before 11 am.", 11),
    ("Kenji Sato works the late shift at the clinic, gets home at 3 am and sleeps until noon.", 12),
    ("Petra Varga is a night owl who paints until 2 am and wakes up around 10 am.", 10),
    ("Ilse Brandt lights the bread oven before dawn; she wakes at 4 am every day.", 4),
    ("Eva Novak must be at the bakery by 5 am, so she gets up at 4 am.", 4),
    ("Tess Okoro is a teenager who wakes at 7 am on school days, grumbling.", 7),
    ("Samuel Achebe is retired and wakes with the birds at 6 am.", 6),
    ("Grace Achebe likes a slow morning: she wakes around 8 am and has tea in bed.", 8),
]

HELD_OUT_LINES = [
    ("Dev Pell opens the station's ticket office for the first train at 6 am and gets up at 5 am.", 5),
    ("Rory Mercer runs the Otter Inn, locks up at 1 am and sleeps until 10 am.", 10),
    ("Agnes Pell opens the Lock Keeper's Cafe at 8 am and is up at 7 am to bake.", 7),
    ("Femi Okafor is a lifeguard who swims before the baths open; he wakes at 5 am.", 5),
    ("Maud Hollis is up at 7 am and opens the pharmacy at 9 am.", 7),
    ("Arthur Hollis likes a lie-in and rarely gets up before 9 am.", 9),
]

# The held-out part says it in other words than the tuning part, so a reader tuned on the
# tuning part's wording is tested on wording it never saw. Written before any reader.
HELD_OUT_PHRASINGS = [
    lambda h: ("{n} sets {her} alarm for %s and goes to sleep at %s." % (clock(h), clock(h + 15)), h),
    lambda h: ("{n} likes to be out of bed by %s and usually turns in around %s." % (clock(h), clock(h - 9)), h),
    lambda h: ("{n} is normally awake at %s, long before the town stirs, and asleep by %s." % (clock(h), clock(h - 8)), h),
    lambda h: ("{n} keeps regular hours: in bed at %s, up again at %s." % (clock(h - 7), clock(h)), h),
    lambda h: ("{n} sleeps in until %s and stays up late reading." % clock(h), h),
    lambda h: ("{n}'s day begins at %s with a cup of tea; lunch is at 1 pm." % clock(h), h),
    lambda h: ("Every morning {n} is woken at %s by the church bells." % clock(h), h),
    lambda h: ("{n} turns in at %s and gets a full eight hours of sleep." % clock(h - 8), h),
    lambda h: ("{n} starts {her} shift at %s and gets up two hours beforehand." % clock(h + 2), h),
    lambda h: ("{n} leaves the house at %s, an hour after getting out of bed." % clock(h + 1), h),
    lambda h: ("{n} gets out of bed at %d:30 each day and has dinner at 7 pm." % h, h),
]
