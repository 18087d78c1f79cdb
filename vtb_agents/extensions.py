"""Extensions of four kinds, each one object in one file: strategies, tools, judges, sandbox backends.

One loader for all of them. An extension is named either ``module:attr`` (``my_pkg.judges:strict``:
the attribute ``attr`` of the importable module ``module``) or by the name an installed package gives
it in the entry point group ``vtb_agents.<kind>`` (``vtb_agents.strategies``, ``vtb_agents.tools``,
``vtb_agents.judges``, ``vtb_agents.sandboxes``), which is how it shows up in ``vtb <kind>``'s listing.
Each kind checks what it gets against its own contract; this module finds the object
(:func:`load_extension`, :func:`load_object`) and builds a class of it (:func:`build_extension`), so that
whatever a user's module or constructor raises is one ValueError naming the kind, the spec and the cause.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable, Final, Literal, TypeVar

Kind = Literal["strategies", "tools", "judges", "sandboxes"]
KINDS: Final[tuple[Kind, ...]] = ("strategies", "tools", "judges", "sandboxes")
LABELS: Final[dict[Kind, str]] = {"strategies": "strategy", "tools": "tool", "judges": "judge",
                                   "sandboxes": "sandbox"}
"""One extension of each kind, as error messages name it."""
GROUP_PREFIX: Final = "vtb_agents."
T = TypeVar("T")
"""Entry point groups are ``vtb_agents.<kind>``."""


@dataclass(frozen=True)
class Installed:
    """An extension an installed package declares: its name, where it lives and which package gives it."""

    name: str
    value: str
    package: str


def group(kind: Kind) -> str:
    """The entry point group of ``kind`` (``vtb_agents.judges``)."""
    return GROUP_PREFIX + kind


def _entry_points(kind: Kind) -> list[EntryPoint]:
    return sorted(entry_points(group=group(kind)), key=lambda ep: ep.name)


def installed(kind: Kind) -> list[Installed]:
    """The extensions of ``kind`` that installed packages declare, by name."""
    return [Installed(ep.name, ep.value, ep.dist.name if ep.dist is not None else "?") for ep in _entry_points(kind)]


def is_object_path(spec: str) -> bool:
    """Whether ``spec`` has the form ``module:attr`` (both parts non-empty, one colon)."""
    module, sep, attr = spec.partition(":")
    return bool(sep and module and attr and ":" not in attr)


def is_extension(kind: Kind, spec: str) -> bool:
    """Whether ``spec`` names an extension of ``kind``: ``module:attr`` or an installed entry point's name."""
    return is_object_path(spec) or any(ep.name == spec for ep in _entry_points(kind))


def load_extension(kind: Kind, spec: str) -> Any:
    """The object ``spec`` names: ``module:attr``, or the entry point of that name in ``vtb_agents.<kind>``.

    Anything that fails (no such entry point, module or attribute, or an import error inside the
    module) raises ValueError naming the kind, the spec and the cause.
    """
    label = LABELS[kind]
    found = [ep for ep in _entry_points(kind) if ep.name == spec]
    if not found and not is_object_path(spec):
        names = ", ".join(ep.name for ep in _entry_points(kind)) or "none"
        raise ValueError(f"{label} {spec!r}: not 'module:attr' and no installed {label} of that name "
                         f"(entry point group {group(kind)}: {names})")
    if found:
        return _loaded(label, spec, found[0].load)
    return load_object(label, spec)


def load_object(label: str, spec: str, shown: str | None = None) -> Any:
    """The attribute ``attr`` (dotted for a nested one) of the importable module ``module`` that
    ``spec`` (``module:attr``) names. Anything that fails (no such module or attribute, an error
    raised while the module imports) raises ValueError naming ``label`` (what the object is, as
    errors call it: ``judge``, ``agent spec``), the spec (``shown``: as the user wrote it) and the cause."""
    module, _, attr = spec.partition(":")

    def load() -> Any:
        target: Any = importlib.import_module(module)
        for part in attr.split("."):
            target = getattr(target, part)
        return target

    return _loaded(label, shown or spec, load)


def _loaded(label: str, spec: str, load: Callable[[], Any]) -> Any:
    """What ``load()`` returns; what it raises is ValueError naming ``label``, ``spec`` and the cause."""
    try:
        return load()
    except Exception as exc:  # the user's module failing to import is reported as this spec's error
        raise ValueError(f"{label} {spec!r}: cannot load it: {type(exc).__name__}: {exc}") from exc


def build_extension(kind: Kind, spec: str, build: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``build(*args, **kwargs)``: the class (or factory) that ``spec`` names, built. Whatever its
    constructor raises becomes a ValueError naming the kind, the spec and the cause, so that a
    plugin that cannot be built refuses the run in one line."""
    try:
        return build(*args, **kwargs)
    except Exception as exc:  # the user's constructor failing is reported as this spec's error
        raise ValueError(f"{LABELS[kind]} {spec!r}: building it failed: {type(exc).__name__}: {exc}") from exc
