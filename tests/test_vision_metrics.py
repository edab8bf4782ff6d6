"""Metric arithmetic on hand-made masks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grasp_s2r.vision.evaluation.metrics import confusion_counts, format_table, pixel_metrics


def _masks() -> tuple[np.ndarray, np.ndarray]:
    """Three 4x4 images: partial hit, target-free with a false detection, target-free and clean."""
    pred = np.zeros((3, 4, 4), bool)
    target = np.zeros((3, 4, 4), bool)
    target[0, 0, 0:4] = True  # 4 target pixels
    pred[0, 0, 0:2] = True  # 2 TP
    pred[0, 1, 0] = True  # 1 FP  -> image 0: TP 2, FP 1, FN 2
    pred[1, 3, 3] = True  # image 1: no target, 1 FP
    return pred, target


def test_counts_by_hand():
    c = confusion_counts(*_masks())
    assert c.tp.tolist() == [2, 0, 0]
    assert c.fp.tolist() == [1, 1, 0]
    assert c.fn.tolist() == [2, 0, 0]


def test_micro_and_mean_metrics_by_hand():
    m = pixel_metrics(*_masks())
    # micro: TP 2, FP 2, FN 2
    assert m["precision"] == pytest.approx(2 / 4)
    assert m["recall"] == pytest.approx(2 / 4)
    assert m["iou"] == pytest.approx(2 / 6)
    assert m["f1"] == pytest.approx(4 / 8)
    # per image: precision defined on images 0 (2/3) and 1 (0); recall only on image 0 (2/4)
    assert m["mean_precision"] == pytest.approx((2 / 3 + 0) / 2)
    assert m["mean_recall"] == pytest.approx(0.5)
    assert m["mean_iou"] == pytest.approx((2 / 5 + 0) / 2)
    assert m["found_rate"] == 1.0
    assert m["false_detection_rate"] == pytest.approx(1 / 2)
    assert (m["images"], m["target_images"], m["empty_images"]) == (3, 1, 2)


def test_detection_threshold_and_undefined_values():
    pred, target = _masks()
    m = pixel_metrics(pred, target, min_detection_px=3)
    assert m["found_rate"] == 0.0  # only 2 TP pixels
    assert m["false_detection_rate"] == 0.0  # only 1 FP pixel on the target-free image
    empty = pixel_metrics(np.zeros((2, 3, 3), bool), np.zeros((2, 3, 3), bool))
    assert math.isnan(empty["precision"]) and math.isnan(empty["recall"]) and math.isnan(empty["found_rate"])
    assert empty["false_detection_rate"] == 0.0


def test_perfect_prediction_and_single_image():
    _, target = _masks()
    m = pixel_metrics(target, target)
    assert m["precision"] == m["recall"] == m["iou"] == m["f1"] == 1.0
    assert pixel_metrics(target[0], target[0])["images"] == 1
    assert "pixel precision" in format_table(m, "t")


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shapes differ"):
        confusion_counts(np.zeros((2, 3, 3), bool), np.zeros((2, 3, 4), bool))


def test_per_image_dice_weighs_a_missed_small_sphere_like_a_large_one():
    import torch

    from grasp_s2r.vision.training.train_config import segmentation_loss

    target = torch.zeros(2, 1, 16, 16)
    target[0, 0, :12, :12] = 1.0  # large sphere, predicted perfectly
    target[1, 0, 15, 15] = 1.0  # one-pixel sphere, missed entirely
    logits = torch.where(target[0:1].bool(), 20.0, -20.0).repeat(2, 1, 1, 1)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, target).item()
    batch = segmentation_loss(logits, target, dice_weight=1.0).item() - bce
    per_image = segmentation_loss(logits, target, dice_weight=1.0, per_image=True).item() - bce
    assert batch == pytest.approx(1 - (2 * 144 + 1) / (288 + 145 + 1), abs=1e-4)  # the miss barely counts
    # per image: image 0 scores 0; image 1 predicts 144 false pixels and misses its one: 1 - 1/146
    assert per_image == pytest.approx(0.5 * (1 - 1 / (144 + 1 + 1)), abs=1e-4)
    assert per_image > 1.4 * batch


def _disc(hw: int, cx: float, cy: float, diameter: float) -> np.ndarray:
    yy, xx = np.mgrid[0:hw, 0:hw] + 0.5
    return (xx - cx) ** 2 + (yy - cy) ** 2 < (diameter / 2) ** 2


def test_size_balanced_loss_makes_a_missed_3_px_sphere_cost_as_much_as_a_missed_11_px_one():
    import torch

    from grasp_s2r.vision.training.train_config import BALANCE_REFERENCE_PX, segmentation_loss, sphere_pixel_weights

    small, large = _disc(32, 8.0, 8.0, 3.2), _disc(32, 20.0, 20.0, 11.0)
    target = torch.from_numpy(np.stack([small, large])[:, None].astype(np.float32))
    w = sphere_pixel_weights(target)
    assert float((w * target)[0].sum()) == pytest.approx(BALANCE_REFERENCE_PX)
    assert float((w * target)[1].sum()) == pytest.approx(BALANCE_REFERENCE_PX)
    assert torch.all(w[target == 0] == 1.0)

    def loss_missing(image: int, balanced: bool) -> float:
        logits = torch.where(target > 0, 12.0, -12.0)
        logits[image] = -12.0  # this image's sphere missed, the other found
        return segmentation_loss(logits, target, dice_weight=1.0, size_balanced=balanced).item()

    assert loss_missing(0, True) == pytest.approx(loss_missing(1, True), rel=1e-4)
    assert loss_missing(1, False) > 5 * loss_missing(0, False)  # unbalanced: the large miss dominates


def test_metrics_by_width_bins_spheres_by_the_width_of_their_area():
    from grasp_s2r.vision.evaluation.metrics import mask_width_px, metrics_by_width

    target = np.stack([_disc(32, 16, 16, d) for d in (2.5, 3.5, 5.0, 7.0, 10.0, 14.0)] + [np.zeros((32, 32), bool)])
    widths = mask_width_px(target)
    assert np.allclose(widths[:6], [2.5, 3.5, 5.0, 7.0, 10.0, 14.0], atol=0.7) and widths[6] == 0
    pred = target.copy()
    pred[0] = False  # the smallest missed
    pred[4] &= np.arange(32)[None, :] < 16  # half of the 10 px one
    rows = {r["width_px"]: r for r in metrics_by_width(pred, target)}
    assert set(rows) == {"0-3", "3-4", "4-6", "6-9", "9-12", ">= 12", "< 6", ">= 6"}
    assert rows["0-3"]["found_rate"] == 0.0 and rows["0-3"]["images"] == 1
    assert rows["9-12"]["found_rate"] == 1.0 and 0.4 < rows["9-12"]["recall"] < 0.6
    assert rows["< 6"]["images"] == 3 and rows["< 6"]["found_rate"] == pytest.approx(2 / 3)
    assert rows[">= 6"]["images"] == 3 and rows[">= 6"]["found_rate"] == 1.0


def test_hard_share_averages_the_bce_over_the_hardest_images_only():
    import torch
    import torch.nn.functional as F

    from grasp_s2r.vision.training.train_config import segmentation_loss

    torch.manual_seed(0)
    target = torch.from_numpy(np.stack([_disc(32, 16.0, 16.0, r) for r in (2.0, 3.0, 5.0, 8.0)])[:, None]
                              .astype(np.float32))
    logits = torch.where(target > 0, 6.0, -6.0).requires_grad_(False).clone()
    logits[1] = -6.0  # image 1 misses its sphere: the hardest
    logits[3] += torch.randn_like(logits[3])  # image 3 a little unsure
    per_image = F.binary_cross_entropy_with_logits(logits, target, reduction="none").mean((1, 2, 3))
    dice_only = segmentation_loss(logits, target, dice_weight=1.0).item() - F.binary_cross_entropy_with_logits(
        logits, target).item()
    # every image: the recipe's loss; half: the two hardest images' BCE
    assert segmentation_loss(logits, target, 1.0, hard_share=1.0).item() == pytest.approx(
        segmentation_loss(logits, target, 1.0).item())
    hard = segmentation_loss(logits, target, 1.0, hard_share=0.5).item() - dice_only
    assert hard == pytest.approx(float(per_image.topk(2).values.mean()), rel=1e-5)
    # the easy images get no gradient from the BCE
    x = logits.clone().requires_grad_(True)
    segmentation_loss(x, target, dice_weight=0.0, hard_share=0.25).backward()
    assert x.grad[1].abs().sum() > 0 and x.grad[[0, 2, 3]].abs().sum() == 0


def test_ranking_loss_charges_a_sphere_the_busiest_spot_out_ranks_and_the_spot_on_a_sphere_free_image():
    """--rank-weight: per image, the sphere's pixels against every other pixel and a 'no sphere' logit of 0. A sphere
    above every other pixel and above 0 costs little; the same sphere out-ranked by one spot of the image costs about
    the difference of their logits less the log of its pixel count (a 3 x 3 px sphere about 2 more than a 9 x 9 px
    one, where the BCE's mean charges it nine times less); a sphere-free image costs what its highest logit rises
    above 0; the gradient is finite everywhere, sphere-free images included."""
    import torch

    from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, TrainError, ranking_loss, segmentation_loss

    def image(sphere_px: int, sphere_logit: float, spot_logit: float) -> tuple[torch.Tensor, torch.Tensor]:
        logits, target = torch.full((1, 1, 32, 32), -10.0), torch.zeros(1, 1, 32, 32)
        if sphere_px:
            target[0, 0, 4:4 + sphere_px, 4:4 + sphere_px] = 1
            logits[target > 0] = sphere_logit
        logits[0, 0, 25, 25] = spot_logit
        return logits, target

    assert ranking_loss(*image(3, 6.0, -10.0)).item() < 0.01
    small, large = ranking_loss(*image(3, -4.0, 2.0)).item(), ranking_loss(*image(9, -4.0, 2.0)).item()
    assert 6.0 - math.log(9) - 0.1 < small and large > 6.0 - math.log(81) - 0.1 and small - large < math.log(9) + 0.1
    assert ranking_loss(*image(0, 0.0, 3.0)).item() == pytest.approx(math.log(1 + math.exp(3.0)), abs=0.01)
    assert ranking_loss(*image(0, 0.0, -10.0)).item() < 0.05  # 1024 pixels at -10: log(1 + 1024 e^-10)
    logits = torch.cat([image(3, -4.0, 2.0)[0], image(0, 0.0, 3.0)[0]]).requires_grad_(True)
    target = torch.cat([image(3, -4.0, 2.0)[1], image(0, 0.0, 3.0)[1]])
    ranking_loss(logits, target).backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[0, 0, 4, 4] < 0 < logits.grad[1, 0, 25, 25]
    cfg = SegmenterTrainConfig(rank_weight=0.5)
    x, y = image(3, -4.0, 2.0)
    assert cfg.loss(x, y).item() == pytest.approx(segmentation_loss(x, y, 1.0).item() + 0.5 * ranking_loss(x, y).item())
    with pytest.raises(TrainError, match="rank_weight"):
        SegmenterTrainConfig(rank_weight=-1.0)
