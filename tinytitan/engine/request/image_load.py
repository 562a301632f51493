"""A request's images, from what the client sent to checked ``Image`` parts (issue 41).

The mappers leave each image as a ``Part("image", ref=ImageRef)``; ``load_images`` counts them
against the limit, fetches a remote URL only when the server allows it (``--allow-image-urls``:
otherwise a local server that fetches any URL a request names is an SSRF hole), and checks every
image's bytes off the event loop (``blocking``: the engine's CPU pool). Each error is a 400 naming
the part or the field that holds the image.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request import ChatRequest, Message, Part
from tinytitan.engine.request.image_check import (
    URL_FLAG,
    ImageLimits,
    ImageRef,
    check_image,
    decode_base64,
    is_remote,
    split_data_url,
    too_large,
)

__all__ = ["has_images", "load_images"]

Blocking = Callable[..., Awaitable[Any]]


def _pending(message: Message) -> bool:
    return isinstance(message.content, tuple) and any(p.ref is not None for p in message.content)


def has_images(request: ChatRequest) -> bool:
    """Whether any message of ``request`` holds an image not yet checked."""
    return any(_pending(m) for m in request.messages)


async def load_images(request: ChatRequest, limits: ImageLimits, blocking: Blocking) -> ChatRequest:
    """``request`` with every image checked (``Part.image``); unchanged when it has none."""
    if not has_images(request):
        return request
    seen = 0
    messages: list[Message] = []
    for message in request.messages:
        if not _pending(message):
            messages.append(message)
            continue
        assert isinstance(message.content, tuple)
        parts: list[Part] = []
        for part in message.content:
            if part.ref is None:
                parts.append(part)
                continue
            seen += 1
            if seen > limits.max_images:
                raise InvalidRequest(
                    f"at most {limits.max_images} images are allowed per request (the server's --max-images)",
                    param=part.source.path if part.source else part.ref.param,
                    code="value_too_large",
                )
            image = await _load(part.ref, limits, blocking)
            parts.append(replace(part, image=image, ref=None))
        messages.append(replace(message, content=tuple(parts)))
    return replace(request, messages=tuple(messages))


async def _load(ref: ImageRef, limits: ImageLimits, blocking: Blocking) -> Any:
    if is_remote(ref.url):
        if not limits.fetch_urls:
            raise InvalidRequest(
                f"image URLs are not fetched by this server unless it runs with {URL_FLAG}; "
                "send the image as base64 data instead",
                param=ref.param,
                code="invalid_image",
            )
        data = await _fetch(ref, limits)  # its kind is what its bytes say (a web server's header may be wrong)
        return await blocking(check_image, data, ref, limits)
    if ref.url[:5].lower() != "data:" and ":" in ref.url[:12]:
        raise InvalidRequest(
            "an image URL must be a data: URL, base64 data or an http(s) URL", param=ref.param, code="invalid_image"
        )
    declared, payload = split_data_url(ref)
    data = await blocking(decode_base64, payload, ref, limits)
    return await blocking(check_image, data, ref, limits, ref.media_type or declared)


async def _fetch(ref: ImageRef, limits: ImageLimits) -> bytes:
    """The bytes at ``ref.url`` (at most the size limit, within the timeout); every failure is a 400
    naming the field."""
    import httpx

    def failed(why: str) -> InvalidRequest:
        return InvalidRequest(f"the image URL could not be fetched: {why}", param=ref.param, code="invalid_image")

    timeout = httpx.Timeout(limits.fetch_timeout)
    try:
        async with (
            httpx.AsyncClient(timeout=timeout, follow_redirects=True, max_redirects=5) as client,
            client.stream("GET", ref.url) as response,
        ):
            if response.status_code != 200:
                raise failed(f"HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limits.max_bytes:
                    raise too_large(ref, limits)
    except httpx.TimeoutException:
        raise failed(f"no answer within {limits.fetch_timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise failed(str(exc) or type(exc).__name__) from None
    return bytes(body)
