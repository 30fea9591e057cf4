"""Agent frameworks calling functions on the demo model through `decider serve` (#28): LangChain's bind_tools and
instructor's default (TOOLS) mode, unmodified. Both need the `clients` extra (pip install -e ".[clients]")."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

pytestmark = pytest.mark.extra
langchain_openai = pytest.importorskip("langchain_openai", reason="langchain-openai is not installed: pip install -e \".[clients]\"")
instructor = pytest.importorskip("instructor", reason="instructor is not installed: pip install -e \".[clients]\"")

import openai  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

from decider.app.api.server import ApiServer  # noqa: E402
from decider.app.service import EngineService  # noqa: E402
from decider.engine.compile.devices import DeviceOptions  # noqa: E402

DEMO = Path(__file__).resolve().parent.parent / "resources" / "demo-model"
QUESTION = "Scouts report that an orc guards the bridge. What should we do?"


class Attack(BaseModel):
    """Attack a target."""

    target: Literal["orc", "troll"]
    power: int = Field(ge=1, le=9)


class Retreat(BaseModel):
    """Fall back to the camp."""


@pytest.fixture(scope="module")
def url():
    server = ApiServer(EngineService(DEMO, DeviceOptions(device="CPU")), "127.0.0.1", 0)
    server.start()
    yield server.url
    server.stop()


def test_langchain_bind_tools_calls_a_function_with_valid_arguments(url):
    model = langchain_openai.ChatOpenAI(base_url=url, api_key="unused", model="decider", temperature=0, max_tokens=200)
    reply = model.bind_tools([Attack, Retreat], tool_choice="required").invoke(QUESTION)
    assert reply.tool_calls, reply
    call = reply.tool_calls[0]
    assert call["name"] in ("Attack", "Retreat")
    (Attack if call["name"] == "Attack" else Retreat).model_validate(call["args"])  # the schema holds
    named = model.bind_tools([Attack, Retreat], tool_choice="Attack").invoke(QUESTION)
    assert [c["name"] for c in named.tool_calls] == ["Attack"] and Attack.model_validate(named.tool_calls[0]["args"])


def test_instructor_default_tools_mode_returns_a_validated_object(url):
    client = instructor.from_openai(openai.OpenAI(base_url=url, api_key="unused", max_retries=0))
    attack = client.chat.completions.create(model="decider", response_model=Attack, max_tokens=200, temperature=0,
                                            max_retries=0, messages=[{"role": "user", "content": QUESTION}])
    assert isinstance(attack, Attack) and attack.target in ("orc", "troll") and 1 <= attack.power <= 9
