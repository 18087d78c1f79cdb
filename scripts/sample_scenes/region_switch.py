"""Region Switch Q&A: one image, several small details far apart, one answer."""

from __future__ import annotations

from sample_scenes.kit import (
    GREY, INK, R, REASON, STYLE, T, TRUTH, VU, Canvas, SampleTask, Trajectory, assemble, grid, has_any, lacks,
    money, number, person, regex, stripes,
)

CATEGORY = "Region Switch Q&A"





# --- finance: an invoice on a desk --------------------------------------------------------------

INVOICE_ITEMS = (  # description, quantity, unit price in cents
    ("Steel angle brackets, 40 mm", 40, 425),
    ("Soft-close hinge set", 12, 1890),
    ("Nylon cable ties, pack of 100", 5, 900),
    ("Birch shelf panel 1200 x 300", 9, 8330),
)
INVOICE_TAX_PERCENT = 8


def rs_finance_invoice() -> SampleTask:
    c = Canvas(1600, 1200, (150, 108, 74))
    stripes(c, (0, 0, 1600, 1200), [(150, 108, 74), (143, 102, 70), (156, 113, 78)], 37)
    c.circle((1450, 260), 80, fill=(58, 58, 64))
    c.circle((1450, 260), 64, fill=(92, 58, 36))
    c.draw.polygon([(120, 990), (138, 998), (300, 626), (284, 618)], fill=(30, 60, 140))
    c.rect((342, 84, 1284, 1164), fill=(112, 80, 55))
    c.rect((330, 70, 1270, 1150), fill=(252, 252, 248))

    blue = (30, 70, 120)
    c.text((380, 118), "NORTHWIND SUPPLY CO.", 30, INK)
    c.lines((380, 166), ["41 Harbor Road, Suite 7", "Portland, ME 04101", "Tax ID 47-2281093"], 11, GREY)
    c.text((1220, 118), "INVOICE", 34, blue, anchor="ra")
    c.text((1220, 172), "Invoice No. INV-20931", 12, INK, anchor="ra", mark="number")
    c.text((1220, 192), "Invoice date: February 12, 2025", 11, GREY, anchor="ra")
    c.text((380, 262), "BILL TO", 12, blue)
    c.lines((380, 284), ["Halden Fitouts LLC", "Attn: Accounts Payable", "9 Mill Street, Salem, MA 01970"], 12, INK)

    columns = ((380, "la", "Description"), (860, "ra", "Qty"), (1030, "ra", "Unit price"), (1220, "ra", "Amount"))
    c.rect((370, 392, 1230, 420), fill=(232, 238, 245))
    for x, anchor, title in columns:
        c.text((x, 400), title, 12, blue, anchor=anchor)
    subtotal = 0
    for i, (desc, qty, unit) in enumerate(INVOICE_ITEMS):
        y = 436 + i * 34
        amount = qty * unit
        subtotal += amount
        for (x, anchor, _), value in zip(columns, (desc, str(qty), money(unit), money(amount))):
            c.text((x, y), value, 12, INK, anchor=anchor)
        c.draw.line((370, y + 24, 1230, y + 24), fill=(225, 225, 225))
    tax = round(subtotal * INVOICE_TAX_PERCENT / 100)
    total = subtotal + tax
    y = 640
    for label, value in (("Subtotal", money(subtotal)), (f"Sales tax {INVOICE_TAX_PERCENT}%", money(tax))):
        c.text((1030, y), label, 12, GREY, anchor="ra")
        c.text((1220, y), value, 12, INK, anchor="ra")
        y += 26
    c.rect((900, y + 6, 1232, y + 40), fill=(232, 238, 245), mark="total")
    c.text((1030, y + 16), "TOTAL DUE", 13, blue, anchor="ra")
    c.text((1220, y + 16), f"$ {money(total)}", 13, INK, anchor="ra")

    c.text((380, 1050), "Payment terms: net 30. Payment due by March 14, 2025.", 11, GREY, mark="due")
    c.text((380, 1068), "Bank: Harbor Mutual · Routing 011000138 · Account 5512 8840", 11, GREY, mark="due")
    c.text((1220, 1110), "Page 1 of 1", 10, GREY, anchor="ra")

    traj = Trajectory()
    steps = [
        traj.zoom(0, [("invoice number, top-right of the sheet", c.region("number"))], scale=4),
        traj.zoom(0, [("total block", c.region("total")), ("payment terms footer", c.region("due"))]),
    ]
    golden = (f"Invoice number: INV-20931. Total amount due: ${money(total)} (subtotal ${money(subtotal)} "
              f"plus {INVOICE_TAX_PERCENT}% sales tax of ${money(tax)}). Payment due date: March 14, 2025.")
    turn = T(
        prompt=("I need three things from this invoice for our accounts: the invoice number, the total "
                "amount due, and the payment due date."),
        golden=golden, images=[0], steps=steps,
        rubrics=[
            R("Gives the invoice number INV-20931", 5, has_any("INV-20931", "20931"),
              wrong="Invoice number: INV-20391."),
            R(f"States the total amount due as ${money(total)}", 5, number(total / 100, 0.005), final=True,
              wrong=f"The total amount due is ${money(subtotal)}."),
            R("Gives the payment due date as March 14, 2025", 4,
              regex(r"(?i)\bmar(ch|\.)?\s*14\b|\b14(th)?\s*(of\s+)?mar|2025-03-14|\b0?3/14/2025"),
              wrong="Payment is due on March 12, 2025."),
            R("Does not give the invoice date (February 12, 2025) as the due date", 3,
              lacks("February 12", "Feb 12", "12 February", "02/12/2025"), categories=(VU, TRUTH)),
        ],
    )
    return assemble("rs-finance-invoice", CATEGORY, "finance", [c.png()], [turn], scene="invoice on a desk")


# --- sports: scoreboard and a distant shirt number ---------------------------------------------


def rs_sports_scoreboard() -> SampleTask:
    c = Canvas(1800, 1350, (150, 200, 240))
    c.rect((0, 280, 1800, 300), fill=(120, 124, 130))
    stripes(c, (0, 300, 1800, 620), [(160, 40, 50), (142, 34, 44), (90, 90, 98)], 21)
    c.rect((0, 620, 1800, 664), fill=(250, 250, 250))
    for x in range(40, 1800, 600):
        c.text((x + 260, 642), "VOLTA ENERGY", 26, (20, 90, 160), anchor="mm")
    stripes(c, (0, 664, 1800, 1350), [(70, 150, 70), (60, 138, 62)], 150, vertical=True)
    c.draw.line((0, 1300, 1752, 1300), fill=(245, 245, 245), width=4)
    c.draw.line((1752, 664, 1752, 1300), fill=(245, 245, 245), width=4)
    c.draw.line((600, 664, 600, 1300), fill=(245, 245, 245), width=4)
    c.draw.arc((420, 800, 780, 1160), 270, 90, fill=(245, 245, 245), width=4)

    c.rect((184, 150, 196, 300), fill=(90, 92, 98))
    c.rect((50, 40, 330, 156), fill=(20, 22, 28), outline=(150, 150, 150), width=3, mark="board")
    amber = (255, 190, 60)
    c.text((190, 72), "RVR   2 - 1   HLT", 14, amber, anchor="mm")
    c.text((190, 102), "74:12", 13, amber, anchor="mm")
    c.text((190, 130), "2ND HALF", 10, (200, 200, 200), anchor="mm")

    red, blue = (200, 30, 40), (30, 70, 170)
    for feet, height, shirt, num in (((430, 900), 60, red, "4"), ((760, 1010), 64, blue, "8"),
                                     ((1080, 840), 56, blue, "11"), ((1320, 1060), 66, red, "9")):
        person(c, feet, height, shirt, number=num, number_size=11)
    c.mark("player17", person(c, (1690, 1290), 72, red, number="17", number_size=12))
    c.draw.line((1752, 1226, 1752, 1300), fill=(240, 240, 240), width=3)
    c.draw.polygon([(1753, 1226), (1778, 1234), (1753, 1243)], fill=(250, 220, 40))
    c.mark("player17", (1745, 1222, 1782, 1302))
    c.circle((905, 1016), 7, fill=(250, 250, 250))

    traj = Trajectory()
    steps = [
        traj.zoom(0, [("scoreboard, top-left", c.region("board"))], scale=4),
        traj.zoom(0, [("player by the right-hand corner flag", c.region("player17", pad=16))], scale=5,
                  enhance="sharpen"),
    ]
    turn = T(
        prompt=("From this photo of the match: what's the score on the scoreboard at the top left, how much "
                "time does the match clock show, and what shirt number is the player standing next to the "
                "right-hand corner flag wearing?"),
        golden=("The scoreboard shows RVR 2 - 1 HLT, so RVR lead 2-1; the match clock reads 74:12 (second "
                "half). The player next to the right-hand corner flag wears number 17 (red shirt)."),
        images=[0], steps=steps,
        rubrics=[
            R("States the score as 2-1 (RVR 2, HLT 1)", 5, regex(r"2\s*(-|:|to)\s*1"), wrong="It's 1-1."),
            R("Reads the match clock as 74:12", 3, has_any("74:12")),
            R("Identifies the shirt number of the player by the right-hand corner flag as 17", 5,
              regex(r"\b17\b"), final=True, wrong="The player by the corner flag wears number 11."),
            R("Mentions the period shown on the board (second half)", 1, has_any("second half", "2nd half")),
        ],
    )
    return assemble("rs-sports-scoreboard", CATEGORY, "sports", [c.png()], [turn], scene="stadium")


# --- chemistry: reagent labels on a lab bench --------------------------------------------------

BENCH_TOP = 700


def _bottle(c: Canvas, cx: int, width: int, height: int, glass: tuple[int, int, int],
            cap: tuple[int, int, int], label: list[str], mark: str | None = None) -> None:
    top = BENCH_TOP - height
    c.rect((cx - width // 5, top - 70, cx + width // 5, top - 36), fill=cap, radius=4)
    c.rect((cx - width // 6, top - 40, cx + width // 6, top + 10), fill=glass)
    c.rect((cx - width // 2, top, cx + width // 2, BENCH_TOP), fill=glass, radius=12)
    label_box = (cx - width // 2 + 8, BENCH_TOP - int(height * 0.66),
                 cx + width // 2 - 8, BENCH_TOP - int(height * 0.24))
    c.rect(label_box, fill=(250, 250, 246), mark=mark)
    y = label_box[1] + 12
    for i, row in enumerate(label):
        c.text((cx, y + i * 17), row, 12 if i == 0 else 11, INK, anchor="ma")


def rs_chemistry_bench() -> SampleTask:
    c = Canvas(1600, 1200, (226, 232, 236))
    grid(c, (0, 0, 1600, BENCH_TOP), 64, (210, 216, 221))
    c.rect((640, 90, 960, 330), fill=(250, 225, 90))
    c.text((800, 170), "LAB 3", 48, (30, 30, 30), anchor="mm")
    c.text((800, 250), "Eye protection required", 20, (30, 30, 30), anchor="mm")
    c.rect((0, BENCH_TOP, 1600, 760), fill=(60, 66, 72))
    c.rect((0, 760, 1600, 1200), fill=(125, 135, 145))
    for x in range(0, 1600, 400):
        c.draw.line((x, 760, x, 1200), fill=(95, 104, 112), width=3)
        c.rect((x + 180, 820, x + 220, 834), fill=(200, 204, 208), radius=5)

    _bottle(c, 95, 124, 260, (150, 85, 30), (200, 40, 40), ["Hydrochloric acid", "HCl  0.25 M", "CORROSIVE"],
            mark="hcl")
    _bottle(c, 420, 140, 300, (200, 220, 225), (40, 90, 180), ["Sodium hydroxide", "NaOH  2.0 M", "CORROSIVE"])
    _bottle(c, 720, 128, 220, (120, 160, 200), (60, 60, 60), ["Copper(II) sulfate", "CuSO4  0.50 M"])
    _bottle(c, 1000, 120, 250, (70, 50, 80), (60, 60, 60), ["KMnO4 soln.", "0.02 M", "OXIDISER"])
    c.rect((1180, 560, 1300, BENCH_TOP), fill=(215, 230, 235), radius=6)
    c.rect((1180, 620, 1300, BENCH_TOP), fill=(200, 120, 170), radius=6)

    glass, liquid = (215, 230, 236), (175, 210, 232)
    c.draw.polygon([(1486, 430), (1514, 430), (1514, 520), (1586, BENCH_TOP), (1414, BENCH_TOP), (1486, 520)],
                   fill=glass)
    c.draw.polygon([(1455, 620), (1545, 620), (1586, BENCH_TOP), (1414, BENCH_TOP)], fill=liquid)
    faint = (178, 182, 184)
    c.rect((1452, 560, 1548, 614), fill=(236, 238, 238), mark="flask")
    for i, row in enumerate(("pH 7.4 buffer", "Lot 7Q-4418", "Exp 09/2026")):
        c.text((1500, 566 + i * 15), row, 10, faint, anchor="ma")

    traj = Trajectory()
    steps = [
        traj.zoom(0, [("label of the far-left bottle", c.region("hcl"))], scale=4),
        traj.clahe(0, "faint label on the far-right conical flask", c.region("flask")),
    ]
    turn = T(
        prompt=("Two details from this bench photo, please: the concentration on the label of the bottle at "
                "the far left, and the lot number on the conical flask at the far right."),
        golden=("The bottle at the far left is hydrochloric acid, labelled HCl 0.25 M. The conical flask at "
                "the far right (pH 7.4 buffer) carries lot number 7Q-4418."),
        images=[0], steps=steps,
        rubrics=[
            R("States the far-left bottle's concentration as 0.25 M", 5, number(0.25, 0.0005), final=True,
              wrong="The far-left bottle is HCl 2.5 M and the flask is lot 7Q-4418."),
            R("Gives the flask's lot number 7Q-4418", 5, has_any("7Q-4418", "7Q 4418", "7Q4418"), final=True,
              wrong="HCl 0.25 M; the flask's lot number is 7Q-4481."),
            R("Identifies the far-left reagent as hydrochloric acid (HCl)", 3, has_any("HCl", "hydrochloric")),
            R("Does not give the expiry date in place of the lot number", 2, lacks("09/2026"),
              categories=(VU, REASON)),
        ],
    )
    return assemble("rs-chemistry-bench", CATEGORY, "chemistry", [c.png()], [turn], scene="lab bench")


# --- generalist: a street with small signs -----------------------------------------------------


def _windows(c: Canvas, x0: int, x1: int, top: int, bottom: int, color: tuple[int, int, int]) -> None:
    for y in range(top + 40, bottom - 80, 110):
        for x in range(x0 + 30, x1 - 80, 100):
            c.rect((x, y, x + 60, y + 70), fill=color)


def rs_generalist_street() -> SampleTask:
    c = Canvas(2000, 1500, (172, 206, 234))
    buildings = ((0, 380, 260, (196, 160, 130)), (380, 760, 180, (170, 175, 185)),
                 (760, 1240, 300, (222, 200, 160)), (1240, 1620, 220, (150, 120, 110)),
                 (1620, 2000, 340, (200, 205, 195)))
    for x0, x1, top, color in buildings:
        c.rect((x0, top, x1, 1060), fill=color)
        _windows(c, x0, x1, top, 760, (120, 150, 175))
    c.rect((0, 1060, 2000, 1160), fill=(200, 198, 190))
    c.rect((0, 1160, 2000, 1500), fill=(85, 88, 92))
    for x in range(40, 2000, 240):
        c.rect((x, 1326, x + 120, 1336), fill=(235, 235, 235))
    c.rect((560, 1230, 900, 1330), fill=(40, 110, 150), radius=18)
    for x in (620, 840):
        c.circle((x, 1335), 26, fill=(25, 25, 25))

    c.rect((790, 760, 1210, 820), fill=(120, 60, 40))
    c.text((1000, 790), "BAKERY", 44, (250, 235, 200), anchor="mm")
    c.rect((800, 850, 1010, 1040), fill=(180, 210, 222))
    c.rect((1040, 830, 1200, 1060), fill=(110, 70, 45))
    c.rect((1055, 848, 1185, 965), fill=(214, 230, 236))
    c.rect((1060, 868, 1180, 940), fill=(252, 252, 250), mark="hours")
    c.lines((1066, 872), ["HOURS", "Mon-Fri 6:30-18:00", "Sat 7:00-14:30", "Sun closed"], 10, INK, spacing=1.4)

    c.rect((1290, 860, 1570, 1060), fill=(90, 70, 64))
    c.text((1430, 830), "CAFE LUNA", 24, (250, 250, 240), anchor="mm")
    c.rect((1330, 900, 1530, 1000), fill=(200, 220, 228))
    c.text((1430, 1020), "Open daily 8:00-20:00", 10, (235, 235, 235), anchor="mm")
    c.text((560, 980), "No. 27", 12, INK, anchor="mm")

    c.rect((66, 540, 76, 1120), fill=(110, 112, 118))
    c.rect((20, 512, 196, 542), fill=(30, 110, 60), mark="street")
    c.text((108, 527), "Alder Lane", 13, (255, 255, 255), anchor="mm")
    c.rect((36, 600, 106, 620), fill=(250, 250, 250))
    c.text((71, 610), "ONE WAY", 9, INK, anchor="mm")

    c.rect((1941, 560, 1951, 1120), fill=(110, 112, 118))
    c.rect((1892, 512, 1996, 632), fill=(250, 250, 250), outline=(60, 60, 60), mark="bus")
    c.circle((1944, 540), 20, fill=(200, 30, 30))
    c.text((1944, 540), "BUS", 11, (255, 255, 255), anchor="mm")
    c.text((1944, 580), "42 · 118", 12, INK, anchor="mm")
    c.text((1944, 604), "Harbour · Station", 9, GREY, anchor="mm")

    traj = Trajectory()
    steps = [
        traj.zoom(0, [("street name sign, left", c.region("street")), ("bus stop sign, right", c.region("bus"))]),
        traj.zoom(0, [("opening-hours card on the bakery door", c.region("hours", pad=8))], scale=4,
                  enhance="sharpen"),
    ]
    turn = T(
        prompt=("Three quick things from this street photo: what street is this (the name sign on the left), "
                "which bus routes serve the stop on the far right, and what time does the bakery close on "
                "Saturdays?"),
        golden=("The street name sign on the left reads \"Alder Lane\". The bus stop sign on the right lists "
                "routes 42 and 118 (towards Harbour and Station). The card on the bakery door gives Saturday "
                "hours of 7:00 to 14:30, so it closes at 14:30 (2:30 pm) on Saturdays."),
        images=[0], steps=steps,
        rubrics=[
            R("Identifies the street as Alder Lane", 4, has_any("Alder Lane", "Alder Ln"),
              wrong="This is Elder Lane."),
            R("Lists both bus routes, 42 and 118", 5, regex(r"\b42\b[\s\S]*\b118\b|\b118\b[\s\S]*\b42\b"),
              wrong="Routes 42 and 18 stop here."),
            R("Gives the bakery's Saturday closing time as 14:30 (2:30 pm)", 5,
              regex(r"14[:.]30|\b2[:.]30\s*(pm|p\.m\.)"), final=True,
              wrong="The bakery closes at 18:00 on Saturdays."),
            R("Does not give the weekday hours or the cafe's hours instead of the bakery's Saturday hours", 2,
              lacks("18:00", "20:00"), categories=(VU, TRUTH)),
            R("Answers the three questions clearly and separately", 1, None, categories=(STYLE,),
              subjective=True),
        ],
    )
    return assemble("rs-generalist-street", CATEGORY, "generalist", [c.png()], [turn], scene="street")
