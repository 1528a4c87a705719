"""Data for the histogram (counting) task.

A sequence is ``L`` tokens drawn uniformly from an alphabet of ``T`` symbols; the label
at position ``i`` is how often the token at ``i`` occurs in the whole sequence, so the
classes are ``0..L`` (``0`` never occurs but is kept so that the read-out has ``L + 1``
outputs, as in the task statement of the counting task). Sequences are de-duplicated before the
train/validation split, so no validation sequence is seen in training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DataConfig", "HistogramData", "count_labels", "make_dataset"]


@dataclass(frozen=True)
class DataConfig:
    """Sizes of the counting task.

    Attributes
    ----------
    L: sequence length (number of classes is ``L + 1``).
    T: alphabet size.
    n_train, n_val: numbers of distinct training / validation sequences.
    """

    L: int = 10
    T: int = 15
    n_train: int = 20_000
    n_val: int = 2_000

    def __post_init__(self) -> None:
        if self.L < 2:
            raise ValueError(f"L must be >= 2, got {self.L}")
        if self.T < 2:
            raise ValueError(f"T must be >= 2, got {self.T}")
        if self.n_train < 1 or self.n_val < 1:
            raise ValueError(
                f"train and validation sizes must be >= 1, got {self.n_train} and {self.n_val}"
            )
        n_distinct = float(self.T) ** self.L
        if self.n_train + self.n_val > 0.5 * n_distinct:
            raise ValueError(
                f"n_train + n_val = {self.n_train + self.n_val} is more than half of the "
                f"{n_distinct:.0f} distinct sequences (T**L); use fewer samples"
            )


@dataclass(frozen=True)
class HistogramData:
    """Integer token arrays ``(n, L)`` and their count labels ``(n, L)``."""

    config: DataConfig
    seed: int
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray


def count_labels(tokens: np.ndarray) -> np.ndarray:
    """Label of each position: the number of occurrences of its token in its sequence.

    ``tokens`` is an integer array ``(n, L)`` (or ``(L,)``); the result has the same shape.
    """
    t = np.asarray(tokens)
    if t.ndim not in (1, 2):
        raise ValueError(f"tokens must be 1- or 2-dimensional, got shape {t.shape}")
    squeeze = t.ndim == 1
    if squeeze:
        t = t[None, :]
    counts = (t[:, :, None] == t[:, None, :]).sum(axis=-1).astype(np.int64)
    return counts[0] if squeeze else counts


def make_dataset(config: DataConfig, seed: int) -> HistogramData:
    """Draw ``n_train + n_val`` distinct uniform sequences with ``numpy`` seed ``seed``.

    Duplicates are dropped (keeping first occurrence in draw order) and refilled by
    further draws, so the result depends on ``seed`` only.
    """
    rng = np.random.default_rng(seed)
    need = config.n_train + config.n_val
    seqs = np.empty((0, config.L), dtype=np.int64)
    while seqs.shape[0] < need:
        extra = rng.integers(0, config.T, size=(need - seqs.shape[0], config.L), dtype=np.int64)
        allseqs = np.concatenate([seqs, extra], axis=0)
        _, first = np.unique(allseqs, axis=0, return_index=True)
        seqs = allseqs[np.sort(first)]
    seqs = seqs[:need]
    labels = count_labels(seqs)
    return HistogramData(
        config=config,
        seed=seed,
        x_train=seqs[: config.n_train],
        y_train=labels[: config.n_train],
        x_val=seqs[config.n_train :],
        y_val=labels[config.n_train :],
    )
