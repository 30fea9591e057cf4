"""The tokenizer over HTTP, in vLLM's shapes: /tokenize, /detokenize and /tokenizer_info.

Clients that count or build prompts in token ids (lm-evaluation-harness with its remote tokenizer,
vLLM-style scripts) use these instead of downloading the model's tokenizer from a hub.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import ApiError

# What /tokenizer_info reports from the model's tokenizer_config.json (as vLLM does), when present.
_CONFIG_KEYS = ("tokenizer_class", "eos_token", "bos_token", "pad_token", "unk_token", "add_bos_token", "add_eos_token",
                "clean_up_tokenization_spaces", "model_max_length")


def _token_text(value: object) -> str | None:
    """A special token as written in tokenizer_config.json: a string, or an AddedToken object."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _read_config(folder: Path) -> dict:
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def tokenizer_info(folder: Path, tokenizer, context_length: int) -> dict:
    """The special tokens and the chat template, as lm-eval's RemoteTokenizer reads them."""
    config = _read_config(folder)
    info = {key: config[key] for key in _CONFIG_KEYS if key in config}
    for key in ("eos_token", "bos_token", "pad_token", "unk_token"):
        info[key] = _token_text(config.get(key))
    if info["eos_token"] is None:  # no config: the chat's end of turn, which every Qwen3.5 tokenizer has
        info["eos_token"] = tokenizer.token_text(tokenizer.im_end)
    template = config.get("chat_template")
    if not isinstance(template, str):
        try:
            template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
        except OSError:
            template = None
    info["chat_template"] = template
    info["model_max_length"] = context_length  # what this server accepts, not what the tokenizer could count
    info["vocab_size"] = tokenizer.size
    return info


def tokenize(tokenizer, prompt: str, add_special_tokens: bool, token_strs: bool, context_length: int) -> dict:
    """Special tokens written in the text are honoured (as in a raw completion prompt)."""
    ids = tokenizer.encode_raw(prompt, add_special_tokens=add_special_tokens)
    if len(ids) > context_length:  # the caller refused far longer text before; this is the exact count
        raise ApiError("context_length_exceeded", f"the prompt has {len(ids)} tokens, over the model's context limit of "
                       f"{context_length}")
    return {
        "count": len(ids), "max_model_len": context_length, "tokens": ids,
        "token_strs": [tokenizer.token_text(i) for i in ids] if token_strs else None,
    }


def chat_tokenize(runner, parsed) -> dict:
    """vLLM's chat form of /tokenize: the messages (and tools) rendered as a chat request renders them, with the
    generation prompt unless add_generation_prompt is false; an image counts as its placeholder tokens."""
    from decider.engine.model.chat_template import build_chat_prompt
    from decider.engine.core.errors import SettingsError
    from decider.engine.model.vision_tokens import IMAGE_PAD, ImageToken

    kwargs = parsed.chat_template_kwargs
    think = bool(kwargs and kwargs.enable_thinking)
    try:
        prompt = build_chat_prompt(runner.tokenizer, [m.to_message() for m in parsed.messages], think,
                                   see=runner.image_tokens_within(parsed.image_pixels), tools=parsed.tools or ())
    except SettingsError as exc:
        raise ApiError("invalid_value", str(exc), param="messages") from None
    items = prompt.ids
    if parsed.add_generation_prompt is False:  # up to the last turn's end: no `<|im_start|>assistant\n<think>…`
        items = items[: len(items) - 1 - items[::-1].index(runner.tokenizer.im_start)]
    pad = runner.tokenizer.special_id(IMAGE_PAD)
    ids = [pad if isinstance(item, ImageToken) else item for item in items]
    if len(ids) > runner.context_length:
        raise ApiError("context_length_exceeded", f"the prompt has {len(ids)} tokens, over the model's context limit of "
                       f"{runner.context_length}")
    return {
        "count": len(ids), "max_model_len": runner.context_length, "tokens": ids,
        "token_strs": [runner.tokenizer.token_text(i) for i in ids] if parsed.return_token_strs else None,
    }


def detokenize(tokenizer, tokens: tuple[int, ...]) -> dict:
    return {"prompt": tokenizer.decode(list(tokens))}
