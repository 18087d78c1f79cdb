"""What the run options of ``vtb`` need from ``RunConfig``'s fields, without importing pydantic.

Every run setting is a field of :class:`~vtb_agents.config.RunConfig` (or of its
``EpisodeSettings``): its type, default, help (the field's description) and lower bound make its
option (:mod:`vtb_agents.cli.options`). Reading them from the model means importing pydantic and
building the model, most of ``vtb --help``'s time; so they are derived from the model once and kept
in ``run_settings.json`` next to this file, which the options read instead. The model stays the one
source: :func:`settings_from_run_config` derives the table, ``python -m vtb_agents.cli.run_settings``
writes it with a hash of the modules it was derived from (``config.py``, ``defaults.py``). A table
whose hash differs from those modules' (a field added, a default changed, a merge that did not rewrite
it) is never used: the options are then derived from the model, slower but right, and
``tests/test_cli_startup.py`` fails until the command is run.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

TABLE_FILE = Path(__file__).with_name("run_settings.json")
"""The derived table: one object per run setting, by its flat name (``RunConfig`` order, then
``EpisodeSettings``)."""

SOURCES = tuple(Path(__file__).parent.parent / name for name in ("config.py", "defaults.py"))
"""The modules the table is derived from: a change to either makes the table stale."""

FlagType = Literal["str", "int", "float", "bool", "list"]


@dataclass(frozen=True)
class RunSetting:
    """One run setting as its option needs it: ``type`` is what the option parses (a choice or a JSON
    object is text, checked when the config is built; ``list``: a repeatable option of text),
    ``optional`` whether None is a value, ``default`` and ``help`` the field's, ``minimum`` its
    ``ge`` bound (None: none)."""

    type: FlagType
    optional: bool
    default: Any
    help: str
    minimum: float | None


def sources_hash() -> str:
    """SHA-256 of :data:`SOURCES`' contents: what a fresh table records."""
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.read_bytes())
    return digest.hexdigest()


@functools.cache
def run_settings() -> dict[str, RunSetting]:
    """Every run setting by its flat name: read from :data:`TABLE_FILE` when it was derived from the
    modules as they are now, else derived from the model (:func:`settings_from_run_config`)."""
    table = json.loads(TABLE_FILE.read_text(encoding="utf-8")) if TABLE_FILE.is_file() else {}
    if table.get("sources") != sources_hash():
        return settings_from_run_config()
    return {name: RunSetting(**row) for name, row in table["settings"].items()}


def settings_from_run_config() -> dict[str, RunSetting]:
    """Every run setting derived from ``RunConfig``'s and ``EpisodeSettings``'s fields (imports
    pydantic): what :data:`TABLE_FILE` must hold."""
    from vtb_agents.config import DEFAULTS, EpisodeSettings, RunConfig

    fields = {name: (field, getattr(DEFAULTS, name)) for name, field in RunConfig.model_fields.items()
              if name != "episode"}
    fields |= {name: (field, getattr(DEFAULTS.episode, name)) for name, field in EpisodeSettings.model_fields.items()}
    found = {}
    for name, (field, default) in fields.items():
        args = [arg for arg in get_args(field.annotation) if arg is not type(None)]
        optional = get_origin(field.annotation) in (Union, UnionType) and len(args) == 1
        core = args[0] if optional else field.annotation
        lower = [m.ge for m in field.metadata if getattr(m, "ge", None) is not None]
        found[name] = RunSetting(type=_flag_type(name, core), optional=optional,
                                 default=list(default) if isinstance(default, tuple) else default,
                                 help=field.description or "", minimum=lower[0] if lower else None)
    return found


def _flag_type(name: str, core: Any) -> FlagType:
    """What the option of setting ``name`` parses, for its field's type ``core`` (without None)."""
    if get_origin(core) in (Literal, dict):
        return "str"
    if get_origin(core) is tuple:
        return "list"
    if core in (str, int, float, bool):
        return core.__name__
    raise TypeError(f"run setting {name!r}: no option type for {core!r} (str, int, float, bool, Literal, dict, "
                    "tuple or Optional of one)")


def table_text(settings: dict[str, RunSetting]) -> str:
    """``settings`` as :data:`TABLE_FILE` holds them (JSON, one setting per line, under the hash of
    the sources they were derived from)."""
    rows = [f"    {json.dumps(name)}: {json.dumps(asdict(setting), ensure_ascii=False)}"
            for name, setting in settings.items()]
    return f'{{\n  "sources": "{sources_hash()}",\n  "settings": {{\n' + ",\n".join(rows) + "\n  }\n}\n"


if __name__ == "__main__":
    TABLE_FILE.write_text(table_text(settings_from_run_config()), encoding="utf-8")
    print(f"wrote {TABLE_FILE}")
