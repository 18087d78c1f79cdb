"""Load VTB tasks with the Hugging Face ``datasets`` library, from local data only.

Why: users who already have the dataset in their HF cache, or saved with ``save_to_disk``,
can run it without converting it by hand. The network is never used: dataset names are
resolved from the local cache with offline mode forced on. Rows go through the same converter
as parquet files (:func:`vtb_agents.tasks.parquet.rows_to_tasks`); the dataset is read in its
arrow format, so image features arrive as raw ``{bytes, path}`` structs, never decoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.parquet import BATCH_ROWS, rows_to_tasks

INSTALL_HINT = "install the 'hf' extra: pip install 'vtb-agents[hf]'"


def iter_hf(spec: str, split: str | None = None, *,
            cache_dir: Path | None = None) -> Iterator[Task | TaskLoadError]:
    """Yield a Task or TaskLoadError per row of a local HF dataset.

    ``spec`` is a ``save_to_disk`` directory, a local directory or parquet file of data files,
    or a dataset name already in the local HF cache (``cache_dir`` or the default cache).
    ``split`` defaults to ``test`` if present, else ``train``. Images stored by path only are read
    from inside the local dataset folder, never from elsewhere on the host. Loading errors (missing package,
    dataset not available locally, unknown split) are raised here, before iteration.
    """
    datasets = _import_datasets()
    dataset, name = _select_split(datasets, _load(datasets, spec, cache_dir), split, spec)
    batches = dataset.with_format("arrow").iter(batch_size=BATCH_ROWS)
    rows = (row for table in batches for row in table.to_pylist())
    local = Path(spec).expanduser()
    root = local if local.is_dir() else local.parent if local.is_file() else None
    return rows_to_tasks(rows, f"{spec}[{name}]", image_root=root)


def _import_datasets() -> ModuleType:
    try:
        import datasets
    except ImportError as exc:
        raise ImportError(f"loading a Hugging Face dataset needs the 'datasets' package: {INSTALL_HINT}") from exc
    return datasets


def _load(datasets: ModuleType, spec: str, cache_dir: Path | None) -> Any:
    path = Path(spec).expanduser()
    if path.is_dir() and ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file()):
        return datasets.load_from_disk(str(path))
    kwargs: dict[str, Any] = {"download_mode": "reuse_cache_if_exists"}
    if cache_dir is not None:
        kwargs["cache_dir"] = str(cache_dir)
    try:
        with _offline(datasets):
            if path.is_file():
                return datasets.load_dataset("parquet", data_files=str(path), **kwargs)
            return datasets.load_dataset(str(path) if path.is_dir() else spec, **kwargs)
    except (ConnectionError, FileNotFoundError) as exc:
        raise FileNotFoundError(
            f"dataset {spec!r} is neither a local dataset directory nor in the local Hugging Face "
            f"cache (offline: nothing is downloaded): {exc}") from exc


def _select_split(datasets: ModuleType, loaded: Any, split: str | None, spec: str) -> tuple[Any, str]:
    if isinstance(loaded, datasets.DatasetDict):
        name = split or ("test" if "test" in loaded else "train")
        if name not in loaded:
            raise ValueError(f"dataset {spec!r} has no split {name!r}; splits: {sorted(loaded)}")
        return loaded[name], name
    own = str(loaded.split) if loaded.split is not None else None
    if split and own and own != split:
        raise ValueError(f"dataset {spec!r} holds split {own!r}, not {split!r}")
    return loaded, split or own or "train"


@contextmanager
def _offline(datasets: ModuleType) -> Iterator[None]:
    """Force ``datasets`` and ``huggingface_hub`` offline (HF_DATASETS_OFFLINE=1) for one load."""
    import huggingface_hub.constants as hub

    targets = [(datasets.config, "HF_HUB_OFFLINE"), (datasets.config, "HF_DATASETS_OFFLINE"),
               (hub, "HF_HUB_OFFLINE")]
    saved = [(obj, name, getattr(obj, name)) for obj, name in targets if hasattr(obj, name)]
    for obj, name, _ in saved:
        setattr(obj, name, True)
    try:
        yield
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)
