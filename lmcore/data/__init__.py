"""Text to token ids to batches, all offline unless a download is asked for.

- :mod:`.tokenizers`: characters, UTF-8 bytes, the chat-arithmetic words
- :mod:`.corpus`: text and document corpora, train/val splits, batches, :func:`load_corpus`
- :mod:`.base`: what every corpus shares (:func:`unigram_entropy`, the split check)
- :mod:`.stdlib`: the ``python-stdlib`` corpus (the interpreter's own source, packed)
- :mod:`.arithmetic`: the chat-arithmetic documents and their exact entropy
- :mod:`.download`: checksummed downloads (tinyshakespeare)

Packing documents into rows is :func:`lmcore.shift.pack_documents` (the core API puts it there,
beside the labels it builds); the corpora here call it.
"""

from .arithmetic import chat_arithmetic, chat_arithmetic_entropy
from .base import corpus_fingerprint, unigram_entropy
from .corpus import (
    CORPORA,
    DocumentCorpus,
    TextCorpus,
    load_corpus,
    python_docs_text,
    random_windows,
    read_text_file,
    train_val_split,
)
from .download import KNOWN_CORPORA, download, download_corpus
from .stdlib import PackedStreamCorpus, load_python_stdlib
from .tokenizers import ByteTokenizer, CharTokenizer, ChatTokenizer

__all__ = [
    "CharTokenizer",
    "ByteTokenizer",
    "ChatTokenizer",
    "load_corpus",
    "CORPORA",
    "TextCorpus",
    "DocumentCorpus",
    "PackedStreamCorpus",
    "load_python_stdlib",
    "python_docs_text",
    "read_text_file",
    "train_val_split",
    "random_windows",
    "unigram_entropy",
    "corpus_fingerprint",
    "chat_arithmetic",
    "chat_arithmetic_entropy",
    "KNOWN_CORPORA",
    "download",
    "download_corpus",
]
