"""Notebook 08's corpus views (one text stream or a packed stream of documents) and its first-loss
verdict under bf16 autocast. References: the corpora's own token tensors, re.findall, a model
evaluated by hand under the same autocast."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from lmcore.course.training import run as R
from lmcore.data import TextCorpus, load_corpus
from lmcore.data.stdlib import PackedStreamCorpus
from lmcore.data.tokenizers import ByteTokenizer, CharTokenizer
from lmcore.model import GPT, GPTConfig
from lmcore.train import autocast_for, evaluate, model_config, preset, train

TEXT = "the cat sat on the mat. " * 40


def _text_corpus():
    tok = CharTokenizer(TEXT)
    return TextCorpus("t", tok, tok.encode(TEXT))


def _packed_corpus():
    tok = ByteTokenizer()
    docs = [torch.tensor(tok.encode(f"def f{k}():\n    return {k}\n")) for k in range(10)]
    return PackedStreamCorpus("p", tok, docs, [k % 5 == 4 for k in range(10)])


def test_split_tokens_and_summary_on_both_kinds_of_corpus():
    c = _text_corpus()
    assert torch.equal(R.split_tokens(c, "train"), c.train) and torch.equal(R.split_tokens(c, "val"), c.val)
    s = R.corpus_summary(c)
    assert (s["tokens"], s["train"] + s["val"], s["V"]) == (len(TEXT), len(TEXT), c.vocab_size)
    p = _packed_corpus()
    assert R.split_tokens(p, "train").tolist() + R.split_tokens(p, "val").tolist() == p.ids.tolist()
    sp = R.corpus_summary(p)
    assert sp["train"] == p.num_tokens("train") and sp["val"] == p.num_tokens("val") and sp["V"] == 259
    with pytest.raises(ValueError, match="split"):
        R.split_tokens(c, "test")
    with pytest.raises(TypeError, match="corpus"):
        R.split_tokens(object(), "train")


def test_eval_windows_are_the_stream_in_order():
    c = _text_corpus()
    w = R.eval_windows(c, 3, 8, split="train")
    assert w.shape == (3, 8) and torch.equal(w.flatten(), c.train[:24])
    with pytest.raises(ValueError, match="n must be"):
        R.eval_windows(c, 10_000, 8)


def test_first_batches_loss_is_the_mean_nll_of_the_first_windows_in_order():
    """Reference: float64 cross-entropy over the split's first rows, shifted by hand."""
    c = _text_corpus()
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=c.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16))
    got = R.first_batches_loss(model, c, "train", 2, batch_size=3, block_size=16)
    rows = c.train[: 6 * 16].view(6, 16)
    with torch.no_grad():
        logits = model(rows).double()
    want = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, c.vocab_size), rows[:, 1:].reshape(-1)
    )
    assert got == pytest.approx(want.item(), abs=1e-6)
    assert model.training  # left as it was
    with pytest.raises(ValueError, match="n_batches"):
        R.first_batches_loss(model, c, "val", 0, batch_size=3, block_size=16)


def test_training_words():
    c = _text_corpus()
    assert R.training_words(c) == {"the", "cat", "sat", "on", "mat"}


def test_first_loss_verdict_holds_under_bf16_autocast():
    """train() records its step-0 loss under the run's autocast; the notebook evaluates the
    same model under the same autocast, so the two agree to 1e-4 in bf16 too."""
    corpus = load_corpus("python-docs")
    cfg = preset("smoke", dtype="bfloat16", device="cpu", max_steps=1, eval_batches=2, progress=False)
    torch.manual_seed(cfg.seed)
    model = GPT(model_config(cfg, corpus.vocab_size))
    ac = autocast_for(torch.device("cpu"), "bfloat16")
    ev = dict(batch_size=cfg.batch_size, block_size=cfg.block_size, max_batches=cfg.eval_batches)
    first_bf16 = evaluate(model, corpus, "train", autocast=ac, **ev).mean_nll
    first_fp32 = evaluate(model, corpus, "train", **ev).mean_nll
    result = train(cfg, corpus, model=copy.deepcopy(model))
    assert abs(result.history[0]["train_loss"] - first_bf16) <= 1e-4
    assert abs(first_bf16 - math.log(corpus.vocab_size)) < 0.1
    assert first_bf16 != first_fp32  # the precision matters: compare like with like


def test_evaluate_scores_the_same_random_windows_from_the_whole_split_at_every_call():
    """Notebook 08's evaluation: max_batches batches of windows drawn from the whole split by a
    generator seeded with seed (reference: the windows drawn by hand with torch.randint from the
    same seed, scored with float64 cross-entropy); None scores the whole split in order."""
    text = "".join(f"line {k}: the cat sat on mat {k % 7}.\n" for k in range(200))
    tok = CharTokenizer(text)
    c = TextCorpus("t", tok, tok.encode(text))
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=c.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16))
    got = evaluate(model, c, "val", batch_size=4, block_size=16, max_batches=3).mean_nll
    g = torch.Generator().manual_seed(0)
    starts = torch.cat([torch.randint(0, len(c.val) - 16 + 1, (4,), generator=g) for _ in range(3)])
    rows = torch.stack([c.val[s : s + 16] for s in starts.tolist()])
    with torch.no_grad():
        logits = model(rows).double()
    want = F.cross_entropy(logits[:, :-1].reshape(-1, c.vocab_size), rows[:, 1:].reshape(-1))
    assert got == pytest.approx(want.item(), abs=1e-6)
    assert starts.max() > 3 * 4 * 16  # spread over the split, not its first 12 windows
    assert evaluate(model, c, "val", batch_size=4, block_size=16, max_batches=3).mean_nll == got
    assert evaluate(model, c, "val", batch_size=4, block_size=16, max_batches=3, seed=1).mean_nll != got
    whole = evaluate(model, c, "val", batch_size=4, block_size=16, max_batches=None)
    assert whole.n_tokens == ((len(c.val) - 1) // 16) * 15
    with pytest.raises(ValueError, match="seed"):
        evaluate(model, c, "val", seed=-1)
