"""Hostile pictures (issue #25): only the documented formats are decoded, the bytes must match the data URL's
type, a request's images share one pixel budget, a model that cannot see refuses before decoding, and
devices such as /dev/zero are never read."""

from __future__ import annotations

import base64
import io
import subprocess
import time
import warnings

import pytest
from PIL import Image

from decider.app.api.protocol import ChatCompletionRequest
from decider.app.images import MAX_PIXELS, ImageBudget, current_budget, decode_data_url, decode_image, load_image_file
from decider.app.api.errors import ApiError
from decider.engine.core.errors import SettingsError

EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n{ 1 pop } loop\n"


def encoded(image: Image.Image, fmt: str) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


@pytest.fixture
def no_children(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"a child process was started: {args!r:.80}")
    monkeypatch.setattr(subprocess, "Popen", refuse)


def test_eps_labelled_png_is_refused_fast_and_never_runs_ghostscript(no_children):
    start = time.monotonic()
    with pytest.raises(SettingsError, match="not an image Decider can read"):
        decode_data_url(url(EPS))
    assert time.monotonic() - start < 1


@pytest.mark.parametrize("fmt", ["TIFF", "ICO", "PCX", "TGA", "PPM", "SGI", "IM", "QOI", "DDS"])
def test_undocumented_formats_are_not_decoded(fmt):
    try:
        data = encoded(Image.new("RGB", (8, 8), "red"), fmt)
    except (KeyError, OSError, ValueError):
        pytest.skip(f"this Pillow cannot write {fmt}")
    with pytest.raises(SettingsError, match="PNG, JPEG, WebP, BMP or GIF|the bytes are"):
        decode_data_url(url(data))


def test_a_mismatch_with_the_declared_type_is_refused():
    png = encoded(Image.new("RGB", (8, 8), "red"), "PNG")
    with pytest.raises(SettingsError, match="says JPEG but the bytes are PNG"):
        decode_data_url(url(png, "image/jpeg"))
    assert decode_data_url(url(png)).shape == (8, 8, 3)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "BMP", "GIF"])
def test_documented_formats_decode(fmt):
    pixels = decode_image(encoded(Image.new("RGB", (20, 10), "blue"), fmt), "x")
    assert pixels.shape == (10, 20, 3)


def test_a_huge_single_colour_png_is_reduced_while_decoding_not_kept_whole():
    png = encoded(Image.new("RGB", (8192, 8192), "white"), "PNG")
    assert len(png) < 300_000
    pixels = decode_image(png, "big", ImageBudget(target_pixels=28 * 28 * 1280))
    assert 28 * 28 * 1280 <= pixels.shape[0] * pixels.shape[1] < 4 * 28 * 28 * 1280


def test_a_huge_jpeg_decodes_at_a_reduced_scale():
    jpeg = encoded(Image.new("RGB", (4096, 4096), "white"), "JPEG")
    pixels = decode_image(jpeg, "big", ImageBudget(target_pixels=9216))
    assert pixels.shape[0] * pixels.shape[1] < 4096 * 4096 // 16


def test_the_pixel_budget_is_per_request_and_says_too_large_with_a_hint(recwarn):
    png = encoded(Image.new("RGB", (8192, 8192), "white"), "PNG")
    budget = ImageBudget()
    decode_image(png, "first", budget)
    with pytest.raises(SettingsError) as caught:
        decode_image(png, "second", budget)
    message = str(caught.value)
    assert "too large" in message and f"{MAX_PIXELS:,}" in message and "scale it down" in message
    assert "damaged" not in message
    assert not [w for w in recwarn if "DecompressionBomb" in type(w.message).__name__]


def test_a_model_that_cannot_see_refuses_before_decoding(monkeypatch):
    monkeypatch.setattr(Image, "open", lambda *a, **k: pytest.fail("decoded on a text-only model"))
    png = encoded(Image.new("RGB", (8, 8)), "PNG")
    with pytest.raises(SettingsError, match="cannot see images"):
        decode_data_url(url(png), budget=ImageBudget(refusal="demo cannot see images"))


def test_images_are_counted_over_all_messages_of_a_request():
    part = {"type": "image_url", "image_url": {"url": url(encoded(Image.new("RGB", (8, 8)), "PNG"))}}
    body = {"messages": [{"role": "user", "content": [part] * 3} for _ in range(3)]}
    token = current_budget.set(ImageBudget())
    try:
        with pytest.raises((ApiError, Exception)) as caught:
            ChatCompletionRequest.model_validate(body)
    finally:
        current_budget.reset(token)
    assert "at most 8 images" in str(caught.value)


def test_dev_zero_is_refused_as_an_image_without_reading_it():
    with pytest.raises(SettingsError, match="not a regular file"):
        load_image_file("/dev/zero")


def test_a_picture_past_pillows_bomb_limit_is_too_large_not_damaged_and_warns_nothing():
    png = encoded(Image.new("1", (15000, 15000)), "PNG")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no DecompressionBombWarning reaches the terminal
        with pytest.raises(SettingsError) as caught:
            decode_image(png, "huge")
    assert "too large" in str(caught.value) and "damaged" not in str(caught.value)

