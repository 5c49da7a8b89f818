"""The python-stdlib corpus: which files, in which order and split, and packing that equals
lmcore.shift.pack_documents row for row."""

import sysconfig
import zlib
from pathlib import Path

import pytest
import torch

from lmcore.data import load_corpus
from lmcore.data.stdlib import PackedStreamCorpus, load_python_stdlib, stdlib_files
from lmcore.data.tokenizers import ByteTokenizer
from lmcore.shift import pack_documents


@pytest.fixture
def fake_stdlib(tmp_path):
    files = {
        "os.py": "import sys\n",
        "json/__init__.py": "x = 1\n",
        "json/empty.py": "",
        "test/test_os.py": "assert 1\n",
        "unittest/test/test_case.py": "t\n",
        "lib2to3/tests/data/bom.py": "b\n",
        "idlelib/idle_test/htest.py": "h\n",
        "site-packages/pkg/mod.py": "third party\n",
        "pydoc_data/topics.py": "docs\n",
        "tkinter/test_helper.py": "t\n",
        "__pycache__/os.cpython-311.py": "c\n",
        "zipfile.py": "import io\n",
        "README.txt": "not python\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_tests_and_third_party_code_are_excluded(fake_stdlib):
    assert [rel for rel, _ in stdlib_files(fake_stdlib)] == [
        "json/__init__.py",
        "json/empty.py",
        "os.py",
        "zipfile.py",
    ]


def test_corpus_from_a_folder(fake_stdlib):
    c = load_python_stdlib(fake_stdlib)
    assert c.names == ["json/__init__.py", "os.py", "zipfile.py"]  # the empty file dropped
    val = [zlib.crc32(n.encode()) % 10 == 0 for n in c.names]
    assert c.num_documents("val") == max(1, sum(val)) and c.num_documents("train") >= 1
    assert c.num_tokens("train") + c.num_tokens("val") == len("import sys\nx = 1\nimport io\n") + 3


def _reference_rows(docs, block_size):
    tok = ByteTokenizer()
    return pack_documents(docs, block_size, eos_id=tok.eos_id, pad_id=tok.pad_id)


@pytest.mark.parametrize("block_size", [2, 5, 16])
def test_rows_equal_pack_documents(block_size):
    tok = ByteTokenizer()
    texts = ["def f():\n    return 1\n", "x", "import os\nprint(os.sep)\n", "a = [1, 2]\n", "zz"]
    docs = [torch.tensor(tok.encode(t)) for t in texts]
    val = [False, True, False, False, True]
    c = PackedStreamCorpus("t", tok, docs, val)
    for split, keep in (("train", [not v for v in val]), ("val", val)):
        ref = _reference_rows([d.tolist() for d, k in zip(docs, keep) if k], block_size)
        got = c.rows(split, block_size, slice(None))
        for key in ("input_ids", "labels", "document_ids", "position_ids"):
            assert torch.equal(got[key], getattr(ref, key)), (split, key)
        picked = c.rows(split, block_size, torch.tensor([len(ref.input_ids) - 1, 0]))
        assert torch.equal(picked["labels"], ref.labels[[len(ref.input_ids) - 1, 0]])
        batches = list(c.eval_batches(split, 2, block_size))
        assert torch.equal(torch.cat([b["input_ids"] for b in batches]), ref.input_ids)


def test_batches_are_reproducible_and_in_range():
    tok = ByteTokenizer()
    docs = [torch.tensor(tok.encode(t * 30)) for t in "abcdefghij"]
    c = PackedStreamCorpus("t", tok, docs, [i == 3 for i in range(10)])
    a = c.batch("train", 6, 8, generator=torch.Generator().manual_seed(0))
    b = c.batch("train", 6, 8, generator=torch.Generator().manual_seed(0))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert a["input_ids"].shape == (6, 8) and int(a["input_ids"].max()) < tok.vocab_size
    with pytest.raises(ValueError, match="split"):
        c.batch("test", 2, 8)
    with pytest.raises(TypeError, match="batch_size"):
        c.batch("train", True, 8)


@pytest.mark.slow
def test_the_real_stdlib_corpus():
    root = Path(sysconfig.get_paths()["stdlib"])
    c = load_corpus("python-stdlib")
    assert c is load_corpus("python-stdlib")  # cached
    assert 300 < c.num_documents("train") + c.num_documents("val") < 3000
    assert 0.05 < c.num_documents("val") / c.num_documents("train") < 0.2
    assert all(not n.startswith("test/") and "/tests/" not in n for n in c.names)
    total = sum((root / n).stat().st_size for n in c.names)
    assert len(c.ids) == total + len(c.names)  # bytes + one EOS each
    assert c.vocab_size == 259 and 2.0 < c.unigram_entropy < 5.0
