"""The attnphase cache folder on disk, for what is generated at first use and kept between
processes (the Sobol samples of the theory, its compiled kernels, the normalised sources of the
numerical revision). Nothing is read or written at import."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_root() -> Path | None:
    """The attnphase cache folder: ``$ATTNPHASE_CACHE_DIR`` if set (empty: no cache), else
    ``$XDG_CACHE_HOME/attnphase`` or ``~/.cache/attnphase`` (the Sobol samples here, the compiled
    kernels of :mod:`attnphase.theory.native`, the normalised sources of :mod:`attnphase._revision`)."""
    root = os.environ.get("ATTNPHASE_CACHE_DIR")
    if root is None:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "attnphase")
    return Path(root) if root else None


def store_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (concurrent processes write the same bytes); give up
    silently where the folder cannot be written."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
