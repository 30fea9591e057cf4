"""An int8 weight matrix as the int8 kernels read it, and its product with a few f32 activation rows.

The kernel reads its own copy of the weights (u8; i8 weights moved to u8 by +128, the zero point with them), rows
padded to the vector width and packed in groups (`_pack_into`), from one huge-page buffer per model (`arena`). Zero
points and scales are per output row, held in double.
"""

from __future__ import annotations

import numpy as np

from .kernel_ir import PACK
from .kernel_jit import MAX_TOKENS, Kernels


class Int8Matrix:
    def __init__(self, weights: np.ndarray, zero_point: np.ndarray | float, scale: np.ndarray, kernels: Kernels,
                 pack: bool = True, storage: np.ndarray | None = None):
        """storage: where the kernel's copy of the weights goes (a slice of an `arena`), else a buffer of its own."""
        if weights.ndim != 2 or weights.dtype not in (np.uint8, np.int8):
            raise ValueError(f"int8 weights must be [rows, columns] u8 or i8, not {weights.dtype}{list(weights.shape)}")
        rows, columns = weights.shape
        self.weights, self.zero_point, self.packed = kernel_layout(weights, zero_point, kernels.pad, pack, storage)
        padded = self.weights.shape[1]
        self.scale = np.ascontiguousarray(np.broadcast_to(np.asarray(scale, dtype=np.float64).reshape(-1), (rows,)))
        self.rows, self.columns, self.padded = rows, columns, padded
        self.kernels = kernels
        # The addresses, once: ndarray.ctypes builds an object per access, and a step makes ~200 calls.
        self._addresses = (self.weights.ctypes.data, self.scale.ctypes.data, self.zero_point.ctypes.data)

    def pieces(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x f32 [T, columns] → its int8 pieces [T, P, padded] and (s1 … sP, Σx̂) per token."""
        tokens, count = x.shape[0], self.kernels.isa.pieces
        pieces = np.empty((tokens, count, self.padded), dtype=np.int8 if self.kernels.isa.vnni else np.int16)
        coef = np.empty((tokens, count + 1), dtype=np.float64)
        self.kernels.split(_address(x), tokens, self.columns, self.padded, _address(pieces), _address(coef))
        return pieces, coef

    def product_into(self, out: np.ndarray, pieces: np.ndarray, coef: np.ndarray, start: int = 0, stop: int | None = None) -> None:
        """out[t, n] for start ≤ n < stop (out f32 [T, rows], rows contiguous)."""
        weights, scale, zero_point = self._addresses
        self.kernels.rows[pieces.shape[0]](
            weights, self.padded, self.padded, _address(pieces), _address(coef), scale, zero_point, _address(out),
            out.strides[0] // 4, start, self.rows if stop is None else stop, self.packed, self.kernels.pad)

    def __matmul__(self, xt: np.ndarray) -> np.ndarray:
        """(self @ x.T).T for x f32 [T, columns], T ≤ MAX_TOKENS: the product, f32 [T, rows]."""
        x = np.ascontiguousarray(xt, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.columns or not 1 <= x.shape[0] <= MAX_TOKENS:
            raise ValueError(f"activations must be f32 [1…{MAX_TOKENS}, {self.columns}], not {list(x.shape)}")
        out = np.empty((x.shape[0], self.rows), dtype=np.float32)
        self.product_into(out, *self.pieces(x))
        return out


def kernel_layout(weights: np.ndarray, zero_point: np.ndarray | float, pad: int, pack: bool = True,
                  storage: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(the kernels' copy of `weights` [rows, padded] u8, the per-row zero point f64 moved with them, how many rows
    are packed): i8 weights moved to u8 by +128, columns padded to a multiple of `pad` with zeros, the rows packed in
    groups (`_pack_into`). storage: where the copy goes (a slice of an `arena`), else a buffer of its own."""
    rows, columns = weights.shape
    zp = np.broadcast_to(np.asarray(zero_point, dtype=np.float64).reshape(-1), (rows,)).copy()
    if weights.dtype == np.int8:  # w + 128 as u8, and the zero point with it: (w + 128) − (zp + 128) = w − zp
        weights = (weights.view(np.uint8) ^ np.uint8(0x80))
        zp += 128.0
    padded = padded_width(columns, pad)
    packed = rows // PACK * PACK if pack else 0
    copy = storage.reshape(rows, padded) if storage is not None else np.empty((rows, padded), dtype=np.uint8)
    copy[:, columns:] = 0  # zero weights against zero pieces: the padding adds nothing
    _pack_into(copy, weights, packed, pad)
    return copy, zp, packed


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def padded_width(columns: int, pad: int) -> int:
    """The inner dimension rounded up to a multiple of `pad` (zero weights against zero pieces fill it)."""
    return -(-columns // pad) * pad


def padded_columns(columns: int, kernels: Kernels) -> int:
    return padded_width(columns, kernels.pad)


def arena(sizes: list[int]) -> list[np.ndarray]:
    """One buffer for all of a model's kernel weights, cut into `sizes` pieces at page boundaries. One allocation
    this large gets transparent huge pages (numpy advises them for large arrays): streamed from 4 KiB pages, the
    TLB misses cost about a tenth of the read rate (measured: 9.7 GB/s from one buffer, 8.7 from separate ones)."""
    starts = np.cumsum([0] + [-(-size // 4096) * 4096 for size in sizes])
    memory = np.empty(int(starts[-1]), dtype=np.uint8)
    return [memory[start : start + size] for start, size in zip(starts[:-1], sizes)]


def _pack_into(out: np.ndarray, weights: np.ndarray, packed: int, vector: int) -> None:
    """weights [rows, columns] into out [rows, padded]: the first `packed` rows (a multiple of PACK) in groups of PACK
    rows interleaved by vector — within a group the first vector of each row, then the second of each… — so a block
    of rows reads one forward stream, which the hardware prefetches, instead of PACK streams a row apart (measured
    8.3 against 7.5 GB/s, one token); the other rows as they are."""
    rows, columns = weights.shape
    padded = out.shape[1]
    if packed:
        if columns == padded:
            source = weights[:packed]
        else:
            source = np.zeros((packed, padded), dtype=np.uint8)
            source[:, :columns] = weights[:packed]
        groups = source.reshape(packed // PACK, PACK, padded // vector, vector)
        out[:packed].reshape(packed // PACK, padded // vector, PACK, vector)[:] = groups.transpose(0, 2, 1, 3)
    out[packed:, :columns] = weights[packed:]
