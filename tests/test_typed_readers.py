"""Readers of a run use typed records (``rundir.records``), never ``.get("field")`` on a run's dicts.

mypy already refuses ``.get`` on a record (a pydantic model has none); this guard catches a reader
that goes back to raw dicts (``json.loads`` of a run file, or a field loosened to ``dict``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import vtb_agents

PACKAGE = Path(vtb_agents.__file__).parent
READERS = [*sorted((PACKAGE / "report").glob("*.py")), PACKAGE / "runner" / "regrade.py",
           *sorted((PACKAGE / "annotate").glob("*.py")), PACKAGE / "rundir" / "read.py",
           *(PACKAGE / "analysis" / name for name in ("alignment.py", "difficulty.py", "failures.py"))]
NOT_RUN_RECORDS = {
    "call.args": "a tool call's arguments, free-form as the model wrote them",
    "body": "the JSON body of an HTTP request to `vtb annotate`",
    "os.environ": "the environment",
    "headers": "HTTP request headers",
    "self.headers": "HTTP request headers",
    "row": "a line of the human labels file",
    "data": "a line of the human labels file, being validated",
    "episode.settings": "Episode.settings (typed by the run-settings model of issue #22, item 2)",
    "args": "a tool call's arguments in a transcript event (report/events_html.py), free-form",
    "message": "a request message as sent to the provider (a transcript's wire JSON), free-form",
    "block": "a content block of a provider message (a transcript's wire JSON), free-form",
    "c": "a tool call inside a provider message (a transcript's wire JSON), free-form",
}
"""Receivers of ``.get("...")`` in the readers that are not a run's records, and what they are."""


def keyed_gets(source: str) -> list[tuple[int, str]]:
    """``(line, receiver)`` of every ``X.get("literal", ...)`` call: a field looked up by name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.lineno, ast.unparse(node.func.value)))
    return found


def test_the_guard_finds_a_get_chain_and_passes_a_typed_read():
    chain = 's = meta.summary\nj = (s.get("judge") or {}).get("model")\nx = run["config"].get("tasks")\n'
    assert sorted(keyed_gets(chain)) == [(2, "s"), (2, "s.get('judge') or {}"), (3, "run['config']")]
    assert keyed_gets("j = meta.summary.judge.model\nt = data.tasks.get(result.task_id)\n") == []


def test_readers_look_up_no_run_record_field_by_name():
    assert len(READERS) > 10 and all(path.exists() for path in READERS)
    offending = [f"{path.relative_to(PACKAGE.parent)}:{line}: {receiver}.get(...)"
                 for path in READERS for line, receiver in keyed_gets(path.read_text(encoding="utf-8"))
                 if receiver not in NOT_RUN_RECORDS]
    assert offending == [], "read the typed records of vtb_agents.rundir.records instead:\n" + "\n".join(offending)
