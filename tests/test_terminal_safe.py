"""Terminal-safe output (README "Transcripts", issue #31 item 5): model- and task-controlled text never
reaches a terminal with a control character it would interpret, nor as rich markup."""

from __future__ import annotations

import io
import json

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
    import re

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
