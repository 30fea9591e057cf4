"""Decider's engine: Qwen3.5 through OpenVINO with exact log-probabilities. No Qt here."""
