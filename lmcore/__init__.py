"""lmcore: how a causal language model turns text into a training signal.

The core (this package minus ``lmcore.course``) needs only torch and NumPy.
"""
from . import handcalc
from .loss import causal_lm_loss, chunked_causal_lm_loss
from .perplexity import (LN2, PerplexityMeter, bits_per_byte, bits_to_nats, nats_to_bits,
                         perplexity_from_nll)
from .shift import (IGNORE_INDEX, PackedBatch, document_causal_mask, labels_from_attention_mask,
                    mask_cross_document_targets, num_valid_targets, pack_documents,
                    shift_for_next_token)

__version__ = "0.1.0"

__all__ = ["handcalc", "IGNORE_INDEX", "shift_for_next_token", "num_valid_targets",
           "labels_from_attention_mask", "mask_cross_document_targets", "PackedBatch",
           "pack_documents", "document_causal_mask", "causal_lm_loss", "chunked_causal_lm_loss",
           "PerplexityMeter", "LN2", "nats_to_bits", "bits_to_nats", "perplexity_from_nll",
           "bits_per_byte"]
