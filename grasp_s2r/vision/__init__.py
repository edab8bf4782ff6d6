"""The segmenter: the images it learns from and is tested on, its networks, its training and its evaluation.

Subpackages by role: :mod:`.images` (training images: photo backgrounds and their corpus, synthetic scenes, sim views,
composites, augmentation, the datasets), :mod:`.testsets` (the held-out test suites and the test-only painted
renderer; nothing in images/ or training/ imports it: tests/test_architecture.py), :mod:`.networks` (the U-Net, the
segmenter, the gripper head), :mod:`.training` (train-vision, train-gripper, calibrate-vision) and
:mod:`.evaluation` (metrics, eval-vision). The commands are in :mod:`grasp_s2r.commands`.
"""
