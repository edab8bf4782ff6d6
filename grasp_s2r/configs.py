"""The one serializer of the config dataclasses, and the one "same config?" check of a resumed artifact.

Configs are saved as plain JSON dicts (field name -> value, nested configs as nested dicts, tuples as lists):
no class names, so renaming a class never breaks a saved artifact.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


OMITTED_AT_DEFAULT = {"omitted_at_default": True}
"""``field(metadata=...)`` of a field added after artifacts were written: :func:`to_dict` leaves it out while it holds
its default (the value that reproduces those artifacts), so that a record written before it existed is the same
config as one written since (the "same config?" checks compare records) and :func:`from_dict` reads it back."""


def to_dict(cfg: Any) -> dict[str, Any]:
    """A config dataclass as a dict (nested configs as dicts; tuples stay tuples until written as JSON), without the
    fields marked :data:`OMITTED_AT_DEFAULT` that hold their default."""
    return _plain(cfg)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (f.metadata.get("omitted_at_default") and getattr(value, f.name) == f.default)}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def to_json(cfg: Any) -> dict[str, Any]:
    """``to_dict(cfg)`` as it reads back from JSON (tuples as lists): what a saved config compares with."""
    return json.loads(json.dumps(to_dict(cfg)))


def from_dict(cls: type[T], d: Mapping[str, Any]) -> T:
    """The ``cls`` config of a saved dict: nested configs built from their dicts, lists made tuples; a field the
    dict lacks takes its default; an unknown field -> ValueError."""
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(d) - fields
    if unknown:
        raise ValueError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    return cls(**{k: _value(field_hint(cls, k), v) for k, v in d.items()})


def field_hint(cls: type, name: str) -> Any:
    """The type annotation of field ``name`` of dataclass ``cls``, evaluated in its module (None if it cannot be)."""
    hint = {f.name: f.type for f in dataclasses.fields(cls)}[name]
    if isinstance(hint, str):
        try:
            return eval(hint, vars(sys.modules[cls.__module__]))  # the module's own annotation, as typing does
        except NameError:
            return None
    return hint


def literal_values(cls: type, name: str) -> tuple[Any, ...] | None:
    """The values of a ``Literal[...]`` field, else None."""
    hint = field_hint(cls, name)
    return typing.get_args(hint) if typing.get_origin(hint) is typing.Literal else None


def _value(hint: Any, value: Any) -> Any:
    """A JSON value as the type ``hint`` wants it (a dataclass from a dict, a tuple from a list)."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    for kind in options:
        if dataclasses.is_dataclass(kind) and isinstance(value, Mapping):
            return from_dict(kind, value)  # type: ignore[arg-type]
    if isinstance(value, list):
        return tuple(value)
    return value


def with_defaults(stored: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``stored`` (a JSON dict) with the keys it lacks, at any depth, taken from ``defaults``: a config recorded
    before a field existed reads as made with the value that reproduces it."""
    out = dict(defaults)
    for key, value in stored.items():
        base = out.get(key)
        out[key] = with_defaults(value, base) if isinstance(value, Mapping) and isinstance(base, Mapping) else value
    return out


def differences(stored: Any, asked: Any, prefix: str = "") -> list[str]:
    """``field: stored X, asked Y`` for every (nested, dotted) field whose values differ; [] when the same."""
    if isinstance(stored, Mapping) and isinstance(asked, Mapping):
        out = []
        for k in sorted(set(stored) | set(asked), key=str):
            out += differences(stored.get(k, "(none)"), asked.get(k, "(none)"), f"{prefix}{k}.")
        return out
    if stored == asked:
        return []
    return [f"{prefix.rstrip('.')}: stored {json.dumps(stored)}, asked {json.dumps(asked)}"]


def check_same(stored: Mapping[str, Any], asked: Mapping[str, Any], what: str, hint: str, *,
               ignore: Iterable[str] = (), error: type[Exception] = ValueError) -> None:
    """Refuse to resume when a saved config ``stored`` differs from ``asked`` (both JSON dicts) in any field but
    ``ignore``: ``error("{what} with another config (field: stored X, asked Y; ...); {hint}")``."""
    skip = set(ignore)
    diff = differences({k: v for k, v in stored.items() if k not in skip},
                       {k: v for k, v in asked.items() if k not in skip})
    if diff:
        raise error(f"{what} with another config ({'; '.join(diff)}); {hint}")
