"""decider.engine.compile: see its documented __init__ (added by hand after the move)."""
