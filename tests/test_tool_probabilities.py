"""tool_choice_probabilities against transformers in float64 (#37): on the Qwen3.5-format tools prompt, each
function's probability is its canonical path `<tool_call>\\n<function=NAME>`, within 1e-4 nats of the reference
(tests/fixtures/reference/<model>.json, case tools_call_paths, made by tools/make_fixtures.py)."""

from __future__ import annotations

import math

import pytest

from support.models import MODELS, case
from decider.engine.model.chat_template import Message, build_chat_prompt
from decider.engine.runners.runner import ModelRunner
from decider.engine.constrained.tools import choice_probabilities, function_path, tools_from_openai
from fixture_cases import TOOL_CASE

NAME, QUESTION, OFFERED = TOOL_CASE


@pytest.mark.parametrize("model", ["qwen35-text", "qwen35-vl", "qwen35-moe-text"])
def test_function_probabilities_equal_the_float64_reference(model):
    runner = ModelRunner(MODELS / model)
    reference = case(NAME, model)
    tools = tools_from_openai(OFFERED)
    prompt = build_chat_prompt(runner.tokenizer, [Message("user", QUESTION)], False, tools=tools).ids
    assert prompt == reference["prompt_ids"]  # the prompt the reference scored: Qwen3.5's tools format
    text = runner.tokenizer.decode(prompt)
    assert "You have access to the following functions:" in text and "<function=example_function_name>" in text
    got = choice_probabilities(runner, prompt, tools)
    for tool, path, logprobs in zip(tools, reference["continuations"], reference["token_logprobs"]):
        assert function_path(runner.tokenizer, tool.name) == path
        assert abs(math.log(got["functions"][tool.name]) - sum(logprobs)) < 1e-4, tool.name
    assert abs(math.log(got["call"]) - reference["token_logprobs"][0][0]) < 1e-4
    assert got["answer"] == pytest.approx(1 - got["call"], abs=1e-15)
