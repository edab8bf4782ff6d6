"""Tables rendered from the package's own definitions rather than from results files: what a user reads about a
condition is what ``grasp_s2r.runtime.conditions`` defines, in one place."""

from __future__ import annotations

from pathlib import Path

from tables_base import md_table

from grasp_s2r.control.evaluate import ISSUE_CONDITIONS
from grasp_s2r.runtime.conditions import CONDITIONS, Condition, photo_names

_PHOTO_SETS = {"train": f"the {len(photo_names('train'))} training photos",
               "heldout": f"the {len(photo_names('heldout'))} held-out photos (`--backgrounds DIR`: yours)"}


def _photos(c: Condition) -> str:
    """Where a condition's photos go, from its ``backgrounds`` and ``table_photos`` fields."""
    where = [f"{_PHOTO_SETS.get(c.backgrounds, c.backgrounds)}, composited behind the sphere"] if c.backgrounds else []
    if c.table_photos:
        where.append(f"{_PHOTO_SETS.get(c.table_photos, c.table_photos)}, as the sim table's texture")
    return "; ".join(where) or "none: the sim table"


def conditions_table(_results: Path) -> str:
    """Every condition of ``grasp-s2r eval``: its photos, what else differs, and whether ``eval`` runs it by
    default."""
    rows = [(f"`{name}`", _photos(c), c.description, "yes" if name in ISSUE_CONDITIONS else "no (`--conditions all`)")
            for name, c in CONDITIONS.items()]
    return md_table(("condition", "photos", "what differs", "by default"), rows)
