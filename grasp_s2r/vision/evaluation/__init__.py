"""Evaluation: pixel metrics (:mod:`.metrics`) and a checkpoint on the test suites or a folder (:mod:`.evaluate`)."""
