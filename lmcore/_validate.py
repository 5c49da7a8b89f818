"""Input checks shared by the core modules: clear errors instead of NaNs or CUDA asserts."""
from __future__ import annotations

import torch

__all__ = ["require_tensor", "require_float", "require_int", "require_labels_in_range",
           "require_positive_int"]


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    return f"{type(x).__name__} {x!r}"[:120]


def require_tensor(name: str, x, ndim: int | None = None, shape_doc: str = "") -> torch.Tensor:
    """Raise TypeError unless ``x`` is a tensor; ValueError unless it has ``ndim`` dimensions."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor{' ' + shape_doc if shape_doc else ''}; "
                        f"got {_describe(x)}. Wrap it with torch.tensor(...).")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions {shape_doc}; got shape "
                         f"{tuple(x.shape)}. Add or remove a batch dimension (e.g. x.unsqueeze(0)).")
    return x


def require_float(name: str, x: torch.Tensor) -> torch.Tensor:
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (the model's raw scores); got "
                        f"dtype {x.dtype}. Did you pass token ids or labels where logits belong?")
    return x


def require_int(name: str, x: torch.Tensor) -> torch.Tensor:
    if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor of token ids (torch.long); got dtype "
                        f"{x.dtype}. Convert with {name}.long().")
    return x


def require_labels_in_range(name: str, labels: torch.Tensor, vocab_size: int,
                            ignore_index: int) -> None:
    """Every label must be a token id in [0, V) or ``ignore_index``."""
    bad = (labels != ignore_index) & ((labels < 0) | (labels >= vocab_size))
    if bool(bad.any()):
        value = int(labels[bad][0])
        where = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{name} holds {value} at position {where}, outside the vocabulary "
                         f"[0, {vocab_size}) and not ignore_index={ignore_index}. Check the "
                         f"tokenizer's vocabulary size, or mark padding with {ignore_index}.")


def require_positive_int(name: str, x) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f"{name} must be an int; got {_describe(x)}.")
    if x < 1:
        raise ValueError(f"{name} must be at least 1; got {x}.")
    return x
