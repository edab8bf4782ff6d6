"""Real background photographs, split by photo into training and held-out sets, and random crops of them.

The embedded default is the set of real photographs that ship inside scikit-image, plus the one real photograph
among matplotlib's sample data (no download);
``directory`` points at a user's own photos instead (png / jpg / jpeg / bmp / tif / webp, any size), or at a
corpus built by ``grasp-s2r backgrounds`` (recognized by its manifest), whose photos are *added* to the embedded
training photos: they enter training and validation only, and the held-out photos stay the embedded ones.
A photo is in exactly one split, so held-out evaluation never sees a training photo.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from grasp_s2r.sim.table_texture import crop_resize
from grasp_s2r.vision.images.corpus_manifest import CorpusManifestError, is_corpus, manifest_digest, read_manifest
from grasp_s2r.vision.images.folder import quiet_imread

SPLITS = ("train", "heldout")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
"""File types accepted as user backgrounds (case-insensitive)."""
EMBEDDED_SOURCE = "skimage.data"
MATPLOTLIB_SOURCE = "matplotlib sample_data"
MATPLOTLIB_PHOTOS = {"grace_hopper": "grace_hopper.jpg"}
"""Embedded photos from matplotlib's ``mpl-data/sample_data`` (name -> file); the other files there are not photos."""
EMBEDDED_TRAIN = (
    "astronaut", "chelsea", "rocket", "grass", "brick", "hubble_deep_field", "immunohistochemistry",
    "coins", "moon", "page", "text", "retina", "clock", "cell", "grace_hopper",
)
"""Embedded photos used for training: scikit-image's (``cat`` is the same photo as ``chelsea``: not used) and
matplotlib's :data:`MATPLOTLIB_PHOTOS`."""
EMBEDDED_HELDOUT = ("coffee", "gravel", "stereo_motorcycle", "camera")
"""scikit-image photos used only for held-out evaluation."""
_EMBEDDED_NAMES = frozenset(EMBEDDED_TRAIN + EMBEDDED_HELDOUT)
MAX_PHOTO_SIDE_PX = 512
"""Photos are downscaled at load so that their longer side is at most this."""
HELDOUT_EVERY = 5
"""User photos: about one in this many (chosen by a hash of the file name) is held out."""
CORPUS_SOURCE = "grasp-s2r backgrounds corpus"
"""How a corpus is named in a split's ``source``: with its folder and its manifest's sha256 (a run's record names
the corpus it trained on, and ``--resume`` checks it)."""


class BackgroundError(ValueError):
    """A backgrounds folder that cannot be used (missing, no images, unreadable image)."""


def _as_rgb_uint8(img: np.ndarray) -> np.ndarray:
    """Any skimage/opencv image -> uint8 (H, W, 3), longer side at most MAX_PHOTO_SIDE_PX."""
    img = np.asarray(img)
    if img.dtype != np.uint8:
        img = (np.clip(img.astype(np.float64) / max(float(img.max()), 1e-9), 0, 1) * 255).astype(np.uint8)
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    img = img[:, :, :3]
    scale = MAX_PHOTO_SIDE_PX / max(img.shape[:2])
    if scale < 1.0:
        img = cv2.resize(img, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(img)


def _embedded_photo(name: str) -> np.ndarray:
    if name in MATPLOTLIB_PHOTOS:
        import matplotlib

        return _load_user_photo(Path(matplotlib.get_data_path()) / "sample_data" / MATPLOTLIB_PHOTOS[name])
    import skimage.data

    img = getattr(skimage.data, name)()
    if isinstance(img, tuple):  # stereo pairs: the left image only (the right one is a near-duplicate)
        img = img[0]
    return _as_rgb_uint8(img)


def _is_heldout_file(name: str) -> bool:
    return int(hashlib.sha1(name.encode()).hexdigest(), 16) % HELDOUT_EVERY == 0


def _user_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise BackgroundError(f"backgrounds folder {directory} " + ("is a file, not a folder of photos"
                                                                     if directory.exists() else "does not exist"))
    files = sorted(p for p in directory.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if len(files) < 2:
        raise BackgroundError(
            f"backgrounds folder {directory} needs at least 2 images ({', '.join(IMAGE_SUFFIXES)}), found {len(files)}"
        )
    return files


def split_names(directory: Path | None = None, hold_out: bool = True) -> dict[str, list[str]]:
    """The photo-level split, ``{"source": [..], "train": [names], "heldout": [names]}``, recorded in checkpoints.

    User folders: a photo is held out when a hash of its file name says so (stable when photos are
    added); the first file (sorted) moves over if a split would otherwise be empty; ``hold_out=False``: every photo
    trains, none is held out (adapting to one scene, ``grasp-s2r adapt``: its photos are the scene, and it is tested
    on other photos of it). A corpus folder (``grasp-s2r backgrounds``): the embedded split with the corpus's files
    (``package/name.jpg``) added to ``train``; the embedded held-out photos are held out whatever ``hold_out`` says.
    """
    embedded = {"source": [EMBEDDED_SOURCE, MATPLOTLIB_SOURCE], "train": list(EMBEDDED_TRAIN),
                "heldout": list(EMBEDDED_HELDOUT)}
    if directory is None:
        return embedded
    if is_corpus(directory):  # the embedded photos plus the corpus's, which enter training (and validation) only
        files = [row["file"] for row in _corpus_manifest(Path(directory))["images"]]
        corpus = f"{CORPUS_SOURCE} {Path(directory).resolve()} manifest sha256 {manifest_digest(directory)}"
        return {**embedded, "source": [*embedded["source"], corpus], "train": [*EMBEDDED_TRAIN, *files]}
    names = [p.name for p in _user_files(Path(directory))]
    if not hold_out:
        return {"source": [str(Path(directory).resolve())], "train": names, "heldout": []}
    heldout = [n for n in names if _is_heldout_file(n)]
    train = [n for n in names if not _is_heldout_file(n)]
    if not heldout:
        heldout, train = train[:1], train[1:]
    elif not train:
        train, heldout = heldout[:1], heldout[1:]
    return {"source": [str(Path(directory).resolve())], "train": train, "heldout": heldout}


def _corpus_manifest(directory: Path, verify: bool = False) -> dict:
    try:
        return read_manifest(directory, verify=verify)
    except CorpusManifestError as e:
        raise BackgroundError(str(e)) from None


def _load_user_photo(path: Path) -> np.ndarray:
    bgr = quiet_imread(path, cv2.IMREAD_COLOR)
    if bgr is None:
        raise BackgroundError(f"cannot read background image {path} (corrupt or unsupported format)")
    return _as_rgb_uint8(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))


def load_backgrounds(split: str, directory: Path | None = None, hold_out: bool = True) -> list[np.ndarray]:
    """The photos of one split (``"train"`` or ``"heldout"``), each uint8 (H, W, 3), in :func:`split_names` order
    (``hold_out``: as there)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    names = split_names(directory, hold_out)[split]
    load: Callable[[str], np.ndarray]
    if directory is None:
        load = _embedded_photo
    elif is_corpus(directory):
        _corpus_manifest(Path(directory), verify=True)  # every file as its manifest says

        def load(name: str) -> np.ndarray:
            return _embedded_photo(name) if name in _EMBEDDED_NAMES else _load_user_photo(Path(directory) / name)
    else:
        def load(name: str) -> np.ndarray:
            return _load_user_photo(Path(directory) / name)
    return [load(n) for n in names]


def photo_weights(split: str, directory: Path | None, embedded_share: float,
                  hold_out: bool = True) -> np.ndarray | None:
    """How often each photo of :func:`load_backgrounds` ``(split, directory)`` is drawn as a background: None (every
    photo equally often) for ``embedded_share`` 0; else the embedded training photos together ``embedded_share`` of
    the draws and the corpus's the rest (``train-vision --embedded-photo-share``: a corpus of hundreds of photos
    would otherwise leave the 15 embedded ones, the scenes the other conditions show, one draw in 25). Raises
    BackgroundError unless ``directory`` is a corpus (only a corpus adds photos to the embedded ones)."""
    if not 0.0 <= embedded_share < 1.0:
        raise BackgroundError(f"the embedded photos' share must be in [0, 1), got {embedded_share}")
    if embedded_share == 0.0:
        return None
    if directory is None or not is_corpus(directory):
        raise BackgroundError("an embedded-photo share needs --backgrounds to be a corpus of `grasp-s2r backgrounds` "
                              "(the embedded photos are only beside a corpus's)")
    embedded = np.array([n in _EMBEDDED_NAMES for n in split_names(directory, hold_out)[split]])
    if embedded.all():
        raise BackgroundError(f"{directory}: the corpus adds no photos to the embedded ones")
    return np.where(embedded, embedded_share / embedded.sum(), (1.0 - embedded_share) / (~embedded).sum())


random_crop = crop_resize
"""A random crop resized to ``out_hw`` (:func:`grasp_s2r.sim.table_texture.crop_resize`: one definition, in ``sim/``,
which the sim's photo table textures use too)."""


def recolor(photo_rgb: np.ndarray, rng: np.random.Generator, invert_prob: float = 0.2) -> np.ndarray:
    """A photo with its colours randomized: channel permutation, hue rotation, saturation scale, a colour cast
    (which tints grey photos too), maybe inverted.

    Optional domain randomization of the *training* backgrounds (``train-vision --recolor-prob``): real
    textures and edges in colours the 14 photos lack. Measured no better on held-out photos than without
    (docs/vision.md), hence off by default. Returns uint8 (H, W, 3).
    """
    img = np.ascontiguousarray(photo_rgb[:, :, rng.permutation(3)])
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV).astype(np.int16)
    hsv[:, :, 0] = (hsv[:, :, 0] + int(rng.integers(0, 180))) % 180
    hsv[:, :, 1] = np.clip(hsv[:, :, 1] * rng.uniform(0.5, 1.5), 0, 255)
    img = cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2RGB)
    img = np.clip(img * rng.uniform(0.6, 1.4, size=3).astype(np.float32), 0, 255).astype(np.uint8)
    return 255 - img if rng.random() < invert_prob else img


def detail_around(rgb: np.ndarray, centre_yx: tuple[int, int], window_px: int = 16) -> float:
    """Mean absolute Laplacian of the grey image in the ``window_px`` square around ``centre_yx``: how busy the
    texture is where a small sphere sits (what hides one from the segmenter; a flat surface scores 0)."""
    grey = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY).astype(np.float32)
    lap = np.abs(cv2.Laplacian(grey, cv2.CV_32F, ksize=1))
    y, x, h = int(centre_yx[0]), int(centre_yx[1]), window_px // 2
    return float(lap[max(0, y - h):y + h, max(0, x - h):x + h].mean())


def draw_photo(photos: list[np.ndarray], rng: np.random.Generator, weights: np.ndarray | None = None) -> np.ndarray:
    """One of ``photos`` at random: equally likely, or by ``weights`` (:func:`photo_weights`)."""
    if weights is None:  # the stream of runs made before weights existed
        return photos[int(rng.integers(len(photos)))]
    return photos[int(rng.choice(len(photos), p=weights))]


def busiest_crop(photos: list[np.ndarray], out_hw: tuple[int, int], rng: np.random.Generator,
                 centre_yx: tuple[int, int], tries: int = 4, weights: np.ndarray | None = None) -> np.ndarray:
    """Of ``tries`` random crops (:func:`random_crop`, each of a random photo), the one with the most detail around
    ``centre_yx`` (:func:`detail_around`): the busy textures that hide small spheres, more often (``train-vision
    --busy-background-prob``). uint8 (out_h, out_w, 3)."""
    crops = [random_crop(draw_photo(photos, rng, weights), out_hw, rng) for _ in range(tries)]
    return max(crops, key=lambda c: detail_around(c, centre_yx))
