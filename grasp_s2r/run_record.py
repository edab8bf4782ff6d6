"""A run folder's ``run.json``: which run the folder holds, so that a resumed run is the same one.

Shared by the commands whose runs resume (``grasp-s2r dagger``'s run store, ``grasp-s2r train-vision --resume``):
the file holds the format and its version, the package version, the run's *identity* (the fields that define its
results; e.g. not how many steps or rounds, which may grow on resume) and its whole config. Opening a folder that
holds one checks the format and then the identity field by field (:func:`configs.check_same`, which names every
differing field); opening one without writes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from grasp_s2r import __version__
from grasp_s2r.configs import check_same, with_defaults
from grasp_s2r.files import write_json

RUN_FILE = "run.json"


class RunRecordError(ValueError):
    """A run folder's record is of another run, another format, or damaged (one line for the user)."""


class RunRecord:
    """The ``run.json`` of ``folder`` for runs of ``fmt`` v``version``; ``what`` names such a run in messages."""

    def __init__(self, folder: Path, fmt: str, version: int, what: str, *, error: type[Exception] = RunRecordError):
        self.path = Path(folder) / RUN_FILE
        self.fmt, self.version, self.what, self.error = fmt, version, what, error

    def exists(self) -> bool:
        return self.path.is_file()

    def open(self, identity: Mapping[str, Any], config: Mapping[str, Any], *, hint: str,
             defaults: Mapping[str, Any] | None = None, ignore: Iterable[str] = ()) -> None:
        """Write the record, or check that the stored one is this run (same format and version, same identity) and
        record the config as now asked (e.g. more steps or rounds).
        ``defaults``: the values of identity fields added since a stored record was written (the value that
        reproduces runs made before the field existed). ``ignore``: fields a stored identity may hold that are no
        longer part of one (not compared). ``hint`` ends a refusal (what to do instead)."""
        identity = json.loads(json.dumps(dict(identity)))
        config = json.loads(json.dumps(dict(config)))
        if self.exists():
            old = self.check(identity, hint=hint, defaults=defaults, ignore=ignore)
            if old.get("config") == config:
                return
            identity = old["identity"]  # the same run: its identity as first written, its config as now asked
        blob = {"format": self.fmt, "format_version": self.version, "package_version": __version__,
                "identity": identity, "config": config}
        write_json(self.path, blob, indent=2, sort_keys=True)

    def check(self, identity: Mapping[str, Any], *, hint: str, defaults: Mapping[str, Any] | None = None,
              ignore: Iterable[str] = ()) -> dict[str, Any]:
        """Raise unless the stored record (which must exist) is a run of ``identity`` (``open``'s check, writing
        nothing); returns the stored record."""
        try:
            old = json.loads(self.path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise self.error(f"{self.path} is not readable JSON ({e}): the record of the run in "
                             f"{self.path.parent} is damaged; start the run in a new folder") from None
        if not isinstance(old, dict):
            raise self.error(f"{self.path} holds no run record: start the run in a new folder")
        if old.get("format") != self.fmt or old.get("format_version") != self.version:
            raise self.error(f"{self.path.parent} holds a run of format {old.get('format')} "
                             f"v{old.get('format_version')}, this grasp_s2r writes {self.fmt} v{self.version}; {hint}")
        stored = with_defaults(old.get("identity", {}), json.loads(json.dumps(dict(defaults or {}))))
        check_same(stored, json.loads(json.dumps(dict(identity))), f"{self.path.parent} holds {self.what}", hint,
                   ignore=ignore, error=self.error)
        return old
