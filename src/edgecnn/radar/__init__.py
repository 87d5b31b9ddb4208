"""Seed 003's radar target classifier end to end (docs/radar.md): simulated high-resolution range
profiles of ten aircraft-like target classes, the patent's 1-D CNN trained with edgecnn's trainer and
written in the seed's binary format, held-out accuracy with a confusion matrix, and the seed's
data-parallel inference on every core.

    report = run_example(Path("out"))
    report.evaluation.accuracy, report.throughput
"""

from edgecnn.radar.classifier import TRAINING, Evaluation, confusion_matrix, evaluate, train_classifier
from edgecnn.radar.example import ExampleHooks, ExampleReport, ExampleSettings, run_example
from edgecnn.radar.network import PATENT_LAYERS, untrained_network
from edgecnn.radar.simulate import RadarSettings, simulate_returns
from edgecnn.radar.targets import TARGET_CLASSES, TargetClass
from edgecnn.radar.throughput import Throughput, classify_all, measure_throughput

__all__ = [
    "PATENT_LAYERS",
    "TARGET_CLASSES",
    "TRAINING",
    "Evaluation",
    "ExampleHooks",
    "ExampleReport",
    "ExampleSettings",
    "RadarSettings",
    "TargetClass",
    "Throughput",
    "classify_all",
    "confusion_matrix",
    "evaluate",
    "measure_throughput",
    "run_example",
    "simulate_returns",
    "train_classifier",
    "untrained_network",
]
