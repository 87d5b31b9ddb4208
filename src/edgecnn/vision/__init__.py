"""Vision: image preprocessing and the detection application's API (frames from files, videos and
cameras; detectors on YOLO heads and the face classifier; drawing). The heads' numpy decoding and
NMS live below the importers, in ``edgecnn.detection``."""

from edgecnn.vision.detector import Detection, Detector
from edgecnn.vision.draw import draw_detections
from edgecnn.vision.sources import Frame, FrameError, open_sources

__all__ = ["Detection", "Detector", "Frame", "FrameError", "draw_detections", "open_sources"]
