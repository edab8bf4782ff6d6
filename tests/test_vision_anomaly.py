"""The colour-anomaly maps a U-Net may read beside the colours (``vision/networks/anomaly.py``, ``train-vision
--anomaly``): each pixel's Mahalanobis distance from the colours of the ring around it, and a network that starts
from a checkpoint without them computing what it computed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grasp_s2r.vision.networks.anomaly import ANOMALY_WINDOWS_PX, NOISE_VAR, SCALE, local_anomaly
from grasp_s2r.vision.networks.model import UNet
from grasp_s2r.vision.networks.widen import load_widened
from grasp_s2r.vision.training.starting_weights import widens
from grasp_s2r.vision.training.train import TrainError
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig


def _brute_force(x: torch.Tensor, n: int, y: int, x0: int, window: int, guard: int) -> float:
    """The map at one pixel from its ring's colours listed one by one (pixels past the image's edge left out)."""
    h, w = x.shape[2:]
    ring = [x[n, :, yy, xx] for yy in range(y - window // 2, y + window // 2 + 1)
            for xx in range(x0 - window // 2, x0 + window // 2 + 1)
            if 0 <= yy < h and 0 <= xx < w and not (abs(yy - y) <= guard // 2 and abs(xx - x0) <= guard // 2)]
    pts = torch.stack(ring).double()
    mu = pts.mean(0)
    cov = (pts - mu).T @ (pts - mu) / len(pts) + NOISE_VAR * torch.eye(3, dtype=torch.float64)
    d = x[n, :, y, x0].double() - mu
    return float(SCALE * torch.log1p(d @ torch.linalg.solve(cov, d)))


@pytest.mark.parametrize("k, window, guard", [(0, 9, 3), (1, 15, 5)])
@pytest.mark.parametrize("pixel", [(1, 30, 20), (0, 0, 0), (1, 63, 2)])
def test_each_map_is_the_mahalanobis_distance_from_the_ring_around_the_pixel(k, window, guard, pixel):
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    maps = local_anomaly(x, ANOMALY_WINDOWS_PX)
    assert maps.shape == (2, len(ANOMALY_WINDOWS_PX), 64, 64) and maps.dtype == torch.float32
    assert ANOMALY_WINDOWS_PX[k] == (window, guard)
    n, y, x0 = pixel
    assert maps[n, k, y, x0].item() == pytest.approx(_brute_force(x, n, y, x0, window, guard), rel=1e-4, abs=1e-5)


def test_a_dot_of_a_colour_the_texture_lacks_stands_out_whatever_the_texture_and_its_colours():
    # GIVEN a busy texture of four colours, with dots of them everywhere, and one 3 px dot of a fifth colour
    rng = np.random.default_rng(0)
    palette = rng.uniform(-1.5, 1.5, (4, 3))
    img = palette[rng.integers(0, 4, (64, 64))]
    img[40:43, 20:23] = (1.8, -1.8, 0.4)
    x = torch.from_numpy(img.transpose(2, 0, 1)[None].copy()).float()
    # WHEN the maps are taken, and again with the colours scaled and shifted per channel
    maps = local_anomaly(x, ANOMALY_WINDOWS_PX[:1])[0, 0]
    scaled = local_anomaly(x * torch.tensor([2.0, 0.5, 1.5]).view(1, 3, 1, 1) + 0.3, ANOMALY_WINDOWS_PX[:1])[0, 0]
    # THEN the odd dot holds the image's highest values (its 9 px, away from the edge), in both
    for m in (maps, scaled):
        top9 = set(torch.topk(m[4:-4, 4:-4].flatten(), 9).indices.tolist())
        dot = {(y - 4) * 56 + (x - 4) for y in range(40, 43) for x in range(20, 23)}
        assert top9 == dot


def test_a_unet_reading_anomaly_maps_starts_as_the_checkpoint_without_them():
    # GIVEN a trained plain U-Net
    torch.manual_seed(0)
    plain = UNet(8, 3)
    opt = torch.optim.SGD(plain.parameters(), lr=0.05)
    for _ in range(3):
        plain(torch.randn(4, 3, 32, 32)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    plain.eval()
    # WHEN a U-Net of the same width that reads one or two anomaly maps starts from its weights
    for k in (1, 2):
        net = UNet(8, 3, anomaly=k)
        load_widened(net, plain.state_dict())
        net.eval()
        # THEN it computes the plain network's logits, and its first layer reads the maps
        x = torch.randn(2, 3, 32, 32)
        assert torch.equal(net(x), plain(x))
        assert net.down[0][0].in_channels == 3 + k
    # AND train-vision accepts such a start, refuses one that would drop maps, and checks the number of maps
    init = {"architecture": "unet", "arch_kwargs": {"width": 8, "depth": 3}}
    assert widens(init, SegmenterTrainConfig(width=8, anomaly=1))
    assert not widens({**init, "arch_kwargs": {"width": 8, "depth": 3, "anomaly": 1}}, SegmenterTrainConfig(width=8))
    assert SegmenterTrainConfig(anomaly=1).arch_kwargs == {"width": 12, "depth": 3, "anomaly": 1}
    assert SegmenterTrainConfig().arch_kwargs == {"width": 12, "depth": 3}  # old checkpoints' kwargs unchanged
    with pytest.raises(TrainError, match="anomaly must be in"):
        SegmenterTrainConfig(anomaly=len(ANOMALY_WINDOWS_PX) + 1)
    with pytest.raises(ValueError, match="anomaly must be in"):
        UNet(8, 3, anomaly=-1)
