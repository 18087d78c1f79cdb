"""The network tools of VisualToolBench: web_search, browser_get_page_text and historical_weather.

``make_network_tools(settings)`` builds the three LangChain tools over one record/replay cache. Every
failure (bad arguments, unreachable hosts, API errors, replay misses) comes back to the model as an error
ToolMessage (status="error"); nothing raises into the graph.
"""

from __future__ import annotations

from langchain_core.tools import BaseTool

from vtb_agents.tool_names import NETWORK_TOOL_NAMES
from vtb_agents.tools.guard import invalid_arguments
from vtb_agents.tools.network.cache import ToolCache, cache_key, compact_cassette, normalise_text, normalise_url
from vtb_agents.tools.network.http import NetworkSettings, ToolFailure, default_search_backend
from vtb_agents.tools.network.page_text import build_page_text
from vtb_agents.tools.network.weather import build_weather
from vtb_agents.tools.network.web_search import DDGSFactory, build_web_search



def make_network_tools(settings: NetworkSettings | None = None, *,
                       ddgs_factory: DDGSFactory | None = None) -> list[BaseTool]:
    """web_search, browser_get_page_text and historical_weather sharing ``settings`` and one cache.

    ``ddgs_factory(settings)`` builds the ddgs client (default: ``ddgs.DDGS(timeout=...)``); pass one to
    configure a proxy or to stand in for the library in tests.
    """
    settings = settings or NetworkSettings()
    cache = ToolCache(settings.cache_path, settings.mode)
    tools = [build_web_search(settings, cache, ddgs_factory), build_page_text(settings, cache),
             build_weather(settings, cache)]
    for tool in tools:
        tool.handle_tool_error = True  # ToolException -> error ToolMessage with the message as content
        tool.handle_validation_error = invalid_arguments
    return tools


__all__ = [
    "NETWORK_TOOL_NAMES", "DDGSFactory", "NetworkSettings", "ToolCache", "ToolFailure", "cache_key",
    "compact_cassette", "default_search_backend", "make_network_tools", "normalise_text", "normalise_url",
]
