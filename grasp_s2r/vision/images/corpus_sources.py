"""What enters the background corpus (``grasp-s2r backgrounds``): an allowlist of files per package.

The curated one is ``corpus_allowlist.json`` beside this module: every file in it was chosen by looking at it
(contact sheets of each package's images), by the criteria written in the file (and in docs/vision.md, "More real
photos"); each source's ``note`` says what its package holds and why the rest stays out. ``--allowlist FILE``
takes a user's, in the same format.

KDE / Plasma wallpaper packages are reserved for an independent test and are never used
(:func:`check_not_reserved`, applied to every package however it is asked for).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

RESERVED_PATTERN = re.compile(r"kde|plasma", re.IGNORECASE)
"""Package names (Debian, PyPI) the corpus never takes: the KDE / Plasma wallpapers and their kin are reserved
for an independent test of the segmenter (never trained, validated or tuned on)."""
CURATED_ALLOWLIST = Path(__file__).with_name("corpus_allowlist.json")
KINDS = ("deb", "pypi")


class ReservedPackageError(ValueError):
    """A package reserved for the independent test was asked for."""


class AllowlistError(ValueError):
    """An allowlist file that cannot be read."""


def check_not_reserved(name: str, how: str = "") -> None:
    """Raise :class:`ReservedPackageError` when ``name`` is a KDE / Plasma package (``how``: where it came from)."""
    if RESERVED_PATTERN.search(name or ""):
        where = f" ({how})" if how else ""
        raise ReservedPackageError(f"package {name}{where} is reserved for an independent test (KDE / Plasma "
                                   "wallpapers and their kin): the corpus never takes it")


@dataclass(frozen=True)
class Source:
    package: str
    """Debian package name (``kind="deb"``) or PyPI distribution name (``kind="pypi"``)."""
    kind: str
    root: str
    """The folder of ``files`` inside the package (a .deb's data tree; a wheel's / installed distribution's root)."""
    files: tuple[str, ...]
    note: str = ""
    """What the package holds and why the rest stays out."""
    license: str = ""
    """Set only where the package's own license text names the files' license apart from its copyright file."""
    archive: str = ""
    """A zip file in the package's data tree that holds ``root`` (0 A.D.'s packed assets); empty: ``root`` lies in
    the data tree itself (Debian packages only)."""

    def paths(self) -> tuple[str, ...]:
        return tuple(f"{self.root}/{f}" for f in self.files)


def read_allowlist(path: Path = CURATED_ALLOWLIST) -> tuple[Source, ...]:
    """The sources of an allowlist file, JSON ``{"sources": [{"package", "kind" ("deb"|"pypi"), "root", "files",
    "note", "license"}]}``; every package checked not reserved."""
    try:
        blob = json.loads(Path(path).read_text())
        sources = tuple(Source(s["package"], s["kind"], s["root"].strip("/"), tuple(s["files"]), s.get("note", ""),
                               s.get("license", ""), s.get("archive", "").strip("/")) for s in blob["sources"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise AllowlistError(f"allowlist {path}: not a JSON allowlist ({e})") from None
    for s in sources:
        if s.kind not in KINDS:
            raise AllowlistError(f"allowlist {path}: {s.package}: kind must be one of {', '.join(KINDS)}, "
                                 f"got {s.kind!r}")
        check_not_reserved(s.package, f"in the allowlist {path}")
        if s.archive and s.kind != "deb":
            raise AllowlistError(f"allowlist {path}: {s.package}: an archive is read out of Debian packages only")
    return sources
