"""lmcore: how a causal language model turns text into a training signal.

The concepts the course teaches sit at the top (``handcalc``, ``shift``, ``loss``,
``perplexity``, ``model``, ``sample``, ``diagnose``); text and corpora are the ``lmcore.data``
package, the training loop and its tooling the ``lmcore.train`` package (``from lmcore.train
import train``). The core (everything but ``lmcore.course``) needs only torch and NumPy.
"""

from . import data, diagnose, handcalc, model, sample, train
from .data import (
    ByteTokenizer,
    CharTokenizer,
    ChatTokenizer,
    chat_arithmetic,
    chat_arithmetic_entropy,
    load_corpus,
    unigram_entropy,
)
from .diagnose import CHECK_NAMES, CheckRow, DiagnosisReport, run_checks, token_weights
from .loss import causal_lm_loss, chunked_causal_lm_loss
from .model import GPT, GPTConfig
from .perplexity import LN2, PerplexityMeter, bits_per_byte, bits_to_nats, nats_to_bits, perplexity_from_nll
from .sample import filter_logits, generate, next_token_distribution
from .shift import (
    IGNORE_INDEX,
    PackedBatch,
    document_causal_mask,
    labels_from_attention_mask,
    mask_cross_document_targets,
    num_valid_targets,
    pack_documents,
    position_ids_from_attention_mask,
    shift_for_next_token,
)
from .train.presets import PRESETS, TrainConfig, preset

__version__ = "0.1.0"

__all__ = [
    "handcalc",
    "data",
    "train",
    "diagnose",
    "model",
    "sample",
    "run_checks",
    "DiagnosisReport",
    "CheckRow",
    "CHECK_NAMES",
    "token_weights",
    "IGNORE_INDEX",
    "shift_for_next_token",
    "num_valid_targets",
    "labels_from_attention_mask",
    "position_ids_from_attention_mask",
    "mask_cross_document_targets",
    "PackedBatch",
    "pack_documents",
    "document_causal_mask",
    "causal_lm_loss",
    "chunked_causal_lm_loss",
    "PerplexityMeter",
    "LN2",
    "nats_to_bits",
    "bits_to_nats",
    "perplexity_from_nll",
    "bits_per_byte",
    "GPT",
    "GPTConfig",
    "generate",
    "filter_logits",
    "next_token_distribution",
    "CharTokenizer",
    "ByteTokenizer",
    "ChatTokenizer",
    "load_corpus",
    "chat_arithmetic",
    "chat_arithmetic_entropy",
    "unigram_entropy",
    "TrainConfig",
    "PRESETS",
    "preset",
]
