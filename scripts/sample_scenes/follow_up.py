"""Follow-up Test: the first request is underspecified; the model must ask before answering."""

from __future__ import annotations

from sample_scenes.kit import (
    ASKS_QUESTION, FOLLOW, GREY, INK, R, REASON, T, TRUTH, VU, Canvas, SampleTask, Trajectory, assemble, has_all,
    has_any, lacks, money, number, person, regex, text_block,
)

CATEGORY = "Follow-up Test"



# --- generalist: "What's the price?" in front of a shelf ---------------------------------------

SHELF_TOP = 960
PRODUCTS = {  # key: (tag text, price in cents)
    "coffee": ("Colombian coffee 500 g", 749),
    "tea": ("Green tea, 20 bags", 329),
    "honey": ("Wildflower honey 350 g", 585),
    "biscuits": ("Oat biscuits 300 g", 215),
}


def _price_tag(c: Canvas, x: int, key: str) -> None:
    text, cents = PRODUCTS[key]
    c.rect((x, 998, x + 150, 1040), fill=(255, 255, 255), outline=(200, 200, 200), mark=f"tag_{key}")
    c.text((x + 8, 1003), text, 10, GREY)
    c.text((x + 8, 1018), f"${money(cents)}", 14, INK)


def fu_generalist_shelf() -> SampleTask:
    c = Canvas(1600, 1200, (232, 226, 214))
    c.rect((400, 70, 1200, 170), fill=(180, 60, 40), radius=12)
    c.text((800, 120), "BREAKFAST CORNER", 40, (255, 255, 255), anchor="mm")
    c.rect((80, 430, 1520, 460), fill=(150, 110, 70))
    for x in (260, 760, 1260):
        c.circle((x, 390), 42, fill=(80, 140, 70))
        c.rect((x - 30, 400, x + 30, 430), fill=(190, 110, 70))
    c.rect((80, SHELF_TOP, 1520, 990), fill=(150, 110, 70))
    c.rect((80, 990, 1520, 1046), fill=(236, 236, 230))

    cream = (245, 235, 210)
    c.rect((140, 640, 380, SHELF_TOP), fill=(90, 55, 35), radius=8)
    c.rect((140, 740, 380, 830), fill=cream)
    c.text((260, 775), "COLOMBIA", 24, (90, 55, 35), anchor="mm")
    c.text((260, 808), "ground coffee", 12, (90, 55, 35), anchor="mm")
    c.rect((480, 760, 740, SHELF_TOP), fill=(60, 130, 80))
    c.text((610, 830), "GREEN TEA", 24, (255, 255, 255), anchor="mm")
    c.text((610, 862), "20 bags", 12, (255, 255, 255), anchor="mm")
    for x in (840, 960, 1080):
        c.rect((x + 8, 800, x + 92, 826), fill=(120, 80, 30), radius=4)
        c.rect((x, 824, x + 100, SHELF_TOP), fill=(215, 150, 40), radius=14)
        c.rect((x + 12, 860, x + 88, 910), fill=cream)
        c.text((x + 50, 885), "HONEY", 13, (150, 90, 20), anchor="mm")
    c.rect((1220, 800, 1480, SHELF_TOP), fill=(220, 190, 140), radius=6)
    c.text((1350, 870), "OAT", 22, (110, 70, 30), anchor="mm")
    c.text((1350, 900), "BISCUITS", 22, (110, 70, 30), anchor="mm")
    for x, key in ((185, "coffee"), (535, "tea"), (885, "honey"), (1275, "biscuits")):
        _price_tag(c, x, key)

    prices = {k: money(v[1]) for k, v in PRODUCTS.items()}
    total = (2 * PRODUCTS["honey"][1] + PRODUCTS["coffee"][1]) / 100
    traj = Trajectory()
    turns = [
        T(prompt="What's the price?", images=[0],
          golden=("Which item do you mean? This shelf has four products, each with its own price tag: "
                  "Colombian ground coffee, green tea, wildflower honey and oat biscuits. Tell me which one "
                  "and I'll read its price."),
          rubrics=[
              R("Asks a clarifying question about which product is meant", 5, ASKS_QUESTION, categories=(FOLLOW,),
                wrong=f"The price is ${prices['coffee']}."),
              R("Offers the products on the shelf (coffee, tea, honey, biscuits) as options", 3,
                has_any("coffee", "tea", "honey", "biscuit"), categories=(VU, FOLLOW)),
              R("Does not guess a price before the product is clarified", 4, lacks(*prices.values()),
                categories=(FOLLOW, TRUTH), wrong=f"Do you mean the honey? It is ${prices['honey']}."),
          ]),
        T(prompt="The honey, please.",
          golden=f"The wildflower honey (350 g jar) is priced at ${prices['honey']}.",
          steps=[traj.zoom(0, [("price tag under the honey jars", c.region("tag_honey", pad=6))], scale=4)],
          rubrics=[
              R("Gives the honey's price as $5.85", 5, number(5.85, 0.001), final=True,
                wrong="The honey is $5.58."),
              R("Answers about the honey, not another product", 2, has_any("honey")),
          ]),
        T(prompt="And what would two jars of honey plus the bag of coffee come to?",
          golden=(f"The coffee's tag reads ${prices['coffee']} (Colombian coffee 500 g), so two jars of honey "
                  f"and one bag of coffee cost 2 x {prices['honey']} + {prices['coffee']} = ${total:.2f}."),
          steps=[traj.zoom(0, [("price tag under the coffee", c.region("tag_coffee", pad=6))], scale=4),
                 traj.calc(f"2 * {prices['honey']} + {prices['coffee']}")],
          rubrics=[
              R("Reads the coffee price as $7.49", 4, number(7.49, 0.001), wrong="Coffee is $7.94, so $19.64."),
              R("Gives the total as $19.19", 5, number(total, 0.001), final=True, categories=(REASON,),
                wrong="That comes to $13.34."),
          ]),
    ]
    return assemble("fu-generalist-shelf", CATEGORY, "generalist", [c.png()], turns, scene="shop shelf")


# --- medical: "Is this value normal?" on a lab report ------------------------------------------

LAB_ROWS = (  # test, result, units, reference range, flag
    ("Haemoglobin", "11.2", "g/dL", "12.0-15.5", "L"),
    ("Sodium", "139", "mmol/L", "135-145", ""),
    ("Potassium", "5.8", "mmol/L", "3.5-5.1", "H"),
    ("Glucose (fasting)", "5.4", "mmol/L", "3.9-5.5", ""),
    ("Creatinine", "88", "umol/L", "45-90", ""),
)


def fu_medical_labs() -> SampleTask:
    c = Canvas(1400, 1050, (120, 130, 140))
    c.draw.line([(120, 200), (200, 320), (260, 480), (300, 600)], fill=(30, 30, 35), width=10, joint="curve")
    c.draw.line([(120, 200), (60, 330), (90, 470)], fill=(30, 30, 35), width=10, joint="curve")
    c.circle((300, 640), 52, fill=(190, 195, 200))
    c.circle((300, 640), 36, fill=(150, 155, 160))
    c.rect((700, 60, 1320, 1000), fill=(150, 110, 70), radius=16)
    c.rect((730, 110, 1290, 980), fill=(253, 253, 251))
    c.rect((930, 40, 1090, 100), fill=(190, 192, 196), radius=10)

    c.text((750, 130), "MERIDIAN CITY HOSPITAL", 18, INK)
    c.text((750, 158), "Clinical Chemistry Report", 14, GREY)
    c.lines((750, 190), ["Patient: J. Okonkwo    MRN 7781204", "Collected: 2025-03-03 07:40    Ward 6B"], 11, INK)
    columns = (750, 900, 960, 1060, 1160)
    c.rect((742, 250, 1278, 272), fill=(236, 240, 245))
    for x, title in zip(columns, ("Test", "Result", "Units", "Ref. range", "Flag")):
        c.text((x, 255), title, 11, (30, 70, 120), mark="header")
    for i, row in enumerate(LAB_ROWS):
        y = 284 + i * 26
        for x, value in zip(columns, row):
            c.text((x, y), value, 11, (200, 40, 40) if value in {"H", "L"} else INK, mark=f"row_{row[0]}")
    c.lines((750, 430), ["Comments: none.", "Validated by: S. Patel, biomedical scientist"], 10, GREY)
    text_block(c, (750, 500, 1270, 940), (228, 228, 232), line=16, seed=3)

    traj = Trajectory()
    turns = [
        T(prompt="Is this value normal?", images=[0],
          golden=("Which value do you mean? The report lists five results: haemoglobin, sodium, potassium, "
                  "fasting glucose and creatinine. Tell me which one and I'll compare it with its reference "
                  "range."),
          rubrics=[
              R("Asks which value the user means", 5, ASKS_QUESTION, categories=(FOLLOW,),
                wrong="Yes, it is within the reference range."),
              R("Names tests on the report as options", 3,
                has_any("haemoglobin", "hemoglobin", "sodium", "potassium", "glucose", "creatinine"),
                categories=(VU, FOLLOW)),
              R("Does not give a verdict on any value before knowing which one", 4,
                lacks("5.8", "11.2", "elevated", "too high", "is high", "is low"), categories=(FOLLOW, TRUTH),
                wrong="Potassium at 5.8 is high - is that the one you meant?"),
          ]),
        T(prompt="The potassium.",
          golden=("Potassium is 5.8 mmol/L against a reference range of 3.5 to 5.1 mmol/L, so it is above "
                  "the normal range (flagged H, high): not normal."),
          steps=[traj.zoom(0, [("table header and potassium row", c.region("header", "row_Potassium", pad=6))],
                           scale=3, enhance="autocontrast")],
          rubrics=[
              R("Reads the potassium result as 5.8 mmol/L", 4, number(5.8, 0.001),
                wrong="Potassium is 5.3 mmol/L, which is high."),
              R("States that the value is above the reference range (high, not normal)", 5,
                has_any("high", "above", "elevated", "hyperkal"), final=True, categories=(VU, REASON),
                wrong="Potassium is 5.8 mmol/L, which is within normal limits."),
              R("Quotes the reference range 3.5-5.1 mmol/L", 3, has_all("3.5", "5.1")),
          ]),
    ]
    return assemble("fu-medical-labs", CATEGORY, "medical", [c.png()], turns, scene="lab report")


# --- sports: "How tall is he?" with a team photo and a squad list ------------------------------

SQUAD = (  # number, name, position, height in m, shown in the photo
    ("4", "D. Okafor", "DF", "1.88", True),
    ("5", "T. Brennan", "DF", "1.85", False),
    ("7", "A. Haddad", "MF", "1.76", False),
    ("9", "L. Moreau", "FW", "1.79", True),
    ("10", "K. Sato", "MF", "1.71", True),
    ("23", "R. Alvarez", "GK", "1.93", True),
)


def fu_sports_roster() -> SampleTask:
    c = Canvas(1600, 1200, (60, 70, 80))
    for page in ((80, 80, 790, 1120), (810, 80, 1520, 1120)):
        c.rect(page, fill=(250, 248, 240))
    c.text((110, 110), "HARBOUR CITY FC", 34, (150, 20, 30))
    c.text((110, 160), "Matchday 14 · vs. Northgate", 16, GREY)
    c.rect((110, 240, 760, 700), fill=(190, 215, 235))
    c.rect((110, 600, 760, 700), fill=(90, 160, 80))
    shown = [s for s in SQUAD if s[4]]
    for i, (num, _name, pos, height, _) in enumerate(shown):
        shirt = (40, 150, 80) if pos == "GK" else (190, 30, 40)
        person(c, (200 + i * 160, 660), round(float(height) * 200), shirt, number=num, number_size=13)
    caption = "From left: " + ", ".join(f"{s[1]} (#{s[0]})" for s in shown)
    c.text((110, 712), caption, 10, GREY, mark="caption")
    text_block(c, (110, 760, 760, 1080), (225, 224, 218), line=16, seed=11)

    c.text((840, 110), "Coach's notes", 24, INK)
    text_block(c, (840, 160, 1490, 760), (225, 224, 218), line=16, seed=12)
    c.text((1140, 800), "SQUAD", 13, (150, 20, 30), mark="squad")
    columns = (1140, 1180, 1290, 1340)
    for x, title in zip(columns, ("No.", "Player", "Pos.", "Height")):
        c.text((x, 826), title, 11, GREY, mark="squad")
    for i, row in enumerate(SQUAD):
        for x, value in zip(columns, (row[0], row[1], row[2], f"{row[3]} m")):
            c.text((x, 850 + i * 20), value, 11, INK, mark="squad")
    c.text((1140, 980), "GK goalkeeper · DF defender · MF midfielder · FW forward", 9, GREY, mark="squad")

    traj = Trajectory()
    squad_box = c.region("squad", pad=8)
    turns = [
        T(prompt="How tall is he?", images=[0],
          steps=[traj.zoom(0, [("caption under the team photo", c.region("caption", pad=6))], scale=3)],
          golden=("Who do you mean? The team photo shows four players: #4 D. Okafor, #9 L. Moreau, #10 K. Sato "
                  "and #23 R. Alvarez. Tell me the name or shirt number and I'll look up his height in the "
                  "squad list."),
          rubrics=[
              R("Asks which player the user means", 5, ASKS_QUESTION, categories=(FOLLOW,),
                wrong="He is 1.79 m tall."),
              R("Offers the players in the photo as options", 2,
                has_any("Okafor", "Moreau", "Sato", "Alvarez", "#4", "#9", "#10", "#23"), categories=(VU, FOLLOW)),
              R("Does not guess a height before the player is clarified", 4,
                lacks(*(s[3] for s in SQUAD)), categories=(FOLLOW, TRUTH),
                wrong="Do you mean Moreau? He is 1.79 m."),
          ]),
        T(prompt="Number 9.",
          golden="#9 is L. Moreau, a forward, listed at 1.79 m in the squad list.",
          steps=[traj.zoom(0, [("squad list, bottom-right of the programme", squad_box)], scale=3)],
          rubrics=[
              R("Gives Moreau's height as 1.79 m", 5, number(1.79, 0.001), final=True,
                wrong="#9 L. Moreau is 1.71 m."),
              R("Identifies #9 as L. Moreau", 3, has_any("Moreau")),
          ]),
        T(prompt="How much taller than him is the goalkeeper?",
          golden=("The goalkeeper (GK) is #23 R. Alvarez at 1.93 m, so he is 1.93 - 1.79 = 0.14 m, i.e. 14 cm, "
                  "taller than Moreau."),
          steps=[traj.zoom(0, [("squad list, positions and heights", squad_box)], scale=3, enhance="sharpen"),
                 traj.calc("1.93 - 1.79")],
          rubrics=[
              R("Identifies the goalkeeper as R. Alvarez at 1.93 m", 4, number(1.93, 0.001),
                wrong="The goalkeeper, Alvarez, is 1.88 m, so 9 cm taller."),
              R("Gives the difference as 14 cm (0.14 m)", 5, regex(r"\b14\s*cm|\b0\.14\s*m"), final=True,
                categories=(REASON,), wrong="He is 9 cm taller."),
          ]),
        T(prompt="And who is the tallest outfield player in the squad list?",
          golden=("Leaving out the goalkeeper, Alvarez (1.93 m), the tallest outfield player is #4 D. Okafor, a "
                  "defender, at 1.88 m, ahead of #5 T. Brennan at 1.85 m."),
          steps=[traj.zoom(0, [("squad list", squad_box)], scale=4)],
          rubrics=[
              R("Names D. Okafor (#4, 1.88 m) as the tallest outfield player", 5, has_any("Okafor"), final=True,
                categories=(VU, REASON), wrong="The tallest outfield player is R. Alvarez at 1.93 m."),
              R("Excludes the goalkeeper from the outfield players", 3, has_any("goalkeeper", "keeper", "GK"),
                categories=(REASON,)),
              R("Gives Okafor's height as 1.88 m", 2, number(1.88, 0.001)),
          ]),
    ]
    return assemble("fu-sports-roster", CATEGORY, "sports", [c.png()], turns, scene="matchday programme")
