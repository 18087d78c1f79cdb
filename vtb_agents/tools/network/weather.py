"""``historical_weather``: the recorded weather of a place on a past date, from the Open-Meteo archive.

The reference harness returns *current* weather (VTB_FACTS.md flaw 2); this tool geocodes the place with
Open-Meteo's geocoding API and reads that day from its historical archive (ERA5 reanalysis, keyless).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from vtb_agents.tools.network.cache import ToolCache, normalise_text, tool_errors
from vtb_agents.tools.network.http import NetworkSettings, ToolFailure, dump, error_text, request_json

FIRST_DATE = dt.date(1940, 1, 1)
DAILY = ("temperature_2m_max", "temperature_2m_min", "temperature_2m_mean", "precipitation_sum",
         "wind_speed_10m_max", "weather_code")
WMO_CODES = {
    0: "clear sky", 1: "mainly clear", 2: "partly cloudy", 3: "overcast", 45: "fog", 48: "depositing rime fog",
    51: "light drizzle", 53: "moderate drizzle", 55: "dense drizzle", 56: "light freezing drizzle",
    57: "dense freezing drizzle", 61: "slight rain", 63: "moderate rain", 65: "heavy rain",
    66: "light freezing rain", 67: "heavy freezing rain", 71: "slight snowfall", 73: "moderate snowfall",
    75: "heavy snowfall", 77: "snow grains", 80: "slight rain showers", 81: "moderate rain showers",
    82: "violent rain showers", 85: "slight snow showers", 86: "heavy snow showers",
    95: "thunderstorm", 96: "thunderstorm with slight hail", 99: "thunderstorm with heavy hail",
}
_REGION_FIELDS = ("admin1", "admin2", "admin3", "admin4", "country", "country_code")
_PLACE_FIELDS = ("name", "admin1", "country", "country_code", "latitude", "longitude", "timezone")


class WeatherArgs(BaseModel):
    location: str = Field(description="Place name, e.g. 'Chicago' or 'Springfield, Illinois, US'.", min_length=1)
    date: str = Field(description="The day, as YYYY-MM-DD (a past date, 1940 or later).")


_DESCRIPTION = (
    "Look up the observed weather of a place on a past day: daily maximum, minimum and mean temperature "
    "(°C), total precipitation (mm), maximum wind speed (km/h) and the weather type. Data comes from a "
    "historical weather archive covering 1940 up to a few days ago; it cannot forecast."
)


def check_date(date: str, today: dt.date | None = None) -> str:
    """``date`` stripped, if it is a YYYY-MM-DD day from 1940 up to today (UTC); a ToolFailure otherwise."""
    text = date.strip()
    try:
        day = dt.date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        day = None
    if day is None:
        raise ToolFailure(f"date {date!r} is not a valid date in the YYYY-MM-DD format (e.g. 2024-03-15)")
    if day > (today or dt.datetime.now(dt.UTC).date()):
        raise ToolFailure(f"{text} is in the future; historical weather covers past dates only")
    if day < FIRST_DATE:
        raise ToolFailure(f"{text} is before {FIRST_DATE}; the weather archive starts on {FIRST_DATE}")
    return text


def describe_wmo(code: Any) -> str | None:
    """The plain-words meaning of a WMO weather interpretation code (Open-Meteo's ``weather_code``)."""
    if not isinstance(code, (int, float)):
        return None
    return WMO_CODES.get(int(code), f"unknown weather code {int(code)}")


def _api_error(what: str, status: int, body: Any) -> ToolFailure:
    reason = error_text(body, ("reason",), ("error",)) or "no error message"
    return ToolFailure(f"{what} failed (HTTP {status}): {reason}", deterministic=status == 400)


def geocode(settings: NetworkSettings, location: str) -> dict[str, Any]:
    """The best place for ``location``: 'Name, qualifier, ...' prefers a result whose region or country
    matches a qualifier (Open-Meteo searches names only); otherwise the first (most relevant) result."""
    parts = [part.strip() for part in location.split(",") if part.strip()]
    if not parts:
        raise ToolFailure("location is empty; give a place name such as 'Chicago'")
    name, *qualifiers = parts
    params = {"name": name, "count": 10 if qualifiers else 1, "language": "en", "format": "json"}
    status, body = request_json(settings, "GET", settings.geocoding_url, params=params)
    if status != 200 or not isinstance(body, dict):
        raise _api_error("place lookup", status, body)
    places = [p for p in body.get("results") or [] if isinstance(p, dict) and "latitude" in p and "longitude" in p]
    if not places:
        raise ToolFailure(f"no place named {name!r} found; try the nearest city's name", deterministic=True)
    wanted = {q.lower() for q in qualifiers}
    regions = [{str(p.get(k, "")).lower() for k in _REGION_FIELDS} for p in places]
    for matches in (wanted.issubset, wanted.intersection):  # every qualifier matches, else any of them
        for place, region in zip(places, regions, strict=True):
            if wanted and matches(region):
                return place
    return places[0]


def weather_on(settings: NetworkSettings, location: str, date: str) -> str:
    """Geocode ``location`` and read ``date`` from the archive; return the tool's JSON result."""
    place = geocode(settings, location)
    params = {"latitude": place["latitude"], "longitude": place["longitude"], "start_date": date,
              "end_date": date, "daily": ",".join(DAILY), "timezone": "auto"}
    status, body = request_json(settings, "GET", settings.archive_url, params=params)
    if status != 200 or not isinstance(body, dict):
        raise _api_error("weather archive", status, body)
    daily, units = body.get("daily") or {}, body.get("daily_units") or {}
    if date not in (daily.get("time") or []):
        raise ToolFailure(f"the weather archive returned no day {date} for {place.get('name')}")
    index = daily["time"].index(date)
    values = {name: (daily.get(name) or [None] * (index + 1))[index] for name in DAILY}
    if all(value is None for value in values.values()):
        raise ToolFailure(f"the weather archive has no data for {date} yet (it lags a few days behind today)")
    result: dict[str, Any] = {
        "location": {"query": location, **{k: place[k] for k in _PLACE_FIELDS if place.get(k) is not None}},
        "date": date,
        "weather": describe_wmo(values["weather_code"]),
        **values,
        "units": {name: units[name] for name in DAILY if name in units},
        "source": "Open-Meteo historical weather archive (ERA5 reanalysis)",
    }
    return dump(result)


def build_weather(settings: NetworkSettings, cache: ToolCache) -> BaseTool:
    """The ``historical_weather`` tool, through the record/replay cache."""
    @tool_errors
    def historical_weather(location: str, date: str) -> str:
        day = check_date(date)
        return cache.run("historical_weather", {"location": normalise_text(location), "date": day},
                         lambda: weather_on(settings, location.strip(), day))

    return StructuredTool.from_function(historical_weather, name="historical_weather", description=_DESCRIPTION,
                                        args_schema=WeatherArgs)
