"""Training for classic CNN layers on edgecnn Graphs (issue 5): backward passes, SGD, schedules,
datasets, LeNet-5, checkpoints as .ecnn. docs/training.md shows the commands.

    train, test = load_dataset("digits")
    trainer = Trainer(build_lenet5(), TrainConfig(epochs=15))
    trainer.fit(train, val=test)
    edgecnn.Model(trainer.graph).save("lenet5.ecnn")
"""

from edgecnn.train.checkpoint import resume, save_checkpoint
from edgecnn.train.data import Dataset, load_dataset
from edgecnn.train.lenet import build_lenet5
from edgecnn.train.network import Network
from edgecnn.train.optim import SGD, Schedule
from edgecnn.train.trainer import EpochStats, TrainConfig, Trainer, TrainingDivergedError

__all__ = [
    "SGD",
    "Dataset",
    "EpochStats",
    "Network",
    "Schedule",
    "TrainConfig",
    "Trainer",
    "TrainingDivergedError",
    "build_lenet5",
    "load_dataset",
    "resume",
    "save_checkpoint",
]
