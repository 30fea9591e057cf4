"""Tool calls (#28) through the stock openai client: tools + tool_choice, tool results, n > 1, and the exact
probability of each call (Decider's `tool_choice_probabilities`).

The fixture and demo models know nothing of tools: whatever they would rather write, the grammar makes every
call name an offered function with arguments valid under its schema."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import openai
import pytest

from support.openai_server import openai_client

from decider.app.service import EngineService
from decider.engine.model.chat_template import Message, build_chat_prompt
from decider.engine.compile.devices import DeviceOptions
from decider.engine.runners.runner import ModelRunner
from decider.engine.model.template_check import folder_template, message_dict, render
from decider.engine.constrained.tools import Tool, ToolCall, choice_probabilities

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "fixtures" / "models" / "qwen35-text"
GREEDY = {"temperature": 0, "seed": 1, "frequency_penalty": 0, "presence_penalty": 0}
TARGET = {"type": "string", "enum": ["orc", "troll", "dragon"]}
TOOLS = [
    {"type": "function", "function": {"name": "attack", "description": "Attack a target", "parameters": {
        "type": "object", "properties": {"target": TARGET, "power": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["target", "power"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "retreat", "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}},
    {"type": "function", "function": {"name": "trade", "parameters": {
        "type": "object", "properties": {"item": {"type": "string", "maxLength": 12}, "price": {"type": "integer", "minimum": 0, "maximum": 500}},
        "required": ["item", "price"], "additionalProperties": False}}},
]
ASK = [{"role": "user", "content": "An orc blocks the bridge. What do we do?"}]


@pytest.fixture(scope="module")
def service():
    return EngineService(MODEL, DeviceOptions(device="CPU"))


@pytest.fixture(scope="module")
def client(service):
    with openai_client(service) as client:
        yield client


def _valid(call) -> dict:
    arguments = json.loads(call.function.arguments)
    if call.function.name == "attack":
        assert set(arguments) == {"target", "power"} and arguments["target"] in TARGET["enum"] and 1 <= arguments["power"] <= 9
    elif call.function.name == "retreat":
        assert arguments == {}
    else:
        assert call.function.name == "trade" and set(arguments) == {"item", "price"} and 0 <= arguments["price"] <= 500
    return arguments


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_required_calls_an_offered_function_with_valid_arguments(client, seed):
    reply = client.chat.completions.create(model="decider", messages=ASK, tools=TOOLS, tool_choice="required",
                                           max_tokens=120, temperature=1.0, seed=seed)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls and all(c.type == "function" and c.id.startswith("call_") for c in choice.message.tool_calls)
    for call in choice.message.tool_calls:
        _valid(call)


def test_a_named_function_is_the_one_called(client):
    reply = client.chat.completions.create(model="decider", messages=ASK, tools=TOOLS, max_tokens=120,
                                           tool_choice={"type": "function", "function": {"name": "trade"}}, **GREEDY)
    calls = reply.choices[0].message.tool_calls
    assert len(calls) == 1 and calls[0].function.name == "trade"
    _valid(calls[0])


def test_streamed_tool_calls_equal_the_whole_answer(client):
    args = dict(model="decider", messages=ASK, tools=TOOLS, tool_choice="required", max_tokens=120, parallel_tool_calls=False, **GREEDY)
    whole = client.chat.completions.create(**args).choices[0]
    with client.chat.completions.stream(**args) as stream:
        final = stream.get_final_completion().choices[0]
    assert final.finish_reason == whole.finish_reason == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in final.message.tool_calls] == \
        [(c.function.name, c.function.arguments) for c in whole.message.tool_calls]


def test_a_tool_result_continues_the_conversation(client, service):
    first = client.chat.completions.create(model="decider", messages=ASK, tools=TOOLS, tool_choice="required",
                                           max_tokens=120, **GREEDY).choices[0].message
    call = first.tool_calls[0]
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
               {"role": "tool", "tool_call_id": call.id, "content": "the orc fell"}]
    reply = client.chat.completions.create(model="decider", messages=history, tools=TOOLS, tool_choice="none",
                                           max_tokens=5, **GREEDY)
    assert reply.choices[0].message.tool_calls is None and reply.choices[0].finish_reason in ("stop", "length")
    # the call rendered back in Qwen3.5's form, the result in <tool_response> tags in a user turn: as the folder's template
    messages = [Message("user", ASK[0]["content"]),
                Message("assistant", "", (ToolCall(call.function.name, call.function.arguments),)),
                Message("tool", "the orc fell")]
    text = service.runner.tokenizer.decode(build_chat_prompt(service.runner.tokenizer, messages, False).ids)
    assert text == render(folder_template(MODEL), [message_dict(m) for m in messages], None, False)
    assert f"<think>\n\n</think>\n\n<tool_call>\n<function={call.function.name}>\n<parameter=" in text
    assert "<|im_start|>user\n<tool_response>\nthe orc fell\n</tool_response><|im_end|>" in text


def test_auto_reports_how_sure_the_model_was_of_each_call(client, service):
    reply = client.chat.completions.create(model="decider", messages=ASK, tools=TOOLS, max_tokens=60, **GREEDY)
    probabilities = reply.model_dump()["choices"][0]["tool_choice_probabilities"]
    assert set(probabilities["functions"]) == {"attack", "retreat", "trade"}
    assert abs(probabilities["answer"] + probabilities["call"] - 1) < 1e-12
    assert sum(probabilities["functions"].values()) <= probabilities["call"] + 1e-12


def test_the_call_probabilities_equal_a_direct_computation():
    runner = ModelRunner(MODEL, DeviceOptions(device="CPU"))
    tools = tuple(Tool(t["function"]["name"], t["function"]["parameters"]) for t in TOOLS)
    prompt = build_chat_prompt(runner.tokenizer, [Message("user", ASK[0]["content"])], False, tools=tools).ids
    got = choice_probabilities(runner, prompt, tools)
    fresh = ModelRunner(MODEL, DeviceOptions(device="CPU"))

    def logprob_after(prefix: list[int], token: int) -> float:
        fresh.reset()
        logits = fresh.prefill(prompt + prefix)  # one cold forward over the whole sequence each time
        return float(logits[token] - logits.max() - np.log(np.exp(logits - logits.max()).sum()))

    for tool in tools:
        path = runner.tokenizer.encode_text(f"<tool_call>\n<function={tool.name}>")
        want = np.exp(sum(logprob_after(path[:i], path[i]) for i in range(len(path))))
        assert abs(got["functions"][tool.name] - want) < 1e-6
    assert abs(got["call"] - np.exp(logprob_after([], path[0]))) < 1e-6


def test_n_choices_come_from_one_prefill(client, service, monkeypatch):
    runner = service.runner
    computed = []  # tokens each prefill of the request really computed (the real runner, its own counters)
    prefill = runner.prefill

    def counted(ids, checkpoints=()):
        logits = prefill(ids, checkpoints)
        computed.append(runner.stats.last_prefill_tokens)
        return logits

    monkeypatch.setattr(runner, "prefill", counted)
    reply = client.chat.completions.create(model="decider", messages=[{"role": "user", "content": "Count sheep, slowly."}],
                                           n=3, max_tokens=4, temperature=1.0, seed=7, logprobs=True)
    assert [c.index for c in reply.choices] == [0, 1, 2] and all(c.logprobs.content for c in reply.choices)
    generated = sum(len(c.logprobs.content) for c in reply.choices)
    assert reply.usage.completion_tokens == generated
    # three draws, three prefills of the same prompt: only the first computes anything, the others restore its end
    assert len(computed) == 3 and computed[0] > 0 and computed[1:] == [0, 0], computed
    texts = {c.message.content for c in reply.choices}
    assert len(texts) > 1  # seeds 7, 8, 9: three draws, not one answer three times
    completion = client.completions.create(model="decider", prompt="Once upon", n=2, max_tokens=3, temperature=1.0, seed=3)
    assert [c.index for c in completion.choices] == [0, 1]


def test_bad_tools_are_400s_naming_the_field(client):
    cases = [
        (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"$ref": "#/nowhere"}}}]), "tools[0]"),
        # every schema checked at the request, whatever tool_choice says (#38): the 400 names the tool
        (dict(tools=[*TOOLS, {"type": "function", "function": {"name": "g", "parameters": {
            "type": "object", "properties": {}, "required": ["x"]}}}]), "tools[3]"),
        (dict(tools=[TOOLS[0], {"type": "function", "function": {"name": "g", "parameters": {
            "type": "object", "properties": {"a<b>": {"type": "string"}}}}}], tool_choice="none"), "tools[1]"),
        (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "fly"}}), "tool_choice"),
        (dict(tool_choice="required"), "tool_choice"),
        (dict(tools=[{"type": "function", "function": {"name": "bad name!"}}]), "tools"),
        (dict(tools=TOOLS, extra_body={"think": True}), "tools"),
    ]
    for extra, param in cases:
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="decider", messages=ASK, max_tokens=5, **extra)
        assert info.value.param == param, (extra, info.value)
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="decider", prompt="x", best_of=2, max_tokens=2)
    assert "best_of" in str(info.value)


def test_the_call_probabilities_are_the_models_own_whatever_tool_choice_forces(client):
    """`tool_choice` constrains what is drawn, never the reported probabilities (docs/api.md)."""
    seen = []
    for choice in ("auto", "required", {"type": "function", "function": {"name": "trade"}}):
        reply = client.chat.completions.create(model="decider", messages=ASK, tools=TOOLS, tool_choice=choice,
                                               max_tokens=40, **GREEDY)
        seen.append(reply.model_dump()["choices"][0]["tool_choice_probabilities"])
    reply = client.chat.completions.create(model="decider", messages=ASK, tools=TOOLS, tool_choice="none", max_tokens=5, **GREEDY)
    assert "tool_choice_probabilities" not in reply.model_dump()["choices"][0]  # no call can be made
    for other in seen[1:]:
        assert other["call"] == pytest.approx(seen[0]["call"], abs=1e-9)
        assert other["functions"] == pytest.approx(seen[0]["functions"], abs=1e-9)
    assert 0 < seen[0]["call"] < 1
