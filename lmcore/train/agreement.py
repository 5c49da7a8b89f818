"""What it means for a device to agree with the CPU: the tolerances, the result, the error.

:func:`lmcore.train.device_check.check_device_agrees` computes one batch's loss and gradients on
the CPU (float32) and on the device; this module says how far apart a correct device may be.
A correct device still rounds differently, so the tolerance (:data:`TOLERANCES`) depends on the
precision it computes in. Passing needs all three: ``|loss_device - loss_cpu| <= loss_atol +
loss_rtol * |loss_cpu|``; ``||g_device - g_cpu|| <= grad_rtol * ||g_cpu||`` (every parameter's
gradient as one vector: this catches a wrongly scaled gradient); and the cosine of the two
gradients ``>= min_cosine`` (their direction, what an update follows).

- ``float32``: kernels that sum in another order differ by about 1e-6 relative; the loss gets
  1e-4 and the gradient 1e-3 of its norm (cosine 0.9999), about a hundred times that.
- ``tf32``: float32 on CUDA with TF32 matmuls (``train`` turns them on there): inputs rounded to
  10 mantissa bits (about 5e-4 each); the loss gets 2e-3, the gradient 2e-2 (cosine 0.999).
- ``bfloat16`` / ``float16``: autocast rounds to 8 (bf16) or 11 (fp16) mantissa bits at every
  matmul, so the loss gets 2e-2 relative, the gradient 0.15 of its norm and cosine 0.99. On the
  CPU, bf16 autocast differs from float32 by about 1e-6 in the loss and 0.4-0.5% in the gradient
  (the presets' models); scaling the logits by 1.05 moves the gradient by 16% (cosine 0.991),
  which is refused. A broken kernel (a loss of 19.9 for 3.8) is refused at any of them.

These margins are reasoned from the formats and measured on the CPU only; a device that is
right but lands outside them can skip the check (``TrainConfig(check_device=False)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Tolerance", "TOLERANCES", "DeviceAgreement", "DeviceDisagreesError", "FALLBACK"]


@dataclass(frozen=True)
class Tolerance:
    """How far a correct device may be from the CPU (see the module's docstring)."""

    loss_rtol: float
    loss_atol: float
    grad_rtol: float
    min_cosine: float


TOLERANCES = {
    "float32": Tolerance(loss_rtol=1e-4, loss_atol=1e-5, grad_rtol=1e-3, min_cosine=0.9999),
    "tf32": Tolerance(loss_rtol=2e-3, loss_atol=1e-5, grad_rtol=2e-2, min_cosine=0.999),
    "bfloat16": Tolerance(loss_rtol=2e-2, loss_atol=1e-4, grad_rtol=0.15, min_cosine=0.99),
    "float16": Tolerance(loss_rtol=2e-2, loss_atol=1e-4, grad_rtol=0.15, min_cosine=0.99),
}
FALLBACK = (
    "Train on the CPU instead (TrainConfig(device='cpu'), or --device cpu on the command line), or, "
    "only if you know this difference is harmless, skip the check (TrainConfig(check_device=False), "
    "or --no-device-check)."
)


@dataclass(frozen=True)
class DeviceAgreement:
    """One batch on the CPU (float32) and on ``device``: the losses, how far the gradients are
    apart (relative to the CPU's gradient norm, all parameters together; and the parameter whose
    own gradient is furthest), their cosine, the tolerance used and whether it passed."""

    device: str
    precision: str  # float32 | tf32 | bfloat16 | float16
    loss_cpu: float
    loss_device: float
    grad_rel_diff: float
    grad_cosine: float
    worst_param: str
    worst_param_rel_diff: float
    tolerance: Tolerance
    targets: int  # valid targets in the batch compared

    @property
    def loss_diff(self) -> float:
        return abs(self.loss_device - self.loss_cpu)

    @property
    def loss_allowed(self) -> float:
        return self.tolerance.loss_atol + self.tolerance.loss_rtol * abs(self.loss_cpu)

    @property
    def passed(self) -> bool:
        t = self.tolerance
        values = (self.loss_cpu, self.loss_device, self.grad_rel_diff, self.grad_cosine)
        return (
            all(math.isfinite(v) for v in values)
            and self.loss_diff <= self.loss_allowed
            and self.grad_rel_diff <= t.grad_rtol
            and self.grad_cosine >= t.min_cosine
        )

    def line(self) -> str:
        """One line: agrees or disagrees, the numbers and their tolerances."""
        t = self.tolerance
        verdict = "agrees with" if self.passed else "DISAGREES with"
        return (
            f"device check: {self.device} ({self.precision}) {verdict} the CPU (float32) on "
            f"{self.targets} targets: loss {self.loss_device:.4f} vs {self.loss_cpu:.4f} on the CPU "
            f"(difference {self.loss_diff:.2e}, allowed {self.loss_allowed:.2e}), gradients "
            f"{self.grad_rel_diff:.2e} of their norm apart (allowed {t.grad_rtol:g}; most in "
            f"{self.worst_param}: {self.worst_param_rel_diff:.2e}), cosine {self.grad_cosine:.6f} "
            f"(needs >= {t.min_cosine:g})"
        )


class DeviceDisagreesError(RuntimeError):
    """The device's loss or gradients are not the CPU's within the tolerance (``.result``)."""

    def __init__(self, result: DeviceAgreement):
        self.result = result
        super().__init__(f"{result.line()}. Training on {result.device} would be silently wrong. {FALLBACK}")
