"""Checking an image a client sent (issue 41): the bytes become an ``Image`` only once they decoded.

A mapper reads its protocol's spelling into an ``ImageRef`` (a data URL, bare base64 or a remote
URL, where it sits in the request, any declared media type); ``check_image`` takes the bytes behind
it and refuses — 400 naming the field — anything that is not a whole PNG, JPEG, GIF or WebP image
within the limits: empty, too large, of another kind or of a kind other than declared, a
decompression bomb (more pixels than the limit), truncated or corrupt. Pillow is imported when the
first image arrives (``pip install 'tinytitan[vision]'``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import warnings
from dataclasses import dataclass

from tinytitan.engine.errors import InvalidRequest, Unsupported
from tinytitan.engine.request.images import Image

__all__ = [
    "MEDIA_TYPES",
    "ImageLimits",
    "ImageRef",
    "check_image",
    "decode_base64",
    "is_remote",
    "split_data_url",
    "too_large",
]

MEDIA_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}
_ALIASES = {"image/jpg": "image/jpeg"}
URL_FLAG = "--allow-image-urls"


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """What a request's images may be (serve's ``--max-images``, ``--max-image-mib``,
    ``--max-image-pixels``, ``--allow-image-urls``; the README's "Vision models" says the defaults)."""

    max_images: int = 20  # per request, every turn together
    max_bytes: int = 20 * 1024 * 1024  # one image's encoded bytes
    max_pixels: int = 40_000_000  # width × height: more is refused before a pixel is decoded
    fetch_urls: bool = False  # fetch http(s) image URLs (off: a remote URL is refused, no SSRF)
    fetch_timeout: float = 10.0  # seconds for a whole fetch


@dataclass(frozen=True, slots=True)
class ImageRef:
    """An image as the client sent it, before its bytes are checked."""

    url: str  # a data URL, bare base64, or an http(s) URL
    param: str  # where ``url`` sits in the request, as the client spells it
    media_type: str | None = None  # declared beside the data (Messages' ``source.media_type``)
    media_param: str | None = None  # where that declaration sits
    detail: str | None = None  # Chat / Responses ``detail``


def is_remote(url: str) -> bool:
    return url[:8].lower().startswith(("http://", "https://"))


def split_data_url(ref: ImageRef) -> tuple[str | None, str]:
    """A ``data:`` URL's media type and base64 payload; bare base64 is (None, itself)."""
    url = ref.url
    if url[:5].lower() != "data:":
        return None, url
    head, comma, payload = url.partition(",")
    if not comma or not head.lower().endswith(";base64"):
        raise InvalidRequest(
            "an image data URL must be base64: data:<media type>;base64,<data>", param=ref.param, code="invalid_image"
        )
    return head[5:-7].strip().lower() or None, payload


def decode_base64(payload: str, ref: ImageRef, limits: ImageLimits) -> bytes:
    """The bytes of a base64 payload; too long (before decoding) or not base64 → 400 naming ``ref``."""
    if len(payload) > (limits.max_bytes // 3 + 1) * 4 + 64:
        raise too_large(ref, limits)
    try:
        return base64.b64decode("".join(payload.split()), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("the image data is not valid base64", param=ref.param, code="invalid_image") from None


def too_large(ref: ImageRef, limits: ImageLimits) -> InvalidRequest:
    mib = round(limits.max_bytes / (1024 * 1024), 3)
    return InvalidRequest(
        f"the image is larger than {mib:g} MiB (the server's --max-image-mib)", param=ref.param, code="value_too_large"
    )


def _sniff(data: bytes) -> str | None:
    """The media type the bytes say they are (their signature), or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _declared(ref: ImageRef, declared: str | None) -> str | None:
    if declared is None:
        return None
    media = _ALIASES.get(declared.strip().lower(), declared.strip().lower())
    if media not in MEDIA_TYPES:
        raise InvalidRequest(
            f"image media type '{declared}' is not supported; send image/png, image/jpeg, image/gif or image/webp",
            param=ref.media_param or ref.param,
            code="invalid_image",
        )
    return media


def check_image(data: bytes, ref: ImageRef, limits: ImageLimits, declared: str | None = None) -> Image:
    """``data`` as a checked ``Image``, or a 400 naming ``ref`` that says what is wrong with it."""
    declared = _declared(ref, declared if declared is not None else ref.media_type)
    if not data:
        raise InvalidRequest("the image is empty", param=ref.param, code="invalid_image")
    if len(data) > limits.max_bytes:
        raise too_large(ref, limits)
    media = _sniff(data)
    if media is None:
        raise InvalidRequest("the image is not a PNG, JPEG, GIF or WebP image", param=ref.param, code="invalid_image")
    if declared is not None and declared != media:
        raise InvalidRequest(
            f"the image is declared {declared} but its bytes are {MEDIA_TYPES[media]}",
            param=ref.media_param or ref.param,
            code="invalid_image",
        )
    width, height = _decode(data, ref, limits)
    digest = hashlib.sha256(data).hexdigest()
    return Image(data, media, digest, width, height, ref.detail)


def _decode(data: bytes, ref: ImageRef, limits: ImageLimits) -> tuple[int, int]:
    """Decode the (first frame of the) image whole: its size, once its pixel count is within the limit."""
    try:
        from PIL import Image as Pillow
    except ImportError:  # pragma: no cover - the vision extra brings it
        raise Unsupported("image input needs Pillow: pip install 'tinytitan[vision]'") from None
    bomb = InvalidRequest(
        f"the image has more than {limits.max_pixels:,} pixels (the server's --max-image-pixels)",
        param=ref.param,
        code="value_too_large",
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Pillow.DecompressionBombWarning)
            with Pillow.open(io.BytesIO(data)) as picture:
                width, height = picture.size
                if width * height > limits.max_pixels:
                    raise bomb
                picture.load()  # every byte decoded: a truncated or corrupt image fails here
    except InvalidRequest:
        raise
    except (Pillow.DecompressionBombError, Pillow.DecompressionBombWarning):
        raise bomb from None
    except Exception as exc:
        raise InvalidRequest(
            f"the image could not be decoded ({_reason(exc)})", param=ref.param, code="invalid_image"
        ) from None
    if width < 1 or height < 1:
        raise InvalidRequest("the image has no pixels", param=ref.param, code="invalid_image")
    return width, height


def _reason(exc: Exception) -> str:
    if type(exc).__name__ == "UnidentifiedImageError":  # Pillow's word for a header it cannot read
        return "its header is corrupt or cut short"
    text = re.sub(r"\s*<[^>]*>", "", str(exc)).strip() or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."
