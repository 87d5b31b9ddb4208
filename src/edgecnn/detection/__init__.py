"""Detection heads decoded in plain numpy: Darknet's YOLO v1/v2/v3 formulas (``yolo``, whose
descriptions the Darknet importer writes into Graph.metadata) and non-maximum suppression (``nms``).
Below the importers; the detection application (``edgecnn.vision``) builds on it."""
