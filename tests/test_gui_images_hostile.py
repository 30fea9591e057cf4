"""The window's open/drop path holds the same image limits as the API (issue #25): documented formats only,
checked by content; a picture over the pixel limit is refused from its header, a big one decoded smaller."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

pytest.importorskip("pytestqt")

from PIL import Image  # noqa: E402


@pytest.fixture
def read_image(qapp):
    from decider.ui.image_input import read_image

    return read_image


def test_a_tiff_or_an_eps_named_png_is_refused(read_image, tmp_path):
    Image.new("RGB", (8, 8)).save(tmp_path / "shot.png", "TIFF")
    (tmp_path / "eps.png").write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n{ 1 pop } loop\n")
    for name in ("shot.png", "eps.png"):
        image, why = read_image(str(tmp_path / name))
        assert image is None and "not an image Decider can read (PNG, JPEG, WebP, BMP or GIF)" in why


def test_a_picture_over_the_pixel_limit_is_refused_as_too_large(read_image, tmp_path):
    Image.new("L", (9000, 9000)).save(tmp_path / "big.png")
    image, why = read_image(str(tmp_path / "big.png"))
    assert image is None and "too large" in why and "scale it down" in why


def test_a_big_picture_is_decoded_smaller(read_image, tmp_path):
    Image.new("RGB", (8000, 6000), "white").save(tmp_path / "big.jpg")
    image, name = read_image(str(tmp_path / "big.jpg"))
    assert name == "big.jpg" and image.width() * image.height() <= 4096 * 4096 and image.width() > image.height()
