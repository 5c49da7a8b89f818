"""Checkpoints that load with ``torch.load(..., weights_only=True)``: tensors and plain data only.

A checkpoint is a dict of state dicts (model, optimiser), the step and token counters, the
random-number states (so a resumed run continues exactly), the configs as plain dicts, the
history and enough to rebuild the tokenizer. Nothing in it is pickled code.

One loading path (:func:`load_checkpoint`) turns every way a file can fail to be an lmcore
checkpoint (empty, random bytes, text, truncated, another zip, another program's checkpoint, a
pickle that would run code) into a ValueError that names the file and says what it is not.
"""

from __future__ import annotations

import os
import pickle
import pickletools
import warnings
import zipfile
from pathlib import Path

import torch

from ..data.tokenizers import ByteTokenizer, CharTokenizer, ChatTokenizer
from ..model import GPT, GPTConfig

__all__ = [
    "FORMAT",
    "tokenizer_state",
    "tokenizer_from_state",
    "save_checkpoint",
    "load_checkpoint",
    "load_model",
    "rng_state",
]

FORMAT = "lmcore-checkpoint-v1"  # the "format" key every checkpoint lmcore writes holds
_REQUIRED = ("model", "model_config", "tokenizer")


def tokenizer_state(tokenizer) -> dict:
    """Plain data describing one of lmcore's tokenizers; ValueError for any other tokenizer
    (a checkpoint must be able to rebuild it, so this refuses before anything is written)."""
    if type(tokenizer) is CharTokenizer:  # exact types: a subclass may encode differently
        return {"kind": "char", "chars": list(tokenizer.chars)}
    if type(tokenizer) is ByteTokenizer:
        return {"kind": "byte"}
    if type(tokenizer) is ChatTokenizer:
        return {"kind": "chat"}
    raise ValueError(
        f"cannot describe a tokenizer of type {type(tokenizer).__name__} in a "
        "checkpoint (lmcore stores CharTokenizer, ByteTokenizer and ChatTokenizer), so "
        "the saved model could not be reloaded. Use one of those, or train without "
        "out_dir and save the model yourself."
    )


def tokenizer_from_state(state: dict):
    kind = state.get("kind") if isinstance(state, dict) else None
    if kind == "char":
        chars = state.get("chars")
        if (
            not isinstance(chars, list)
            or not chars
            or not all(isinstance(c, str) and len(c) == 1 for c in chars)
        ):
            raise ValueError("the checkpoint's character vocabulary is not a list of characters.")
        tok = CharTokenizer("".join(chars))
        if tok.chars != chars:
            raise ValueError("the checkpoint's character vocabulary is not sorted and unique.")
        return tok
    if kind == "byte":
        return ByteTokenizer()
    if kind == "chat":
        return ChatTokenizer()
    raise ValueError(f"cannot rebuild a tokenizer of kind {kind!r} from a checkpoint.")


def save_checkpoint(path, **state) -> Path:
    """Write ``state`` (plus ``format``) to ``path`` atomically: a temporary file, then a rename.
    If writing fails, the temporary file is removed and an older checkpoint stays intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save({"format": FORMAT, **state}, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _pickle_globals(data: bytes) -> list[str]:
    """The ``module.name`` objects a pickle would import (GLOBAL / STACK_GLOBAL / INST)."""
    found, strings = [], []
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name in ("GLOBAL", "INST"):
                found.append(str(arg).replace(" ", "."))
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                found.append(f"{strings[-2]}.{strings[-1]}")
            elif isinstance(arg, str):
                strings.append(arg)
    except Exception:  # a damaged pickle: report what was read before the damage
        pass
    return sorted(set(found))


def _unsafe(path, data: bytes) -> ValueError:
    names = [n for n in _pickle_globals(data) if not n.startswith(("torch.", "collections.OrderedDict"))]
    what = f" ({', '.join(names[:5])})" if names else ""
    return ValueError(
        f"refused to load {path}: it is not an lmcore checkpoint. Its pickle asks to "
        f"import and call Python objects{what} beyond tensors and plain data, and "
        "unpickling them can run arbitrary code on this machine. lmcore checkpoints "
        "never contain such objects, so the file was not loaded. Do not load it; "
        "retrain or get the checkpoint from a source you trust."
    )


def _sniff(path: Path, head: bytes) -> str:
    if not head:
        return "it is empty (0 bytes)"
    if head.startswith(b"PK\x03\x04"):
        return (
            "it starts like the zip archive torch.save writes but is truncated or damaged "
            "(no zip directory at its end)"
        )
    try:
        head.decode("utf-8")
        return "it is a text file"
    except UnicodeDecodeError:
        return f"it is not a PyTorch file (it starts with {head[:8]!r}; torch.save writes a zip archive)"


def load_checkpoint(path, map_location="cpu") -> dict:
    """The checkpoint dict, loaded with ``weights_only=True`` (never unpickles code).

    FileNotFoundError if there is no file; ValueError naming the file for anything that is not
    an lmcore checkpoint."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}.")
    if path.is_dir():
        raise ValueError(
            f"{path} is a folder, not an lmcore checkpoint; pass the file inside it "
            "(e.g. checkpoint.pt or best.pt)."
        )
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if not zipfile.is_zipfile(path):
        if head[:1] == b"\x80":  # a bare pickle
            data = path.read_bytes()
            if any(not n.startswith("torch.") for n in _pickle_globals(data)):
                raise _unsafe(path, data)
            raise ValueError(
                f"{path} is not an lmcore checkpoint: it is a bare pickle, not a "
                "checkpoint written by torch.save."
            )
        raise ValueError(f"{path} is not an lmcore checkpoint: {_sniff(path, head)}.")
    with zipfile.ZipFile(path) as zf:
        pkl = [n for n in zf.namelist() if n.endswith("/data.pkl")]
        if len(pkl) != 1:
            raise ValueError(
                f"{path} is not an lmcore checkpoint: a zip archive, but not one "
                "written by torch.save (no data.pkl inside)."
            )
        data = zf.read(pkl[0])
    try:
        ck = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        raise _unsafe(path, data) from None  # from None: torch's text is not advice to follow
    except Exception as err:
        raise ValueError(
            f"{path} is not a readable lmcore checkpoint: torch.load failed with "
            f"{type(err).__name__} (truncated or damaged file?)."
        ) from None
    if not isinstance(ck, dict):
        raise ValueError(f"{path} is not an lmcore checkpoint: it holds a {type(ck).__name__}, not a dict.")
    missing = [k for k in _REQUIRED if k not in ck]
    if missing or ck.get("format", FORMAT) != FORMAT:
        keys = ", ".join(map(str, list(ck)[:6])) + (", ..." if len(ck) > 6 else "")
        raise ValueError(
            f"{path} is not an lmcore checkpoint: a PyTorch dict with keys [{keys}] "
            f"lacks {missing or 'nothing'} and has format {ck.get('format')!r} "
            f"(lmcore writes {FORMAT!r} with {list(_REQUIRED)})."
        )
    if not isinstance(ck["model"], dict) or not isinstance(ck["model_config"], dict):
        raise ValueError(f"{path} is not an lmcore checkpoint: 'model' and 'model_config' must be dicts.")
    return ck


def load_model(path, map_location="cpu"):
    """``(model, tokenizer, checkpoint)`` from a checkpoint written by :func:`lmcore.train.train`.

    The model is built on ``map_location`` (``"cuda"``, ``"mps"``, ``"cpu"``, even ``"meta"``)
    and returned there in eval mode; the checkpoint dict's tensors are loaded to the CPU, so a
    checkpoint written on any device loads on any other.
    """
    path = Path(path)
    device = torch.device(map_location)
    ck = load_checkpoint(path, "cpu")
    try:
        cfg = GPTConfig(**ck["model_config"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path} has a model_config GPTConfig does not accept: {err}") from None
    try:
        tokenizer = tokenizer_from_state(ck["tokenizer"])
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path}: {err}") from None
    with torch.device(device):
        model = GPT(cfg)
    try:
        with warnings.catch_warnings():  # on "meta" the copy is a no-op; the check still runs
            if device.type == "meta":
                warnings.simplefilter("ignore", UserWarning)
            model.load_state_dict(ck["model"])
    except (RuntimeError, TypeError, KeyError) as err:
        first = str(err).strip().splitlines()[:3]
        raise ValueError(
            f"{path}: the weights do not fit the model its model_config describes ({' '.join(first)[:300]})."
        ) from None
    return model.eval(), tokenizer, ck


def rng_state(x, key: str, path) -> torch.Tensor:
    """``x`` (the checkpoint's ``key``) as the CPU byte tensor ``set_rng_state`` needs, whatever
    device it was loaded to; ValueError naming the key and the file if it is not a byte tensor."""
    if not isinstance(x, torch.Tensor) or x.dtype != torch.uint8 or x.dim() != 1 or x.is_meta:
        got = (
            f"a {x.dtype} tensor of shape {tuple(x.shape)} on {x.device}"
            if isinstance(x, torch.Tensor)
            else type(x).__name__
        )
        raise ValueError(
            f"{path}: {key!r} must be a random-number state (a 1-D torch.uint8 "
            f"tensor holding data); got {got}. The checkpoint is damaged or was "
            "not written by lmcore.train."
        )
    return x.detach().to("cpu").contiguous()
