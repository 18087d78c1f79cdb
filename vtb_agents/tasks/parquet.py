"""Read and write VisualToolBench parquet files (the public dataset's own format).

Why: the dataset ships as parquet; users import it into task directories and export task
directories back, so both directions must be lossless. Rows are converted one by one: a bad
row becomes a :class:`TaskLoadError` naming task, turn, column and file, and never stops the
other rows. The row converter (:func:`rows_to_tasks`) is shared with the ``datasets`` loader.

Current schema (split ``test``): ``id``, ``turncase``, ``num_turns``, ``prompt_category``
(domain), ``eval_focus`` (category), ``turn_prompts``, ``turn_golden_answers``,
``turn_tool_trajectories`` (JSON strings), ``rubrics_by_turn`` (JSON objects keyed by rubric
id), ``images`` (flat list of ``{bytes, path}``), ``images_by_turn``, ``num_images``.

Choices where the dataset is not documented:

* Images are named ``image_{i}{ext}`` with the extension sniffed from the bytes (png when
  unknown); the struct ``path`` becomes ``source_name`` unless it equals that file name (the
  writer stores ``source_name or file``, so both round-trip). A turn's images are matched to the flat
  list by content (sha256); a by-turn image
  missing from the flat list is appended to it. Without ``images_by_turn`` every flat image
  belongs to turn 1. Null image bytes are an error (field ``images`` / ``images_by_turn``).
* A trajectory string that is a JSON list of ``{"tool": str, "args": dict}`` objects becomes
  ``Turn.trajectory``; anything else is kept verbatim in ``Turn.trajectory_raw``.
* ``turncase`` and ``num_images`` are derived and dropped; ``num_turns`` is checked against
  ``turn_prompts``. Other unknown columns with JSON-serialisable values are kept in
  ``metadata["extra_columns"]`` (null values omitted) and written back as columns. Other task
  metadata (except ``source``) is written as a JSON column ``task_metadata`` and read back, and
  the authoring review block (``Task.review``) as a JSON column ``review``.
* A row without ``id`` is an error, named ``row {n}`` (n counts rows from 1 per file).

Older schema (split ``train``, 1,191 rows): ``prompt``, ``golden_answer``, ``image`` (a struct
or a list of structs), ``tool_trajectory``, ``rubrics``. The prompt is split into turns on
``[Turn N]`` markers (only when they count 1, 2, 3, ...; text before the first marker is
prepended to turn 1). The golden answer is split the same way when it carries the same
markers, otherwise it goes to the last turn; the trajectory and the rubric object go to the
last turn too (rubrics are pooled across turns for scoring anyway); images go to turn 1.

:func:`write_parquet` always writes the current schema, ``eval_focus``/``prompt_category``
from the raw category/domain, so ``parquet -> tasks -> parquet`` is exact.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from vtb_agents.safefs import UnsafePath, read_in_dir
from vtb_agents.tasks import jsontext
from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.local import describe_validation_error
from vtb_agents.tasks.model import Task, TaskImage, ToolStep, Turn, rubrics_from_vtb, rubrics_to_vtb

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SCHEMA = pa.schema([
    ("id", pa.string()),
    ("turncase", pa.string()),
    ("num_turns", pa.int64()),
    ("prompt_category", pa.string()),
    ("eval_focus", pa.string()),
    ("turn_prompts", pa.list_(pa.string())),
    ("turn_golden_answers", pa.list_(pa.string())),
    ("turn_tool_trajectories", pa.list_(pa.string())),
    ("rubrics_by_turn", pa.list_(pa.string())),
    ("images", pa.list_(IMAGE_TYPE)),
    ("images_by_turn", pa.list_(pa.list_(IMAGE_TYPE))),
    ("num_images", pa.int64()),
])
"""The current VTB schema as :func:`write_parquet` writes it (extra columns follow)."""

METADATA_COLUMN = "task_metadata"
REVIEW_COLUMN = "review"
"""The authoring review block (``Task.review``) as a JSON string, written only when a task has one."""
CURRENT_COLUMNS = frozenset(SCHEMA.names) | {METADATA_COLUMN, REVIEW_COLUMN}
OLD_COLUMNS = frozenset({"id", "turncase", "num_turns", "prompt_category", "eval_focus", "prompt",
                         "golden_answer", "image", "tool_trajectory", "rubrics", "num_images",
                         METADATA_COLUMN, REVIEW_COLUMN})
BATCH_ROWS = 16
"""Rows per read batch / written row group: rows carry image bytes, so keep batches small."""

_TURN_LISTS = ("turn_golden_answers", "rubrics_by_turn", "turn_tool_trajectories", "images_by_turn")
_TURN_MARKER = re.compile(r"\[\s*turn\s*(\d+)\s*\]", re.IGNORECASE)
_MAGIC = ((b"\x89PNG\r\n\x1a\n", ".png"), (b"\xff\xd8\xff", ".jpg"), (b"GIF87a", ".gif"),
          (b"GIF89a", ".gif"), (b"BM", ".bmp"))


# ----------------------------------------------------------------------------- reading

def parquet_files(path: Path) -> list[Path]:
    """``path`` itself if it is a file, else every ``*.parquet`` under it (recursive, sorted)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"no such parquet file or directory: {path}")
    files = sorted(p for p in path.rglob("*.parquet") if p.is_file())
    if not files:
        raise FileNotFoundError(f"no .parquet files under {path}")
    return files


def iter_parquet(path: Path) -> Iterator[Task | TaskLoadError]:
    """Yield a Task or a TaskLoadError per row of a parquet file or directory of shards.

    Files are read batch by batch, so memory holds one batch of rows at a time.
    """
    for file in parquet_files(path):
        yield from _iter_file(file)


def _iter_file(file: Path) -> Iterator[Task | TaskLoadError]:
    source = str(file)
    try:
        with pq.ParquetFile(file) as parquet:
            batches = parquet.iter_batches(batch_size=BATCH_ROWS)
            rows = (row for batch in batches for row in batch.to_pylist())
            yield from rows_to_tasks(rows, source)
    except (OSError, pa.ArrowException) as exc:
        yield TaskLoadError(file.name, "(file)", f"unreadable parquet: {exc}", source=source)


def rows_to_tasks(rows: Iterable[dict[str, Any]], source: str, *,
                  image_root: Path | None = None) -> Iterator[Task | TaskLoadError]:
    """Convert dataset rows (column name -> Python value) to tasks, errors in place of bad rows.

    ``image_root``: an image struct without bytes whose ``path`` names a regular file inside
    this folder is read from there (``datasets`` may store local images that way); paths
    leading outside it, or through a symlink, are errors. None (parquet) reads no paths.
    No rows at all is an error too (an empty file is not an empty benchmark).
    """
    number = 0
    for number, row in enumerate(rows, start=1):
        try:
            yield row_to_task(row, row_number=number, source=source, image_root=image_root)
        except TaskLoadError as exc:
            yield exc
        except Exception as exc:  # a malformed row must not stop the others
            yield TaskLoadError(_task_id(row, number), "(row)", f"{type(exc).__name__}: {exc}",
                                source=source)
    if number == 0:
        yield TaskLoadError(Path(source).name, "(rows)", "no rows: the data holds no tasks", source=source)


def row_to_task(row: dict[str, Any], *, row_number: int, source: str,
                image_root: Path | None = None) -> Task:
    """One dataset row (current or older schema) as a Task; raises TaskLoadError."""
    reader = _RowReader(row, _task_id(row, row_number), source, image_root)
    return reader.task()


def _task_id(row: dict[str, Any], number: int) -> str:
    value = row.get("id")
    return f"row {number}" if value is None or str(value) == "" else str(value)


class _RowReader:
    """Turns one row into a Task, raising errors that name the task, turn, column and file."""

    def __init__(self, row: dict[str, Any], task_id: str, source: str, image_root: Path | None):
        self.row, self.task_id, self.source = row, task_id, source
        self.image_root = image_root
        self.images: list[TaskImage] = []
        self.by_hash: dict[str, int] = {}

    def error(self, field: str, message: str, turn: int | None = None) -> TaskLoadError:
        return TaskLoadError(self.task_id, field, message, turn=turn, source=self.source)

    def task(self) -> Task:
        if self.row.get("id") is None or str(self.row["id"]) == "":
            raise self.error("id", "missing task id")
        if "turn_prompts" in self.row:
            turns, known = self.current_turns(), CURRENT_COLUMNS
        elif "prompt" in self.row:
            turns, known = self.old_turns(), OLD_COLUMNS
        else:
            raise self.error("turn_prompts", "row has neither 'turn_prompts' nor 'prompt'")
        self.check_num_turns(len(turns))
        data = {
            "id": self.task_id,
            "category_raw": _text(self.row.get("eval_focus")),
            "domain_raw": _text(self.row.get("prompt_category")),
            "turns": turns,
            "images": self.images,
            "metadata": self.metadata(known),
            "review": self.review(),
        }
        try:
            return Task.model_validate(data)
        except ValidationError as exc:
            field, turn, message = describe_validation_error(exc)
            raise self.error(field, message, turn) from None

    # -- current schema

    def current_turns(self) -> list[dict[str, Any]]:
        prompts = self.row["turn_prompts"]
        if not isinstance(prompts, list) or not prompts:
            raise self.error("turn_prompts", "must be a non-empty list of prompts")
        n = len(prompts)
        lists: dict[str, list[Any]] = {}
        for column in _TURN_LISTS:
            value = self.row.get(column)
            if value is None:
                lists[column] = [None] * n
                continue
            if not isinstance(value, list):
                raise self.error(column, f"must be a list, got {type(value).__name__}")
            if len(value) != n:
                raise self.error(column, f"has {len(value)} entries but turn_prompts has {n}")
            lists[column] = value
        for k, struct in enumerate(self.row.get("images") or [], start=1):
            self.add_image(self.image_bytes(struct, "images", k), struct, dedupe=False)
        if self.row.get("images_by_turn") is None:
            turn_images = [list(range(len(self.images)))] + [[] for _ in range(n - 1)]
        else:
            turn_images = [[self.add_image(self.image_bytes(s, "images_by_turn", k, turn=t), s, dedupe=True)
                            for k, s in enumerate(structs or [], start=1)]
                           for t, structs in enumerate(lists["images_by_turn"], start=1)]
        return [
            self.turn(t, prompt, turn_images[t - 1], lists["turn_golden_answers"][t - 1],
                      lists["turn_tool_trajectories"][t - 1], lists["rubrics_by_turn"][t - 1],
                      "rubrics_by_turn")
            for t, prompt in enumerate(prompts, start=1)
        ]

    # -- older schema

    def old_turns(self) -> list[dict[str, Any]]:
        prompt = self.row["prompt"]
        if not isinstance(prompt, str):
            raise self.error("prompt", f"must be a string, got {type(prompt).__name__}")
        numbers, prompts = split_turn_markers(prompt)
        golden = _text(self.row.get("golden_answer"))
        golden_numbers, golden_parts = split_turn_markers(golden)
        if not numbers or golden_numbers != numbers:
            golden_parts = [""] * (len(prompts) - 1) + [golden]
        image = self.row.get("image")
        structs = image if isinstance(image, list) else [] if image is None else [image]
        for k, struct in enumerate(structs, start=1):
            self.add_image(self.image_bytes(struct, "image", k), struct, dedupe=False)
        n = len(prompts)
        return [
            self.turn(t, p, list(range(len(self.images))) if t == 1 else [], golden_parts[t - 1],
                      self.row.get("tool_trajectory") if t == n else None,
                      self.row.get("rubrics") if t == n else None, "rubrics")
            for t, p in enumerate(prompts, start=1)
        ]

    # -- shared pieces

    def turn(self, number: int, prompt: Any, images: list[int], golden: Any, trajectory: Any,
             rubrics: Any, rubric_field: str) -> dict[str, Any]:
        try:
            parsed = rubrics_from_vtb(rubrics)
        except ValidationError as exc:
            field, _, message = describe_validation_error(exc)
            raise self.error(rubric_field, f"invalid rubric ({field}): {message}", number) from None
        except (ValueError, TypeError) as exc:
            raise self.error(rubric_field, f"unparseable rubric JSON: {exc}", number) from None
        steps, raw = parse_trajectory(trajectory)
        return {"prompt": prompt, "images": images, "golden_answer": _text(golden),
                "trajectory": steps, "trajectory_raw": raw, "rubrics": parsed}

    def check_num_turns(self, n: int) -> None:
        value = self.row.get("num_turns")
        if value is None:
            return
        try:
            ok = int(value) == n
        except (TypeError, ValueError):
            ok = False
        if not ok:
            column = "turn_prompts" if "turn_prompts" in self.row else "prompt"
            raise self.error("num_turns", f"is {value!r} but {column} has {n} turns")

    def image_bytes(self, struct: Any, field: str, k: int, turn: int | None = None) -> bytes:
        if isinstance(struct, (bytes, bytearray)):
            return bytes(struct)
        if not isinstance(struct, dict):
            raise self.error(field, f"image {k} is not a {{bytes, path}} struct", turn)
        data, path = struct.get("bytes"), struct.get("path")
        if data is None and self.image_root is not None and path:
            data = self.read_image_path(str(path), field, k, turn)
        if not data:
            raise self.error(field, f"image {k} ({path or 'no path'}) has no bytes", turn)
        return bytes(data)

    def read_image_path(self, path: str, field: str, k: int, turn: int | None) -> bytes | None:
        """The bytes of a local image the dataset refers to, read only inside ``image_root``."""
        assert self.image_root is not None
        root = self.image_root.resolve()
        name = os.path.relpath(path, root) if os.path.isabs(path) else path
        try:
            return read_in_dir(root, name)
        except UnsafePath as exc:
            raise self.error(field, f"image {k} path {path!r} is refused: {exc.reason} "
                                    f"(only files inside {str(root)!r} are read)", turn) from None
        except FileNotFoundError:
            return None

    def add_image(self, data: bytes, struct: Any, *, dedupe: bool) -> int:
        digest = hashlib.sha256(data).hexdigest()
        if dedupe and digest in self.by_hash:
            return self.by_hash[digest]
        index = len(self.images)
        file = f"image_{index}{image_extension(data)}"
        name = struct.get("path") if isinstance(struct, dict) else None
        self.images.append(TaskImage(file=file, source_name=name if name and name != file else None, data=data))
        self.by_hash.setdefault(digest, index)
        return index

    def review(self) -> Any:
        stored = self.row.get(REVIEW_COLUMN)
        try:
            return json.loads(stored) if isinstance(stored, str) else stored
        except ValueError as exc:
            raise self.error(REVIEW_COLUMN, f"unparseable JSON: {exc}") from None

    def metadata(self, known: frozenset[str]) -> dict[str, Any]:
        metadata: dict[str, Any] = {}
        stored = self.row.get(METADATA_COLUMN)
        if stored:
            try:
                parsed = jsontext.loads(stored) if isinstance(stored, str) else stored
            except ValueError as exc:
                raise self.error(METADATA_COLUMN, f"unparseable JSON: {exc}") from None
            if not isinstance(parsed, dict):
                raise self.error(METADATA_COLUMN, "must be a JSON object")
            metadata.update(parsed)
        extra = {k: v for k, v in self.row.items() if k not in known and v is not None and _json_simple(v)}
        if extra:
            metadata["extra_columns"] = extra
        metadata["source"] = self.source
        return metadata


def split_turn_markers(text: str) -> tuple[list[int], list[str]]:
    """Split ``[Turn 1] ... [Turn 2] ...`` into (marker numbers, stripped parts).

    Markers count only when numbered 1, 2, 3, ...; otherwise returns ``([], [text])``.
    """
    matches = list(_TURN_MARKER.finditer(text))
    numbers = [int(m.group(1)) for m in matches]
    if not matches or numbers != list(range(1, len(matches) + 1)):
        return [], [text]
    ends = [m.start() for m in matches[1:]] + [len(text)]
    parts = [text[m.end():end].strip() for m, end in zip(matches, ends)]
    preamble = text[:matches[0].start()].strip()
    if preamble:
        parts[0] = f"{preamble}\n\n{parts[0]}"
    return numbers, parts


def parse_trajectory(value: Any) -> tuple[list[ToolStep], str | None]:
    """(steps, None) for a JSON list of ``{"tool", "args"}`` objects, else ([], verbatim text)."""
    if value is None or value == "":
        return [], None
    parsed = value
    if isinstance(value, str):
        try:
            parsed = jsontext.loads(value)
        except ValueError:
            return [], value
    if isinstance(parsed, list) and all(_is_step(s) for s in parsed):
        return [ToolStep.model_validate(s) for s in parsed], None
    return [], value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _is_step(item: Any) -> bool:
    return (isinstance(item, dict) and set(item) <= {"tool", "args"} and isinstance(item.get("tool"), str)
            and isinstance(item.get("args", {}), dict))


def image_extension(data: bytes) -> str:
    """The file extension of encoded image bytes, from their magic number (``.png`` if unknown)."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    for magic, ext in _MAGIC:
        if data.startswith(magic):
            return ext
    return ".png"


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _json_simple(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


# ----------------------------------------------------------------------------- writing

def task_to_row(task: Task) -> dict[str, Any]:
    """The current-schema row of ``task`` (without extra columns)."""
    def struct(index: int) -> dict[str, Any]:
        image = task.images[index]
        return {"bytes": image.read_bytes(), "path": image.source_name or image.file}

    flat = [struct(i) for i in range(len(task.images))]
    for number, turn in enumerate(task.turns, start=1):
        if any(not 0 <= i < len(flat) for i in turn.images):
            raise ValueError(f"task {task.id!r}, turn {number}: image index out of range {turn.images}")
    return {
        "id": task.id,
        "turncase": task.turncase,
        "num_turns": len(task.turns),
        "prompt_category": task.domain_raw,
        "eval_focus": task.category_raw,
        "turn_prompts": [t.prompt for t in task.turns],
        "turn_golden_answers": [t.golden_answer for t in task.turns],
        "turn_tool_trajectories": [_trajectory_text(t) for t in task.turns],
        "rubrics_by_turn": [json.dumps(rubrics_to_vtb(t.rubrics), ensure_ascii=False) for t in task.turns],
        "images": flat,
        "images_by_turn": [[flat[i] for i in t.images] for t in task.turns],
        "num_images": len(task.images),
    }


def _trajectory_text(turn: Turn) -> str:
    if turn.trajectory_raw is not None:
        return turn.trajectory_raw
    return json.dumps([{"tool": s.tool, "args": s.args} for s in turn.trajectory], ensure_ascii=False)


def _deferred_columns(task: Task) -> dict[str, Any]:
    """Small per-row values written after the core columns: extra columns and task metadata."""
    extra = task.metadata.get("extra_columns")
    columns = {k: v for k, v in extra.items() if k not in CURRENT_COLUMNS} if isinstance(extra, dict) else {}
    rest = {k: v for k, v in task.metadata.items() if k not in {"source", "extra_columns"}}
    if rest:
        columns[METADATA_COLUMN] = json.dumps(rest, ensure_ascii=False)
    if task.review is not None:
        columns[REVIEW_COLUMN] = task.review.model_dump_json()
    return columns


def write_parquet(tasks: Iterable[Task], path: Path) -> int:
    """Write ``tasks`` as one parquet file in the current VTB schema; returns the row count.

    Written atomically (temp file, then rename). Rows are written in small row groups; extra
    columns (whose set is known only at the end) are appended in a second streaming pass.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    core = path.with_name(f".{path.name}.{os.getpid()}.core.tmp")
    final = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    deferred: list[dict[str, Any]] = []
    try:
        with pq.ParquetWriter(core, SCHEMA) as writer:
            batch: list[dict[str, Any]] = []
            for task in tasks:
                batch.append(task_to_row(task))
                deferred.append(_deferred_columns(task))
                if len(batch) >= BATCH_ROWS:
                    writer.write_table(pa.Table.from_pylist(batch, schema=SCHEMA))
                    batch = []
            if batch or not deferred:
                writer.write_table(pa.Table.from_pylist(batch, schema=SCHEMA))
        if any(deferred):
            _append_columns(core, final, deferred)
            core.unlink()
        else:
            core.replace(final)
        final.replace(path)
    finally:
        core.unlink(missing_ok=True)
        final.unlink(missing_ok=True)
    return len(deferred)


def _append_columns(src: Path, dst: Path, rows: list[dict[str, Any]]) -> None:
    names = list(dict.fromkeys(name for row in rows for name in row))
    arrays = {name: _column_array([row.get(name) for row in rows]) for name in names}
    schema = SCHEMA
    for name in names:
        schema = schema.append(pa.field(name, arrays[name].type))
    offset = 0
    with pq.ParquetFile(src) as reader, pq.ParquetWriter(dst, schema) as writer:
        for group in range(reader.num_row_groups):
            table = reader.read_row_group(group)
            count = table.num_rows
            for name in names:
                table = table.append_column(schema.field(name), arrays[name].slice(offset, count))
            writer.write_table(table)
            offset += count


def _column_array(values: list[Any]) -> pa.Array:
    """An arrow array for an extra column; mixed types fall back to JSON strings."""
    try:
        return pa.array(values)
    except (pa.ArrowException, TypeError, ValueError):
        return pa.array([None if v is None else json.dumps(v, ensure_ascii=False) for v in values],
                        type=pa.string())
