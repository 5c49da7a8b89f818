"""Notebook 07's bugs that shipped (lmcore.course.debugging.incidents): each reproduction is the
bug it cites (checked against float64 F.cross_entropy, not lmcore's loss), its reported loss
falls, run_checks fails exactly the rows that name its class, and the controls pass."""

import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

from lmcore.course.debugging import incidents as I
from lmcore.course.debugging.data import training_batch

ROOT = Path(__file__).resolve().parents[2]
ALL = [*I.CONTROLS, *I.INCIDENTS]


@pytest.mark.parametrize("key", ALL)
def test_each_pipeline_fails_exactly_the_rows_of_its_class(key):
    entry = I.INCIDENTS.get(key) or I.CONTROLS[key]
    report = I.diagnose_incident(key)
    assert report.failed == entry.rows, str(report)


@pytest.mark.parametrize("key", ALL)
def test_each_reported_loss_falls_as_a_correct_one_does(key):
    losses = I.train_incident(key)
    assert sum(losses[-5:]) / 5 < losses[0] - 0.25


def _batch():
    ids, mask = training_batch("padded", 0)
    logits = torch.randn(*ids.shape, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    targets = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
    return logits, ids, mask, targets


def test_the_count_bug_divides_by_one_target_more_per_row():
    logits, ids, mask, targets = _batch()
    nll = F.cross_entropy(
        logits[:, :-1].reshape(-1, 16), targets.reshape(-1), ignore_index=-100, reduction="sum"
    )
    expected = nll / ((targets != -100).sum() + len(ids))
    assert I.loss_count_plus_one(logits, ids, mask).item() == pytest.approx(expected.item(), rel=1e-12)
    assert I.loss_count_plus_one(logits, ids, mask) < I.loss_correct(logits, ids, mask)


def test_the_smoothing_bug_averages_its_uniform_term_over_padding_too():
    logits, ids, mask, targets = _batch()
    flat = targets.reshape(-1)
    logp = logits[:, :-1].reshape(-1, 16).log_softmax(-1)
    right = F.cross_entropy(logits[:, :-1].reshape(-1, 16), flat, ignore_index=-100, label_smoothing=0.1)
    uniform_all = -logp.mean()
    nll = F.cross_entropy(logits[:, :-1].reshape(-1, 16), flat, ignore_index=-100)
    assert I.loss_smoothing_over_padding(logits, ids, mask).item() == pytest.approx(
        (0.9 * nll + 0.1 * uniform_all).item(), rel=1e-12
    )
    assert I.loss_smoothing_over_padding(logits, ids, mask).item() != pytest.approx(right.item(), rel=1e-6)


def test_the_mean_of_means_weighs_each_row_alike():
    logits, ids, mask, targets = _batch()
    rows = [F.cross_entropy(logits[i, :-1], targets[i], ignore_index=-100) for i in range(len(ids))]
    assert I.loss_batch_means(logits, ids, mask).item() == pytest.approx(
        torch.stack(rows).mean().item(), rel=1e-12
    )


def test_the_packed_forwards_isolate_documents_only_where_they_say():
    ids, mask = training_batch("packed", 0)
    doc = I.doc_ids_from_eos(ids)
    assert (doc[:, 0] == 0).all() and ((doc[:, 1:] - doc[:, :-1]) >= 0).all() and doc.max() > 0
    changed = ids.clone()
    changed[doc == 0] = torch.where(changed[doc == 0] > 2, changed[doc == 0] - 1, changed[doc == 0])
    later = doc > 0

    def moves(key, mask_arg):
        model, forward, _ = I._pipeline(key)
        with torch.no_grad():
            a, b = forward(ids, mask_arg, doc), forward(changed, mask_arg, doc)
        return (a - b)[later].abs().max().item() > 1e-5

    ones = torch.ones_like(ids)
    assert not moves("correct_packed", None) and not moves("correct_packed", ones)
    assert not moves("mask_drops_block", None) and moves("mask_drops_block", ones)
    assert moves("positions_only", None) and moves("positions_only", ones)


def test_every_incident_is_cited_and_the_notebook_cites_the_same():
    nb = nbformat.read(ROOT / "notebooks" / "07_debugging_label_bugs.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert len(I.INCIDENTS) >= 6
    for key, inc in I.INCIDENTS.items():
        assert re.search(r"[\w.-]+/[\w.-]+ (?:PR|issue)s? #\d+", inc.cited), inc.cited
        row = next(line for line in text.splitlines() if line.startswith(f"| `{key}` |"))
        assert (
            inc.cited.replace("num_items_in_batch", "`num_items_in_batch`")
            .replace("label_smoothing with ignore_index", "`label_smoothing` with `ignore_index`")
            .replace("position_ids", "`position_ids`")
            in row
        ), (inc.cited, row)


def test_an_unknown_key_names_the_choices():
    with pytest.raises(ValueError, match="correct_packed"):
        I.diagnose_incident("no_such_bug")


def test_a_global_num_items_shares_the_count_bugs_signature_only_near_the_batchs_count():
    assert I.global_num_items_failed(1.0) == ()  # the correct loss itself
    assert I.global_num_items_failed(1.05) == ("zero_logits",)  # as count_plus_one
    for ratio in (2.0, 4.0):  # accumulation over a few micro-batches: the first loss moves too
        assert set(I.global_num_items_failed(ratio)) == {"zero_logits", "first_loss"}
    with pytest.raises(ValueError, match="ratio"):
        I.global_num_items_failed(0)
    with pytest.raises(TypeError, match="ratio"):
        I.global_num_items_failed("2")
