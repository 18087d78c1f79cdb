"""`vtb annotate` in a real headless Chromium (Playwright, system chromium): clicks and keys become
labels on disk, a restart resumes at the first unlabelled rubric, and the labels come back in
`vtb analyze alignment`."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import write_task
from support.cli import start_vtb
from test_presets import ROOT, vtb

CHROMIUM = Path("/usr/bin/chromium")
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs the system chromium (make installs it)")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A replay run whose verdicts are all decided by checks: a r1 met, r2 met | b r1 not_met, r2 not_met."""
    root = tmp_path_factory.mktemp("annotate-tasks")
    for task_id, golden in (("a", "The number is 42."), ("b", "It is 47.")):
        task_file = write_task(root, task_id) / "task.json"
        data = json.loads(task_file.read_text())
        data["turns"][0]["golden_answer"] = golden
        data["turns"][0]["rubrics"]["r2"]["check"] = {"type": "contains_any", "values": ["number"]}
        if task_id == "b":
            data["turns"][0]["trajectory"] = []
        task_file.write_text(json.dumps(data))
    out = tmp_path_factory.mktemp("annotate-runs") / "run"
    done = vtb("run", "--tasks", str(root), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def start(run_dir: Path, labels: Path) -> tuple[subprocess.Popen[str], str]:
    """`vtb annotate` on a free port; returns the process and the page's URL (from its first line)."""
    proc = start_vtb("annotate", run_dir, "--labels", labels, "--port", "0", cwd=ROOT, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert " at http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line.split(" at ")[1].split()[0]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=90) == 0


def read_labels(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def key(task_id: str, rubric_id: str) -> str:
    return json.dumps([task_id, 1, rubric_id], separators=(",", ":"))


@pytest.mark.slow
@pytest.mark.browser
def test_labels_made_in_a_real_browser_reach_alignment(run_dir, tmp_path):
    labels = tmp_path / "labels.jsonl"
    requested: list[str] = []
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page()
        page.on("request", lambda request: requested.append(request.url))
        posts: list[dict[str, str]] = []
        page.on("request", lambda request: posts.append(request.headers) if request.method == "POST" else None)
        proc, url = start(run_dir, labels)
        try:
            page.goto(url)
            page.wait_for_selector(".rubric.current")
            assert page.text_content("#progress") == "0 / 4 labelled"
            assert page.get_attribute(".rubric.current", "data-key") == key("a", "r1")
            assert page.locator("#task-a img").count() >= 2  # the task's image and the crop its code saved
            assert "The number is 42." in page.text_content("#task-a .answer")
            page.keyboard.press("m")  # a/r1 met: the key labels the current rubric and moves on
            page.wait_for_function("document.querySelector('#progress').textContent.startsWith('1 /')")
            assert page.get_attribute(".rubric.current", "data-key") == key("a", "r2")
            row = page.locator(f'.rubric[data-key=\'{key("a", "r2")}\']')
            row.locator('button[data-label="not_met"]').click()  # a/r2: the human disagrees with the judge
            page.wait_for_function("document.querySelector('#progress').textContent.startsWith('2 /')")
            row.locator("textarea").fill("says 'number' but no full sentence")
            page.keyboard.press("Escape")
            row.locator('button[data-label="not_met"]').click()  # re-saving keeps one line, now with the note
            page.wait_for_function("document.querySelector('#status').textContent === 'saved'")
        finally:
            stop(proc)
        on_disk = read_labels(labels)
        assert on_disk == [
            {"task_id": "a", "turn": 1, "rubric_id": "r1", "label": "met", "note": ""},
            {"task_id": "a", "turn": 1, "rubric_id": "r2", "label": "not_met",
             "note": "says 'number' but no full sentence"},
        ]
        proc, url = start(run_dir, labels)  # a restart resumes where the person stopped
        try:
            page.goto(url)
            page.wait_for_selector(".rubric.current")
            assert page.text_content("#progress") == "2 / 4 labelled"
            assert page.get_attribute(".rubric.current", "data-key") == key("b", "r1")
            assert page.get_attribute(f'.rubric[data-key=\'{key("a", "r2")}\']', "data-label") == "not_met"
            page.keyboard.press("n")
            page.wait_for_function("document.querySelector('#progress').textContent.startsWith('3 /')")
            page.keyboard.press("n")
            page.wait_for_function("document.querySelector('#progress').textContent.startsWith('4 /')")
        finally:
            stop(proc)
        browser.close()
    assert requested and all(u.startswith("http://127.0.0.1:") for u in requested)  # no external assets
    # every save carried the page's session token (the server refuses writes without it)
    assert len(posts) >= 5 and all(len(h.get("x-vtb-token", "")) >= 32 for h in posts)
    assert [row["label"] for row in read_labels(labels)] == ["met", "not_met", "not_met", "not_met"]
    done = vtb("analyze", "alignment", str(run_dir), "--labels", str(labels), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["n"] == 4 and report["agreement"] == 0.75
    assert report["confusion"] == {"met": {"met": 1, "not_met": 0}, "not_met": {"met": 1, "not_met": 2}}
    assert [(d["task_id"], d["rubric_id"]) for d in report["disagreements"]] == [("a", "r2")]


def test_annotate_refuses_a_missing_run_and_bad_labels(run_dir, tmp_path):
    done = vtb("annotate", str(tmp_path / "nope"), "--port", "0")
    assert done.returncode == 2 and "no such run directory" in done.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "a", "rubric_id": "r1", "label": "maybe"}\n')
    done = vtb("annotate", str(run_dir), "--labels", str(bad), "--port", "0")
    assert done.returncode == 2 and "line 1" in done.stderr and "'label'" in done.stderr


def request(url: str, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One request the way a browser sends it, with exactly the given headers (``Host`` included)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in {"Host": parts.netloc, **(headers or {})}.items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def page_token(url: str) -> str:
    status, page = request(url, "GET", "/")
    assert status == 200
    return page.decode().split('name="vtb-token" content="')[1].split('"')[0]


LABEL = json.dumps({"task_id": "a", "turn": 1, "rubric_id": "r1", "label": "not_met", "note": "forged"}).encode()


def test_a_foreign_page_cannot_write_labels_nor_read_the_run(run_dir, tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"task_id": "a", "turn": 1, "rubric_id": "r1", "label": "met", "note": ""}\n')
    before = labels.read_bytes()
    proc, url = start(run_dir, labels)
    try:
        own = url.rstrip("/").removeprefix("http://")
        # a "simple" cross-origin request: browsers send it without a preflight
        status, _ = request(url, "POST", "/api/label", LABEL,
                            {"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"})
        assert status == 415
        token = page_token(url)
        refused = [  # each one rule broken, the others kept
            ({"Content-Type": "application/json", "Origin": "http://evil.example", "X-VTB-Token": token}, 403),
            ({"Content-Type": "application/json", "Origin": f"http://{own}"}, 403),  # no token
            ({"Content-Type": "application/json", "X-VTB-Token": token + "x"}, 403),
            ({"Content-Type": "text/plain", "X-VTB-Token": token}, 415),
            ({"Content-Type": "application/json", "X-VTB-Token": token, "Host": "evil.example"}, 421),
        ]
        for headers, expected in refused:
            status, body = request(url, "POST", "/api/label", LABEL, headers)
            assert status == expected, (headers, body)
        # DNS rebinding: evil.example resolving to 127.0.0.1 reads nothing of the run
        for path in ("/api/state", "/", "/image/task/0/0"):
            status, body = request(url, "GET", path, headers={"Host": f"evil.example:{own.split(':')[1]}"})
            assert status == 421 and list(json.loads(body)) == ["error"], (path, body)
            assert "evil.example" in json.loads(body)["error"] and b"task_id" not in body
        status, _ = request(url, "GET", "/api/state", headers={"Host": "127.0.0.1.evil.example"})
        assert status == 421
        assert labels.read_bytes() == before  # nothing changed
        # the page's own requests pass, under either local name
        status, body = request(url, "GET", "/api/state")
        assert status == 200 and json.loads(body)["labels"][0]["label"] == "met"
        localhost = own.replace("127.0.0.1", "localhost")
        status, body = request(url, "POST", "/api/label", LABEL,
                               {"Content-Type": "application/json; charset=utf-8", "Host": localhost,
                                "Origin": f"http://{localhost}", "X-VTB-Token": token})
        assert status == 200, body
    finally:
        stop(proc)
    assert read_labels(labels) == [{"task_id": "a", "turn": 1, "rubric_id": "r1", "label": "not_met", "note": "forged"}]


def announce_body(url: str, size: int, headers: dict[str, str]) -> tuple[int, bytes]:
    """A POST that announces a body of ``size`` bytes and sends none: the answer must not wait for it."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest("POST", "/api/label")
        for name, value in {**headers, "Content-Length": str(size)}.items():
            conn.putheader(name, value)
        conn.endheaders()
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def test_a_label_with_a_huge_note_or_a_turn_that_is_no_integer_is_refused(run_dir, tmp_path):
    labels = tmp_path / "labels.jsonl"
    proc, url = start(run_dir, labels)
    try:
        token = page_token(url)
        own = {"Content-Type": "application/json", "X-VTB-Token": token}

        def post(**changes: object) -> tuple[int, dict]:
            body = {"task_id": "a", "turn": 1, "rubric_id": "r1", "label": "met", "note": "", **changes}
            status, reply = request(url, "POST", "/api/label", json.dumps(body).encode(), own)
            return status, json.loads(reply)

        for turn in (True, False, 1.0, "1"):
            status, reply = post(turn=turn)
            assert status == 400 and "'turn' must be an integer (1-based)" in reply["error"], (turn, reply)
        status, reply = post(note="x" * 10_001)
        assert status == 400 and "'note' has 10,001 characters; a note keeps at most 10,000" in reply["error"]
        assert not labels.exists()  # nothing saved
        status, reply = announce_body(url, 50 * 1024 * 1024, own)  # a 50 MB body is refused before it is read
        assert status == 413 and "at most 262,144 bytes, not 52,428,800" in json.loads(reply)["error"]
        status, reply = post(note="é" * 10_000)  # the longest note is kept, whatever its characters
        assert status == 200, reply
        status, _ = request(url, "GET", "/api/state")
        assert status == 200
    finally:
        stop(proc)
    assert read_labels(labels) == [{"task_id": "a", "turn": 1, "rubric_id": "r1", "label": "met", "note": "é" * 10_000}]
