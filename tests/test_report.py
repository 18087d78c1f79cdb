"""The HTML report and run comparison, on run directories made by the real runner (replay model)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import write_task
from PIL import Image, ImageDraw
from rich.console import Console
from typer.testing import CliRunner

import vtb_agents
from vtb_agents.cli.report import report_cli
from vtb_agents.report import ReportError, compare_runs, write_comparison, write_report
from vtb_agents.report.markup import esc, pct
from vtb_agents.report.prepare import ReportPreparer
from vtb_agents.report.screenshot import find_chromium, screenshot
from vtb_agents.rundir.layout import task_page_file
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks

XSS = "<script>alert(1)</script>"
MAGENTA = (255, 0, 255)  # the test images' colour; the report's CSS and plots never use it


def magenta_task(root: Path, task_id: str, **overrides) -> None:
    """A ``write_task`` task whose image is magenta (with '42' in the corner), to find it in screenshots."""
    folder = write_task(root, task_id, **overrides)
    image = Image.new("RGB", (400, 300), MAGENTA)
    ImageDraw.Draw(image).text((360, 280), "42", fill="black")
    image.save(folder / "image_0.png")


@pytest.fixture(scope="module")
def report_tasks(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tasks")
    magenta_task(root, "t-pass")
    base = json.loads((root / "t-pass" / "task.json").read_text())["turns"][0]
    magenta_task(root, "t-xss", category="Hybrid Tool Reasoning", domain="medical", turns=[{
        **base, "prompt": "Is <b>this</b> bold?", "golden_answer": f"{XSS} The number is 42."}])
    unjudged = {"r1": {"description": "Explains the reading", "weight": 5}}
    magenta_task(root, "t-ungraded", domain="sports", turns=[{**base, "rubrics": unjudged}])
    return root


@pytest.fixture(scope="module")
def run_dir(report_tasks, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "replay-run"
    run_suite(load_tasks(report_tasks), RunConfig(model="replay", tasks=str(report_tasks)), out)
    return out


@pytest.fixture(scope="module")
def report(run_dir) -> str:
    return write_report(run_dir).read_text(encoding="utf-8")


def test_percentages_have_one_decimal_like_the_paper():
    assert (pct(0.1868), pct(0.5), pct(2 / 3), pct(0.0), pct(None)) == ("18.7%", "50.0%", "66.7%", "0.0%", "-")


def task_pages(run_dir: Path) -> dict[str, str]:
    """The text of every task page, by file name."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted((run_dir / "tasks").glob("*.html"))}


def test_report_shows_summary_numbers_and_every_task(run_dir, report):
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["tasks"] == 3 and summary["ungraded"] == 1
    # t-pass and t-xss meet their critical rubric (weight 5 of 5 judged: r2 has no check); t-ungraded is out
    assert "<b>100.0%</b><span>APR</span>" in report and "<b>100.0%</b><span>ARS</span>" in report
    assert "<td>region_switch</td><td>2</td><td>1</td><td>100.0%</td>" in report  # t-pass, t-ungraded
    assert "<td>hybrid_tool</td><td>1</td><td>1</td><td>100.0%</td>" in report  # t-xss
    assert "critical rubric(s) left unjudged" in report  # why the ungraded task is ungraded
    assert "<tr><td>strategy</td><td>react</td>" in report
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    settings = [json.loads(line)["episode"]["settings"] for line in lines]
    levels = {s["sandbox_isolation"] for s in settings}
    assert len(levels) == 1 and f"{levels.pop()} (3 episodes)" in report  # isolation from the episodes
    for key in ("sandbox_memory_cap", "sandbox_syscall_filter"):
        values = {s[key] for s in settings}
        assert len(values) == 1 and f"{esc(values.pop())} (3 episodes)" in report
    links = re.findall(r'<td><a href="(tasks/[^"]+)">([^<]+)</a></td>', report)
    assert [name for _, name in links] == ["t-pass", "t-ungraded", "t-xss"]  # one row per task, by id, linked
    ids = ("t-pass", "t-ungraded", "t-xss")
    assert [href for href, _ in links] == [task_page_file(Path(), task_id).as_posix() for task_id in ids]
    pages = task_pages(run_dir)
    assert sorted(pages) == sorted(Path(href).name for href, _ in links)
    prompt = "What number is printed in the bottom-right corner?"  # from the task source, on the task pages
    assert prompt not in report and sum(prompt in text for text in pages.values()) == 2
    assert report.count("<svg") == 2  # APR by category, image operations


def test_report_images_are_small_local_files(run_dir, report):
    pages = "".join(task_pages(run_dir).values())
    thumbs = re.findall(r'<a class="zoom" href="[^"]+"><img src="\.\./([^"]+)"', pages)
    fulls = re.findall(r'<a class="zoom" href="\.\./(report_files/[^"]+)"><img', pages)
    # per task: its image (under the prompt and in the first request) and the crop (the tool's, and in the
    # second request)
    assert len(thumbs) == 12 and len(fulls) == 12
    for rel in thumbs:
        with Image.open(run_dir / rel) as image:
            assert image.format == "JPEG" and max(image.size) <= 320
    assert all((run_dir / rel).stat().st_size > 0 for rel in fulls)
    overlays = re.findall(r'<div class="overlay"[^>]*><img src="\.\./([^"]+)"', pages)  # where it looked
    assert overlays and all(rel.startswith("report_files/full/") and (run_dir / rel).is_file() for rel in overlays)
    with Image.open(run_dir / fulls[0]) as original:
        assert original.size == (400, 300)  # full size, not a thumbnail
    assert "<img" not in report and "base64," not in pages and len(report) < 60_000


def test_report_fetches_nothing_from_the_network(run_dir, report):
    for text in (report, *task_pages(run_dir).values()):
        references = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']*)', text, re.I)
        references += re.findall(r"url\(\s*['\"]?([^'\")]*)", text, re.I)
        assert references  # the scan looks at something
        external = [r for r in references if re.match(r"\s*(https?:)?//", r, re.I)]
        assert external == []
        assert not re.search(r"<(link|iframe|object|embed)\b", text, re.I)
        assert re.findall(r"<script\b[^>]*>", text) == ["<script>"]  # our one inline script, no src
        assert "@import" not in text


def test_untrusted_text_is_escaped(run_dir, report):
    pages = task_pages(run_dir)
    assert all(XSS not in text for text in (report, *pages.values()))
    xss_page = pages[task_page_file(run_dir, "t-xss").name]
    # the golden answer, the answer, and the model's reply in the transcript
    assert xss_page.count("&lt;script&gt;alert(1)&lt;/script&gt; The number is 42.") == 3
    assert "Is &lt;b&gt;this&lt;/b&gt; bold?" in xss_page
    index = (run_dir / "report_files" / "search.js").read_text(encoding="utf-8")
    prefix = "window.vtbSearchIndex = "
    assert index.startswith(prefix)  # a script of one JSON value: the text is data, never markup
    searchable = json.loads(index[len(prefix):].rstrip().removesuffix(";"))
    assert "Is <b>this</b> bold?" in searchable[task_page_file(run_dir, "t-xss").stem]


def test_report_without_the_task_source_still_shows_the_run(run_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("report*", "tasks"))
    text = write_report(copy, tasks=[]).read_text()
    assert "3 task(s) of the run are not in the task source" in text
    assert text.count('<tr data-category="') == 3
    pages = task_pages(copy)
    # the transcript's images only: per task the image as sent, the tool's crop and the crop as sent
    assert len(pages) == 3 and sum(page.count("<img ") for page in pages.values()) == 9
    assert all('<div class="text prompt">' not in page for page in pages.values())


def test_missing_or_unfinished_run_dirs_are_clear_errors(run_dir, tmp_path):
    with pytest.raises(ReportError, match="no such run directory"):
        write_report(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="not a run directory"):
        write_report(tmp_path / "empty")
    unfinished = tmp_path / "unfinished"
    shutil.copytree(run_dir, unfinished)
    (unfinished / "summary.json").unlink()
    with pytest.raises(ReportError, match="incomplete run, no summary.json .*command again with --resume added"):
        write_report(unfinished)
    (unfinished / "summary.json").write_text((run_dir / "summary.json").read_text())
    with (unfinished / "results.jsonl").open("a") as handle:
        handle.write('{"task_id": "t-')
    with pytest.raises(ReportError, match="partial line"):
        write_report(unfinished)
    with pytest.raises(ReportError, match="task source .*no such file"):
        write_report(run_dir, tasks=str(tmp_path / "no-tasks"))


def test_compare_two_runs(run_dir, report_tasks, tmp_path):
    other = tmp_path / "no-tools-run"
    run_suite(load_tasks(report_tasks), RunConfig(model="replay", tasks=str(report_tasks), no_tools=True), other)
    comparison = compare_runs([run_dir, other])
    rows = {row.run: row for row in comparison.rows}
    assert set(rows) == {"replay-run", "no-tools-run"}
    assert rows["replay-run"].proactivity == 1.0 and rows["no-tools-run"].proactivity == 0.0
    assert "no tools" in rows["no-tools-run"].settings
    assert comparison.categories == ["region_switch", "hybrid_tool"]
    console = Console(record=True, width=100)
    console.print(comparison.to_rich())
    printed = console.export_text()
    assert "replay-run" in printed and "no-tools-run" in printed and "100.0%" in printed
    page = write_comparison([run_dir, other], tmp_path / "cmp" / "compare.html").read_text()
    assert page.count("<svg") == 2 and "APR against proactivity" in page and "APR against volume" in page
    assert "no-tools-run" in page


def test_cli_report_and_compare(run_dir, tmp_path):
    runner = CliRunner()
    result = runner.invoke(report_cli, ["report", str(run_dir)])
    assert result.exit_code == 0 and "report.html" in result.output
    result = runner.invoke(report_cli, ["report", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "no such run directory" in result.output
    result = runner.invoke(report_cli, ["compare", str(run_dir), str(run_dir), "--out", str(tmp_path / "c.html")])
    assert result.exit_code == 0 and (tmp_path / "c.html").exists()
    assert [c.name for c in report_cli.registered_commands] == ["report", "compare"]


def _magenta_pixels(png: Path) -> int:
    pixels = np.asarray(Image.open(png).convert("RGB")).astype(int)
    return int(((pixels[..., 0] > 200) & (pixels[..., 1] < 70) & (pixels[..., 2] > 200)).sum())


@pytest.mark.slow
@pytest.mark.browser
def test_task_page_renders_with_its_images_in_chromium(run_dir, report, tmp_path):
    if find_chromium() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Chromium is required in CI for the rendering test: apt-get install -y chromium")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    page = task_page_file(run_dir, "t-pass")
    shot = screenshot(page, tmp_path / "task.png", width=1400, height=1600)
    pixels = np.asarray(Image.open(shot).convert("L"))
    assert shot.stat().st_size > 20_000 and pixels.shape == (1600, 1400) and pixels.std() > 10  # not blank
    # Thumbnails (magenta) really loaded from report_files/: with the files gone, none shows.
    assert _magenta_pixels(shot) > 20_000
    shutil.move(run_dir / "report_files", tmp_path / "moved")
    try:
        assert _magenta_pixels(screenshot(page, tmp_path / "broken.png", width=1400, height=1600)) == 0
    finally:
        shutil.move(tmp_path / "moved", run_dir / "report_files")


def test_writing_a_report_imports_no_plotting_or_dataframe_library(run_dir):
    code = ("import sys; from vtb_agents.report import write_report, write_comparison; "
            f"write_report({str(run_dir)!r}); write_comparison([{str(run_dir)!r}], {str(run_dir / 'cmp.html')!r}); "
            "print(sorted(m for m in ('matplotlib', 'numpy', 'pandas') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(vtb_agents.__file__).parents[1])})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert (run_dir / "cmp.html").read_text().count("<svg") == 2


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_images_prepared_during_the_run_are_the_reports_images(report_tasks, tmp_path):
    tasks = load_tasks(report_tasks)
    out = tmp_path / "prepared"
    with ReportPreparer(out, tasks) as preparer:
        run_suite(tasks, RunConfig(model="replay", tasks=str(report_tasks)), out,
                  progress=lambda result, done, total: preparer.add(result))
    prepared = _files(out / "report_files")
    assert {name.split("/")[0] for name in prepared} == {"thumbs", "full"}  # made before the report
    write_report(out)
    images = _files(out / "report_files") - {"search.js"}
    assert images == prepared  # the report found every file it needed made
    pages = "".join(task_pages(out).values())
    assert {*re.findall(r'<img src="\.\./([^"]+)"', pages),
            *re.findall(r'<a class="zoom" href="\.\./(report_files/[^"]+)"><img', pages)} \
        == {f"report_files/{name}" for name in prepared}
    cold = tmp_path / "cold"
    shutil.copytree(out, cold, ignore=shutil.ignore_patterns("report*", "tasks"))
    write_report(cold)
    assert _files(cold / "report_files") - {"search.js"} == prepared  # the same files as without preparing
