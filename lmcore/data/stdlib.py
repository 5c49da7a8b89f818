"""The ``python-stdlib`` corpus: the running interpreter's own standard-library source, offline.

Every ``*.py`` file under ``sysconfig.get_paths()["stdlib"]``, tests excluded (``test/``,
``tests/``, ``idlelib/idle_test``, ``test_*.py``), and neither third-party packages
(``site-packages``) nor ``pydoc_data`` (the help text that is the ``python-docs`` corpus). One
document per file, as UTF-8 bytes (:class:`ByteTokenizer`, V = 259). Files are in sorted path
order; a file goes to the validation split when the CRC-32 of its path is 0 mod 10 (about 1 in
10, the same on every machine, and not one alphabetical block of modules).

Packing is the document-boundary machinery of :func:`lmcore.shift.pack_documents` (notebook
06): documents, each followed by EOS, are concatenated and cut into rows of ``block_size``;
``document_ids`` number the files, ``position_ids`` restart at each file and row, and the target
that crosses from one file into the next is ``-100``. The stream is held once (int64 ids and
int32 file numbers); the masks of a batch are built when it is drawn, so 12 MB of source costs
about 150 MB, not five (N, L) int64 tensors of the whole corpus.
"""

from __future__ import annotations

import sysconfig
import zlib
from pathlib import Path

import torch

from .._validate import require_generator, require_int_scalar
from ..shift import _stream_rows
from .base import CorpusBase, eval_args, packed_rows
from .tokenizers import ByteTokenizer

__all__ = ["EXCLUDED_DIRS", "stdlib_files", "PackedStreamCorpus", "load_python_stdlib"]

EXCLUDED_DIRS = frozenset(
    {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__", "pydoc_data"}
)


def stdlib_files(root=None) -> list[tuple[str, Path]]:
    """``(relative posix path, path)`` of every included ``*.py`` file, in sorted order."""
    root = Path(root if root is not None else sysconfig.get_paths()["stdlib"])
    out = []
    for p in root.rglob("*.py"):
        rel = p.relative_to(root)
        if EXCLUDED_DIRS.intersection(rel.parts[:-1]) or rel.name.startswith("test_"):
            continue
        if p.is_file():
            out.append((rel.as_posix(), p))
    return sorted(out)


class PackedStreamCorpus(CorpusBase):
    """Documents packed as one stream per split (``pack_documents``'s rows, built lazily)."""

    def __init__(self, name: str, tokenizer, documents, val_mask, *, names=None):
        self.name, self.tokenizer = name, tokenizer
        self.names = list(names) if names is not None else None
        eos = tokenizer.eos_id
        self._stream = {}
        for split, keep in (("train", [not v for v in val_mask]), ("val", list(val_mask))):
            docs = [d for d, k in zip(documents, keep) if k]
            if not docs:
                raise ValueError(f"the {split} split of corpus {name!r} has no documents.")
            ids = torch.cat([torch.cat([d, torch.tensor([eos])]) for d in docs])
            doc_ids = torch.repeat_interleave(
                torch.arange(len(docs), dtype=torch.int32), torch.tensor([len(d) + 1 for d in docs])
            )
            self._stream[split] = (ids, doc_ids, len(docs))
        self.ids = torch.cat([self._stream["train"][0], self._stream["val"][0]])

    def num_documents(self, split: str) -> int:
        return self._split(split)[2]

    def num_tokens(self, split: str) -> int:
        """Tokens in ``split``'s stream (each document plus its EOS)."""
        return len(self._split(split)[0])

    def _split(self, split):
        return self._stream[self._check_split(split)]

    def num_rows(self, split: str, block_size: int) -> int:
        return -(-self.num_tokens(split) // require_int_scalar("block_size", block_size, min=2))

    def rows(self, split: str, block_size: int, index) -> dict:
        """The packed rows ``index`` (a 1-D index tensor or a slice) of ``split``: input_ids,
        labels, document_ids, position_ids, each (N, block_size), as ``pack_documents`` gives."""
        ids, doc, _ = self._split(split)
        rows = torch.arange(self.num_rows(split, block_size))[index]
        return packed_rows(_stream_rows(ids, doc, rows, block_size, self.tokenizer.pad_id))

    def batch(self, split: str, batch_size: int, block_size: int, *, generator=None) -> dict:
        """``batch_size`` rows drawn uniformly (with replacement) from ``split``'s packing."""
        require_int_scalar("batch_size", batch_size, min=1)
        require_generator(generator)
        n = self.num_rows(split, block_size)
        return self.rows(split, block_size, torch.randint(0, n, (batch_size,), generator=generator))

    def eval_batches(self, split: str, batch_size: int, block_size: int, max_batches: int | None = None):
        """Consecutive rows from the start of ``split`` (deterministic)."""
        batch_size, block_size, max_batches = eval_args(batch_size, block_size, max_batches)
        n = self.num_rows(split, block_size)
        for k, i in enumerate(range(0, n, batch_size)):
            if max_batches is not None and k >= max_batches:
                return
            yield self.rows(split, block_size, slice(i, i + batch_size))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}, documents={self.num_documents('train')}+"
            f"{self.num_documents('val')}, tokens={len(self.ids)}, vocab_size={self.vocab_size})"
        )


_CACHE: dict = {}


def load_python_stdlib(root=None) -> PackedStreamCorpus:
    """The ``python-stdlib`` corpus (cached per process: reading ~12 MB takes about a second)."""
    key = str(root)
    if key not in _CACHE:
        files = stdlib_files(root)
        if not files:
            raise RuntimeError(
                f"no standard-library source found under {root or sysconfig.get_paths()['stdlib']}; "
                "this Python installation ships without its .py files."
            )
        tok = ByteTokenizer()
        raw = [(rel, p.read_bytes()) for rel, p in files]
        keep = [
            (rel, torch.frombuffer(bytearray(b), dtype=torch.uint8).long()) for rel, b in raw if b
        ]  # drop empty files
        val = [zlib.crc32(rel.encode()) % 10 == 0 for rel, _ in keep]
        if len(val) >= 2 and not any(val):  # a tiny tree: still one file to validate on
            val[-1] = True
        _CACHE[key] = PackedStreamCorpus(
            "python-stdlib", tok, [d for _, d in keep], val, names=[rel for rel, _ in keep]
        )
    return _CACHE[key]
