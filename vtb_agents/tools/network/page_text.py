"""``browser_get_page_text``: download a web page and return its main text (trafilatura), capped in length."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import httpx
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from vtb_agents.tools.network.cache import ToolCache, normalise_url, tool_errors
from vtb_agents.tools.network.http import NetworkSettings, ToolFailure, client, dump, open_stream

_ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"
_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_TEXT_TYPES = {"application/json", "application/xml"}
_BLOCK_TAGS = ("p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
               "header", "footer", "table", "ul", "ol", "blockquote", "pre")
_ONLY_HTML = "this tool only reads the text of web pages"


class PageTextArgs(BaseModel):
    url: str = Field(description="Full address of the page, starting with http:// or https://.", min_length=1)


_DESCRIPTION = (
    "Open a web page and return its main readable text (navigation and boilerplate removed), with the "
    "page title and final URL after redirects. Long pages are cut to the first part. Works on HTML and "
    "plain-text pages, not on images or PDF files. Typically used on a URL found with web_search."
)


def check_url(url: str) -> str:
    """The URL stripped of spaces, if it is an absolute http(s) URL; a ToolFailure otherwise."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ToolFailure(f"not an http(s) URL: {url!r}; give a full address such as https://example.com/page")
    return url


def _content_kind(url: str, content_type: str, head: bytes) -> str:
    """'html' or 'text' for readable content; a deterministic ToolFailure naming what it is otherwise."""
    if content_type in _HTML_TYPES or (not content_type and head.lstrip()[:1] == b"<"):
        return "html"
    if content_type.startswith("text/") or content_type in _TEXT_TYPES:
        return "text"
    if content_type.startswith("image/"):
        raise ToolFailure(f"{url} is an image ({content_type}), not a web page; {_ONLY_HTML}", deterministic=True)
    if content_type == "application/pdf":
        raise ToolFailure(f"{url} is a PDF document (application/pdf); {_ONLY_HTML}", deterministic=True)
    shown = content_type or "unknown"
    raise ToolFailure(f"{url} is not a web page (content type {shown}); {_ONLY_HTML}", deterministic=True)


def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The body up to ``limit`` bytes, and whether it was cut there (the rest is never downloaded)."""
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def html_title_and_plain_text(html: bytes) -> tuple[str | None, str]:
    """The <title> and a plain text rendering of an HTML document (the fallback when trafilatura finds none)."""
    import lxml.etree
    import lxml.html

    try:
        tree = lxml.html.document_fromstring(html)
    except (lxml.etree.ParserError, ValueError):  # an empty or undecodable document has neither
        return None, ""
    title_node = tree.find(".//title")
    title = " ".join(title_node.text_content().split()) if title_node is not None else None
    for node in tree.xpath("//script|//style|//noscript|//template|//svg|//head"):
        node.drop_tree()
    for node in tree.iter(*_BLOCK_TAGS):
        node.tail = "\n" + (node.tail or "")
    lines = (re.sub(r"[ \t\r\f\v\xa0]+", " ", line).strip() for line in tree.text_content().splitlines())
    return title or None, "\n".join(line for line in lines if line)


def extract_text(html: bytes, url: str) -> tuple[str | None, str]:
    """Title and main text of an HTML page: trafilatura first, plain HTML-to-text when it finds nothing."""
    import trafilatura

    title, plain = html_title_and_plain_text(html)
    main = trafilatura.extract(html, url=url, include_comments=False, include_tables=True, favor_recall=True)
    return title, (main or "").strip() or plain


def fetch_page_text(settings: NetworkSettings, url: str) -> str:
    """Download ``url`` (redirects followed, size-capped) and return the tool's JSON result."""
    with client(settings, public_only=True) as http, \
            open_stream(settings, http, "GET", url, headers={"Accept": _ACCEPT}) as response:
        final_url = str(response.url)
        if response.status_code >= 400:
            reason = f" {response.reason_phrase}" if response.reason_phrase else ""
            raise ToolFailure(f"{final_url} answered HTTP {response.status_code}{reason}",
                              deterministic=response.status_code in (404, 410))
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        body, cut = _read_capped(response, settings.max_download_bytes)
        kind = _content_kind(final_url, content_type, body[:512])
        encoding = response.charset_encoding or "utf-8"
    if kind == "html":
        title, text = extract_text(body, final_url)
    else:
        title, text = None, body.decode(encoding, errors="replace").strip()
    if not text:
        raise ToolFailure(f"no readable text found at {final_url} (the page may be built by JavaScript)",
                          deterministic=True)
    payload: dict[str, Any] = {"url": final_url}
    if final_url != url:
        payload["requested_url"] = url
    if title:
        payload["title"] = title
    limit = settings.page_text_max_chars
    payload["text"] = text[:limit]
    if len(text) > limit or cut:
        payload["truncated"] = True
        total = f"{len(text)}" if not cut else f"more than {len(text)}"
        payload["note"] = f"text cut to its first {min(limit, len(text))} of {total} characters"
    return dump(payload)


def build_page_text(settings: NetworkSettings, cache: ToolCache) -> BaseTool:
    """The ``browser_get_page_text`` tool, through the record/replay cache."""
    @tool_errors
    def browser_get_page_text(url: str) -> str:
        checked = check_url(url)
        return cache.run("browser_get_page_text", {"url": normalise_url(checked)},
                         lambda: fetch_page_text(settings, checked))

    return StructuredTool.from_function(browser_get_page_text, name="browser_get_page_text",
                                        description=_DESCRIPTION, args_schema=PageTextArgs)
