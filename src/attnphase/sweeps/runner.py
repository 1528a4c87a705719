"""Running a sweep: skip stored points, compute the rest, commit each as it finishes.

Each point is stored with the numerical revision of its kind's code
(:meth:`attnphase.sweeps.kinds.PointKind.revision`), taken where the point is computed (a Dask
worker may run other code than the client). A stored point of another revision than the present
one is *stale*: it is served as it is with a one-line warning, or recomputed with
``recompute_stale``.

Backends: in-process (``workers=1``), a local process pool (default: every core), or a
Dask distributed cluster (``scheduler="tcp://HOST:PORT"``). The pool starts its processes with
multiprocessing's ``spawn``, which imports the main script again in each of them: a sweep run
from a script's top level without ``if __name__ == "__main__":`` would run again in every worker,
so there it runs in-process, with a warning (:func:`unguarded_main_script`). Workers only compute
(:func:`execute_point`, which never raises: a failing point returns its error); the parent
gathers results as they complete and commits each one to the store in its own
transaction, so killing the sweep at any moment loses only the points in flight.
"""

from __future__ import annotations

import ast
import inspect
import logging
import multiprocessing
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from attnphase._extras import require
from attnphase._progress import ProgressLine, in_notebook, notebook_tqdm
from attnphase._version import __version__
from attnphase.sweeps.canonical import canonical_json, to_json
from attnphase.sweeps.grid import Point, SweepSpec, points_of
from attnphase.sweeps.kinds import get_kind
from attnphase.sweeps.store import PointRecord, ResultStore, open_store

logger = logging.getLogger(__name__)

PROGRESS_MODES = ("auto", "bar", "log", "none")


@dataclass(frozen=True)
class SweepReport:
    """What a call of :func:`run_sweep` did.

    ``total`` points in the sweep, ``skipped`` of them already stored, ``computed`` now (``ok``
    and ``errors``); ``failed``: the points of the sweep whose stored row is an error after the
    run (those computed now and, with ``retry_errors=False``, the stored ones kept);
    ``success``: none is (a sweep whose points all failed is not a success); ``message``: one
    line on all of it and, where points failed, the first error and how to retry.
    """

    total: int
    skipped: int
    computed: int
    ok: int
    errors: int
    elapsed_s: float
    backend: str
    keys: tuple[str, ...] = field(repr=False)
    #: points of the sweep stored by another numerical revision (served as they are, or
    #: recomputed with ``recompute_stale`` / ``recompute``)
    stale: int = 0
    failed: int = 0
    success: bool = True
    message: str = ""
    #: the last line of the first error of a point computed now (``None``: none failed)
    first_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "skipped": self.skipped, "computed": self.computed,
                "ok": self.ok, "errors": self.errors, "stale": self.stale,
                "elapsed_s": self.elapsed_s, "backend": self.backend, "failed": self.failed,
                "success": self.success, "message": self.message, "first_error": self.first_error}


def _revision(kind: str) -> str | None:
    """The numerical revision of ``kind`` here (``None`` if it cannot be had: the row then
    counts as stale)."""
    try:
        return get_kind(kind).revision()
    except Exception:  # (an unknown kind or unreadable sources: the point itself reports it)
        return None


def execute_point(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """Compute one point; never raises. Returns the fields of a :class:`PointRecord`, with the
    numerical revision of the code that ran here."""
    started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    t0 = time.perf_counter()
    out: dict[str, Any] = {"version": __version__, "host": socket.gethostname(),
                           "started_at": started, "revision": _revision(kind)}
    try:
        result, diagnostics = get_kind(kind).compute(params)
        out.update(status="ok", result=to_json(result), diagnostics=to_json(diagnostics),
                   error=None)
    except Exception as exc:  # a failing point is data, not a crash of the sweep
        tb = traceback.format_exception_only(type(exc), exc)
        out.update(status="error", result=None, diagnostics=None,
                   error="".join(tb).strip()[:2000])
    out["elapsed_s"] = time.perf_counter() - t0
    return out


def _outcome(future: Any, kind: str) -> dict[str, Any]:
    """The result of a finished future; a backend failure (a worker process that died,
    Dask's ``KilledWorker``, ...) becomes an error outcome for that point."""
    try:
        return future.result()
    except Exception as exc:
        msg = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return {"version": __version__, "host": None, "revision": _revision(kind),
                "started_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                "status": "error", "result": None, "diagnostics": None,
                "error": f"backend failure (worker died or was lost): {msg}"[:2000],
                "elapsed_s": 0.0}


def _record(point: Point, out: dict[str, Any]) -> PointRecord:
    return PointRecord(
        key=point.key, kind=point.kind, params=canonical_json(dict(point.params)),
        status=out["status"], result=out["result"], diagnostics=out["diagnostics"],
        error=out["error"], seed=point.seed, version=out["version"], host=out["host"],
        started_at=out["started_at"], elapsed_s=float(out["elapsed_s"]),
        revision=out.get("revision"),
    )


# ---------------------------------------------------------------------------- progress
ProgressMode = str | bool | Callable[[int, int], None] | None


def check_progress(mode: ProgressMode) -> None:
    """``ValueError`` (one line) unless ``mode`` is a ``progress=`` of :func:`run_sweep`."""
    if not (mode is None or isinstance(mode, bool) or callable(mode) or mode in PROGRESS_MODES):
        raise ValueError(f"progress must be one of {', '.join(PROGRESS_MODES)}, True, False or a callable "
                         f"progress(done, total), got {mode!r}")


class _Progress:
    """The progress of a sweep (``progress=`` of :func:`run_sweep`): a tqdm bar in a notebook or
    on a terminal, otherwise a log line every ~10 s / 10 % (shown where logging is set up, as by
    the command line); a callable ``progress(done, total)`` is called instead."""

    def __init__(self, total: int, mode: ProgressMode, stream: TextIO | None, label: str) -> None:
        check_progress(mode)
        self._call = mode if callable(mode) else None
        notebook = in_notebook()
        tty = getattr(sys.stderr if stream is None else stream, "isatty", lambda: False)()
        if mode is None or mode is False or self._call is not None:
            mode = "none"
        elif mode == "auto":
            mode = "bar" if notebook or tty else "log"
        elif mode is True:  # (asked for: a line on stderr even where it is not a terminal)
            mode = "bar" if notebook or tty else "line"
        assert isinstance(mode, str)
        self.mode, self.total, self.label = mode, total, label
        self.done = self.errors = 0
        self.t0 = self._last = time.monotonic()
        self._bar: Any = None
        self._line = ProgressLine(label, "points", stream=stream) if mode == "line" else None
        if self._call is not None:
            self._call(0, total)
        if mode == "bar" and total > 0:
            if notebook and stream is None:
                self._bar = notebook_tqdm()(total=total, desc=label, unit="pt")
            else:
                from tqdm import tqdm

                self._bar = tqdm(total=total, file=stream, desc=label, unit="pt", dynamic_ncols=True)

    def update(self, status: str) -> None:
        self.done += 1
        self.errors += status != "ok"
        if self._call is not None:
            self._call(self.done, self.total)
        elif self._line is not None:
            self._line(self.done, self.total)
        elif self._bar is not None:
            self._bar.update(1)
            if self.errors:
                self._bar.set_postfix(errors=self.errors)
        elif self.mode == "log":
            now = time.monotonic()
            step = max(1, self.total // 10)
            if now - self._last >= 10.0 or self.done % step == 0 or self.done == self.total:
                self._last = now
                el = now - self.t0
                eta = el / self.done * (self.total - self.done)
                logger.info("%s: %d/%d points done (%d errors), %.1fs elapsed, eta %.0fs",
                            self.label, self.done, self.total, self.errors, el, eta)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


# ---------------------------------------------------------------------------- backends
def _serial(points: Sequence[Point]) -> Iterator[tuple[Point, dict[str, Any]]]:
    for p in points:
        yield p, execute_point(p.kind, dict(p.params))


def _worker_init() -> None:
    """One thread per pool process for torch / numba / BLAS (unless the user set them):
    the parallelism is across processes."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "NUMBA_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def _pool(points: Sequence[Point], workers: int) -> Iterator[tuple[Point, dict[str, Any]]]:
    ctx = multiprocessing.get_context("spawn")  # no fork of a parent holding threads / torch
    ex = ProcessPoolExecutor(max_workers=min(workers, len(points)), mp_context=ctx,
                             initializer=_worker_init)
    try:
        futs = {ex.submit(execute_point, p.kind, dict(p.params)): p for p in points}
        for f in as_completed(futs):
            yield futs[f], _outcome(f, futs[f].kind)
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def unguarded_main_script() -> str | None:
    """The main script's path where this call comes from its top-level code outside an
    ``if __name__ == "__main__":`` block, else ``None``.

    A process pool started with ``spawn`` imports the main script again in every process
    (``multiprocessing``'s "safe importing of the main module"); code at its top level that is
    not under the guard, such as a call of :func:`run_sweep`, then runs again there, and the
    pool's processes fail. Where the main module is no file (an interactive interpreter, a
    notebook), where the call does not come from its top-level code (another thread) or where
    the script cannot be read, ``None``: the pool is safe or its failure is not foreseeable."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not path:
        return None
    line = None
    frame = inspect.currentframe()
    while frame is not None:  # (the outermost frame of the main module's top-level code)
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__":
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_main_guard(node.test) and node.lineno <= line <= (node.end_lineno or line):
            return None
    return str(path)


def check_scheduler_address(address: str) -> None:
    """``ValueError`` unless ``address`` looks like ``tcp://HOST:PORT``."""
    proto, sep, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    if not sep or proto not in ("tcp", "tls", "inproc", "ws", "wss") or not host \
            or not port.isdigit():
        raise ValueError(f"scheduler address must look like tcp://HOST:PORT, got {address!r}")


def connect_dask(address: str, timeout_s: float = 5.0) -> Any:
    """A ``distributed.Client`` connected to ``address``; ``ValueError`` if unreachable."""
    check_scheduler_address(address)
    require("distributed", "a sweep on a Dask scheduler")
    from distributed import Client

    try:
        return Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"cannot reach Dask scheduler at {address} "
                         f"within {timeout_s:g}s ({msg})") from None


def _dask(points: Sequence[Point], client: Any) -> Iterator[tuple[Point, dict[str, Any]]]:
    from distributed import as_completed as dask_as_completed

    futs = {}
    for p in points:
        f = client.submit(execute_point, p.kind, dict(p.params), pure=False)
        futs[f.key] = (p, f)
    try:
        for f in dask_as_completed([f for _, f in futs.values()], loop=client.loop):
            p, _ = futs[f.key]
            yield p, _outcome(f, p.kind)
    finally:
        client.cancel([f for _, f in futs.values()])


# ---------------------------------------------------------------------------- stale points
def _stale_keys(st: ResultStore, points: Sequence[Point]) -> set[str]:
    """Keys of the points of ``points`` stored by another numerical revision of their kind."""
    keys = {p.key for p in points}
    out: set[str] = set()
    for kind in sorted({p.kind for p in points}):
        out |= st.stale_keys(kind, get_kind(kind).revision()) & keys
    return out


def _stale_warning(points: Sequence[Point], stale: set[str]) -> str:
    """The one-line warning of a sweep that serves stale points."""
    per_kind: dict[str, int] = {}
    for p in {p.key: p for p in points if p.key in stale}.values():
        per_kind[p.kind] = per_kind.get(p.kind, 0) + 1
    detail = ", ".join(f"{k} {n}" for k, n in sorted(per_kind.items()))
    n = len(stale)
    return (f"using {n} stored point{'s' if n != 1 else ''} computed by another numerical "
            f"revision of the code ({detail}); --recompute-stale recomputes "
            f"{'them' if n != 1 else 'it'}")


# ---------------------------------------------------------------------------- run_sweep
def default_workers() -> int:
    """Every core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def run_sweep(
    sweep: SweepSpec | Sequence[SweepSpec] | Sequence[Point],
    store: str | Path | ResultStore,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    retry_errors: bool = True,
    recompute: bool = False,
    recompute_stale: bool = False,
    progress: ProgressMode = "auto",
    stream: TextIO | None = None,
    connect_timeout_s: float = 5.0,
    on_result: Callable[[Point, PointRecord], None] | None = None,
) -> SweepReport:
    """Compute every point of ``sweep`` that is not in ``store`` yet and commit each result.

    ``workers``: processes of the local pool (default every core; ``1`` runs in-process; from a
    script's top level without ``if __name__ == "__main__":`` in-process as well, with a warning,
    :func:`unguarded_main_script`); ``scheduler``: a Dask scheduler address (then ``workers`` is
    ignored).

    ``retry_errors`` (default ``True``): recompute the points stored with status ``error``. A
    stored error holds no result, and what made the point fail (a worker process that died or
    ran out of memory, a pool that could not start, a bug fixed since) often does not last,
    while a failure that does costs only its own time again; ``False`` keeps them, and the
    report counts them (``failed``) and says how to retry. ``recompute``: recompute every point
    of the sweep, each stored result replaced only once its new one is committed;
    ``recompute_stale``: recompute (and replace the same way) only the stored points of another
    numerical revision than the present code's (:meth:`PointKind.revision`). Without either,
    stale points are served as they are and one warning line (logger ``attnphase.sweeps.runner``)
    counts them.

    ``progress``: ``"auto"`` (a bar in a notebook or on a terminal, else log lines, shown where
    logging is set up), ``"bar"``, ``"log"``, ``"none"`` / ``False``, ``True`` (a bar, or lines on
    stderr where it is not a terminal), or a callable ``progress(done, total)``.

    Returns a :class:`SweepReport`; ``success`` is false where a point of the sweep is stored as
    an error (every point failing among them), and ``message`` says so in one line.
    """
    t0 = time.perf_counter()
    if isinstance(sweep, SweepSpec):
        points = sweep.points()
    elif sweep and all(isinstance(s, SweepSpec) for s in sweep):
        points = points_of(sweep)  # type: ignore[arg-type]
    else:
        points = list(sweep)  # type: ignore[arg-type]
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    check_progress(progress)
    client = connect_dask(scheduler, connect_timeout_s) if scheduler else None
    try:
        with open_store(store) as st:
            keys = [p.key for p in points]
            if retry_errors:
                n = st.delete_errors(keys)
                if n:
                    logger.info("retrying %d points stored with errors", n)
            stale = _stale_keys(st, points)
            stored = st.keys()
            if recompute:
                todo = list(points)
            elif recompute_stale:
                todo = [p for p in points if p.key not in stored or p.key in stale]
            else:
                todo = [p for p in points if p.key not in stored]
                if stale:
                    logger.warning("%s", _stale_warning(points, stale))
            nw = default_workers() if workers is None else workers
            script = None if client is not None or nw == 1 or len(todo) <= 1 else unguarded_main_script()
            if client is not None:
                backend = f"dask {scheduler}"
                it = _dask(todo, client)
            elif nw == 1 or len(todo) <= 1 or script is not None:
                backend = "serial"
                it = _serial(todo)
                if script is not None:
                    logger.warning("%s runs the sweep at its top level, outside `if __name__ == \"__main__\":`, where "
                                   "each of the pool's processes would run the script again; the %d points run in "
                                   "this process (put the sweep under that guard to use %d processes)",
                                   script, len(todo), nw)
            else:
                backend = f"pool ({min(nw, len(todo))} processes)"
                it = _pool(todo, nw)
            logger.info("sweep: %d points, %d stored, %d to compute (%s)",
                        len(points), len(points) - len(todo), len(todo), backend)
            prog = _Progress(len(todo), progress, stream, "sweep")
            ok = errors = 0
            first_error = None
            try:
                for p, out in it:
                    rec = _record(p, out)
                    st.add(rec, replace=recompute or p.key in stale)
                    if rec.status == "ok":
                        ok += 1
                    else:
                        errors += 1
                        why = ((rec.error or "").strip().splitlines() or ["no message"])[-1]
                        first_error = first_error or why
                        logger.info("point %s failed: %s", p.key[:12], why)  # (the report says it once)
                    prog.update(rec.status)
                    if on_result is not None:
                        on_result(p, rec)
            finally:
                prog.close()
                close = getattr(it, "close", None)
                if close is not None:
                    close()
            failed = st.keys(status="error") & set(keys)
    finally:
        if client is not None:
            client.close()
    elapsed = time.perf_counter() - t0
    kept = len(failed) - errors
    msg = (f"{len(points)} points: {len(points) - len(todo)} already stored, {ok + errors} computed "
           f"({ok} ok, {errors} errors) in {elapsed:.1f} s ({backend})")
    if errors and not ok:
        msg = f"every computed point failed ({errors} of {len(points)}; first error: {first_error}); " + msg
    elif errors:
        msg += f"; first error: {first_error}"
    if kept > 0:
        msg += (f"; {kept} stored point{'s' if kept != 1 else ''} of the sweep kept as errors "
                "(retry_errors=True, the default, or sweep run without --keep-errors recomputes them)")
    if stale:
        msg += f"; {len(stale)} stored points of another numerical revision (recompute_stale=True recomputes them)"
    return SweepReport(
        total=len(points), skipped=len(points) - len(todo), computed=ok + errors, ok=ok,
        errors=errors, elapsed_s=elapsed, backend=backend,
        keys=tuple(keys), stale=len(stale), failed=len(failed), success=not failed, message=msg,
        first_error=first_error,
    )
