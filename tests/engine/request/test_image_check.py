"""Checking an image's bytes (issue 41.4): every kind the protocols allow decodes; everything else is a
400 naming the field, decided from the header before a pixel is decoded where it can be."""

from __future__ import annotations

import hashlib

import pytest

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request.image_check import ImageLimits, ImageRef, check_image, decode_base64, split_data_url
from tinytitan.testing.images import bomb_png, picture, truncated

REF = ImageRef("", "messages[0].content[0].source.data", media_param="messages[0].content[0].source.media_type")
LIMITS = ImageLimits()


@pytest.mark.parametrize("kind", ["png", "jpeg", "gif", "webp"])
def test_each_kind_decodes_with_its_size_and_digest(kind: str) -> None:
    data = picture(kind, 9, 4)
    image = check_image(data, REF, LIMITS, f"image/{kind}")
    assert (image.media_type, image.width, image.height) == (f"image/{kind}", 9, 4)
    assert image.digest == hashlib.sha256(data).hexdigest() and image.data == data


def test_the_kind_is_read_from_the_bytes_when_none_is_declared() -> None:
    assert check_image(picture("gif"), REF, LIMITS).media_type == "image/gif"


def test_image_jpg_is_read_as_image_jpeg() -> None:
    assert check_image(picture("jpeg"), REF, LIMITS, "image/jpg").media_type == "image/jpeg"


def refused(data: bytes, declared: str | None = None, limits: ImageLimits = LIMITS) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        check_image(data, REF, limits, declared)
    return info.value


def test_a_mismatched_declaration_names_the_media_type_field() -> None:
    error = refused(picture("png"), "image/webp")
    assert error.param == REF.media_param and "declared image/webp but its bytes are PNG" in error.message


def test_an_unsupported_media_type_is_refused_before_the_bytes_are_read() -> None:
    error = refused(b"BM....", "image/bmp")
    assert error.param == REF.media_param and "image/png, image/jpeg, image/gif or image/webp" in error.message


@pytest.mark.parametrize("kind", ["png", "jpeg", "gif", "webp"])
def test_a_truncated_image_is_refused(kind: str) -> None:
    error = refused(truncated(picture(kind, 64, 64)))
    assert (error.param, error.code) == (REF.param, "invalid_image")
    assert "could not be decoded" in error.message and "<" not in error.message  # no object reprs


def test_a_bomb_is_refused_from_its_header() -> None:
    error = refused(bomb_png())
    assert (error.param, error.code) == (REF.param, "value_too_large") and "--max-image-pixels" in error.message


def test_the_pixel_limit_is_the_servers() -> None:
    small = ImageLimits(max_pixels=100)
    assert check_image(picture("png", 10, 10), REF, small).width == 10
    assert "more than 100 pixels" in refused(picture("png", 11, 10), limits=small).message


def test_the_byte_limit_applies_before_decoding_base64() -> None:
    limits = ImageLimits(max_bytes=1000)
    with pytest.raises(InvalidRequest, match="--max-image-mib"):
        decode_base64("A" * 2000, REF, limits)
    assert "--max-image-mib" in refused(b"\x89PNG\r\n\x1a\n" + b"\0" * 1001, limits=limits).message


def test_a_data_url_gives_its_media_type() -> None:
    assert split_data_url(ImageRef("data:Image/PNG;base64,QUJD", "p")) == ("image/png", "QUJD")
    assert split_data_url(ImageRef("QUJD", "p")) == (None, "QUJD")
