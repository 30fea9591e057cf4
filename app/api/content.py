"""Chat messages and images in a request: roles, OpenAI content parts (text and base64 image_url parts, in
order) and /v1/decide's `images` field. Remote image URLs are refused, never fetched."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from decider.engine.model.chat_template import Message
from decider.engine.core.errors import SettingsError
from decider.engine.constrained.tools import ToolCall
from decider.engine.vision.preprocess import resize

from ..images import MAX_IMAGES, decode_data_url
from .errors import field_error, located_error
from .fields import Strict

MAX_IMAGES_PER_REQUEST = MAX_IMAGES  # over all the messages: the request's ImageBudget counts them

ROLES = ("system", "user", "assistant", "tool")
DETAILS = ("auto", "low", "high")  # OpenAI's image_url.detail
LOW_DETAIL_PIXELS = 512 * 512  # OpenAI's "low": the picture seen as at most 512×512 pixels


def _role(value: object) -> str:
    if value == "developer":
        return "system"  # OpenAI's newer name for the system message
    if value not in ROLES:
        raise located_error("invalid_value", f" must be system, developer, user, assistant or tool (got {value!r:.40})")
    return value


def _tool_calls(value: object) -> tuple[ToolCall, ...]:
    """An assistant message's earlier calls: [{"id", "type": "function", "function": {"name", "arguments"}}]."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise located_error("invalid_type", " must be a list of tool calls")
    calls = []
    for index, item in enumerate(value):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not isinstance(function.get("arguments"), str):
            raise located_error("invalid_value", f'[{index}] must be {{"id": ..., "type": "function", "function": {{"name": ..., "arguments": "<JSON>"}}}}')
        try:
            arguments = json.loads(function["arguments"])
        except ValueError:
            raise located_error("invalid_value", f"[{index}].function.arguments must be a JSON object as text") from None
        if not isinstance(arguments, dict):
            raise located_error("invalid_value", f"[{index}].function.arguments must be a JSON object as text")
        calls.append(ToolCall(function["name"], json.dumps(arguments, ensure_ascii=False), str(item.get("id", ""))))
    return tuple(calls)


def _content(value: object) -> str | tuple:
    """A string, or OpenAI content parts: text parts and image_url parts (base64 data URLs), in order.
    Text-only parts join into one string; with an image, the parts stay in order (text and pixels)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: list = []
        for index, part in enumerate(value):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                if parts and isinstance(parts[-1], str):
                    parts[-1] += part["text"]
                else:
                    parts.append(part["text"])
            elif kind == "image_url":
                parts.append(_image_part(part.get("image_url"), index))
            else:
                raise located_error("invalid_value", f'[{index}]: only text parts ({{"type": "text", "text": ...}}) and '
                                    'image_url parts ({"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}) '
                                    "are supported")
        return "".join(parts) if all(isinstance(p, str) for p in parts) else tuple(parts)
    raise located_error("invalid_type", " must be a string or a list of content parts")


def _image_part(value: object, index: int):
    url = value.get("url") if isinstance(value, dict) else value
    if isinstance(value, dict) and set(value) - {"url", "detail"}:
        raise located_error("invalid_value", f"[{index}].image_url: only url and detail are supported")
    detail = (value.get("detail") or "auto") if isinstance(value, dict) else "auto"
    if detail not in DETAILS:
        raise located_error("invalid_value", f"[{index}].image_url.detail must be auto, low or high (got {detail!r:.20})")
    try:
        pixels = decode_data_url(url, "image_url")
    except SettingsError as exc:
        raise located_error("invalid_value", f"[{index}].{exc}") from None
    return _low_detail(pixels) if detail == "low" else pixels


def _low_detail(pixels):
    """A picture scaled (aspect kept) into LOW_DETAIL_PIXELS: fewer image tokens, as OpenAI's "low" promises; the
    vision encoder's own budget and a request's image_pixels still apply after it."""
    height, width = pixels.shape[:2]
    if height * width <= LOW_DETAIL_PIXELS:
        return pixels
    factor = math.sqrt(LOW_DETAIL_PIXELS / (height * width))
    return resize(pixels, max(1, int(height * factor)), max(1, int(width * factor)))


def parse_images(value: object) -> tuple:
    """/v1/decide's images: base64 data URLs (remote URLs are refused, never fetched)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise field_error("invalid_type", "images must be a list of base64 data URLs (data:image/png;base64,...)")
    if len(value) > MAX_IMAGES_PER_REQUEST:
        raise field_error("invalid_value", f"images: at most {MAX_IMAGES_PER_REQUEST}")
    try:
        return tuple(decode_data_url(url, f"images[{i}]") for i, url in enumerate(value))
    except SettingsError as exc:
        raise field_error("invalid_value", str(exc)) from None


class ChatMessage(Strict):
    role: Annotated[str, BeforeValidator(_role)]
    content: Annotated[Any, BeforeValidator(_content), Field(default=None, validate_default=True)]
    name: Annotated[str | None, BeforeValidator(lambda v: v if v is None or isinstance(v, str) else _bad_name())] = None
    tool_calls: Annotated[tuple[ToolCall, ...], BeforeValidator(_tool_calls), Field(default=())]
    tool_call_id: Annotated[str | None, BeforeValidator(lambda v: v if v is None or isinstance(v, str) else _bad_name())] = None
    # an earlier turn's reasoning, as vLLM takes it: Qwen's template keeps it after the last user query
    reasoning_content: Annotated[str | None, BeforeValidator(lambda v: v if v is None or isinstance(v, str) else _bad_name())] = None

    @model_validator(mode="before")
    @classmethod
    def _object(cls, value: object) -> object:
        if not isinstance(value, dict):
            raise located_error("invalid_type", " must be an object")
        unknown = sorted(set(value) - set(cls.model_fields))
        if unknown:  # audio, refusal…: OpenAI features this server does not have
            raise located_error("unsupported_parameter", " is not supported", sub=unknown[0])
        if value.get("content") is None and value.get("tool_calls") and value.get("role") == "assistant":
            value = {**value, "content": ""}  # an assistant turn that only called functions
        for field, role in (("tool_calls", "assistant"), ("tool_call_id", "tool"), ("reasoning_content", "assistant")):
            if field in value and value.get("role") != role:
                raise located_error("unsupported_parameter", f" is only for {role} messages", sub=field)
        return value

    def to_message(self) -> Message:
        return Message(self.role, self.content, self.tool_calls, self.reasoning_content)


def _bad_name():
    raise located_error("invalid_type", " must be a string")


def check_messages(value: object) -> object:
    if not isinstance(value, list) or not value:
        kind = "invalid_type" if not isinstance(value, list) else "invalid_value"
        raise field_error(kind, "messages must be a non-empty list", "messages")
    return value
