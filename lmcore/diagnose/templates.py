"""Prompt/response probes for :func:`lmcore.diagnose.run_checks`: a user-given response template
(or prompt prefix) placed in every probe row, so that a completion-only pipeline, which masks a
row without a template entirely (the mainstream SFT convention), has a response to score."""

from __future__ import annotations

import torch

from .._validate import require_int_scalar

__all__ = ["validate_template", "with_template"]


def validate_template(template, V: int, L: int, pad_id: int, eos_id) -> tuple:
    """``response_template`` validated: () for None, else a tuple of 1 .. L // 2 - 2 ids in
    [0, V), none of them ``pad_id`` or ``eos_id``."""
    if template is None:
        return ()
    if isinstance(template, torch.Tensor):
        template = template.tolist()
    if isinstance(template, (str, bytes)) or not hasattr(template, "__iter__"):
        raise TypeError(
            "response_template must be None or a sequence of token ids (the response template "
            f"or prompt prefix, tokenised); got {type(template).__name__}."
        )
    ids = tuple(template)
    if not 1 <= len(ids) <= L // 2 - 2:
        raise ValueError(
            f"response_template must hold 1 to seq_len // 2 - 2 = {L // 2 - 2} ids (the probe rows "
            f"need room for a response and EOS after it); got {len(ids)}."
        )
    for i in ids:
        require_int_scalar("response_template", i, min=0, max=V - 1)
        if i in (pad_id, eos_id):
            raise ValueError(
                "response_template must not use pad_id or eos_id (the probes tell real tokens from "
                f"padding and EOS by id); got id {i}."
            )
    return tuple(int(i) for i in ids)


def with_template(ids: torch.Tensor, template: tuple, real: torch.Tensor) -> torch.Tensor:
    """(N, L) ``ids`` with ``template`` at positions 1 .. k of every row and the template's ids
    replaced elsewhere by ids from ``real``: each row holds a one-token prompt, the template once,
    then the response. ``ids`` unchanged for an empty template."""
    if not template:
        return ids
    out = ids.clone()
    stray = torch.isin(out, torch.tensor(template, device=ids.device))
    out[stray] = real.to(ids.device)[out[stray] % len(real)]
    out[:, 1 : 1 + len(template)] = torch.tensor(template, device=ids.device)
    return out
