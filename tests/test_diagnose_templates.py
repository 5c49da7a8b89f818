"""lmcore.diagnose on completion-only (template-masked) SFT pipelines, written in the style of a
widely used trainer's completion-only collator (TRL's DataCollatorForCompletionOnlyLM): labels are
-100 up to and including the response template, and a row with no template is masked entirely.
The model is a torch.nn.GRU (it never left-pads). None of lmcore's model or loss is used."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from lmcore.diagnose import run_checks

V, L, PAD, EOS = 24, 16, 0, 1
TEMPLATE = (2, 3)  # the tokenised "### Answer:"


class GRULM(nn.Module):
    def __init__(self, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb, self.rnn, self.head = (
            nn.Embedding(V, 16),
            nn.GRU(16, 16, batch_first=True),
            nn.Linear(16, V),
        )
        nn.init.normal_(self.head.weight, std=0.02)

    def forward(self, ids, mask):
        return self.head(self.rnn(self.emb(ids))[0])


def collate_labels(ids, mask, extra=0):
    """The collator: labels = ids, -100 at padding and up to the end of the first template (plus
    ``extra`` more tokens: the off-by-one bug), the whole row where no template is found."""
    labels = ids.masked_fill(mask == 0, -100)
    k = len(TEMPLATE)
    for n in range(len(ids)):
        row = ids[n].tolist()
        starts = [i for i in range(len(row) - k + 1) if tuple(row[i : i + k]) == TEMPLATE]
        labels[n, : starts[0] + k + extra if starts else len(row)] = -100
    return labels


def declared_prompt(ids, mask):
    """The declaration: True at tokens that are not targets (the prompt and the template)."""
    return collate_labels(ids, mask) == -100


def sft_loss(logits, ids, mask, extra=0):
    labels = collate_labels(ids, mask, extra)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)


def sft_loss_off_by_one(logits, ids, mask):
    return sft_loss(logits, ids, mask, extra=1)


def _checks(loss, **kw):
    return run_checks(
        GRULM(), loss, vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS, left_padding=False, **kw
    )


def test_a_correct_template_masked_pipeline_passes_declared():
    report = _checks(sft_loss, unscored=declared_prompt, response_template=TEMPLATE)
    assert report.passed, str(report)
    assert not report["alignment"].skipped and not report["eos_scored"].skipped
    assert "declared unscored are not" in report["all_scored"].detail


SEP = 2


def review_prompt_mask(ids, mask):
    """The review's pipeline B: one template token SEP, a row without SEP is all prompt."""
    seen = (ids == SEP).long().cumsum(1)
    return (seen == 0) | ((seen == 1) & (ids == SEP))


def review_sft_loss(logits, ids, mask):
    keep = (mask == 1) & ~review_prompt_mask(ids, mask)
    logp = logits[:, :-1].float().log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
    w = keep[:, 1:].float()
    return -(logp * w).sum() / w.sum().clamp(min=1)


def test_without_a_template_in_the_probes_alignment_is_skipped_not_failed():
    report = _checks(review_sft_loss, unscored=review_prompt_mask)  # the review's B: no false alarm
    assert report.passed, str(report)
    assert report.skipped, str(report)  # the rows whose probe holds no response say how to read them
    assert all("response_template=" in report[n].detail for n in report.skipped if "padding" not in n)


def test_a_mean_over_zero_targets_fails_finite_loss_and_names_the_template():
    report = _checks(sft_loss, unscored=declared_prompt)  # F.cross_entropy of no target is NaN
    assert report.failed == ("finite_loss",) and "response_template=" in report["finite_loss"].detail


def test_the_off_by_one_prompt_mask_fails_all_scored_as_a_disagreement_by_one_position():
    report = _checks(sft_loss_off_by_one, unscored=declared_prompt, response_template=TEMPLATE)
    assert report.failed == ("all_scored",), str(report)
    detail = report["all_scored"].detail
    assert f"positions [{len(TEMPLATE)}]" in detail  # t = k predicts the first response token
    assert "disagree by one position" in detail and "declare it" not in detail


def test_the_undeclared_prompt_mask_is_told_to_declare():
    report = _checks(sft_loss, response_template=TEMPLATE)
    assert "all_scored" in report.failed, str(report)
    detail = report["all_scored"].detail
    assert "declare it: unscored=" in detail and "disagree by one position" not in detail


def test_a_declared_mask_that_scores_the_template_fails_one_position_early():
    def too_short(ids, mask):  # the declaration masks one token more than the loss
        return collate_labels(ids, mask, extra=1) == -100

    report = _checks(sft_loss, unscored=too_short, response_template=TEMPLATE)
    assert report.failed == ("all_scored",), str(report)
    assert "disagree by one position" in report["all_scored"].detail


def test_eos_masked_by_the_loss_still_fails_eos_scored():
    def loss(logits, ids, mask):
        labels = collate_labels(ids, mask).masked_fill(ids == EOS, -100)
        return F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)

    report = _checks(loss, unscored=declared_prompt, response_template=TEMPLATE)
    assert "eos_scored" in report.failed, str(report)


class NaNUnderLeftPadding(GRULM):
    """A model that gives NaN at real tokens of left-padded rows only."""

    def forward(self, ids, mask):
        out = super().forward(ids, mask)
        left = (mask[:, :1] == 0) & (mask[:, -1:] == 1)
        return out.masked_fill(left[..., None] & (mask[..., None] == 1), float("nan"))


def hf_loss(logits, ids, mask):
    labels = ids.masked_fill(mask == 0, -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)


def test_left_padding_false_skips_exactly_the_left_padding_rows():
    kw = dict(vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS)
    declared = run_checks(NaNUnderLeftPadding(), hf_loss, left_padding=False, **kw)
    assert declared.passed, str(declared)
    assert set(declared.skipped) == {"padding_unread", "left_padding"}
    assert declared["future"].detail.startswith("changing tokens")
    undeclared = run_checks(NaNUnderLeftPadding(), hf_loss, **kw)
    assert "finite_logits" in undeclared.failed and "left-padded rows" in undeclared["finite_logits"].detail


def test_response_template_is_validated():
    for bad, exc in (
        ("###", TypeError),
        (3, TypeError),
        ((), ValueError),
        ((2,) * 7, ValueError),
        ((EOS,), ValueError),
        ((PAD, 2), ValueError),
        ((V,), ValueError),
        ((2.5,), TypeError),
    ):
        with pytest.raises(exc, match="response_template"):
            _checks(sft_loss, unscored=declared_prompt, response_template=bad)
