"""Training: the segmenter (:mod:`.train`, its config :mod:`.train_config`), the gripper head
(:mod:`.gripper_train`) and the threshold calibration (:mod:`.calibrate`)."""
