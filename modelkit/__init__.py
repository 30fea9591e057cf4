"""Building Qwen3.5 model folders outside the shipped package: shared by tools/ (fixtures, demo models),
bench/ (benchmark models) and tests/, which may all import it; it imports only the package and third-party
libraries, never tools/, bench/ or tests/ (a contract in pyproject.toml)."""
