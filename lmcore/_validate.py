"""Input checks shared by the core modules: clear errors instead of NaNs or CUDA asserts."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import torch

__all__ = [
    "require_tensor",
    "require_values",
    "require_float",
    "require_int",
    "require_labels_in_range",
    "require_positive_int",
    "require_int_scalar",
    "require_real",
    "require_choice",
    "require_bool",
    "require_token_ids",
    "require_generator",
    "require_ids_in_range",
    "require_documents",
]

# Token ids and labels: int32/int64 only. Unsigned dtypes wrap -100 (uint8: 156) and small
# signed ones overflow real vocabularies and fail inside F.embedding.
ID_DTYPES = (torch.int64, torch.int32)
INT64_MAX = 2**63 - 1


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    return f"{type(x).__name__} {x!r}"[:120]


def require_tensor(name: str, x, ndim: int | None = None, shape_doc: str = "") -> torch.Tensor:
    """Raise TypeError unless ``x`` is a tensor; ValueError unless it has ``ndim`` dimensions."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor{' ' + shape_doc if shape_doc else ''}; "
            f"got {_describe(x)}. Wrap it with torch.tensor(...)."
        )
    if ndim is not None and x.dim() != ndim:
        raise ValueError(
            f"{name} must have {ndim} dimensions {shape_doc}; got shape "
            f"{tuple(x.shape)}. Add or remove a batch dimension (e.g. x.unsqueeze(0))."
        )
    return x


def require_values(name: str, x: torch.Tensor) -> torch.Tensor:
    """Raise ValueError if ``x`` lives on the ``meta`` device (a shape without values)."""
    if x.is_meta:
        raise ValueError(
            f"{name} is on the 'meta' device: it has a shape {tuple(x.shape)} but no values, so "
            "nothing can be computed from it. Move the model (or tensor) to a real device "
            "first, e.g. model.to_empty(device='cpu') and load its weights."
        )
    return x


def require_float(name: str, x: torch.Tensor) -> torch.Tensor:
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor (the model's raw scores); got "
            f"dtype {x.dtype}. Did you pass token ids or labels where logits belong?"
        )
    return x


def require_int(name: str, x: torch.Tensor) -> torch.Tensor:
    """Token ids / labels / positions: an int64 or int32 tensor (never bool, float or unsigned)."""
    if x.dtype not in ID_DTYPES:
        kind = (
            "unsigned, so -100 would wrap"
            if x.dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64)
            else "too small for a vocabulary"
            if x.dtype in (torch.int8, torch.int16)
            else "not an integer type"
        )
        raise TypeError(
            f"{name} must be an integer tensor of token ids (torch.long or torch.int32); "
            f"got dtype {x.dtype} ({kind}). Convert with {name}.long()."
        )
    return x


def require_labels_in_range(name: str, labels: torch.Tensor, vocab_size: int, ignore_index: int) -> None:
    """Every label must be a token id in [0, V) or ``ignore_index``."""
    bad = (labels != ignore_index) & ((labels < 0) | (labels >= vocab_size))
    if bool(bad.any()):
        value = int(labels[bad][0])
        where = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"{name} holds {value} at position {where}, outside the vocabulary "
            f"[0, {vocab_size}) and not ignore_index={ignore_index}. Check the "
            f"tokenizer's vocabulary size, or mark padding with {ignore_index}."
        )


def require_positive_int(name: str, x) -> int:
    """A Python/NumPy int >= 1 (never a bool), returned as int."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{name} must be an int; got {_describe(x)}.")
    if x < 1:
        raise ValueError(f"{name} must be at least 1; got {x}.")
    return int(x)


def require_int_scalar(
    name: str, x, *, min: int | None = None, max: int | None = None, tensor_ok: bool = False, hint: str = ""
) -> int:
    """A Python/NumPy int (never a bool, float or string) within [min, max], returned as int.

    ``tensor_ok=True`` also accepts a 0-d int64/int32 tensor (e.g. a count from ``.sum()``).
    ``hint`` (how to fix it) is appended to the message.
    """
    hint = f" {hint}" if hint else ""
    if tensor_ok and isinstance(x, torch.Tensor) and x.dim() == 0 and x.dtype in ID_DTYPES:
        x = int(x)
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{name} must be an int; got {_describe(x)}.{hint}")
    x = int(x)
    if min is not None and x < min:
        raise ValueError(f"{name} must be at least {min}; got {x}.{hint}")
    if max is not None and x > max:
        raise ValueError(f"{name} must be at most {max}; got {x}.{hint}")
    return x


def require_real(
    name: str,
    x,
    *,
    min: float | None = None,
    max: float | None = None,
    min_inclusive: bool = True,
    finite: bool = True,
    hint: str = "",
) -> float:
    """A real number (int or float, never a bool or string), finite unless ``finite=False``,
    within ``min`` (inclusive unless ``min_inclusive=False``) and ``max`` (inclusive).
    ``hint`` (what the number is, how to fix it) is appended to the message."""
    hint = f" {hint}" if hint else ""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be a number; got {_describe(x)}.{hint}")
    x = float(x)
    if math.isnan(x) or (finite and math.isinf(x)):
        raise ValueError(f"{name} must be a finite number; got {x}.{hint}")
    if min is not None and (x < min or (not min_inclusive and x == min)):
        raise ValueError(
            f"{name} must be {'at least' if min_inclusive else 'greater than'} {min}; got {x}.{hint}"
        )
    if max is not None and x > max:
        raise ValueError(f"{name} must be at most {max}; got {x}.{hint}")
    return x


def require_choice(name: str, x, choices) -> object:
    """``x`` must be one of ``choices`` (compared with ==, bools never stand in for ints)."""
    if isinstance(x, bool) and not any(isinstance(c, bool) for c in choices):
        raise TypeError(f"{name} must be one of {list(choices)}; got {_describe(x)}.")
    if x not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}; got {_describe(x)}.")
    return x


def require_bool(name: str, x) -> bool:
    """True or False (a NumPy bool too), never an int or a string; returned as bool."""
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {_describe(x)}.")
    return bool(x)


def require_token_ids(name: str, ids) -> torch.Tensor:
    """``ids`` (a list of ints, an int64/int32 tensor or array) as a long tensor; never coerced
    from floats or bools."""
    how = f"Pass token ids: a list of ints or an int tensor (convert with {name}.long())."
    if isinstance(ids, torch.Tensor):
        return require_int(name, ids).long()
    if isinstance(ids, np.ndarray):
        if ids.dtype not in (np.int64, np.int32):
            raise TypeError(
                f"{name} must hold int64 or int32 token ids; got a NumPy array of dtype {ids.dtype}. {how}"
            )
        return torch.from_numpy(np.ascontiguousarray(ids)).long()
    if not isinstance(ids, Sequence) or isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} must be a list or tensor of token ids; got {_describe(ids)}. {how}")
    for k, t in enumerate(ids):
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Integral):
            raise TypeError(f"{name} must hold int token ids; got {_describe(t)} at {name}[{k}]. {how}")
    try:
        return torch.tensor(list(ids), dtype=torch.long)
    except (RuntimeError, OverflowError):
        raise ValueError(f"{name} holds a value too large for int64; is it really token ids?") from None


def require_generator(generator) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be None or a torch.Generator (e.g. "
            f"torch.Generator().manual_seed(0)); got {_describe(generator)}."
        )


def require_ids_in_range(
    name: str, ids: torch.Tensor, vocab_size: int | None = None, hint: str = ""
) -> torch.Tensor:
    """Every id in ``ids`` is >= 0 and, when ``vocab_size`` is given, below it."""
    if ids.numel():
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or (vocab_size is not None and hi >= vocab_size):
            where = f"in [0, {vocab_size})" if vocab_size is not None else ">= 0"
            raise ValueError(
                f"{name} must be token ids {where}; got values from {lo} to {hi}.{' ' + hint if hint else ''}"
            )
    return ids


def require_documents(name: str, documents) -> list[list[int]]:
    """A non-empty sequence of non-empty token-id sequences (lists, tuples, 1-D tensors or
    arrays) holding non-negative ints only (never floats, bools or -100), as lists of int."""
    if isinstance(documents, torch.Tensor) or not isinstance(documents, Sequence) or not documents:
        raise TypeError(
            f"{name} must be a non-empty list of token-id lists (or 1-D tensors); "
            f"got {type(documents).__name__}."
        )
    out = []
    for k, doc in enumerate(documents):
        if isinstance(doc, (torch.Tensor, np.ndarray)) and doc.ndim == 1:
            tokens = doc.tolist()
        elif isinstance(doc, Sequence) and not isinstance(doc, (str, bytes)):
            tokens = list(doc)
        else:
            raise TypeError(
                f"{name}[{k}] must be a list of token ids (or a 1-D tensor); got "
                f"{_describe(doc)}. {name} is a list of documents: wrap a single "
                "document as [ids]."
            )
        if not tokens:
            raise ValueError(f"{name}[{k}] is empty; drop empty documents before packing.")
        if not all(
            isinstance(t, numbers.Integral) and not isinstance(t, (bool, np.bool_)) and t >= 0 for t in tokens
        ):
            raise TypeError(
                f"{name}[{k}] must hold non-negative int token ids; got "
                f"{tokens[:8]}{'...' if len(tokens) > 8 else ''}."
            )
        if max(tokens) > INT64_MAX:
            raise ValueError(
                f"{name}[{k}] holds the token id {max(tokens)}, too large for int64; is it really a token id?"
            )
        out.append([int(t) for t in tokens])
    return out
