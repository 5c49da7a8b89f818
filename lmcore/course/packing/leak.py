"""Notebook 06, section 4 (measure the leak): how far document B's outputs move when document A,
packed before it in the same row, is replaced by a different one. :func:`measure_packing_leak`
does it on a small seeded GPT (:func:`leak_model`) for any combination of EOS, block-diagonal
attention and reset positions, :func:`policy_leaks` for each policy of
:data:`lmcore.course.packing.lesson.POLICIES`, and :func:`rotary_leak` for one attention layer with
rotary positions. The rows come from :func:`lmcore.course.packing.lesson.pack_with_policy`.
"""

from __future__ import annotations

import torch

from ...model import GPT
from ...shift import document_causal_mask
from ..toys import toy_gpt
from .lesson import VOCAB, pack_with_policy

__all__ = [
    "leak_model",
    "measure_packing_leak",
    "rotate",
    "rotary_leak",
    "policy_leaks",
    "A_WORDS",
    "leaks_by_length",
]

A_WORDS = ("a", "bird", "sings", "on", "the", "mat", "the", "cat")  # replacement A: its first n words


def leak_model(seed: int = 0) -> GPT:
    """A seeded 2-layer GPT (:func:`lmcore.course.toys.toy_gpt`) in float64, eval mode: a leak
    of 0 reads about 1e-16, far below the 3 decimals the notebook prints (checked under
    ATEN_CPU_CAPABILITY=default and avx2)."""
    return toy_gpt(
        len(VOCAB), block_size=32, n_layer=2, n_embd=32, init_std=0.2, dtype=torch.float64, seed=seed
    )


@torch.no_grad()
def measure_packing_leak(
    model=None,
    *,
    eos: bool = True,
    block_diagonal: bool = False,
    reset_positions: bool = False,
    a: str = "the cat sat on the mat",
    a_changed: str = "a bird sings",
    b: str = "dogs run fast",
) -> float:
    """max |Δ logits| over document B's positions when document A (packed before B in the same
    row) is replaced by a different, shorter document. 0 means B cannot tell what preceded it."""
    if not eos and (block_diagonal or reset_positions):
        raise ValueError("block_diagonal and reset_positions need eos=True (packed with EOS).")
    model = model if model is not None else leak_model()
    out = []
    for first in (a, a_changed):
        p = pack_with_policy([first, b], 16, "block_diagonal" if eos else "no_eos")
        logits = model(
            p["input_ids"],
            document_ids=p["document_ids"] if block_diagonal else None,
            position_ids=p["position_ids"] if reset_positions else None,
        )
        out.append(logits[p["document_ids"] == 1])  # (tokens of B, V)
    return float((out[0] - out[1]).abs().max())


def rotate(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding (RoPE) of x (L, D) at integer positions pos (L,): each pair
    (x[:, i], x[:, i + D/2]) read as a complex number is multiplied by e^{i pos theta_i}."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[-1] % 2:
        raise ValueError(f"x must be a (L, D) tensor with D even; got {getattr(x, 'shape', x)!r}.")
    if not isinstance(pos, torch.Tensor) or pos.shape != x.shape[:1] or pos.is_floating_point():
        raise ValueError(f"pos must be an integer tensor of shape ({x.shape[0]},); got {pos!r}.")
    half = x.shape[-1] // 2
    angle = pos[:, None].double() * 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1)


@torch.no_grad()
def rotary_leak(
    *,
    block_diagonal: bool,
    a: str = "the cat sat on the mat",
    a_changed: str = "a bird sings",
    b: str = "dogs run fast",
    seed: int = 0,
) -> float:
    """The leak of :func:`measure_packing_leak` for one seeded float64 attention layer with rotary
    positions at the row's absolute indices (never reset): queries and keys are rotated by their
    position, so a score depends only on the distance between query and key."""
    g = torch.Generator().manual_seed(seed)
    D = 16
    E, Wq, Wk, Wv = (
        torch.randn(*shape, generator=g, dtype=torch.float64)
        for shape in ((len(VOCAB), D), (D, D), (D, D), (D, D))
    )
    out = []
    for first in (a, a_changed):
        p = pack_with_policy([first, b], 16, "block_diagonal")
        x, doc = E[p["input_ids"][0]], p["document_ids"]
        pos = torch.arange(x.shape[0])
        q, k = rotate(x @ Wq, pos), rotate(x @ Wk, pos)
        allowed = (
            document_causal_mask(doc)[0]
            if block_diagonal
            else torch.ones(len(pos), len(pos), dtype=torch.bool).tril()
        )
        att = (q @ k.T / D**0.5).masked_fill(~allowed, float("-inf")).softmax(-1)
        out.append((att @ (x @ Wv))[doc[0] == 1])
    return float((out[0] - out[1]).abs().max())


def policy_leaks(model=None) -> dict:
    """The leak under each policy, plus the two halves of the last one on their own."""
    model = model if model is not None else leak_model()
    eos = measure_packing_leak(model)
    return {
        "no_eos": measure_packing_leak(model, eos=False),
        "eos": eos,
        "eos_masked": eos,
        "block_diagonal": measure_packing_leak(model, block_diagonal=True, reset_positions=True),
        "positions_reset_only": measure_packing_leak(model, reset_positions=True),
        "block_diagonal_only": measure_packing_leak(model, block_diagonal=True),
    }


def leaks_by_length(model=None, *, block_diagonal: bool, reset_positions: bool, lengths=range(1, 9)) -> dict:
    """``{n: leak}``: :func:`measure_packing_leak` (A = "the cat sat on the mat", 6 words) with A
    replaced by the first ``n`` words of :data:`A_WORDS`, under the two switches (what the
    notebook's leak widget draws)."""
    model = model if model is not None else leak_model()
    out = {}
    for n in lengths:
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(A_WORDS):
            raise ValueError(f"lengths must be ints in [1, {len(A_WORDS)}]; got {n!r}.")
        out[n] = measure_packing_leak(
            model,
            block_diagonal=block_diagonal,
            reset_positions=reset_positions,
            a_changed=" ".join(A_WORDS[:n]),
        )
    return out
