"""Can the shipped segmenter find more spheres on tables it never saw, changed at test time only (no training)?

    python benchmarks/test_time_remedies.py --photos DIR [--stats-photos DIR2] [--views 400] [--bn-views 512]
        [--episodes 300] [--e2e REMEDY,...] [--out runs/test_time_remedies] [--workers 2] [--save]

Per frame, on the photo-table views of ``unseen_tables.py`` (``DIR``'s photos as the sim table; the same seeds, so
the first row is its shipped row): the shipped segmenter's spheres found and false detections, ``far`` (an
episode's start and search heights, the sphere 2-4 px wide) and at ``all`` the training views' heights, with

- its input filtered: a Gaussian blur, a 3 px median, an edge-preserving bilateral filter (the busy texture around
  the sphere suppresses it, ``sphere_context.py``: do filters that keep strong colour edges lift it?);
- the colour channels in each of their six orders, the orders' probabilities merged by their maximum or their mean
  (does it miss spheres in colours its 15 photos taught it to ignore?);
- the input upsampled (bilinear, 1.5 and 2 times the side) and the logits area-averaged back: the sphere drawn
  wider, each pixel's field over less of the scene (what tiling does by cutting the image, ``vision.md``
  *Tiled prediction*);
- the camera anti-aliased: the same views rendered at 4 times the side and area-averaged to 64 px, as a sensor
  integrates light over each pixel (TinyRenderer samples one point a pixel, so a busy table minified at the search
  height aliases into pixel-sized speckle: is that what hides the sphere?);
- its batch-norm statistics re-estimated on views of the scene (AdaBN: ``--bn-views`` photo-table views of
  ``--stats-photos``, by default ``DIR`` itself at other seeds, half far and half at all heights; the network's
  weights unchanged), the one remedy that needs photos of the scene: with ``--photos TEST --stats-photos TUNE`` (the
  parts ``own_scene.py`` cuts) it is adaptation to your own scene in seconds.

End to end: the AdaBN checkpoint (written to ``OUT/adabn.pt``) and the remedies named by ``--e2e`` (the controller's
mask source asks the shipped segmenter through them), each with the shipped controller, beside the shipped system, on
``--episodes`` validation episodes with ``DIR``'s photos as the table (``table-photo-unseen``). Writes
``runs/benchmarks/test_time_remedies.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from results_io import add_json_argument, write_results
from unseen_tables import METRICS, VIEW_SEED_BASE, VIEWS, photo_table_views
from validation import UNSEEN_TABLE, validate

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.learner import SegmenterMasks
from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.vision.evaluation.metrics import pixel_metrics
from grasp_s2r.vision.networks.model import to_input_tensor
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path, read_checkpoint, write_checkpoint

BN_VIEW_SEED_BASE = {"far": 8_000_000, "all": 9_000_000}
"""Seeds of the views the batch-norm statistics are re-estimated on (no other run's, the per-frame views' included)."""
SUPERSAMPLE = 4
"""The anti-aliased camera renders at this many times the side, then area-averages (``cv2.INTER_AREA``)."""
ADABN = "batch-norm statistics of the scene's own views (AdaBN)"
"""The row of the checkpoint with re-estimated statistics, per frame and end to end."""
THRESHOLD = 0.5
"""The shipped checkpoint's threshold, applied to the merged probabilities too."""


def filtered(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Segmenter, np.ndarray], np.ndarray]:
    """A remedy that filters each frame (uint8 (H, W, 3) -> same) before the segmenter sees it."""
    return lambda seg, rgb: seg.predict(np.stack([fn(np.ascontiguousarray(f)) for f in rgb]))


def colour_orders(merge: Callable[..., np.ndarray]) -> Callable[[Segmenter, np.ndarray], np.ndarray]:
    """A remedy that predicts on the frames in each of the six orders of their colour channels, merged by ``merge``."""
    def predict(seg: Segmenter, rgb: np.ndarray) -> np.ndarray:
        probs = [seg.predict_proba(np.ascontiguousarray(rgb[..., list(order)]))
                 for order in itertools.permutations(range(3))]
        return merge(np.stack(probs), axis=0) > THRESHOLD
    return predict


def upsampled(scale: float) -> Callable[[Segmenter, np.ndarray], np.ndarray]:
    """A remedy that runs the network on the frames upsampled ``scale`` times (bilinear, the side a multiple of 16,
    the U-Net's stride) and area-averages its logits back to the frames' size. The frames are taken at the network's
    own input size (the scene's 64 px camera) and a checkpoint's tiling is not applied: for the whole-image
    segmenters this benchmark asks."""
    @torch.inference_mode()
    def predict(seg: Segmenter, rgb: np.ndarray) -> np.ndarray:
        h, w = rgb.shape[1:3]
        x = to_input_tensor(rgb)
        side = int(round(h * scale / 16) * 16), int(round(w * scale / 16) * 16)
        logits = seg.model(F.interpolate(x, size=side, mode="bilinear", align_corners=False))
        return (torch.sigmoid(F.interpolate(logits, size=(h, w), mode="area")[:, 0]) > seg.threshold).numpy()
    return predict


def reflect_padded(pad_px: int) -> Callable[[Segmenter, np.ndarray], np.ndarray]:
    """A remedy that mirrors ``pad_px`` pixels of the frame out past each border (the side then a multiple of 16,
    the U-Net's stride), runs the network on it and keeps the logits of the frame's own pixels: a sphere the border
    cuts is drawn whole (its mirror image beside it) and the network's zero padding falls on the mirrored band, not
    on the frame's edge. Whole-image segmenters at their input size, no tiling (as :func:`upsampled`)."""
    if pad_px < 1 or (64 + 2 * pad_px) % 16:
        raise ValueError(f"pad_px must be >= 1 and keep a 64 px frame's padded side a multiple of 16, got {pad_px}")

    @torch.inference_mode()
    def predict(seg: Segmenter, rgb: np.ndarray) -> np.ndarray:
        logits = seg.model(F.pad(to_input_tensor(rgb), (pad_px,) * 4, mode="reflect"))
        return (torch.sigmoid(logits[:, 0, pad_px:-pad_px, pad_px:-pad_px]) > seg.threshold).numpy()
    return predict


def conv_padding(mode: str) -> Callable[[Segmenter, np.ndarray], np.ndarray]:
    """A remedy that runs the segmenter's own weights with every 3x3 convolution padded by ``mode`` (``"replicate"``,
    ``"reflect"``: ``nn.Conv2d``'s ``padding_mode``) instead of the zeros they were trained with (``train-vision
    --padding`` trains with it); the network is left as it was."""
    def predict(seg: Segmenter, rgb: np.ndarray) -> np.ndarray:
        convs = [m for m in seg.model.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (3, 3)]
        before = [m.padding_mode for m in convs]
        try:
            for m in convs:
                m.padding_mode = mode
            return seg.predict(rgb)
        finally:
            for m, b in zip(convs, before):
                m.padding_mode = b
    return predict


class RemedyMasks(SegmenterMasks):
    """A mask source (``runtime.masks.MaskSource``) that asks the segmenter through a remedy."""

    def __init__(self, segmenter: Segmenter, remedy: Callable[[Segmenter, np.ndarray], np.ndarray]):
        super().__init__(segmenter)
        self.remedy = remedy

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray | None = None,
                 previous: np.ndarray | None = None) -> np.ndarray:
        return np.asarray(self.remedy(self.segmenter, np.asarray(rgb, dtype=np.uint8)), dtype=bool)


REMEDIES: dict[str, Callable[[Segmenter, np.ndarray], np.ndarray]] = {
    "as seen": lambda seg, rgb: seg.predict(rgb),
    "Gaussian blur, sigma 0.7 px": filtered(lambda f: cv2.GaussianBlur(f, (0, 0), 0.7)),
    "median, 3 px": filtered(lambda f: cv2.medianBlur(f, 3)),
    "bilateral, 3 px, colour sigma 40": filtered(lambda f: cv2.bilateralFilter(f, 3, 40, 1)),
    "six colour orders, maximum": colour_orders(np.max),
    "six colour orders, mean": colour_orders(np.mean),
    "input upsampled 1.5x": upsampled(1.5),
    "input upsampled 2x": upsampled(2.0),
    "borders mirrored, 8 px": reflect_padded(8),
    "borders mirrored, 16 px": reflect_padded(16),
    "convolutions padded by replication": conv_padding("replicate"),
    "convolutions padded by reflection": conv_padding("reflect"),
}
"""Test-time changes of the input, by name: (segmenter, rgb uint8 (n, H, W, 3)) -> mask bool (n, H, W)."""


def supersampled_views(photos: list[np.ndarray], n: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """:func:`unseen_tables.photo_table_views` (the same seeds) through a camera of :data:`SUPERSAMPLE` times the side,
    area-averaged to the scene's camera: rgb uint8 and sphere masks bool (a pixel is the sphere where most of it is)."""
    side = control_env_config().camera.width_px
    big = control_env_config(camera_px=side * SUPERSAMPLE)
    out = {}
    for name, v in VIEWS.items():
        rgb, masks = photo_table_views(photos, v, VIEW_SEED_BASE[name], n, big)
        out[name] = (np.stack([cv2.resize(f, (side, side), interpolation=cv2.INTER_AREA) for f in rgb]),
                     np.stack([cv2.resize(m.astype(np.float32), (side, side), interpolation=cv2.INTER_AREA) > 0.5
                               for m in masks]))
    return out


def adabn_checkpoint(path: Path, rgb: np.ndarray, out: Path, source: dict) -> Path:
    """``path``'s checkpoint with every batch-norm layer's running mean and variance re-estimated on the frames
    ``rgb`` uint8 (n, H, W, 3) (their plain average over batches of 64; the weights unchanged), written to ``out``
    with ``source`` recorded under ``batchnorm_statistics``."""
    ckpt = read_checkpoint(path)
    seg = Segmenter.from_checkpoint(ckpt, device="cpu")
    norms = [m for m in seg.model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over every batch
    seg.model.train()
    with torch.no_grad():
        for i in range(0, len(rgb), 64):
            seg.model(to_input_tensor(rgb[i:i + 64]))
    seg.model.eval()
    ckpt["state_dict"] = {k: v.detach().clone() for k, v in seg.model.state_dict().items()}
    ckpt["batchnorm_statistics"] = {**source, "layers": len(norms), "frames": len(rgb)}
    out.parent.mkdir(parents=True, exist_ok=True)
    write_checkpoint(ckpt, out)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--photos", type=Path, required=True, help="a folder of validation photos no segmenter trained on")
    p.add_argument("--stats-photos", type=Path, default=None,
                   help="the photos whose views re-estimate the batch-norm statistics (default: --photos, other views)")
    p.add_argument("--views", type=int, default=400, help="per-frame views a set (default 400, unseen_tables')")
    p.add_argument("--bn-views", type=int, default=512, help="views the statistics are re-estimated on (default 512)")
    p.add_argument("--episodes", type=int, default=300, help="validation episodes (default 300; 0: per frame only)")
    p.add_argument("--e2e", default="", help="comma-separated remedies (REMEDIES' names) also run end to end")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    p.add_argument("--out", type=Path, default=Path("runs/test_time_remedies"), help="where adabn.pt is written")
    add_json_argument(p, "test_time_remedies")
    args = p.parse_args()
    stats_photos = args.stats_photos or args.photos
    for flag, folder in (("--photos", args.photos), ("--stats-photos", stats_photos)):
        if not folder.is_dir():
            sys.exit(f"test_time_remedies: {flag} {folder} is not a folder")
    if min(args.views, args.bn_views) < 2 or args.episodes < 0:
        sys.exit("test_time_remedies: --views and --bn-views must be >= 2, --episodes >= 0")
    e2e = [r.strip() for r in args.e2e.split(",") if r.strip()]
    if unknown := [r for r in e2e if r not in REMEDIES]:
        sys.exit(f"test_time_remedies: --e2e: unknown remedies {unknown}; of: {', '.join(REMEDIES)}")
    torch.set_num_threads(1)
    env_cfg = control_env_config()
    photos = load_photos(str(args.photos))
    views = {name: photo_table_views(photos, v, VIEW_SEED_BASE[name], args.views, env_cfg) for name, v in VIEWS.items()}
    stats_rgb = np.concatenate([photo_table_views(load_photos(str(stats_photos)), v, BN_VIEW_SEED_BASE[name],
                                                  args.bn_views // 2, env_cfg)[0] for name, v in VIEWS.items()])
    shipped = Path(default_checkpoint_path())
    adabn = adabn_checkpoint(shipped, stats_rgb, args.out / "adabn.pt",
                             {"photos": str(stats_photos), "views": len(stats_rgb), "seeds": BN_VIEW_SEED_BASE})
    segs = {"shipped": Segmenter.load(shipped, device="cpu"), "adabn": Segmenter.load(adabn, device="cpu")}
    # each row: a remedy and the views it is asked on (the anti-aliased camera's are its own renders)
    cases = {**{label: (remedy, views) for label, remedy in REMEDIES.items()},
             ADABN: (lambda _seg, rgb: segs["adabn"].predict(rgb), views),
             f"camera anti-aliased ({SUPERSAMPLE}x{SUPERSAMPLE} samples a pixel)":
                 (REMEDIES["as seen"], supersampled_views(photos, args.views))}
    rows: dict[str, dict] = {}
    for label, (remedy, label_views) in cases.items():
        rows[label] = {}
        for name, (rgb, masks) in label_views.items():
            m = pixel_metrics(remedy(segs["shipped"], rgb), masks)
            rows[label][name] = {k: float(m[k]) for k in METRICS}
        print(f"{label:52s} " + "   ".join(f"{name} found {r['found_rate']:.3f} false {r['false_detection_rate']:.3f}"
                                           for name, r in rows[label].items()), flush=True)
    if args.episodes:
        policy = Policy.load(Path(default_controller_path()), "cpu")[0]
        with RolloutPool(env_cfg, args.workers) as pool:
            sources = {"as seen": make_mask_source("predicted", str(shipped), "cpu"),
                       ADABN: make_mask_source("predicted", str(adabn), "cpu"),
                       **{r: RemedyMasks(segs["shipped"], REMEDIES[r]) for r in e2e if r != "as seen"}}
            for label, masks in sources.items():
                rows[label].update(validate(pool, policy, masks, [UNSEEN_TABLE], args.episodes, label=label[:24],
                                            unseen_photos=str(args.photos)))
    write_results(args.json, "test_time_remedies",
                  {"photos": str(args.photos), "stats_photos": str(stats_photos), "n_photos": len(photos),
                   "views": args.views, "bn_views": len(stats_rgb), "episodes": args.episodes, "e2e": e2e, "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
