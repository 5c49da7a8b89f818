"""Checkpoints that load with ``torch.load(..., weights_only=True)``: tensors and plain data only.

A checkpoint is a dict of state dicts (model, optimiser), the step and token counters, the
random-number states (so a resumed run continues exactly), the configs as plain dicts, the
history and enough to rebuild the tokenizer. Nothing in it is pickled code.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from .model import GPT, GPTConfig
from .tokenizers import ByteTokenizer, CharTokenizer, ChatTokenizer

__all__ = ["tokenizer_state", "tokenizer_from_state", "save_checkpoint", "load_checkpoint",
           "load_model"]


def tokenizer_state(tokenizer) -> dict:
    """Plain data describing one of lmcore's tokenizers."""
    if isinstance(tokenizer, CharTokenizer):
        return {"kind": "char", "chars": list(tokenizer.chars)}
    if isinstance(tokenizer, ByteTokenizer):
        return {"kind": "byte"}
    if isinstance(tokenizer, ChatTokenizer):
        return {"kind": "chat"}
    return {"kind": "unknown"}


def tokenizer_from_state(state: dict):
    kind = state.get("kind")
    if kind == "char":
        tok = CharTokenizer("".join(state["chars"]))
        if tok.chars != state["chars"]:
            raise ValueError("the checkpoint's character vocabulary is not sorted and unique.")
        return tok
    if kind == "byte":
        return ByteTokenizer()
    if kind == "chat":
        return ChatTokenizer()
    raise ValueError(f"cannot rebuild a tokenizer of kind {kind!r} from a checkpoint.")


def save_checkpoint(path, **state) -> Path:
    """Write ``state`` to ``path`` atomically (a temporary file, then a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path, map_location="cpu") -> dict:
    """The checkpoint dict, loaded with ``weights_only=True`` (never unpickles code)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}.")
    return torch.load(path, map_location=map_location, weights_only=True)


def load_model(path, map_location="cpu"):
    """``(model, tokenizer, checkpoint)`` from a checkpoint written by :func:`lmcore.train.train`."""
    ckpt = load_checkpoint(path, map_location)
    model = GPT(GPTConfig(**ckpt["model_config"]))
    model.load_state_dict(ckpt["model"])
    return model.eval(), tokenizer_from_state(ckpt["tokenizer"]), ckpt
