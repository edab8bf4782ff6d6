"""The colour augmentations off by default (``train-vision --randconv-prob``, ``--greyscale-prob``) and the hue
turn (``--hue``): what a random convolution does to an image, that it leaves the mask alone, grey composites, that
the recipe without them draws exactly as before, and a hue turn that moves the sphere's and the table's colours
together."""

import dataclasses

import numpy as np
import pytest

from grasp_s2r.vision.images.augment import (
    AugmentConfig,
    Augmenter,
    build_augment,
    random_convolution,
)


def _image(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random((32, 32, 3)) * 200 + 20).astype(np.uint8)


def _mask(y: int, x: int) -> np.ndarray:
    mask = np.zeros((32, 32), bool)
    mask[y:y + 4, x:x + 3] = True
    return mask


def _only(**probs: float) -> Augmenter:
    """An augmenter with every default transform off but those named."""
    return Augmenter(AugmentConfig(color_jitter_prob=0.0, noise_prob=0.0, blur_prob=0.0, jpeg_prob=0.0,
                                   affine_prob=0.0, **probs))


def test_identity_filter_gives_the_image_back():
    identity = np.zeros((3, 3, 3, 3), np.float32)
    for c in range(3):
        identity[c, c, 1, 1] = 1.0
    img = _image()
    for alpha in (0.0, 0.4, 1.0):
        assert np.abs(random_convolution(img, identity, alpha).astype(int) - img).max() <= 1


def test_channel_swap_filter_swaps_the_colours():
    """A 1 px filter that maps red to blue and blue to red (a colour mixing; the spread is kept) swaps them."""
    swap = np.zeros((3, 3, 1, 1), np.float32)
    swap[0, 2], swap[1, 1], swap[2, 0] = 1.0, 1.0, 1.0
    img = _image(1)
    out = random_convolution(img, swap, 0.0).astype(int)
    assert np.abs(out - img[..., ::-1]).max() <= 1


def test_a_3px_filter_changes_texture_but_keeps_mean_and_spread():
    rng = np.random.default_rng(2)
    weights = rng.normal(0, 1 / np.sqrt(27), (3, 3, 3, 3)).astype(np.float32)
    img = _image(2)
    out = random_convolution(img, weights, 0.0).astype(np.float32)
    assert abs(out.mean() - img.mean()) < 3.0 and abs(out.std() - img.std()) < 3.0
    assert np.abs(out - img).mean() > 10.0


def test_the_mask_is_untouched_and_a_seed_repeats():
    img, mask, aug = _image(3), _mask(10, 12), _only(randconv_prob=1.0)
    a, ma = aug(img, mask, seed=7)
    b, mb = aug(img, mask, seed=7)
    c, _ = aug(img, mask, seed=8)
    assert np.array_equal(ma, mask) and np.array_equal(mb, mask)
    assert np.array_equal(a, b) and not np.array_equal(a, c) and not np.array_equal(a, img)


def test_off_by_default_and_not_in_the_pipeline():
    """With the probability 0 a transform is left out, so the other transforms draw as they always did."""
    assert AugmentConfig().randconv_prob == 0.0 and AugmentConfig().greyscale_prob == 0.0
    default = build_augment(AugmentConfig()).transforms
    names = [type(t).__name__ for t in default]  # albumentations is imported through augment.py, which silences
    assert "RandomConvolution" not in names and "ToGray" not in names  # its update check first
    on = [type(t).__name__ for t in
          build_augment(dataclasses.replace(AugmentConfig(), randconv_prob=0.5, greyscale_prob=0.3)).transforms]
    assert on.count("RandomConvolution") == 1 and on.count("ToGray") == 1
    assert len(on) == len(default) + 2


def test_gray_composites_keep_no_chroma_and_the_mask():
    img, mask = _image(4), _mask(5, 20)
    out, m = _only(greyscale_prob=1.0)(img, mask, seed=3)
    assert out.shape == img.shape and np.array_equal(m, mask)
    assert np.array_equal(out[..., 0], out[..., 1]) and np.array_equal(out[..., 1], out[..., 2])
    luminance = img.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)
    assert np.abs(out[..., 0].astype(np.float32) - luminance).max() <= 1.5


@pytest.mark.parametrize("kwargs, message", [
    ({"randconv_prob": 1.5}, "randconv_prob must be in [0, 1], got 1.5"),
    ({"greyscale_prob": -0.1}, "greyscale_prob must be in [0, 1], got -0.1"),
    ({"randconv_kernels_px": (2,)}, "randconv_kernels_px must be odd sizes >= 1"),
    ({"randconv_kernels_px": ()}, "randconv_kernels_px must be odd sizes >= 1"),
])
def test_bad_values_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        AugmentConfig(**kwargs)


def _hues(rgb: np.ndarray) -> tuple[int, int]:
    """OpenCV hues (0-179) of the left and right halves' centres."""
    import cv2

    hsv = cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV)
    return int(hsv[16, 8, 0]), int(hsv[16, 24, 0])


def test_hue_turns_the_sphere_and_the_table_together_as_far_as_asked():
    """``train-vision --hue``: the colour jitter's hue turn, applied to the whole composite, moves both halves of an
    image by the same angle; 0.5 reaches around the colour circle, the recipe's 0.05 within 18 degrees."""
    img = np.zeros((32, 32, 3), np.uint8)
    img[:, :16], img[:, 16:] = (200, 40, 40), (40, 160, 200)  # a red sphere's colour, a blue-cyan table's
    left0, right0 = _hues(img)

    def turns(hue: float) -> list[int]:
        aug = Augmenter(AugmentConfig(color_jitter_prob=1.0, brightness=0.0, contrast=0.0, saturation=0.0, hue=hue,
                                      noise_prob=0.0, blur_prob=0.0, jpeg_prob=0.0, affine_prob=0.0))
        out = []
        for seed in range(40):
            left, right = _hues(aug(img, _mask(0, 0), seed=seed)[0])
            d_left, d_right = (left - left0) % 180, (right - right0) % 180
            assert min(abs(d_left - d_right), 180 - abs(d_left - d_right)) <= 2  # turned together
            out.append(min(d_left, 180 - d_left))
        return out

    assert max(turns(0.05)) <= 10  # OpenCV hue units of 2 degrees: 0.05 of the circle is 9
    assert max(turns(0.5)) >= 60


@pytest.mark.parametrize("hue", [-0.1, 0.6, float("nan")])
def test_a_hue_turn_past_half_the_circle_is_refused(hue):
    with pytest.raises(ValueError, match="hue must be in"):
        AugmentConfig(hue=hue)
