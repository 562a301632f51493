"""An image part as every protocol's mapper gives it to the engine (issue 41).

Chat ``image_url`` parts, Responses ``input_image`` parts and Messages ``image`` blocks each become
``Part("image", ref=ImageRef)``: what the client sent and where, the part named by ``source``. The
engine checks the bytes (``engine/request/image_load.py``) for a model with vision input.
"""

from __future__ import annotations

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.events import Source
from tinytitan.engine.request import Part
from tinytitan.engine.request.image_check import ImageRef
from tinytitan.engine.request.validate import IMAGE

__all__ = ["DETAILS", "image_part"]

DETAILS = ("auto", "low", "high")


def image_part(
    url: str,
    param: str,
    where: str,
    *,
    detail: str | None = None,
    detail_param: str | None = None,
    media_type: str | None = None,
    media_param: str | None = None,
) -> Part:
    """An image to check: ``url`` (a data URL, base64 or an http(s) URL) sits at ``param``, the part
    at ``where``; ``detail`` (Chat, Responses) is one of auto, low, high."""
    if detail is not None and detail not in DETAILS:
        raise InvalidRequest(
            f"detail '{detail}' is not one of {', '.join(DETAILS)}",
            param=detail_param or f"{param.rpartition('.')[0] or where}.detail",
        )
    if not url:
        raise InvalidRequest("the image is empty: send a data URL or base64 data", param=param, code="invalid_image")
    ref = ImageRef(url, param, media_type=media_type, media_param=media_param, detail=detail)
    return Part(IMAGE, source=Source(where), ref=ref)
