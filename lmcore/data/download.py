"""An optional download helper for small public corpora: checksummed, cached, clear offline.

Nothing in the course needs the network (the Python docs corpus ships with CPython); this is
for learners who are online and want, e.g., Tiny Shakespeare. A file is fetched once into the
user's cache directory (``$LMCORE_CACHE``, else ``$XDG_CACHE_HOME/lmcore``, else
``~/.cache/lmcore``), its SHA-256 checked before it is kept, and read from there afterwards.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from .._validate import require_real

__all__ = ["KNOWN_CORPORA", "cache_dir", "download", "download_corpus"]

_SCHEMES = ("https", "http", "file", "ftp")

# name -> (url, sha256, filename)
KNOWN_CORPORA = {
    "tinyshakespeare": (
        "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
        "tinyshakespeare.txt",
    ),
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


def download(
    url: str, sha256: str, filename: str, *, cache: str | Path | None = None, timeout: float = 30.0
) -> Path:
    """Return the path of ``filename`` in the cache, fetching ``url`` first if needed.

    The file is written to a temporary name, its SHA-256 compared with ``sha256`` and only then
    renamed into place, so the cache never holds a partial or corrupted file. Raises
    ``ConnectionError`` when the server cannot be reached (offline) and ``ValueError`` on a
    checksum mismatch.
    """
    _check_download_args(url, sha256, filename, cache, timeout)
    folder = Path(cache) if cache is not None else cache_dir()
    target = folder / filename
    if target.exists() and _sha256(target) == sha256.lower():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    try:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as out:
                while chunk := resp.read(1 << 20):
                    out.write(chunk)
        except urllib.error.HTTPError as err:
            raise ConnectionError(
                f"could not download {url} (the server answered HTTP {err.code} {err.reason}). Check the URL."
            ) from err
        except (
            TimeoutError,
            urllib.error.URLError,
            http.client.HTTPException,
            ConnectionError,
            OSError,
        ) as err:
            raise ConnectionError(
                f"could not download {url} ({type(err).__name__}: {err}). Are "
                "you offline? Every "
                "course notebook works without the network: use the "
                "'python-docs' or 'chat-arithmetic' corpus, or a local file."
            ) from err
        got = _sha256(tmp)
        if got != sha256.lower():
            raise ValueError(
                f"checksum mismatch for {url}: expected sha256 {sha256}, got {got}. "
                "The file changed upstream or the download was corrupted; nothing "
                "was cached."
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)  # never a partial file, whatever happened
    return target


def _check_download_args(url, sha256, filename, cache, timeout) -> None:
    if not isinstance(url, str):
        raise TypeError(f"url must be a str; got {type(url).__name__}.")
    if urllib.parse.urlsplit(url).scheme.lower() not in _SCHEMES or "://" not in url:
        raise ValueError(
            f"url must start with one of {', '.join(s + '://' for s in _SCHEMES)}; got {url!r:.80}."
        )
    if not isinstance(sha256, str):
        raise TypeError(
            f"sha256 must be the 64-character hex digest of the file (a str); got {type(sha256).__name__}."
        )
    if len(sha256) != 64 or any(c not in "0123456789abcdefABCDEF" for c in sha256):
        raise ValueError(f"sha256 must be the 64-character hex digest of the file; got {sha256!r}.")
    if not isinstance(filename, (str, os.PathLike)):
        raise TypeError(f"filename must be a str; got {type(filename).__name__}.")
    name = os.fspath(filename)
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "\0" in name
        or Path(name).name != name
        or "\\" in name
        or "/" in name
    ):
        raise ValueError(
            f"filename must be a plain file name (no folders, not '.' or '..'), kept "
            f"inside the cache folder; got {name!r}."
        )
    if cache is not None and not isinstance(cache, (str, os.PathLike)):
        raise TypeError(f"cache must be None or a folder path; got {type(cache).__name__}.")
    require_real(
        "timeout", timeout, min=0, min_inclusive=False, hint="It is a positive, finite number of seconds."
    )


def download_corpus(name: str, *, cache: str | Path | None = None, timeout: float = 30.0) -> Path:
    """Fetch one of :data:`KNOWN_CORPORA` by name (cached after the first call)."""
    if not isinstance(name, str):
        raise TypeError(
            f"corpus name must be a str, one of {sorted(KNOWN_CORPORA)}; got {type(name).__name__}."
        )
    if name not in KNOWN_CORPORA:
        raise ValueError(
            f"unknown corpus {name!r}; known: {sorted(KNOWN_CORPORA)}. For any "
            "other file use download(url, sha256, filename)."
        )
    url, sha, filename = KNOWN_CORPORA[name]
    return download(url, sha, filename, cache=cache, timeout=timeout)
