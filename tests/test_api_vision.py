"""Images through the local API with the stock openai client: image_url parts in chat, `images` in /v1/decide."""

from __future__ import annotations

import base64
import json

import numpy as np
import openai
import pytest

from decider.app.api.server import ApiServer
from decider.app.service import EngineService
from support.models import FIXTURES, REFERENCE, model_dir
from decider.engine.compile.devices import DeviceOptions
from test_api import call

REF = json.loads((REFERENCE / "qwen35-vl-images.json").read_text())
CASES = {c["name"]: c for c in REF["cases"]}
GREEDY = {"temperature": 0, "seed": 1, "frequency_penalty": 0, "presence_penalty": 0}


def data_url(name: str) -> str:
    png = (FIXTURES / REF["images"][name]["file"]).read_bytes()
    return "data:image/png;base64," + base64.b64encode(png).decode()


@pytest.fixture(scope="module")
def api():
    server = ApiServer(EngineService(model_dir("qwen35-vl"), DeviceOptions(device="CPU")), "127.0.0.1", 0)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(api):
    return openai.OpenAI(base_url=api.url, api_key="unused", max_retries=0, timeout=120)


@pytest.mark.parametrize("name", ["wide", "two_images"])
def test_chat_image_url_parts_match_transformers_float64(client, name):
    case = CASES[name]
    parts = [{"type": "image_url", "image_url": {"url": data_url(image)}} for image in case["images"]]
    reply = client.chat.completions.create(
        model="decider", messages=[{"role": "user", "content": [*parts, {"type": "text", "text": case["text"]}]}],
        max_tokens=3, logprobs=True, top_logprobs=5, extra_body={"enable_thinking": False}, **GREEDY,
    )
    assert reply.usage.prompt_tokens == len(case["prompt_ids"])
    for got, want in zip(reply.choices[0].logprobs.content, case["steps"]):
        assert abs(got.logprob - want["logprob"]) < 1e-4
        assert [t.logprob for t in got.top_logprobs] == pytest.approx([w[1] for w in want["top"]], abs=1e-4)


def test_decide_images_match_transformers_float64(api):
    case = CASES["decision_screen"]
    status, _, body = call(api.port, "POST", "/v1/decide", {
        "question": case["question"], "options": case["options"], "context": case["context"],
        "images": [data_url(n) for n in case["images"]], **GREEDY,
    })
    assert status == 200, body
    letters = [32, 33, 34]  # "A", "B", "C" in the fixture tokenizer
    got = [o["logprob"] for o in body["options"]]
    assert np.max(np.abs(np.array(got) - np.array(case["logprobs"])[letters])) < 1e-4
    assert body["usage"]["image_tokens"] == 60


@pytest.mark.parametrize(("content", "message"), [
    ([{"type": "image_url", "image_url": {"url": "https://example.com/shot.png"}}], "not fetched"),
    ([{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}], "not valid"),
    ([{"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"no png").decode()}}], "not an image"),
    ([{"type": "input_audio", "input_audio": {}}], "image_url parts"),
])
def test_bad_images_are_400s_that_say_why(client, content, message):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="decider", messages=[{"role": "user", "content": content}], max_tokens=1)
    assert message in caught.value.body["message"]
    assert caught.value.body["param"].startswith("messages[0].content")


def test_decide_refuses_remote_urls(api):
    status, _, body = call(api.port, "POST", "/v1/decide", {"question": "Q?", "options": ["A", "B"], "images": ["https://x/y.png"]})
    assert status == 400 and "not fetched" in body["error"]["message"] and body["error"]["param"] == "images"


def test_a_text_model_refuses_images_with_a_400():
    server = ApiServer(EngineService(model_dir("qwen35-text"), DeviceOptions(device="CPU")), "127.0.0.1", 0)
    server.start()
    try:
        client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=60)
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="decider", max_tokens=1, messages=[
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url("square_64x64")}}]}])
        assert "cannot see images" in caught.value.body["message"]
    finally:
        server.stop()
