"""The ``grasp-s2r`` commands, one module a command: ``add_arguments(parser)`` and ``run(args) -> int``, thin
layers over the library functions the notebooks call; :mod:`grasp_s2r.cli` dispatches to them."""
