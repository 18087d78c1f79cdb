"""``web_search``: a web search through ddgs (keyless), Tavily or SerpAPI, as compact JSON.

Tavily and SerpAPI are called with httpx directly (not tavily-python, which uses requests and its own
error classes) so that all three HTTP paths share one timeout, retry and error policy and one base URL
setting. ddgs queries public engines itself; it is retried on its own errors with the same backoff.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from vtb_agents.tools.network.cache import ToolCache, normalise_text, tool_errors
from vtb_agents.tools.network.http import NetworkSettings, ToolFailure, dump, error_text, request_json, with_retries

MAX_RESULTS = 10
SNIPPET_CHARS = 500


class DDGSLike(Protocol):
    """The part of ``ddgs.DDGS`` we use: ``text(query, **kwargs)`` returning dicts with title/href/body."""

    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]: ...


DDGSFactory = Callable[[NetworkSettings], DDGSLike]


class WebSearchArgs(BaseModel):
    query: str = Field(description="What to search for, as you would type it into a search engine.",
                       min_length=1)
    num_results: int = Field(default=5, ge=1, le=MAX_RESULTS, description="How many results to return (1-10).")


_DESCRIPTION = (
    "Search the web and get back a list of results, each with a title, URL and short snippet. Use it for "
    "facts you cannot read from the images or know reliably: prices, records, dates, specifications, "
    "recent events. Open a promising result with browser_get_page_text to read the full page."
)


def results_json(query: str, results: Iterable[Mapping[str, Any]], num_results: int) -> str:
    """The tool's result: ``{"query", "results": [{"title", "url", "snippet"}]}`` with at most num_results."""
    cleaned = []
    for item in results:
        url = str(item.get("url") or "").strip()
        if not url:
            continue
        snippet = " ".join(str(item.get("snippet") or "").split())
        cleaned.append({"title": " ".join(str(item.get("title") or "").split()), "url": url,
                        "snippet": snippet[:SNIPPET_CHARS]})
    return dump({"query": query, "results": cleaned[:num_results]})


_NO_DDGS = "web_search with the ddgs backend needs the 'ddgs' package: pip install 'vtb-agents[search]'"


def default_ddgs_factory(settings: NetworkSettings) -> DDGSLike:
    """A real ``ddgs.DDGS`` with the settings' timeout (ddgs is imported only when it is used)."""
    try:
        from ddgs import DDGS
    except ImportError:
        raise ToolFailure(_NO_DDGS) from None
    return DDGS(timeout=max(1, round(settings.timeout_s)))


def search_ddgs(settings: NetworkSettings, query: str, num_results: int, factory: DDGSFactory) -> str:
    """Search with ddgs; its "No results found." is an empty result list, other ddgs errors are failures."""
    try:
        from ddgs.exceptions import DDGSException
    except ImportError:
        raise ToolFailure(_NO_DDGS) from None

    def attempt() -> list[dict[str, Any]]:
        try:
            return factory(settings).text(query, max_results=num_results, region="us-en", safesearch="moderate")
        except DDGSException as exc:
            if str(exc) == "No results found.":
                return []
            raise

    try:
        raw = with_retries(settings, attempt, retryable=lambda exc: isinstance(exc, DDGSException),
                           what="ddgs search")
    except DDGSException as exc:
        raise ToolFailure(f"web search failed: {type(exc).__name__}: {exc}") from None
    items = ({"title": r.get("title"), "url": r.get("href"), "snippet": r.get("body")} for r in raw)
    return results_json(query, items, num_results)


def search_tavily(settings: NetworkSettings, query: str, num_results: int) -> str:
    """POST {tavily_url}/search with a bearer key; results carry title, url and content."""
    if not settings.tavily_api_key:
        raise ToolFailure("the Tavily search backend needs TAVILY_API_KEY")
    payload = {"query": query, "max_results": num_results, "search_depth": "basic", "topic": "general",
               "include_answer": False, "include_raw_content": False, "include_images": False}
    status, body = request_json(settings, "POST", settings.tavily_url.rstrip("/") + "/search", json=payload,
                                headers={"Authorization": f"Bearer {settings.tavily_api_key}"})
    if status != 200 or not isinstance(body, dict):
        reason = error_text(body, ("detail", "error"), ("detail",), ("error",)) or "no error message"
        raise ToolFailure(f"Tavily search failed (HTTP {status}): {reason}", deterministic=status == 400)
    items = ({"title": r.get("title"), "url": r.get("url"), "snippet": r.get("content")}
             for r in body.get("results") or [] if isinstance(r, dict))
    return results_json(query, items, num_results)


def search_serpapi(settings: NetworkSettings, query: str, num_results: int) -> str:
    """GET {serpapi_url}/search.json?engine=google; "no results" answers are an empty list, not an error."""
    if not settings.serpapi_api_key:
        raise ToolFailure("the SerpAPI search backend needs SERPAPI_API_KEY")
    params = {"engine": "google", "q": query, "num": num_results, "hl": "en", "gl": "us",
              "api_key": settings.serpapi_api_key}
    status, body = request_json(settings, "GET", settings.serpapi_url.rstrip("/") + "/search.json", params=params)
    if not isinstance(body, dict):
        raise ToolFailure(f"SerpAPI answered HTTP {status} without a JSON body")
    error = error_text(body, ("error",))
    empty = error_text(body, ("search_information", "organic_results_state")) == "Fully empty"
    if status == 200 and (error is None or empty or "hasn't returned any results" in error):
        items = ({"title": r.get("title"), "url": r.get("link"), "snippet": r.get("snippet")}
                 for r in body.get("organic_results") or [] if isinstance(r, dict))
        return results_json(query, items, num_results)
    raise ToolFailure(f"SerpAPI search failed (HTTP {status}): {error or 'no error message'}",
                      deterministic=status == 400)


def build_web_search(settings: NetworkSettings, cache: ToolCache, ddgs_factory: DDGSFactory | None = None) -> BaseTool:
    """The ``web_search`` tool over the configured backend, through the record/replay cache."""
    factory = ddgs_factory or default_ddgs_factory

    @tool_errors
    def web_search(query: str, num_results: int = 5) -> str:
        def live() -> str:
            if settings.search_backend == "tavily":
                return search_tavily(settings, query.strip(), num_results)
            if settings.search_backend == "serpapi":
                return search_serpapi(settings, query.strip(), num_results)
            return search_ddgs(settings, query.strip(), num_results, factory)

        return cache.run("web_search", {"query": normalise_text(query), "num_results": num_results}, live)

    return StructuredTool.from_function(web_search, name="web_search", description=_DESCRIPTION,
                                        args_schema=WebSearchArgs)
