"""Mined backgrounds: crops of the training photos on which a segmenter fires, though no sphere is there.

A photo crop holds no sphere, so whatever a segmenter marks on it is a false detection: a lure of those photos (a
flower, a rounded tip, a spot in a sphere's colours). Before a fine-tune (``train-vision --mined-crop-prob``,
``grasp-s2r adapt``), :func:`mine_crops` cuts ``crops_per_photo`` random crops of every training photo, as the
composites cut their backgrounds (:func:`backgrounds.random_crop`), runs the starting segmenter on them and keeps
those it fires on. The composites then draw a share of their photo backgrounds from the kept ones
(:meth:`MinedCrops.crop`; the sphere is pasted on as on any crop): the network is shown its own lures, on the photos it
trains on, where a random crop shows it one now and then.

A crop is named by (photo, draw), the seed of its random generator: the list of hits is a few numbers and re-makes
the same pixels. It is written beside the run (:data:`MINED_FILE`, with what made it) and read back on ``--resume``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from grasp_s2r.files import write_json
from grasp_s2r.vision.images.backgrounds import random_crop

MINED_FILE = "mined_crops.json"
MINED_PICTURE = "mined_crops.png"
"""Beside it: some of the kept crops, each beside itself with what the segmenter marked on it, to look at."""
MINED_FORMAT = "grasp_s2r.mined_crops"
MINED_FORMAT_VERSION = 1
MINE_STREAM = 7
"""Part of every mined crop's seed: no other random stream of the composites uses it."""


def crop_rng(seed: int, photo_index: int, draw: int) -> np.random.Generator:
    """The random generator of crop ``draw`` of photo ``photo_index`` (what :func:`random_crop` draws from)."""
    return np.random.default_rng([seed, MINE_STREAM, photo_index, draw])


@dataclass(frozen=True)
class MinedCrops:
    """The crops a segmenter fired on, and what made the list."""

    hits: tuple[tuple[int, int], ...]
    """(photo index, draw) of each crop it fired on; photo indices into the run's training photos, in order."""
    photos: int
    """How many photos were mined (the run's training photos)."""
    crops_per_photo: int
    """Random crops cut from each photo."""
    seed: int
    """Seed of the crops (:func:`crop_rng`)."""
    image_px: int
    """Side of the square crops, the network's input."""
    segmenter_sha256: str
    """:func:`grasp_s2r.files.file_sha256` of the segmenter that was run (the fine-tune's starting weights)."""
    threshold: float
    """The segmenter's threshold: a crop is kept when any pixel's probability is above it."""

    @property
    def hit_rate(self) -> float:
        """Share of the crops cut that the segmenter fired on."""
        return len(self.hits) / max(1, self.photos * self.crops_per_photo)

    def crop(self, photos: list[np.ndarray], index: int) -> np.ndarray:
        """Hit ``index`` re-made from ``photos`` (the run's training photos), uint8 (image_px, image_px, 3)."""
        photo_index, draw = self.hits[index]
        return random_crop(photos[photo_index], (self.image_px, self.image_px),
                           crop_rng(self.seed, photo_index, draw))

    def write(self, path: Path) -> None:
        blob = {"format": MINED_FORMAT, "format_version": MINED_FORMAT_VERSION, **asdict(self),
                "hits": [list(h) for h in self.hits], "hit_rate": round(self.hit_rate, 4)}
        write_json(Path(path), blob, indent=1)

    @classmethod
    def read(cls, path: Path) -> MinedCrops:
        blob = json.loads(Path(path).read_text())
        if blob.get("format") != MINED_FORMAT or blob.get("format_version") != MINED_FORMAT_VERSION:
            raise ValueError(f"{path} is not a mined-crops file of format version {MINED_FORMAT_VERSION}")
        fields = {k: blob[k] for k in cls.__dataclass_fields__}
        return cls(**{**fields, "hits": tuple((int(p), int(d)) for p, d in blob["hits"])})


def mine_crops(segmenter_path: Path | str, photos: list[np.ndarray], *, image_px: int, crops_per_photo: int,
               seed: int, device: str | None = None, batch_size: int = 256, progress: bool = True) -> MinedCrops:
    """Cut ``crops_per_photo`` random crops of each photo, run the segmenter of ``segmenter_path`` on them and keep
    those on which it marks any pixel (see the module docstring)."""
    from grasp_s2r.vision.networks.segmenter import Segmenter

    if crops_per_photo < 1:
        raise ValueError(f"crops_per_photo must be >= 1, got {crops_per_photo}")
    segmenter = Segmenter.load(segmenter_path, device=device)
    keys = [(p, d) for p in range(len(photos)) for d in range(crops_per_photo)]
    hits: list[tuple[int, int]] = []
    for start in tqdm(range(0, len(keys), batch_size), desc="mining false detections", unit="batch", leave=False,
                      disable=not progress or len(keys) <= batch_size):
        batch = keys[start:start + batch_size]
        crops = np.stack([random_crop(photos[p], (image_px, image_px), crop_rng(seed, p, d)) for p, d in batch])
        fired = (segmenter.predict_proba(crops) > segmenter.threshold).any(axis=(1, 2))
        hits.extend(k for k, f in zip(batch, fired) if f)
    assert segmenter.checkpoint_sha256 is not None
    return MinedCrops(hits=tuple(hits), photos=len(photos), crops_per_photo=crops_per_photo, seed=seed,
                      image_px=image_px, segmenter_sha256=segmenter.checkpoint_sha256,
                      threshold=float(segmenter.threshold))


def load_or_mine(path: Path, segmenter_path: Path | str, photos: list[np.ndarray], *, image_px: int,
                 crops_per_photo: int, seed: int, device: str | None = None, progress: bool = True) -> MinedCrops:
    """The mined crops of ``path`` when it records this very mining (a resumed run), else mined now and written
    there."""
    from grasp_s2r.files import file_sha256

    # what defines a mining (its threshold is the segmenter's, which its sha256 names)
    wanted = {"photos": len(photos), "crops_per_photo": crops_per_photo, "seed": seed, "image_px": image_px,
              "segmenter_sha256": file_sha256(segmenter_path)}
    if Path(path).is_file():
        saved = MinedCrops.read(path)
        if all(getattr(saved, k) == v for k, v in wanted.items()):
            return saved
    mined = mine_crops(segmenter_path, photos, image_px=image_px, crops_per_photo=crops_per_photo, seed=seed,
                       device=device, progress=progress)
    mined.write(path)
    return mined


def save_mined_picture(mined: MinedCrops, segmenter_path: Path | str, photos: list[np.ndarray], path: Path,
                       device: str | None = None, count: int = 32) -> None:
    """Up to ``count`` of the kept crops, spread over the list, each beside its copy with the segmenter's mask tinted
    (``drawing.save_composite_grid``)."""
    from grasp_s2r.drawing import save_composite_grid
    from grasp_s2r.vision.networks.segmenter import Segmenter

    picks = np.unique(np.linspace(0, len(mined.hits) - 1, min(count, len(mined.hits))).round().astype(int))
    crops = np.stack([mined.crop(photos, int(i)) for i in picks])
    save_composite_grid(list(zip(crops, Segmenter.load(segmenter_path, device=device).predict(crops))), path)


def run_mined_crops(out_dir: Path, segmenter_path: str, photos: list[np.ndarray], *, share: float, image_px: int,
                    crops_per_photo: int, seed: int, device: str | None, progress: bool) -> MinedCrops | None:
    """A training run's mined crops (``OUT/mined_crops.json``, mined once from ``segmenter_path``, the run's starting
    weights; ``OUT/mined_crops.png``) when its recipe draws a ``share`` > 0 of its backgrounds from them, with a line
    saying how many; else None."""
    if share <= 0:
        return None
    mined = load_or_mine(Path(out_dir) / MINED_FILE, segmenter_path, photos, image_px=image_px,
                         crops_per_photo=crops_per_photo, seed=seed, device=device, progress=progress)
    if mined.hits and not (Path(out_dir) / MINED_PICTURE).is_file():
        save_mined_picture(mined, segmenter_path, photos, Path(out_dir) / MINED_PICTURE, device=device)
    print(f"train-vision: the starting segmenter fires on {len(mined.hits)} of {mined.photos * mined.crops_per_photo} "
          f"random crops of the training photos ({mined.hit_rate:.1%}); {share:.0%} of the photo backgrounds are "
          "drawn from them" + ("" if mined.hits else ": none, so every one is a random crop"))
    return mined
