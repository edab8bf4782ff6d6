"""What makes the segmenter's training images: photo backgrounds (and the corpus built from packages), synthetic
scenes, sim views, composites, reshading, augmentation, the datasets and crops, and the folder format of real images."""
