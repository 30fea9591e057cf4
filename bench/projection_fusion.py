"""An experiment kept for the benchmarks: fuse the weight projections that read the same activations.

`fuse_parallel_projections` concatenates the weights of MatMuls that share an input into one MatMul followed by a
split. It keeps the logits bit-identical (tests/test_graph_fusion.py) but its decode step measured 0.96× (0.82–1.30)
of the exact compile's (bench/w_profile.py, BENCHMARKS.md "Where a decode step goes"), inside the run's spread, so
the engine does not run it: it lives next to the benchmark that measures it and the shipped engine holds only what runs.
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops

_WEIGHT_OPS = {"Constant", "Convert", "Subtract", "Multiply"}
# Narrow projections (the DeltaNet's 16-row a/b, a MoE layer's one-row shared-expert gate) run on other
# kernels for some prompt lengths, whose sums are ordered differently: fused into a wide one they moved
# outputs by ~1e-4 (a 64-token chunk at the 0.8B geometry). Projections this wide keep bit-identical sums.
MIN_FUSED_ROWS = 64


def _weight_chain(source: ov.Output) -> list[ov.Node] | None:
    """The nodes of a weight input (a Constant, possibly decompressed by Convert/Subtract/Multiply with
    per-row zero points and scales), in topological order; None if it is anything else."""
    nodes: list[ov.Node] = []
    seen: set[str] = set()

    def walk(output: ov.Output) -> bool:
        node = output.get_node()
        if node.get_type_name() not in _WEIGHT_OPS:
            return False
        if node.get_friendly_name() in seen:
            return True
        for i in range(node.get_input_size()):
            if not walk(node.input_value(i)):
                return False
        seen.add(node.get_friendly_name())
        nodes.append(node)
        return True

    return nodes if walk(source) else None


def _signature(chain: list[ov.Node]) -> tuple:
    """What must agree for two weight chains to be concatenated row-wise."""
    sig = []
    for node in chain:
        shape = node.get_output_partial_shape(0)
        if not shape.is_static or len(shape) != 2:
            return ()
        sig.append((node.get_type_name(), str(node.get_output_element_type(0)), shape[1].get_length() if len(shape) == 2 else None))
    return tuple(sig)


def _concat_chain(chains: list[list[ov.Node]]) -> ov.Output:
    """Rebuild the common chain once, every Constant replaced by the row-wise concatenation of the
    group's constants (weights, zero points, scales keep their element types: the decompression is the
    same arithmetic per row)."""
    built: dict[str, ov.Output] = {}
    first = chains[0]
    for position, node in enumerate(first):
        kind = node.get_type_name()
        if kind == "Constant":
            data = np.concatenate([chain[position].get_data() for chain in chains], axis=0)
            out = ops.constant(data, dtype=node.get_output_element_type(0)).output(0)
        else:
            inputs = [built[node.input_value(i).get_node().get_friendly_name()] for i in range(node.get_input_size())]
            if kind == "Convert":
                out = ops.convert(inputs[0], node.get_output_element_type(0)).output(0)
            elif kind == "Subtract":
                out = ops.subtract(inputs[0], inputs[1]).output(0)
            else:
                out = ops.multiply(inputs[0], inputs[1]).output(0)
        built[node.get_friendly_name()] = out
    return built[first[-1].get_friendly_name()]


def fuse_parallel_projections(model: ov.Model) -> int:
    """Concatenate the weights of MatMuls that read the same activations (gate+up of an MLP; q, k, v;
    the DeltaNet input projections) into one MatMul followed by a split; return how many groups fused.

    A decode step is one token: every projection is a matrix-vector product whose cost is reading its
    weights, plus a fixed price per node (a kernel call and a join of the threads). Fewer, wider nodes
    keep the bytes and the arithmetic of every output element unchanged and drop the per-node price.
    """
    groups: dict[tuple, list[tuple[ov.Node, list[ov.Node]]]] = {}
    for node in model.get_ordered_ops():
        if node.get_type_name() != "MatMul":
            continue
        attrs = node.get_attributes()
        if attrs.get("transpose_a") or not attrs.get("transpose_b"):
            continue
        chain = _weight_chain(node.input_value(1))
        if not chain:
            continue
        signature = _signature(chain)
        if not signature or chain[-1].get_output_partial_shape(0)[0].get_length() < MIN_FUSED_ROWS:
            continue
        activations = node.input_value(0)
        key = (activations.get_node().get_friendly_name(), activations.get_index(), signature)
        groups.setdefault(key, []).append((node, chain))
    fused = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        rows = [chain[-1].get_output_partial_shape(0)[0].get_length() for _, chain in members]
        weights = _concat_chain([chain for _, chain in members])
        first = members[0][0]
        matmul = ops.matmul(first.input_value(0), weights, transpose_a=False, transpose_b=True)
        matmul.set_friendly_name(first.get_friendly_name() + "/fused")
        parts = ops.variadic_split(matmul, ops.constant(np.array(-1, dtype=np.int64)), ops.constant(np.array(rows, dtype=np.int64)))
        for index, (node, _) in enumerate(members):
            for target in list(node.output(0).get_target_inputs()):
                target.replace_source_output(parts.output(index))
        fused += 1
    if fused:
        model.validate_nodes_and_infer_types()
    return fused
