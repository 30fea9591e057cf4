"""The API's request classes: one per endpoint, with its validation and a `to_request()` into the
engine's request types (the way vLLM's OpenAI protocol module does it).

Unknown fields are refused (OpenAI does the same: a typo never passes silently), known OpenAI fields
the engine cannot honour are refused unless neutral, and every refusal names its field. Ranges that
the engine's own settings check (sampling, reasoning budget) are checked there, once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, PrivateAttr, ValidationInfo, model_validator

from decider.engine.decisions.types import DecisionRequest
from decider.engine.core.errors import SettingsError
from decider.engine.generation.generate import GenerationRequest
from decider.engine.generation.logit_bias import check_logit_bias
from decider.engine.core.logprobs import MAX_COMPLETION_LOGPROBS, MAX_TOP_LOGPROBS, NORMALIZATIONS
from decider.engine.core.settings import DECISION_SETTINGS, SamplingSettings
from decider.engine.constrained.structured import ResponseFormat, check_grammar, grammar_tokenizer
from decider.engine.constrained.tool_grammar import tool_grammar
from decider.engine.constrained.tools import TOOL_CHOICES, TOOLS_SHAPE, Tool, tag_ids, tools_from_openai

from ..requests import SAMPLING_FIELDS, sampling_from
from .content import ChatMessage, check_messages, parse_images
from .errors import ApiError, field_error
from .tool_checks import check_tool_messages, check_tool_schemas
from .fields import (
    Boolean, Ignored, Metadata, Name, Refused, Strict, Text, absent, empty, int_in, one, refused,
)
from .setting_fields import DecisionFields, ImagePixels, SamplingFields

MODEL_ALIAS = "decider"  # always accepted as the model name, whatever model is loaded
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
MAX_GUIDED_CHOICES = 64
MAX_LOGIT_BIAS = 1024  # tokens in one logit_bias
MAX_PROMPTS = 128  # prompts in one /v1/completions request (lm-eval sends its batch size)
MAX_CHOICES = 16  # n: completions drawn from one prefill


def _sampling(request: BaseModel, defaults: SamplingSettings) -> SamplingSettings:
    return sampling_from({name: getattr(request, name) for name in SAMPLING_FIELDS}, defaults)


# ----- shared pieces -----


def _stop(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise field_error("invalid_type", "stop must be a string or a list of up to 4 strings")
    if len(value) > 4 or any(not s for s in value):
        raise field_error("invalid_value", "stop takes up to 4 non-empty strings")
    return tuple(value)


Stop = Annotated[tuple[str, ...], BeforeValidator(_stop), Field(default=())]


class StreamOptions(Strict):
    include_usage: Boolean = None
    include_obfuscation: Any = None  # OpenAI's padding switch: nothing to pad here

    @model_validator(mode="before")
    @classmethod
    def _object(cls, value: object) -> object:
        if not isinstance(value, dict):
            raise field_error("invalid_type", "stream_options must be an object", "stream_options")
        unknown = sorted(set(value) - set(cls.model_fields))
        if unknown:
            raise field_error("unknown_parameter", f"stream_options.{unknown[0]} is not supported", "stream_options")
        return value


def _logit_bias(value: object) -> tuple[tuple[int, float], ...]:
    """OpenAI's {"token id": bias}; the ids' range is checked against the model in to_request."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise field_error("invalid_type", 'logit_bias must be an object of {"token id": bias}')
    if len(value) > MAX_LOGIT_BIAS:
        raise field_error("invalid_value", f"logit_bias takes at most {MAX_LOGIT_BIAS} tokens (got {len(value)})")
    pairs = []
    for key, bias in value.items():
        if not key.isascii() or not key.isdigit():
            raise field_error("invalid_value", f"logit_bias keys must be token ids (got {key!r:.40})")
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not -100 <= bias <= 100:
            raise field_error("invalid_value", f"logit_bias[{key}] must be a number in -100..100 (got {bias!r:.40})")
        pairs.append((int(key), float(bias)))
    return tuple(sorted(pairs))


def _response_format(value: object) -> ResponseFormat | None:
    if value is None:
        return None
    try:
        return ResponseFormat.from_openai(value)
    except SettingsError as exc:
        raise field_error("invalid_value", str(exc), "response_format") from None


class _Generation(SamplingFields):
    model: Name = None
    stop: Stop
    stream: Boolean = None
    stream_options: StreamOptions | None = None
    logit_bias: Annotated[tuple[tuple[int, float], ...], BeforeValidator(_logit_bias), Field(default=())]
    response_format: Annotated[ResponseFormat | None, BeforeValidator(_response_format)] = None
    n: Annotated[int | None, int_in(1, MAX_CHOICES)] = None  # several draws from one prefill of the prompt
    user: Ignored
    metadata: Metadata
    store: Ignored
    service_tier: Ignored

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def _output_controls(self, tokenizer, vocab_size: int) -> dict:
        """logit_bias checked against the model's vocabulary, and the JSON grammar's tokenizer built
        here, outside the engine lock (seconds at a real vocabulary, once per model)."""
        controls = {"logit_bias": check_logit_bias(self.logit_bias, vocab_size), "response_format": self.response_format}
        if self.response_format is not None:
            try:
                check_grammar(self.response_format, tokenizer)  # builds the grammar's tokenizer too (once per model)
            except SettingsError as exc:
                raise ApiError("invalid_value", str(exc), param="response_format") from None
        return controls


# ----- /v1/chat/completions -----


class ChatTemplateKwargs(Strict):
    enable_thinking: Boolean = None

    @model_validator(mode="before")
    @classmethod
    def _object(cls, value: object) -> object:
        if not isinstance(value, dict):
            raise field_error("invalid_type", "chat_template_kwargs must be an object", "chat_template_kwargs")
        unknown = sorted(set(value) - {"enable_thinking"})
        if unknown:
            raise field_error(
                "invalid_value", f"chat_template_kwargs.{unknown[0]} is not supported (only enable_thinking)",
                "chat_template_kwargs",
            )
        return value


def _guided_choice(value: object, info: ValidationInfo) -> tuple[str, ...] | None:
    if value is None:
        return None
    if (not isinstance(value, list) or not 2 <= len(value) <= MAX_GUIDED_CHOICES
            or not all(isinstance(v, str) and v for v in value)):
        raise field_error("invalid_value", f"guided_choice must be a list of 2 to {MAX_GUIDED_CHOICES} non-empty strings")
    return tuple(value)


def _tools(value: object) -> tuple[Tool, ...] | None:
    """OpenAI's tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}]."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise field_error("invalid_type", f"tools must be {TOOLS_SHAPE}")
    try:
        return tools_from_openai(value)
    except SettingsError as exc:
        raise field_error("invalid_value", str(exc)) from None


def _tool_choice(value: object) -> str | None:
    """"none", "auto", "required", or a function's name (from {"type": "function", "function": {"name": ...}})."""
    if value is None or value in TOOL_CHOICES:
        return value
    function = value.get("function") if isinstance(value, dict) and value.get("type") == "function" else None
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return function["name"]
    raise field_error("invalid_value", 'tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}')


class ChatCompletionRequest(_Generation):
    messages: Annotated[list[ChatMessage], BeforeValidator(check_messages), Field(default=None, validate_default=True)]
    max_tokens: Annotated[int | None, int_in(1)] = None
    max_completion_tokens: Annotated[int | None, int_in(1)] = None
    logprobs: Boolean = None
    top_logprobs: Annotated[int | None, int_in(0, MAX_TOP_LOGPROBS)] = None
    think: Boolean = None
    enable_thinking: Boolean = None
    chat_template_kwargs: ChatTemplateKwargs | None = None
    guided_choice: Annotated[tuple[str, ...] | None, BeforeValidator(_guided_choice)] = None  # vLLM's extension
    tools: Annotated[tuple[Tool, ...] | None, BeforeValidator(_tools)] = None
    tool_choice: Annotated[str | None, BeforeValidator(_tool_choice)] = None
    parallel_tool_calls: Boolean = None
    image_pixels: ImagePixels = None  # Decider's extension: the pictures' pixel budget (absent: the model's own)
    functions: Annotated[Refused, refused(empty([]), "the deprecated functions field: use tools")]
    function_call: Annotated[Refused, refused(empty("none"), "the deprecated function_call field: use tool_choice")]
    _tool_format: ResponseFormat | None = PrivateAttr(None)
    modalities: Annotated[Refused, refused(empty(["text"]), "text output only")]
    audio: Annotated[Refused, refused(absent, "text output only")]
    prediction: Annotated[Refused, refused(absent, "no predicted outputs")]
    web_search_options: Annotated[Refused, refused(absent, "no web search")]
    reasoning_effort: Annotated[Refused, refused(absent, "use think (or enable_thinking) to turn reasoning on")]

    @model_validator(mode="after")
    def _together(self) -> "ChatCompletionRequest":
        if self.max_tokens is not None and self.max_completion_tokens is not None and self.max_tokens != self.max_completion_tokens:
            raise field_error("invalid_value", "give max_tokens or max_completion_tokens, not both", "max_completion_tokens")
        if self.top_logprobs is not None and not self.logprobs:
            raise field_error("invalid_value", "top_logprobs needs logprobs: true", "top_logprobs")
        given = self._think_switches()
        if len(set(given.values())) > 1:
            raise field_error("invalid_value", f"{' and '.join(given)} disagree", "think")
        if self.guided_choice is not None and self.thinking:
            raise field_error("invalid_value", "guided_choice constrains the first answer token: turn thinking off", "guided_choice")
        if self.response_format is not None and self.thinking:
            raise field_error("invalid_value", "response_format constrains the answer from its first token: turn thinking off",
                              "response_format")
        if self.response_format is not None and self.guided_choice is not None:
            raise field_error("invalid_value", "give response_format or guided_choice, not both", "response_format")
        self._check_tools()
        return self

    def _check_tools(self) -> None:
        for index, message in enumerate(self.messages):  # as OpenAI: a result answers a call made just before
            before = self.messages[index - 1] if index else None
            if message.role == "tool" and not (before and (before.role == "tool" or before.tool_calls)):
                raise field_error("invalid_value", f"messages[{index}]: a tool message must follow an assistant message "
                                  "with tool_calls", f"messages[{index}].role")
        check_tool_messages(self.messages)  # ids, names and results matched to calls (app/api/tool_checks.py)
        choice = self.tool_choice
        if self.tools is None:
            if choice not in (None, "none"):
                raise field_error("invalid_value", "tool_choice needs tools", "tool_choice")
            return
        check_tool_schemas(self.tools)  # every tool, whatever tool_choice says: a 400 names tools[i]
        if choice not in TOOL_CHOICES and choice is not None and choice not in {t.name for t in self.tools}:
            raise field_error("invalid_value", f"tool_choice names {choice!r:.70}, which is not in tools", "tool_choice")
        if self.calls_tools and (self.response_format is not None or self.guided_choice is not None):
            raise field_error("invalid_value", "tools constrain the answer: give them without response_format or guided_choice", "tools")
        if self.calls_tools and self.thinking:
            raise field_error("invalid_value", "a tool call is constrained from the answer's first token: turn thinking off "
                              "(or tool_choice: none)", "tools")
        if self.calls_tools:
            try:  # compiled here, once: a schema llguidance cannot use is a 400 before anything queues
                self._tool_format = tool_grammar(self.tools, self.tool_choice or "auto", self.parallel_tool_calls is not False)
            except SettingsError as exc:
                raise field_error("invalid_value", str(exc), "tools") from None

    @property
    def calls_tools(self) -> bool:
        """Functions offered and the model may call them (tool_choice is not "none")."""
        return self.tools is not None and self.tool_choice != "none"

    def _think_switches(self) -> dict[str, bool]:
        """Qwen's reasoning switch, under each name clients use for it."""
        given = {name: getattr(self, name) for name in ("think", "enable_thinking") if getattr(self, name) is not None}
        if self.chat_template_kwargs is not None and self.chat_template_kwargs.enable_thinking is not None:
            given["chat_template_kwargs.enable_thinking"] = self.chat_template_kwargs.enable_thinking
        return given

    @property
    def thinking(self) -> bool:
        return next(iter(self._think_switches().values()), False)

    def texts(self) -> list[str]:
        """Every text the prompt renders, for the size checks before tokenizing: the messages' text (image parts
        left out), the offered tools' signatures (descriptions and schemas) and earlier calls' names and arguments.
        A 7.7 MB description once skipped these checks and was tokenized whole (29 s, 1.9 GB)."""
        texts = []
        for message in self.messages:
            parts = (message.content,) if isinstance(message.content, str) else message.content
            texts += [part for part in parts if isinstance(part, str)]
            texts += [text for call in message.tool_calls for text in (call.name, call.arguments)]
        texts += [json.dumps(tool.signature(), ensure_ascii=False) for tool in self.tools or ()]
        return texts

    @property
    def limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    def to_request(self, service) -> GenerationRequest:
        """Tokenize (the chat template) and check the prompt against the context: no engine lock needed."""
        top = (self.top_logprobs or 0) if self.logprobs else None
        messages = [m.to_message() for m in self.messages]
        request = service.chat_request(messages, self.thinking, _sampling(self, service.defaults), self.limit or 1, top, self.stop,
                                       tools=self.tools or (), image_pixels=self.image_pixels)
        runner = service.runner
        runner.check_prompt(request.prompt_ids)
        request = replace(request, **self._output_controls(runner.tokenizer, runner.vocab_size))
        if self._tool_format is not None:  # checked at validation; compiled again with this tokenizer's tag ids
            grammar_tokenizer(runner.tokenizer)
            grammar = tool_grammar(self.tools or (), self.tool_choice or "auto", self.parallel_tool_calls is not False,
                                   tag_ids(runner.tokenizer))
            request = replace(request, response_format=grammar)
        if self.guided_choice is not None:  # answer with one of these (single-token) strings
            return replace(request, allowed=self._choice_ids(runner.tokenizer, self.guided_choice), max_tokens=1)
        if self.limit is None:  # as OpenAI: bounded only by the context
            return replace(request, max_tokens=runner.context_length - len(request.prompt_ids))
        return request

    def _choice_ids(self, tokenizer, choices: tuple[str, ...]) -> tuple[int, ...]:
        ids = []
        for choice in choices:
            encoded = tokenizer.encode_text(choice)
            if len(encoded) != 1:
                raise ApiError("unsupported_parameter", f"guided_choice {choice!r} is {len(encoded)} tokens; each choice must be one token",
                               param="guided_choice")
            ids.append(encoded[0])
        if len(set(ids)) != len(ids):
            raise ApiError("invalid_value", "guided_choice has duplicate choices", param="guided_choice")
        return tuple(ids)


# ----- /v1/completions -----

Prompt = str | tuple[int, ...]  # text, or token ids as the client's own tokenizer made them
PROMPT_SHAPES = "a string, a list of strings, a list of token ids or a list of token-id lists"


def _token_ids(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _prompts(value: object) -> tuple[Prompt, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list):
        raise field_error("invalid_type", f"prompt must be {PROMPT_SHAPES}")
    if not value:
        raise field_error("invalid_value", "prompt must not be an empty list")
    if _token_ids(value):
        return (tuple(value),)
    if all(isinstance(v, str) for v in value):
        prompts: tuple[Prompt, ...] = tuple(value)
    elif all(_token_ids(v) for v in value):
        prompts = tuple(tuple(v) for v in value)
    else:
        raise field_error("invalid_type", f"prompt must be {PROMPT_SHAPES} (each list non-empty)")
    if len(prompts) > MAX_PROMPTS:
        raise field_error("invalid_value", f"prompt takes at most {MAX_PROMPTS} prompts per request (got {len(prompts)})")
    return prompts


def _completion_logprobs(value: object, info: ValidationInfo) -> object:
    if isinstance(value, bool):
        raise field_error("invalid_type", f"logprobs must be an integer in 0..{MAX_COMPLETION_LOGPROBS} (the number of alternatives)")
    return value


def _normalization(value: object) -> object:
    if value is not None and value not in NORMALIZATIONS:
        raise field_error("invalid_value", f"logprob_normalization must be one of {', '.join(map(repr, NORMALIZATIONS))} "
                          f"(got {value!r})")
    return value


class CompletionRequest(_Generation):
    prompt: Annotated[tuple[Prompt, ...], BeforeValidator(_prompts), Field(default=None, validate_default=True)]
    max_tokens: Annotated[int | None, int_in(0)] = None
    logprobs: Annotated[int | None, int_in(0, MAX_COMPLETION_LOGPROBS), BeforeValidator(_completion_logprobs)] = None
    echo: Boolean = None
    # Decider's extension: what prompt logprobs are normalised over (engine/core/logprobs.py); None: the server's default
    logprob_normalization: Annotated[str | None, BeforeValidator(_normalization)] = None
    best_of: Annotated[Refused, refused(one, "best_of=1 only (n draws several completions from one prefill)")]
    suffix: Annotated[Refused, refused(empty(""), "no insertion (suffix)")]

    @model_validator(mode="after")
    def _together(self) -> "CompletionRequest":
        if self.stream and (self.echo or len(self.prompt) > 1 or self.max_tokens == 0 or (self.n or 1) > 1):
            raise field_error(
                "unsupported_parameter", "stream is not supported with echo, several prompts, n > 1 or max_tokens 0", "stream"
            )
        return self

    @property
    def limit(self) -> int:
        return COMPLETIONS_DEFAULT_MAX_TOKENS if self.max_tokens is None else self.max_tokens

    @property
    def scores_prompt(self) -> bool:
        """Prompt logprobs are asked for: echo with logprobs (one all-position pass over each prompt)."""
        return bool(self.echo) and self.logprobs is not None

    def to_request(self, service) -> list["CompletionJob"]:
        """One job per prompt, tokenized and checked against the context: no engine lock needed."""
        runner = service.runner
        controls = self._output_controls(runner.tokenizer, runner.vocab_size) if self.limit > 0 else {}
        jobs = []
        for index, prompt in enumerate(self.prompt):
            param = "prompt" if len(self.prompt) == 1 else f"prompt[{index}]"
            if isinstance(prompt, str):
                ids, text = tuple(runner.tokenizer.encode_raw(prompt)), prompt
            else:
                bad = next((i for i in prompt if not 0 <= i < runner.vocab_size), None)
                if bad is not None:
                    raise ApiError("invalid_value", f"{param} has token id {bad}, outside 0..{runner.vocab_size - 1}", param=param)
                ids, text = prompt, None
            runner.check_prompt(ids)
            generation = None
            if self.limit > 0:
                # a snapshot at the prompt's end: n > 1 draws, and the next request with this prompt, prefill nothing
                generation = GenerationRequest(ids, _sampling(self, service.defaults), self.limit, think=False,
                                               top_logprobs=self.logprobs, stop=self.stop, end_of_turn_entry=True,
                                               checkpoints=(len(ids),), **controls)
            jobs.append(CompletionJob(ids, text, generation))
        return jobs


@dataclass(frozen=True)
class CompletionJob:
    """One prompt of a completions request: its ids, its text as sent (None for token ids) and the
    generation to run after it (None for max_tokens 0: score or echo only)."""

    ids: tuple[int, ...]
    text: str | None
    generation: GenerationRequest | None


# ----- /tokenize, /detokenize -----


def _text(value: object, info: ValidationInfo) -> object:
    if not isinstance(value, str):
        raise field_error("invalid_type", f"{info.field_name} must be a string")
    return value


def _tokens(value: object) -> object:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise field_error("invalid_type", "tokens must be a list of token ids")
    return tuple(value)


def _chat_messages(value: object) -> object:
    return None if value is None else check_messages(value)


class TokenizeRequest(Strict):
    """vLLM's /tokenize: a prompt, or its chat form (messages, tools, add_generation_prompt) rendered exactly as a
    chat request's prompt is (app/api/tokens.py chat_tokenize)."""

    model: Name = None
    prompt: Annotated[str | None, BeforeValidator(_text)] = None
    messages: Annotated[list[ChatMessage] | None, BeforeValidator(_chat_messages)] = None
    tools: Annotated[tuple[Tool, ...] | None, BeforeValidator(_tools)] = None
    add_generation_prompt: Boolean = None  # vLLM's default: true
    chat_template_kwargs: ChatTemplateKwargs | None = None
    add_special_tokens: Boolean = None
    return_token_strs: Boolean = None
    image_pixels: ImagePixels = None  # as a chat request's: the counts match what it would prefill

    @model_validator(mode="after")
    def _one_form(self) -> "TokenizeRequest":
        if (self.prompt is None) == (self.messages is None):
            raise field_error("invalid_value", "give prompt or messages (the chat form), one of them", "prompt")
        if self.messages is None and (self.tools is not None or self.add_generation_prompt is not None
                                      or self.chat_template_kwargs is not None or self.image_pixels is not None):
            raise field_error("invalid_value", "tools, add_generation_prompt, chat_template_kwargs and image_pixels go with "
                              "messages", "messages")
        if self.messages is not None:
            check_tool_messages(self.messages)
            if self.tools is not None:
                check_tool_schemas(self.tools)
        return self

    def texts(self) -> list[str]:
        """The text to bound before tokenizing (images left out)."""
        if self.messages is None:
            return [self.prompt or ""]
        parts = [p for m in self.messages for p in ((m.content,) if isinstance(m.content, str) else m.content)]
        return [p for p in parts if isinstance(p, str)]


class DetokenizeRequest(Strict):
    model: Name = None
    tokens: Annotated[tuple[int, ...], BeforeValidator(_tokens), Field(default=None, validate_default=True)]

    def check(self, vocabulary: int) -> None:
        bad = next((i for i in self.tokens if not 0 <= i < vocabulary), None)
        if bad is not None:
            raise ApiError("invalid_value", f"tokens has token id {bad}, outside 0..{vocabulary - 1}", param="tokens")


# ----- /v1/decide -----


def _options(value: object) -> object:
    if not isinstance(value, list) or not all(isinstance(o, str) for o in value):
        raise field_error("invalid_type", "options must be a list of 2 to 10 strings")
    return value


def _question(value: object) -> object:
    if not isinstance(value, str):
        raise field_error("invalid_type", "question must be a string")
    return value


class DecideRequest(DecisionFields):
    """Decider's own decision request; its answer is the JSON of `decider ask --json`."""

    model: Name = None
    question: Annotated[str, BeforeValidator(_question), Field(default=None, validate_default=True)]
    options: Annotated[tuple[str, ...], BeforeValidator(_options), Field(default=None, validate_default=True)]
    system: Text = None
    context: Text = None
    images: Annotated[tuple, BeforeValidator(parse_images), Field(default=())]

    def to_request(self, defaults: SamplingSettings) -> DecisionRequest:
        """Counts, duplicates and ranges are the DecisionRequest's own checks."""
        given = {s.name: getattr(self, s.name) for s in DECISION_SETTINGS if getattr(self, s.name) is not None}
        return DecisionRequest(
            question=self.question, options=self.options, system=self.system, context=self.context,
            sampling=_sampling(self, defaults), images=self.images, **given,
        )
