"""The label-bug checklist, run against any model + loss pipeline.

``run_checks(forward, loss_fn, vocab_size=V)`` feeds the pipeline inputs whose right answer is
known (increasing ids, perfect, zero and random logits, ragged right-padded rows ending in EOS,
left-padded rows, changed future tokens) and reads back values and gradients: which positions
move the loss's value, which get a gradient and with what weight, and which target id each
gradient pushes up. Each failing row names the classes of cause that produce it, most likely
first, and how to declare an intended choice (``label_smoothing``, ``z_loss``, ``aux_loss``,
``unscored`` for completion-only masking, with ``response_template`` the ids every probe row
then carries so that it has a response to score, ``num_items_ratio`` for a global denominator,
``pretrained``, ``left_padding=False`` for a pipeline that never left-pads, ``model``).

A signature (the set of failing rows) names a *class* of bug, not one bug. Tested signatures
(tests/test_diagnose.py, tests/test_diagnose_pipelines.py):

- finite_loss: a NaN/inf loss (a mean over 0 targets, log of 0); every other loss row is skipped;
- alignment, perfect_logits, last_unscored: the shift is missing;
- alignment, perfect_logits, all_scored: a double shift (EOS is still a target, from two
  positions earlier; eos_scored fails only for a row of 2 tokens);
- alignment, perfect_logits, padding_unscored, eos_scored: labels taken from another row (or
  shifted by another offset);
- perfect_logits, logit_scale: softmax before the loss, or an undeclared label smoothing or
  z-loss (the details tell these apart);
- logit_scale: the logits rescaled inside the loss (a temperature, logits / 2), caught at any
  factor a with |a - 1| above the bound the passing row prints;
- zero_logits, logit_scale: a cross-entropy in low precision (bf16);
- zero_logits, first_loss: a loss in bits, or summed instead of averaged, or divided by a global
  num_items not declared (num_items_ratio=) that is far from the batch's own count;
- zero_logits: a denominator that counts tokens instead of targets, or a global num_items not
  declared that is within first_loss_tol of the batch's own count (1.05 times it, say); these
  share the signature, the detail names the count;
- all_scored: positions not scored: intended prompt masking not declared (unscored=), real
  tokens masked by id; with unscored= declared, a loss whose prompt mask disagrees with the
  declaration (by one position at the template: the detail says so; tests/test_diagnose_templates.py);
- all_scored, equal_weights: positions whose logits are detached (value moves, zero gradient);
- equal_weights: per-row or per-micro-batch means averaged, or per-class weights;
- padding_unscored: padding scored (PAD -> PAD), or the off-by-one of masking the input side
  after the shift (the last real token scored against the PAD after it);
- eos_scored: EOS masked by its id (every special token masked, or PAD = EOS with the pad id
  ignored); the two share the signature;
- finite_logits: NaN/inf logits at real tokens (NaN only where the mask excludes, as with
  nn.TransformerEncoderLayer's eval fast path under left padding, is ignored and said so);
- future: the model sees the future (no causal mask, a mask off by one);
- padding_unread, left_padding: the attention mask ignored or inverted; correct when the
  pipeline never left-pads (a GRU, a model called without the mask): pass left_padding=False;
- left_padding: left padding without position reset;
- first_loss: initial logits too large (far above ln V), or a leak / a trained start (below).

Packed pipelines (``packing=Packing(...)``: :mod:`~lmcore.diagnose.packing`, tested in
tests/test_diagnose_packing.py) add four rows:

- packed_isolation: attention crosses documents (only a causal mask; position ids reset per
  document without a block-diagonal mask);
- packed_with_mask: the block-diagonal mask dropped when an all-ones 2-D attention mask is also
  passed (it isolates without one);
- packed_positions: positions that do not restart at a document where positions="restart";
- packed_boundary: a boundary target scored against the declared policy (drop, keep, bos).

Blind spots: what an aux_loss=True term does; with PAD = EOS the last real token scored against
the PAD after it (it looks like EOS -> EOS); a template-masked pipeline whose template the probes
do not carry (without response_template= the rows whose probe has no declared target are
skipped, not read); packed rows read through doc_ids only, so a pipeline that finds documents by
itself (from EOS or BOS ids in the row) is checked by its forward's behaviour on doc_ids it
ignores (packed_isolation then fails: pass doc_ids through, or read this row with care); the
packed loss rows read no padding inside a packed row.

The package: :mod:`~lmcore.diagnose.run` composes the checks into ``run_checks``; the check
families are :mod:`~lmcore.diagnose.loss_checks` (the loss's value),
:mod:`~lmcore.diagnose.mask_checks` (which targets are scored, with what weight) and
:mod:`~lmcore.diagnose.model_checks` (the model), :mod:`~lmcore.diagnose.packing` (the packing
declaration and its rows); the probe inputs and readings live in :mod:`~lmcore.diagnose.probes`
(:mod:`~lmcore.diagnose.templates`: the response template in them), the report in
:mod:`~lmcore.diagnose.report`.
"""

from .packing import PACKED_NAMES, Packing
from .probes import gradient_reading, ragged_batch, token_weights
from .report import CHECK_NAMES, CheckRow, DiagnosisReport
from .run import run_checks

__all__ = [
    "CHECK_NAMES",
    "PACKED_NAMES",
    "Packing",
    "CheckRow",
    "DiagnosisReport",
    "run_checks",
    "token_weights",
    "ragged_batch",
    "gradient_reading",
]
