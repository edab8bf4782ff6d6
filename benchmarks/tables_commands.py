"""The command that measures each results file of ``benchmarks/results/`` (``tables.py`` names it where a table's
file is missing, or where the file predates its own ``command`` record)."""

from __future__ import annotations

COMMANDS = {
    "check_interop": "python benchmarks/check_interop.py --save",
    "bench_expert": "python benchmarks/bench_expert.py --episodes 500 --save",
    "bench_vision": "python benchmarks/bench_vision.py --save",
    "eval_shipped": "python benchmarks/bench_eval.py --episodes 200 --conditions all --save",
    "bench_pipeline": "python benchmarks/bench_pipeline.py --out runs/bench-pipeline --save",
    "bench_env": "python benchmarks/bench_env.py --runs 10 --save",
    "bench_scaling": "python benchmarks/bench_scaling.py --save",
    "real_robot_loop": "python examples/real_robot_loop.py --steps 0 --bench 500 --save",
    "compare_memory": "python benchmarks/compare_memory.py --save",
    "pipeline_recipe": "python benchmarks/pipeline_recipe.py --pipeline runs/bench-pipeline --save",
    "controller_recipe": "python benchmarks/controller_recipe.py --ship --save",
    "bench_camera_mount": "python benchmarks/bench_camera_mount.py --save",
    "bench_gripper_head": "python benchmarks/bench_gripper_head.py --save",
    "bench_train_vision": "python benchmarks/bench_train_vision.py --steps 300 --save",
    "bench_train_vision-noamx": "python benchmarks/bench_train_vision.py --steps 300 --save  # on a CPU without AMX (or --no-amx)",
    "train_vision_budget": "python benchmarks/train_vision_budget.py --no-amx --save",
    "crop_recipe": "python benchmarks/crop_recipe.py --save",
    "ablate_vision-look": "python benchmarks/ablate_vision.py --out runs/look --steps 600 --lr 3e-4 --parallel 2 "
                          "--corpus CORPUS --arms ARMS --json benchmarks/results/ablate_vision-look.json",
    "ablate_vision-randconv": "python benchmarks/ablate_vision.py --out runs/randconv --steps 600 --lr 3e-4 "
                              "--parallel 2 --amp on --arms 'recipe,+ random convolution' "
                              "--json benchmarks/results/ablate_vision-randconv.json",
    "ablate_vision-relocate-alone": "python benchmarks/ablate_vision.py --out runs/relocate-alone --steps 3000 "
                                    "--lr 3e-4 --parallel 1 --amp on --arms ARMS "
                                    "--json benchmarks/results/ablate_vision-relocate-alone.json",
    "segmenter_recipe": "python benchmarks/segmenter_recipe.py CANDIDATE.pt --save",
    "segmenter_recipe-controller": "python benchmarks/segmenter_recipe.py CANDIDATE.pt --controllers CONTROLLER.pt "
                                   "--json benchmarks/results/segmenter_recipe-controller.json",
    "painted_misses": "python benchmarks/painted_misses.py --save",
    "unseen_tables": "python benchmarks/unseen_tables.py --photos CORPUS/mate-backgrounds CANDIDATE.pt --save",
    **{f"unseen_tables-{k}": "python benchmarks/unseen_tables.py --photos CORPUS/mate-backgrounds CANDIDATE.pt "
                             f"--json benchmarks/results/unseen_tables-{k}.json" for k in (2, 3)},
    "own_scene": "python benchmarks/own_scene.py CORPUS/supertuxkart-data CORPUS/lomiri-wallpapers-16.04 --save",
    "own_scene_screen": "python benchmarks/unseen_tables.py --photos OUT/SET/test --views 100 --episodes 100 "
                        "--json benchmarks/results/own_scene_screen-SET.json",
    "table_photo_failures": "python benchmarks/table_photo_failures.py --backgrounds "
                            "runs/own_scene-val/mate-backgrounds/test --save",
    "own_scene-validation": "python benchmarks/own_scene.py CORPUS/mate-backgrounds --out runs/own_scene-val "
                            "--json benchmarks/results/own_scene-validation.json",
    "own_scene-validation-segmenter": "python benchmarks/own_scene.py CORPUS/mate-backgrounds --out "
                                      "runs/own_scene-val-seg --adapt-args '--segmenter-steps 1500' "
                                      "--json benchmarks/results/own_scene-validation-segmenter.json",
    "own_scene-validation-adapt": "python benchmarks/own_scene.py CORPUS/mate-backgrounds --out runs/own_scene-val-adapt "
                                  "--json benchmarks/results/own_scene-validation-adapt.json",
    "ablate_vision-look3000": "python benchmarks/ablate_vision.py --out runs/look3000 --steps 3000 --lr 3e-4 "
                              "--parallel 2 --amp on --corpus CORPUS --arms ARMS "
                              "--json benchmarks/results/ablate_vision-look3000.json",
    "ablate_vision-relocate": "python benchmarks/ablate_vision.py --out runs/relocate --steps 3000 --lr 3e-4 "
                              "--parallel 1 --amp on --corpus CORPUS --arms ARMS "
                              "--json benchmarks/results/ablate_vision-relocate.json",
    "search_recipe": "python benchmarks/search_recipe.py --photos CORPUS/mate-backgrounds --controllers CONTROLLERS "
                     "--save",
    "test_time_remedies": "python benchmarks/test_time_remedies.py --photos CORPUS/mate-backgrounds --save",
    "seen_tables": "python benchmarks/seen_tables.py --photos VAL-PHOTOS --out RUNS --save",
    "border_spheres": "python benchmarks/border_spheres.py shipped --photos VAL-PHOTOS --save",
    "sphere_shadow": "python benchmarks/sphere_shadow.py --photos VAL-PHOTOS --save",
    "sphere_contrast": "python benchmarks/sphere_contrast.py --save",
    "painted_factors": "python benchmarks/painted_factors.py --save",
    "adapt_recipe": "python benchmarks/adapt_recipe.py SET/tune SET/test --out RUN --json benchmarks/results/adapt_recipe-ARM.json",
    "parallax_filter": "python benchmarks/parallax_filter.py --photos VAL-PHOTOS --votes 0,3,2 --save",
    "compare_gripper_input-gt": "python benchmarks/compare_gripper_input.py --masks gt --save",
    **{f"bench_expert_search-{s}": f"python benchmarks/bench_expert_search.py --scenario {s} --episodes {n} --save"
       for s, n in (("nominal", 1000), ("teleport", 500), ("start-out-of-view", 500))},
}
"""The command that measures each results file: named when the file is missing, or when it predates ``command``."""
