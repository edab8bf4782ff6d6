"""PyBullet scene: arm + parallel gripper, wrist camera, table, tiny sphere."""

import os
import sys


def _import_pybullet_quietly() -> None:
    """Import pybullet without its 'pybullet build time' banner (printed by C code)."""
    if "pybullet" in sys.modules:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = (os.dup(1), os.dup(2))
    except (OSError, ValueError):  # no real file descriptors (some notebook kernels): import as is
        import pybullet
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        import pybullet  # noqa: F401
    finally:
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        os.close(devnull)


_import_pybullet_quietly()
