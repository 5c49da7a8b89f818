"""Training a GPT: the loop, its configuration, devices, optimiser, checkpoints, scale-out.

``from lmcore.train import train, preset`` and ``train(preset("cpu"))``; from a shell
``python -m lmcore.train --preset cpu --out runs/NAME`` (:mod:`lmcore.train.cli`), under
``torchrun`` data-parallel. One concept per module:

- :mod:`.loop`: :func:`train`, the loop
- :mod:`.result`: :class:`TrainResult` and the checks made before a run starts
- :mod:`.presets`: :class:`TrainConfig`, the named presets, :func:`validate_config`
- :mod:`.devices`: :func:`pick_device`, :func:`autocast_for`, :func:`cpu_threads`
- :mod:`.device_check`: :func:`check_device_agrees`, one batch on the device against the CPU;
  :mod:`.agreement`: its tolerances, :class:`DeviceAgreement`, :class:`DeviceDisagreesError`
- :mod:`.optim`: AdamW groups and the learning-rate schedule
- :mod:`.accumulate`: gradient accumulation weighted by valid targets, :class:`NonFiniteLossError`
- :mod:`.evaluation`: :func:`evaluate`, the token-weighted loss of a split
- :mod:`.checkpoint`: safe save/load of models and tokenizers; :mod:`.resume`: exact resumption
- :mod:`.distributed`: torch.distributed (DDP) under torchrun
- :mod:`.cli`: the command line (also ``lmcore-train``)
"""

from .accumulate import NonFiniteLossError, accumulate_gradients
from .agreement import DeviceAgreement, DeviceDisagreesError
from .checkpoint import load_checkpoint, load_model, save_checkpoint
from .device_check import check_device_agrees
from .devices import autocast_for, cpu_threads, pick_device
from .evaluation import evaluate
from .loop import train
from .optim import configure_optimizer, lr_at
from .presets import PRESETS, TrainConfig, model_config, preset, validate_config
from .result import TrainResult

__all__ = [
    "train",
    "TrainResult",
    "TrainConfig",
    "PRESETS",
    "preset",
    "validate_config",
    "model_config",
    "pick_device",
    "autocast_for",
    "cpu_threads",
    "check_device_agrees",
    "DeviceAgreement",
    "DeviceDisagreesError",
    "evaluate",
    "accumulate_gradients",
    "NonFiniteLossError",
    "configure_optimizer",
    "lr_at",
    "save_checkpoint",
    "load_checkpoint",
    "load_model",
]
