"""Every code block of the docs (docs/**/*.md and README.md) is checked: bash blocks run as written (the real ``vtb``
of this checkout, offline, in a fresh folder per page), JSON and TOML blocks parse, ``text`` blocks are
illustrations (trees, schemas, output); a block another test runs names it (``<!-- run-by: tests/F.py::NAME -->``,
and that test reads the page), and a block that cannot run here (a real model, a server, files of your own) says
why (``<!-- not-runnable: REASON -->``)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.cli import checkout_env
from support.docs_blocks import ROOT, Block, code_blocks, doc_pages

CHECKED = {"bash", "json", "toml", "text"}  # python blocks are run by the test that owns them (run-by)
NEEDS_A_MODEL = ("openai:", "--model gpt", "--model o4", "--model llama", "--model claude")


def all_blocks() -> list[Block]:
    return [block for page in doc_pages() for block in code_blocks(page)]


def test_every_block_is_run_checked_or_says_why_not():
    problems = []
    for block in all_blocks():
        if block.mark == "not-runnable" and len(block.mark_text) < 10:
            problems.append(f"{block.where}: not-runnable needs a reason")
        elif block.mark == "run-by":
            problems.extend(run_by_problems(block))
        elif block.mark is None and block.lang not in CHECKED:
            problems.append(f"{block.where}: a ```{block.lang or '(no language)'} block that nothing runs: "
                            "mark it run-by or not-runnable, or give text blocks the language 'text'")
        elif block.mark is None and block.lang == "bash" and any(s in block.code for s in NEEDS_A_MODEL):
            problems.append(f"{block.where}: this block calls a real model: mark it not-runnable with a reason")
    assert problems == []


def run_by_problems(block: Block) -> list[str]:
    """A run-by mark names an existing test function whose file reads this block's page."""
    file, _, name = block.mark_text.partition("::")
    path = ROOT / file
    if not path.is_file():
        return [f"{block.where}: run-by names {file}, which does not exist"]
    source = path.read_text(encoding="utf-8")
    functions = {node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)}
    problems = [] if name in functions else [f"{block.where}: run-by names {name}, not a test in {file}"]
    if block.page not in source:
        problems.append(f"{block.where}: {file} never reads {block.page}")
    return problems


def test_the_marks_are_read_from_the_line_before_a_block(tmp_path):
    page = ROOT / "docs" / "_probe.md"  # a page of the docs tree, as the collector sees it
    page.write_text("text\n\n<!-- not-runnable: needs a real model to answer -->\n```bash\nvtb run\n```\n\n"
                    "```bash\nvtb models\n```\n\n    ```python\n    print(1)\n    ```\n", encoding="utf-8")
    try:
        first, second, third = code_blocks(page)
    finally:
        page.unlink()
    assert (first.mark, first.mark_text, first.code) == ("not-runnable", "needs a real model to answer", "vtb run\n")
    assert (second.mark, second.lang, second.line) == (None, "bash", 8)
    assert (third.lang, third.code) == ("python", "print(1)\n")  # indented (in a tab or admonition)


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.mark is None and b.lang in ("json", "toml")],
                         ids=lambda b: b.where)
def test_data_blocks_parse(block):
    if block.lang == "json":
        json.loads(block.code)
    else:
        tomllib.loads(block.code)


def bash_pages() -> list[str]:
    return sorted({b.page for b in all_blocks() if b.mark is None and b.lang == "bash"})


@pytest.mark.slow
@pytest.mark.parametrize("page", bash_pages())
def test_bash_blocks_run_as_written(page, tmp_path):
    """A page's runnable bash blocks run in order in one fresh folder, each with ``set -euo pipefail``, with the
    checkout's ``vtb`` first on PATH and no API keys (nothing reaches a network)."""
    env = checkout_env(tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    for key in [k for k in env if k.endswith("_API_KEY") or k.startswith(("LANGSMITH_", "LANGCHAIN_"))]:
        del env[key]
    for block in (b for b in code_blocks(ROOT / page) if b.mark is None and b.lang == "bash"):
        done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block.code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (f"{block.where} failed ({done.returncode}):\n{done.stdout[-2000:]}\n"
                                      f"{done.stderr[-3000:]}")


def test_the_code_cites_pages_of_the_site_not_readme_sections():
    """Docstrings, help texts and comments point at docs/ pages (which the site builds), each of which exists."""
    cited, stale = set(), []
    for path in [*sorted((ROOT / "vtb_agents").rglob("*.py")), *sorted((ROOT / "examples").rglob("*.py"))]:
        text = path.read_text(encoding="utf-8")
        cited |= {(path.relative_to(ROOT).as_posix(), page) for page in re.findall(r"docs/[\w/.-]+?\.md", text)}
        stale += [f"{path.relative_to(ROOT)}: {m}" for m in re.findall(r'README[ ,]+"?[A-Z][\w ]+', text)]
    assert stale == []
    assert len(cited) > 15 and [c for c in cited if not (ROOT / c[1]).is_file()] == []


def test_the_readme_is_short_and_links_every_page_of_the_site():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", readme))
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")} - {"docs/index.md"}
    assert linked == pages
