"""Hostile inputs, round two (#25): images that reach only the documented decoders, pixel budgets per request,
nothing decoded for a model that cannot see, request framing that cannot smuggle a second request, and big
bodies parsed off the event loop — each against a live server on 127.0.0.1, which keeps answering meanwhile."""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from decider.app.api.server import ApiServer
from decider.app.images import REQUEST_PIXELS, PixelBudget, decode_image, load_image_file
from decider.app.service import EngineService
from decider.engine.devices import DeviceOptions
from decider.engine.errors import SettingsError

from test_api_hostile import call, error_of, raw

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT / "tests" / "fixtures" / "models" / "qwen35-text"
SEEING = ROOT / "resources" / "demo-vl-model"
EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n{ 1 pop } loop\n"


def encoded(image: Image.Image, fmt: str) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def chat_with(*urls: str, messages: int = 1) -> dict:
    parts = [{"type": "text", "text": "Which colour?"}] + [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    return {"model": "decider", "max_tokens": 1, "messages": [{"role": "user", "content": parts}] * messages}


@pytest.fixture(scope="module")
def seeing():
    server = ApiServer(EngineService(SEEING, DeviceOptions(device="CPU")), "127.0.0.1", 0)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def text_only():
    server = ApiServer(EngineService(TEXT, DeviceOptions(device="CPU")), "127.0.0.1", 0)
    server.start()
    yield server
    server.stop()


def models_answer_quickly(port: int, during, limit: float = 1.0) -> float:
    """Run `during` in a thread; meanwhile GET /v1/models must keep answering within `limit` seconds."""
    worker = threading.Thread(target=during)
    worker.start()
    slowest = 0.0
    try:
        while worker.is_alive():
            started = time.perf_counter()
            status, _, _ = call(port, "GET", "/v1/models", headers={})
            slowest = max(slowest, time.perf_counter() - started)
            assert status == 200
    finally:
        worker.join()
    assert slowest < limit, slowest
    return slowest


def test_only_the_documented_formats_are_decoded():
    for data, fmt in ((EPS, "EPS"), (encoded(Image.new("RGB", (8, 8)), "TIFF"), "TIFF"),
                      (encoded(Image.new("RGB", (8, 8)), "ICO"), "ICO"), (encoded(Image.new("RGB", (8, 8)), "PCX"), "PCX")):
        with pytest.raises(SettingsError, match="not an image Decider reads"):
            decode_image(data, fmt)
    png = encoded(Image.new("RGB", (8, 8), "red"), "PNG")
    with pytest.raises(SettingsError, match="declared image/jpeg but the data is PNG"):
        decode_image(png, "x", "image/jpeg")
    assert decode_image(png, "x", "image/png").shape == (8, 8, 3)


def test_an_eps_sent_as_png_is_a_fast_400_and_runs_nothing(seeing, monkeypatch):
    import subprocess as sp

    started = []
    monkeypatch.setattr(sp, "Popen", lambda *a, **k: started.append(a) or (_ for _ in ()).throw(AssertionError("spawned")))
    began = time.perf_counter()
    status, _, data = call(seeing.port, "POST", "/v1/chat/completions", chat_with(data_url(EPS)))
    assert status == 400 and "not an image Decider reads" in error_of(data)["message"]
    assert time.perf_counter() - began < 2 and not started


def test_a_model_that_cannot_see_decodes_nothing(text_only):
    # 8 large single-colour PNGs (small on the wire, ~200 MB each decoded): refused from the first header
    big = data_url(encoded(Image.new("RGB", (8192, 8192), "blue"), "PNG"))
    began = time.perf_counter()
    status, _, data = call(text_only.port, "POST", "/v1/chat/completions", chat_with(*[big] * 8))
    assert status == 400 and "cannot see images" in error_of(data)["message"]
    assert time.perf_counter() - began < 3


def test_the_pixel_budget_is_per_request_not_per_message(seeing):
    big = data_url(encoded(Image.new("RGB", (8192, 4096), "green"), "PNG"))
    # two messages of one big image each: within a per-message count, over the request's budget
    status, _, data = call(seeing.port, "POST", "/v1/chat/completions", chat_with(big, big, big, messages=1))
    assert status == 400 and "too large" in error_of(data)["message"] and f"{REQUEST_PIXELS:,}" in error_of(data)["message"]
    small = data_url(encoded(Image.new("RGB", (32, 32), "red"), "PNG"))
    status, _, data = call(seeing.port, "POST", "/v1/chat/completions", chat_with(small, small, small, messages=3))
    assert status == 400 and "at most 8 images in one request" in error_of(data)["message"]


def test_a_big_picture_is_too_large_never_damaged_and_no_pillow_warning_escapes(recwarn, tmp_path):
    path = tmp_path / "huge.png"
    Image.new("L", (9000, 9000)).save(path)
    with pytest.raises(SettingsError, match="too large: at most") as info:
        load_image_file(path)
    assert "damaged" not in str(info.value)
    assert not [w for w in recwarn if "DecompressionBomb" in type(w.message).__name__]
    budget = PixelBudget(total=100)
    with pytest.raises(SettingsError, match="too large"):
        decode_image(encoded(Image.new("RGB", (20, 20)), "PNG"), "x", budget=budget)


def test_large_pictures_are_decoded_scaled_down():
    jpeg = encoded(Image.new("RGB", (8000, 6000), "white"), "JPEG")
    pixels = decode_image(jpeg, "x")
    assert pixels.shape[0] * pixels.shape[1] <= 4096 * 4096 and pixels.shape[1] / pixels.shape[0] == pytest.approx(8000 / 6000, rel=0.01)


def test_files_that_are_not_regular_are_refused_at_once(tmp_path):
    for path, message in (("/dev/zero", "not a regular file"), (str(tmp_path), "a folder"), (str(tmp_path / "no.png"), "no such")):
        with pytest.raises(SettingsError, match=message):
            load_image_file(path)


def test_transfer_encoding_with_content_length_closes_the_connection(seeing):
    body = json.dumps({"model": "decider", "question": "Which colour?", "options": ["red", "blue"]}).encode()
    smuggled = (b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    chunked = f"{len(smuggled):x}\r\n".encode() + smuggled + b"\r\n0\r\n\r\n"
    request = (b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + chunked + smuggled)
    reply = raw(seeing.port, request)
    assert reply.count(b"HTTP/1.1 ") == 1, reply[:400]  # one answer, and the connection closed after it
    assert reply.startswith(b"HTTP/1.1 4")


def test_a_big_body_does_not_stall_the_other_clients(seeing):
    text = "word " * 1_400_000  # a 7 MB body, refused for its length after parsing — off the event loop
    body = {"model": "decider", "messages": [{"role": "user", "content": text}], "max_tokens": 1}

    def send() -> None:
        status, _, _ = call(seeing.port, "POST", "/v1/chat/completions", body, timeout=60)
        assert status == 400

    models_answer_quickly(seeing.port, send)
