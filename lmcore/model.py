"""A small GPT: token ids (N, L) -> logits (N, L, V), causal, optionally document-aware.

Pre-LayerNorm blocks, attention through ``F.scaled_dot_product_attention`` (flash kernels on a
GPU), learned position embeddings indexed by ``position_ids`` (which restart at 0 in packed
rows), the output projection tied to the token embedding, and an init small enough that the
first loss on random tokens sits within a few hundredths of ln V (normal(0, init_std) weights,
residual projections scaled by 1/sqrt(2 n_layer), a small initial gain on the final LayerNorm). The model returns logits
only: the label shift and the loss live in :mod:`lmcore.shift` and :mod:`lmcore.loss`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ._validate import _describe, require_bool, require_int_scalar
from .model_checks import check_attention, check_inputs
from .shift import document_causal_mask

__all__ = ["GPTConfig", "GPT"]


@dataclass
class GPTConfig:
    """Sizes of a :class:`GPT`. The defaults build a model that trains on a CPU in seconds."""

    vocab_size: int = 65
    block_size: int = 64  # longest input the position table covers
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64  # D, the width
    dropout: float = 0.0
    bias: bool = True  # biases in Linear and LayerNorm layers
    init_std: float = 0.02  # std of the normal init; residual projections get / sqrt(2 n_layer)

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
                raise TypeError(f"GPTConfig.{name} must be a positive int; got {_describe(value)}.")
            if value < 1:
                raise ValueError(f"GPTConfig.{name} must be a positive int; got {value!r}.")
            setattr(self, name, int(value))
        if self.n_embd % self.n_head:
            raise ValueError(
                f"GPTConfig.n_embd ({self.n_embd}) must be divisible by n_head "
                f"({self.n_head}): each head gets n_embd // n_head dimensions."
            )
        self.dropout = _real("dropout", self.dropout, "in [0, 1)")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(
                f"GPTConfig.dropout must be in [0, 1); got {self.dropout!r}. "
                "It is the probability of zeroing an activation (0 turns it off)."
            )
        self.init_std = _real("init_std", self.init_std, "positive")
        if not (self.init_std > 0 and math.isfinite(self.init_std)):
            raise ValueError(
                f"GPTConfig.init_std must be positive and finite; got "
                f"{self.init_std!r}. It is the std of the normal init (GPT-2: 0.02)."
            )
        if not isinstance(self.bias, (bool, np.bool_)):
            raise TypeError(f"GPTConfig.bias must be True or False; got {_describe(self.bias)}.")
        self.bias = bool(self.bias)


def _real(name: str, value, what: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"GPTConfig.{name} must be a number {what}; got {_describe(value)}.")
    return float(value)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.dropout = cfg.n_head, cfg.dropout
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x, attn_mask=None):
        N, L, D = x.shape
        q, k, v = self.c_attn(x).split(D, dim=2)
        q, k, v = (t.view(N, L, self.n_head, D // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(  # (N, H, L, D/H)
            q,
            k,
            v,
            attn_mask=attn_mask,
            is_causal=attn_mask is None,
            dropout_p=self.dropout if self.training else 0.0,
        )
        return self.resid_drop(self.c_proj(y.transpose(1, 2).reshape(N, L, D)))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.drop(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LN: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x, attn_mask=None):
        x = x + self.attn(self.ln_1(x), attn_mask)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Decoder-only Transformer. ``forward(input_ids (N, L)) -> logits (N, L, V)``."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig; got {type(config).__name__}.")
        config.__post_init__()  # a config edited after construction, checked again
        self.config = cfg = config
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)  # token embedding (V, D)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)  # position embedding
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        self.apply(self._init_weights)
        resid_std = cfg.init_std / math.sqrt(2 * cfg.n_layer)  # residual sum stays ~unit scale
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=resid_std)
        # The final LayerNorm's gain starts at min(1, 4/sqrt(D)), so the first logits have std
        # sigma ~ 4 * init_std whatever the width. With gain 1, sigma ~ sqrt(D) * init_std and the
        # first loss sits near ln V + sigma^2/2 (about ln V + 0.15 at D = 768, std 0.02, tied or
        # untied alike; notebook 04 measures it). Not a bug, a price of random logits: the small
        # gain only makes the ln V anchor sharp, and training moves the gain freely.
        nn.init.constant_(self.ln_f.weight, min(1.0, 4.0 / math.sqrt(cfg.n_embd)))

    def _init_weights(self, module):
        std = self.config.init_std
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)

    def hidden_states(self, input_ids: torch.Tensor, *, document_ids=None, position_ids=None, attention=None):
        """Final hidden states (N, L, D), after the last LayerNorm.

        ``logits == hidden_states(x) @ lm_head.weight.T``, so
        ``chunked_causal_lm_loss(model.hidden_states(x), model.lm_head.weight, labels)`` equals
        ``causal_lm_loss(model(x), labels)`` without materialising (N, L, V).
        """
        check_inputs(self.config, input_ids, document_ids, position_ids)
        L = input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(L, device=input_ids.device)[None]  # (1, L)
        attn_mask = None
        if attention is not None:
            attn_mask = check_attention(attention, document_ids, input_ids.shape)
        elif document_ids is not None:
            if document_ids.shape[0] != input_ids.shape[0]:
                document_ids = document_ids.expand(input_ids.shape[0], L)
            attn_mask = document_causal_mask(document_ids)[:, None]  # (N, 1, L, L)
        x = self.drop(self.wte(input_ids) + self.wpe(position_ids))  # (N, L, D)
        for block in self.blocks:
            x = block(x, attn_mask)
        return self.ln_f(x)

    def forward(self, input_ids: torch.Tensor, *, document_ids=None, position_ids=None, attention=None):
        """Logits (N, L, V): position t's scores for the token at t+1.

        Causal; with ``document_ids`` (N, L) a position attends only to earlier positions of
        its own document. ``position_ids`` (N, L) default to 0..L-1. ``attention`` (bool,
        (L, L) or (N, 1, L, L), True where query i may read key j) replaces the causal mask:
        for demonstrations only (a pattern that reads later positions lets the model see the
        targets it is scored on); ``torch.ones(L, L).tril().bool()`` is the default.
        """
        return self.lm_head(
            self.hidden_states(
                input_ids, document_ids=document_ids, position_ids=position_ids, attention=attention
            )
        )

    def num_parameters(self, non_embedding: bool = True) -> int:
        """Parameter count (the tied embedding counted once).

        ``non_embedding=True`` leaves out the position table but keeps the tied token table,
        since it is also the output projection whose matmul costs FLOPs (nanoGPT's count).
        """
        require_bool("non_embedding", non_embedding)
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() if non_embedding else n

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Training FLOPs per token: 6N for the matmuls (forward + backward) plus attention.

        Attention scores and the weighted sum add 12 * n_layer * n_embd * seq_len (the
        PaLM/nanoGPT convention, not halved for the causal mask). ``seq_len`` defaults to
        block_size. Divide (tokens/s * flops_per_token) by the device's peak for MFU.
        """
        L = self.config.block_size if seq_len is None else require_int_scalar("seq_len", seq_len, min=1)
        c = self.config
        return 6.0 * self.num_parameters() + 12.0 * c.n_layer * c.n_embd * L
