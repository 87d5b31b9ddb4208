"""Vision: image preprocessing, detection decoders, NMS, and the detection application's API
(frames from files, videos and cameras; detectors; drawing)."""

from edgecnn.vision.detector import Detection, Detector
from edgecnn.vision.draw import draw_detections
from edgecnn.vision.sources import Frame, FrameError, open_sources

__all__ = ["Detection", "Detector", "Frame", "FrameError", "draw_detections", "open_sources"]
