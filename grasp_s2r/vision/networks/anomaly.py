"""How far each pixel's colour is from the colours around it: a texture-agnostic cue for a small target.

A 2-4 px sphere on a busy table the segmenter never saw is missed with confidence, though a person sees it: its
colour is not among the table's colours around it. The classic detector of small targets in clutter says exactly
that (Reed & Yu 1990, the "RX" anomaly detector of hyperspectral imaging): the Mahalanobis distance of a pixel's
colour from the mean and covariance of the colours in a ring around it (a square window less a guard square that
keeps the target's own pixels out). It knows nothing of any texture, so it carries to tables no network trained on.
``UNet(anomaly=k)`` feeds the first ``k`` maps of :data:`ANOMALY_WINDOWS_PX` to its first layer beside the colours
(``train-vision --anomaly k``); the network still decides, from the colours and its own context, what is a sphere.

The constants below are part of what every checkpoint with ``anomaly`` > 0 computes: change them only under a new
``UNet`` argument, never in place. Torch only, no weights; computed in float32 from the network's normalized input
(a Mahalanobis distance is the same under any per-channel affine change of the colours, up to :data:`NOISE_VAR`).
Cost at 64 px: summed-area tables and per-pixel 3 x 3 algebra; a segmenter reading one map takes about 1.4 times
the plain one's time a frame (``benchmarks/unseen_tables.py`` times them side by side).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

ANOMALY_WINDOWS_PX: tuple[tuple[int, int], ...] = ((9, 3), (15, 5))
"""(window, guard) sides in px of the rings the colour statistics are taken over: map ``i`` of ``UNet(anomaly=k)``
for ``i < k``. A 9 px window with a 3 px guard fits the 2-4 px sphere of the start and search heights."""
NOISE_VAR = 0.02
"""Added to each colour variance of a ring (in the network's normalized units, about 8 grey levels' standard
deviation): a flat ring does not make every small difference an anomaly."""
SCALE = 2.0
"""The map is ``SCALE * log(1 + distance^2)``: a standard deviation about 1 over the training views, as the
normalized colours' (an input far smaller than the colours is slow to learn from zero weights)."""


_I, _J = (0, 0, 0, 1, 1, 2), (0, 1, 2, 1, 2, 2)
"""The 6 distinct entries (i, j) of a symmetric 3 x 3 matrix: a b c / b d e / c e f."""
_ADJ = ((3, 2, 1, 0, 1, 0), (5, 4, 4, 5, 2, 3), (4, 1, 2, 2, 0, 1), (4, 5, 3, 2, 4, 1))
"""The adjugate's entries of a b c / b d e / c e f as ``m[p] * m[q] - m[r] * m[s]`` (df - ee, ce - bf, be - cd,
af - cc, bc - ae, ad - bb), by entry indices."""
_OFF_DIAGONAL_TWICE = (1.0, 2.0, 2.0, 1.0, 2.0, 1.0)
"""Each entry's count in the quadratic form d^T A d: an off-diagonal one appears twice."""


def _box_sums(x: torch.Tensor, side: int) -> torch.Tensor:
    """Sum of ``x`` float (N, C, H, W) over the ``side`` x ``side`` square around each pixel (zeros past the edge),
    from its summed-area table (ten times faster than ``avg_pool2d`` on a CPU)."""
    pad, (h, w) = side // 2, x.shape[2:]
    t = F.pad(x, (pad + 1, pad, pad + 1, pad)).cumsum(2).cumsum(3)
    return t[:, :, side:, side:] - t[:, :, :h, side:] - t[:, :, side:, :w] + t[:, :, :h, :w]


def local_anomaly(x: torch.Tensor, windows: tuple[tuple[int, int], ...]) -> torch.Tensor:
    """Per ring of ``windows`` ((window, guard) odd sides in px), each pixel's colour anomaly: ``SCALE * log(1 + d^2)``
    with ``d`` the Mahalanobis distance of its colour from the colours of the ring around it (their covariance plus
    :data:`NOISE_VAR` on the diagonal). ``x``: float (N, 3, H, W); returns float32 (N, len(windows), H, W)."""
    x = x.float()
    i, j = list(_I), list(_J)
    p, q, r, s = (list(k) for k in _ADJ)
    noise = x.new_tensor([NOISE_VAR if a == b else 0.0 for a, b in zip(_I, _J)]).view(1, 6, 1, 1)
    twice = x.new_tensor(_OFF_DIAGONAL_TWICE).view(1, 6, 1, 1)
    moments = torch.cat([x, x[:, i] * x[:, j], torch.ones_like(x[:, :1])], 1)  # colour, products, count
    maps = []
    for window, guard in windows:
        ring = _box_sums(moments, window) - _box_sums(moments, guard)
        count = ring[:, 9:].clamp(min=1.0)
        mean = ring[:, :3] / count
        cov = ring[:, 3:9] / count - mean[:, i] * mean[:, j] + noise
        adj = cov[:, p] * cov[:, q] - cov[:, r] * cov[:, s]
        det = (cov[:, :3] * adj[:, :3]).sum(1).clamp(min=1e-12)
        d = x - mean
        quad = (twice * adj * d[:, i] * d[:, j]).sum(1) / det
        maps.append(SCALE * torch.log1p(quad.clamp(min=0.0)))
    return torch.stack(maps, 1)
