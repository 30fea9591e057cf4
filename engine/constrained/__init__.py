"""decider.engine.constrained: see its documented __init__ (added by hand after the move)."""
