"""Decider, installed as one package: decider.engine (no Qt, no HTTP) <- decider.app (services, CLI, API)
<- decider.ui (widgets). The repository root is the package (pyproject maps it), so the three layers keep
their top-level folders here while site-packages holds only `decider` (README, Layout)."""
