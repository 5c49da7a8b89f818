"""Adversarial inputs for the tokenizers, the download helper, the chat-arithmetic corpus and
the by-hand softmax: refused by type (TypeError) or value (ValueError), the argument named."""

import hashlib
import http.client
import math
import urllib.request

import numpy as np
import pytest
import torch
from _adversarial import BAD_ID_DTYPES, case_id, raises
from hypothesis import given
from hypothesis import strategies as st

from lmcore import handcalc
from lmcore.data import ByteTokenizer, CharTokenizer, ChatTokenizer, download, download_corpus
from lmcore.data.arithmetic import chat_arithmetic, chat_arithmetic_entropy

TOKENIZERS = {"char": CharTokenizer("hello world"), "byte": ByteTokenizer(), "chat": ChatTokenizer()}
DECODERS = {**{k: t.decode for k, t in TOKENIZERS.items()}, "chat.tokens": TOKENIZERS["chat"].tokens}


@pytest.mark.parametrize(
    "bad",
    [
        [1.0, 2.0],
        [1, True],
        [None],
        ["a"],
        [[1, 2]],
        "abc",
        b"ab",
        3,
        None,
        {1, 2},
        np.array([1.0]),
        torch.tensor([1.0, 2.0]),
    ],
    ids=case_id,
)
@pytest.mark.parametrize("which", list(DECODERS))
def test_decode_refuses_what_is_not_ids(which, bad):
    with raises(TypeError, "ids"):
        DECODERS[which](bad)


@pytest.mark.parametrize("dtype", BAD_ID_DTYPES, ids=str)
@pytest.mark.parametrize("which", list(DECODERS))
def test_decode_tensor_dtypes(which, dtype):
    with raises(TypeError, "ids", str(dtype)):
        DECODERS[which](torch.tensor([1, 2]).to(dtype))


@pytest.mark.parametrize("which", list(DECODERS))
def test_decode_out_of_vocabulary_and_shape(which):
    with raises(ValueError, "ids[1]", "-1"):
        DECODERS[which]([1, -1])
    with raises(ValueError, "ids[0]", "-100"):
        DECODERS[which]([-100])
    with raises(ValueError, "ids", "1-D"):
        DECODERS[which](torch.tensor([[1, 2]]))


@pytest.mark.parametrize("which", list(DECODERS))
def test_decode_accepts_numpy_ints_tuples_and_int32(which):
    ref = DECODERS[which]([1, 2, 3])
    for form in (
        [np.int64(1), np.int32(2), 3],
        (1, 2, 3),
        np.array([1, 2, 3]),
        torch.tensor([1, 2, 3], dtype=torch.int32),
        iter([1, 2, 3]),
    ):
        assert DECODERS[which](form) == ref


@pytest.mark.parametrize("bad", [None, 5, b"text", ["a"]], ids=case_id)
@pytest.mark.parametrize("which", list(TOKENIZERS))
def test_encode_refuses_non_strings(which, bad):
    with raises(TypeError, "text"):
        TOKENIZERS[which].encode(bad)


@pytest.mark.parametrize("bad", ["\ud800", "ok \udfff"], ids=case_id)
def test_byte_encode_of_a_lone_surrogate_names_text(bad):
    with raises(ValueError, "text", "UTF-8"):
        ByteTokenizer().encode(bad)


@pytest.mark.parametrize("flag", ["add_bos", "add_eos"])
@pytest.mark.parametrize("bad", [2, 0, "yes", None, 1.0], ids=case_id)
def test_byte_encode_flags_are_bools(flag, bad):
    with raises(TypeError, flag):
        ByteTokenizer().encode("hi", **{flag: bad})


@pytest.mark.parametrize("bad", [1, "yes", None], ids=case_id)
def test_byte_decode_keep_special_is_a_bool(bad):
    with raises(TypeError, "keep_special"):
        ByteTokenizer().decode([104, 256], keep_special=bad)


@pytest.mark.parametrize(
    "bad,exc",
    [("", ValueError), (None, TypeError), (b"abc", TypeError), (["a", "b"], TypeError)],
    ids=case_id,
)
def test_char_tokenizer_text(bad, exc):
    with raises(exc, "text"):
        CharTokenizer(bad)


@given(st.text(min_size=1, max_size=40))
def test_byte_round_trip_of_any_encodable_text(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        with raises(ValueError, "text"):
            ByteTokenizer().encode(text)
        return
    tok = ByteTokenizer()
    assert tok.decode(tok.encode(text, add_bos=True, add_eos=True)) == text
    assert CharTokenizer(text).decode(CharTokenizer(text).encode(text)) == text


# ---- download --------------------------------------------------------------------------------

SHA = "a" * 64


@pytest.mark.parametrize(
    "kw,exc,name",
    [
        (dict(url=None), TypeError, "url"),
        (dict(url=b"http://x"), TypeError, "url"),
        (dict(url=""), ValueError, "url"),
        (dict(url="example.com/x.txt"), ValueError, "url"),
        (dict(url="javascript:alert(1)"), ValueError, "url"),
        (dict(sha256=None), TypeError, "sha256"),
        (dict(sha256=123), TypeError, "sha256"),
        (dict(sha256="z" * 64), ValueError, "sha256"),
        (dict(sha256="a" * 63), ValueError, "sha256"),
        (dict(filename="../escape.txt"), ValueError, "filename"),
        (dict(filename="/etc/passwd"), ValueError, "filename"),
        (dict(filename="sub/x.txt"), ValueError, "filename"),
        (dict(filename=""), ValueError, "filename"),
        (dict(filename=".."), ValueError, "filename"),
        (dict(filename="."), ValueError, "filename"),
        (dict(filename="a\0b"), ValueError, "filename"),
        (dict(filename=None), TypeError, "filename"),
        (dict(filename=5), TypeError, "filename"),
        (dict(timeout=0), ValueError, "timeout"),
        (dict(timeout=-1), ValueError, "timeout"),
        (dict(timeout=math.nan), ValueError, "timeout"),
        (dict(timeout=math.inf), ValueError, "timeout"),
        (dict(timeout="30"), TypeError, "timeout"),
        (dict(timeout=True), TypeError, "timeout"),
        (dict(cache=5), TypeError, "cache"),
    ],
    ids=case_id,
)
def test_download_arguments(tmp_path, kw, exc, name):
    args = dict(url="http://127.0.0.1:9/x.txt", sha256=SHA, filename="x.txt", cache=tmp_path) | kw
    with raises(exc, name):
        download(args.pop("url"), args.pop("sha256"), args.pop("filename"), **args)
    assert not list(tmp_path.parent.glob("escape.txt"))


class _Broken:
    """A response that fails half-way through the body."""

    def __init__(self, exc):
        self.exc, self.calls = exc, 0

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def read(self, n):
        self.calls += 1
        if self.calls == 1:
            return b"partial"
        raise self.exc


@pytest.mark.parametrize(
    "exc",
    [http.client.IncompleteRead(b"x", 10), http.client.RemoteDisconnected("bye"), TimeoutError("slow")],
    ids=lambda e: type(e).__name__,
)
def test_a_failure_mid_download_is_a_connection_error_and_leaves_no_part_file(tmp_path, monkeypatch, exc):
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: _Broken(exc))
    with raises(ConnectionError, "could not download"):
        download("http://example.invalid/x.txt", SHA, "x.txt", cache=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_download_leaves_no_part_file(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: _Broken(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        download("http://example.invalid/x.txt", SHA, "x.txt", cache=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_file_urls_and_uppercase_digests_work(tmp_path):
    src = tmp_path / "src.txt"
    src.write_bytes(b"hello\n")
    sha = hashlib.sha256(b"hello\n").hexdigest().upper()
    path = download(src.as_uri(), sha, "copy.txt", cache=tmp_path / "cache")
    assert path.read_bytes() == b"hello\n"


@pytest.mark.parametrize(
    "bad,exc", [(["tinyshakespeare"], TypeError), (None, TypeError), ("nope", ValueError)], ids=case_id
)
def test_download_corpus_name(bad, exc):
    with raises(exc, "corpus"):
        download_corpus(bad)


# ---- chat arithmetic --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw,exc,name",
    [
        (dict(n=0), ValueError, "n"),
        (dict(n=True), TypeError, "n"),
        (dict(n=2.0), TypeError, "n"),
        (dict(seed=None), TypeError, "seed"),
        (dict(seed=1.5), TypeError, "seed"),
        (dict(seed="0"), TypeError, "seed"),
        (dict(seed=True), TypeError, "seed"),
        (dict(low=True), TypeError, "low"),
        (dict(high=9.0), TypeError, "high"),
        (dict(high="9"), TypeError, "high"),
        (dict(low=-1), ValueError, "low"),
        (dict(low=5, high=4), ValueError, "low"),
        (dict(ops="+"), TypeError, "ops"),
        (dict(ops=None), TypeError, "ops"),
        (dict(ops={"+", "-"}), TypeError, "ops"),
        (dict(ops=[["+"]]), TypeError, "ops"),
        (dict(ops=()), ValueError, "ops"),
        (dict(ops=("/",)), ValueError, "ops"),
        (dict(ops=("+", "+")), ValueError, "ops"),
    ],
    ids=case_id,
)
def test_chat_arithmetic_arguments(kw, exc, name):
    args = dict(n=3) | kw
    with raises(exc, name):
        chat_arithmetic(args.pop("n"), **args)
    if "n" not in kw and "seed" not in kw:
        with raises(exc, name):
            chat_arithmetic_entropy(**kw)


def test_numpy_operands_are_ints():
    assert chat_arithmetic(
        np.int64(3), seed=np.int64(1), low=np.int32(0), high=np.int64(9)
    ) == chat_arithmetic(3, seed=1, low=0, high=9)
    assert chat_arithmetic_entropy(low=np.int64(0), high=np.int64(9)) == chat_arithmetic_entropy()


def _naive_mean_len(low, high, ops):
    """Every (a, op, b) written out: tokens of a, b, the answer, and the 5 fixed tokens."""
    ntok = lambda x: len(str(x))  # '-' and each digit are one token
    fn = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
    lens = [
        ntok(a) + ntok(b) + ntok(fn[op](a, b)) + 5
        for op in ops
        for a in range(low, high + 1)
        for b in range(low, high + 1)
    ]
    return sum(lens) / len(lens)


@given(
    low=st.integers(0, 120),
    span=st.integers(0, 60),
    ops=st.lists(st.sampled_from("+-*"), min_size=1, max_size=3, unique=True),
)
def test_entropy_per_target_matches_a_naive_count(low, span, ops):
    high = low + span
    h_doc = chat_arithmetic_entropy(low=low, high=high, ops=tuple(ops), per="document")
    assert h_doc == pytest.approx(2 * math.log(span + 1) + math.log(len(ops)), abs=1e-12)
    got = chat_arithmetic_entropy(low=low, high=high, ops=tuple(ops))
    assert got == pytest.approx(h_doc / _naive_mean_len(low, high, ops), rel=1e-12, abs=1e-15)


def test_entropy_of_large_operands_is_fast_and_exact():
    # 10**6 operands: 10**12 pairs, counted per digit length instead of one by one
    h = chat_arithmetic_entropy(low=0, high=10**6 - 1, ops=("+", "-", "*"))
    assert 0 < h < chat_arithmetic_entropy(per="document")
    with raises(ValueError, "high"):
        chat_arithmetic_entropy(low=0, high=10**12)


# ---- handcalc ---------------------------------------------------------------------------------

FNS = {
    "softmax": handcalc.softmax,
    "log_softmax": handcalc.log_softmax,
    "logsumexp": handcalc.logsumexp,
    "nll": lambda z: handcalc.nll(z, 0),
    "ce_grad": lambda z: handcalc.ce_grad(z, 0),
}


@pytest.mark.parametrize(
    "bad,exc",
    [
        ([True, False], TypeError),
        ([1.0, True], TypeError),
        (["1", "2"], TypeError),
        ("12", TypeError),
        (None, TypeError),
        ([1 + 2j, 0], TypeError),
        (np.array([True, False]), TypeError),
        ([[1.0, 2.0], [3.0]], ValueError),
        ({1: 2.0}, TypeError),
        (torch.tensor([1.0, 2.0], requires_grad=True), None),
    ],
    ids=case_id,
)
@pytest.mark.parametrize("fn", list(FNS))
def test_handcalc_logits(fn, bad, exc):
    if exc is None:  # a tensor (even one needing grad) is numbers
        assert np.allclose(
            np.asarray(FNS[fn](bad), dtype=float), np.asarray(FNS[fn]([1.0, 2.0]), dtype=float)
        )
        return
    with raises(exc, "z"):
        FNS[fn](bad)
