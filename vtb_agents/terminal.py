"""Terminal-safe text: what a model, a task or a tool wrote, made fit to print to a terminal.

Text that a model or a task controls (answers, tool output, task ids, prompts, rubric text, error
messages that quote them) may hold control characters a terminal interprets: ``ESC`` starts CSI
and OSC sequences (colours, cursor moves, clear screen, window title, OSC 8 hyperlinks to any URL),
``CR`` and ``BS`` overwrite what was printed, C1 characters (U+0080..U+009F) act as ``ESC [`` and
``ESC ]`` on some terminals, and the bidi overrides reorder what is shown. Every ``vtb`` command
that prints such text passes it through this module first, so the terminal shows these characters
as escapes (``ESC`` as ``\\x1b``) and never interprets them. Newline and tab are kept.

Rich markup is a second, separate danger: a string handed to rich's ``Console.print`` or a table
cell is parsed as markup (``[link=...]``, ``[bold]``), so model text must reach rich either as a
``rich.text.Text`` (:func:`safe_text`, never parsed) or markup-escaped (:func:`safe_markup`).

Which helper where:
    - :func:`safe`: a plain ``str`` for a place that does no markup (``print``, rich with
      ``markup=False``, log messages).
    - :func:`safe_text`: a ``rich.text.Text`` for table cells, ``Text.assemble`` parts and
      ``Console.print`` (no markup, no highlighting of its own).
    - :func:`safe_markup`: a markup-escaped ``str`` to put inside a markup string.
    - :func:`safe_json`: ``json.dumps`` whose output holds no raw control character (C1 and the bidi
      controls as ``\\uXXXX``, which JSON allows; ``json`` already escapes C0).

Example:
    >>> safe("ok\\x1b]8;;http://x\\x07link\\x1b]8;;\\x07\\r\\n")
    'ok\\\\x1b]8;;http://x\\\\x07link\\\\x1b]8;;\\\\x07\\\\r\\n'
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["UNSAFE", "safe", "safe_json", "safe_markup", "safe_text"]

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""The characters a terminal may interpret: C0 controls but newline and tab, DEL, C1 controls, and
the bidi embeddings, overrides and isolates (which reorder what is shown)."""
_NAMED = {"\r": "\\r", "\x0b": "\\x0b", "\x0c": "\\x0c"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def safe(text: str) -> str:
    """``text`` with every character a terminal could interpret (:data:`UNSAFE`) shown as its
    escape (``\\x1b``, ``\\r``, ``\\x9b``, ``\\u202e``); newline and tab kept."""
    return UNSAFE.sub(_escape, text)


def safe_text(text: str, style: str = "") -> Text:
    """``text`` as a rich ``Text`` in ``style``: control characters made visible (:func:`safe`) and
    never read as markup."""
    from rich.text import Text

    return Text(safe(text), style=style)


def safe_markup(text: str) -> str:
    """``text`` made visible (:func:`safe`) and markup-escaped, to embed in a rich markup string."""
    from rich.markup import escape

    return escape(safe(text))


def safe_json(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` with no raw control character in it: ``json`` escapes C0
    itself; C1, DEL and the bidi controls (left raw by ``ensure_ascii=False``) become ``\\uXXXX``,
    which decodes to the same value."""
    return UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, **options))
