"""Vision helpers: image preprocessing, detection decoders, non-maximum suppression."""
