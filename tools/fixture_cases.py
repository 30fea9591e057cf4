"""Prompt cases for the reference fixtures (tests/fixtures/reference/<model>.json).

`tools/make_fixtures.py` calls `cases(model_dir, tokenizer)` once per fixture model and computes, with
transformers in float64, the reference numbers for every case returned.  Edit this file to add cases, then
run `python tools/make_fixtures.py --references-only` (no re-export needed).

Arguments:
  model_dir  -- Path of the exported model folder (tests/fixtures/models/<name>/): tokenizer.json,
                tokenizer_config.json, chat_template.jinja, config.json are there.
  tokenizer  -- a `tokenizers.Tokenizer` loaded from model_dir/tokenizer.json.

Each case is a plain dict:
  name           unique within the model, [a-z0-9_-]+
  kind           "greedy" | "distribution" | "sequence"
  prompt_ids     list[int], the exact ids fed to the model (no BOS is added by anyone)
  continuations  list[list[int]], only for kind "sequence"

All three fixture models share one tokenizer, so the ids are the same for every model; `model_dir` is
passed so that future cases can depend on a model's own files (chat template, config).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False).ids


def cases(model_dir: Path, tokenizer) -> list[dict]:
    out: list[dict] = []

    # Greedy decoding from raw text (16 steps, KV cache, continuing past any stop token).
    out.append({"name": "greedy_scouts", "kind": "greedy", "prompt_ids": _ids(tokenizer, "The scouts report that")})
    out.append(
        {
            "name": "greedy_options",
            "kind": "greedy",
            "prompt_ids": _ids(
                tokenizer,
                "Option A: Attack the castle.\nOption B: Retreat to the hills.\nOption C: Trade with the merchant.\n"
                "Answer:",
            ),
        }
    )

    # Full next-token distribution after a longer prompt (> 64 tokens, so the reference runs the chunked
    # delta rule over more than one chunk).
    long_prompt = (
        "The northern army marches near the river while the merchant waits behind the bridge.\n"
        "A) Attack\nB) Defend\nC) Retreat\nD) Trade\nE) Hide\nF) Wait\nG) Scout\nH) Negotiate\nI) Build\nJ) Flee\n"
        "Question 7: What should the captain do? Reply with one letter only.\nAnswer:"
    )
    out.append({"name": "dist_ten_options", "kind": "distribution", "prompt_ids": _ids(tokenizer, long_prompt)})

    # Per-token log-probabilities of several continuations of one prompt.
    out.append(
        {
            "name": "seq_actions",
            "kind": "sequence",
            "prompt_ids": _ids(tokenizer, "Should we attack or"),
            "continuations": [
                _ids(tokenizer, " retreat?"),
                _ids(tokenizer, " trade with the merchant?"),
                _ids(tokenizer, " wait"),
                _ids(tokenizer, " A"),
            ],
        }
    )
    out += engine_cases(model_dir)
    return out


# Prompts built by the project's own template and decision code; tests/test_reference_prompts.py checks
# that the engine still builds exactly these ids (regenerate the references when the wording changes).
DECISIONS = [
    ("decide_retrieval", "Scouts report that Hide is the safe choice. What should we do?", ["Attack", "Defend", "Hide", "Trade", "Wait"], None),
    ("decide_category", "Which of these is an animal?", ["Hammer", "Horse", "Bread"], None),
    ("decide_context", "Which unit should move first?", ["Archers", "Knights", "Scouts"],
     " ".join(f"Rule {i}: a unit that moves may not attack in the same turn." for i in range(12))),
]
WORD_OPTIONS = ("words_scoring", "Which of these is an animal?", ["Horse", "Hammer and nails", "Bread"])
CHATS = [("chat_think_off", "Should we attack or retreat?", False), ("chat_think_on", "Should we attack or retreat?", True)]
# Functions offered in Qwen3.5's tools format: the float64 log-probabilities of each function's canonical path
# `<tool_call>\n<function=NAME>` after the prompt (tests/test_tool_probabilities.py holds tool_choice_probabilities to them).
TOOL_CASE = ("tools_call_paths", "An orc blocks the bridge. What do we do?", [
    {"type": "function", "function": {"name": "attack", "description": "Attack a target", "parameters": {
        "type": "object", "properties": {"target": {"type": "string", "enum": ["orc", "troll", "dragon"]},
                                         "power": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["target", "power"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "retreat", "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}},
    {"type": "function", "function": {"name": "trade", "parameters": {
        "type": "object", "properties": {"item": {"type": "string", "maxLength": 12}, "price": {"type": "integer", "minimum": 0, "maximum": 500}},
        "required": ["item", "price"], "additionalProperties": False}}},
])


def engine_cases(model_dir: Path) -> list[dict]:
    from decider.engine.model.chat_template import Message, build_chat_prompt
    from decider.engine.decisions.prompt import build_decision_prompt
    from decider.engine.model.tokenizer import ChatTokenizer

    tok = ChatTokenizer(Path(model_dir) / "tokenizer.json")
    out: list[dict] = []
    for name, text, think in CHATS:
        prompt = build_chat_prompt(tok, [Message("system", "You are a careful strategist."), Message("user", text)], think)
        out.append({"name": name, "kind": "greedy", "prompt_ids": prompt.ids})
    for name, question, options, context in DECISIONS:
        prompt = build_decision_prompt(tok, question, options, context=context)
        out.append({"name": name, "kind": "distribution", "prompt_ids": prompt.ids})
    name, question, options = WORD_OPTIONS
    prompt = build_decision_prompt(tok, question, options, words=True)
    out.append({
        "name": name, "kind": "sequence", "prompt_ids": prompt.ids,
        "continuations": [tok.encode_text(o) + [tok.im_end] for o in options],
    })
    out.append(tool_case(tok))
    return out


def tool_case(tok) -> dict:
    from decider.engine.model.chat_template import Message, build_chat_prompt
    from decider.engine.constrained.tools import function_path, tools_from_openai

    name, question, offered = TOOL_CASE
    tools = tools_from_openai(offered)
    prompt = build_chat_prompt(tok, [Message("user", question)], False, tools=tools)
    return {"name": name, "kind": "sequence", "prompt_ids": prompt.ids,
            "continuations": [function_path(tok, t.name) for t in tools]}
