"""Temporal Visual Reasoning: a new photo every turn; questions about change, motion and cause."""

from __future__ import annotations

import math
import re

from sample_scenes.kit import (
    GREY, INK, R, REASON, T, TRUTH, VU, Canvas, SampleTask, Trajectory, assemble, font, has_all, has_any, lacks,
    number, regex,
)

CATEGORY = "Temporal Visual Reasoning"



def reading(value: str, unit: str) -> str:
    """A regex for ``value`` followed by ``unit`` that does not match inside a longer number
    (``5 bar`` must not match ``1.5 bar``); a trailing ``.0`` is optional."""
    number_part = re.escape(value[:-2]) + r"(\.0+)?" if value.endswith(".0") else re.escape(value)
    return rf"(?<![\d.]){number_part}\s*{unit}"


# --- physics: a heated pressure vessel, photographed every five minutes ------------------------

GAUGE_CENTER, GAUGE_R, GAUGE_MAX, RED_FROM = (250, 210), 64, 10, 8
RIG_STATES = (  # pressure bar, temperature °C, heater on, camera time
    ("2.0", "21.5", False, "10:00:00"),
    ("3.5", "48.0", True, "10:05:00"),
    ("5.0", "74.5", True, "10:10:00"),
)


def _gauge_point(value: float, radius: float) -> tuple[float, float]:
    theta = math.radians(225 - 270 * value / GAUGE_MAX)
    cx, cy = GAUGE_CENTER
    return cx + radius * math.cos(theta), cy - radius * math.sin(theta)


def _gauge(c: Canvas, value: float) -> None:
    cx, cy = GAUGE_CENTER
    r = GAUGE_R
    c.circle(GAUGE_CENTER, r + 8, fill=(60, 64, 70), mark="gauge")
    c.circle(GAUGE_CENTER, r, fill=(250, 250, 248))
    arc_box = (cx - r + 6, cy - r + 6, cx + r - 6, cy + r - 6)
    c.draw.arc(arc_box, start=-(225 - 270 * RED_FROM / GAUGE_MAX), end=45, fill=(220, 40, 40), width=6)
    for i in range(GAUGE_MAX * 2 + 1):
        v = i / 2
        outer, inner = _gauge_point(v, r - 4), _gauge_point(v, r - (13 if i % 2 == 0 else 9))
        c.draw.line((*outer, *inner), fill=INK, width=2 if i % 2 == 0 else 1)
    c.draw.line((cx, cy, *_gauge_point(value, r - 12)), fill=(30, 30, 30), width=3)
    for v in range(0, GAUGE_MAX + 1, 2):  # numerals over the needle, haloed so they stay legible
        x, y = _gauge_point(v, r - 24)
        c.draw.text((x, y), str(v), font=font(10), fill=INK, anchor="mm", stroke_width=2,
                    stroke_fill=(250, 250, 248))
    c.text((cx, cy + 30), "bar", 10, GREY, anchor="mm")
    c.circle(GAUGE_CENTER, 5, fill=(30, 30, 30))


def _rig(pressure: str, temperature: str, heater: bool, clock: str) -> Canvas:
    c = Canvas(1400, 1050, (210, 214, 218))
    c.rect((0, 860, 1400, 1050), fill=(150, 150, 152))
    c.rect((420, 300, 900, 840), fill=(160, 170, 180), radius=40)
    c.rect((420, 420, 900, 440), fill=(140, 150, 160))
    c.rect((420, 700, 900, 720), fill=(140, 150, 160))
    c.rect((640, 240, 680, 300), fill=(120, 128, 136))
    c.circle((660, 232), 34, outline=(180, 40, 40), width=8)
    c.draw.line((420, 330, 330, 330, 330, 210, 320, 210), fill=(120, 128, 136), width=14)
    _gauge(c, float(pressure))
    c.text((560, 560), "VESSEL B-2", 30, (90, 96, 104), anchor="mm")
    c.text((560, 600), "MAX 10 bar", 16, (90, 96, 104), anchor="mm")

    c.draw.line((300, 900, 420, 800), fill=(40, 40, 40), width=4)
    c.draw.line((1250, 900, 880, 760), fill=(40, 40, 40), width=3)
    c.rect((80, 820, 300, 960), fill=(90, 95, 100), radius=8)
    c.circle((120, 870), 9, fill=(255, 90, 30) if heater else (60, 60, 62), mark="lamp")
    c.text((138, 870), "HEATER", 10, (230, 230, 230), anchor="lm", mark="lamp")
    c.text((100, 920), "CTRL-1", 12, (200, 200, 200))

    c.rect((1250, 930, 1262, 1000), fill=(80, 80, 84))
    c.rect((1160, 860, 1340, 932), fill=(20, 25, 20), radius=6, mark="display")
    c.text((1172, 868), "TEMP", 9, (150, 180, 150))
    c.text((1330, 910), f"{temperature} °C", 16, (80, 255, 120), anchor="rm")

    c.rect((1110, 16, 1384, 42), fill=(30, 30, 30))
    c.text((1120, 29), f"CAM 2   2024-06-03   {clock}", 11, (240, 240, 240), anchor="lm", mark="clock")
    return c


def te_physics_gauge() -> SampleTask:
    canvases = [_rig(*state) for state in RIG_STATES]
    (p0, t0, _, _), (p1, t1, _, _), (p2, t2, _, clock2) = RIG_STATES
    rate = (float(p2) - float(p0)) / 10
    minutes = (RED_FROM - float(p2)) / rate
    gauge, display, lamp = (canvases[0].region(n) for n in ("gauge", "display", "lamp"))
    traj = Trajectory()
    turns = [
        T(prompt=("This is our pressure-test rig at the start of a run. What do the pressure gauge and the "
                  "temperature display read right now?"),
          images=[0],
          golden=(f"The gauge at the top left reads {p0} bar and the temperature display at the bottom right "
                  f"shows {t0} °C. The HEATER lamp on the controller is off."),
          steps=[traj.zoom(0, [("pressure gauge", gauge), ("temperature display", display)], scale=4)],
          rubrics=[
              R("Reads the gauge as 2.0 bar", 5, regex(reading(p0, "bar")),
                wrong=f"The gauge reads 2.5 bar and the display {t0} °C."),
              R("Reads the temperature as 21.5 °C", 4, regex(reading(t0, "°?\\s*C")),
                wrong=f"The gauge reads {p0} bar and the display 27.5 °C."),
          ]),
        T(prompt="Same rig, five minutes later. What has changed, and what is the likely cause?",
          images=[1],
          golden=(f"The pressure has risen from {p0} to {p1} bar (+1.5 bar) and the temperature from {t0} °C to "
                  f"{t1} °C (+26.5 °C). The HEATER lamp, off in the first photo, is now lit: the heater was "
                  f"switched on, and heating the closed vessel is driving both readings up."),
          steps=[traj.zoom(1, [("pressure gauge", gauge), ("temperature display", display),
                               ("heater lamp", lamp)], scale=4),
                 traj.diff(0, 1)],
          rubrics=[
              R("Reads the new pressure as 3.5 bar", 5, regex(reading(p1, "bar")),
                wrong=f"Pressure rose to 4.0 bar and temperature to {t1} °C; the heater is on."),
              R("Reads the new temperature as 48.0 °C", 4, regex(reading(t1, "°?\\s*C")),
                wrong=f"Pressure {p1} bar and temperature 45.0 °C; the heater is on."),
              R("Attributes the rise to the heater having been switched on", 4, has_any("heater"),
                categories=(VU, REASON), final=True,
                wrong=f"Pressure {p1} bar and {t1} °C: probably a blocked relief valve."),
          ]),
        T(prompt=("Another five minutes on. If the pressure keeps rising at the same rate, how long until it "
                  "reaches the start of the red zone on the gauge, and at what time on the camera clock?"),
          images=[2],
          golden=(f"The gauge now reads {p2} bar (temperature {t2} °C). The pressure went {p0} -> {p1} -> {p2} "
                  f"bar, i.e. 1.5 bar every 5 minutes = {rate:g} bar/min. The red zone starts at {RED_FROM} bar, "
                  f"so ({RED_FROM} - {p2}) / {rate:g} = {minutes:g} minutes more: it would reach the red zone at "
                  f"about 10:20:00 on the camera clock (this photo is stamped {clock2})."),
          steps=[traj.zoom(2, [("pressure gauge", gauge), ("camera timestamp", canvases[2].region("clock"))],
                           scale=4),
                 traj.calc(f"({RED_FROM} - {p2}) / (({p2} - {p0}) / 10)")],
          rubrics=[
              R("Reads the current pressure as 5.0 bar", 4, regex(reading(p2, "bar")),
                wrong="It now reads 5.5 bar, so about 8 minutes, at 10:18."),
              R("Estimates about 10 minutes until the red zone", 5, regex(r"(?<![\d.])10\s*min"), final=True,
                categories=(REASON,), wrong="About 6 minutes, so around 10:16."),
              R("Gives the clock time as about 10:20", 4, has_any("10:20"), categories=(REASON,),
                wrong="About 10 minutes, at 10:30."),
              R("Identifies the red zone as starting at 8 bar", 2, regex(reading(f"{RED_FROM}.0", "bar"))),
          ]),
    ]
    return assemble("te-physics-gauge", CATEGORY, "physics", [cv.png() for cv in canvases], turns,
                    scene="pressure rig, three photos five minutes apart")


# --- medical: a bedside monitor over four days --------------------------------------------------

WARD_DAYS = (  # date, heart rate, SpO2, temperature, oxygen tag
    ("14 May", "112", "91", "38.9", "O2 2 L/min"),
    ("15 May", "104", "94", "38.2", "O2 2 L/min"),
    ("16 May", "92", "96", "37.4", "O2 OFF"),
    ("17 May", "84", "97", "36.9", "O2 OFF"),
)


def _ward(day: int) -> Canvas:
    date, hr, spo2, temp, oxygen = WARD_DAYS[day]
    c = Canvas(1600, 1200, (214, 226, 224))
    c.rect((0, 900, 1600, 1200), fill=(180, 170, 160))
    c.rect((280, 760, 1320, 800), fill=(150, 155, 160))
    for x in (300, 1280):
        c.rect((x, 800, x + 20, 940), fill=(120, 125, 130))
    c.rect((300, 640, 1300, 760), fill=(250, 250, 250), radius=20)
    c.rect((330, 600, 560, 660), fill=(240, 240, 244), radius=26)
    c.rect((600, 620, 1300, 720), fill=(90, 130, 190), radius=16)

    c.rect((60, 80, 420, 300), fill=(252, 252, 252), outline=(150, 150, 150), width=3)
    c.text((80, 100), f"Bed 12 · Day {day + 1}", 16, (30, 70, 140))
    c.lines((80, 140), [f"Date: {date}", "Nurse: P. Costa", "Diet: as tolerated"], 12, INK)

    c.rect((150, 380, 210, 470), fill=(230, 240, 235), outline=(60, 140, 90), width=3)
    c.circle((180, 410), 14, outline=(60, 140, 90), width=3)
    c.draw.line((180, 470, 220, 560, 330, 620), fill=(200, 220, 230), width=5)
    c.rect((130, 482, 240, 504), fill=(255, 255, 255), outline=(180, 180, 180), mark="o2")
    c.text((185, 493), oxygen, 10, INK, anchor="mm")

    c.rect((1380, 330, 1396, 420), fill=(120, 120, 125))
    c.rect((1220, 80, 1560, 330), fill=(50, 50, 55), radius=10)
    c.rect((1232, 92, 1548, 318), fill=(8, 12, 16), mark="monitor")
    rows = (("HR", hr, "bpm", (80, 230, 120)), ("SpO2", spo2, "%", (90, 200, 240)),
            ("TEMP", temp, "°C", (240, 220, 90)))
    for i, (label, value, unit, color) in enumerate(rows):
        y = 100 + i * 72
        c.text((1244, y), label, 10, (160, 160, 160))
        box = c.text((1244, y + 18), value, 14, color, mark=label.lower())
        c.text((box[2] + 4, y + 22), unit, 10, color, mark=label.lower())
        period = round(60 / int(hr) * 60) if label == "HR" else 50
        points = []
        for x in range(1330, 1540, 2):
            phase = (x - 1330) % period
            if label == "HR":
                bump = -22 if 8 <= phase < 12 else (8 if 12 <= phase < 15 else 0)
            else:
                bump = round(-10 * math.sin(math.pi * phase / period) ** 3)
            points.append((x, y + 30 + bump))
        c.draw.line(points, fill=color, width=2)
    return c


def te_medical_monitor() -> SampleTask:
    canvases = [_ward(day) for day in range(len(WARD_DAYS))]
    (_, hr0, sp0, t0, _), (_, hr1, sp1, t1, _), (_, _, sp2, _, _), (d3, _, _, t3, _) = WARD_DAYS
    monitor = canvases[0].region("monitor", pad=4)
    traj = Trajectory()
    turns = [
        T(prompt=("These photos show the same patient's bedside, one per day. Day 1: what are the heart rate, "
                  "SpO2 and temperature on the monitor?"),
          images=[0],
          golden=f"Day 1 (14 May): heart rate {hr0} bpm, SpO2 {sp0} %, temperature {t0} °C.",
          steps=[traj.zoom(0, [("bedside monitor, top right", monitor)], scale=3)],
          rubrics=[
              R("Reads the heart rate as 112 bpm", 4, regex(rf"\b{hr0}\b"),
                wrong=f"HR 121 bpm, SpO2 {sp0} %, temperature {t0} °C."),
              R("Reads the SpO2 as 91 %", 3, regex(rf"\b{sp0}\s*%")),
              R("Reads the temperature as 38.9 °C", 4, number(float(t0), 0.01),
                wrong=f"HR {hr0}, SpO2 {sp0} %, temperature 36.9 °C."),
          ]),
        T(prompt="Day 2. How have those three values changed since day 1?",
          images=[1],
          golden=(f"Day 2 (15 May): heart rate {hr1} bpm (down 8 from {hr0}), SpO2 {sp1} % (up 3 from {sp0} %), "
                  f"temperature {t1} °C (down 0.7 °C from {t0} °C). All three are improving, although the "
                  f"patient is still febrile."),
          steps=[traj.zoom(1, [("bedside monitor, top right", monitor)], scale=3),
                 traj.calc(f"{t0} - {t1}")],
          rubrics=[
              R("Reads the day-2 heart rate as 104 bpm", 4, regex(rf"\b{hr1}\b"),
                wrong=f"HR 114, SpO2 {sp1} %, temperature {t1} °C."),
              R("Reads the day-2 temperature as 38.2 °C", 4, number(float(t1), 0.01),
                wrong=f"HR {hr1}, SpO2 {sp1} %, temperature 38.8 °C."),
              R("States that the temperature fell by 0.7 °C", 3, regex(r"(?<![\d.])0\.7\b"), categories=(REASON,)),
              R("Describes the overall change as an improvement", 2, has_any("improv", "better", "right direction"),
                categories=(REASON,), subjective=True, implicit=True),
          ]),
        T(prompt="Day 3. Is the patient still on supplemental oxygen, and is the SpO2 acceptable?",
          images=[2],
          golden=(f"No: the tag on the oxygen flowmeter now reads \"O2 OFF\" (it read 2 L/min on days 1 and 2), "
                  f"so the patient is on room air. SpO2 is {sp2} %, which is acceptable (normal is about 95 to "
                  f"100 %)."),
          steps=[traj.diff(1, 2),
                 traj.zoom(2, [("tag on the oxygen flowmeter", canvases[2].region("o2", pad=6)),
                               ("SpO2 on the monitor", canvases[2].region("spo2", pad=8))], scale=4)],
          rubrics=[
              R("States that the oxygen has been switched off (patient on room air)", 5,
                has_any("off", "room air", "no longer"), final=True,
                wrong=f"Yes, the patient is still on 2 L/min of oxygen; SpO2 {sp2} %."),
              R("Reads the SpO2 as 96 %", 4, regex(rf"\b{sp2}\s*%"), wrong="Oxygen is off and SpO2 is 94 %."),
              R("Judges the SpO2 acceptable", 3, has_any("acceptable", "normal", "fine", "adequate"),
                categories=(REASON,)),
          ]),
        T(prompt="Day 4. Summarise the temperature trend over the four days and give the total change.",
          images=[3],
          golden=(f"Temperature by day: {', '.join(d[3] + ' °C' for d in WARD_DAYS)} (day 4, {d3}). It fell every "
                  f"day, from fever back to normal: a total drop of {float(t0) - float(t3):.1f} °C "
                  f"({t0} - {t3})."),
          steps=[traj.zoom(3, [("temperature on the monitor", canvases[3].region("temp", pad=8))], scale=4),
                 traj.calc(f"{t0} - {t3}")],
          rubrics=[
              R("Reads the day-4 temperature as 36.9 °C", 4, number(float(t3), 0.01),
                wrong="Day 4 is 37.9 °C, a drop of 1.0 °C."),
              R("Gives the total drop as 2.0 °C", 5, regex(r"(?<![\d.])2(\.0)?\s*(°\s*C|°|degrees|C\b)"), final=True,
                categories=(REASON,), wrong="A total drop of 1.5 °C over the 4 days."),
              R("Describes the trend as a steady fall", 3, has_any("fell", "falling", "decreas", "down", "dropp"),
                categories=(REASON,)),
              R("Lists the four daily temperatures", 2, has_all(*(d[3] for d in WARD_DAYS))),
          ]),
    ]
    return assemble("te-medical-monitor", CATEGORY, "medical", [cv.png() for cv in canvases], turns,
                    scene="bedside monitor, one photo per day")


# --- generalist: a delivery van on a live map ---------------------------------------------------

AVENUES = ("1st Ave", "2nd Ave", "3rd Ave", "4th Ave", "5th Ave", "6th Ave", "7th Ave")
STREETS = ("Ash St", "Birch St", "Cedar St", "Dune St", "Elm St")
BLOCK_M = 200


def _avenue_x(i: int) -> int:
    return 200 + 200 * i


def _street_y(j: int) -> int:
    return 200 + 180 * j


def _map(van_at: tuple[int, int], clock: str) -> Canvas:
    c = Canvas(1600, 1200, (238, 234, 224))
    c.draw.polygon([(0, 1000), (1600, 1040), (1600, 1110), (0, 1070)], fill=(170, 205, 230))
    c.rect((_avenue_x(3) + 12, _street_y(2) + 12, _avenue_x(4) - 12, _street_y(3) - 12), fill=(190, 220, 170))
    c.text(((_avenue_x(3) + _avenue_x(4)) // 2, (_street_y(2) + _street_y(3)) // 2), "Linden Park", 12,
           (70, 120, 60), anchor="mm")
    for width, color in ((20, (200, 196, 188)), (14, (255, 255, 255))):
        for i in range(len(AVENUES)):
            c.draw.line((_avenue_x(i), 120, _avenue_x(i), 1160), fill=color, width=width)
        for j in range(len(STREETS)):
            c.draw.line((120, _street_y(j), 1560, _street_y(j)), fill=color, width=width)
    for i, name in enumerate(AVENUES):
        c.text((_avenue_x(i), 100), name, 11, GREY, anchor="mm", mark=f"ave{i}")
    for j, name in enumerate(STREETS):
        c.text((110, _street_y(j)), name, 11, GREY, anchor="rm", mark=f"st{j}")

    def van(i: int, j: int, color: tuple[int, int, int], label: str, mark: str | None = None) -> None:
        x, y = _avenue_x(i), _street_y(j)
        c.rect((x - 12, y - 7, x + 12, y + 7), fill=color, outline=(40, 40, 40), radius=3, mark=mark)
        c.text((x + 16, y - 10), label, 10, INK, anchor="ls", mark=mark)

    van(4, 3, (60, 110, 200), "VAN 3")
    van(*van_at, (240, 130, 20), "VAN 7", mark="van")
    c.draw.polygon([(1530, 30), (1520, 60), (1540, 60)], fill=INK)
    c.text((1530, 72), "N", 12, INK, anchor="mt")
    c.draw.line((140, 1140, 340, 1140), fill=INK, width=3)
    c.text((240, 1150), f"{BLOCK_M} m", 10, INK, anchor="mt")
    c.rect((1380, 1122, 1580, 1178), fill=(255, 255, 255), outline=(200, 200, 200))
    c.text((1480, 1150), f"Live · {clock}", 12, INK, anchor="mm", mark="clock")
    return c


def te_generalist_map() -> SampleTask:
    start, end = (2, 1), (6, 1)
    before, after = _map(start, "14:02"), _map(end, "14:05")
    blocks, minutes = end[0] - start[0], 3
    speed = blocks * BLOCK_M / minutes * 60 / 1000
    traj = Trajectory()
    turns = [
        T(prompt=("This is the live map of our delivery fleet. Where is VAN 7 right now? Give the nearest "
                  "intersection."),
          images=[0],
          golden="VAN 7 (the orange van) is at the intersection of 3rd Ave and Birch St (map time 14:02).",
          steps=[traj.zoom(0, [("VAN 7", before.region("van", pad=12)),
                               ("avenue label above it", before.region(f"ave{start[0]}", pad=6)),
                               ("street label level with it", before.region(f"st{start[1]}", pad=6))], scale=4)],
          rubrics=[
              R("Places VAN 7 at 3rd Ave and Birch St", 5, has_all("3rd", "Birch"), final=True,
                wrong="It's at 4th Ave and Birch St."),
              R("Does not confuse VAN 7 with VAN 3 (5th Ave and Dune St)", 2, lacks("Dune", "5th"),
                categories=(VU, TRUTH)),
          ]),
        T(prompt=("Here is the map again a little later (check the clock). Which way did VAN 7 go, how far did "
                  "it travel, and roughly how fast, if a block is 200 m?"),
          images=[1],
          golden=(f"VAN 7 is now at 7th Ave and Birch St: it drove east along Birch St from 3rd Ave, {blocks} "
                  f"blocks = {blocks} x {BLOCK_M} m = {blocks * BLOCK_M} m. The clock moved from 14:02 to 14:05, "
                  f"{minutes} minutes, so its average speed was {blocks * BLOCK_M} m / {minutes} min, about "
                  f"{speed:g} km/h."),
          steps=[traj.diff(0, 1),
                 traj.zoom(1, [("VAN 7", after.region("van", pad=12)),
                               ("avenue label above it", after.region(f"ave{end[0]}", pad=6)),
                               ("map clock", after.region("clock", pad=6))], scale=4),
                 traj.calc(f"(({blocks} * {BLOCK_M}) / {minutes}) * 60 / 1000")],
          rubrics=[
              R("Says the van went east (along Birch St)", 5, has_any("east"), wrong="It drove north along 3rd Ave."),
              R("Gives the distance as 800 m (4 blocks)", 4, regex(r"\b800\s*m|\b0\.8\s*km"), categories=(REASON,),
                wrong="It went east 3 blocks, 600 m, in 3 minutes: 12 km/h."),
              R("Gives the speed as about 16 km/h", 5, regex(r"\b16\s*km"), final=True, categories=(REASON,),
                wrong="800 m in 6 minutes, so 8 km/h."),
              R("Uses the 3-minute interval shown by the map clock", 3, has_any("3 min", "three min"),
                categories=(VU, REASON)),
          ]),
    ]
    return assemble("te-generalist-map", CATEGORY, "generalist", [before.png(), after.png()], turns,
                    scene="live fleet map, two snapshots")
