"""Resolve a task source (``sample``, a task folder, a folder of task folders, parquet, ``hf:``)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from vtb_agents.defaults import SAMPLE
from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.local import load_task_dir, task_dirs
from vtb_agents.tasks.model import Task

SAMPLE_DIR = Path(__file__).parent / "sample"
SAMPLE_CASSETTE = SAMPLE_DIR / "tools_cassette.jsonl"
"""Authored record/replay cassette of the network tools for the sample suite (``--tools-mode replay``)."""
HF_PREFIX = "hf:"


def iter_source(spec: str | Path) -> Iterator[Task | TaskLoadError]:
    """Every task of ``spec`` or the error that stopped it loading; one bad task does not stop the rest.

    ``spec`` is ``sample`` (the bundled suite), ``hf:PATH_OR_NAME[@split]`` (a local or cached
    Hugging Face dataset), a ``.parquet`` file or a folder of them, a task folder, or a folder of
    task folders.
    """
    text = str(spec)
    if text == SAMPLE:
        yield from _iter_dirs(SAMPLE_DIR)
        return
    if text.startswith(HF_PREFIX):
        from vtb_agents.tasks.hf import iter_hf

        name, _, split = text[len(HF_PREFIX):].partition("@")
        yield from iter_hf(name, split or None)
        return
    path = Path(text)
    if not path.exists():
        raise FileNotFoundError(f"task source {text!r}: no such file or folder (or use 'sample' / 'hf:NAME')")
    if path.is_file() and path.suffix == ".parquet" or path.is_dir() and any(path.rglob("*.parquet")):
        from vtb_agents.tasks.parquet import iter_parquet

        yield from iter_parquet(path)
        return
    if path.is_dir():
        yield from _iter_dirs(path)
        return
    raise ValueError(f"task source {text!r}: expected a task folder, a folder of task folders or parquet")


def source_key(spec: str | Path) -> str:
    """One spelling of the task source ``spec``, to tell whether two specs name the same source: paths
    (also of a local ``hf:`` dataset) resolved, so ``ho_tasks`` and ``./ho_tasks`` are one; ``sample``
    and names of Hugging Face datasets as written."""
    text = str(spec)
    if text == SAMPLE:
        return text
    if text.startswith(HF_PREFIX):
        name, at, split = text[len(HF_PREFIX):].partition("@")
        return HF_PREFIX + (str(Path(name).resolve()) if Path(name).exists() else name) + at + split
    return str(Path(text).resolve())


def _iter_dirs(root: Path) -> Iterator[Task | TaskLoadError]:
    folders = task_dirs(root)
    if not folders:
        raise ValueError(f"task source {str(root)!r}: no task folders (each needs a task.json)")
    for folder in folders:
        try:
            yield load_task_dir(folder)
        except TaskLoadError as error:
            yield error


def load_tasks(spec: str | Path) -> list[Task]:
    """All tasks of ``spec``; raise the first :class:`TaskLoadError` (use validation to see all)."""
    tasks = []
    for item in iter_source(spec):
        if isinstance(item, TaskLoadError):
            raise item
        tasks.append(item)
    return tasks
