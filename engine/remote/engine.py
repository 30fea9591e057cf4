"""A remote engine: decisions against an OpenAI-compatible server (another Decider, vLLM, llama.cpp's
servers, OpenVINO Model Server).

Without a flag it finds out what the server is and takes the most exact method it offers:
  decide         Decider's own server: the decision runs there (/v1/decide), exact like a local one;
  forced letters Decider renders the prompt (remote_prompt) and sends it raw to /v1/completions; one
                 greedy answer per option with logit_bias forcing that letter returns the letter's own
                 full-vocabulary logprob (checked against an unforced answer's list);
  top list       the raw prompt's answer with its top-N alternatives: a letter outside them is an upper
                 bound, and the bars around it are estimates;
  chat           no raw completions: the server's chat template (it may ignore enable_thinking), so
                 every bar is an estimate.
A flag still forces a method (`method`), or the old answer constraints (`constraint`: vLLM's
guided_choice, llama.cpp's grammar), which are believed only when the answer shows they renormalised.
Every option says what its bar is (exact, estimate, upper bound) and the choice is marked uncertain when
the bars' possible ranges overlap.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..core.clock import Clock
from ..core.logprobs import Alternative
from ..decisions.option_draw import draw_option
from .tool_calls import TOOLS_CALL_ONLY, TOOLS_EXACT, decide_tools_remote
from ..decisions.types import LABELS, DecisionRequest, DecisionResult, OptionResult
from ..decisions.prompt import load_templates, user_segments
from ..core.errors import SettingsError
from ..generation.generate import make_rng
from ..core.info import EngineInfo, LogprobExactness
from ..decisions.labels import NEAR_TIE_NATS
from .http import JsonClient, RemoteError
from .probe import ServerProfile, model_entries, probe
from ..decisions.server_precision import note as precision_note, unreported_precision
from .prompt import after_reasoning, decision_text
from .reasoning import STOP, read_reasoning
from .read import (
    TOP_LOGPROBS, LetterReading, Unverified, completion, constrained_bars, forced_letters, from_list, letter_ids,
    listed_entries, top_of_completion,
)

__all__ = ["CONSTRAINTS", "METHODS", "TOP_LOGPROBS", "ConnectionReport", "RemoteConfig", "RemoteEngine", "RemoteError"]

CONSTRAINTS = ("none", "vllm", "llama.cpp")
# A logprob gap a server's unreported precision may flip: the one near-tie margin every engine states
# (engine/decisions/labels.py: bf16 knows a logit near 10 to ±0.04, a gap to twice that).
SERVER_RESOLUTION = NEAR_TIE_NATS
METHODS = ("auto", "decide", "forced", "list", "chat")


@dataclass(frozen=True)
class RemoteConfig:
    base_url: str
    api_key: str | None = None
    model: str | None = None  # None: the server's first model
    timeout: float = 60.0
    constraint: str = "none"  # force an answer constraint (checked: believed only if it renormalised)
    method: str = "auto"  # force a method (see the module docstring); auto takes the most exact one offered

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
        if self.method not in METHODS:
            raise SettingsError(f"method must be one of {', '.join(METHODS)} (got {self.method!r})")
        if self.constraint != "none" and self.method not in ("auto", "chat"):
            raise SettingsError(f"an answer constraint is a chat method: it cannot be combined with method {self.method!r}")

    @property
    def api(self) -> str:
        """The path the OpenAI routes live under: OpenVINO Model Server serves them at /v3, others at /v1."""
        return "" if self.base_url.endswith("/v3") else "/v1"


@dataclass(frozen=True)
class ConnectionReport:
    models: list[str]
    logprobs: bool  # the server returned top_logprobs on a probe request
    detail: str


class RemoteEngine:
    def __init__(self, config: RemoteConfig):
        self.config = config
        self.client = JsonClient(config.base_url, config.api_key, config.timeout)
        self._model = config.model
        self._profile: ServerProfile | None = None

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        return self.client.call(method, f"{self.config.api}{path}", body)

    def models(self) -> list[str]:
        return [m["id"] for m in model_entries(self.client, self.config.api)]

    @property
    def model(self) -> str:
        if self._model is None:
            names = self.models()
            if not names:
                raise RemoteError(f"{self.config.base_url} serves no model")
            self._model = names[0]
        return self._model

    def profile(self) -> ServerProfile:
        """What the server is and offers (probed once per engine)."""
        if self._profile is None:
            self._profile = probe(self.client, self.config.api, self._model)
            if self._model is None and self._profile.models:
                self._model = self._profile.models[0]
        return self._profile

    def test_connection(self) -> ConnectionReport:
        names = self.models()
        if self._model is None and names:
            self._model = names[0]
        body = {"model": self.model, "messages": [{"role": "user", "content": "Say A."}], "max_tokens": 1,
                "logprobs": True, "top_logprobs": 5, "temperature": 0}
        answer = self._call("POST", "/chat/completions", body)
        entries = _content_entries(answer)
        has = bool(entries) and bool(entries[0].get("top_logprobs"))
        detail = "returns top_logprobs" if has else "does not return logprobs: decisions will fail"
        return ConnectionReport(names, has, detail)

    # ----- decisions -----
    def info(self, method: str | None = None, notes: list[str] | None = None, listed: int = TOP_LOGPROBS) -> EngineInfo:
        """What computes (or computed, with the method and notes of a decision) the bars."""
        method = method or (None if self.config.method == "auto" else self.config.method)  # None: no decision yet
        exactness: dict[str | None, LogprobExactness] = {
            "decide": "exact", "forced letters": "letters", TOOLS_EXACT: "exact", TOOLS_CALL_ONLY: "none"}
        logprobs = exactness.get(method, "top_n")
        return EngineInfo(
            kind="remote", model=self._model, logprobs=logprobs, constraint=self.config.constraint,
            url=self.config.base_url, top_logprobs=listed, server=self._profile.kind if self._profile else None,
            method=method, notes=tuple(notes or ()),
        )

    def decide(self, request: DecisionRequest, should_stop: Callable[[], bool] | None = None) -> DecisionResult:
        if request.tools:  # functions as options: the server's own tool calling (engine/remote/tool_calls.py)
            return decide_tools_remote(self, request)
        if request.images:  # the raw prompt and /v1/decide carry text only
            raise SettingsError("images need the local engine (a remote decision sends text only)")
        clock = Clock()
        profile = None if self.config.method == "chat" else self.profile()
        method = self.config.method
        if method == "auto" and profile is not None:
            method = "decide" if profile.decide else ("forced" if profile.completions else "chat")
        constrained = self.config.constraint != "none"
        if constrained and method != "chat" and profile is not None:  # not chat: the server was probed
            # A constraint is a chat method (the server's template, estimates at best): it never moves a
            # decision off a more exact path the server offers.
            profile = replace(profile, notes=[*profile.notes, f"constraint {self.config.constraint} not used: the server "
                                              f"offers {'/v1/decide' if profile.decide else 'raw completions'}, more exact"])
        if method == "decide":
            return self._decide_there(request, clock)
        if request.score_options:
            raise SettingsError("word-option scoring on a server needs Decider's own server (it reads every token's logprob)")
        if request.permute:
            raise SettingsError("permute on a server needs Decider's own server (it runs every option order there)")
        labels = list(LABELS[: len(request.options)])
        notes = list(profile.notes) if profile is not None else []
        if method in ("forced", "list"):
            if profile is not None and not profile.completions:
                raise RemoteError(f"{self.config.base_url} offers no raw completions with logprobs: "
                                  f"method {method!r} needs them ({'; '.join(profile.notes)})")
            reading, reasoning = self._read_raw(request, labels, method == "forced", notes, should_stop)
        else:
            reading, reasoning = self._read_chat(request, labels, notes)
        clock.lap("prefill_s")
        return self._result(request, reading, reasoning, clock)

    # --- Decider's own server: the decision runs there ---
    def _decide_there(self, request: DecisionRequest, clock: Clock) -> DecisionResult:
        body = {
            "model": self.model, "question": request.question, "options": list(request.options), "system": request.system,
            "context": request.context, **request.request_fields(), **request.sampling.request_fields("decider"),
        }
        answer = self._call("POST", "/decide", {k: v for k, v in body.items() if v is not None})
        try:
            result = DecisionResult.from_dict(answer, request)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise RemoteError(f"{self.config.base_url}/v1/decide: an answer Decider cannot read ({exc})") from None
        if not request.sample_choice:  # whatever the server's version chose, the choice is the largest bar
            result = replace(result, choice_index=result.most_likely_index, choice_mode="argmax")
        engine = self.info("decide")
        engine_field = answer.get("engine")
        server_engine: dict = engine_field if isinstance(engine_field, dict) else {}
        if any(o.bar == "reduced" for o in result.options):  # a --fast server: its bars are its reduced compile's
            precision = server_engine.get("precision")
            engine = replace(engine, logprobs="reduced", precision=precision if isinstance(precision, str) else None)
        clock.lap("remote_s")
        return replace(result, engine=engine, timings=dict(result.timings, **clock.total()))

    # --- a raw prompt on /v1/completions ---
    def _sampling_fields(self, request: DecisionRequest) -> dict:
        """The sampling settings in the field names this kind of server reads (engine.settings declares them)."""
        kind = self._profile.kind if self._profile is not None else "unknown"
        return {"model": self.model, **request.sampling.request_fields(kind)}

    def _read_raw(self, request: DecisionRequest, labels: list[str], forced: bool, notes: list[str],
                  should_stop: Callable[[], bool] | None) -> tuple[LetterReading, str | None]:
        prompt = decision_text(request.question, list(request.options), system=request.system, context=request.context,
                               think=request.think)
        base = self._sampling_fields(request)
        reasoning, thought, decision_tokens = None, None, 0
        if request.think:
            # The server reasons at the sampling settings; the answer is read after the think block is closed
            # (by the model, or by Decider when the budget ran out), as the local engine does.
            asked = dict(base, prompt=prompt, max_tokens=request.reasoning_budget, stop=[STOP])
            choice, usage = completion(self.client, self.config.api, asked)
            kind = self._profile.kind if self._profile is not None else "unknown"
            thought = read_reasoning(self.client, self.config.api, self.model, kind, asked, choice, usage)
            reasoning, decision_tokens = thought.text.strip("\n"), int(usage.get("prompt_tokens") or 0)
            prompt += after_reasoning(thought.text, thought.closed)
            if should_stop is not None and should_stop():
                from ..core.errors import Cancelled

                raise Cancelled("decision cancelled")
        body = dict(base, prompt=prompt, max_tokens=1)
        reading, _ = top_of_completion(self.client, self.config.api, body, labels)
        reading.notes[:0] = notes
        if forced:
            kind = self._profile.kind if self._profile is not None else "unknown"
            ids = letter_ids(self.client, self.config.api, self.model, labels, kind)
            if ids is None:
                reading.notes.append("the server has no tokenize endpoint that writes each letter as one token: "
                                     "letters outside its list stay upper bounds")
            elif any(k == "upper" for k in reading.labels):
                try:
                    reading = forced_letters(self.client, self.config.api, body, labels, ids, reading)
                except Unverified as exc:
                    reading.notes.append(f"forced letters not used: {exc}")
        if thought is not None:
            _count_as_local(reading, decision_tokens, thought.tokens)
        if thought is not None and thought.unverified is None:
            reading.notes.append("the reasoning went back to the server as text, closed as the chat template closes "
                                 "it; its tokenize endpoint showed the text is the ids it generated")
        elif thought is not None:
            reading.retokenized = True
            reading.notes.append("the reasoning went back to the server as text, which it re-tokenized: the ids it "
                                 f"scored need not be the ones it generated ({thought.unverified}), so every bar is "
                                 "an estimate")
        return reading, reasoning

    # --- chat: the server's own template ---
    def _read_chat(self, request: DecisionRequest, labels: list[str], notes: list[str]) -> tuple[LetterReading, str | None]:
        user = "".join(user_segments(request.question, list(request.options), request.context, False, load_templates()))
        messages = ([{"role": "system", "content": request.system}] if request.system else []) + [{"role": "user", "content": user}]
        body = dict(
            self._sampling_fields(request), messages=messages,
            max_tokens=1 if not request.think else request.reasoning_budget + 8,
            logprobs=True, top_logprobs=TOP_LOGPROBS, chat_template_kwargs={"enable_thinking": request.think},
        )
        answer = self._call("POST", "/chat/completions", body)
        first, listed = _answer_position(answer)
        notes.append("the prompt went through the server's chat template, which Decider cannot check "
                     "(a server that ignores enable_thinking leaves a think block open): every bar is an estimate")
        reading = from_list("chat", listed, labels, TOP_LOGPROBS, notes)
        usage = answer.get("usage") or {}
        reading.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        reading.completion_tokens = int(usage.get("completion_tokens") or 0)
        if self.config.constraint != "none" and not request.think:
            constrained = dict(body, max_tokens=1)
            if self.config.constraint == "vllm":
                constrained["guided_choice"] = labels
            else:
                constrained["grammar"] = "root ::= " + " | ".join(f'"{label}"' for label in labels)
            _, listed_c = _answer_position(self._call("POST", "/chat/completions", constrained))
            bars, why = constrained_bars(listed_c, labels)
            if bars is None:
                reading.notes.append(f"constraint {self.config.constraint} not used for the bars: {why}")
            else:
                reading.bars = bars
                reading.method = f"constraint ({self.config.constraint})"
        message = (answer.get("choices") or [{}])[0].get("message") or {}
        return reading, message.get("reasoning_content") if request.think else None

    # --- the result, labelled for what it is ---
    def _result(self, request: DecisionRequest, reading: LetterReading, reasoning: str | None, clock: Clock) -> DecisionResult:
        labels = list(LABELS[: len(request.options)])
        values = np.array(reading.logprobs, dtype=float)
        chat = reading.method == "chat" or reading.retokenized  # numbers for another token sequence than Decider's
        if reading.bars is not None:  # a verified renormalising constraint: the bars are exact for its prompt
            probabilities = np.array(reading.bars)
            kinds = ["estimate" if chat else "exact"] * len(labels)
            low = high = probabilities
        else:
            probabilities = np.exp(values - values.max())
            probabilities /= probabilities.sum()
            low, high = _bar_ranges(values, [k == "upper" for k in reading.labels])
            bounded = any(k == "upper" for k in reading.labels)
            if chat:
                # The server's template answered another prompt (it may ignore enable_thinking): its list
                # bounds nothing of Decider's prompt, so no bar is a bound and none has a known range.
                kinds, low, high = ["estimate"] * len(labels), np.zeros(len(labels)), np.ones(len(labels))
            else:
                kinds = ["upper" if k == "upper" else ("estimate" if bounded else "exact") for k in reading.labels]
                server = self._profile.kind if self._profile is not None else None
                reduced = unreported_precision(server, values, kinds)  # engine/decisions/server_precision.py
                if reduced is not None and server is not None:  # (a reduction names its server kind)
                    kinds, low, high = reduced
                    reading.notes.append(precision_note(server))
        shown = probabilities
        most_likely = int(np.argmax(shown))
        if request.sample_choice:
            choice = draw_option(shown, request.sampling.temperature, make_rng(request.sampling.seed))
        else:
            choice = most_likely
        # uncertain: another option's highest possible bar reaches the most likely one's lowest; through the
        # server's chat template nothing ties the numbers to Decider's prompt, so the choice is never settled
        uncertain = chat or any(high[j] >= low[most_likely] for j in range(len(labels)) if j != most_likely)
        # The numbers are the server's arithmetic, at a precision it does not report (vLLM on CPU: bf16, whose
        # near-ties flipped 5 of 10 choices against f32): a lead within that resolution settles nothing.
        runner_up = max((float(values[j]) for j in range(len(labels)) if j != most_likely), default=-math.inf)
        near_tie = float(values[most_likely]) - runner_up < SERVER_RESOLUTION
        uncertain = uncertain or near_tie
        reading.notes.append("the bars are the server's arithmetic (its precision is not reported): a lead under "
                             f"{SERVER_RESOLUTION} in logprob is marked uncertain" + (" — this one" if near_tie else ""))
        options = [
            OptionResult(label=label, text=text, logprob=float(values[i]), probability=float(probabilities[i]),
                         bound="upper" if kinds[i] == "upper" else None, bar=kinds[i],
                         low=float(low[i]), high=float(high[i]))
            for i, (label, text) in enumerate(zip(labels, request.options))
        ]
        exact_values = [v for v, k in zip(values, reading.labels) if k != "upper"]
        return DecisionResult.build(
            request, options, choice, mode="letters", coverage=float(sum(math.exp(v) for v in exact_values)),
            timings=clock.total(),
            usage={"prompt_tokens": reading.prompt_tokens, "prefill_tokens": reading.read_tokens or reading.prompt_tokens,
                   "reused_tokens": 0,
                   "completion_tokens": reading.completion_tokens},
            reasoning=reasoning,
            alternatives=[Alternative(t, -1, float(v)) for t, v in reading.alternatives[: request.alternatives]],
            engine=self.info(reading.method, reading.notes, reading.listed), uncertain=bool(uncertain),
            uncertain_why=["the bars came through the server's chat template, which Decider cannot check"] if chat else [],
        )


def _count_as_local(reading: LetterReading, decision_tokens: int, reasoning_tokens: int) -> None:
    """The usage as the local engine counts a decision with reasoning: the decision prompt's tokens, then
    everything after it (the reasoning, its close, the answer) as completion. The answer request's prompt
    holds the decision prompt and the closed reasoning; counting both it and the reasoning counted the
    reasoning twice."""
    if decision_tokens and reading.prompt_tokens >= decision_tokens:
        reading.read_tokens = reading.prompt_tokens
        reading.completion_tokens += reading.prompt_tokens - decision_tokens
        reading.prompt_tokens = decision_tokens
    else:  # a server that reports no prompt count: the reasoning's own count
        reading.completion_tokens += reasoning_tokens


def _bar_ranges(values: np.ndarray, upper: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    """Each bar's lowest and highest possible value when the `upper` values are only bounds (anywhere in
    (0, bound]) and the rest exact."""
    weights = np.exp(values - values.max())
    known = float(sum(w for w, u in zip(weights, upper) if not u))
    unknown = float(sum(w for w, u in zip(weights, upper) if u))
    low, high = np.empty(len(values)), np.empty(len(values))
    for i, (w, u) in enumerate(zip(weights, upper)):
        if u:  # lowest: it is ~0; highest: it sits at its bound and the other bounded ones at ~0
            low[i], high[i] = 0.0, w / (known + w)
        else:  # lowest: every bounded letter at its bound; highest: all of them ~0
            low[i], high[i] = w / (known + unknown), (w / known if known > 0 else 1.0)
    return low, high


def _answer_position(answer: dict) -> tuple[dict, dict[str, float]]:
    """A chat answer's first visible token entry and its listed alternatives (token text → logprob)."""
    entries = _content_entries(answer)
    if not entries:
        raise RemoteError("the server returned no logprobs for the answer (does it support logprobs? did reasoning use the whole budget?)")
    # With reasoning on, blank formatting tokens may precede the answer; the answer is the first visible one.
    first = next((e for e in entries if str(e.get("token", "")).strip()), entries[0])
    listed = listed_entries(first.get("top_logprobs"))
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
