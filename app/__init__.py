"""Decider's wiring: configuration, the CLI, the engine service, the API server and worker threads."""
