"""Test-only images: the held-out suites and the painted renderer (:mod:`.painted`), which never feeds training
(tests/test_architecture.py checks that nothing in vision/images or vision/training imports it)."""
