"""What computed a result: the engine's kind, model, device, execution path and how exact its logprobs are;
and what a front end shows about the model it loaded (ModelInfo).

One frozen value replaces the free dict front ends used to read with `.get(...)` and `startswith`: the
UI asks `info.exact` or `info.remote`, and `to_dict()` gives the JSON object the API and `--json` have
always printed (same keys, same wording), so clients see no change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .settings import SamplingSettings

EngineKind = Literal["local", "remote"]
# exact: full-vocabulary float64 logprobs from f32 logits; reduced: full vocabulary, lower-precision
# compile (fast mode); letters: a server's full-vocabulary logprob of each option letter (read one by one);
# top_n: only the server's top-N list, so unlisted options get an upper bound.
# none: the server only made a call (functions as options on a server without per-function probabilities)
LogprobExactness = Literal["exact", "reduced", "letters", "top_n", "none"]

LOCAL_CONSTRAINT = "letter mask"  # the local engine constrains the answer draw to the option letters


@dataclass(frozen=True)
class EngineInfo:
    kind: EngineKind
    model: str | None
    logprobs: LogprobExactness
    constraint: str  # how the answer is held to an option label: LOCAL_CONSTRAINT or a remote constraint name
    device: str | None = None  # the device a local model runs on (e.g. "CPU"); None for a server
    execution_path: str | None = None  # how the device runs the model (the runner's, e.g. "dynamic"); None for a server
    reduced_by: str | None = None  # why reduced logprobs are reduced (e.g. "fast mode", "f16 on the NPU")
    # local: the arithmetic that computed the bars, read back from the compiled model (engine/compile/precision.py),
    # e.g. "f32", "f32, NPU emulated on CPU", "bf16 inference, u8 KV cache", "f16 on the NPU"
    precision: str | None = None
    emulated: str | None = None  # local: how a device without its hardware ran (e.g. "NPUW on CPU")
    url: str | None = None  # the server's base URL (remote only)
    top_logprobs: int | None = None  # the length of the server's list (remote only)
    server: str | None = None  # what the server is (remote only): decider, vllm, llama.cpp, ovms or unknown
    method: str | None = None  # how a server's bars were read (remote only; engine.remote's methods)
    notes: tuple[str, ...] = ()  # what the checks of a server's answer found (remote only)
    # think mode, local: the precision that drew the reasoning tokens (e.g. a fast twin's), which can differ
    # from the answer's `logprobs`; None when nothing was reasoned
    reasoning: str | None = None
    # local: where the model folder's own chat template renders Decider's reference conversations differently
    # (engine/model/template_check.py): said, never silently assumed; None when they agree or there is no template
    template: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("local", "remote"):
            raise ValueError(f"engine kind must be local or remote (got {self.kind!r})")
        if self.logprobs not in ("exact", "reduced", "letters", "top_n", "none"):
            raise ValueError(f"logprob exactness must be exact, reduced, letters, top_n or none (got {self.logprobs!r})")
        if self.logprobs == "top_n" and not self.top_logprobs:
            raise ValueError("top_n logprobs need the list's length (top_logprobs)")
        if self.logprobs == "exact" and self.precision is not None and not self.precision.startswith("f32"):
            # the one number must never be labelled exact when another arithmetic computed it
            raise ValueError(f"logprobs computed in {self.precision} cannot be labelled exact")

    @property
    def remote(self) -> bool:
        return self.kind == "remote"

    @property
    def exact(self) -> bool:
        return self.logprobs == "exact"

    @property
    def logprobs_text(self) -> str:
        if self.logprobs == "exact":
            return f"exact full-vocabulary ({self.precision})" if self.precision else "exact full-vocabulary"
        if self.logprobs == "reduced":
            return f"full-vocabulary, reduced precision ({self.precision or self.reduced_by or 'fast mode'})"
        if self.logprobs == "letters":
            return "the server's full-vocabulary logprob of each option letter"
        if self.logprobs == "none":
            return "no probabilities (the server's call only)"
        return f"server top-{self.top_logprobs} (not full-vocabulary exact)"

    @property
    def bars_text(self) -> str | None:
        """Where a server's bars come from (None for a local engine: always the full distribution)."""
        if not self.remote:
            return None
        if self.method == "decide":
            if self.logprobs == "reduced":  # the server runs a reduced compile (--fast, an NPU)
                arithmetic = self.precision or self.reduced_by or "as the server compiled it"
                return f"reduced precision ({arithmetic}), computed by Decider on the server"
            return "exact (computed by Decider on the server)"
        if self.method and self.method.startswith("tools"):
            return "exact (each function's call probability, computed by Decider on the server)" if self.logprobs == "exact" \
                else "not probabilities: the called function at 1, the others at 0"
        if self.method == "forced letters":
            return "every letter's own logprob, renormalised"
        if self.constraint != "none" and self.method is None:  # configured, no decision yet
            return "renormalised by the server's constraint"
        if self.method and self.method.startswith("constraint"):
            return "renormalised by the server's constraint (its answer checked)"
        if self.constraint != "none":
            return f"from the top-{self.top_logprobs} list (the constraint's answer did not renormalise)"
        return f"from the top-{self.top_logprobs} list"

    def to_dict(self) -> dict:
        """The JSON object a decision carries as "engine" (the shape clients already parse)."""
        out: dict[str, object]
        if self.remote:
            out = {
                "kind": self.kind, "url": self.url, "model": self.model, "logprobs": self.logprobs_text,
                "constraint": self.constraint, "bars": self.bars_text,
            }
            # what a decision found out (the server's kind, the method, the checks' notes), once there is one
            out.update({k: v for k, v in (("server", self.server), ("method", self.method)) if v})
            if self.notes:
                out["notes"] = list(self.notes)
            return out
        out = {
            "kind": self.kind, "model": self.model, "device": self.device, "execution_path": self.execution_path,
            "logprobs": self.logprobs_text, "constraint": self.constraint,
        }
        out.update({k: v for k, v in (("precision", self.precision), ("emulated", self.emulated), ("reasoning", self.reasoning),
                                      ("chat_template", self.template)) if v is not None})
        return out

    @property
    def summary(self) -> str:
        """One line for a terminal or a status bar: where and in which arithmetic the bars were computed."""
        if self.remote:
            return f"{self.model or 'a model'} on {self.server or 'a server'} at {self.url} · {self.logprobs_text}"
        device = f"{self.device} (emulated: {self.emulated})" if self.emulated else self.device
        return f"{self.model} on {device} · {self.execution_path} path · {self.logprobs_text} logprobs"


@dataclass(frozen=True)
class ModelInfo:
    """What a front end shows about the loaded model or server (the engine thread builds it; the window reads it)."""

    path: str  # the model folder, or the server's base URL
    name: str  # folder name, or "demo model"
    device: str
    defaults: SamplingSettings  # the model's generation_config (a server: the plain defaults)
    is_demo: bool
    load_seconds: float
    engine: EngineInfo | None = None  # service.info: kind local/remote, logprobs exactness, …
    model_key: str = ""  # the model name history and calibration are filed under (service.model_name)
    notices: tuple[str, ...] = ()  # what loading had to work around (e.g. AUTO fell back from the NPU)
    sees_images: bool | None = None  # the model can take pictures; None: not known (a remote server)
    capture_budget: int | None = None  # this machine's measured image budget for the model (`decider doctor --tune`)

    @property
    def remote(self) -> bool:
        return self.engine is not None and self.engine.remote
