"""How a model is compiled on this machine: which device (devices.py), which precision and what the CPU can do
(precision.py), the fastest reduced compile as measured here (fast_tuning.py), a risky compile tried first in a
child process (probe.py), and the key and folder under which those measurements are kept (cache_key.py). It chooses
compile properties; the runners compile with them.
"""
