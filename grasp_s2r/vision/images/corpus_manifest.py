"""The manifest of a background corpus (``grasp-s2r backgrounds --out DIR``): what the folder holds, read by the
builder, by :mod:`grasp_s2r.vision.images.backgrounds` (a corpus folder adds its photos to the embedded training photos)
and by the tests.

``DIR/manifest.json``::

    format, format_version, grasp_s2r_version, config (the command's), packages [{package, version, kind,
    archive, archive_sha256, images, missing}], images [{file, package, version, path, license, sha256,
    source_sha256, width, height, source_width, source_height}]

``DIR/manifest.csv`` holds the same image rows, one a line.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Any

from grasp_s2r.files import atomic_write, write_json

CORPUS_FORMAT = "grasp_s2r.backgrounds_corpus"
CORPUS_FORMAT_VERSION = 1
MANIFEST_JSON = "manifest.json"
MANIFEST_CSV = "manifest.csv"
IMAGE_FIELDS = ("file", "package", "version", "path", "license", "sha256", "source_sha256", "width", "height",
                "source_width", "source_height")


class CorpusManifestError(ValueError):
    """A corpus folder whose manifest is missing, of another format, or does not match its files."""


def is_corpus(folder: Path | str | None) -> bool:
    """Whether ``folder`` is a corpus built by ``grasp-s2r backgrounds`` (it holds a manifest.json)."""
    return folder is not None and (Path(folder) / MANIFEST_JSON).is_file()


def sha256_of(path: Path | str) -> str:
    """The full sha256 (hex) of a file, read in chunks (a .deb may be 600 MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    write_json(folder / MANIFEST_JSON, manifest, indent=1)
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=IMAGE_FIELDS)
    writer.writeheader()
    writer.writerows(manifest["images"])
    atomic_write(folder / MANIFEST_CSV, text.getvalue().encode())


def manifest_digest(folder: Path | str) -> str:
    """sha256 of ``manifest.json``'s bytes: names the corpus in a training run's record."""
    return hashlib.sha256((Path(folder) / MANIFEST_JSON).read_bytes()).hexdigest()


def read_manifest(folder: Path | str, verify: bool = False) -> dict[str, Any]:
    """The manifest of the corpus in ``folder``; ``verify``: each image file's sha256 checked against it."""
    path = Path(folder) / MANIFEST_JSON
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CorpusManifestError(f"cannot read corpus manifest {path}: {e}") from None
    if manifest.get("format") != CORPUS_FORMAT or manifest.get("format_version") != CORPUS_FORMAT_VERSION:
        raise CorpusManifestError(f"{path} is not a {CORPUS_FORMAT} manifest of version {CORPUS_FORMAT_VERSION}")
    if verify:
        for row in manifest["images"]:
            f = Path(folder) / row["file"]
            if not f.is_file() or sha256_of(f) != row["sha256"]:
                raise CorpusManifestError(f"corpus file {f} is missing or differs from its manifest "
                                          "(rebuild the corpus with grasp-s2r backgrounds)")
    return manifest
