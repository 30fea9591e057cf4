"""A remote engine: decisions against any OpenAI-compatible server that returns logprobs
(vLLM, OpenVINO Model Server, llama.cpp's server, or another Decider).

The server sees the same decision prompt as a chat turn and answers one token with its top-20
alternatives. Option probabilities come from those alternatives: an option letter the server did
not list is reported with the list's lowest logprob as an upper bound, never as zero.
"""

from __future__ import annotations

import json
import math
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .decide import LABELS, Alternative, DecisionRequest, DecisionResult, OptionResult, _Clock
from .decision_prompt import load_templates, user_segments
from .errors import DeciderError, SettingsError
from .info import EngineInfo
from .logprobs import MAX_TOP_LOGPROBS

TOP_LOGPROBS = MAX_TOP_LOGPROBS  # as many alternatives as an OpenAI-compatible server may list
CONSTRAINTS = ("none", "vllm", "llama.cpp")


class RemoteError(DeciderError):
    """The server could not be reached or answered something unusable."""


@dataclass(frozen=True)
class RemoteConfig:
    base_url: str
    api_key: str | None = None
    model: str | None = None  # None: the server's first model
    timeout: float = 60.0
    constraint: str = "none"  # how to ask the server to answer with a label only

    def __post_init__(self) -> None:
        url = self.base_url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise SettingsError(f"engine URL must start with http:// or https:// (got {self.base_url!r})")
        if url.endswith("/v1"):
            url = url[:-3]
        object.__setattr__(self, "base_url", url)
        if not (isinstance(self.timeout, (int, float)) and 0 < self.timeout <= 3600):
            raise SettingsError(f"timeout must be in (0, 3600] seconds (got {self.timeout!r})")
        if self.constraint not in CONSTRAINTS:
            raise SettingsError(f"constraint must be one of {', '.join(CONSTRAINTS)} (got {self.constraint!r})")


@dataclass(frozen=True)
class ConnectionReport:
    models: list[str]
    logprobs: bool  # the server returned top_logprobs on a probe request
    detail: str


class RemoteEngine:
    def __init__(self, config: RemoteConfig):
        self.config = config
        self._model = config.model

    # ----- HTTP -----
    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        url = f"{self.config.base_url}{path}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.config.api_key:
            request.add_header("Authorization", f"Bearer {self.config.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            message = _error_message(exc.read())
            if exc.code == 401:
                raise RemoteError(f"{url}: 401 unauthorized — check the API key ({message})") from None
            raise RemoteError(f"{url}: HTTP {exc.code}: {message}") from None
        except (socket.timeout, TimeoutError):
            raise RemoteError(f"{url}: no answer within {self.config.timeout:g} s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (socket.timeout, TimeoutError)):
                raise RemoteError(f"{url}: no answer within {self.config.timeout:g} s") from None
            raise RemoteError(f"cannot reach {self.config.base_url}: {exc.reason}") from None
        except OSError as exc:
            raise RemoteError(f"cannot reach {self.config.base_url}: {exc}") from None
        try:
            parsed = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RemoteError(f"{url}: the server did not answer JSON") from None
        if not isinstance(parsed, dict):
            raise RemoteError(f"{url}: the server answered {type(parsed).__name__}, not an object")
        return parsed

    def models(self) -> list[str]:
        data = self._call("GET", "/v1/models").get("data")
        if not isinstance(data, list):
            raise RemoteError(f"{self.config.base_url}/v1/models: no 'data' list in the answer")
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]

    @property
    def model(self) -> str:
        if self._model is None:
            names = self.models()
            if not names:
                raise RemoteError(f"{self.config.base_url} serves no model")
            self._model = names[0]
        return self._model

    def test_connection(self) -> ConnectionReport:
        names = self.models()
        if self._model is None and names:
            self._model = names[0]
        body = {"model": self.model, "messages": [{"role": "user", "content": "Say A."}], "max_tokens": 1,
                "logprobs": True, "top_logprobs": 5, "temperature": 0}
        answer = self._call("POST", "/v1/chat/completions", body)
        entries = _content_entries(answer)
        has = bool(entries) and bool(entries[0].get("top_logprobs"))
        detail = "returns top_logprobs" if has else "does not return logprobs: decisions will fail"
        return ConnectionReport(names, has, detail)

    # ----- decisions -----
    def info(self) -> EngineInfo:
        return EngineInfo(
            kind="remote", model=self._model, logprobs="top_n", constraint=self.config.constraint,
            url=self.config.base_url, top_logprobs=TOP_LOGPROBS,
        )

    def decide(self, request: DecisionRequest, should_stop: Callable[[], bool] | None = None) -> DecisionResult:
        if request.score_options:
            raise SettingsError("word-option scoring needs the local engine (it reads every token's logprob)")
        if request.permute:
            raise SettingsError("permute is not available on a remote engine yet")
        if request.images:
            raise SettingsError("images need the local engine (a remote decision sends text only)")
        clock = _Clock()
        options = list(request.options)
        user = "".join(user_segments(request.question, options, request.context, False, load_templates()))
        messages = ([{"role": "system", "content": request.system}] if request.system else []) + [{"role": "user", "content": user}]
        sampling = request.sampling
        body = {
            "model": self.model, "messages": messages,
            "max_tokens": 1 if not request.think else request.reasoning_budget + 8,
            "logprobs": True, "top_logprobs": TOP_LOGPROBS,
            "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": sampling.top_k, "min_p": sampling.min_p,
            "presence_penalty": sampling.presence_penalty, "frequency_penalty": sampling.frequency_penalty,
            "repetition_penalty": sampling.repetition_penalty,
            "chat_template_kwargs": {"enable_thinking": request.think},
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        labels = list(LABELS[: len(options)])
        clock.lap("tokenize_s")
        # The unconstrained answer gives each listed letter's full-vocabulary logprob and the coverage.
        answer = self._call("POST", "/v1/chat/completions", body)
        first, listed = _answer_position(answer)
        floor = min(listed.values())
        bounds = [None if label in listed else "upper" for label in labels]
        values = np.array([listed.get(label, floor) for label in labels])
        probabilities = np.exp(values - values.max())
        probabilities /= probabilities.sum()
        drawn = str(first.get("token", "")).strip()
        choice = labels.index(drawn) if drawn in labels else int(np.argmax(values))
        if self.config.constraint != "none" and not request.think:
            # A constrained answer lists every label, renormalised over them by the server: exact bars
            # even for letters outside the unconstrained top-20, and a draw that is always a label.
            constrained = dict(body, max_tokens=1)
            if self.config.constraint == "vllm":
                constrained["guided_choice"] = labels
            else:
                constrained["grammar"] = "root ::= " + " | ".join(f'"{label}"' for label in labels)
            first_c, listed_c = _answer_position(self._call("POST", "/v1/chat/completions", constrained))
            if all(label in listed_c for label in labels):
                weights = np.exp(np.array([listed_c[label] for label in labels]))
                probabilities = weights / weights.sum()
            drawn = str(first_c.get("token", "")).strip()
            choice = labels.index(drawn) if drawn in labels else int(np.argmax(probabilities))
        clock.lap("prefill_s")
        message = (answer.get("choices") or [{}])[0].get("message") or {}
        usage = answer.get("usage") or {}
        alternatives = first.get("top_logprobs") or []
        return DecisionResult(
            choice_index=choice,
            options=[
                OptionResult(label=label, text=text, logprob=float(values[i]), probability=float(probabilities[i]), bound=bounds[i])
                for i, (label, text) in enumerate(zip(labels, options))
            ],
            coverage=float(sum(math.exp(v) for v, b in zip(values, bounds) if b is None)),
            mode="letters",
            reasoning=message.get("reasoning_content") if request.think else None,
            alternatives=[Alternative(a["token"], -1, float(a["logprob"])) for a in alternatives[: request.alternatives]],
            timings=clock.total(),
            usage={
                "prompt_tokens": int(usage.get("prompt_tokens", 0)), "prefill_tokens": int(usage.get("prompt_tokens", 0)),
                "reused_tokens": 0, "completion_tokens": int(usage.get("completion_tokens", 0)),
            },
            engine=self.info(),
        )


def _answer_position(answer: dict) -> tuple[dict, dict[str, float]]:
    """The answer's first visible token entry and its listed alternatives (token text → logprob)."""
    entries = _content_entries(answer)
    if not entries:
        raise RemoteError("the server returned no logprobs for the answer (does it support logprobs? did reasoning use the whole budget?)")
    # With reasoning on, blank formatting tokens may precede the answer; the answer is the first visible one.
    first = next((e for e in entries if str(e.get("token", "")).strip()), entries[0])
    listed: dict[str, float] = {}
    for alt in first.get("top_logprobs") or []:
        token, logprob = alt.get("token"), alt.get("logprob")
        # Exact text only: " A" is another token than the "A" that starts the answer.
        if isinstance(token, str) and isinstance(logprob, (int, float)):
            listed.setdefault(token, float(logprob))
    if not listed:
        raise RemoteError("the server's answer has no top_logprobs entries")
    return first, listed


def _content_entries(answer: dict) -> list[dict]:
    try:
        logprobs = answer["choices"][0].get("logprobs") or {}
    except (KeyError, IndexError, TypeError, AttributeError):
        raise RemoteError("the server's answer has no choices") from None
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    return [e for e in content if isinstance(e, dict)] if isinstance(content, list) else []


def _error_message(raw: bytes) -> str:
    try:
        error = json.loads(raw).get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
    except (ValueError, AttributeError):
        pass
    return raw[:200].decode("utf-8", "replace").strip() or "no message"
