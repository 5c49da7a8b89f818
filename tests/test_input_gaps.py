"""Three inputs an adversarial suite found without a clear answer, each decided here.

* ``num_items`` as a float tensor (what an all-reduce of a float count returns): refused with a
  TypeError that names num_items, shows the value and says why (float32 holds integers exactly
  only up to 2**24; past that a summed count is silently off) and how to count instead.
* logits (or hidden, weight, labels) on the ``meta`` device: refused with a ValueError naming the
  argument, instead of PyTorch's "Tensor.item() cannot be called on meta tensors".
* an empty corpus file: refused with a ValueError naming the file (it named ``text`` or said
  "data has only 0 items"), for both tokenizers; a file too short to split names it too.
"""

import re

import pytest
import torch
import torch.nn.functional as F

from lmcore import causal_lm_loss, chunked_causal_lm_loss
from lmcore.data import load_corpus

G = torch.Generator().manual_seed(0)
LOGITS = torch.randn(2, 6, 7, generator=G)
LABELS = torch.randint(0, 7, (2, 6), generator=G)
H, W = torch.randn(2, 6, 4, generator=G), torch.randn(7, 4, generator=G)
N_VALID = 10  # 2 rows x 5 shifted targets, none ignored


def both_losses(**kw):
    return (
        lambda: causal_lm_loss(LOGITS, LABELS, **kw),
        lambda: chunked_causal_lm_loss(H, W, LABELS, **kw),
    )


@pytest.mark.parametrize(
    "count",
    [
        torch.tensor(float(N_VALID)),
        torch.tensor(float(N_VALID), dtype=torch.float64),
        torch.tensor(float(N_VALID), dtype=torch.bfloat16),
        torch.tensor(12.5),
    ],
    ids=lambda c: f"{c.dtype}:{c.item():g}",
)
def test_a_float_tensor_count_is_refused_with_the_reason(count):
    for fn in both_losses(num_items=count):
        with pytest.raises(TypeError) as err:
            fn()
        msg = str(err.value)
        assert "num_items" in msg and f"holding {count.item():g}" in msg, msg
        assert "2**24" in msg and "int64" in msg, msg


def test_the_int_count_of_the_same_all_reduce_is_accepted():
    """What the message says to do: count in int64, reduce that, pass it (as a tensor or int)."""
    count = (LABELS[:, 1:] != -100).sum()  # the int64 tensor an all-reduce would sum
    ref = F.cross_entropy(LOGITS[:, :-1].reshape(-1, 7).double(), LABELS[:, 1:].reshape(-1), reduction="sum")
    for n in (count, int(count), count * 3):
        got = causal_lm_loss(LOGITS, LABELS, num_items=n)
        assert float(got) == pytest.approx(float(ref) / int(n), rel=1e-6)


def test_float32_counts_are_inexact_past_2_24():
    """The reason in the message, shown: one more valid target vanishes in a float32 count."""
    assert int(torch.tensor(2**24 + 1, dtype=torch.float32)) == 2**24
    assert int(torch.tensor(2**24 + 1, dtype=torch.int64)) == 2**24 + 1


@pytest.mark.parametrize("which", ["logits", "labels", "both"])
def test_meta_logits_or_labels_are_refused_by_name(which):
    logits = LOGITS.to("meta") if which in ("logits", "both") else LOGITS
    labels = LABELS.to("meta") if which in ("labels", "both") else LABELS
    with pytest.raises(ValueError, match=r"^(logits|labels) is on the 'meta' device") as err:
        causal_lm_loss(logits, labels)
    assert str(err.value).startswith("labels" if which == "labels" else "logits")
    assert "(2, 6" in str(err.value)  # the shape it has


@pytest.mark.parametrize("which", ["hidden", "weight", "labels"])
def test_meta_inputs_of_the_chunked_loss_are_refused_by_name(which):
    args = {"hidden": H, "weight": W, "labels": LABELS}
    args[which] = args[which].to("meta")
    with pytest.raises(ValueError, match=rf"^{which} is on the 'meta' device"):
        chunked_causal_lm_loss(args["hidden"], args["weight"], args["labels"])


@pytest.mark.parametrize("tokenizer", ["char", "byte"])
def test_an_empty_corpus_file_is_named(tmp_path, tokenizer):
    path = tmp_path / "corpus.txt"
    path.write_text("")
    with pytest.raises(ValueError, match=re.escape(str(path)) + " is empty"):
        load_corpus("file", path=path, tokenizer=tokenizer)


def test_a_corpus_file_too_short_to_split_is_named(tmp_path):
    path = tmp_path / "one.txt"
    path.write_text("a")
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*too few to split"):
        load_corpus("file", path=path)


def test_a_short_real_corpus_file_still_loads(tmp_path):
    path = tmp_path / "two.txt"
    path.write_text("ab\n" * 20)
    corpus = load_corpus("file", path=path)
    assert corpus.vocab_size >= 3 and len(corpus.train) + len(corpus.val) == 60
