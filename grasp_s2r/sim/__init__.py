"""PyBullet scene: arm + parallel gripper, wrist camera, table, tiny sphere."""

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def c_output_silenced() -> Iterator[None]:
    """Send what C code prints to stdout/stderr meanwhile to /dev/null (PyBullet prints banners and notices).

    Where there are no real file descriptors (some notebook kernels) it silences nothing.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = (os.dup(1), os.dup(2))
    except (OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        os.close(devnull)


def _import_pybullet_quietly() -> None:
    """Import pybullet without its 'pybullet build time' banner (printed by C code)."""
    if "pybullet" in sys.modules:
        return
    with c_output_silenced():
        import pybullet  # noqa: F401


_import_pybullet_quietly()
