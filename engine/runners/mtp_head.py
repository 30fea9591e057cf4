"""The MTP draft head at run time: the exported head layer (openvino_mtp_model.xml, engine/graphs/mtp_graph.py) joined to
the main model's own embedding table and lm head, compiled beside the main model.

    input_ids [1, S] (tokens t+1), hidden_states [1, S, H] (the main model's last hidden state at t, after its final
    norm: the runner's `last_hidden` output), position_ids [1, S]  →  logits [1, 1, V] at the last position (the
    head's guess of token t+2) and mtp_hidden [1, 1, H] (what the next draft step is fed as its hidden state)

The embedding and head weights are the main model's graph nodes, copied as new nodes over the same constant data
(a Constant's copy shares its buffer): the export holds no second copy, and the main graph gains no consumer its
compile could see. The head is stateless: each draft step runs the recent window of positions plus the drafts so far
(causal attention over them), which costs the one small layer over a few dozen rows, not the vocabulary again.

On the CPU the head computes in the CPU's fastest float arithmetic (bf16 where the CPU has it: engine/compile/precision.
draft_properties): a draft changes which tokens are proposed, never which are kept or their logprobs. At the 0.8B
geometry (1 thread, AMX) a draft step took 42 → 33 ms with the full vocabulary and 16 → 7 ms trimmed to 32,768 ids.

`vocabulary` (ids) trims the head to those rows: a cheaper draft step over fewer logits. The runner's head is trimmed
to DRAFT_VOCABULARY ids by default, a measured choice (below and BENCHMARKS.md, "Ninth pass"). Drafts never need the
head's padding rows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from ..compile.precision import short_type
from ..core.errors import ModelError
from ..graphs.logits import lm_head_weight
from ..graphs.mtp_graph import EMBEDS, HIDDEN, OUTPUT, POSITIONS

INPUT_IDS = "input_ids"

# The draft head's vocabulary by default: the first 32,768 ids. Qwen's byte-pair ids come in merge order, the most
# frequent first: they are 93.6–95.6 % of the tokens of English prose and Python code (this repository's docs, README
# and engine through the real Qwen3.5 tokenizer). A draft step then reads 32,768 rows of the head instead of 248,320:
# at 0.8B (1 thread, AMX, bf16 head) 7 ms instead of 33, a plain step being 87 ms — with the whole vocabulary drafting
# cost more than it saved at acceptance 0.65 (bench/w_acceptance.py). A token outside them is never drafted: a greedy
# draft misses there, sampled ones stay exact (q is 0 there). DECIDER_DRAFT_VOCABULARY=N: N ids (0: every id).
DRAFT_VOCABULARY = 32768
DRAFT_VOCABULARY_ENV = "DECIDER_DRAFT_VOCABULARY"


def draft_vocabulary(vocab_size: int) -> np.ndarray | None:
    """The ids the runner's draft head keeps (None: all of them): DRAFT_VOCABULARY_ENV's count, else DRAFT_VOCABULARY."""
    raw = os.environ.get(DRAFT_VOCABULARY_ENV, "").strip()
    if raw and not raw.isdigit():
        raise ModelError(f"{DRAFT_VOCABULARY_ENV} must be a whole number of ids (0: every id), not {raw!r}")
    limit = int(raw) if raw else DRAFT_VOCABULARY
    return np.arange(limit) if 0 < limit < vocab_size else None


_ELEMENTWISE = {"Subtract": ops.subtract, "Multiply": ops.multiply, "Add": ops.add}


def _copy(output: ov.Output, done: dict, rows: np.ndarray | None = None, width: int = 0) -> ov.Output:
    """The weight subgraph behind `output` (constants and their decompression: Convert, Subtract, Multiply, Reshape)
    as new nodes, the constants over the same memory — or, given `rows`, each constant with `width` rows (the weight,
    its per-row scales and zero points) cut to those rows, so an int8 head stays int8 once trimmed."""
    node = output.get_node()
    key = node.get_friendly_name()
    if key not in done:
        kind = node.get_type_name()
        inputs = [_copy(node.input_value(i), done, rows, width) for i in range(node.get_input_size())]
        shape = list(node.get_output_partial_shape(0).to_shape()) if kind == "Constant" else []
        if kind == "Constant" and rows is not None and shape and shape[0] == width:
            copy = ops.constant(np.ascontiguousarray(np.take(node.get_data(), rows, axis=0)))
        elif kind == "Constant":
            copy = ov.op.Constant(node.get_tensor_view(), True)  # shares the memory-mapped weights
        elif kind == "Convert":
            copy = ops.convert(inputs[0], node.get_output_element_type(0))
        elif kind in _ELEMENTWISE:
            copy = _ELEMENTWISE[kind](inputs[0], inputs[1])
        elif kind == "Reshape":
            copy = ops.reshape(inputs[0], inputs[1], bool(node.get_attributes()["special_zero"]))
        else:
            raise ModelError(f"the MTP head cannot share weights computed by a {kind} node")
        done[key] = copy
    return done[key].output(output.get_index())


def _is_parameter_path(output: ov.Output, names: set[str]) -> bool:
    node = output.get_node()
    for _ in range(4):
        if node.get_type_name() == "Parameter":
            return bool(set(node.output(0).get_names()) & names)
        if node.get_type_name() != "Convert":
            return False
        node = node.input_value(0).get_node()
    return False


def embedding_table(model: ov.Model) -> ov.Output:
    """The table of the Gather that embeds input ids (the text export's, or the text-embeddings model's)."""
    for node in model.get_ordered_ops():
        if node.get_type_name() == "Gather" and _is_parameter_path(node.input_value(1), {"input_ids", "input"}):
            return node.input_value(0)
    raise ModelError("cannot find the token embedding table in the model")


def join_head(layer: ov.Model, table: ov.Output, head: tuple[ov.Output, bool],
              vocabulary: np.ndarray | None = None) -> ov.Model:
    """The head layer with the embedding in front and the vocabulary projection behind it (see the module doc)."""
    done: dict = {}
    ids = ops.parameter([1, -1], ov.Type.i64, name=INPUT_IDS)
    ids.output(0).get_tensor().set_names({INPUT_IDS})
    embeds = ops.gather(_copy(table, done), ids, ops.constant(np.int64(0)))
    if embeds.get_output_element_type(0) != ov.Type.f32:
        embeds = ops.convert(embeds, ov.Type.f32)
    parameters = {p.get_friendly_name(): p for p in layer.get_parameters()}
    for target in parameters[EMBEDS].output(0).get_target_inputs():
        target.replace_source_output(embeds.output(0))
    out = next(r for r in layer.get_results() if OUTPUT in r.output(0).get_names()).input_value(0)
    last = ops.gather(out, ops.constant(np.int64(-1)), ops.constant(np.int64(1)))  # [1, H]
    weight, transposed = head
    if vocabulary is not None and not transposed:
        raise ModelError("a trimmed draft head needs the lm head stored [vocabulary, hidden]")
    rows = None if vocabulary is None else np.asarray(vocabulary, dtype=np.int64)
    width = int(weight.get_partial_shape()[0].get_length()) if rows is not None else 0
    weight_copy = _copy(weight, {}, rows, width)
    if weight_copy.get_element_type() != ov.Type.f32:  # an f16 head: the CPU plugin keeps its decompression fused
        weight_copy = ops.convert(weight_copy, ov.Type.f32).output(0)
    logits = ops.result(ops.matmul(last, weight_copy, False, transposed))
    logits.output(0).get_tensor().set_names({"logits"})
    hidden = ops.result(last)
    hidden.output(0).get_tensor().set_names({OUTPUT})
    inputs = [ids, parameters[HIDDEN], parameters[POSITIONS]]
    return ov.Model([logits, hidden], inputs, "qwen3_5_mtp_head")


class MtpHead:
    """One compiled draft head and its request; `step` runs it over a window (see the module doc)."""

    def __init__(self, compiled: ov.CompiledModel, vocabulary: np.ndarray | None, vocab_size: int,
                 sources: tuple = (), inference: str = ""):
        self.request = compiled.create_infer_request()
        self.inference = inference  # the arithmetic it drafts in (engine/compile/precision.draft_properties on the CPU)
        # The models whose weight memory the head's constants share (without them alive that memory is unmapped
        # and the compiled head may read freed pages: measured, a crash on the vision-language layout).
        self._sources = sources
        self.vocabulary = vocabulary  # None: logits over the whole head (cut to the tokenizer's ids)
        self.vocab_size = vocab_size

    def step(self, ids: np.ndarray, hidden: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the head's logits for the token after the window's last, as float64 over the real vocabulary — -inf where
        a trimmed head has no row —, the head's hidden state at the last position)."""
        self.request.infer({INPUT_IDS: ids[None].astype(np.int64), HIDDEN: hidden[None].astype(np.float32),
                            POSITIONS: positions[None].astype(np.int64)})
        raw = self.request.get_tensor("logits").data[0].astype(np.float64)
        state = self.request.get_tensor(OUTPUT).data[0].copy()
        if self.vocabulary is None:
            return raw[: self.vocab_size], state
        logits = np.full(self.vocab_size, -np.inf)
        logits[self.vocabulary] = raw
        return logits, state


def load_head(core: ov.Core, layer_ir, main: ov.Model, embeddings: ov.Model | None, device: str,
              properties: Mapping[str, object], vocab_size: int, vocabulary: np.ndarray | None = None,
              head: tuple[ov.Output, bool] | None = None) -> MtpHead:
    """Read the head layer's IR, join it to `main`'s lm head (or `head`, its weight taken before an edit replaced
    the MatMul) and the embedding table (of `embeddings`, the vision-language export's text-embeddings model, else of
    `main`) and compile it."""
    try:
        layer = core.read_model(layer_ir)
    except RuntimeError as exc:
        raise ModelError(f"{layer_ir}: OpenVINO cannot read it ({str(exc).strip().splitlines()[0]})") from None
    model = join_head(layer, embedding_table(embeddings if embeddings is not None else main), head or lm_head_weight(main),
                      vocabulary)
    compiled = core.compile_model(model, device, dict(properties))
    return MtpHead(compiled, vocabulary, vocab_size, (main, embeddings), _inference(compiled))


def _inference(compiled: ov.CompiledModel) -> str:
    """The arithmetic the head's compile reports ("" where the plugin has no such property)."""
    try:
        return short_type(compiled.get_property("INFERENCE_PRECISION_HINT"))
    except RuntimeError:
        return ""
