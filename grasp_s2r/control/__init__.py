"""The closed-loop controller: DAgger, the episode runtime (local or Ray), evaluation."""

import grasp_s2r.sim  # noqa: F401 - first: imports pybullet without its build-time banner
