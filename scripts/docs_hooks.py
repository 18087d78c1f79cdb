"""MkDocs hooks of the documentation site (``mkdocs.yml`` ``hooks:``): what the build makes from the code,
so that no picture or reference in the site can go stale.

- **Graphs**: a line ``<!-- vtb:graph KIND NAME -->`` in a page becomes a Mermaid diagram of that graph, drawn by
  LangGraph itself (``graph.get_graph(xray=1).draw_mermaid()``): ``category`` graphs (around ``react``),
  ``strategy`` turn graphs and the ``grading`` graph.
- **JSON shapes**: ``<!-- vtb:schema module:Class -->`` becomes the pydantic model's JSON Schema, folded.
- **Screenshots**: ``assets/screenshots/{report,task,compare}.png`` come from a ``make demo``-style run (and a
  second one without tools, for ``vtb compare``) made in a temporary folder, shot in headless Chromium
  (:mod:`vtb_agents.report.screenshot`). The runs and the shots go on in a thread while the pages are
  rendered (the API reference alone takes seconds); the build waits for them before it copies the files.
- **Docstrings' Sphinx roles** (``:func:`evaluate```) show as the plain name.
- **mermaid.js** for the diagrams is served from the site itself (``assets/mermaid.min.js``, fetched by
  ``make install`` from the npm registry), never from a CDN.

The CLI reference (``mkdocs-click``) reads ``scripts/docs_cli.py``, put on ``sys.path`` here.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

MERMAID_JS = Path(os.environ.get("VTB_MERMAID_JS", ROOT / ".venv" / "share" / "mermaid" / "mermaid.min.js"))
SCREENSHOTS = ("report", "task", "compare")
MARKER = re.compile(r"^([ \t]*)<!-- vtb:(graph|schema) ([^>]*?) -->$", re.M)
log = logging.getLogger("mkdocs.hooks.vtb")
_build_dir: tempfile.TemporaryDirectory[str] | None = None
_shooting: Future[dict[str, Path]] | None = None


def graph_mermaid(kind: str, name: str) -> str:
    """LangGraph's Mermaid text of one of the project's graphs: ``category NAME``, ``strategy NAME`` or
    ``grading grading``."""
    if kind == "category":
        from vtb_agents.graphs.categories import CATEGORIES, build_category_graph

        if name not in CATEGORIES:
            raise PluginError(f"vtb:graph category {name!r}: not one of {', '.join(CATEGORIES)}")
        graph: Any = build_category_graph(name)
    elif kind == "strategy":
        from vtb_agents.strategies.registry import load_strategy

        graph = load_strategy(name).build()
    elif kind == "grading":
        from vtb_agents.judges.graph import build_grading_graph

        graph = build_grading_graph()
    else:
        raise PluginError(f"vtb:graph {kind!r}: the kinds are category, strategy and grading")
    return str(graph.get_graph(xray=1).draw_mermaid())


def model_schema(spec: str) -> str:
    """The JSON Schema of the pydantic model ``module:Class``, indented."""
    module, _, attr = spec.partition(":")
    try:
        model = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"vtb:schema {spec!r}: {exc}") from exc
    return json.dumps(model.model_json_schema(), indent=2)


def expand_markers(markdown: str, page: str) -> str:
    """Replace the page's ``vtb:`` markers by what they name (see the module's docstring)."""
    def replace(match: re.Match[str]) -> str:
        indent, kind, args = match.group(1), match.group(2), match.group(3).split()
        if kind == "graph":
            if len(args) != 2:
                raise PluginError(f"{page}: <!-- vtb:graph KIND NAME --> takes two words, got {args}")
            block = f"```mermaid\n{graph_mermaid(*args)}```"
        else:
            if len(args) != 1:
                raise PluginError(f"{page}: <!-- vtb:schema module:Class --> takes one word, got {args}")
            body = model_schema(args[0]).replace("\n", "\n    ")
            block = f'??? info "JSON Schema of `{args[0]}`"\n\n    ```json\n    {body}\n    ```'
        return "\n".join(indent + line if line else line for line in block.split("\n"))
    return MARKER.sub(replace, markdown)


def _vtb(*args: str, cwd: Path) -> None:
    command = [sys.executable, "-m", "vtb_agents", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise PluginError(f"{' '.join(['vtb', *args])} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")


def shot_file(folder: Path, name: str) -> Path:
    """Where :func:`make_screenshots` writes the screenshot ``name`` (one of :data:`SCREENSHOTS`)."""
    return folder / f"{name}.png"


def make_screenshots(folder: Path) -> dict[str, Path]:
    """Run the sample suite offline as ``make demo`` does (and once more without tools), write ``vtb compare``'s
    page, and shoot the report, one task page and the comparison in Chromium; returns name -> PNG
    (:func:`shot_file`)."""
    from vtb_agents.report.screenshot import screenshot
    from vtb_agents.rundir.layout import task_page_file

    demo, no_tools = folder / "demo", folder / "demo-no-tools"
    common = ("run", "--tasks", "sample", "--model", "replay", "--judge", "rule")

    def shoot(name: str, page: Path) -> Path:
        return screenshot(page, shot_file(folder, name), 1280, 900, settle_ms=1500)

    with ThreadPoolExecutor(3) as pool:  # the two runs side by side; each shot as soon as its page is written
        runs = [pool.submit(_vtb, *common, "--out", demo.name, cwd=folder),  # relative: the pages show short names
                pool.submit(_vtb, *common, "--no-tools", "--out", no_tools.name, cwd=folder)]
        runs[0].result()
        shots = {"report": pool.submit(shoot, "report", demo / "report.html"),
                 "task": pool.submit(shoot, "task", task_page_file(demo, "rs-finance-invoice"))}
        runs[1].result()
        _vtb("compare", demo.name, no_tools.name, "--out", "compare.html", cwd=folder)  # relative: short names
        shots["compare"] = pool.submit(shoot, "compare", folder / "compare.html")
        return {name: shot.result() for name, shot in shots.items()}


def on_config(config: Any) -> Any:
    """Put scripts/ on ``sys.path`` for mkdocs-click's ``docs_cli`` (MkDocs restores the path after loading hooks)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    return config


def on_files(files: Files, config: Any) -> Files:
    """Add the generated files: mermaid.js and the screenshots, which a thread starts making now (the
    pages render meanwhile; :func:`on_env` waits for them)."""
    global _build_dir, _shooting
    if not MERMAID_JS.is_file():
        raise PluginError(f"{MERMAID_JS}: no mermaid.js for the diagrams; `make install` fetches it with npm "
                          "(or set VTB_MERMAID_JS to a mermaid.min.js of release 11)")
    files.append(File.generated(config, "assets/mermaid.min.js", abs_src_path=str(MERMAID_JS)))
    _finish_screenshots()  # a rebuild (mkdocs serve) after one that stopped early
    if _build_dir is not None:
        _build_dir.cleanup()
    _build_dir = tempfile.TemporaryDirectory(prefix="vtb-docs-")
    folder = Path(_build_dir.name)
    pool = ThreadPoolExecutor(1, thread_name_prefix="vtb-docs-screenshots")
    _shooting = pool.submit(make_screenshots, folder)
    pool.shutdown(wait=False)  # the thread ends with its one job
    for name in SCREENSHOTS:
        files.append(File.generated(config, f"assets/screenshots/{name}.png",
                                    abs_src_path=str(shot_file(folder, name))))
    return files


def _finish_screenshots() -> None:
    """Wait for the screenshots' thread, if one was started, raising what it raised."""
    global _shooting
    shooting, _shooting = _shooting, None
    if shooting is not None:
        shooting.result()


def on_env(env: Any, config: Any, files: Files) -> Any:
    """The pages are rendered: wait for the screenshots, which MkDocs copies with the static files next."""
    _finish_screenshots()
    return env


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Expand the ``vtb:`` markers of a page."""
    return expand_markers(markdown, page.file.src_uri)


ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):(<code>)~?")


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """Docstrings name objects with Sphinx roles (``:class:`Task```); the rendered text keeps the name only."""
    return ROLE.sub(r"\1", html)


def on_post_build(config: Any) -> None:
    """Remove the temporary run folder once the site is written."""
    global _build_dir
    if _build_dir is not None:
        _build_dir.cleanup()
        _build_dir = None


def on_shutdown() -> None:
    """Drop the temporary folder if the build stopped early (once its screenshots' thread has ended)."""
    if _shooting is not None:
        _shooting.exception()  # the build's own error is the one reported
    if _build_dir is not None:
        shutil.rmtree(_build_dir.name, ignore_errors=True)
