"""Progressive Visual Reasoning: one image, questions that build on the previous answers."""

from __future__ import annotations

import math

from sample_scenes.kit import (
    GREY, INK, R, REASON, STYLE, T, TRUTH, VU, Canvas, SampleTask, Trajectory, assemble, grid, has_all, has_any,
    lacks, money, number, regex, rng, text_block,
)

CATEGORY = "Progressive Visual Reasoning"

SCI = r"\s*(x|\*|·)\s*10\s*\^?\s*"
"""Regex piece for ``a x 10^b`` notation (``x``, ``*`` or ``·``; caret optional)."""


# --- maths: points on a coordinate grid -----------------------------------------------------------

ORIGIN, UNIT = (800, 600), 60
POINTS = {"A": (-4, 9), "B": (3, -5), "C": (5, -3), "D": (-9, -7)}


def _px(x: float, y: float) -> tuple[int, int]:
    return round(ORIGIN[0] + x * UNIT), round(ORIGIN[1] - y * UNIT)


def pr_maths_plot() -> SampleTask:
    c = Canvas(1600, 1200, (255, 255, 255))
    grid(c, (20, 0, 1580, 1200), UNIT, (226, 233, 246))
    ox, oy = ORIGIN
    c.draw.line((0, oy, 1600, oy), fill=INK, width=2)
    c.draw.line((ox, 0, ox, 1200), fill=INK, width=2)
    for k in range(-12, 13, 2):
        if k:
            c.text((_px(k, 0)[0], oy + 6), str(k), 10, GREY, anchor="ma")
    for k in range(-8, 10, 2):
        if k:
            c.text((ox - 6, _px(0, k)[1]), str(k), 10, GREY, anchor="rm")
    c.text((40, 30), "Figure 3", 14, INK)
    for name, (x, y) in POINTS.items():
        px, py = _px(x, y)
        c.circle((px, py), 5, fill=(200, 40, 40))
        c.text((px + 10, py + 4), f"{name}({x}, {y})", 12, INK, mark=name)
        c.mark(name, (px - 6, py - 6, px + 6, py + 6))

    (ax, ay), (bx, by), (cx, cy) = POINTS["A"], POINTS["B"], POINTS["C"]
    slope = (by - ay) / (bx - ax)
    intercept = ay - slope * ax
    root = -intercept / slope
    line_at_c = slope * cx + intercept
    traj = Trajectory()
    turns = [
        T(prompt="What are the coordinates of the marked points A and B on this plot?",
          images=[0],
          golden=f"A = ({ax}, {ay}) and B = ({bx}, {by}).",
          steps=[traj.zoom(0, [("point A", c.region("A")), ("point B", c.region("B"))], scale=4)],
          rubrics=[
              R("Gives A as (-4, 9)", 5, regex(r"\(\s*-4\s*,\s*9\s*\)"), wrong="A = (-4, 8) and B = (3, -5)."),
              R("Gives B as (3, -5)", 5, regex(r"\(\s*3\s*,\s*-5\s*\)"), wrong="A = (-4, 9) and B = (3, 5)."),
          ]),
        T(prompt="Give the equation of the straight line through A and B.",
          golden=(f"Slope m = ({by} - {ay}) / ({bx} - ({ax})) = {by - ay} / {bx - ax} = {slope:g}. Intercept: "
                  f"{ay} = {slope:g} x ({ax}) + b, so b = {intercept:g}. The line is y = -2x + 1."),
          steps=[traj.calc(f"({by} - {ay}) / ({bx} - ({ax}))"), traj.calc(f"{ay} - ({slope:g} * {ax})")],
          rubrics=[
              R("Finds the slope -2", 4, number(slope), categories=(REASON,),
                wrong="The slope is (-5 - 9) / (3 + 4) = -14/5 = -2.8, so y = -2.8x - 2.2."),
              R("Gives the equation y = -2x + 1", 5, regex(r"y\s*=\s*-\s*2\s*x\s*\+\s*1\b|y\s*=\s*1\s*-\s*2\s*x"),
                final=True, categories=(REASON,), wrong="The line is y = -2x + 3."),
          ]),
        T(prompt="Where does that line cross the x-axis, and is point C above or below it?",
          golden=(f"Setting y = 0 in y = -2x + 1 gives x = {root:g}, so the line crosses the x-axis at "
                  f"({root:g}, 0). Point C is at ({cx}, {cy}); on the line at x = {cx}, y = {slope:g} x {cx} + "
                  f"{intercept:g} = {line_at_c:g}, and {cy} > {line_at_c:g}, so C lies above the line."),
          steps=[traj.zoom(0, [("point C", c.region("C"))], scale=4),
                 traj.calc(f"{intercept:g} / {-slope:g}"), traj.calc(f"{slope:g} * {cx} + {intercept:g}")],
          rubrics=[
              R("Gives the x-intercept as x = 0.5", 5, regex(r"(?<![\d.])0\.5\b|x\s*=\s*1\s*/\s*2"),
                categories=(REASON,), wrong="It crosses the x-axis at x = 2, and C is above the line."),
              R("States that C lies above the line", 5, has_any("above"), final=True, categories=(REASON,),
                wrong="The crossing is at x = 0.5; C lies below the line."),
              R("Reads C as (5, -3)", 3, regex(r"\(\s*5\s*,\s*-3\s*\)")),
          ]),
    ]
    return assemble("pr-maths-plot", CATEGORY, "maths", [c.png()], turns, scene="coordinate plot")


# --- biology: colony counts on a dilution series ------------------------------------------------

PLATES = (  # centre x, dilution exponent, colonies, colony radius range, seed
    (300, -4, 380, (3, 4), 41),
    (800, -5, 46, (5, 7), 42),
    (1300, -6, 4, (5, 7), 43),
)
PLATE_Y, PLATE_R, AGAR_R = 500, 210, 196
AGAR, COLONY = (222, 196, 120), (252, 248, 232)


def _colonies(count: int, radii: tuple[int, int], seed: int, *, spaced: bool) -> list[tuple[float, float, int]]:
    """Deterministic colony positions inside the agar; ``spaced`` keeps them countable."""
    r = rng(seed)
    placed: list[tuple[float, float, int]] = []
    while len(placed) < count:
        dist = (AGAR_R - 30) * math.sqrt(r.random())
        angle = 2 * math.pi * r.random()
        radius = radii[0] + int(r.random() * (radii[1] - radii[0] + 1))
        x, y = dist * math.cos(angle), dist * math.sin(angle)
        if spaced and any(math.hypot(x - px, y - py) < 22 for px, py, _ in placed):
            continue
        placed.append((x, y, radius))
    return placed


def pr_biology_plates() -> SampleTask:
    c = Canvas(1600, 1200, (50, 70, 90))
    for cx, exponent, count, radii, seed in PLATES:
        c.circle((cx, PLATE_Y), PLATE_R, fill=(200, 205, 210))
        c.circle((cx, PLATE_Y), AGAR_R, fill=AGAR)
        for x, y, radius in _colonies(count, radii, seed, spaced=count < 100):
            c.circle((cx + x, PLATE_Y + y), radius, fill=COLONY)
        c.rect((cx - 110, 740, cx + 110, 790), fill=(240, 228, 190), mark=f"label{exponent}")
        c.text((cx, 750), "E. coli K-12 · 24 h, 37 °C", 10, INK, anchor="ma")
        c.text((cx, 768), f"10^{exponent}   0.1 mL", 11, INK, anchor="ma")
    c.rect((900, 860, 1540, 1160), fill=(250, 250, 245))
    c.text((930, 880), "Serial dilution - 12 Mar", 16, INK)
    c.text((930, 910), "Spread plates, count those with 30-300 colonies.", 11, GREY)
    text_block(c, (930, 940, 1510, 1140), (220, 220, 226), line=16, seed=7)
    c.draw.line((120, 900, 520, 1080), fill=(30, 30, 30), width=14)
    c.draw.line((120, 900, 160, 918), fill=(40, 90, 200), width=14)

    counts = {exponent: count for _, exponent, count, _, _ in PLATES}
    cfu5 = counts[-5] / (0.1 * 10**-5)
    cfu6 = counts[-6] / (0.1 * 10**-6)
    sci_46 = regex(rf"4\.6{SCI}7\b|4\.6\s*[eE]\+?0?7\b|46,?000,?000")
    traj = Trajectory()
    turns = [
        T(prompt="How many colonies are on the plate labelled 10^-5, and what volume was plated?",
          images=[0],
          golden=f"The 10^-5 plate (the middle one) has {counts[-5]} colonies; its label says 0.1 mL was plated.",
          steps=[traj.zoom(0, [("label under the middle plate", c.region("label-5"))], scale=4),
                 traj.count_blobs(0, "middle plate (10^-5)", (800, PLATE_Y), PLATE_R, min_gray=235)],
          rubrics=[
              R("Counts 46 colonies on the 10^-5 plate", 5, regex(rf"\b{counts[-5]}\b"), final=True,
                wrong="There are 43 colonies on the 10^-5 plate; 0.1 mL was plated."),
              R("Reads the plated volume as 0.1 mL", 3, regex(r"0\.1\s*mL|100\s*(uL|microlit)")),
          ]),
        T(prompt="From that plate, what is the concentration of the original culture in CFU/mL?",
          golden=(f"CFU/mL = colonies / (volume plated x dilution) = {counts[-5]} / (0.1 x 10^-5) = 4.6 x 10^7 "
                  f"CFU/mL ({cfu5:,.0f} CFU/mL)."),
          steps=[traj.calc(f"{counts[-5]} / (0.1 * (10^-5))")],
          rubrics=[
              R("Gives 4.6 x 10^7 CFU/mL", 5, sci_46, final=True, categories=(REASON,),
                wrong="4.6 x 10^6 CFU/mL (4,600,000)."),
              R("Divides by both the plated volume (0.1 mL) and the dilution (10^-5)", 3, has_all("0.1", "10^-5"),
                categories=(REASON,)),
          ]),
        T(prompt="What about the 10^-6 plate: how many colonies, and would it give a better estimate?",
          golden=(f"The 10^-6 plate (right) has only {counts[-6]} colonies. It would give {counts[-6]} / (0.1 x "
                  f"10^-6) = 4.0 x 10^7 CFU/mL ({cfu6:,.0f}), but {counts[-6]} colonies is far below the "
                  f"countable range of 30 to 300, so that estimate is unreliable. The 10^-5 plate, with "
                  f"{counts[-5]} colonies, is the better basis: 4.6 x 10^7 CFU/mL. (The 10^-4 plate is too "
                  f"crowded to count.)"),
          steps=[traj.zoom(0, [("right plate (10^-6) with its label",
                                (1300 - PLATE_R, PLATE_Y - PLATE_R, 1300 + PLATE_R, 800))], scale=2),
                 traj.calc(f"{counts[-6]} / (0.1 * (10^-6))")],
          rubrics=[
              R("Counts 4 colonies on the 10^-6 plate", 4, regex(rf"(?<![\d.,]){counts[-6]}\s+colon"),
                wrong="The 10^-6 plate has 7 colonies, giving 7.0 x 10^7 CFU/mL."),
              R("Says the 10^-6 plate is not the better basis (too few colonies, outside 30-300)", 5,
                has_any("unreliable", "too few", "below", "not better", "less reliable", "fewer than 30"),
                final=True, categories=(REASON,),
                wrong="Yes: its 4 colonies give 4.0 x 10^7 CFU/mL, a better estimate."),
              R("Keeps 4.6 x 10^7 CFU/mL from the 10^-5 plate as the estimate", 3, sci_46, categories=(REASON,)),
          ]),
    ]
    return assemble("pr-biology-plates", CATEGORY, "biology", [c.png()], turns, scene="petri dishes")


# --- sports: a box score in a newspaper ------------------------------------------------------------

BOX = (  # player, minutes, FG, 3PT, FT, rebounds, assists
    ("J. Whitfield", 36, (10, 19), (3, 7), (4, 4), 6, 5),
    ("M. Osei", 35, (7, 15), (1, 4), (2, 2), 9, 3),
    ("D. Kowalski", 34, (6, 14), (2, 5), (0, 0), 4, 7),
    ("T. Brandt", 33, (5, 11), (0, 1), (3, 4), 11, 2),
    ("R. Nakamura", 32, (4, 9), (2, 4), (1, 2), 3, 6),
    ("L. Fischer", 28, (3, 7), (1, 3), (2, 2), 2, 1),
    ("A. Mensah", 24, (2, 5), (0, 1), (2, 2), 5, 0),
    ("P. Ruiz", 18, (1, 4), (1, 2), (0, 0), 1, 1),
)


def _points(fg: tuple[int, int], three: tuple[int, int], ft: tuple[int, int]) -> int:
    return 2 * fg[0] + three[0] + ft[0]


def _made(pair: tuple[int, int]) -> str:
    return f"{pair[0]}-{pair[1]}"


def pr_sports_boxscore() -> SampleTask:
    c = Canvas(1400, 1050, (245, 242, 232))
    team_pts = sum(_points(fg, three, ft) for _, _, fg, three, ft, _, _ in BOX)
    c.text((700, 60), "THE HARBOUR HERALD", 40, INK, anchor="mm")
    c.text((700, 100), "Sunday, March 9, 2025 · Sports", 11, GREY, anchor="mm")
    c.draw.line((40, 118, 1360, 118), fill=INK, width=2)
    c.text((40, 140), f"Storm edge Pirates {team_pts}-96 in overtime thriller", 32, INK)
    c.rect((40, 200, 840, 620), fill=(205, 205, 200))
    c.circle((440, 360), 60, fill=(170, 170, 165))
    c.rect((370, 420, 510, 620), fill=(170, 170, 165))
    text_block(c, (40, 640, 420, 1010), (200, 198, 190), line=15, seed=21)
    text_block(c, (460, 640, 840, 1010), (200, 198, 190), line=15, seed=22)
    text_block(c, (880, 200, 1360, 600), (200, 198, 190), line=15, seed=23)

    columns = (880, 990, 1035, 1090, 1140, 1190, 1230, 1275)
    c.text((880, 624), "STORM - BOX SCORE", 12, INK, mark="box")
    for x, title in zip(columns, ("PLAYER", "MIN", "FG", "3PT", "FT", "REB", "AST", "PTS")):
        c.text((x, 646), title, 10, GREY, mark="box")
    for i, (name, minutes, fg, three, ft, reb, ast) in enumerate(BOX):
        values = (name, str(minutes), _made(fg), _made(three), _made(ft), str(reb), str(ast),
                  str(_points(fg, three, ft)))
        for x, value in zip(columns, values):
            c.text((x, 666 + i * 18), value, 10, INK, mark="box" if i else "whitfield")
    fg_made = sum(row[2][0] for row in BOX)
    fg_att = sum(row[2][1] for row in BOX)
    totals = ("TOTALS", str(sum(r[1] for r in BOX)), f"{fg_made}-{fg_att}",
              f"{sum(r[3][0] for r in BOX)}-{sum(r[3][1] for r in BOX)}",
              f"{sum(r[4][0] for r in BOX)}-{sum(r[4][1] for r in BOX)}",
              str(sum(r[5] for r in BOX)), str(sum(r[6] for r in BOX)), str(team_pts))
    y_tot = 666 + len(BOX) * 18 + 6
    for x, value in zip(columns, totals):
        c.text((x, y_tot), value, 10, INK, mark="totals")
    c.text((880, y_tot + 24), "FG, 3PT, FT: made-attempted", 9, GREY)

    name, _, fg, three, ft, _, _ = BOX[0]
    pts = _points(fg, three, ft)
    pct = fg[0] / fg[1] * 100
    team_pct = fg_made / fg_att * 100
    traj = Trajectory()
    turns = [
        T(prompt=(f"How many points did {name} score, and how many field goals did he make and attempt?"),
          images=[0],
          golden=f"{name} scored {pts} points on {fg[0]}-of-{fg[1]} field goals (FG {fg[0]}-{fg[1]}).",
          steps=[traj.zoom(0, [("box score header and Whitfield's row", c.region("box", "whitfield", pad=6))],
                           scale=3)],
          rubrics=[
              R("Gives Whitfield's points as 27", 5, regex(rf"\b{pts}\b"), final=True,
                wrong=f"{name} scored 17 points on 10-of-19 shooting."),
              R("Gives his field goals as 10 made of 19 attempted", 4, regex(r"\b10\b\D{1,10}\b19\b"),
                wrong=f"{pts} points on 10 of 16 from the field."),
          ]),
        T(prompt="What was his field-goal percentage, and was it better than the team's overall?",
          golden=(f"{name} shot {fg[0]} / {fg[1]} = {pct:.2f} % from the field. The team (TOTALS row) went "
                  f"{fg_made}-of-{fg_att} = {team_pct:.2f} %, so yes, he shot better than the team, by about "
                  f"{pct - team_pct:.1f} percentage points."),
          steps=[traj.zoom(0, [("TOTALS row", c.region("totals", pad=6))], scale=4),
                 traj.calc(f"{fg[0]} / {fg[1]} * 100"), traj.calc(f"{fg_made} / {fg_att} * 100")],
          rubrics=[
              R("Gives his FG% as about 52.6 %", 5, number(round(pct, 2), 0.05), final=True, categories=(REASON,),
                wrong="He shot 9 / 19 = 47.37 %."),
              R("Gives the team's FG% as about 45.2 % (38 of 84)", 4, number(round(team_pct, 2), 0.05),
                wrong="The team shot 38 / 82 = 46.34 %."),
              R("Concludes that he shot better than the team", 4, has_any("yes", "better", "higher", "above"),
                categories=(REASON,), wrong="No, he shot worse than the team."),
          ]),
    ]
    return assemble("pr-sports-boxscore", CATEGORY, "sports", [c.png()], turns, scene="newspaper box score")


# --- finance: reconciling a bank statement ---------------------------------------------------------

OPENING = 245000  # cents
LEDGER = (  # date, description, amount in cents (negative: paid out)
    ("03 Apr", "Card payment - Green Grocer", -8640),
    ("07 Apr", "Salary - Castell Ltd", 192000),
    ("11 Apr", "Rent - standing order", -115000),
    ("15 Apr", "Utilities - direct debit", -13275),
    ("22 Apr", "Refund - SkyWays airline", 6420),
)
PRINTED_CLOSING = 305605  # the statement's (wrong) figure: digits transposed




def pr_finance_ledger() -> SampleTask:
    c = Canvas(1600, 1200, (95, 100, 110))
    c.rect((240, 60, 1360, 1150), fill=(250, 250, 246))
    blue = (30, 70, 120)
    c.text((290, 100), "HARBOR MUTUAL BANK", 26, blue)
    c.text((290, 140), "Statement of account", 14, GREY)
    c.text((1310, 100), "Page 1 of 1", 10, GREY, anchor="ra")
    c.lines((290, 180), ["Account: 5512 8840    Sort: 01-10-00", "Period: 1 Apr 2025 to 30 Apr 2025"], 11, INK)
    c.text((290, 226), f"Opening balance: {money(OPENING)}", 11, INK, mark="opening")

    columns = ((290, "la", "Date"), (390, "la", "Description"), (1100, "ra", "Paid out"), (1300, "ra", "Paid in"))
    c.rect((280, 280, 1320, 304), fill=(232, 238, 245), mark="table")
    for x, anchor, title in columns:
        c.text((x, 286), title, 12, blue, anchor=anchor)
    for i, (date, desc, amount) in enumerate(LEDGER):
        y = 318 + i * 30
        out, inn = (money(-amount), "") if amount < 0 else ("", money(amount))
        for (x, anchor, _), value in zip(columns, (date, desc, out, inn)):
            if value:
                c.text((x, y), value, 12, INK, anchor=anchor, mark="table")
    text_block(c, (290, 520, 1310, 900), (226, 226, 230), line=16, seed=31)
    c.text((1300, 1060), f"Closing balance: {money(PRINTED_CLOSING)}", 11, INK, anchor="ra", mark="closing")
    c.text((290, 1110), "Harbor Mutual Bank is a member of the deposit guarantee scheme.", 9, GREY)

    paid_out = -sum(a for _, _, a in LEDGER if a < 0)
    paid_in = sum(a for _, _, a in LEDGER if a > 0)
    closing = OPENING + paid_in - paid_out
    outs = [money(-a) for _, _, a in LEDGER if a < 0]
    ins = [money(a) for _, _, a in LEDGER if a > 0]
    plain = [m.replace(",", "") for m in outs]
    traj = Trajectory()
    turns = [
        T(prompt="What is the opening balance on this statement, and what are the amounts paid out?",
          images=[0],
          golden=(f"Opening balance: {money(OPENING)}. Paid out: {outs[0]} (card payment, 3 Apr), {outs[1]} "
                  f"(rent, 11 Apr) and {outs[2]} (utilities, 15 Apr)."),
          steps=[traj.zoom(0, [("opening balance", c.region("opening")), ("transactions", c.region("table"))],
                           scale=3)],
          rubrics=[
              R("Gives the opening balance as 2,450.00", 5, number(OPENING / 100, 0.001),
                wrong=f"Opening balance 2,540.00; paid out {', '.join(outs)}."),
              R("Lists the three payments out: 86.40, 1,150.00 and 132.75", 4,
                regex(r"^(?=[\s\S]*86\.40?)(?=[\s\S]*1,?150)(?=[\s\S]*132\.75)"),
                wrong=f"Opening balance {money(OPENING)}; paid out {outs[0]} and {outs[1]}."),
              R("Does not list the airline refund (64.20) as a payment out", 2, lacks("64.20", "64.2 "),
                categories=(VU, TRUTH)),
          ]),
        T(prompt="What do the payments out add up to, and the payments in?",
          golden=(f"Paid out: {' + '.join(outs)} = {money(paid_out)}. Paid in: {ins[0]} (salary) + {ins[1]} "
                  f"(refund) = {money(paid_in)}."),
          steps=[traj.zoom(0, [("transactions: paid out and paid in", c.region("table"))], scale=3,
                           enhance="gray"),
                 traj.calc(" + ".join(plain)),
                 traj.calc(" + ".join(m.replace(",", "") for m in ins))],
          rubrics=[
              R("Totals the payments out as 1,369.15", 5, number(paid_out / 100, 0.005), categories=(REASON,),
                wrong=f"Paid out totals 1,282.75; paid in {money(paid_in)}."),
              R("Totals the payments in as 1,984.20", 5, number(paid_in / 100, 0.005), categories=(REASON,),
                wrong=f"Paid out {money(paid_out)}; paid in 1,920.00."),
          ]),
        T(prompt="So what should the closing balance be?",
          golden=(f"Closing balance = opening {money(OPENING)} + paid in {money(paid_in)} - paid out "
                  f"{money(paid_out)} = {money(closing)}."),
          steps=[traj.calc(f"{OPENING / 100:.2f} + {paid_in / 100:.2f} - {paid_out / 100:.2f}")],
          rubrics=[
              R("Gives the expected closing balance as 3,065.05", 5, number(closing / 100, 0.005), final=True,
                categories=(REASON,), wrong="It should be 3,056.05."),
              R("Starts from the opening balance of 2,450.00", 2, number(OPENING / 100, 0.001),
                categories=(REASON,)),
          ]),
        T(prompt="Does that match the closing balance printed on the statement? If not, what's the difference?",
          golden=(f"No. The statement prints a closing balance of {money(PRINTED_CLOSING)}, but the transactions "
                  f"give {money(closing)}: the printed figure is {money(closing - PRINTED_CLOSING)} lower (it looks "
                  f"like the digits 6 and 5 were transposed)."),
          steps=[traj.zoom(0, [("printed closing balance, bottom right", c.region("closing"))], scale=4),
                 traj.calc(f"{closing / 100:.2f} - {PRINTED_CLOSING / 100:.2f}")],
          rubrics=[
              R("Reads the printed closing balance as 3,056.05", 4, number(PRINTED_CLOSING / 100, 0.005),
                wrong="The printed balance is 3,065.05, so it matches."),
              R("Gives the difference as 9.00", 5, regex(r"(?<![\d.,])9(\.00?)?\b"), final=True,
                categories=(REASON,), wrong="They differ by 90.00."),
              R("States that the figures do not match", 3,
                has_any("does not match", "doesn't match", "not match", "mismatch", "discrepan", "no.", "no,")),
              R("Explains the discrepancy in a clear, helpful way", 1, None, categories=(STYLE,), subjective=True),
          ]),
    ]
    return assemble("pr-finance-ledger", CATEGORY, "finance", [c.png()], turns, scene="bank statement")
