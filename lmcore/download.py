"""An optional download helper for small public corpora: checksummed, cached, clear offline.

Nothing in the course needs the network (the Python docs corpus ships with CPython); this is
for learners who are online and want, e.g., Tiny Shakespeare. A file is fetched once into the
user's cache directory (``$LMCORE_CACHE``, else ``$XDG_CACHE_HOME/lmcore``, else
``~/.cache/lmcore``), its SHA-256 checked before it is kept, and read from there afterwards.
"""
from __future__ import annotations

import hashlib
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["KNOWN_CORPORA", "cache_dir", "download", "download_corpus"]

# name -> (url, sha256, filename)
KNOWN_CORPORA = {
    "tinyshakespeare": (
        "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
        "tinyshakespeare.txt"),
}


def cache_dir() -> Path:
    """Where downloads are kept: $LMCORE_CACHE, $XDG_CACHE_HOME/lmcore or ~/.cache/lmcore."""
    if os.environ.get("LMCORE_CACHE"):
        return Path(os.environ["LMCORE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "lmcore"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(url: str, sha256: str, filename: str, *, cache: str | Path | None = None,
             timeout: float = 30.0) -> Path:
    """Return the path of ``filename`` in the cache, fetching ``url`` first if needed.

    The file is written to a temporary name, its SHA-256 compared with ``sha256`` and only then
    renamed into place, so the cache never holds a partial or corrupted file. Raises
    ``ConnectionError`` when the server cannot be reached (offline) and ``ValueError`` on a
    checksum mismatch.
    """
    if not isinstance(sha256, str) or len(sha256) != 64:
        raise ValueError(f"sha256 must be the 64-character hex digest of the file; got {sha256!r}.")
    folder = Path(cache) if cache is not None else cache_dir()
    target = folder / filename
    if target.exists() and _sha256(target) == sha256.lower():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as out:
            while chunk := resp.read(1 << 20):
                out.write(chunk)
    except (urllib.error.URLError, socket.timeout, ConnectionError, OSError) as err:
        tmp.unlink(missing_ok=True)
        raise ConnectionError(f"could not download {url} ({err}). Are you offline? Every "
                              "course notebook works without the network: use the "
                              "'python-docs' or 'chat-arithmetic' corpus, or a local file.") from err
    got = _sha256(tmp)
    if got != sha256.lower():
        tmp.unlink(missing_ok=True)
        raise ValueError(f"checksum mismatch for {url}: expected sha256 {sha256}, got {got}. "
                         "The file changed upstream or the download was corrupted; nothing "
                         "was cached.")
    os.replace(tmp, target)
    return target


def download_corpus(name: str, *, cache: str | Path | None = None, timeout: float = 30.0) -> Path:
    """Fetch one of :data:`KNOWN_CORPORA` by name (cached after the first call)."""
    if name not in KNOWN_CORPORA:
        raise ValueError(f"unknown corpus {name!r}; known: {sorted(KNOWN_CORPORA)}. For any "
                         "other file use download(url, sha256, filename).")
    url, sha, filename = KNOWN_CORPORA[name]
    return download(url, sha, filename, cache=cache, timeout=timeout)
