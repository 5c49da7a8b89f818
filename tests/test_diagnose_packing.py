"""lmcore.diagnose on packed pipelines built on torch.nn.functional.scaled_dot_product_attention
with a block-diagonal mask from doc_ids (none of lmcore's model or loss is used). The correct
pipeline passes, declared; each packing bug that shipped in widely used libraries fails its row."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from lmcore.diagnose import PACKED_NAMES, Packing, run_checks

V, L, PAD, EOS, BOS = 24, 16, 0, 1, 2


class PackedLM(nn.Module):
    """One SDPA layer; ``block``: attend within a document; ``drop_with_mask``: the block mask is
    replaced by the 2-D attention mask when one is passed; ``restart``: positions per document."""

    def __init__(self, block=True, drop_with_mask=False, restart=True, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb, self.pos = nn.Embedding(V, 32), nn.Embedding(64, 32)
        self.qkv, self.head = nn.Linear(32, 96), nn.Linear(32, V)
        nn.init.normal_(self.head.weight, std=0.02)
        self.block, self.drop_with_mask, self.restart = block, drop_with_mask, restart

    def forward(self, ids, mask=None, doc=None):
        N, T = ids.shape
        keys = torch.ones(N, T, dtype=torch.bool) if mask is None else mask == 1
        doc = torch.zeros_like(ids) if doc is None else doc
        if self.restart:  # per document and per real token (left padding)
            start = torch.ones_like(doc, dtype=torch.bool)
            start[:, 1:] = doc[:, 1:] != doc[:, :-1]
            idx = torch.arange(T).expand(N, T)
            first = torch.cummax(torch.where(start, idx, 0), 1).values
            pos = (keys.long().cumsum(-1) - 1).clamp(min=0)
            pos = pos - pos.gather(1, first) * (first > 0)
        else:
            pos = torch.arange(T).expand(N, T)
        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))[None] & keys[:, None, :]
        if self.block and not (self.drop_with_mask and mask is not None):
            allowed = allowed & (doc[:, :, None] == doc[:, None, :])
        allowed = allowed | torch.eye(T, dtype=torch.bool)[None]  # no empty row
        q, k, v = self.qkv(self.emb(ids) + self.pos(pos)).chunk(3, -1)
        return self.head(F.scaled_dot_product_attention(q, k, v, attn_mask=allowed))


def packed_loss(logits, ids, mask, doc=None, boundary="drop"):
    labels = ids.masked_fill(mask == 0, -100)
    if doc is not None and boundary == "drop":
        labels[:, 1:] = labels[:, 1:].masked_fill(doc[:, 1:] != doc[:, :-1], -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)


def keep_loss(logits, ids, mask, doc=None):
    return packed_loss(logits, ids, mask, doc, boundary="keep")


def _checks(model, loss=packed_loss, packing=None, **kw):
    return run_checks(
        model, loss, vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS, packing=packing or Packing(), **kw
    )


@pytest.mark.parametrize(
    "loss, packing",
    [
        (packed_loss, Packing()),
        (keep_loss, Packing(boundary="keep")),
        (keep_loss, Packing(boundary="bos", bos_id=BOS)),
    ],
)
def test_a_correct_packed_sdpa_pipeline_passes_declared(loss, packing):
    report = _checks(PackedLM(), loss, packing)
    assert report.passed, str(report)
    assert [r.name for r in report.rows][-4:] == list(PACKED_NAMES)
    assert not any(report[n].skipped for n in PACKED_NAMES)


def test_rows_only_appear_when_packing_is_declared():
    report = run_checks(PackedLM(), packed_loss, vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS)
    assert report.passed and not any(n in [r.name for r in report.rows] for n in PACKED_NAMES)


def test_positions_reset_without_a_block_mask_fail_isolation():
    report = _checks(PackedLM(block=False))
    assert report.failed == ("packed_isolation",), str(report)
    assert "resetting position ids alone is not enough" in report["packed_isolation"].detail


def test_a_block_mask_dropped_beside_an_all_ones_mask_fails_with_mask():
    report = _checks(PackedLM(drop_with_mask=True))
    assert report.failed == ("packed_with_mask",), str(report)
    assert "only when an all-ones 2-D attention_mask" in report["packed_with_mask"].detail


def test_positions_that_do_not_restart_fail_positions_unless_declared():
    report = _checks(PackedLM(restart=False), left_padding=False)
    assert report.failed == ("packed_positions",), str(report)
    assert "positions do not restart" in report["packed_positions"].detail
    declared = _checks(PackedLM(restart=False), left_padding=False, packing=Packing(positions="continue"))
    assert declared.passed, str(declared)


def test_a_boundary_target_against_the_declared_policy_fails_boundary():
    kept = _checks(PackedLM(), keep_loss, Packing(boundary="drop"))
    assert kept.failed == ("packed_boundary",), str(kept)
    assert "boundary='drop' declared" in kept["packed_boundary"].detail
    dropped = _checks(PackedLM(), packed_loss, Packing(boundary="keep"))
    assert dropped.failed == ("packed_boundary",), str(dropped)
    assert "not scored" in dropped["packed_boundary"].detail


def test_packing_is_validated():
    for kw, exc, name in (
        (dict(boundary="bos"), ValueError, "bos_id"),
        (dict(boundary="mask"), ValueError, "boundary"),
        (dict(positions=True), TypeError, "positions"),
        (dict(boundary="keep", bos_id=2), ValueError, "bos_id"),
        (dict(boundary="bos", bos_id=-1), ValueError, "bos_id"),
    ):
        with pytest.raises(exc, match=name):
            Packing(**kw)
    with pytest.raises(TypeError, match="packing"):
        run_checks(PackedLM(), packed_loss, vocab_size=V, seq_len=L, packing="drop")
    with pytest.raises(ValueError, match="bos_id"):
        _checks(PackedLM(), keep_loss, Packing(boundary="bos", bos_id=EOS))
