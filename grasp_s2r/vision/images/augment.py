"""Photometric and geometric augmentation of a composite, applied to image and mask together (albumentations)."""

from __future__ import annotations

import os
from dataclasses import dataclass

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # albumentations asks PyPI for a newer version on import
import albumentations as A
import cv2
import numpy as np


@dataclass(frozen=True)
class AugmentConfig:
    """Augmentation of composites; each ``*_prob`` is the probability that the transform is applied."""

    color_jitter_prob: float = 0.8
    """Brightness / contrast / saturation / hue jitter."""
    brightness: float = 0.35
    """Max relative brightness change."""
    contrast: float = 0.35
    """Max relative contrast change."""
    saturation: float = 0.4
    """Max relative saturation change."""
    hue: float = 0.05
    """Max hue shift (fraction of the colour circle, at most 0.5: any hue), the sphere and the table turned together
    (``train-vision --hue``)."""
    noise_prob: float = 0.4
    """Additive Gaussian sensor noise."""
    noise_std: tuple[float, float] = (0.01, 0.06)
    """Range of the noise standard deviation, as a fraction of the full range."""
    blur_prob: float = 0.3
    """Gaussian or motion blur (defocus, moving camera)."""
    jpeg_prob: float = 0.4
    """JPEG compression artefacts."""
    jpeg_quality: tuple[int, int] = (30, 95)
    """Range of the JPEG quality."""
    affine_prob: float = 0.5
    """Small affine warp of image and mask together."""
    affine_scale: tuple[float, float] = (0.9, 1.1)
    """Range of the affine scale."""
    affine_rotate_deg: float = 8.0
    """Max absolute affine rotation."""
    affine_translate: float = 0.06
    """Max absolute affine translation, as a fraction of the image size."""
    randconv_prob: float = 0.0
    """Random convolution of the whole composite (:class:`RandomConvolution`; Xu et al., ICLR 2021): its colours
    and fine texture remapped by a random filter, the sphere with them. Training only (``train-vision
    --randconv-prob``); 0: the transform is not in the pipeline, so the other transforms draw as before."""
    randconv_kernels_px: tuple[int, ...] = (1, 3)
    """Side lengths (odd, px) the random filter's side is drawn from; 1 is a random colour mixing per pixel."""
    greyscale_prob: float = 0.0
    """The whole composite in grey (luminance in all three channels): the sphere must be found without its chroma,
    by its shading, highlight and outline. Training only (``train-vision --greyscale-prob``); 0: not in the pipeline."""

    def __post_init__(self) -> None:
        for name in ("color_jitter_prob", "noise_prob", "blur_prob", "jpeg_prob", "affine_prob", "randconv_prob",
                     "greyscale_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not self.randconv_kernels_px or any(k < 1 or k % 2 == 0 for k in self.randconv_kernels_px):
            raise ValueError(f"randconv_kernels_px must be odd sizes >= 1, got {self.randconv_kernels_px}")
        if not 0.0 <= self.hue <= 0.5:
            raise ValueError(f"hue must be in [0, 0.5] (a fraction of the colour circle), got {self.hue}")


NO_AUGMENT = AugmentConfig(color_jitter_prob=0.0, noise_prob=0.0, blur_prob=0.0, jpeg_prob=0.0, affine_prob=0.0)
"""Every transform off: composites exactly as pasted."""


class RandomConvolution(A.ImageOnlyTransform):
    """The image through a random convolution, 3 channels in and out (RandConv: Xu, Liu, Wang & Niethammer,
    "Robust and generalizable visual representation learning via random convolutions", ICLR 2021).

    The filter's side is drawn from ``kernels_px``, its weights from N(0, 1 / (side^2 * 3)) (He initialisation, so
    an image keeps its scale); the output is set to the input's mean and spread over all pixels and channels, then
    blended with the input by a uniform alpha: ``alpha * image + (1 - alpha) * convolved``. The same filter acts on
    the sphere and on the table, so their colours and fine texture change together; what stays is the shape and the
    contrast of one against the other."""

    def __init__(self, kernels_px: tuple[int, ...] = (1, 3), p: float = 0.5):
        super().__init__(p=p)
        self.kernels_px = tuple(int(k) for k in kernels_px)

    def get_params(self) -> dict[str, object]:
        side = self.py_random.choice(self.kernels_px)
        weights = self.random_generator.normal(0.0, 1.0 / np.sqrt(side * side * 3), size=(3, 3, side, side))
        return {"weights": weights.astype(np.float32), "alpha": self.py_random.random()}

    def apply(self, img: np.ndarray, weights: np.ndarray, alpha: float, **params: object) -> np.ndarray:
        return random_convolution(img, weights, alpha)

    def get_transform_init_args_names(self) -> tuple[str, ...]:
        return ("kernels_px",)


def random_convolution(rgb_uint8: np.ndarray, weights: np.ndarray, alpha: float) -> np.ndarray:
    """``rgb_uint8`` (H, W, 3) through the filter ``weights`` (out 3, in 3, side, side; reflected borders), the
    result moved to the input's mean and spread, blended: ``alpha * image + (1 - alpha) * result`` (uint8)."""
    x = rgb_uint8.astype(np.float32)
    y = np.zeros_like(x)
    for o in range(3):
        for i in range(3):
            y[..., o] += cv2.filter2D(x[..., i], -1, weights[o, i], borderType=cv2.BORDER_REFLECT_101)
    y = (y - y.mean()) / (y.std() + 1e-6) * x.std() + x.mean()
    return np.clip(alpha * x + (1.0 - alpha) * y, 0, 255).astype(np.uint8)


def build_augment(cfg: AugmentConfig) -> A.Compose:
    """The albumentations pipeline for ``cfg``; reseed it per sample with ``set_random_seed``."""
    randconv = [RandomConvolution(cfg.randconv_kernels_px, p=cfg.randconv_prob)] if cfg.randconv_prob else []
    greyscale = [A.ToGray(num_output_channels=3, p=cfg.greyscale_prob)] if cfg.greyscale_prob else []
    return A.Compose([
        A.Affine(scale=cfg.affine_scale, rotate=(-cfg.affine_rotate_deg, cfg.affine_rotate_deg),
                 translate_percent=(-cfg.affine_translate, cfg.affine_translate), interpolation=cv2.INTER_LINEAR,
                 mask_interpolation=cv2.INTER_NEAREST, border_mode=cv2.BORDER_REFLECT_101, p=cfg.affine_prob),
        *randconv,
        A.ColorJitter(brightness=cfg.brightness, contrast=cfg.contrast, saturation=cfg.saturation, hue=cfg.hue,
                      p=cfg.color_jitter_prob),
        *greyscale,
        A.OneOf([A.GaussianBlur(blur_limit=(3, 3), sigma_limit=(0.3, 0.9)), A.MotionBlur(blur_limit=(3, 3))],
                p=cfg.blur_prob),
        A.GaussNoise(std_range=cfg.noise_std, p=cfg.noise_prob),
        A.ImageCompression(quality_range=cfg.jpeg_quality, p=cfg.jpeg_prob),
    ], seed=0)


class Augmenter:
    """Applies :func:`build_augment` reproducibly: the same seed gives the same image and mask."""

    def __init__(self, cfg: AugmentConfig):
        self.cfg = cfg
        self._pipeline = build_augment(cfg)

    def __call__(self, rgb_uint8: np.ndarray, mask: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """(uint8 (H, W, 3), bool (H, W)) -> the same, augmented; the mask follows every geometric change."""
        self._pipeline.set_random_seed(int(seed))
        out = self._pipeline(image=rgb_uint8, mask=mask.astype(np.uint8))
        return out["image"], out["mask"].astype(bool)

    def with_masks(self, rgb_uint8: np.ndarray, masks: list[np.ndarray],
                   seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """:meth:`__call__` with several masks, each following every geometric change: the same image, and the same
        first mask, as ``self(rgb_uint8, masks[0], seed)``."""
        self._pipeline.set_random_seed(int(seed))
        out = self._pipeline(image=rgb_uint8, mask=masks[0].astype(np.uint8),
                             masks=[m.astype(np.uint8) for m in masks[1:]])
        return out["image"], [out["mask"].astype(bool), *(m.astype(bool) for m in out.get("masks", []))]
