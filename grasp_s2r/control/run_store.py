"""A DAgger run folder on disk: what it is, where each round's data and checkpoint live, what is complete.

Layout of ``OUT/``::

    OUT/run.json                    format + version, the identity and the config of the run
    OUT/round-000/ ... round-NNN/   episode datasets (grasp_s2r.data.episodes, kind "dagger-round"):
                                    every visited state with the expert's label (``action``), the
                                    controller's input mask, what was executed, the sim state
    OUT/bc-expert/                  extra expert-only episodes for the behavior-cloning baseline
    OUT/checkpoints/round-NNN.pt    controller after round NNN (+ config, metrics); its presence
                                    marks the round complete
    OUT/checkpoints/bc-NNN.pt       BC baseline trained on as many expert labels as DAgger had
    OUT/policy.pt                   the selected round's controller (what ``grasp-s2r eval`` takes)
    OUT/curve.csv, OUT/curve.png    learning curve: success and loss per round, DAgger vs BC
    OUT/curve.json                  the same rows + format version + the run's config

Every episode and checkpoint is written atomically, so after ``kill -9`` a run resumes from its last completed
round and keeps the finished episodes of an interrupted one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grasp_s2r.control.policy import read_policy_blob
from grasp_s2r.files import atomic_write
from grasp_s2r.run_record import RunRecord

RUN_FORMAT = "grasp_s2r.dagger-run"
RUN_FORMAT_VERSION = 1
ROUND_KIND = "dagger-round"
BC_KIND = "bc-expert"


class RunStore:
    """The files of one DAgger run folder."""

    def __init__(self, out: Path):
        self.out = Path(out)

    def open(self, identity: dict[str, Any], config: dict[str, Any]) -> None:
        """Start the run (write ``run.json``), or check that the folder holds a run of this same ``identity``."""
        RunRecord(self.out, RUN_FORMAT, RUN_FORMAT_VERSION, "a DAgger run").open(  # a record before "out" left
            identity, config, hint="use a new --out folder or the same options", ignore=("out",))  # its identity

    def round_dir(self, r: int) -> Path:
        return self.out / f"round-{r:03d}"

    @property
    def bc_dir(self) -> Path:
        return self.out / "bc-expert"

    def ckpt(self, r: int, kind: str = "round") -> Path:
        """The checkpoint of round ``r``: the DAgger controller (``kind="round"``) or the BC baseline (``"bc"``)."""
        return self.out / "checkpoints" / f"{kind}-{r:03d}.pt"

    def completed_rows(self) -> list[dict[str, Any]]:
        """Learning-curve rows stored in the checkpoints of the completed rounds."""
        return [read_policy_blob(path)["metrics"] for path in sorted((self.out / "checkpoints").glob("round-*.pt"))]

    def select(self, r: int) -> Path:
        """Make round ``r``'s controller the run's ``policy.pt``."""
        atomic_write(self.out / "policy.pt", self.ckpt(r).read_bytes())
        return self.out / "policy.pt"
