"""The ``eval-vision --data DIR`` folder format: real or external images with hand-made masks.

Layout::

    DIR/images/<name>.png | .jpg | .jpeg     RGB (or grey) image, any size
    DIR/masks/<name>.png                     same stem, same size as its image; pixel > 0 = target,
                                             an all-zero mask = an image without a target

Every image needs a mask and every mask an image. Images are resized to the model's input
resolution (area / linear interpolation), masks with nearest-neighbour.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from pathlib import Path

import cv2
import numpy as np

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
"""Image files read from ``DIR/images`` (case-insensitive)."""
MASK_SUFFIX = ".png"


class DataFolderError(ValueError):
    """A ``--data`` folder that does not follow the format (reported as one line)."""


def _by_stem(directory: Path, suffixes: tuple[str, ...]) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for p in sorted(directory.iterdir()):
        if p.is_file() and p.suffix.lower() in suffixes:
            if p.stem in files:
                raise DataFolderError(f"two files with the stem {p.stem!r} in {directory}: {files[p.stem].name}, {p.name}")
            files[p.stem] = p
    return files


_STDERR = threading.Lock()


_DAMAGED_IMAGE = ("Corrupt JPEG data", "Premature end of JPEG file", "JPEG datastream contains no image",
                  "libpng error", "CRC error")
"""What the decoders print when they return a partly decoded image of a damaged file (a truncated or garbled
JPEG decodes to an image with a grey or scrambled part, and ``cv2.imread`` returns it)."""


def quiet_imread(path: Path, flags: int) -> np.ndarray | None:
    """``cv2.imread`` without the decoders' own lines on stderr (libjpeg's "Corrupt JPEG data: ...", OpenCV's
    warnings): a file that cannot be read, or that the decoder reports damaged (:data:`_DAMAGED_IMAGE`) though it
    returned an image, gives None, and the caller reports it in grasp_s2r's one line."""
    with _STDERR, tempfile.TemporaryFile() as said:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(said.fileno(), 2)
            img = cv2.imread(str(path), flags)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        said.seek(0)
        text = said.read().decode(errors="replace")
    return None if any(m in text for m in _DAMAGED_IMAGE) else img


def _read(path: Path, flags: int) -> np.ndarray:
    img = quiet_imread(path, flags)
    if img is None:
        raise DataFolderError(f"cannot read {path} (corrupt or not an image)")
    return img


def load_folder(directory: Path, input_hw: tuple[int, int]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Read ``directory``; returns (names, images uint8 (N, H, W, 3), masks bool (N, H, W)) at ``input_hw``."""
    directory = Path(directory)
    images_dir, masks_dir = directory / "images", directory / "masks"
    for d in (directory, images_dir, masks_dir):
        if not d.is_dir():
            raise DataFolderError(f"{d} is not a folder (expected DIR/images/ and DIR/masks/)")
    images = _by_stem(images_dir, IMAGE_SUFFIXES)
    masks = _by_stem(masks_dir, (MASK_SUFFIX,))
    if not images:
        raise DataFolderError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {images_dir}")
    if no_mask := sorted(set(images) - set(masks)):
        raise DataFolderError(f"image {images[no_mask[0]].name} has no mask {no_mask[0]}{MASK_SUFFIX} in {masks_dir}"
                              + (f" (and {len(no_mask) - 1} more)" if len(no_mask) > 1 else ""))
    if no_image := sorted(set(masks) - set(images)):
        raise DataFolderError(f"mask {masks[no_image[0]].name} has no image in {images_dir}"
                              + (f" (and {len(no_image) - 1} more)" if len(no_image) > 1 else ""))
    h, w = input_hw
    names = sorted(images)
    out_images = np.empty((len(names), h, w, 3), np.uint8)
    out_masks = np.empty((len(names), h, w), bool)
    for i, name in enumerate(names):
        bgr = _read(images[name], cv2.IMREAD_COLOR)
        mask = _read(masks[name], cv2.IMREAD_UNCHANGED)
        if mask.ndim == 3:
            mask = mask.max(axis=2)
        if mask.shape[:2] != bgr.shape[:2]:
            raise DataFolderError(f"mask {masks[name].name} is {mask.shape[1]}x{mask.shape[0]} px but its image is "
                                  f"{bgr.shape[1]}x{bgr.shape[0]} px")
        interp = cv2.INTER_AREA if bgr.shape[0] > h else cv2.INTER_LINEAR
        out_images[i] = cv2.cvtColor(cv2.resize(bgr, (w, h), interpolation=interp), cv2.COLOR_BGR2RGB)
        out_masks[i] = cv2.resize((mask > 0).astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST) > 0
    return names, out_images, out_masks
