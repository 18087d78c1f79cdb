"""web_search, browser_get_page_text and historical_weather against real local HTTP servers (tests/support/servers.py).

No mocks of our code paths: the tools speak HTTP to stand-ins of Open-Meteo, Tavily, SerpAPI and a web site.
ddgs calls public engines, so its client is replaced by a stand-in whose ``text()`` signature is checked
against the installed library.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ddgs
import ddgs.results
import pytest
from ddgs.exceptions import DDGSException, RatelimitException  # noqa: E402
from langchain_core.messages import ToolMessage  # noqa: E402
from langchain_core.tools import BaseTool  # noqa: E402

from support.servers import LocalServer, add_open_meteo, add_serpapi, add_tavily, add_web_site  # noqa: E402
from vtb_agents.tools.network import (  # noqa: E402
    NetworkSettings, cache_key, compact_cassette, default_search_backend, make_network_tools, normalise_text,
    normalise_url,
)

TAVILY_KEY = "tvly-test-key"
SERPAPI_KEY = "serp-secret-123"
BERLIN = {"id": 2950159, "name": "Berlin", "latitude": 52.52437, "longitude": 13.41053, "elevation": 74.0,
          "feature_code": "PPLC", "country_code": "DE", "admin1_id": 2950157, "timezone": "Europe/Berlin",
          "population": 3426354, "country_id": 2921044, "country": "Germany", "admin1": "Land Berlin"}
SPRINGFIELD_MO = {"id": 4409896, "name": "Springfield", "latitude": 37.21533, "longitude": -93.29824,
                  "country_code": "US", "timezone": "America/Chicago", "country": "United States",
                  "admin1": "Missouri", "admin2": "Greene"}
SPRINGFIELD_IL = {"id": 4250542, "name": "Springfield", "latitude": 39.80172, "longitude": -89.64371,
                  "country_code": "US", "timezone": "America/Chicago", "country": "United States",
                  "admin1": "Illinois", "admin2": "Sangamon"}
BERLIN_DAY = {"temperature_2m_max": 1.9, "temperature_2m_min": -4.2, "temperature_2m_mean": -1.3,
              "precipitation_sum": 2.4, "wind_speed_10m_max": 17.8, "weather_code": 71}
HITS = [{"title": f"Result {i}", "url": f"https://example.org/{i}", "content": f"Snippet  number\n{i}"}
        for i in range(8)]


@pytest.fixture
def servers() -> Iterator[dict[str, LocalServer]]:
    """Open-Meteo, Tavily, SerpAPI and a web site, each on its own port; no failed request checks allowed."""
    running = {name: LocalServer() for name in ("meteo", "tavily", "serpapi", "web")}
    add_open_meteo(running["meteo"], {"berlin": [BERLIN], "springfield": [SPRINGFIELD_MO, SPRINGFIELD_IL]}, {
        (52.52437, 13.41053, "2024-01-15"): BERLIN_DAY,
        (52.52437, 13.41053, "1941-03-02"): "Parameter 'start_date' is out of allowed range from 1940-01-01",
        (52.52437, 13.41053, "2024-06-01"): {},
        (39.80172, -89.64371, "2023-07-04"): {**BERLIN_DAY, "temperature_2m_max": 31.0, "weather_code": 2},
    })
    add_tavily(running["tavily"], TAVILY_KEY, HITS)
    add_serpapi(running["serpapi"], SERPAPI_KEY, HITS, empty_query="zzqx nothing")
    add_web_site(running["web"])
    for server in running.values():
        server.__enter__()
    yield running
    for server in running.values():
        server.stop()
    assert [e for s in running.values() for e in s.errors] == []


@pytest.fixture
def make_tools(servers: dict[str, LocalServer]) -> Callable[..., dict[str, BaseTool]]:
    """Build the tools against the local servers; keyword arguments override NetworkSettings fields."""
    def build(ddgs_factory: Any = None, **overrides: Any) -> dict[str, BaseTool]:
        fields: dict[str, Any] = {
            "search_backend": "tavily", "timeout_s": 2.0, "retries": 2, "backoff_s": 0.01, "allow_private_urls": True,
            "geocoding_url": servers["meteo"].url("/v1/search"), "archive_url": servers["meteo"].url("/v1/archive"),
            "tavily_url": servers["tavily"].url(""), "serpapi_url": servers["serpapi"].url(""),
            "tavily_api_key": TAVILY_KEY, "serpapi_api_key": SERPAPI_KEY,
        }
        fields.update(overrides)
        return {t.name: t for t in make_network_tools(NetworkSettings(**fields), ddgs_factory=ddgs_factory)}

    return build


def call(tool: BaseTool, **args: Any) -> ToolMessage:
    """Invoke a tool the way the graph's tool node does: with a tool_call dict, getting a ToolMessage."""
    message = tool.invoke({"type": "tool_call", "id": "call-1", "name": tool.name, "args": args})
    assert isinstance(message, ToolMessage)
    return message


def ok(tool: BaseTool, **args: Any) -> dict[str, Any]:
    message = call(tool, **args)
    assert message.status == "success", message.content
    return json.loads(message.content)


def error(tool: BaseTool, **args: Any) -> str:
    message = call(tool, **args)
    assert message.status == "error", message.content
    return json.loads(message.content)["error"]


# ---------------------------------------------------------------- historical_weather

def test_weather_reads_the_archive_for_the_geocoded_place(make_tools, servers) -> None:
    result = ok(make_tools()["historical_weather"], location="  Berlin ", date="2024-01-15")
    assert result["location"] == {"query": "Berlin", "name": "Berlin", "admin1": "Land Berlin", "country": "Germany",
                                  "country_code": "DE", "latitude": 52.52437, "longitude": 13.41053,
                                  "timezone": "Europe/Berlin"}
    assert result["date"] == "2024-01-15"
    assert result["temperature_2m_max"] == 1.9 and result["precipitation_sum"] == 2.4
    assert result["weather_code"] == 71 and result["weather"] == "slight snowfall"
    assert result["units"]["temperature_2m_mean"] == "°C" and result["units"]["wind_speed_10m_max"] == "km/h"
    (geo,) = servers["meteo"].requests_to("/v1/search")
    assert geo.param("name") == "Berlin" and geo.param("count") == "1"


def test_weather_uses_region_qualifiers_to_choose_among_places(make_tools) -> None:
    result = ok(make_tools()["historical_weather"], location="Springfield, Illinois", date="2023-07-04")
    assert result["location"]["admin1"] == "Illinois" and result["temperature_2m_max"] == 31.0
    assert result["weather"] == "partly cloudy"


@pytest.mark.parametrize(("location", "date", "expected"), [
    ("Berlin", "15/01/2024", "is not a valid date in the YYYY-MM-DD format"),
    ("Berlin", "2024-02-30", "is not a valid date in the YYYY-MM-DD format"),
    ("Berlin", (dt.date.today() + dt.timedelta(days=3)).isoformat(),
     "is in the future; historical weather covers past dates only"),
    ("Berlin", "1939-12-31", "is before 1940-01-01"),
    ("Atlantis", "2024-01-15", "no place named 'Atlantis' found"),
    ("Berlin", "1941-03-02", "weather archive failed (HTTP 400): Parameter 'start_date' is out of allowed range"),
    ("Berlin", "2024-06-01", "has no data for 2024-06-01 yet"),
    (" , ", "2024-01-15", "location is empty"),
])
def test_weather_errors_are_error_tool_messages(make_tools, location: str, date: str, expected: str) -> None:
    assert expected in error(make_tools()["historical_weather"], location=location, date=date)


def test_weather_reports_an_unreachable_api(make_tools) -> None:
    tools = make_tools(geocoding_url="http://127.0.0.1:9/v1/search", retries=1)
    assert "could not reach http://127.0.0.1:9/v1/search" in error(tools["historical_weather"],
                                                                   location="Berlin", date="2024-01-15")


# ---------------------------------------------------------------- browser_get_page_text

def test_page_text_extracts_the_article(make_tools, servers) -> None:
    result = ok(make_tools()["browser_get_page_text"], url=servers["web"].url("/article"))
    assert result["title"] == "The Tallest Tower"
    assert "330 metres tall" in result["text"] and "repainted every seven years" in result["text"]
    assert "do not show" not in result["text"] and "About us" not in result["text"]
    assert "truncated" not in result
    (request,) = servers["web"].requests_to("/article")
    assert request.headers["user-agent"].startswith("Mozilla/5.0")


def test_page_text_follows_redirects_and_reads_plain_text(make_tools, servers) -> None:
    tools = make_tools()
    result = ok(tools["browser_get_page_text"], url=servers["web"].url("/old"))
    assert result["url"] == servers["web"].url("/article") and result["requested_url"] == servers["web"].url("/old")
    assert "330 metres" in result["text"]
    assert ok(tools["browser_get_page_text"], url=servers["web"].url("/notes.txt"))["text"] == "line one\nline two"


def test_page_text_caps_long_pages_with_a_note(make_tools, servers) -> None:
    result = ok(make_tools(page_text_max_chars=1000)["browser_get_page_text"], url=servers["web"].url("/long"))
    assert len(result["text"]) == 1000 and result["truncated"] is True
    assert result["note"].startswith("text cut to its first 1000 of ")
    capped = ok(make_tools(max_download_bytes=3000)["browser_get_page_text"], url=servers["web"].url("/long"))
    assert capped["truncated"] is True and "of more than" in capped["note"] and len(capped["text"]) < 3000


def test_page_text_retries_a_server_error(make_tools, servers) -> None:
    assert "330 metres" in ok(make_tools()["browser_get_page_text"], url=servers["web"].url("/flaky"))["text"]
    assert len(servers["web"].requests_to("/flaky")) == 2


@pytest.mark.parametrize(("path", "expected"), [
    ("/gone", "answered HTTP 404 Not Found"),
    ("/image.png", "is an image (image/png), not a web page"),
    ("/paper.pdf", "is a PDF document"),
    ("/script-only", "no readable text found"),
])
def test_page_text_errors(make_tools, servers, path: str, expected: str) -> None:
    assert expected in error(make_tools()["browser_get_page_text"], url=servers["web"].url(path))


def test_page_text_times_out_and_refuses_bad_or_private_urls(make_tools, servers) -> None:
    tools = make_tools(timeout_s=0.3, retries=1)
    assert "did not answer within 0.3 s (2 attempts)" in error(tools["browser_get_page_text"],
                                                               url=servers["web"].url("/slow"))
    assert "not an http(s) URL" in error(tools["browser_get_page_text"], url="file:///etc/passwd")
    assert "not an http(s) URL" in error(tools["browser_get_page_text"], url="example.com/page")
    guarded = make_tools(allow_private_urls=False)
    refused = error(guarded["browser_get_page_text"], url=servers["web"].url("/article"))
    assert "not a public internet address" in refused
    assert "could not reach" in error(tools["browser_get_page_text"], url="http://127.0.0.1:9/")


# ---------------------------------------------------------------- web_search over HTTP APIs

def test_tavily_search(make_tools, servers) -> None:
    result = ok(make_tools()["web_search"], query=" eiffel tower height ", num_results=3)
    assert result == {"query": "eiffel tower height", "results": [
        {"title": f"Result {i}", "url": f"https://example.org/{i}", "snippet": f"Snippet number {i}"}
        for i in range(3)]}
    body = servers["tavily"].requests_to("/search")[0].json()
    assert body["query"] == "eiffel tower height" and body["max_results"] == 3


def test_tavily_errors(make_tools) -> None:
    assert "Tavily search failed (HTTP 401): Unauthorized" in error(
        make_tools(tavily_api_key="wrong")["web_search"], query="x")
    assert "needs TAVILY_API_KEY" in error(make_tools(tavily_api_key=None)["web_search"], query="x")
    assert "invalid arguments: num_results" in error(make_tools()["web_search"], query="x", num_results=11)


def test_serpapi_search(make_tools, servers) -> None:
    tools = make_tools(search_backend="serpapi")
    result = ok(tools["web_search"], query="eiffel tower", num_results=2)
    assert [r["url"] for r in result["results"]] == ["https://example.org/0", "https://example.org/1"]
    assert result["results"][1]["snippet"] == "Snippet number 1"
    (request,) = servers["serpapi"].requests_to("/search.json")
    assert request.param("engine") == "google" and request.param("q") == "eiffel tower"
    assert ok(tools["web_search"], query="zzqx nothing")["results"] == []
    message = error(make_tools(search_backend="serpapi", serpapi_api_key="wrong-key")["web_search"], query="x")
    assert "SerpAPI search failed (HTTP 401): Invalid API key" in message and "wrong-key" not in message


# ---------------------------------------------------------------- web_search over ddgs (stand-in client)

class StandInDDGS:
    """Answers like ``ddgs.DDGS``: ``text()`` returns TextResult dicts (title, href, body) or raises."""

    outcomes: list[Any] = []
    calls: list[dict[str, Any]] = []

    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
        StandInDDGS.calls.append({"query": query, **kwargs})
        outcome = StandInDDGS.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


@pytest.fixture
def stand_in_ddgs() -> type[StandInDDGS]:
    assert inspect.signature(StandInDDGS.text, eval_str=True) == inspect.signature(ddgs.DDGS.text, eval_str=True)
    assert [f.name for f in dataclasses.fields(ddgs.results.TextResult)] == ["title", "href", "body"]
    StandInDDGS.outcomes, StandInDDGS.calls = [], []
    return StandInDDGS


def test_ddgs_results_are_normalised_and_retried(make_tools, stand_in_ddgs) -> None:
    stand_in_ddgs.outcomes = [RatelimitException("202 Ratelimit"), [
        {"title": " Eiffel  Tower ", "href": "https://en.wikipedia.org/wiki/Eiffel_Tower", "body": "Wrought\n iron"},
        {"title": "no url", "href": "", "body": "dropped"},
        {"title": "Paris", "href": "https://paris.fr", "body": "x" * 900}]]
    tools = make_tools(search_backend="ddgs", ddgs_factory=lambda settings: stand_in_ddgs())
    result = ok(tools["web_search"], query="eiffel tower", num_results=2)
    assert result["results"][0] == {"title": "Eiffel Tower", "url": "https://en.wikipedia.org/wiki/Eiffel_Tower",
                                    "snippet": "Wrought iron"}
    assert result["results"][1]["url"] == "https://paris.fr" and len(result["results"][1]["snippet"]) == 500
    assert stand_in_ddgs.calls[-1] == {"query": "eiffel tower", "max_results": 2, "region": "us-en",
                                       "safesearch": "moderate"}
    stand_in_ddgs.outcomes = [DDGSException("No results found.")]
    assert ok(tools["web_search"], query="zzqx")["results"] == []
    stand_in_ddgs.outcomes = [DDGSException("all engines failed")] * 3
    assert "web search failed: DDGSException: all engines failed" in error(tools["web_search"], query="q")
    stand_in_ddgs.outcomes = [RuntimeError("library bug")]
    assert "web_search failed: RuntimeError: library bug" in error(tools["web_search"], query="q")


def test_ddgs_replays_from_a_cassette(make_tools, stand_in_ddgs, tmp_path: Path) -> None:
    cassette = tmp_path / "tools.jsonl"
    factory = lambda settings: stand_in_ddgs()  # noqa: E731
    stand_in_ddgs.outcomes = [[{"title": "T", "href": "https://t.example", "body": "B"}]]
    recorded = call(make_tools(search_backend="ddgs", ddgs_factory=factory, mode="record", cache_path=cassette)
                    ["web_search"], query="Tower  Height").content
    replay = make_tools(search_backend="ddgs", ddgs_factory=factory, mode="replay", cache_path=cassette)
    assert call(replay["web_search"], query="tower height ").content == recorded  # normalised key, no new call
    assert len(stand_in_ddgs.calls) == 1


# ---------------------------------------------------------------- record / replay

def test_record_then_replay_without_servers(make_tools, servers, tmp_path: Path) -> None:
    cassette = tmp_path / "run" / "tools.jsonl"
    record = make_tools(mode="record", cache_path=cassette, timeout_s=0.3, retries=0)
    page_url = servers["web"].url("/article")
    live = {
        "search": call(record["web_search"], query="Eiffel Tower", num_results=2).content,
        "page": call(record["browser_get_page_text"], url=page_url).content,
        "weather": call(record["historical_weather"], location="Berlin", date="2024-01-15").content,
    }
    unknown = error(record["historical_weather"], location="Atlantis", date="2024-01-15")  # deterministic: kept
    error(record["browser_get_page_text"], url=servers["web"].url("/slow"))  # transient: not kept
    lines = [json.loads(line) for line in cassette.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {"format": "vtb-tool-cassette", "version": 1} and len(lines) == 5
    assert {"tool": "historical_weather", "args": {"date": "2024-01-15", "location": "atlantis"},
            "error": unknown} in lines
    for server in servers.values():
        server.stop()

    fresh = tmp_path / "copy.jsonl"  # a path this process has not loaded: the replay reads the file
    fresh.write_bytes(cassette.read_bytes())
    replay = make_tools(mode="replay", cache_path=fresh)
    assert call(replay["web_search"], query="  eiffel   TOWER", num_results=2).content == live["search"]
    page_key = page_url.replace("http://127.0.0.1", "HTTP://127.0.0.1") + "#section"
    assert call(replay["browser_get_page_text"], url=page_key).content == live["page"]
    assert call(replay["historical_weather"], location="berlin", date="2024-01-15").content == live["weather"]
    assert error(replay["historical_weather"], location="Atlantis", date="2024-01-15") == unknown
    miss = error(replay["web_search"], query="Eiffel Tower", num_results=3)
    assert miss == (f'no recorded result for web_search({{"num_results":3,"query":"eiffel tower"}}) in {fresh}; '
                    "record it with --tools-mode record")
    assert "no recorded result for browser_get_page_text" in error(replay["browser_get_page_text"],
                                                                   url=servers["web"].url("/slow"))


def test_recording_is_thread_safe(make_tools, servers, tmp_path: Path) -> None:
    cassette = tmp_path / "tools.jsonl"
    tools = make_tools(mode="record", cache_path=cassette)
    queries = [f"question {i}" for i in range(16)] + ["same question"] * 8
    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(lambda q: call(tools["web_search"], query=q), queries))
    assert all(m.status == "success" for m in results)
    sent = [r.json()["query"] for r in servers["tavily"].requests_to("/search")]
    assert sorted(sent) == sorted(set(queries)) and sent.count("same question") == 1  # one fetch per key
    lines = [json.loads(line) for line in cassette.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 1 + 17
    servers["tavily"].stop()
    fresh = tmp_path / "copy.jsonl"
    fresh.write_bytes(cassette.read_bytes())
    replay = make_tools(mode="replay", cache_path=fresh)
    with ThreadPoolExecutor(max_workers=8) as pool:
        replayed = list(pool.map(lambda q: call(replay["web_search"], query=q).content, queries))
    assert replayed == [m.content for m in results]


def test_compacted_cassettes_are_byte_stable(tmp_path: Path) -> None:
    entries = [{"tool": "web_search", "args": {"query": f"q{i}", "num_results": 5}, "result": {"n": i}}
               for i in range(5)]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    stale = {**entries[2], "result": {"n": "old"}}
    second.write_text("".join(json.dumps(e) + "\n" for e in [stale, *reversed(entries)]), encoding="utf-8")
    assert compact_cassette(first) == compact_cassette(second) == 5
    assert first.read_bytes() == second.read_bytes()
    compact_cassette(first)
    assert first.read_bytes() == second.read_bytes()


def test_keys_settings_and_modes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert normalise_text("  Eiffel \n TOWER ") == "eiffel tower"
    assert normalise_url(" HTTPS://Example.COM:443/A?b=1#frag ") == "https://example.com/A?b=1"
    assert normalise_url("http://Example.com:8080") == "http://example.com:8080/"
    assert cache_key("t", {"b": 1, "a": "é"}) == 't({"a":"é","b":1})'
    with pytest.raises(ValueError, match="needs a cache_path"):
        NetworkSettings(mode="replay")
    with pytest.raises(ValueError, match="search backend"):
        NetworkSettings(search_backend="bing")  # type: ignore[arg-type]
    for name in ("VTB_SEARCH_BACKEND", "TAVILY_API_KEY", "SERPAPI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert default_search_backend() == "ddgs"
    monkeypatch.setenv("SERPAPI_API_KEY", "k")
    assert default_search_backend() == "serpapi"
    monkeypatch.setenv("TAVILY_API_KEY", "k")
    assert NetworkSettings().search_backend == "tavily" and "'k'" not in repr(NetworkSettings())
    monkeypatch.setenv("VTB_SEARCH_BACKEND", "DDGS")
    assert NetworkSettings().search_backend == "ddgs"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"tool": "web_search"\n', encoding="utf-8")
    tools = {t.name: t for t in make_network_tools(NetworkSettings(mode="replay", cache_path=bad))}
    assert f"{bad}:1: not a JSON line" in error(tools["web_search"], query="x")
    missing = {t.name: t for t in make_network_tools(NetworkSettings(mode="replay", cache_path=tmp_path / "no.jsonl"))}
    assert "(the file does not exist)" in error(missing["web_search"], query="x")
