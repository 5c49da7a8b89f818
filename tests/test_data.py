"""Tokenizers, corpora, the chat-arithmetic entropy, batching and the download helper."""

import collections
import functools
import hashlib
import http.server
import math
import socket
import threading

import pytest
import torch

from lmcore.data import (
    ByteTokenizer,
    CharTokenizer,
    ChatTokenizer,
    DocumentCorpus,
    TextCorpus,
    chat_arithmetic,
    chat_arithmetic_entropy,
    download,
    download_corpus,
    load_corpus,
    python_docs_text,
    random_windows,
    read_text_file,
    train_val_split,
    unigram_entropy,
)
from lmcore.shift import pack_documents

whole = functools.partial(pack_documents, policy="whole")


def test_char_tokenizer_round_trip_and_unknown_character():
    tok = CharTokenizer("hello world")
    assert tok.chars == sorted(set("hello world")) and tok.vocab_size == 8
    for s in ["hello", "world hello", "", "lol"]:
        assert tok.decode(tok.encode(s)) == s
    assert tok.encode("he") == [tok.chars.index("h"), tok.chars.index("e")]
    with pytest.raises(ValueError, match="'z' at position 3"):
        tok.encode("helz")
    with pytest.raises(ValueError, match="ids"):
        tok.decode([0, 8])


def test_byte_tokenizer_round_trip_and_specials():
    tok = ByteTokenizer()
    for s in ["", "plain ascii", "héllo wörld", "数学 2 + 3", "emoji \U0001f600!"]:
        ids = tok.encode(s, add_bos=True, add_eos=True)
        assert ids[0] == 256 and ids[-1] == 257 and ids[1:-1] == list(s.encode("utf-8"))
        assert tok.decode(ids) == s
    assert tok.vocab_size == 259 and len({tok.bos_id, tok.eos_id, tok.pad_id}) == 3
    assert tok.decode([256, 104, 105, 257, 258], keep_special=True) == "<BOS>hi<EOS><PAD>"
    assert tok.decode([0xC3]) == "\ufffd"  # a cut multi-byte character
    with pytest.raises(ValueError):
        tok.decode([259])
    with pytest.raises(TypeError):
        tok.encode(b"bytes")


def test_chat_tokenizer_seed_example_and_round_trip():
    tok = ChatTokenizer()
    ids = tok.encode("<user> 2 + 3 = <assistant> 5 . EOS")
    assert tok.tokens(ids) == ["<user>", "2", "+", "3", "=", "<assistant>", "5", ".", "EOS"]
    for text in chat_arithmetic(50, seed=1, high=120, ops=("+", "-", "*")):
        assert tok.decode(tok.encode(text)) == text
    with pytest.raises(ValueError, match="'x'"):
        tok.encode("<user> x + 1")


def test_chat_arithmetic_is_seeded_and_correct():
    a, b = (
        chat_arithmetic(200, seed=3, high=50, ops=("+", "-", "*")),
        chat_arithmetic(200, seed=3, high=50, ops=("+", "-", "*")),
    )
    assert a == b and a != chat_arithmetic(200, seed=4, high=50, ops=("+", "-", "*"))
    for text in a:
        w = text.split()
        x, op, y, ans = int(w[1]), w[2], int(w[3]), int(w[6])
        assert w[0] == "<user>" and w[4] == "=" and w[5] == "<assistant>" and w[7] == "."
        assert 0 <= x <= 50 and 0 <= y <= 50
        assert ans == {"+": x + y, "-": x - y, "*": x * y}[op]
    with pytest.raises(ValueError):
        chat_arithmetic(5, low=3, high=2)
    with pytest.raises(ValueError):
        chat_arithmetic(5, ops=("/",))


@pytest.mark.parametrize(
    "low,high,ops", [(0, 9, ("+",)), (0, 12, ("+", "*")), (5, 20, ("-",)), (0, 3, ("+", "-", "*"))]
)
def test_chat_arithmetic_entropy_equals_a_perfect_model(low, high, ops):
    """Enumerate every turn; a perfect model predicts each token from prefix counts."""
    tok = ChatTokenizer()
    seqs = []
    for op in ops:
        for a in range(low, high + 1):
            for b in range(low, high + 1):
                r = {"+": a + b, "-": a - b, "*": a * b}[op]
                seqs.append(tuple(tok.encode(f"<user> {a} {op} {b} = <assistant> {r} .")) + (tok.eos_id,))
    assert len(set(seqs)) == len(seqs)  # each turn is its own sequence
    prefix = collections.Counter(s[:i] for s in seqs for i in range(1, len(s) + 1))
    total_nll = sum(-math.log(prefix[s[: i + 1]] / prefix[s[:i]]) for s in seqs for i in range(1, len(s)))
    n_targets = sum(len(s) - 1 for s in seqs)
    assert chat_arithmetic_entropy(low=low, high=high, ops=ops) == pytest.approx(
        total_nll / n_targets, rel=1e-12
    )
    assert chat_arithmetic_entropy(low=low, high=high, ops=ops, per="document") == pytest.approx(
        total_nll / len(seqs)
    )


def test_seed_example_entropy_value():
    assert chat_arithmetic_entropy() == pytest.approx(2 * math.log(10) / 8.45)


def test_unigram_entropy_matches_counter():
    ids = [0, 1, 1, 2, 2, 2, 5]
    c = collections.Counter(ids)
    ref = -sum(v / 7 * math.log(v / 7) for v in c.values())
    assert unigram_entropy(torch.tensor(ids)) == pytest.approx(ref)
    assert unigram_entropy([3, 3, 3]) == 0.0


def test_split_and_random_windows():
    data = torch.arange(100)
    tr, va = train_val_split(data, 0.2)
    assert torch.equal(tr, torch.arange(80)) and torch.equal(va, torch.arange(80, 100))
    x = random_windows(tr, 6, 10, generator=torch.Generator().manual_seed(0))
    assert x.shape == (6, 10)
    for row in x:  # each row is one contiguous slice
        assert torch.equal(row, torch.arange(int(row[0]), int(row[0]) + 10))
    y = random_windows(tr, 6, 10, generator=torch.Generator().manual_seed(0))
    assert torch.equal(x, y)
    with pytest.raises(ValueError):
        random_windows(torch.arange(5), 2, 10)
    with pytest.raises(ValueError):
        train_val_split(data, 1.5)


def test_pack_whole_documents_never_cuts_a_document():
    docs = [[3] * 5, [4] * 2, [5] * 7, [6] * 1, [7] * 3]
    pb = whole(docs, 8, eos_id=1, pad_id=0)
    seen = []
    for r in range(pb.input_ids.shape[0]):
        row, doc = pb.input_ids[r].tolist(), pb.document_ids[r].tolist()
        for k in sorted(set(doc) - {-1}):
            toks = [t for t, d in zip(row, doc) if d == k]
            seen.append(toks)
    assert seen == [d + [1] for d in docs]
    start = 0  # each row equals pack_documents of its documents
    for r in range(pb.input_ids.shape[0]):
        n = len(set(pb.document_ids[r].tolist()) - {-1})
        ref = pack_documents(docs[start : start + n], 8, eos_id=1, pad_id=0)
        start += n
        assert ref.input_ids.shape[0] == 1
        for f in ("input_ids", "labels", "position_ids", "attention_mask"):
            assert torch.equal(getattr(pb, f)[r], getattr(ref, f)[0]), f
        d, e = pb.document_ids[r], ref.document_ids[0]
        assert torch.equal(d[:, None] == d[None], e[:, None] == e[None])
    assert (pb.labels[pb.attention_mask == 0] == -100).all()
    with pytest.raises(ValueError, match="block_size"):
        whole([[2] * 8], 8, eos_id=1, pad_id=0)


def test_document_and_text_corpora():
    c = load_corpus("chat-arithmetic", n_documents=300, seed=0)
    assert isinstance(c, DocumentCorpus) and c.vocab_size == ChatTokenizer.vocab_size
    b = c.batch("train", 4, 32, generator=torch.Generator().manual_seed(0))
    assert set(b) == {"input_ids", "labels", "document_ids", "position_ids"}
    assert all(v.shape == (4, 32) for v in b.values())
    n_val_docs = sum(1 for _ in c.val)
    assert n_val_docs == 30
    text = python_docs_text()
    assert len(text) > 100_000 and "assert" in text
    p = load_corpus("python-docs")
    assert isinstance(p, TextCorpus) and p.tokenizer.decode(p.ids[:50]) == text[:50]
    e1 = [x["input_ids"] for x in p.eval_batches("val", 4, 16, max_batches=3)]
    e2 = [x["input_ids"] for x in p.eval_batches("val", 4, 16, max_batches=3)]
    assert len(e1) == 3 and all(torch.equal(u, v) for u, v in zip(e1, e2))
    assert torch.equal(e1[0][0], p.val[:16])
    assert 2.5 < p.unigram_entropy < math.log(p.vocab_size)
    with pytest.raises(ValueError, match="unknown corpus"):
        load_corpus("nope")


def test_file_corpus(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("abc abd\n" * 50, encoding="utf-8")
    c = load_corpus("file", path=f)
    assert c.vocab_size == 6 and c.tokenizer.decode(c.ids) == f.read_text()
    assert load_corpus("file", path=f, tokenizer="byte").vocab_size == 259
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe")
    with pytest.raises(ValueError, match="UTF-8"):
        read_text_file(bad)


@pytest.fixture
def local_server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}", httpd
    httpd.shutdown()
    httpd.server_close()


def test_download_checksummed_and_cached(local_server, tmp_path):
    root, base, httpd = local_server
    payload = b"To be, or not to be\n" * 100
    (root / "corpus.txt").write_bytes(payload)
    sha = hashlib.sha256(payload).hexdigest()
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match="checksum"):
        download(f"{base}/corpus.txt", "0" * 64, "c.txt", cache=cache)
    assert not list(cache.iterdir())  # nothing kept after a mismatch
    path = download(f"{base}/corpus.txt", sha, "c.txt", cache=cache)
    assert path.read_bytes() == payload and path.parent == cache
    httpd.shutdown()  # offline now: the cache answers
    assert download(f"{base}/corpus.txt", sha, "c.txt", cache=cache) == path


def test_download_offline_is_a_clear_error(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError, match="offline"):
        download(f"http://127.0.0.1:{port}/x.txt", "a" * 64, "x.txt", cache=tmp_path, timeout=5)
    with pytest.raises(ValueError, match="unknown corpus"):
        download_corpus("not-a-corpus")
    with pytest.raises(ValueError, match="sha256"):
        download("http://127.0.0.1/x", "abc", "x.txt", cache=tmp_path)


def test_corpus_fingerprint_is_the_sha256_of_the_int64_ids_and_refuses_a_non_corpus():
    from lmcore.data import corpus_fingerprint

    corpus = load_corpus("chat-arithmetic", n_documents=50, seed=0)
    ref = hashlib.sha256(b"".join(int(i).to_bytes(8, "little", signed=True) for i in corpus.ids.tolist()))
    assert corpus_fingerprint(corpus) == ref.hexdigest()
    other = load_corpus("chat-arithmetic", n_documents=50, seed=1)
    assert corpus_fingerprint(other) != corpus_fingerprint(corpus)
    with pytest.raises(TypeError, match="corpus"):
        corpus_fingerprint([1, 2, 3])
