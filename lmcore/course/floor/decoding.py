"""Notebook 09, constrained decoding: the answer after ``=`` written under a grammar (one or two
digits, then ``.``) by masking the logits of every other token, against free sampling at
temperature 1 and greedy decoding. The model (θ) is the same in all three; only the rule that
turns its logits into a token changes.
"""

from __future__ import annotations

import torch

from .lesson import TOK

__all__ = ["DIGITS", "allow_only", "ANSWER_GRAMMAR", "write_answers", "score_answers"]

DIGITS = tuple(TOK.stoi[d] for d in "0123456789")
_DOT = TOK.stoi["."]
# the tokens allowed at each step of an answer: a digit, then a digit or ".", then "."
ANSWER_GRAMMAR = (DIGITS, DIGITS + (_DOT,), (_DOT,))


def allow_only(logits: torch.Tensor, allowed) -> torch.Tensor:
    """``logits`` ``(..., V)`` with every token not in ``allowed`` (token ids) set to -inf: a
    softmax then gives those tokens probability 0 and the allowed ones their old relative odds.
    Returns a new tensor."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.ndim < 1:
        raise TypeError(f"logits must be a floating-point tensor (..., V); got {type(logits).__name__}.")
    ids = list(allowed)
    v = logits.shape[-1]
    if not ids or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < v for i in ids):
        raise ValueError(f"allowed must be a non-empty list of token ids in [0, {v}); got {allowed!r}.")
    keep = torch.zeros(v, dtype=torch.bool, device=logits.device)
    keep[ids] = True
    return logits.masked_fill(~keep, float("-inf"))


def _prompts(high: int = 9):
    pairs = [(a, b) for a in range(high + 1) for b in range(high + 1)]
    ids = torch.tensor([TOK.encode(f"<user> {a} + {b} = <assistant>") for a, b in pairs])
    return ids, [a + b for a, b in pairs]


@torch.no_grad()
def write_answers(model, mode: str, *, repeats: int = 10, seed: int = 0, mask=allow_only, high: int = 9):
    """Every prompt ``<user> a + b = <assistant>`` (a, b in 0..high), ``repeats`` times each,
    answered with three tokens by ``mode``: ``"greedy"`` (the argmax), ``"sample"`` (a draw from
    the softmax at temperature 1) or ``"constrained"`` (a draw at temperature 1 after ``mask``
    keeps only :data:`ANSWER_GRAMMAR`'s tokens for that step). Returns ``(tokens (N, 3), sums)``."""
    if mode not in ("greedy", "sample", "constrained"):
        raise ValueError(f"mode must be 'greedy', 'sample' or 'constrained'; got {mode!r}.")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1; got {repeats!r}.")
    prompts, sums = _prompts(high)
    seq = prompts.repeat_interleave(repeats, 0).to(next(model.parameters()).device)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    was_training = model.training
    model.eval()
    for step in range(3):
        logits = model(seq)[:, -1].double().cpu()
        if mode == "constrained":
            logits = mask(logits, list(ANSWER_GRAMMAR[step]))
        if mode == "greedy":
            nxt = logits.argmax(-1)
        else:
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)[:, 0]
        seq = torch.cat([seq, nxt[:, None].to(seq.device)], 1)
    model.train(was_training)
    return seq[:, -3:].cpu(), [s for s in sums for _ in range(repeats)]


def score_answers(tokens, sums) -> dict:
    """``valid``: the share of answers that follow the grammar (one or two digits, then ``.``);
    ``right``: the share that are valid and equal to the sum; ``n``: how many answers."""
    valid = right = 0
    for row, c in zip(tokens.tolist(), sums):
        text = [TOK.VOCAB[t] for t in row]
        n = 1 if text[1] == "." else 2 if text[1].isdigit() and text[2] == "." else 0
        ok = n > 0 and all(t.isdigit() for t in text[:n])
        valid += ok
        right += ok and "".join(text[:n]) == str(c)
    return {"valid": valid / len(sums), "right": right / len(sums), "n": len(sums)}
