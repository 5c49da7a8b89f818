"""The course's toys, defined once: the toy-vocabulary convention, a word-level tokenizer, a
small seeded GPT, one short fit loop, and the two ways the notebooks call a GPT that its own
``forward`` does not offer (with a padding mask; without the causal mask).

Every toy vocabulary follows one convention, the core ``ChatTokenizer``'s: ``PAD = 0``,
``EOS = 1`` and, where a toy needs a beginning-of-sequence token, ``BOS = 2``; the words follow.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._validate import require_int_scalar, require_real
from ..loss import causal_lm_loss
from ..model import GPT, GPTConfig
from ..shift import position_ids_from_attention_mask
from ..train.devices import cpu_threads
from ..train.optim import configure_optimizer

__all__ = [
    "PAD",
    "EOS",
    "BOS",
    "SPECIALS",
    "toy_vocab",
    "WordTokenizer",
    "toy_gpt",
    "fit",
    "forward_with_mask",
    "forward_with_attention",
    "forward_without_causal_mask",
]

PAD, EOS, BOS = 0, 1, 2
SPECIALS = ("PAD", "EOS", "BOS")


def toy_vocab(words, *, bos: bool = False, specials=SPECIALS) -> tuple[str, ...]:
    """The names of a toy vocabulary: ``specials[0]`` (PAD, id 0), ``specials[1]`` (EOS, id 1),
    ``specials[2]`` (BOS, id 2) when ``bos``, then ``words`` in order, duplicates dropped."""
    specials = tuple(specials)
    if len(specials) != 3 or len(set(specials)) != 3:
        raise ValueError(f"specials must name PAD, EOS and BOS (three different names); got {specials!r}.")
    if isinstance(words, str):
        raise TypeError("words must be a sequence of words, not one str (split it first).")
    head = specials if bos else specials[:2]
    return head + tuple(w for w in dict.fromkeys(words) if w not in head)


class WordTokenizer:
    """One token per space-separated word, in the style of :mod:`lmcore.data.tokenizers`
    (``encode``, ``decode``, ``vocab_size``, ``pad_id``, ``eos_id``). Ids follow
    :func:`toy_vocab`: PAD 0, EOS 1, BOS 2 (with ``bos=True``), then ``words``. A word outside
    the vocabulary is an error, or becomes ``unk`` when ``unk`` names a word of ``words``."""

    pad_id, eos_id = PAD, EOS

    def __init__(self, words, *, bos: bool = False, unk: str | None = None, specials=SPECIALS):
        self.VOCAB = toy_vocab(words, bos=bos, specials=specials)
        self.stoi = {w: i for i, w in enumerate(self.VOCAB)}
        self.bos_id = BOS if bos else None
        if unk is not None and unk not in self.stoi:
            raise ValueError(f"unk must be a word of the vocabulary; got {unk!r}.")
        self.unk = unk

    @property
    def vocab_size(self) -> int:
        return len(self.VOCAB)

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}.")
        unknown = [w for w in text.split() if w not in self.stoi]
        if unknown and self.unk is None:
            raise ValueError(f"word {unknown[0]!r} is not in this tokenizer's vocabulary.")
        return [self.stoi.get(w, self.stoi.get(self.unk)) for w in text.split()]

    def decode(self, ids) -> str:
        return " ".join(self.VOCAB[int(i)] for i in (ids.tolist() if hasattr(ids, "tolist") else ids))


def toy_gpt(
    vocab_size: int,
    *,
    block_size: int = 16,
    n_layer: int = 1,
    n_head: int = 2,
    n_embd: int = 16,
    dropout: float = 0.0,
    init_std: float | None = None,
    seed: int = 0,
    dtype: torch.dtype | None = None,
) -> GPT:
    """A small :class:`lmcore.model.GPT`, seeded (``torch.manual_seed(seed)`` just before it is
    built), in eval mode (:func:`fit` switches it to training mode while it trains).
    ``init_std=None`` keeps GPTConfig's default; ``dtype=torch.float64`` gives a toy whose
    rounding error sits far below the 3 decimals a notebook prints."""
    cfg = GPTConfig(
        vocab_size=vocab_size,
        block_size=block_size,
        n_layer=n_layer,
        n_head=n_head,
        n_embd=n_embd,
        dropout=dropout,
        **({} if init_std is None else {"init_std": init_std}),
    )
    torch.manual_seed(seed)
    model = GPT(cfg)
    return (model if dtype is None else model.to(dtype)).eval()


_FIT_BETAS = (0.9, 0.999)  # torch's AdamW default, with which every toy fit of the course was measured


def _default_loss(model, batch):
    ids, labels = batch if isinstance(batch, (tuple, list)) else (batch, batch)
    return causal_lm_loss(model(ids), labels)


def fit(
    model: torch.nn.Module,
    batch_fn: Callable,
    *,
    steps: int,
    lr: float,
    loss_fn: Callable | None = None,
    weight_decay: float = 0.0,
    on_step: Callable | None = None,
    threads: int | None = 1,
    lr_at: Callable | None = None,
    grad_clip: float | None = None,
    betas=_FIT_BETAS,
) -> list[float]:
    """Train ``model`` for ``steps`` AdamW steps and return the loss of each step (floats).

    The optimiser is lmcore's own (:func:`lmcore.train.optim.configure_optimizer`: weight decay
    on matrices only, never biases or LayerNorm gains) with ``betas`` (default (0.9, 0.999),
    torch's). ``lr_at(step)``, if given, sets each step's learning rate (else ``lr`` throughout);
    ``grad_clip``, if given, clips the gradient norm before each update, as ``train()`` does.

    ``batch_fn(step)`` gives step ``step``'s batch: input ids (N, L) (labels = the ids), or a
    tuple ``(input_ids, labels)``, or anything ``loss_fn(model, batch) -> scalar loss``
    understands (default: ``causal_lm_loss(model(input_ids), labels)``, which shifts inside).
    ``on_step(step, model)``, if given, runs before each step (e.g. a held-out evaluation).
    The model trains in training mode and gets its previous mode back at the end; ``threads``
    CPU threads (1: tiny models run as fast and repeat exactly; None: torch's setting).
    """
    require_int_scalar("steps", steps, min=1)
    if lr_at is not None and not callable(lr_at):
        raise TypeError(f"lr_at must be a function of the step (or None); got {type(lr_at).__name__}.")
    if grad_clip is not None:
        require_real("grad_clip", grad_clip, min=0.0, min_inclusive=False)
    loss_fn = _default_loss if loss_fn is None else loss_fn
    opt = configure_optimizer(model, lr=lr, weight_decay=weight_decay, betas=betas)
    was_training, losses = model.training, []
    model.train()
    try:
        with cpu_threads(threads):
            for step in range(steps):
                if lr_at is not None:
                    for group in opt.param_groups:
                        group["lr"] = lr_at(step)
                if on_step is not None:
                    on_step(step, model)
                loss = loss_fn(model, batch_fn(step))
                opt.zero_grad()
                loss.backward()
                if grad_clip is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
                opt.step()
                losses.append(float(loss.detach()))
    finally:
        model.train(was_training)
    return losses


def forward_with_mask(
    model: GPT, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, reset_positions: bool = True
) -> torch.Tensor:
    """Logits (N, L, V) of the GPT called with an attention mask (N, L): padding is its own
    "document" (-1), so real tokens cannot read it, and positions restart after left padding
    (unless ``reset_positions=False``). Still causal: this is the model's own forward."""
    doc = torch.where(attention_mask == 1, 0, -1)
    pos = position_ids_from_attention_mask(attention_mask) if reset_positions else None
    return model(input_ids, document_ids=doc, position_ids=pos)


def forward_with_attention(
    model: GPT, input_ids: torch.Tensor, allowed: torch.Tensor, position_ids: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits (N, L, V) of ``model`` with the attention pattern ``allowed`` (bool, (L, L) or
    (N, 1, L, L): query i may read key j) instead of the causal one: the model's own
    ``attention=`` argument. ``allowed = tril`` reproduces ``model(input_ids)``."""
    return model(input_ids, position_ids=position_ids, attention=allowed)


def forward_without_causal_mask(
    model: GPT, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits (N, L, V) of the GPT with its causal mask removed: the same weights and blocks,
    but every position attends to every position of its row, earlier or later (it "sees the
    future"). With an ``attention_mask`` (N, L), padding stays unread and positions restart
    after it, as in :func:`forward_with_mask`. Dropout acts as in the model's own forward
    (only in training mode). The one way the course runs a GPT without its causal mask."""
    L = input_ids.shape[1]
    if attention_mask is None:
        return forward_with_attention(
            model, input_ids, torch.ones(L, L, dtype=torch.bool, device=input_ids.device)
        )
    N = input_ids.shape[0]
    keys = (attention_mask[:, None, None, :] == 1).expand(N, 1, L, L)  # (N, 1, L, L)
    return forward_with_attention(model, input_ids, keys, position_ids_from_attention_mask(attention_mask))
