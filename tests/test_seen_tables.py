"""benchmarks/seen_tables.py: each arm is adapt's fine-tune with the one change it names."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from grasp_s2r.adapt import AdaptConfig, segmenter_train_config

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

from seen_tables import ARMS


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _changes(cfg, base) -> dict:
    a, b = _flat(asdict(cfg)), _flat(asdict(base))
    return {k: a[k] for k in a if a[k] != b[k]}


def test_each_arm_is_adapts_fine_tune_with_the_one_change_it_names(tmp_path):
    # GIVEN adapt's segmenter fine-tune on a folder of 69 photos
    base = segmenter_train_config(AdaptConfig(photos=str(tmp_path), segmenter_steps=50, segmenter_minutes=0.0))
    arms = {name: change(base, 69) for name, change in ARMS.items()}
    # THEN the adapt arm is that fine-tune, and each other arm differs from it only where it says
    assert _changes(arms["adapt"], base) == {}
    assert _changes(arms["every-table"], base) == {"data.view.photo_textures": 69}
    tables_first = _changes(arms["tables-first"], base)
    assert set(tables_first) == {"data.view.photo_textures", "data.mix.photo_table"}
    assert arms["tables-first"].data.mix.photo_table_prob == 0.5 and base.data.mix.photo_table_prob == 0.2
    assert _changes(arms["camouflaged"], arms["tables-first"]) == {"data.view.table_colour_prob": 0.5}
    assert _changes(arms["camouflaged-w32"], arms["camouflaged"]) == {"width": 32}
    # and every arm starts from the shipped weights, trains every photo, and keeps the recipe's far views and
    # distractors
    for cfg in arms.values():
        assert cfg.init_checkpoint == base.init_checkpoint != "" and not cfg.hold_out_photos
        assert cfg.data.view.far_view_prob == base.data.view.far_view_prob and cfg.data.distractor_prob == 0.3


def test_an_unknown_arm_or_a_missing_folder_is_refused_in_one_line_before_anything_is_trained(tmp_path):
    out = tmp_path / "out"
    for args, says in ((["--photos", str(tmp_path), "--arms", "adapt,bigger"], "unknown arms ['bigger']"),
                       (["--photos", str(tmp_path / "none")], "is not a folder")):
        run = subprocess.run([sys.executable, str(BENCH / "seen_tables.py"), "--out", str(out), *args],
                             check=False, capture_output=True, text=True, timeout=120)
        assert run.returncode != 0 and says in run.stderr and len(run.stderr.strip().splitlines()) == 1
        assert not out.exists()

