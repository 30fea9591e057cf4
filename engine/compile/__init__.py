"""How a model is compiled on this machine, decided once as a value: the compile plan (plan.py: every property each
compiled model gets, and why), built by planner.py from the device (devices.py), the precision asked for and what the
CPU can do (precision.py) and the measurements kept here (measurements.py: the fastest reduced compile, measured by
fast_tuning.py before a runner exists), and a risky compile tried first in a child process (probe.py). It chooses
compile properties; the runners compile with them.
"""
