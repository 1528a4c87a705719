"""Progress of the long calls, one implementation for the library and the command line.

A ``progress(done, total)`` callback is what the computations call as their work advances
(branches, grid points, runs, sweep points). :func:`progress_callback` turns the ``progress=``
argument of :func:`attnphase.solve`, :func:`attnphase.transition`, :func:`attnphase.simulate`,
:func:`attnphase.bayes` and :func:`attnphase.sweeps.run_sweep` into such a callback:

- ``"auto"`` (the default): a tqdm bar in a notebook (an IPython kernel), one line on
  stderr rewritten in place when stderr is a terminal, nothing otherwise (a pipe, a log file,
  pytest's capture: output that nobody watches stays clean);
- ``True``: the bar in a notebook, else the line on stderr even where it is not a terminal
  (plain lines there);
- ``False`` or ``None``: nothing;
- a callable: called as it is.

:class:`ProgressLine` is the line the command line prints too
(:func:`attnphase.cli.common.progress_printer`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

#: ``progress(done, total)``: called as the work advances
Progress = Callable[[int, int], None]

#: what the ``progress=`` argument of the long calls accepts (:func:`progress_callback`)
ProgressArg = bool | str | Progress | None


def in_notebook() -> bool:
    """Whether this process is an IPython kernel (a Jupyter notebook), where a widget bar shows."""
    shell = sys.modules.get("IPython")
    if shell is None or "ipykernel" not in sys.modules:
        return False
    try:
        ip = shell.get_ipython()  # type: ignore[attr-defined]
    except Exception:  # (an IPython too old or half imported: no notebook bar)
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # (no isatty, or a closed stream)
        return False


class ProgressLine:
    """``progress(done, total)`` as progress lines on a stream (default: stderr at the time of
    the call): one line rewritten on a terminal, plain lines otherwise. A line is written when
    ``done`` changes, and otherwise at most one every ``heartbeat`` seconds (default 10 on a
    terminal, 30 otherwise), so that work whose count moves rarely (the runs of a batched
    training) still shows that it is alive. The ETA is given once something is done."""

    def __init__(self, label: str, unit: str = "points", heartbeat: float | None = None,
                 stream: TextIO | None = None) -> None:
        self.label, self.unit, self._stream = label, unit, stream
        self.tty = _is_tty(self.stream)
        self.heartbeat = (10.0 if self.tty else 30.0) if heartbeat is None else heartbeat
        self.t0 = time.perf_counter()
        self._done, self._at = -1, -float("inf")

    @property
    def stream(self) -> TextIO:
        return sys.stderr if self._stream is None else self._stream

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if done == self._done and done != total and now - self._at < self.heartbeat:
            return
        self._done, self._at = done, now
        el = now - self.t0
        eta = f", ETA {el / done * (total - done):.0f}s" if 0 < done < total else ""
        msg = f"{self.label}: {done}/{total} {self.unit}, {el:.0f}s elapsed{eta}"
        if self.tty:
            self.stream.write("\r" + msg + ("\n" if done >= total else ""))
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()


def notebook_tqdm() -> Any:
    """The tqdm bar class for a notebook: the widget (``tqdm.notebook``) where ipywidgets is
    installed, else the text bar on stderr (which a notebook shows too), without the warning
    that ``tqdm.auto`` gives for the missing widgets."""
    try:
        import ipywidgets  # noqa: F401
        from tqdm.notebook import tqdm
    except ImportError:
        from tqdm import tqdm  # type: ignore[assignment]
    return tqdm


class ProgressBar:
    """``progress(done, total)`` as a tqdm bar in a notebook (:func:`notebook_tqdm`), closed when
    ``done`` reaches ``total``."""

    def __init__(self, label: str, unit: str = "points") -> None:
        self.label, self.unit = label, unit
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = notebook_tqdm()(total=total, desc=self.label, unit=self.unit.rstrip("s") or self.unit)
        self._bar.total = total
        self._bar.update(done - self._bar.n)
        if done >= total:
            self._bar.close()


def progress_callback(progress: ProgressArg, label: str, unit: str = "points") -> Progress | None:
    """The callback of a ``progress=`` argument (see the module docstring); ``ValueError`` (one
    line) for anything else."""
    if progress is None or progress is False:
        return None
    if callable(progress):
        return progress
    if progress is True or progress == "auto":
        if in_notebook():
            return ProgressBar(label, unit)
        if progress is True or _is_tty(sys.stderr):
            return ProgressLine(label, unit)
        return None
    raise ValueError(f"progress must be 'auto', True, False, None or a callable progress(done, total), "
                     f"got {progress!r}")
