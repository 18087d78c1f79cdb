"""Model presets: named ``provider:model`` specs with the paper's settings, vision support and prices.

Why: the paper evaluates each model with specific settings (temperature, reasoning effort, Claude's
thinking budget); a preset names them once so that ``--model gpt-5-think`` runs exactly that. The
presets live in ``presets.toml`` beside this module (package data), read with the standard
library's ``tomllib``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

PRESETS_FILE = "presets.toml"
PRICE_KEYS = ("input", "cached_input", "cache_write", "output")
FACTOR_KEYS = ("batch",)
"""Keys of a preset's ``prices`` that are shares of the list prices, not prices: ``batch`` is what
tokens billed at the provider's batch rate cost (0.5: half of every list price)."""
PRESET_KEYS = frozenset({"spec", "settings", "vision", "prices", "note"})


class PresetError(ValueError):
    """A presets file entry that cannot be used (names the preset and the field)."""


@dataclass(frozen=True)
class Prices:
    """USD per million tokens; ``None`` is unknown (never read as zero). ``batch`` is the share of
    every list price paid for tokens billed at the batch rate (the provider's batch API, or
    OpenAI's ``service_tier="flex"``, which OpenAI bills at batch rates): 0.5 for OpenAI and Anthropic."""

    input: float | None = None
    cached_input: float | None = None
    cache_write: float | None = None
    output: float | None = None
    batch: float | None = None

    def known(self) -> dict[str, float]:
        """The prices that are known, by name."""
        return {k: v for k in (*PRICE_KEYS, *FACTOR_KEYS) if (v := getattr(self, k)) is not None}


@dataclass(frozen=True)
class Preset:
    """One named model configuration of ``presets.toml``."""

    name: str
    spec: str
    settings: dict[str, Any] = field(default_factory=dict)
    vision: bool = True
    prices: Prices = field(default_factory=Prices)
    note: str = ""


def _preset(name: str, body: Any) -> Preset:
    if not isinstance(body, dict):
        raise PresetError(f"preset {name!r}: expected a table, got {type(body).__name__}")
    unknown = sorted(set(body) - PRESET_KEYS)
    if unknown:
        raise PresetError(f"preset {name!r}: unknown field(s) {', '.join(unknown)}")
    spec = body.get("spec")
    if not isinstance(spec, str) or ":" not in spec:
        raise PresetError(f"preset {name!r}: 'spec' must be 'provider:model', got {spec!r}")
    settings, prices = body.get("settings", {}), body.get("prices", {})
    if not isinstance(settings, dict):
        raise PresetError(f"preset {name!r}: 'settings' must be a table")
    if not isinstance(prices, dict) or set(prices) - {*PRICE_KEYS, *FACTOR_KEYS}:
        raise PresetError(f"preset {name!r}: 'prices' must be a table of {', '.join((*PRICE_KEYS, *FACTOR_KEYS))}")
    for key, value in prices.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise PresetError(f"preset {name!r}: price {key!r} must be a number >= 0, got {value!r}")
        if key in FACTOR_KEYS and value > 1:
            raise PresetError(f"preset {name!r}: {key!r} is a share of the list prices (0 to 1), got {value!r}")
    vision = body.get("vision", True)
    if not isinstance(vision, bool):
        raise PresetError(f"preset {name!r}: 'vision' must be true or false")
    return Preset(name=name, spec=spec, settings=dict(settings), vision=vision,
                  prices=Prices(**{k: float(v) for k, v in prices.items()}), note=str(body.get("note", "")))


def parse_presets(text: str) -> dict[str, Preset]:
    """The presets of a TOML document (see ``presets.toml``), in file order."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PresetError(f"{PRESETS_FILE}: {exc}") from None
    return {name: _preset(name, body) for name, body in data.items()}


@lru_cache(maxsize=1)
def presets() -> dict[str, Preset]:
    """The bundled presets by name (read once)."""
    return parse_presets(resources.files(__package__).joinpath(PRESETS_FILE).read_text(encoding="utf-8"))


def find_preset(name_or_spec: str) -> Preset | None:
    """The preset named ``name_or_spec``, or None (a ``provider:model`` spec is not a preset name)."""
    return presets().get(name_or_spec)


_OBJECT_MODEL = re.compile(r"^object:\w+\(model=(?P<model>[^()]+)\)$")
"""A model object's name in ``run.json`` (:func:`vtb_agents.runner.plan.object_name`)."""


def prices_for(name_or_spec: str) -> Prices | None:
    """The prices of a preset name, or of the first preset with that ``provider:model`` spec; a model
    object's name (``object:ChatOpenAI(model=gpt-4o)``) is priced as the first preset of that model."""
    if found := _OBJECT_MODEL.match(name_or_spec):
        preset = next((p for p in presets().values() if p.spec.partition(":")[2] == found["model"]), None)
    else:
        preset = find_preset(name_or_spec) or next((p for p in presets().values() if p.spec == name_or_spec), None)
    return preset.prices if preset else None
