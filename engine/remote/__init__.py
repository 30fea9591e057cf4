"""A decision from an OpenAI-compatible server instead of the local model: the remote engine (engine.py), its HTTP
client (http.py), what kind of server answers and which exact methods it offers (probe.py), the prompt it is sent
(prompt.py), its reasoning read back (reasoning.py), reading the bars from its logprobs (read.py), and tool-call
decisions against it (tool_calls.py). It sits on top: it uses the decision vocabulary and prompts, never a local
runner.
"""
