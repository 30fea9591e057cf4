"""The endpoints: /v1/models, /v1/chat/completions, /v1/completions, /v1/decide (and /v1/decide/frame, a game's
pushed frames: app/api/frames.py), and the tokenizer's
(/tokenize, /detokenize, /tokenizer_info).

Each POST reads its body, validates it into its request class, builds the engine request (the
tokenization, in a worker thread and outside the engine queue), then waits for the engine in the
FIFO queue and runs there in a worker thread. A client that leaves cancels its request, queued or
running; a streamed response writes each step as the engine yields it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator
from contextlib import AsyncExitStack
from typing import TypeVar

from anyio import to_thread
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from decider.engine.core.errors import Cancelled, ContextLimitError, SettingsError
from decider.engine.vision.frame_change import signature
from decider.engine.generation.generate import Completion, Delta
from decider.engine.completions.openai_format import (
    chat_chunk,
    chat_completion,
    chat_completions,
    chat_delta,
    chat_usage_chunk,
    completion_chunk,
    completion_usage_chunk,
    text_completions,
)
from decider.engine.decisions.types import DecisionResult

from .answers import collector_paused, json_answer, paused, refuse_huge_answer, replay_chunks
from .chat_run import run_chat
from .frames import FrameRequest, decide_frame
from ..images import ImageBudget, budget_for, current_budget
from .completions import completion_answer_size, prompt_text, run_completions
from .errors import ApiError, from_engine, from_validation
from . import tokens
from .limits import refuse_if_surely_too_long, refuse_if_too_many_tokens
from .protocol import (
    MODEL_ALIAS,
    ChatCompletionRequest,
    CompletionRequest,
    DecideRequest,
    DetokenizeRequest,
    TokenizeRequest,
)
from .state import ApiDecision, ApiState
from .transport import Client, EventStream, early_response, error_response, json_response, original_path, read_json

log = logging.getLogger("decider.api")

Chunks = Callable[..., Iterable[dict]]
Parsed = TypeVar("Parsed", bound=BaseModel)  # the request class a route validates its body into


def build_app(state: ApiState):
    """The ASGI application for one server (the Guard in front is the server's)."""
    routes = Routes(state)
    table = [
        Route("/models", routes.endpoint(routes.models, "GET")),
        Route("/models/{name}", routes.endpoint(routes.model, "GET")),
        Route("/chat/completions", routes.endpoint(routes.chat, "POST")),
        Route("/completions", routes.endpoint(routes.completions, "POST")),
        Route("/decide", routes.endpoint(routes.decide, "POST")),
        Route("/decide/frame", routes.endpoint(routes.decide_frame, "POST")),
        Route("/tokenize", routes.endpoint(routes.tokenize, "POST")),
        Route("/detokenize", routes.endpoint(routes.detokenize, "POST")),
        Route("/tokenizer_info", routes.endpoint(routes.tokenizer_info, "GET")),
    ]
    return Router(table, redirect_slashes=False, default=routes.not_found)


class Routes:
    def __init__(self, state: ApiState):
        self.state = state

    # ----- the frame around every endpoint -----

    def endpoint(self, handler: Callable, method: str) -> "_Endpoint":
        return _Endpoint(self, handler, method)

    def error_for(self, exc: BaseException) -> ApiError | None:
        """What to answer for a failure (None: nobody to answer, the client left)."""
        if isinstance(exc, ApiError):
            if exc.status == 429:
                self.state.count("rejected")
            return exc
        if isinstance(exc, (SettingsError, ContextLimitError)):
            return from_engine(exc)
        if isinstance(exc, (Cancelled, ClientDisconnect)):
            self.state.count("cancelled")
            if self.state.stopping:
                return ApiError("shutting_down", "the server is shutting down")
            log.debug("the client left: its request was dropped (%s)", exc or type(exc).__name__)
            return None
        if isinstance(exc, Exception):  # an engine failure: answer 500 and keep serving
            log.exception("internal error")
            self.state.count("errors")
            return ApiError("internal_error", f"internal error: {type(exc).__name__}: {exc}")
        return None

    async def not_found(self, scope, receive, send) -> None:
        path = scope.get("state", {}).get("path", scope["path"])
        error = ApiError("not_found", f"invalid URL ({scope['method']} {path})")
        await error_response(error)(scope, receive, send)

    # ----- shared steps -----

    async def _parse(self, request: Request, kind: type[Parsed]) -> Parsed:
        body = await read_json(request, self.state.max_body, self.state.body_timeout)
        request.state.body_read = True
        # validation decodes images: in a worker thread, so a big picture never stalls other clients
        parsed = await to_thread.run_sync(_validate, kind, body, self._image_budget())
        self._check_model(getattr(parsed, "model", None))  # every request class has one (protocol.Name)
        return parsed

    def _image_budget(self) -> ImageBudget:
        return budget_for(self.state.service.runner, self.state.service.model_name)

    async def _refuse_too_long(self, texts: list[str]) -> None:
        """Text that cannot fit the context is refused before the request queues: at once when it is
        longer than any tokenization could make fit, else after counting (in a worker thread)."""
        runner = self.state.service.runner
        refuse_if_surely_too_long(texts, runner.context_length, self.state.token_chars)
        await to_thread.run_sync(refuse_if_too_many_tokens, texts, runner.tokenizer, runner.context_length)

    def _check_model(self, model: str | None) -> None:
        name = self.state.service.model_name
        if model is not None and model not in (name, MODEL_ALIAS):
            raise ApiError(
                "model_not_found", f"the model {model!r:.80} does not exist: this server runs {name!r} (alias {MODEL_ALIAS!r})",
                param="model",
            )

    async def _run(self, client: Client, work: Callable, *args):
        """Wait for the engine in the queue, then run `work` in a worker thread."""
        client.watch()
        try:
            async with self.state.queue.slot(client.gone_event):
                return await to_thread.run_sync(paused(work), *args)  # no GC pauses while an answer is made
        finally:
            client.stop_watching()

    def _notify(self, hook: Callable | None, *args) -> None:
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:
            log.exception("API hook %r failed", hook)

    async def _stream(self, client: Client, steps: Generator[tuple[Delta, Completion], None, None], step_chunks: Chunks,
                      end_chunks: Chunks, done: Callable[[Completion], None] | None = None) -> Response:
        """Queue, run the first step (so a failing prefill is still a plain HTTP error), then stream."""
        stack = AsyncExitStack()
        client.watch()
        stack.callback(client.stop_watching)
        try:
            await stack.enter_async_context(self.state.queue.slot(client.gone_event))
            # closing the generator releases the engine at once, also when the client left
            stack.push_async_callback(to_thread.run_sync, steps.close)
            first = await to_thread.run_sync(next, steps, None)
        except BaseException:
            await stack.aclose()
            raise

        async def events() -> AsyncIterator[dict]:
            for chunk in step_chunks(None):  # the first chunk names the role
                yield chunk
            item = first
            completion: Completion | None = None
            while item is not None:
                delta, completion = item
                for chunk in step_chunks(delta):
                    yield chunk
                item = await to_thread.run_sync(next, steps, None)
            assert completion is not None  # every generation yields at least its first step
            for chunk in end_chunks(completion):
                yield chunk
            if done is not None:
                done(completion)

        return EventStream(events(), client, finish=stack.aclose, on_error=self.error_for)

    # ----- endpoints -----

    def _model_entry(self, name: str) -> dict:
        service = self.state.service
        return {"id": name, "object": "model", "created": self.state.created, "owned_by": "decider",
                "context_length": service.runner.context_length, "max_model_len": service.runner.context_length}

    async def models(self, request: Request) -> Response:
        return json_response(200, {"object": "list", "data": [self._model_entry(self.state.service.model_name)]})

    async def model(self, request: Request) -> Response:
        name = request.path_params["name"]
        self._check_model(name)
        return json_response(200, self._model_entry(name))

    async def chat(self, request: Request) -> Response:
        state, service = self.state, self.state.service
        parsed: ChatCompletionRequest = await self._parse(request, ChatCompletionRequest)
        await self._refuse_too_long(parsed.texts())
        generation = await to_thread.run_sync(parsed.to_request, service)
        refuse_huge_answer(parsed.n or 1, (parsed.n or 1) * generation.max_tokens, generation.top_logprobs)
        messages = [m.to_message() for m in parsed.messages]
        request_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        model = service.model_name
        client = Client(request.receive, state)
        if parsed.calls_tools or (parsed.n or 1) > 1:  # answers known whole (engine/constrained/tools.py, chat_run.py)
            with collector_paused:  # from the first draw until the answer is encoded and its objects freed
                choices, completions = await self._run(client, run_chat, service, parsed, generation, client.should_stop)
                self._notify(state.on_chat_completion, messages, completions[0])
                if not parsed.stream:
                    return await json_answer(lambda: chat_completions(choices, completions, model, request_id),
                                             choices, completions)
                chunks = await to_thread.run_sync(replay_chunks, request_id, model, choices, completions, parsed.include_usage)
            return self._replay(client, chunks)
        if not parsed.stream:
            with collector_paused:
                completion = await self._run(client, service.run, generation, client.should_stop)
                self._notify(state.on_chat_completion, messages, completion)
                return await json_answer(lambda: chat_completion(completion, model, request_id))
        created, usage, logprobs = int(time.time()), parsed.include_usage, bool(parsed.logprobs)

        def step(delta: Delta | None) -> Iterator[dict]:
            if delta is None:
                yield chat_chunk(request_id, model, created, {"role": "assistant", "content": ""}, with_usage=usage)
            elif delta.reasoning or delta.content or delta.logprobs:
                yield chat_chunk(request_id, model, created, chat_delta(delta),
                                 logprobs=delta.logprobs if logprobs else None, with_usage=usage)

        def end(completion: Completion) -> Iterator[dict]:
            yield chat_chunk(request_id, model, created, {}, finish_reason=completion.finish_reason, with_usage=usage)
            if usage:
                yield chat_usage_chunk(request_id, model, created, completion)

        def done(completion: Completion) -> None:
            self._notify(state.on_chat_completion, messages, completion)

        return await self._stream(client, service.stream(generation, client.should_stop), step, end, done)

    def _replay(self, client: Client, chunks: list[bytes]) -> Response:
        """A finished chat answer as a stream of its chunks, encoded already (replay_chunks)."""

        async def events() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

        async def nothing() -> None:
            return None

        return EventStream(events(), client, finish=nothing, on_error=self.error_for)

    async def completions(self, request: Request) -> Response:
        service = self.state.service
        parsed: CompletionRequest = await self._parse(request, CompletionRequest)
        for prompt in parsed.prompt:  # each prompt has the whole context to itself
            if isinstance(prompt, str):
                await self._refuse_too_long([prompt])
        jobs = await to_thread.run_sync(parsed.to_request, service)
        refuse_huge_answer(*completion_answer_size(parsed, jobs))
        request_id = f"cmpl-{uuid.uuid4().hex[:24]}"
        model, logprobs = service.model_name, parsed.logprobs is not None
        client = Client(request.receive, self.state)
        if not parsed.stream:
            with collector_paused:
                choices, completions = await self._run(client, run_completions, service, parsed, jobs, client.should_stop)
                return await json_answer(lambda: text_completions(choices, completions, model, request_id), choices, completions)
        # a stream has one prompt, no echo and at least one token to generate (the request class checks)
        job = jobs[0]
        assert job.generation is not None  # the request class refuses a stream with max_tokens 0
        created, usage, prompt_chars = int(time.time()), parsed.include_usage, len(prompt_text(service.runner.tokenizer, job))

        def step(delta: Delta | None) -> Iterator[dict]:
            if delta is not None and (delta.content or delta.logprobs):
                yield completion_chunk(request_id, model, created, delta.content,
                                       logprobs=delta.logprobs if logprobs else None,
                                       prompt_chars=prompt_chars, with_usage=usage)

        def end(completion: Completion) -> Iterator[dict]:
            yield completion_chunk(request_id, model, created, "", prompt_chars=prompt_chars,
                                   finish_reason=completion.finish_reason, with_usage=usage)
            if usage:
                yield completion_usage_chunk(request_id, model, created, completion)

        return await self._stream(client, service.stream(job.generation, client.should_stop), step, end)

    async def tokenize(self, request: Request) -> Response:
        runner = self.state.service.runner
        parsed: TokenizeRequest = await self._parse(request, TokenizeRequest)
        # bounded like the prompts it counts: past the context it is refused before any list is built
        await self._refuse_too_long(parsed.texts())
        if parsed.messages is not None:  # the chat form: exactly the prompt a chat request becomes
            reply = await to_thread.run_sync(tokens.chat_tokenize, runner, parsed)
            return json_response(200, reply)
        add_special = parsed.add_special_tokens is not False  # vLLM's default: true
        reply = await to_thread.run_sync(
            tokens.tokenize, runner.tokenizer, parsed.prompt or "", add_special, bool(parsed.return_token_strs), runner.context_length
        )
        return json_response(200, reply)

    async def detokenize(self, request: Request) -> Response:
        runner = self.state.service.runner
        parsed: DetokenizeRequest = await self._parse(request, DetokenizeRequest)
        parsed.check(runner.tokenizer.size)
        return json_response(200, await to_thread.run_sync(tokens.detokenize, runner.tokenizer, parsed.tokens))

    async def tokenizer_info(self, request: Request) -> Response:
        runner = self.state.service.runner
        return json_response(200, tokens.tokenizer_info(runner.folder.path, runner.tokenizer, runner.context_length))

    async def decide(self, request: Request) -> Response:
        state, service = self.state, self.state.service
        parsed: DecideRequest = await self._parse(request, DecideRequest)
        decision = parsed.to_request(service.defaults)
        # the engine tokenizes a decision under its lock: a long one is counted here first, outside it
        await self._refuse_too_long([t for t in (decision.question, decision.system, decision.context, *decision.options) if t])
        client = Client(request.receive, state)
        result = await self._run(client, service.decide, decision, client.should_stop, "api")
        self._notify(state.on_decision, ApiDecision(decision, result))
        return json_response(200, result.to_dict())


    async def decide_frame(self, request: Request) -> Response:
        """A game's pushed frame: decided when it changed, else the last decision (app/api/frames.py)."""
        state, service = self.state, self.state.service
        parsed: FrameRequest = await self._parse(request, FrameRequest)
        frame = parsed.frame()
        decision = parsed.to_request(service.defaults)
        await self._refuse_too_long([t for t in (decision.question, decision.system, decision.context, *decision.options) if t])
        frame_signature = await to_thread.run_sync(signature, frame)
        client = Client(request.receive, state)

        async def run() -> DecisionResult:
            result = await self._run(client, service.decide, decision, client.should_stop, "api")
            self._notify(state.on_decision, ApiDecision(decision, result))
            return result

        reply = await decide_frame(state.frames.get(parsed.watch), decision, frame_signature, parsed.threshold, run)
        return json_response(200, reply)


def _validate(kind: type[Parsed], body: dict, budget: ImageBudget) -> Parsed:
    token = current_budget.set(budget)
    try:
        return kind.model_validate(body)
    except ValidationError as exc:
        raise from_validation(exc) from None
    finally:
        current_budget.reset(token)


class _Endpoint:
    """A route's ASGI app (not a plain function, so Starlette lets every method through to it and a
    wrong one gets OpenAI's error body), with the error handling every endpoint shares."""

    def __init__(self, routes: Routes, handler: Callable, method: str):
        self.routes = routes
        self.handler = handler
        self.method = method
        self.allowed = (method, "HEAD") if method == "GET" else (method,)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        request.state.body_read = False
        try:
            if request.method not in self.allowed:
                raise ApiError(
                    "method_not_allowed", f"method {request.method} not allowed on {original_path(request)} (use {self.method})",
                    headers={"Allow": self.method},
                )
            response = await self.handler(request)
        except BaseException as exc:
            error = self.routes.error_for(exc)
            if error is None:
                if not isinstance(exc, Exception):
                    raise
                response = Response(status_code=204)  # the client is gone: nobody reads this
            else:
                response = await early_response(error, request, request.state.body_read)
        await response(scope, receive, send)

