"""Decider's prompts against the model folder's own chat template (#37): the real Qwen3.5 chat_template.jinja in
every demo and fixture folder, rendered as transformers renders it (sandboxed jinja2, trim_blocks, lstrip_blocks,
tojson, raise_exception), tokenized, and compared id for id over a corpus of conversations: tools, earlier calls
with typed arguments, tool results, several turns, thinking on and off, reasoning, images and system text.

A folder whose template renders otherwise is named in the engine's info and by `decider doctor`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.models import MODELS
from decider.engine.model.template_check import CORPUS, decider_ids, folder_template, template_differences, template_ids
from decider.engine.model.tokenizer import ChatTokenizer

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = [ROOT / "resources" / "demo-model", ROOT / "resources" / "demo-vl-model", *(MODELS / n for n in
           ("qwen35-text", "qwen35-vl", "qwen35-moe-text"))]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_every_corpus_conversation_renders_to_the_templates_ids(folder):
    tokenizer = ChatTokenizer(folder / "tokenizer.json")
    template = folder_template(folder)
    assert template is not None and "<function=" in template and "<tools>" in template  # Qwen3.5's tools branch
    for conversation in CORPUS:
        want = template_ids(tokenizer, template, conversation)
        got = decider_ids(tokenizer, conversation)
        assert got == want, f"{conversation.name}:\n{tokenizer.decode(got)!r}\n!=\n{tokenizer.decode(want)!r}"
    assert template_differences(folder, tokenizer) == []


def test_the_corpus_covers_what_the_template_branches_on():
    names = {c.name for c in CORPUS}
    assert any(c.tools for c in CORPUS) and any(c.think for c in CORPUS) and any(not c.think for c in CORPUS)
    messages = [m for c in CORPUS for m in c.messages]
    assert any(m.tool_calls for m in messages) and any(m.role == "tool" for m in messages)
    assert any(m.reasoning for m in messages) and any(not isinstance(m.content, str) for m in messages)
    assert any(m.role == "system" for m in messages) and len(names) == len(CORPUS)


@pytest.fixture(scope="module")
def other_template(tmp_path_factory):
    """The text fixture with Qwen3's JSON tool format in its template (what Decider rendered before #37)."""
    folder = tmp_path_factory.mktemp("qwen3-format") / "model"
    shutil.copytree(MODELS / "qwen35-text", folder)
    template = (folder / "chat_template.jinja").read_text()
    old_call = "{{- '<tool_call>\\n{\"name\": \"' + tool_call.name + '\"}\\n</tool_call>' }}"
    template = template.replace("{{- '</function>\\n</tool_call>' }}", old_call)
    (folder / "chat_template.jinja").write_text(template.replace("You have access to the following functions:",
                                                                 "You may call one or more functions to assist with the user query."))
    return folder


def test_a_folder_whose_template_differs_is_named_in_the_engine_info_and_the_doctor(other_template):
    from decider.app.doctor import run_doctor
    from decider.app.service import EngineService

    tokenizer = ChatTokenizer(other_template / "tokenizer.json")
    differences = template_differences(other_template, tokenizer)
    assert "tools_no_system" in differences and "call_and_result" in differences and "user_only" not in differences
    info = EngineService(other_template).info.to_dict()
    assert "tools_no_system" in info["chat_template"] and "not this template's" in info["chat_template"]
    assert "chat_template" not in EngineService(MODELS / "qwen35-text").info.to_dict()
    checks = [c for c in run_doctor(other_template).checks if c.text.startswith("chat template")]
    assert len(checks) == 1 and checks[0].status == "warn" and "call_and_result" in checks[0].text
    good = [c for c in run_doctor(MODELS / "qwen35-text").checks if c.text.startswith("chat template")]
    assert [c.status for c in good] == ["ok"]


def test_a_template_that_raises_counts_as_different(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "chat_template.jinja").write_text("{{ raise_exception('no') }}")
    tokenizer = ChatTokenizer(MODELS / "qwen35-text" / "tokenizer.json")
    assert template_differences(folder, tokenizer) == [c.name for c in CORPUS]
