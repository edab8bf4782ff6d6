"""Options shared by several commands: the scene and camera (collect, dagger) and where episodes run (collect,
dagger, eval). Each command's config holds an ``env: EnvConfig`` and ``workers`` + ``backend: BackendConfig``."""

from __future__ import annotations

import argparse

from grasp_s2r.options import Option, UsageError, non_negative_int, positive_int
from grasp_s2r.runtime.backend import BackendConfig, BackendUnavailable
from grasp_s2r.runtime.ray_backend import import_ray

SCENE = "scene and camera"
RUNNERS = "where episodes run"


def env_options(keep_camera_jitter: bool = False) -> tuple[Option, ...]:
    """Options that set fields of the command's ``env``. ``keep_camera_jitter``: ``--no-randomization`` leaves the
    camera jitter to the command's own options (dagger's calibration tolerance)."""
    off = {f"env.randomization.{k}": False for k in ("sphere_color", "table_texture", "light_direction")}
    off["env.randomization.arm_start_jitter_m"] = 0.0
    if not keep_camera_jitter:
        off |= {"env.randomization.camera_jitter_m": 0.0, "env.randomization.camera_jitter_deg": 0.0}
    return (
        Option("--resolution", "square wrist-camera image size in pixels", "env.camera.width_px",
               also=("env.camera.height_px",), type=positive_int, metavar="PX", group=SCENE),
        Option("--fov", "vertical field of view", "env.camera.fov_deg", type=float, metavar="DEG", group=SCENE),
        Option("--sphere-diameter", "target sphere diameter in metres", "env.scene.sphere_diameter_m", type=float,
               metavar="M", group=SCENE),
        Option("--max-steps", "step budget of an episode", "env.scene.max_episode_steps", type=positive_int,
               group=SCENE),
        Option("--sphere-shadow", "draw the sphere's cast and contact shadows on the table (TinyRenderer draws none "
               "for it; off: the scene the shipped figures were measured in)", sets={"env.camera.sphere_shadow": True},
               group=SCENE),
        Option("--no-randomization", "nominal colours, light and camera mount (domain randomization off)"
               if not keep_camera_jitter else "nominal colours, light and arm start (domain randomization off; the "
               "camera jitter is --camera-jitter-mm / --camera-jitter-deg)", sets=off, group=SCENE),
    )


def backend_options(workers_help: str) -> tuple[Option, ...]:
    """``--workers --backend --ray-address --ray-actors``: the fields ``workers`` and ``backend``."""
    return (
        Option("--workers", f"{workers_help}; with --backend ray: per actor", "workers", type=positive_int,
               group=RUNNERS),
        Option("--backend", "local: worker processes here; ray: Ray actors, one per node", "backend.backend",
               group=RUNNERS),
        Option("--ray-address", "Ray cluster to join, e.g. 'auto' after 'ray start'", "backend.ray_address",
               metavar="ADDR", show=lambda a: a or "none: start a local Ray runtime", group=RUNNERS),
        Option("--ray-actors", "Ray actors, each with --workers env processes", "backend.ray_actors",
               type=non_negative_int, metavar="N", show=lambda n: f"{n}: one per node" if n == 0 else str(n),
               group=RUNNERS),
    )


def check_backend(cfg: BackendConfig) -> None:
    """Ray, when asked for, importable here: checked before anything is written (:class:`UsageError`)."""
    if cfg.backend == "ray":
        try:
            import_ray()
        except BackendUnavailable as e:
            raise UsageError(str(e)) from None


def check_vision_read(args: argparse.Namespace, masks: str) -> None:
    """``--vision`` given beside ``--masks gt``, where no segmenter is read (a mistyped checkpoint would pass
    unnoticed, and the run would not be the one asked for): :class:`UsageError`."""
    if getattr(args, "vision", None) is not None and masks == "gt":
        raise UsageError(f"--vision {args.vision} is read only with --masks predicted (--masks gt gives the controller "
                         "the ground-truth masks): drop one of the two")


def check_photo_folder(flag: str, folder: str) -> None:
    """Read the photos of ``folder`` once, as the env workers will mid-run (at least two readable images; not a
    corpus of training photos): :class:`UsageError` naming ``flag`` otherwise."""
    from grasp_s2r.runtime.conditions import load_photos

    try:
        load_photos(folder)
    except (ValueError, FileNotFoundError) as e:  # vision's BackgroundError is a ValueError
        raise UsageError(f"{flag}: {e}") from None
