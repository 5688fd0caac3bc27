"""Compressed-sparse-row helpers shared by the simulators and the algorithms: rows of variable
length stored as one flat array and a pointer array (`ptr[r] .. ptr[r+1]-1` are row r's
entries), gathered for many rows at once without a Python loop."""

from __future__ import annotations

import numpy as np


def gather(ptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the entries of `rows` in a CSR layout (entries ptr[r] .. ptr[r+1]−1 of each
    row, rows in the order given), and each row's entry count."""
    lens = ptr[rows + 1] - ptr[rows]
    return np.repeat(ptr[rows] - np.cumsum(lens) + lens, lens) + np.arange(lens.sum()), lens
