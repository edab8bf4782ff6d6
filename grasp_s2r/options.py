"""Command-line options generated from the config dataclasses: the config is the CLI.

Each command lists its options once, as :class:`Option` entries naming the config field they set
(``"train.steps"``, ``"env.camera.fov_deg"``); the default, the ``(default X)`` of ``--help`` and the
choices of a ``Literal`` field come from the dataclass, never from the option. An option the user leaves out
sets nothing, so the config keeps its dataclass default.

A small generator over ``dataclasses.fields`` rather than tyro or draccus: the CLI keeps its option names,
metavars, groups and one-line errors (``tests/test_reliability.py``) without a new dependency, and building
the parser imports nothing but the config modules, so ``collect`` and every ``--help`` stay free of torch.

This module is a leaf (standard library and :mod:`grasp_s2r.configs` only): command modules import it at top level.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grasp_s2r.configs import literal_values


class UsageError(Exception):
    """Bad user input: reported as one line on stderr, exit code 2."""


class Parser(argparse.ArgumentParser):
    """Reports bad arguments as one line (with the command it belongs to) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def threshold(text: str) -> float:
    """A segmenter's probability threshold, in (0, 1) (``vision.networks.segmenter.check_threshold``)."""
    from grasp_s2r.vision.networks.segmenter import check_threshold

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    try:
        return check_threshold(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def torch_device(text: str) -> str:
    """A ``--device`` value: ``cpu``, ``cuda`` or ``cuda:N`` where CUDA is present (N below its device count), ``mps``
    where present ("" = the default); any other torch device type (meta, xla, ...) is refused."""
    if not text:
        return text
    import torch  # only when a device is named: parsing other options stays torch-free

    try:
        device = torch.device(text)
    except RuntimeError as e:
        raise argparse.ArgumentTypeError(f"unknown torch device {text!r} ({str(e).splitlines()[0]})") from None
    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    present = "cpu" + (f", cuda, cuda:N (N < {torch.cuda.device_count()})" if cuda else "") + \
        (", mps" if mps else "")
    if device.type == "cuda" and not cuda:
        raise argparse.ArgumentTypeError(f"{text!r} asked for, but this machine has no usable CUDA device; "
                                         "use --device cpu (or leave --device out: CUDA when present, else CPU)")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(f"{text!r} asked for, but this machine has {torch.cuda.device_count()} "
                                         f"CUDA device(s); use one of: {present}")
    if device.type not in ("cpu", "cuda", "mps") or (device.type == "mps" and not mps) or \
            (device.type == "cpu" and device.index not in (None, 0)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a device this machine runs grasp_s2r on; use one of: "
                                         f"{present}")
    return text


def comma_list(text: str) -> tuple[str, ...]:
    """``"a, b,,c"`` -> ("a", "b", "c")."""
    return tuple(c.strip() for c in text.split(",") if c.strip())


def names_list(text: str) -> tuple[str, ...]:
    """:func:`comma_list` of at least one name (``","`` names none: refused, where an empty list means "all")."""
    names = comma_list(text)
    if not names:
        raise argparse.ArgumentTypeError(f"expected one or more comma-separated names, got {text!r}")
    return names


def comma_text(values: Iterable[Any]) -> str:
    """The inverse of :func:`comma_list`, for ``(default X)``."""
    return ",".join(map(str, values))


@dataclass(frozen=True)
class Option:
    """One command-line option and the config field(s) it sets."""

    flag: str
    """The option, e.g. ``--batch-size``."""
    help: str
    """What it does; ``(default X)`` is appended from the field's default."""
    field: str = ""
    """Dotted path of the config field it sets, e.g. ``train.lr``; "" for a switch (see ``sets``)."""
    also: tuple[str, ...] = ()
    """More fields set to the same value (``--resolution``: width and height)."""
    type: Callable[[str], Any] | None = None
    """Parser / validator of the text (argparse ``type``); choices of a ``Literal`` field are automatic."""
    convert: Callable[[Any], Any] | None = None
    """Parsed value -> field value (e.g. millimetres -> metres, ``"a,b"`` -> a tuple)."""
    show: Callable[[Any], str] = str
    """Field default -> the text of ``(default X)``, in the option's units."""
    metavar: str | None = None
    sets: Mapping[str, Any] | None = None
    """A switch (no value): when given it sets these fields to these values."""
    required: bool = False
    group: str = ""
    """Title of the ``--help`` group it is listed in ("" = the command's own options)."""

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


def _field_owner(cls: type, path: str) -> tuple[type, str, Any]:
    """(dataclass owning the last name of ``path``, that name, its default) starting from ``cls``."""
    *parents, name = path.split(".")
    value: Any = None
    for part in parents:
        value = field_default(cls, part) if value is None else getattr(value, part)
        cls = type(value)
    default = field_default(cls, name) if value is None else getattr(value, name)
    return cls, name, default


def field_default(cls: type, name: str) -> Any:
    """The default of field ``name`` of dataclass ``cls`` (its factory called); ``dataclasses.MISSING`` if none."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def default_of(cls: type, path: str) -> Any:
    """The default of the (dotted) field ``path`` of ``cls``."""
    return _field_owner(cls, path)[2]


def add_options(parser: argparse.ArgumentParser, cls: type, options: Iterable[Option]) -> None:
    """Add ``options`` to ``parser``; each non-switch option's help ends with its field's default in ``cls``."""
    groups: dict[str, Any] = {"": parser}
    for o in options:
        if o.group not in groups:
            groups[o.group] = parser.add_argument_group(o.group)
        target = groups[o.group]
        if o.sets is not None:
            target.add_argument(o.flag, action="store_true", help=o.help)
            continue
        owner, name, default = _field_owner(cls, o.field)
        kwargs: dict[str, Any] = {"default": None, "metavar": o.metavar, "required": o.required}
        choices = literal_values(owner, name)
        if choices is not None and o.type is None:
            kwargs["choices"] = choices
        if o.type is not None:
            kwargs["type"] = o.type
        shown = "" if o.required else f" (default: {o.show(default)})"
        target.add_argument(o.flag, help=(o.help + shown).replace("%", "%%"), **kwargs)


def config_from_options(cls: type, args: argparse.Namespace, options: Iterable[Option], **given: Any) -> Any:
    """``cls(**given)`` with the fields the user's options set; a value the config refuses -> :class:`UsageError`."""
    overrides: dict[str, Any] = {}
    options = list(options)
    try:
        for o in options:
            value = getattr(args, o.dest)
            if o.sets is not None:
                if value:
                    overrides.update(o.sets)
            elif value is not None:
                value = o.convert(value) if o.convert is not None else value
                overrides.update(dict.fromkeys((o.field, *o.also), value))
        return _build(cls, given, overrides)
    except ValueError as e:
        raise UsageError(_named_by_option(str(e).splitlines()[0], options)) from None


def _named_by_option(message: str, options: Sequence[Option]) -> str:
    """A config's refusal ("disturbance_prob must be in [0, 1], got 2.0") with the field it starts with named by the
    option that sets it ("--disturbance-prob must be ..."), as the user typed it; as it is when no option sets it."""
    flags: dict[str, set[str]] = {}
    for o in options:
        for path in (o.field, *o.also) if o.field and o.sets is None else ():
            flags.setdefault(path.rsplit(".", 1)[-1], set()).add(o.flag)
    # the field, at the start or after one word naming its config ("camera fov_deg must ..."), before its verdict
    m = re.match(r"(?:[a-z]+ )?([a-z][a-z0-9_]*)(?= must| is |:)", message)
    named = flags.get(m[1], set()) if m else set()
    return next(iter(named)) + message[m.end():] if len(named) == 1 else message


def _nest(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """{"a.b": 1, "c": 2} -> {"a": {"b": 1}, "c": 2}."""
    tree: dict[str, Any] = {}
    for path, value in overrides.items():
        *parents, name = path.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[name] = value
    return tree


def replaced(obj: Any, overrides: Mapping[str, Any]) -> Any:
    """Config ``obj`` with the fields named by the dotted paths of ``overrides`` (``"mix.photo_table"``) replaced,
    each config built once with all its new values (its checks see the final combination)."""
    return _replaced(obj, _nest(overrides))


def _replaced(obj: Any, tree: Mapping[str, Any]) -> Any:
    """``obj`` with the fields of ``tree`` replaced (nested dicts replace fields of nested configs); every
    config is built once, with all its new values (its checks see the final combination)."""
    changes = {k: _replaced(getattr(obj, k), v) if isinstance(v, dict) else v for k, v in tree.items()}
    return dataclasses.replace(obj, **changes)


def _build(cls: type, given: Mapping[str, Any], overrides: Mapping[str, Any]) -> Any:
    tree = _nest(overrides)
    top = {k: v for k, v in tree.items() if not isinstance(v, dict)}
    nested = {k: v for k, v in tree.items() if isinstance(v, dict)}
    values = {**given, **top}
    for name, sub in nested.items():
        values[name] = _replaced(values[name] if name in values else field_default(cls, name), sub)
    return cls(**values)
