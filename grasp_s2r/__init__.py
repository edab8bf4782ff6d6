"""grasp_s2r: sim-to-real grasping of a tiny sphere with an eye-in-hand camera.

Modules: ``sim`` (PyBullet scene, wrist camera), ``expert`` (privileged FSM), ``data`` (dataset
format), ``vision`` (sim-real composites, segmentation), ``control`` (DAgger controller).
"""

__version__ = "0.1.0"

GYM_ENV_ID = "grasp_s2r/Grasp-v0"


def _register_gym_env() -> None:
    try:
        import gymnasium
    except ImportError:  # gymnasium is a dependency; stay importable without it all the same
        return
    if GYM_ENV_ID not in gymnasium.registry:
        gymnasium.register(id=GYM_ENV_ID, entry_point="grasp_s2r.sim.gym_env:GraspGymEnv")


_register_gym_env()
