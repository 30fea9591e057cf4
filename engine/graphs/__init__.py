"""Edits to the exported OpenVINO graph before it is compiled: logits for the last positions only (logits.py), the
static-shape variant NPUs need (static.py), the one-token DeltaNet step of the decode path (decode.py, its conv window as a shift: conv_step.py),
the exact compile's int8 projections as integer-exact dot products in activation pieces (int8_pieces.py, reading the
export's int8 weights with int8_weights.py), the MTP draft head built from a checkpoint's tensors (mtp_graph.py), the pieces the edits share (building.py) and the guard
against a CPU-plugin fusion that crashes on one thread (mlp_fusion_guard.py). Each takes an ov.Model and returns or
edits one; none compiles or runs it.
"""
