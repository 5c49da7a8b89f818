"""Adversarial inputs to training: every bad TrainConfig field, non-finite settings, a corpus too
short for the context, and the global state a failing run must leave as it found it.

The contract: the exception type and the field named in the message (``TrainConfig.<field>``),
raised before any step runs, with torch's thread count and float32 matmul precision unchanged.
"""

import math

import pytest
import torch

from lmcore.data import TextCorpus, load_corpus
from lmcore.data.tokenizers import ByteTokenizer, CharTokenizer
from lmcore.model import GPT, GPTConfig
from lmcore.train import NonFiniteLossError, evaluate, preset, train
from lmcore.train.optim import configure_optimizer, lr_at

NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def chat():
    return load_corpus("chat-arithmetic", n_documents=200, seed=0)


def smoke(**kw):
    base = dict(progress=False, max_steps=3, eval_interval=1, eval_batches=1)
    return preset("smoke", **{**base, **kw})


# (field, bad value, exception type). Each is refused up front, naming TrainConfig.<field>.
BAD_FIELDS = [
    ("grad_accum", 0, ValueError),
    ("grad_accum", -1, ValueError),
    ("eval_interval", 0, ValueError),
    ("batch_size", 0, ValueError),
    ("eval_batches", 0, ValueError),
    ("block_size", 1, ValueError),
    ("block_size", 0, ValueError),
    ("max_steps", -1, ValueError),
    ("warmup_steps", -5, ValueError),
    ("n_layer", 0, ValueError),
    ("n_head", 3, ValueError),
    ("num_threads", 0, ValueError),
    ("seed", -1, ValueError),
    ("lr", INF, ValueError),
    ("lr", NAN, ValueError),
    ("lr", 0.0, ValueError),
    ("lr", -1e-3, ValueError),
    ("min_lr", NAN, ValueError),
    ("min_lr", -1.0, ValueError),
    ("min_lr", 1.0, ValueError),
    ("grad_clip", NAN, ValueError),
    ("grad_clip", INF, ValueError),
    ("grad_clip", 0.0, ValueError),
    ("weight_decay", NAN, ValueError),
    ("weight_decay", -0.1, ValueError),
    ("dropout", 1.0, ValueError),
    ("dropout", -0.1, ValueError),
    ("dropout", NAN, ValueError),
    ("betas", (0.9,), TypeError),
    ("betas", (0.9, 1.0), ValueError),
    ("betas", (NAN, 0.99), ValueError),
    ("device", "gpu0", ValueError),
    ("device", 0, TypeError),
    ("dtype", "float16", ValueError),
    ("compile", "yes", TypeError),
    ("progress", 1, TypeError),
    ("keep_best", "no", TypeError),
    # strings and floats for numeric fields, bools for ints
    ("lr", "3e-3", TypeError),
    ("batch_size", "16", TypeError),
    ("max_steps", "5", TypeError),
    ("grad_clip", "1", TypeError),
    ("batch_size", 8.0, TypeError),
    ("max_steps", 10.5, TypeError),
    ("batch_size", True, TypeError),
    ("grad_accum", True, TypeError),
    ("eval_interval", True, TypeError),
    ("n_layer", False, TypeError),
    ("num_threads", True, TypeError),
    ("lr", True, TypeError),
    ("corpus", "", TypeError),
]


@pytest.mark.parametrize("name,value,exc", BAD_FIELDS, ids=[f"{n}={v!r}" for n, v, _ in BAD_FIELDS])
def test_bad_field_is_refused_up_front_naming_it(chat, name, value, exc):
    threads, precision = torch.get_num_threads(), torch.get_float32_matmul_precision()
    over = {"num_threads": 2} if name != "num_threads" else {}
    stepped = []
    with pytest.raises(exc, match=rf"TrainConfig\.{name}"):
        train(smoke(**{**over, name: value}), chat, callback=lambda s, m: stepped.append(s))
    assert stepped == []  # before any step
    assert torch.get_num_threads() == threads
    assert torch.get_float32_matmul_precision() == precision


def test_config_that_is_not_a_trainconfig(chat):
    with pytest.raises(TypeError, match="TrainConfig"):
        train({"max_steps": 3}, chat)


@pytest.mark.parametrize("block_size", [64, 200])
def test_corpus_shorter_than_block_size(block_size):
    text = "tiny text. " * 10  # 110 characters
    corpus = TextCorpus("tiny", CharTokenizer(text), CharTokenizer(text).encode(text))
    threads = torch.get_num_threads()
    with pytest.raises(ValueError, match="block_size"):
        train(smoke(block_size=block_size, num_threads=2), corpus)
    assert torch.get_num_threads() == threads


@pytest.mark.parametrize("where", ["callback", "on_eval"])
def test_global_state_restored_when_the_run_raises(chat, where):
    threads, precision = torch.get_num_threads(), torch.get_float32_matmul_precision()

    def boom(*a):
        torch.set_float32_matmul_precision("medium")  # what train does on CUDA, then a crash
        raise RuntimeError("user code failed")

    with pytest.raises(RuntimeError, match="user code failed"):
        train(smoke(num_threads=2), chat, **{where: boom})
    assert torch.get_num_threads() == threads
    assert torch.get_float32_matmul_precision() == precision
    torch.set_float32_matmul_precision(precision)


def test_nonfinite_loss_is_a_dedicated_exception_class():
    assert issubclass(NonFiniteLossError, FloatingPointError)


def test_huge_lr_stops_before_a_nonfinite_update(chat, tmp_path):
    """A finite but absurd lr can still blow the weights up: the loop must stop with status
    'nan' (never die inside evaluate) and the checkpoint on disk must be finite."""
    res = train(
        smoke(lr=1e30, min_lr=0.0, warmup_steps=0, max_steps=6, eval_interval=1), chat, out_dir=tmp_path
    )
    assert res.status == "nan" and "NaN" in res.message
    assert all(math.isfinite(r["val_loss"]) for r in res.history)
    if (tmp_path / "checkpoint.pt").exists():
        ck = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
        assert all(torch.isfinite(v).all() for v in ck["model"].values())


def test_an_undescribable_tokenizer_is_refused_before_training(chat, tmp_path):
    class MyTokenizer(ByteTokenizer):
        pass

    text = "some text to train on, long enough for a row or two. " * 40
    tok = MyTokenizer()
    corpus = TextCorpus("mine", tok, tok.encode(text))
    stepped = []
    with pytest.raises(ValueError, match="MyTokenizer"):
        train(smoke(), corpus, out_dir=tmp_path, callback=lambda s, m: stepped.append(s))
    assert stepped == [] and not (tmp_path / "checkpoint.pt").exists()
    assert train(smoke(max_steps=1), corpus).status == "finished"  # fine without out_dir


def test_model_of_another_vocabulary_is_refused(chat):
    wrong = GPT(GPTConfig(vocab_size=chat.vocab_size + 1, block_size=32, n_layer=1, n_embd=32))
    with pytest.raises(ValueError, match="vocab_size"):
        train(smoke(), chat, model=wrong)


def test_max_steps_zero_only_evaluates(chat):
    res = train(smoke(max_steps=0), chat)
    assert res.status == "finished" and [r["step"] for r in res.history] == [0]
    assert math.isfinite(res.history[0]["val_loss"]) and res.best_step is None


LR_KW = dict(step=0, lr=1e-3, min_lr=1e-4, warmup_steps=10, max_steps=100)


@pytest.mark.parametrize(
    "name,value,exc",
    [
        ("step", -1, ValueError),
        ("step", 1.5, TypeError),
        ("step", True, TypeError),
        ("lr", NAN, ValueError),
        ("lr", INF, ValueError),
        ("lr", "1e-3", TypeError),
        ("min_lr", NAN, ValueError),
        ("min_lr", 1.0, ValueError),
        ("warmup_steps", -1, ValueError),
        ("max_steps", "100", TypeError),
    ],
)
def test_lr_schedule_refuses_bad_settings(name, value, exc):
    with pytest.raises(exc, match=name):
        lr_at(**{**LR_KW, name: value})


@pytest.mark.parametrize(
    "name,value,exc",
    [
        ("lr", INF, ValueError),
        ("lr", NAN, ValueError),
        ("lr", 0.0, ValueError),
        ("weight_decay", NAN, ValueError),
        ("weight_decay", -1.0, ValueError),
        ("betas", (0.9,), TypeError),
        ("betas", (0.9, 1.0), ValueError),
        ("lr", True, TypeError),
    ],
)
def test_optimizer_refuses_bad_settings(name, value, exc):
    model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=8))
    kw = {"lr": 1e-3, "weight_decay": 0.1, "betas": (0.9, 0.99), name: value}
    with pytest.raises(exc, match=name):
        configure_optimizer(model, **kw)


@pytest.mark.parametrize(
    "name,value,exc",
    [
        ("batch_size", 0, ValueError),
        ("batch_size", "4", TypeError),
        ("batch_size", True, TypeError),
        ("max_batches", 0, ValueError),
        ("max_batches", 1.0, TypeError),
        ("block_size", 1, ValueError),
        ("split", "test", ValueError),
    ],
)
def test_evaluate_refuses_bad_arguments(chat, name, value, exc):
    model = GPT(GPTConfig(vocab_size=chat.vocab_size, block_size=32, n_layer=1, n_embd=16))
    kw = {"batch_size": 4, "max_batches": 1, "block_size": 32, "split": "val", name: value}
    with pytest.raises(exc, match=name):
        evaluate(model, chat, kw.pop("split"), **kw)
    assert model.training  # the corpus refuses (eval_args); evaluate gives the mode back


def test_evaluate_on_a_split_shorter_than_block_size():
    text = "short. " * 12
    tok = CharTokenizer(text)
    corpus = TextCorpus("short", tok, tok.encode(text))
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=64, n_layer=1, n_embd=16))
    with pytest.raises(ValueError, match="block_size"):
        evaluate(model, corpus, "val", block_size=64)
