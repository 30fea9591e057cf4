"""Decider's engine: Qwen3.5 through OpenVINO with exact log-probabilities. No Qt here, no HTTP server.

Its parts, from the bottom up (each imports only parts below it: the `layers` contract in pyproject.toml):

    core         errors, the settings schema (sampling and decision settings), log-probabilities, engine info,
                 clock, files
    constrained  tools, the tool-call format, grammars (tool calls, JSON schemas)
    model        a model folder, its tokenizer and chat template, image tokens in a prompt, safetensors
    graphs       edits to the exported OpenVINO graph, the MTP head's graph
    compile      the compile plan: device, precision, every property and why, the choices measured here
    kernels      our own int8 projection kernel | vision: the image encoder and what feeds it
    runners      compiled models that run a prompt (and the MTP draft head beside them)
    generation   the token loop, processors, samplers, drafts
    decisions    a decision's request, prompt, bars, labels and result | completions: the OpenAI format
    remote       a decision from an OpenAI-compatible server
"""
