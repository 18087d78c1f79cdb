"""Hybrid Tool Reasoning: read small values with the vision tool, then compute (calculator, Python
interpreter) and look things up (web search, web pages, historical weather)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vtb_agents.tasks.model import ToolStep
from sample_scenes.kit import (
    FOLLOW, GREY, INK, R, REASON, STYLE, T, TRUTH, VU, Canvas, Color, SampleTask, Trajectory, assemble, grid,
    has_all, has_any, lacks, number, person, regex, rng, stripes,
)

CATEGORY = "Hybrid Tool Reasoning"



# --- engineering: a resistor network on a drawing sheet ----------------------------------------

WIRE = (30, 50, 90)
V_SUPPLY, R1, R2, R3 = 12, 220, 330, 68


def _resistor(c: Canvas, start: tuple[int, int], end: tuple[int, int], teeth: int = 6, amp: int = 14) -> None:
    """A zigzag resistor between two points on a horizontal or vertical wire."""
    (x0, y0), (x1, y1) = start, end
    n = teeth * 2
    points: list[tuple[float, float]] = [start]
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


# =============================================================================================
# Tasks with the network tools. Their search results, web pages and weather are AUTHORED for the
# offline demo (fictional but plausible, example.org/.com/.net URLs): ``AUTHORED_WEB`` below is what
# stand-ins of the services answer when the generator records ``tools_cassette.jsonl`` with the real
# tools (see ``scripts/sample_suite.py``). Nothing here was recorded from live services.
# =============================================================================================

AUTHORED = {"cassette": "authored"}
"""Task metadata of every task whose reference trajectory calls a network tool."""


@dataclass(frozen=True)
class AuthoredWeb:
    """What the services behind the network tools answer in the sample suite (all authored).

    ``places``: Open-Meteo geocoding results by lower-case place name; ``days``: Open-Meteo archive
    daily values by (latitude, longitude, YYYY-MM-DD); ``searches``: search results
    (``title``, ``url``, ``snippet``) by the query as typed; ``pages``: HTML by URL.
    """

    places: Mapping[str, list[dict[str, Any]]]
    days: Mapping[tuple[float, float, str], dict[str, Any]]
    searches: Mapping[str, list[dict[str, str]]]
    pages: Mapping[str, str]


def _interpreter(lines: list[str]) -> ToolStep:
    """A python_interpreter step (self-contained: its own imports)."""
    return ToolStep(tool="python_interpreter", args={"code": "\n".join(lines) + "\n"})


def _search(query: str, num_results: int = 5) -> ToolStep:
    return ToolStep(tool="web_search", args={"query": query, "num_results": num_results})


def _page(url: str) -> ToolStep:
    return ToolStep(tool="browser_get_page_text", args={"url": url})


def _weather(location: str, date: str) -> ToolStep:
    return ToolStep(tool="historical_weather", args={"location": location, "date": date})


def _network_task(sample: SampleTask) -> SampleTask:
    sample.task.metadata.update(AUTHORED)
    return sample


def _page_html(title: str, heading: str, blocks: list[str], site: str) -> str:
    """A small article page with navigation and footer boilerplate (the tool keeps the main text)."""
    body = "\n".join(blocks)
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>\n'
            f"<style>body{{font-family:sans-serif}}</style></head><body>\n"
            f'<nav><a href="/">Home</a> | <a href="/products">Products</a> | <a href="/support">Support</a></nav>\n'
            f"<article><h1>{heading}</h1>\n{body}\n</article>\n"
            f"<footer>{site}. Fictional page authored for the vtb-agents sample suite.</footer>\n"
            f"</body></html>\n")


# --- sports: weather on race day, from a poster on a corkboard ---------------------------------

RACE_CITY, RACE_DATE = "Rotterdam", "2023-09-17"
ROTTERDAM: dict[str, Any] = {
             "id": 2747891, "name": "Rotterdam", "latitude": 51.9225, "longitude": 4.47917, "elevation": 0.0,
             "feature_code": "PPLA2", "country_code": "NL", "timezone": "Europe/Amsterdam", "population": 598199,
             "country": "Netherlands", "admin1": "South Holland"}
RACE_DAY = {"temperature_2m_max": 24.6, "temperature_2m_min": 14.1, "temperature_2m_mean": 18.9,
            "precipitation_sum": 3.2, "wind_speed_10m_max": 21.4, "weather_code": 61}
CORK: Color = (196, 160, 112)


def _pin(c: Canvas, x: int, y: int, color: Color) -> None:
    c.circle((x + 2, y + 3), 9, fill=(120, 95, 60))
    c.circle((x, y), 9, fill=color)
    c.circle((x - 3, y - 3), 3, fill=(255, 255, 255))


def ht_sports_race_weather() -> SampleTask:
    c = Canvas(1600, 1200, CORK)
    speckle = rng(17)
    for _ in range(900):
        x, y = int(speckle.random() * 1600), int(speckle.random() * 1200)
        shade = 150 + int(speckle.random() * 40)
        c.draw.point((x, y), fill=(shade, shade - 35, shade - 80))
    c.rect((0, 0, 1599, 1199), outline=(120, 85, 50), width=18)

    # the race poster
    c.rect((128, 98, 828, 1118), fill=(120, 95, 60))
    c.rect((120, 90, 820, 1110), fill=(250, 248, 240))
    navy, orange = (24, 44, 96), (240, 120, 40)
    c.rect((120, 90, 820, 300), fill=navy)
    c.text((470, 160), "MAASKADE 10K", 56, (255, 255, 255), anchor="mm")
    c.text((470, 230), "Run the river. Cross the bridges.", 22, (255, 210, 160), anchor="mm")
    c.rect((120, 640, 820, 760), fill=(120, 170, 210))
    for i, x in enumerate(range(140, 820, 60)):
        c.draw.line((x, 700 + 6 * (i % 2), x + 30, 700 + 6 * (i % 2)), fill=(220, 235, 245), width=2)
    c.draw.line((200, 640, 740, 640), fill=(60, 60, 70), width=10)
    c.draw.polygon([(400, 640), (430, 640), (470, 360), (458, 360)], fill=(235, 235, 240))
    for x in (220, 280, 340, 560, 620, 680, 740):
        c.draw.line((464, 368, x, 636), fill=(210, 210, 220), width=2)
    for x, shirt in ((250, orange), (330, (40, 150, 90)), (610, (200, 50, 60)), (690, orange)):
        person(c, (x, 630), 70, shirt)
    c.text((470, 812), "10 km  ·  5 km  ·  Kids' mile", 24, navy, anchor="mm")
    c.text((470, 862), "Flat, fast course along the river quays", 16, GREY, anchor="mm")
    c.rect((150, 950, 790, 1080), fill=(243, 240, 230))
    c.text((170, 966), "Sunday 17 September 2023  ·  Start 09:30", 12, INK, mark="when")
    c.text((170, 990), "Kop van Zuid, Rotterdam (NL)  ·  Chip timing", 12, INK, mark="when")
    c.text((170, 1024), "Registration closes 3 September 2023  ·  Entry EUR 24", 11, GREY, mark="when")
    c.text((170, 1046), "maaskade10k.example.org", 11, GREY)
    _pin(c, 470, 108, (200, 40, 40))

    # the runner's bib
    c.rect((948, 138, 1448, 458), fill=(120, 95, 60))
    c.rect((940, 130, 1440, 450), fill=(255, 255, 255))
    c.rect((940, 130, 1440, 186), fill=orange)
    c.text((1190, 158), "MAASKADE 10K  ·  2023", 20, (255, 255, 255), anchor="mm")
    c.text((1190, 300), "1187", 120, INK, anchor="mm")
    c.text((1190, 410), "WAVE B  ·  10 KM", 18, GREY, anchor="mm")
    for x, y in ((960, 150), (1420, 150), (960, 430), (1420, 430)):
        c.circle((x, y), 6, outline=(150, 150, 150), width=2)
    for x, y in ((1190, 124),):
        _pin(c, x, y, (40, 110, 200))

    # a flyer for another event
    c.rect((938, 568, 1488, 1068), fill=(120, 95, 60))
    c.rect((930, 560, 1480, 1060), fill=(214, 236, 246))
    c.text((1205, 640), "CANAL SWIM", 48, (20, 90, 140), anchor="mm")
    c.text((1205, 700), "1.5 km open water", 22, (20, 90, 140), anchor="mm")
    for row in range(3):
        y = 780 + row * 40
        c.draw.arc((980, y, 1430, y + 60), 200, 340, fill=(80, 150, 200), width=4)
    c.text((960, 990), "Saturday 5 August 2023  ·  Utrecht", 12, INK)
    c.text((960, 1014), "Wetsuits recommended", 11, GREY)
    _pin(c, 1205, 578, (230, 180, 30))

    day = RACE_DAY
    fahrenheit = {k: day[f"temperature_2m_{k}"] * 9 / 5 + 32 for k in ("max", "min", "mean")}
    traj = Trajectory()
    steps = [
        traj.zoom(0, [("small print at the bottom of the race poster", c.region("when", pad=8))], scale=3),
        _weather(RACE_CITY, RACE_DATE),
        _interpreter([
            f"# historical_weather, {RACE_CITY} {RACE_DATE}: daily temperatures in degrees C",
            f"temps_c = {{\"max\": {day['temperature_2m_max']}, \"min\": {day['temperature_2m_min']}, "
            f"\"mean\": {day['temperature_2m_mean']}}}",
            "for name, celsius in temps_c.items():",
            "    print(f\"{name}: {celsius} C = {celsius * 9 / 5 + 32:.1f} F\")",
        ]),
    ]
    turn = T(
        prompt=("I ran the race on this poster - that's my bib next to it. What was the highest temperature in "
                "the race city on race day, in °F, and did it rain that day?"),
        golden=(f"The poster's small print dates the race Sunday 17 September 2023 ({RACE_DATE}), start 09:30, "
                f"at Kop van Zuid, {RACE_CITY} (NL); 3 September was only the registration deadline. The "
                f"historical weather for {RACE_CITY} on {RACE_DATE}: maximum {day['temperature_2m_max']} °C, "
                f"minimum {day['temperature_2m_min']} °C, {day['precipitation_sum']} mm of precipitation, "
                f"weather type slight rain. Converting with °F = °C x 9/5 + 32, the highest temperature was "
                f"{day['temperature_2m_max']} x 9/5 + 32 = {fahrenheit['max']:.1f} °F (the low was "
                f"{fahrenheit['min']:.1f} °F). And yes, it rained that day: slight rain, "
                f"{day['precipitation_sum']} mm in total."),
        images=[0], steps=steps,
        rubrics=[
            R("Reads the race date from the poster's small print as 17 September 2023 (not the registration "
              "deadline)", 4, regex(r"2023-09-17|17 September 2023|September 17,? 2023"),
              wrong="The race was on 3 September 2023 in Rotterdam: the high was 21.0 °C (69.8 °F), no rain."),
            R("Identifies the race city as Rotterdam", 3, has_any("Rotterdam")),
            R("Gives the day's maximum temperature as 76.3 °F (24.6 °C)", 5, number(round(fahrenheit["max"], 1), 0.1),
              final=True, categories=(TRUTH, REASON), wrong="The highest temperature was 24.6 °F."),
            R("Says that it rained that day (slight rain, 3.2 mm)", 4, has_any("3.2 mm", "slight rain", "it rained"),
              final=True, categories=(TRUTH,), wrong="No, it stayed dry all day (0.0 mm)."),
            R("Converts Celsius to Fahrenheit with °F = °C x 9/5 + 32", 2, regex(r"9\s*/\s*5|1\.8"),
              categories=(REASON,)),
        ],
    )
    return _network_task(assemble("ht-sports-race-weather", CATEGORY, "sports", [c.png()], [turn],
                                  scene="race poster on a corkboard"))


# --- generalist: how many laptop charges a power station holds ---------------------------------

STATION_MODEL, STATION_WH, AC_EFFICIENCY, LAPTOP_WH = "PS-600X", 512, 0.85, 56
STATION_URL = "https://example.org/tornvik/ps-600x"
STATION_QUERY = "Tornvik PS-600X capacity"
TORNVIK = (60, 64, 70)


def ht_generalist_power_station() -> SampleTask:
    c = Canvas(1600, 1200, (226, 222, 214))
    c.rect((0, 0, 1600, 330), fill=(236, 233, 226))
    c.rect((1150, 60, 1450, 260), fill=(250, 250, 250), outline=(200, 195, 185), width=6)
    c.draw.polygon([(1170, 240), (1260, 140), (1330, 210), (1380, 170), (1430, 240)], fill=(120, 160, 120))
    stripes(c, (0, 330, 1600, 1200), [(176, 132, 92), (170, 126, 88), (182, 138, 96)], 41)

    # the power station
    c.rect((160, 420, 720, 930), fill=TORNVIK, radius=26)
    c.rect((250, 360, 630, 430), fill=(230, 120, 40), radius=18)
    c.rect((300, 380, 580, 430), fill=(176, 132, 92))
    c.text((440, 480), "TORNVIK", 40, (240, 240, 240), anchor="mm")
    c.rect((220, 530, 420, 650), fill=(30, 40, 45), radius=8)
    c.text((320, 572), "87%", 36, (120, 230, 160), anchor="mm")
    c.text((320, 620), "OUT 0 W", 14, (120, 230, 160), anchor="mm")
    c.rect((470, 530, 680, 650), fill=(230, 120, 40), radius=10)
    c.text((575, 575), "AC 600W", 30, (255, 255, 255), anchor="mm")
    c.text((575, 620), "pure sine wave", 13, (255, 255, 255), anchor="mm")
    for x in (230, 330):
        c.rect((x, 700, x + 80, 780), fill=(40, 44, 50), radius=8)
        c.rect((x + 22, 722, x + 30, 746), fill=(15, 15, 15))
        c.rect((x + 50, 722, x + 58, 746), fill=(15, 15, 15))
    for x in (470, 520, 570, 620):
        c.rect((x, 715, x + 30, 735), fill=(40, 44, 50), radius=4)
        c.rect((x, 755, x + 30, 771), fill=(40, 44, 50), radius=6)
    c.rect((450, 840, 700, 900), fill=(80, 84, 90), radius=4)
    c.text((462, 848), f"Model {STATION_MODEL}  ·  LiFePO4", 10, (200, 200, 205), mark="model")
    c.text((462, 866), "Input 100-240 V ~ 50/60 Hz", 10, (170, 170, 175))
    c.text((462, 882), "SN TV6X-2208-01934", 10, (170, 170, 175))

    # the laptop and its charger
    c.draw.polygon([(900, 560), (1420, 560), (1470, 900), (850, 900)], fill=(190, 192, 198))
    c.rect((930, 380, 1390, 560), fill=(60, 62, 70))
    c.rect((945, 392, 1375, 552), fill=(40, 80, 130))
    for row in range(4):
        y = 600 + row * 40
        inset = 10 * row
        for i in range(12):
            left = 930 - inset + i * (420 + 2 * inset) / 12
            c.rect((round(left), y, round(left + 28), y + 26), fill=(70, 72, 80), radius=3)
    c.rect((1080, 780, 1240, 870), fill=(176, 178, 186), radius=6)
    c.rect((1270, 830, 1420, 870), fill=(238, 238, 240), outline=(160, 160, 165))
    c.text((1276, 836), "Li-ion 15.4 V 3640 mAh", 8, INK, mark="battery")
    c.text((1276, 852), f"Battery {LAPTOP_WH} Wh  ·  rechargeable", 8, INK, mark="battery")
    c.rect((1000, 980, 1130, 1050), fill=(45, 45, 50), radius=10)
    c.text((1065, 1015), "USB-C 65W", 12, (200, 200, 200), anchor="mm")
    c.draw.line([(1130, 1015), (1250, 1000), (1330, 930), (1420, 900)], fill=(45, 45, 50), width=6)
    c.circle((820, 1040), 60, fill=(240, 240, 236))
    c.circle((820, 1040), 46, fill=(110, 70, 40))

    usable = STATION_WH * AC_EFFICIENCY
    charges = usable / LAPTOP_WH
    traj = Trajectory()
    steps = [
        traj.zoom(0, [("model plate on the power station", c.region("model", pad=8)),
                      ("battery sticker on the laptop", c.region("battery", pad=6))], scale=4),
        _search(STATION_QUERY),
        _page(STATION_URL),
        traj.calc(f"{STATION_WH} * {AC_EFFICIENCY} / {LAPTOP_WH}"),
    ]
    turn = T(
        prompt="How many times could this power station fully recharge the laptop's battery through its AC outlet?",
        golden=(f"The plate on the power station reads Model {STATION_MODEL} (Tornvik, LiFePO4), and the laptop's "
                f"battery sticker reads 15.4 V, 3640 mAh, {LAPTOP_WH} Wh. Tornvik's product page for the "
                f"{STATION_MODEL} gives a capacity of {STATION_WH} Wh and says about 85% of it is usable through "
                f"the AC inverter: {STATION_WH} x {AC_EFFICIENCY} = {usable:g} Wh. {usable:g} / {LAPTOP_WH} = "
                f"{charges:.2f}, so it can fully recharge the laptop about 7 times (7.8 charges' worth of "
                f"energy). The 600 W on the front is the AC output power, not the stored energy, and the older "
                f"PS-600 (420 Wh) is a different model."),
        images=[0], steps=steps,
        rubrics=[
            R("Reads the power station's model as PS-600X from the small plate", 4, has_any("PS-600X"),
              wrong="The Tornvik PS-600 stores 420 Wh: 420 x 0.85 / 56 = 6.4, so 6 full charges."),
            R("Reads the laptop battery as 56 Wh", 3, regex(r"\b56\s*Wh")),
            R("Uses the PS-600X's capacity of 512 Wh from the manufacturer's page", 4, regex(r"\b512\s*Wh"),
              categories=(TRUTH,), wrong="The front says 600 W, so 600 Wh x 0.85 / 56 Wh = 9.1: 9 full charges."),
            R("Gives about 7 full recharges (7.8 charges of energy)", 5,
              regex(r"\b7\.7\d*|\b7\.8\b|\b7\s+(full\s+)?(charges|recharges|times)"), final=True,
              categories=(REASON,), wrong="About 9 full charges (9.1)."),
            R("Accounts for the AC inverter's efficiency (about 85%, 435 Wh usable)", 2,
              has_any("85%", "85 %", "0.85", "435"), categories=(REASON,)),
        ],
    )
    return _network_task(assemble("ht-generalist-power-station", CATEGORY, "generalist", [c.png()], [turn],
                                  scene="desk with a power station and a laptop"))


STATION_SEARCH = [
    {"title": f"Tornvik {STATION_MODEL} Portable Power Station - Specifications | Tornvik Power",
     "url": STATION_URL,
     "snippet": (f"The {STATION_MODEL} pairs a LiFePO4 battery with a 600 W pure sine wave inverter. Full "
                 "specifications, charging times and usable capacity through the AC outlets.")},
    {"title": "Tornvik PS-600 (2019) review: a solid first power station",
     "url": "https://example.com/reviews/tornvik-ps-600",
     "snippet": ("The first-generation PS-600 holds 420 Wh in NMC cells, weighs 6.1 kg and was replaced in 2022 "
                 "by the LiFePO4-based PS-600X.")},
    {"title": "Tornvik PS-1200X Portable Power Station - Specifications | Tornvik Power",
     "url": "https://example.org/tornvik/ps-1200x",
     "snippet": "1,024 Wh LiFePO4 battery, 1,200 W AC output (2,400 W surge), 13.8 kg."},
    {"title": "Watt-hours or watts? Reading a power station's spec sheet",
     "url": "https://example.net/guides/wh-vs-w",
     "snippet": ("Watt-hours (Wh) measure how much energy a power station stores; watts (W) measure how fast it "
                 "can deliver it. Inverter losses mean you get less than the rated Wh from the AC outlets.")},
]
STATION_PAGE = _page_html(
    f"Tornvik {STATION_MODEL} Portable Power Station | Tornvik Power",
    f"Tornvik {STATION_MODEL} portable power station",
    [f"<p>Launched in March 2022, the {STATION_MODEL} replaces the PS-600 with a LiFePO4 battery rated for "
     "3,000 cycles to 80% of its original capacity.</p>",
     "<h2>Specifications</h2>",
     "<table><tr><th>Capacity</th><td>512 Wh (51.2 V, 10 Ah)</td></tr>"
     "<tr><th>Battery chemistry</th><td>LiFePO4</td></tr>"
     "<tr><th>AC output</th><td>600 W continuous, 1,200 W surge, pure sine wave</td></tr>"
     "<tr><th>USB-C output</th><td>2 x 100 W</td></tr>"
     "<tr><th>Weight</th><td>7.3 kg</td></tr></table>",
     "<h2>How much of the capacity can I use?</h2>",
     "<p>Through the AC outlets, about 85% of the rated capacity reaches your devices (about 435 Wh); the rest "
     "is lost in the inverter. The USB-C ports deliver about 90%.</p>",
     "<p>Recharging from a wall outlet takes 70 minutes to 80% and 95 minutes to full.</p>"],
    "Tornvik Power",
)


# --- biology: yeast doubling time from a notebook table ----------------------------------------

GROWTH_TIMES = (0, 60, 120, 180, 240)
OD_WT = (0.080, 0.126, 0.197, 0.309, 0.487)
OD_MUTANT = (0.080, 0.112, 0.154, 0.217, 0.299)
YEAST_QUERY = "doubling time wild-type Saccharomyces cerevisiae YPD 30 C"
YEAST_REFERENCE_MIN = 90
PENCIL: Color = (158, 158, 166)


def _doubling_minutes(ods: tuple[float, ...]) -> float:
    """Least-squares slope of log2(OD) against time, as the reference interpreter step computes it."""
    slope, _ = np.polyfit(np.array(GROWTH_TIMES, dtype=float), np.log2(np.array(ods)), 1)
    return float(1 / slope)


def ht_biology_growth_curve() -> SampleTask:
    c = Canvas(1600, 1200, (200, 206, 210))
    c.rect((1290, 120, 1500, 520), fill=(230, 236, 240), radius=30)
    c.rect((1330, 60, 1460, 140), fill=(230, 236, 240))
    c.rect((1300, 330, 1490, 510), fill=(232, 214, 150), radius=24)
    c.text((1395, 300), "YPD", 20, INK, anchor="mm")
    c.draw.line((1340, 700, 1520, 1050), fill=(90, 90, 100), width=14)
    c.draw.line((1520, 1050, 1540, 1090), fill=(200, 200, 205), width=4)

    c.rect((200, 70, 1230, 1140), fill=(250, 247, 232))
    for y in range(190, 1120, 34):
        c.draw.line((210, y, 1220, y), fill=(205, 220, 238))
    c.draw.line((300, 70, 300, 1140), fill=(235, 170, 170), width=2)
    c.text((330, 110), "Growth curves - YPD, 30 °C, 200 rpm", 30, (40, 60, 120))
    c.text((1200, 160), "12 Feb 2024", 14, (40, 60, 120), anchor="ra")
    c.text((330, 206), "Overnight cultures diluted to OD600 0.08 at t = 0, read every hour.", 16, INK)

    x_cols = (340, 520, 720)
    y0 = 290
    for x, title in zip(x_cols, ("t (min)", "OD600 A", "OD600 B")):
        c.text((x, y0), title, 12, PENCIL, mark="table")
    c.draw.line((330, y0 + 26, 880, y0 + 26), fill=PENCIL)
    for i, (t, a, b) in enumerate(zip(GROWTH_TIMES, OD_WT, OD_MUTANT)):
        y = y0 + 44 + i * 34
        for x, value in zip(x_cols, (str(t), f"{a:.3f}", f"{b:.3f}")):
            c.text((x, y), value, 12, PENCIL, mark="table")
    c.lines((330, 520), ["A = wild type (lab stock)", "B = yfg1 deletion, same medium"], 14, INK, spacing=1.7)

    # a rough sketch of the curves (no numbers on it)
    px0, py0, px1, py1 = 330, 640, 1150, 1080
    c.draw.line((px0, py1, px1, py1), fill=INK, width=2)
    c.draw.line((px0, py0, px0, py1), fill=INK, width=2)
    c.text((px1, py1 + 12), "time", 14, INK, anchor="ra")
    c.text((px0 + 10, py0), "OD600 (log)", 14, INK)
    for ods, color, label in ((OD_WT, (40, 90, 200), "A"), (OD_MUTANT, (200, 60, 60), "B")):
        points = [(px0 + (px1 - px0 - 60) * t / 240 + 20,
                   py1 - (py1 - py0 - 60) * (math.log2(od / 0.08) / math.log2(0.5 / 0.08)) - 10)
                  for t, od in zip(GROWTH_TIMES, ods)]
        c.draw.line(points, fill=color, width=3)
        for point in points:
            c.circle(point, 5, fill=color)
        c.text((points[-1][0] + 12, points[-1][1]), label, 18, color, anchor="lm")

    wt, mutant = _doubling_minutes(OD_WT), _doubling_minutes(OD_MUTANT)
    ratio = mutant / YEAST_REFERENCE_MIN
    traj = Trajectory()
    steps = [
        traj.zoom(0, [("pencil table of OD600 readings", c.region("table", pad=8))], scale=3, enhance="autocontrast"),
        _interpreter([
            "import numpy as np",
            "import pandas as pd",
            "",
            "# OD600 readings copied from the notebook table (YPD, 30 C)",
            f"df = pd.DataFrame({{\"t_min\": {list(GROWTH_TIMES)},",
            f"                   \"A\": {list(OD_WT)},",
            f"                   \"B\": {list(OD_MUTANT)}}})",
            "for strain in (\"A\", \"B\"):",
            "    slope, intercept = np.polyfit(df[\"t_min\"], np.log2(df[strain]), 1)",
            "    print(f\"strain {strain}: log2(OD600) slope {slope:.5f} per min, doubling time {1 / slope:.1f} min\")",
        ]),
        _search(YEAST_QUERY),
    ]
    turn = T(
        prompt=("From the OD600 readings in this notebook, what is strain B's doubling time, and how does it compare "
                "with the usual doubling time of wild-type budding yeast in YPD at 30 °C?"),
        golden=(f"Strain B's OD600 readings at 0, 60, 120, 180 and 240 min are "
                f"{', '.join(f'{v:.3f}' for v in OD_MUTANT)}. A least-squares fit of log2(OD600) against time "
                f"(exponential growth) gives a slope of {1 / mutant:.5f} per minute, i.e. a doubling time of "
                f"about {mutant:.1f} min (the wild-type control A doubles in about {wt:.1f} min). Wild-type "
                f"S. cerevisiae in YPD at 30 °C typically doubles about every {YEAST_REFERENCE_MIN} min, so "
                f"strain B is slower: about {mutant - YEAST_REFERENCE_MIN:.0f} min longer per doubling, "
                f"{ratio:.1f} times the usual doubling time."),
        images=[0], steps=steps,
        rubrics=[
            R("Reads strain B's OD600 values (0.112, 0.154, 0.217, 0.299)", 3,
              has_all(*(f"{v:.3f}" for v in OD_MUTANT[1:]))),
            R("Gives strain B's doubling time as about 126 min", 5, number(round(mutant, 1), 2.0), final=True,
              categories=(REASON,), wrong="Strain B doubles about every 92.2 min."),
            R("States the usual wild-type doubling time in YPD at 30 °C as about 90 min", 4,
              regex(r"\b90\s*min"), categories=(TRUTH,),
              wrong="Budding yeast usually doubles every 20 minutes, so strain B is 6 times slower."),
            R("Concludes that B grows slower: about 1.4 times the usual doubling time (about 36 min longer)", 4,
              regex(r"\b1\.4\d*\s*(times|x\b)|\b3[56]\s*min"), final=True, categories=(REASON,),
              wrong="Strain B grows at the usual wild-type rate."),
            R("Fits exponential growth on a log scale (log2 or ln of OD600 against time)", 2,
              has_any("log2", "ln(", "log scale", "logarithm"), categories=(REASON,)),
        ],
    )
    return _network_task(assemble("ht-biology-growth-curve", CATEGORY, "biology", [c.png()], [turn],
                                  scene="lab notebook with a growth table"))


YEAST_SEARCH = [
    {"title": "Yeast growth basics: doubling time of Saccharomyces cerevisiae | Yeast Lab Guide",
     "url": "https://example.org/yeast-lab-guide/growth",
     "snippet": ("Wild-type S. cerevisiae grown in rich YPD medium at 30 °C doubles about every 90 minutes in "
                 "exponential phase; in synthetic complete (SC) medium it is slower, about 140 minutes.")},
    {"title": "Measuring growth curves with OD600 - protocol",
     "url": "https://example.net/protocols/od600-growth-curve",
     "snippet": ("Keep readings between OD600 0.05 and 0.8, where absorbance is proportional to cell density, and "
                 "fit log2(OD600) against time to get the doubling time.")},
    {"title": "How fast do bacteria divide? E. coli doubling times",
     "url": "https://example.com/microbe-facts/e-coli-doubling",
     "snippet": "E. coli in LB broth at 37 °C doubles about every 20 minutes under ideal conditions."},
]


AUTHORED_WEB = AuthoredWeb(
    places={RACE_CITY.lower(): [ROTTERDAM]},
    days={(ROTTERDAM["latitude"], ROTTERDAM["longitude"], RACE_DATE): RACE_DAY},
    searches={STATION_QUERY: STATION_SEARCH, YEAST_QUERY: YEAST_SEARCH},
    pages={STATION_URL: STATION_PAGE},
)
"""Everything the network steps of the sample suite see: the source of ``tools_cassette.jsonl``."""
