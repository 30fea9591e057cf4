"""Compiled models that run a prompt: what every runner offers (base.py), the dynamic-shape runner (runner.py), what a
forward of each export layout is fed (input_layouts.py) and the static-shape runner for NPUs (static.py), the choice
between them (choice.py), how a prompt is prefilled in chunks (prefill_chunks.py), the prompt-state cache on disk
(prompt_cache.py, prompt_entry.py), the reduced-precision twin that reasons fast (fast_reasoning.py), every prompt
position scored (scoring.py), the MTP draft head compiled beside the model (mtp_head.py), the side compiles' requests
(step_request.py, lazy_verify.py) and the child process that tries a compile first (probe_child.py).
"""
