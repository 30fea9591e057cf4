"""An int8 weight matrix as the VNNI kernels read it, and its product with a few f32 activation rows.

The weights come from an OpenVINO Constant as they are (u8, read in place from the model file's memory map when the
row length is already a multiple of the vector width); i8 weights are moved to u8 by +128 with the zero point moved
with them. Zero points and scales are per output row, held in double.
"""

from __future__ import annotations

import numpy as np

from .vnni_ir import PIECES
from .vnni_jit import MAX_TOKENS, Kernels


class Int8Matrix:
    def __init__(self, weights: np.ndarray, zero_point: np.ndarray | float, scale: np.ndarray, kernels: Kernels):
        if weights.ndim != 2 or weights.dtype not in (np.uint8, np.int8):
            raise ValueError(f"int8 weights must be [rows, columns] u8 or i8, not {weights.dtype}{list(weights.shape)}")
        rows, columns = weights.shape
        zp = np.broadcast_to(np.asarray(zero_point, dtype=np.float64).reshape(-1), (rows,)).copy()
        if weights.dtype == np.int8:  # w + 128 as u8, and the zero point with it: (w + 128) − (zp + 128) = w − zp
            weights = (weights.view(np.uint8) ^ np.uint8(0x80))
            zp += 128.0
        padded = -(-columns // kernels.pad) * kernels.pad
        if padded != columns or not weights.flags.c_contiguous:
            full = np.zeros((rows, padded), dtype=np.uint8)
            full[:, :columns] = weights
            weights = full
        self.weights = weights
        self.zero_point = zp
        self.scale = np.ascontiguousarray(np.broadcast_to(np.asarray(scale, dtype=np.float64).reshape(-1), (rows,)))
        self.rows, self.columns, self.padded = rows, columns, padded
        self.kernels = kernels
        # The addresses, once: ndarray.ctypes builds an object per access, and a step makes ~200 calls.
        self._addresses = (self.weights.ctypes.data, self.scale.ctypes.data, self.zero_point.ctypes.data)

    def pieces(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x f32 [T, columns] → its int8 pieces [T, PIECES, padded] and (s1 … s_PIECES, Σx̂) per token."""
        tokens = x.shape[0]
        pieces = np.empty((tokens, PIECES, self.padded), dtype=np.int8)
        coef = np.empty((tokens, PIECES + 1), dtype=np.float64)
        self.kernels.split(_address(x), tokens, self.columns, self.padded, _address(pieces), _address(coef))
        return pieces, coef

    def product_into(self, out: np.ndarray, pieces: np.ndarray, coef: np.ndarray, start: int = 0, stop: int | None = None) -> None:
        """out[t, n] for start ≤ n < stop (out f32 [T, rows], rows contiguous)."""
        weights, scale, zero_point = self._addresses
        self.kernels.rows[pieces.shape[0]](
            weights, self.padded, self.padded, _address(pieces), _address(coef), scale, zero_point, _address(out),
            out.strides[0] // 4, start, self.rows if stop is None else stop)

    def __matmul__(self, xt: np.ndarray) -> np.ndarray:
        """(self @ x.T).T for x f32 [T, columns], T ≤ MAX_TOKENS: the product, f32 [T, rows]."""
        x = np.ascontiguousarray(xt, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.columns or not 1 <= x.shape[0] <= MAX_TOKENS:
            raise ValueError(f"activations must be f32 [1…{MAX_TOKENS}, {self.columns}], not {list(x.shape)}")
        out = np.empty((x.shape[0], self.rows), dtype=np.float32)
        self.product_into(out, *self.pieces(x))
        return out


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]
