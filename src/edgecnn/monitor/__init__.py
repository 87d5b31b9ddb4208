"""`edgecnn monitor`: seed 001's monitoring app (sample -> infer -> draw) as a local web page with
live frames, latency, FPS, per-core load and the 50 ms load trace (recorded to CSV on request)."""

from edgecnn.monitor.errors import MonitorError
from edgecnn.monitor.load import LoadSample, LoadSampler
from edgecnn.monitor.pipeline import FrameStats, InferenceLoop, LatestFrame
from edgecnn.monitor.service import Monitor
from edgecnn.monitor.trace import TraceEvent, TraceRecorder

__all__ = [
    "FrameStats",
    "InferenceLoop",
    "LatestFrame",
    "LoadSample",
    "LoadSampler",
    "Monitor",
    "MonitorError",
    "TraceEvent",
    "TraceRecorder",
]
