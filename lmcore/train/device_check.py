"""Does a device compute what the CPU computes? One batch's loss and gradients, on both.

A device whose kernels are wrong trains without an error: a widely used course found its model
on Apple's MPS at loss 19.9 where the CPU gave 3.8. :func:`check_device_agrees` computes one
batch's loss and every parameter's gradient twice: on the CPU in float32 (a deep copy of the
model) and on the device as the run will train there (the model itself, under the autocast of
the run), both in eval mode (no dropout: both compute the same function, and no random number
is drawn). It compares them within the tolerance of the device's precision
(:mod:`lmcore.train.agreement`). :func:`lmcore.train.train` runs it once before the first step on
any device but the CPU, on the first rows of its first training batch, and refuses to train
when it fails.
"""

from __future__ import annotations

import contextlib
import copy
import math

import torch

from .._validate import require_positive_int, require_real, require_tensor
from ..loss import causal_lm_loss
from ..shift import num_valid_targets
from .accumulate import model_kwargs
from .agreement import TOLERANCES, DeviceAgreement, DeviceDisagreesError, Tolerance

__all__ = ["device_needs_check", "check_device_agrees"]

_LOW = {torch.bfloat16: "bfloat16", torch.float16: "float16"}


def device_needs_check(device) -> bool:
    """True for every device but the CPU (on the CPU there is nothing to compare with)."""
    return torch.device(device).type != "cpu"


def check_device_agrees(
    model,
    batch: dict,
    device,
    *,
    autocast_dtype: torch.dtype | None = None,
    forward=None,
    rows: int | None = 4,
    tolerance: Tolerance | None = None,
    raise_on_failure: bool = True,
) -> DeviceAgreement:
    """Compare ``batch``'s loss and gradients on ``device`` with the CPU's in float32.

    ``model`` is the model as it will train (its parameters on ``device``); ``batch`` a training
    batch (``input_ids`` and ``labels`` (N, L), optionally ``document_ids``/``position_ids``), of
    which the first ``rows`` rows are used (None: all). The device side runs ``forward(input_ids,
    **kwargs)`` (default: ``model``; e.g. a wrapped model) under ``torch.autocast(device.type,
    autocast_dtype)`` when ``autocast_dtype`` is given; the CPU side runs a float32 deep copy of
    ``model``. ``tolerance`` defaults to :data:`TOLERANCES` of the device's precision. Raises
    :class:`DeviceDisagreesError` when it fails (or returns the result with
    ``raise_on_failure=False``). The model's mode and ``.grad`` are left as they were.
    """
    device, batch = _check_args(model, batch, device, autocast_dtype, forward, rows, tolerance)
    precision = _precision(model, device, autocast_dtype)
    tolerance = tolerance if tolerance is not None else TOLERANCES[precision]
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    reference = copy.deepcopy(model).to(device="cpu", dtype=torch.float32)
    was_training = model.training
    model.eval()
    reference.eval()
    try:
        loss_cpu, g_cpu = _loss_and_grads(reference, reference, batch, torch.device("cpu"), None)
        loss_dev, g_dev = _loss_and_grads(model, forward or model, batch, device, autocast_dtype)
    finally:
        model.train(was_training)
    result = DeviceAgreement(
        str(device),
        precision,
        loss_cpu,
        loss_dev,
        *_compare(names, g_cpu, g_dev),
        tolerance=tolerance,
        targets=num_valid_targets(batch["labels"]),
    )
    if raise_on_failure and not result.passed:
        raise DeviceDisagreesError(result)
    return result


def _check_args(model, batch, device, autocast_dtype, forward, rows, tolerance):
    """The arguments of :func:`check_device_agrees`, checked; returns the device and the rows."""
    if not isinstance(model, torch.nn.Module) or not any(p.requires_grad for p in model.parameters()):
        raise TypeError(f"model must be a torch.nn.Module with trainable parameters; got {model!r:.80}.")
    if not isinstance(batch, dict):
        raise TypeError(
            f"batch must be a dict (input_ids, labels, ...) as a corpus's batch(); got {batch!r:.80}."
        )
    ids = require_tensor("batch['input_ids']", batch.get("input_ids"), 2, "(N, L)")
    if require_tensor("batch['labels']", batch.get("labels"), 2, "(N, L)").shape != ids.shape:
        raise ValueError(f"batch's labels must have the shape of its input_ids {tuple(ids.shape)}.")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a str or torch.device such as 'cuda' or 'mps'; got {device!r:.80}.")
    try:
        device = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(
            f"device must name a torch device such as 'cuda' or 'mps'; got {device!r}."
        ) from None
    where = next(p for p in model.parameters() if p.requires_grad).device
    if where.type != device.type or (device.index is not None and where.index != device.index):
        raise ValueError(f"device is {device} but the model's parameters are on {where}; move it there.")
    if autocast_dtype is not None and autocast_dtype not in _LOW:
        raise ValueError(
            f"autocast_dtype must be None, torch.bfloat16 or torch.float16; got {autocast_dtype!r}."
        )
    if forward is not None and not callable(forward):
        raise TypeError(f"forward must be callable (input_ids, **kwargs) -> logits; got {forward!r:.80}.")
    rows = None if rows is None else require_positive_int("rows", rows)
    if tolerance is not None and not isinstance(tolerance, Tolerance):
        raise TypeError(f"tolerance must be a Tolerance or None; got {tolerance!r:.80}.")
    for name in ("loss_rtol", "loss_atol", "grad_rtol", "min_cosine") if tolerance is not None else ():
        require_real(f"tolerance.{name}", getattr(tolerance, name), min=-1.0 if name == "min_cosine" else 0.0)
    if tolerance is not None and tolerance.min_cosine > 1:
        raise ValueError(f"tolerance.min_cosine must be at most 1; got {tolerance.min_cosine}.")
    return device, {k: v[:rows] for k, v in batch.items()}


def _precision(model, device: torch.device, autocast_dtype) -> str:
    """What the device computes in: the autocast dtype, else low-precision weights, else float32
    (``tf32`` on CUDA while float32 matmuls may use TF32)."""
    if autocast_dtype is not None:
        return _LOW[autocast_dtype]
    for p in model.parameters():
        if p.dtype in _LOW:
            return _LOW[p.dtype]
    if device.type == "cuda" and torch.get_float32_matmul_precision() != "highest":
        return "tf32"
    return "float32"


def _loss_and_grads(model, forward, batch: dict, device: torch.device, autocast_dtype):
    """The mean loss of ``batch`` through ``forward`` and each trainable parameter's gradient
    (float32 on the CPU, flattened; zeros where unused), computed without touching ``.grad``.
    Non-finite logits give a NaN loss and NaN gradients."""
    params = [p for p in model.parameters() if p.requires_grad]
    b = {k: v.to(device) for k, v in batch.items()}
    cast = (
        contextlib.nullcontext()
        if autocast_dtype is None
        else torch.autocast(device.type, dtype=autocast_dtype)
    )
    with cast:
        logits = forward(b["input_ids"], **model_kwargs(b))
    if not bool(torch.isfinite(logits.detach()).all()):
        return math.nan, [torch.full((p.numel(),), math.nan) for p in params]
    loss = causal_lm_loss(logits, b["labels"])
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    flat = [
        torch.zeros(p.numel()) if g is None else g.detach().float().flatten().cpu()
        for p, g in zip(params, grads)
    ]
    return float(loss.detach()), flat


def _compare(names, g_cpu, g_dev) -> tuple:
    """(||dev - cpu|| / ||cpu||, cosine, the parameter furthest from its own gradient and how far),
    in float64; two zero gradients agree."""

    def rel(diff, ref):
        return 0.0 if diff == 0 else (diff / ref if ref > 0 else math.inf)

    a, b = torch.cat(g_cpu).double(), torch.cat(g_dev).double()
    norms = a.norm().item() * b.norm().item()
    cosine = (a @ b).item() / norms if norms > 0 else (1.0 if a.norm() == b.norm() else 0.0)
    each = [
        rel((y.double() - x.double()).norm().item(), x.double().norm().item()) for x, y in zip(g_cpu, g_dev)
    ]
    worst = max(range(len(each)), key=lambda i: math.inf if math.isnan(each[i]) else each[i])
    return rel((b - a).norm().item(), a.norm().item()), cosine, names[worst], each[worst]
