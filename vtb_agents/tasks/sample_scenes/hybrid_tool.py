"""Hybrid Tool Reasoning: read small values with the vision tool, compute with the calculator."""

from __future__ import annotations

import math

from vtb_agents.tasks.sample_scenes.kit import (
    FOLLOW, GREY, INK, R, REASON, STYLE, T, TRUTH, VU, Canvas, SampleTask, Trajectory, assemble, grid, has_all,
    has_any, lacks, number, regex,
)

CATEGORY = "Hybrid Tool Reasoning"



# --- engineering: a resistor network on a drawing sheet ----------------------------------------

WIRE = (30, 50, 90)
V_SUPPLY, R1, R2, R3 = 12, 220, 330, 68


def _resistor(c: Canvas, start: tuple[int, int], end: tuple[int, int], teeth: int = 6, amp: int = 14) -> None:
    """A zigzag resistor between two points on a horizontal or vertical wire."""
    (x0, y0), (x1, y1) = start, end
    n = teeth * 2
    points = [start]
    for i in range(1, n):
        t = i / n
        x, y = x0 + (x1 - x0) * t, y0 + (y1 - y0) * t
        offset = amp if i % 2 else -amp
        points.append((x + offset, y) if x0 == x1 else (x, y + offset))
    points.append(end)
    c.draw.line(points, fill=WIRE, width=3, joint="curve")


def _wire(c: Canvas, *points: tuple[int, int]) -> None:
    c.draw.line(list(points), fill=WIRE, width=3)


def ht_engineering_circuit() -> SampleTask:
    c = Canvas(1600, 1200, (244, 246, 250))
    grid(c, (0, 0, 1600, 1200), 40, (228, 234, 244))
    _wire(c, (300, 585), (300, 400), (560, 400))
    _resistor(c, (560, 400), (760, 400))
    _wire(c, (760, 400), (1300, 400), (1300, 500))
    _wire(c, (1000, 400), (1000, 500))
    for x in (1000, 1300):
        _resistor(c, (x, 500), (x, 700))
        _wire(c, (x, 700), (x, 800))
    _wire(c, (1300, 800), (300, 800), (300, 605))
    c.draw.line((260, 585, 340, 585), fill=WIRE, width=4)
    c.draw.line((280, 605, 320, 605), fill=WIRE, width=7)
    for x, y in ((1000, 400), (1000, 800)):
        c.circle((x, y), 7, fill=WIRE)
    c.text((352, 562), "+", 14, WIRE)
    c.text((360, 584), "V1", 14, WIRE, mark="v")
    c.text((360, 604), f"{V_SUPPLY} V", 12, WIRE, mark="v")
    c.text((660, 350), "R3", 14, WIRE, anchor="mm", mark="r3")
    c.text((660, 370), f"{R3} ohm", 12, WIRE, anchor="mm", mark="r3")
    for x, name, value in ((1000, "R1", R1), (1300, "R2", R2)):
        c.text((x + 30, 588), name, 14, WIRE, mark=name.lower())
        c.text((x + 30, 608), f"{value} ohm", 12, WIRE, mark=name.lower())

    c.rect((1120, 1010, 1560, 1160), fill=(250, 251, 253), outline=WIRE, width=2)
    c.lines((1134, 1024), ["TITLE: PSU bias network", "DWG No. PSU-BIAS-03    REV B",
                           "SCALE: NTS    SHEET 1/1", "DRAWN: K. Ito    2024-11-05"], 11, WIRE, spacing=2.2)
    c.lines((60, 1060), ["NOTES:", "1. All resistors 1 %, 0.25 W.", "2. V1: bench supply, current limit 0.5 A."],
            11, WIRE)
    c.text((60, 60), "BIAS SUPPLY - SCHEMATIC", 28, WIRE)

    parallel = R1 * R2 / (R1 + R2)
    current = V_SUPPLY / (R3 + parallel)
    power = current**2 * R3
    traj = Trajectory()
    steps = [
        traj.zoom(0, [("battery V1", c.region("v")), ("resistor R3", c.region("r3")),
                      ("resistor R1", c.region("r1")), ("resistor R2", c.region("r2"))], scale=4),
        traj.calc(f"{V_SUPPLY} / ({R3} + ({R1} * {R2}) / ({R1} + {R2}))"),
        traj.calc(f"({current:g}^2) * {R3}"),
    ]
    turn = T(
        prompt=("For this circuit, what current does the battery deliver, and how much power is dissipated in "
                "R3? Say which values you read from the drawing."),
        golden=(f"Values on the drawing: V1 = {V_SUPPLY} V, R3 = {R3} ohm in series with R1 = {R1} ohm in "
                f"parallel with R2 = {R2} ohm. R1 || R2 = ({R1} x {R2}) / ({R1} + {R2}) = {parallel:g} ohm, so "
                f"the total resistance is {R3} + {parallel:g} = {R3 + parallel:g} ohm. The battery delivers "
                f"I = {V_SUPPLY} / {R3 + parallel:g} = {current:g} A ({current * 1000:g} mA), and R3 "
                f"dissipates P = I^2 x R3 = {current:g}^2 x {R3} = {power:.4f} W (about "
                f"{power * 1000:.0f} mW)."),
        images=[0], steps=steps,
        rubrics=[
            R("Reads the component values: V1 = 12 V, R1 = 220 ohm, R2 = 330 ohm, R3 = 68 ohm", 3,
              has_all("12", "220", "330", "68")),
            R("Combines R1 and R2 in parallel (132 ohm) and adds R3 in series (200 ohm in total)", 3,
              has_all("132", "200"), categories=(REASON,)),
            R("Gives the battery current as 0.06 A (60 mA)", 5, regex(r"0\.06\s*A\b|\b60\s*mA"), final=True,
              categories=(REASON,), wrong="I = 12 / 618 = 0.019 A (19 mA)."),
            R("Gives the power dissipated in R3 as about 0.245 W (245 mW)", 5,
              regex(r"0\.24[45]\d*\s*W|\b24[45](\.\d+)?\s*mW"), final=True, categories=(REASON,),
              wrong="P = I x R3 = 0.06 x 68 = 4.08 W."),
            R("Shows the working step by step in a readable way", 1, None, categories=(STYLE,), subjective=True),
        ],
    )
    return assemble("ht-engineering-circuit", CATEGORY, "engineering", [c.png()], [turn],
                    scene="circuit drawing")


# --- medical: dose volume from prescription, bottle and wristband ------------------------------

DOSE_MG_PER_KG, WEIGHT_KG, STRENGTH_MG, STRENGTH_ML = 15, 18.4, 250, 5


def ht_medical_dosage() -> SampleTask:
    c = Canvas(1400, 1050, (205, 215, 220))
    c.rect((60, 80, 1340, 990), fill=(236, 239, 241), radius=30)

    c.rect((100, 140, 520, 470), fill=(255, 255, 255), outline=(190, 195, 200), width=2)
    c.rect((100, 140, 520, 186), fill=(40, 100, 150))
    c.text((120, 163), "Rx  Paediatric prescription", 16, (255, 255, 255), anchor="lm")
    c.lines((120, 210), ["Patient: Maja Lindqvist", "Drug: Amoxicillin oral suspension"], 12, INK, spacing=1.9)
    c.text((120, 256), f"Dose: {DOSE_MG_PER_KG} mg/kg per dose", 11, INK, mark="dose")
    c.lines((120, 278), ["Frequency: every 8 hours for 7 days", "Prescriber: Dr A. Reyes"], 11, INK, spacing=2.0)
    c.draw.line((300, 430, 480, 422), fill=(40, 60, 120), width=2)

    c.rect((650, 190, 750, 240), fill=(250, 250, 250), radius=6)
    c.rect((665, 236, 735, 262), fill=(120, 70, 35))
    c.rect((600, 255, 800, 760), fill=(120, 70, 35), radius=18)
    c.rect((612, 380, 788, 620), fill=(252, 252, 248))
    c.text((700, 404), "AMOXICILLIN", 16, (150, 30, 40), anchor="mm")
    c.text((700, 432), "for oral suspension", 11, INK, anchor="mm")
    c.text((700, 462), f"{STRENGTH_MG} mg / {STRENGTH_ML} mL", 11, INK, anchor="mm", mark="conc")
    c.lines((630, 500), ["Volume after mixing: 100 mL", "Shake well before use", "Store in a refrigerator"], 10,
            GREY)

    c.rect((480, 840, 1000, 880), fill=(250, 250, 250), outline=(170, 170, 170))
    for i, x in enumerate(range(500, 900, 8)):
        c.draw.line((x, 840, x, 852 if i % 5 else 860), fill=(90, 90, 90))
    c.rect((1000, 848, 1120, 872), fill=(200, 60, 60))

    c.rect((1050, 600, 1330, 652), fill=(250, 244, 200), radius=10, mark="band")
    c.lines((1062, 608), ["LINDQVIST, Maja   MRN 0048213", f"DOB 2019-05-02   Wt {WEIGHT_KG} kg"], 10, INK,
            spacing=1.6)

    per_ml = STRENGTH_MG / STRENGTH_ML
    dose_mg = DOSE_MG_PER_KG * WEIGHT_KG
    volume = dose_mg / per_ml
    traj = Trajectory()
    steps = [
        traj.zoom(0, [("prescription dose line", c.region("dose")), ("bottle strength", c.region("conc"))], scale=4),
        traj.zoom(0, [("patient wristband", c.region("band", pad=6))], scale=4, enhance="sharpen"),
        traj.calc(f"{DOSE_MG_PER_KG} * {WEIGHT_KG} / ({STRENGTH_MG} / {STRENGTH_ML})"),
    ]
    turn = T(
        prompt=("How many mL of this suspension should the patient get per dose? Use the prescription, the "
                "bottle and the wristband."),
        golden=(f"Prescription: {DOSE_MG_PER_KG} mg/kg per dose. Wristband: weight {WEIGHT_KG} kg. Bottle: "
                f"{STRENGTH_MG} mg / {STRENGTH_ML} mL = {per_ml:g} mg/mL. Dose = {DOSE_MG_PER_KG} x {WEIGHT_KG} = "
                f"{dose_mg:g} mg, so the volume is {dose_mg:g} / {per_ml:g} = {volume:.2f} mL per dose "
                f"(every 8 hours)."),
        images=[0], steps=steps,
        rubrics=[
            R("Reads the patient's weight as 18.4 kg from the wristband", 4, number(WEIGHT_KG, 0.01),
              wrong="Weight 16.4 kg, so 15 x 16.4 = 246 mg, i.e. 4.92 mL."),
            R("Reads the strength as 250 mg / 5 mL (50 mg/mL)", 3,
              regex(r"(?i)250\s*mg\s*/\s*5\s*mL|\b50\s*mg\s*/\s*mL|\b50\s*mg\s+per\s+mL")),
            R("Gives the volume per dose as 5.52 mL", 5, number(round(volume, 2), 0.02), final=True,
              categories=(REASON,), wrong="Give about 4.6 mL per dose."),
            R("Expresses the answer as a volume in mL, not only as a mass in mg", 2, has_any("mL", "millilit"),
              critical=True, categories=(FOLLOW, TRUTH), wrong="The patient needs 276 mg per dose."),
            R("Computes the dose in mg (276 mg) before converting to a volume", 2, number(dose_mg, 0.5),
              categories=(REASON,)),
        ],
    )
    return assemble("ht-medical-dosage", CATEGORY, "medical", [c.png()], [turn], scene="medication tray")


# --- finance: CAGR from a stock chart with a tiny legend ---------------------------------------

ACM_START, ACM_END, XSF_START, XSF_END = 42.80, 67.15, 55.10, 61.90
WEEKS = 156
PLOT = (120, 110, 1520, 1010)
Y_MIN, Y_MAX = 30, 80


def _series(anchors: list[tuple[int, float]], wiggle: float, phase: float) -> list[float]:
    """Weekly values through ``anchors`` plus a wiggle that vanishes at both ends."""
    values = []
    for t in range(WEEKS + 1):
        for (t0, v0), (t1, v1) in zip(anchors, anchors[1:]):
            if t0 <= t <= t1:
                base = v0 + (v1 - v0) * (t - t0) / (t1 - t0)
                break
        wave = math.sin(t * 0.9 + phase) + 0.6 * math.sin(t * 2.3 + phase)
        values.append(base + wiggle * wave * math.sin(math.pi * t / WEEKS))
    return values


def _xy(t: int, value: float) -> tuple[float, float]:
    x0, y0, x1, y1 = PLOT
    return x0 + (x1 - x0) * t / WEEKS, y1 - (y1 - y0) * (value - Y_MIN) / (Y_MAX - Y_MIN)


def ht_finance_stockchart() -> SampleTask:
    c = Canvas(1600, 1200, (255, 255, 255))
    x0, y0, x1, y1 = PLOT
    c.text((x0, 40), "Weekly close, Jan 2021 - Jan 2024", 22, INK)
    c.text((x0, 74), "USD, not adjusted for dividends", 12, GREY)
    for v in range(Y_MIN, Y_MAX + 1, 10):
        _, y = _xy(0, v)
        c.draw.line((x0, y, x1, y), fill=(232, 232, 236))
        c.text((x0 - 10, y), str(v), 12, GREY, anchor="rm")
    for t, label in ((0, "Jan 2021"), (52, "Jan 2022"), (104, "Jan 2023"), (156, "Jan 2024")):
        x, _ = _xy(t, Y_MIN)
        c.draw.line((x, y0, x, y1), fill=(240, 240, 243))
        c.text((x, y1 + 12), label, 12, GREY, anchor="ma")
    c.rect(PLOT, outline=(200, 200, 205))

    blue, orange = (40, 90, 200), (235, 140, 40)
    acm = _series([(0, ACM_START), (20, 48), (45, 55), (60, 49), (80, 44), (100, 52), (120, 58), (140, 63),
                   (WEEKS, ACM_END)], 1.3, 0.0)
    xsf = _series([(0, XSF_START), (30, 58), (60, 52), (90, 56), (120, 60), (WEEKS, XSF_END)], 0.8, 1.7)
    for series, color, start_dy in ((xsf, orange, -22), (acm, blue, 10)):
        c.draw.line([_xy(t, v) for t, v in enumerate(series)], fill=color, width=3, joint="curve")
        sx, sy = _xy(0, series[0])
        ex, ey = _xy(WEEKS, series[-1])
        c.text((sx + 8, sy + start_dy), f"{series[0]:.2f}", 11, color, mark="start")
        c.text((ex - 8, ey - 22), f"{series[-1]:.2f}", 11, color, anchor="ra", mark="end")

    c.rect((1296, 930, 1510, 1000), fill=(255, 255, 255), outline=(200, 200, 205), mark="legend")
    for i, (color, name) in enumerate(((blue, "ACME Corp (ACM)"), (orange, "Sector ETF (XSF)"))):
        y = 950 + i * 28
        c.draw.line((1310, y, 1340, y), fill=color, width=3)
        c.text((1350, y), name, 11, INK, anchor="lm")
    c.text((x0, 1090), "Source: exchange closing prices. Past performance is no guide to future returns.", 10, GREY)

    cagr = (ACM_END / ACM_START) ** (1 / 3) - 1
    traj = Trajectory()
    steps = [
        traj.zoom(0, [("legend, bottom-right of the plot", c.region("legend")),
                      ("labels at the start of the lines", c.region("start")),
                      ("labels at the end of the lines", c.region("end"))], scale=3),
        traj.calc(f"(({ACM_END:.2f} / {ACM_START:.2f})^(1/3)) - 1"),
    ]
    turn = T(
        prompt=("Using the prices labelled at the start (Jan 2021) and the end (Jan 2024) of ACME's line, what "
                "was ACME's compound annual growth rate over those three years?"),
        golden=(f"By the legend ACME is the blue line. Its labels read {ACM_START:.2f} at the start (Jan 2021) "
                f"and {ACM_END:.2f} at the end (Jan 2024), three years apart. CAGR = ({ACM_END:.2f} / "
                f"{ACM_START:.2f})^(1/3) - 1 = {cagr:.4f}, i.e. about {cagr * 100:.1f}% per year."),
        images=[0], steps=steps,
        rubrics=[
            R("Reads ACME's start price as 42.80", 4, number(ACM_START, 0.005), wrong="ACME went from 55.10 to 67.15."),
            R("Reads ACME's end price as 67.15", 4, number(ACM_END, 0.005), wrong="ACME went from 42.80 to 61.90."),
            R("Gives the CAGR as about 16.2% per year", 5, regex(r"16\.[12]\d*\s*%|\b0\.16[12]\d*"), final=True,
              categories=(REASON,), wrong="CAGR = (61.90 / 55.10)^(1/3) - 1, about 3.9% per year."),
            R("Compounds over three years (exponent 1/3 or cube root)", 2,
              has_any("1/3", "three years", "3 years", "cube root"), categories=(REASON,)),
            R("Does not use the sector ETF's prices (55.10, 61.90) as ACME's", 3, lacks("55.10", "61.90"),
              categories=(VU, TRUTH)),
        ],
    )
    return assemble("ht-finance-stockchart", CATEGORY, "finance", [c.png()], [turn], scene="stock chart")
