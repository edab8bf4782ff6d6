"""The networks: the small U-Net (:mod:`.model`), the segmenter that runs it (:mod:`.segmenter`), the gripper head
(:mod:`.gripper`)."""
