"""The rows of a few-token projection split between threads: the kernel's call releases the GIL, so a second thread
streams the other half of the weights while the first streams its own.

One `RowSplit` per routed model, shared by its operations: the runner sets its thread count from what the compile got
(INFERENCE_NUM_THREADS). Only groups of projections reading at least MIN_SPLIT_BYTES are split: below that a hand-off
between threads (~20–40 µs) costs more than half the read saves.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from .int8_matvec import Int8Matrix

MIN_SPLIT_BYTES = 1 << 20
_ALIGN = 4  # whole blocks of the one-token kernel per thread


@dataclass
class RowSplit:
    threads: int = 1
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)

    def set_threads(self, threads: int) -> None:
        self.threads = max(1, int(threads))
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        if self.threads > 1:
            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="decider-int8")

    def products(self, work: list[tuple[Int8Matrix, np.ndarray]], pieces: np.ndarray, coef: np.ndarray) -> None:
        """out = matrix @ x for every (matrix, out) of `work`, the activations' pieces given."""
        if self._pool is None or sum(m.weights.nbytes for m, _ in work) < MIN_SPLIT_BYTES:
            for matrix, out in work:
                matrix.product_into(out, pieces, coef)
            return
        shares = [self._share(work, i) for i in range(self.threads)]
        pending = [self._pool.submit(_run, share, pieces, coef) for share in shares[1:]]
        _run(shares[0], pieces, coef)
        for future in pending:
            future.result()

    def _share(self, work: list[tuple[Int8Matrix, np.ndarray]], index: int) -> list[tuple[Int8Matrix, np.ndarray, int, int]]:
        """Thread `index`'s rows of every matrix: equal shares, in whole blocks."""
        share = []
        for matrix, out in work:
            bounds = [min(matrix.rows, -(-matrix.rows * i // self.threads // _ALIGN) * _ALIGN) for i in range(self.threads + 1)]
            bounds[-1] = matrix.rows
            if bounds[index] < bounds[index + 1]:
                share.append((matrix, out, bounds[index], bounds[index + 1]))
        return share


def _run(share: list[tuple[Int8Matrix, np.ndarray, int, int]], pieces: np.ndarray, coef: np.ndarray) -> None:
    for matrix, out, start, stop in share:
        matrix.product_into(out, pieces, coef, start, stop)
