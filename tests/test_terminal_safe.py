"""Terminal-safe output (docs/reference/transcripts.md, issue #31 item 5): model- and task-controlled text never
reaches a terminal with a control character it would interpret, nor as rich markup."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_task
from support.cli import checkout_env, vtb
from rich.console import Console
from rich.table import Table

from vtb_agents.terminal import UNSAFE, safe, safe_json, safe_markup, safe_text

OSC8 = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
ATTACK = f"{OSC8} \x1b]0;owned\x07 \x1b[2J\x1b[H \x9b31m \x9d0;t\x9c back\x08\x08 \rover \u202eevil\x00 [link=https://x]m[/link]"


def printed(renderable: object, *, markup: bool = True) -> str:
    """What a real rich console writes for ``renderable`` (colours on, as on a terminal)."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="truecolor", width=200)
    console.print(renderable, markup=markup, highlight=False)
    return buffer.getvalue()


def raw_controls(text: str) -> set[str]:
    """The control characters in ``text`` other than rich's own SGR colour codes, newline and tab."""
    without_sgr = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return set(UNSAFE.findall(without_sgr))


def test_every_c0_c1_and_bidi_control_is_shown_as_an_escape_and_newline_and_tab_kept():
    everything = "".join(map(chr, range(0xA0))) + "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    shown = safe(everything)
    assert not UNSAFE.search(shown)
    assert "\n" in shown and "\t" in shown
    assert "\\x1b" in shown and "\\x9b" in shown and "\\x7f" in shown and "\\r" in shown and "\\u202e" in shown
    assert safe("plain text, ünïcode ✓ 日本\n\tok") == "plain text, ünïcode ✓ 日本\n\tok"


def test_rich_output_of_the_helpers_holds_no_raw_control_and_no_markup_is_read():
    for renderable in (safe_text(ATTACK), safe_text(ATTACK, style="bold red")):
        written = printed(renderable)
        assert not raw_controls(written), written
        assert "[link=https://x]" in written  # shown, not interpreted
        assert "\x1b]8;" not in written
    written = printed(f"[bold]answer:[/] {safe_markup(ATTACK)}")
    assert not raw_controls(written) and "[link=https://x]" in written and "\x1b]8;" not in written
    table = Table("id")
    table.add_row(safe_text(ATTACK))
    assert not raw_controls(printed(table))


def test_without_the_helpers_rich_writes_the_sequences_raw():
    """Why the helpers exist: rich passes ESC and C1 through and reads markup in strings."""
    from rich.text import Text

    assert "\x1b]8;;https://evil.example/" in printed(Text(ATTACK))
    assert "\x1b]8;" in printed("[link=https://x]m[/link]")


def test_safe_json_round_trips_and_holds_no_raw_control():
    value = {"answer": ATTACK, "list": ["\x85", "\u2066x"]}
    text = safe_json(value, ensure_ascii=False, indent=2)
    assert not UNSAFE.search(text)
    assert json.loads(text) == value


# --- through the real CLI -------------------------------------------------------------------------

ESCAPES = ("\x1b", "\x07", "\x9b", "\x9d", "\x9c", "\x08", "\r", "\u202e")
"""Characters none of which may reach the terminal raw from model or task text."""
SGR = re.compile(r"\x1b\[[0-9;]*m")
HOSTILE_ANSWER = ("The number is 42. \x1b]8;;https://evil.example/\x07click me\x1b]8;;\x07 \x1b]0;pwned\x07"
                  "\x1b[2J\x1b[H\x9b31mred\x9d0;t\x9c bad\rover\x08 \u202eevil [link=https://evil.example]x[/link]")
HOSTILE_CODE = "print('\\x1b]0;tool title\\x07\\x1b[2Jcleared \\x9b1m [bold]x[/bold]')"
HOSTILE_AGENT = f'''
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from vtb_agents.models.scripted import ScriptedChatModel

def build(tools, *, system_prompt, middleware):
    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[{{"name": "python_image_processing", "args": {{"code": {HOSTILE_CODE!r}}},
                                   "id": "c1"}}]),
        AIMessage({HOSTILE_ANSWER!r}),
    ])
    return create_agent(model, tools, system_prompt=system_prompt, middleware=middleware)
'''




def assert_no_raw_controls(text: str) -> None:
    """``text`` (rich's own SGR colour codes removed) holds none of :data:`ESCAPES`."""
    found = {char for char in ESCAPES if char in SGR.sub("", text)}
    assert not found, (found, text)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A run whose agent answers with terminal escape sequences and whose tool printed some."""
    root = tmp_path_factory.mktemp("hostile")
    write_task(root / "tasks", "t-corner")
    (root / "hostile_agent.py").write_text(HOSTILE_AGENT)
    run = vtb("run", "--tasks", str(root / "tasks"), "--model", "agent:hostile_agent:build", "--out",
              str(root / "run"), path=[root])
    assert run.returncode == 0, run.stderr
    assert_no_raw_controls(run.stdout + run.stderr)
    return root, root / "run"


@pytest.mark.slow
@pytest.mark.parametrize("colour", [False, True], ids=["piped", "terminal"])
def test_vtb_transcript_of_an_answer_with_osc_and_csi_sequences_prints_none_raw(hostile_run, colour):
    root, run = hostile_run
    paint = {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1"} if colour else {}
    shown = vtb("transcript", str(run), "t-corner", path=[root], columns=200, env=paint)
    assert shown.returncode == 0, shown.stderr
    if colour:
        assert SGR.search(shown.stdout), "rich should colour a terminal's output"
    assert_no_raw_controls(shown.stdout)
    # shown, escaped: the answer, the tool's output, the markup as text
    assert "\\x1b]8;;https://evil.example/\\x07click me" in shown.stdout
    assert "\\x9b31mred" in shown.stdout and "\\u202eevil" in shown.stdout
    assert "[link=https://evil.example]x[/link]" in shown.stdout
    plain = SGR.sub("", shown.stdout)  # a terminal's code is highlighted, token by token
    assert "\\x1b]0;tool title\\x07\\x1b[2Jcleared" in plain  # the code, as the model wrote it
    assert "\\u001b]0;tool title\\u0007\\u001b[2Jcleared" in plain  # its output, as the tool returned it


@pytest.mark.slow
def test_vtb_transcript_json_escapes_every_control_and_keeps_the_text(hostile_run):
    root, run = hostile_run
    shown = vtb("transcript", str(run), "t-corner", "--json", path=[root])
    assert shown.returncode == 0, shown.stderr
    assert_no_raw_controls(shown.stdout)
    events = json.loads(shown.stdout)["events"]
    assert [e["response"]["text"] for e in events if e["kind"] == "model"][-1] == HOSTILE_ANSWER


def test_task_text_is_printed_terminal_safe_by_tasks_list_show_and_validate(tmp_path):
    hostile_id = "t[red]x\x1b]0;T\x07\x9b2J\u202e"
    write_task(tmp_path / "tasks", "t-hostile", id=hostile_id)
    listed = vtb("tasks", "list", str(tmp_path / "tasks"), columns=250)
    assert listed.returncode == 0, listed.stderr
    assert_no_raw_controls(listed.stdout)
    assert "t[red]x\\x1b]0;T\\x07\\x9b2J\\u202e" in listed.stdout
    shown = vtb("tasks", "show", hostile_id, "--tasks", str(tmp_path / "tasks"), columns=250)
    assert shown.returncode == 0, shown.stderr
    assert_no_raw_controls(shown.stdout)
    assert json.loads(shown.stdout)["id"] == hostile_id
    validated = vtb("tasks", "validate", str(tmp_path / "tasks"), columns=250)
    assert validated.returncode == 1 and "control" in validated.stderr
    assert_no_raw_controls(validated.stdout + validated.stderr)


@pytest.mark.parametrize("verbosity", [0, 1, 2], ids=["quiet", "-v", "-vv"])
def test_log_lines_quoting_a_model_are_terminal_safe(verbosity):
    """A warning that quotes model text reaches stderr escaped, through Python's handler of last
    resort (no -v) or the rich log handler (-v, -vv)."""
    code = ("import logging, sys\n"
            "from vtb_agents.cli.common import configure_logging\n"
            f"configure_logging({verbosity})\n"
            "logging.getLogger('vtb_agents.test').warning('model said %s', sys.argv[1])\n")
    done = subprocess.run([sys.executable, "-c", code, HOSTILE_ANSWER], env=checkout_env(COLUMNS="400"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "model said The number is 42." in done.stderr
    assert_no_raw_controls(done.stderr)
    assert "\\x1b]8;;https://evil.example/" in done.stderr


@pytest.mark.slow
def test_vtb_run_and_compare_lines_naming_hostile_tasks_and_runs_are_terminal_safe(hostile_run, tmp_path):
    root, run = hostile_run
    hostile_id = "t\x1b]0;T\x07[red]x"
    write_task(tmp_path / "tasks", "t-hostile", id=hostile_id)
    refused = vtb("run", "--tasks", str(tmp_path / "tasks"), "--model", "replay", "--out", str(tmp_path / "r"),
                  path=[root], columns=250)
    assert refused.returncode == 2 and "nothing was run" in refused.stderr
    assert_no_raw_controls(refused.stdout + refused.stderr)
    assert "[red]x" in refused.stderr  # markup shown as written
    twin = tmp_path / "copy \x1b]0;title\x07 [bold]b"
    shutil.copytree(run, twin)
    compared = vtb("compare", str(run), str(twin), path=[root], columns=250)
    assert compared.returncode == 0, compared.stderr
    assert_no_raw_controls(compared.stdout + compared.stderr)
    assert "[bold]b" in compared.stdout
