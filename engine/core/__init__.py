"""The vocabulary every part of the engine shares, and nothing that runs a model: the errors (errors.py), the sampling
and decision settings and their one schema (settings.py), log-probabilities and their top lists (logprobs.py, ranking.py), what
an engine says about itself (info.py), a decision's wall-clock split into named parts (clock.py) and reading files
that must be regular files (files.py). It imports no other part of the engine; every other part may import it.
"""
