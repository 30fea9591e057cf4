"""The compile plan: every property each compile of a runner gets, and why, as one value decided before it exists.

A runner compiles up to four kinds of model: the language model (on the NPU: in static variants, or through NPUW's
LLM pipeline), the text embeddings of a vision-language export, the vision encoder (on one of several candidate
devices), and, before an NPU compile, the CPU properties set on the Core that NPUW's CPU partitions compile with.
engine/compile/planner.plan_compile decides all of them at once from the device options, the precision request, the CPU's
capabilities and this machine's fast-tuning measurement; runners only apply what the plan says, and `decider doctor`
prints it (`describe`). Each property is a `Property` that carries the reason it has this value.
"""

from __future__ import annotations

from dataclasses import dataclass

from .devices import DeviceOptions


PROJECTIONS_ENV = "DECIDER_INT8_PROJECTIONS"  # =widened: the plugin's f32 path for int8 weights; =pieces: integer pieces
INTEGER_PIECES = "integer pieces"
WIDENED = "widened to f32"
STEP_GRAPH_ENV = "DECIDER_STEP_GRAPH"  # =shared: one-token steps on the runner's own compile (a bench's peer)
ONE_TOKEN = "a compile of its own, one token"
SHARED = "the runner's compile"
# =shared: verify forwards on the runner's own compile; =snapshot: on their own, rolled back by a snapshot (benches' peers)
VERIFY_GRAPH_ENV = "DECIDER_VERIFY_GRAPH"
FIXED_WIDTH = "a compile of its own at the drafts' width, made by the first request that drafts; kept tokens committed lazily"
FIXED_WIDTH_SNAPSHOTS = "a compile of its own at the drafts' width, made by the first request that drafts; rolled back from snapshots"


@dataclass(frozen=True)
class Host:
    """What the plan needs to know of this machine: the CPU plugin's OPTIMIZATION_CAPABILITIES (plus VNNI), and the
    NPU testing aids DECIDER_NPUW_DEVICES (NPUW's devices) and DECIDER_NPUW_PRECISION (its CPU partitions' arithmetic)."""

    capabilities: tuple[str, ...] = ()
    npuw_devices: str | None = None
    npuw_precision: str = "f32"
    threads: int = 0  # the CPU plugin's threads per inference on this Core (its INFERENCE_NUM_THREADS; 0: unknown)


@dataclass(frozen=True)
class Property:
    """One compile property, its value exactly as passed to OpenVINO, and why it has that value."""

    name: str
    value: object
    reason: str


@dataclass(frozen=True)
class CompileTarget:
    """One compiled model: the device it compiles on, its properties, and the CPU properties set on the Core before
    it (`host`, for NPUW's CPU partitions on the NPU; empty elsewhere)."""

    role: str  # "language model", "text embeddings", "vision encoder"
    device: str
    settings: tuple[Property, ...]
    host: tuple[Property, ...] = ()

    @property
    def properties(self) -> dict[str, object]:
        return {s.name: s.value for s in self.settings}

    @property
    def host_properties(self) -> dict[str, object]:
        return {s.name: s.value for s in self.host}


@dataclass(frozen=True)
class CompilePlan:
    """What a runner compiles and how. `options` are the user's (device resolved); `path` the runner that computes
    ("dynamic", "static", "npuw_llm"); `fallback` the language model's exact compile, used where the planned reduced
    one killed a test process (engine/compile/probe.py); `measure_first` says --fast's measurement is missing and
    there is a folder to keep one in (engine/runners/choice.measured_plan measures, then plans again)."""

    options: DeviceOptions
    path: str
    language: CompileTarget
    fallback: CompileTarget
    embeddings: CompileTarget | None = None
    vision: tuple[CompileTarget, ...] = ()
    tuning: str = ""  # what the fast-tuning measurement said, in words ("" where it does not apply)
    measure_first: bool = False
    twin: bool = False  # a twin's plan: its properties were asked for (a tuning candidate, fast reasoning)
    # How the exact compile multiplies int8 weights (engine/graphs/int8_pieces.py): value "integer pieces" or
    # "widened to f32", with why; None where the question does not arise (reduced precision, GPU, NPU).
    int8_projections: Property | None = None
    # Where one-token decode steps run (engine/graphs/one_token.py): value "a compile of its own, one token" or "the
    # runner's compile", with why; None where the question does not arise (GPU, NPU, the static path).
    step_graph: Property | None = None
    # Where a drafted loop's verify forwards run (engine/graphs/one_token.fixed_width_graph): FIXED_WIDTH or SHARED,
    # with why; None where the question does not arise (as for step_graph).
    verify_graph: Property | None = None

    @property
    def integer_pieces(self) -> bool:
        return self.int8_projections is not None and self.int8_projections.value == INTEGER_PIECES

    @property
    def one_token_steps(self) -> bool:
        return self.step_graph is not None and self.step_graph.value == ONE_TOKEN

    @property
    def own_verifies(self) -> bool:
        return self.verify_graph is not None and self.verify_graph.value in (FIXED_WIDTH, FIXED_WIDTH_SNAPSHOTS)

    @property
    def lazy_commits(self) -> bool:
        """Verify forwards leave their chunk pending until the next says how much was kept (engine/graphs/lazy_commit.py)."""
        return self.verify_graph is not None and self.verify_graph.value == FIXED_WIDTH

    @property
    def device(self) -> str:
        return self.options.device

    @property
    def exact(self) -> bool:
        return self.options.exact

    def describe(self) -> list[str]:
        """The plan in words, one line per setting: `decider doctor` prints this under "compile plan:"."""
        lines = [f"device {self.device}, {self.path} path, {'exact' if self.exact else '--fast'} precision requested"]
        if self.tuning:
            lines.append(f"fast tuning: {self.tuning}")
        for target in (self.language, self.embeddings, *self.vision):
            if target is None:
                continue
            lines.append(f"{target.role} on {target.device}:")
            lines += [f"  Core CPU {s.name}={s.value}: {s.reason}" for s in target.host]
            lines += [f"  {s.name}={s.value}: {s.reason}" for s in target.settings]
            if target is self.language:
                lines += [f"  {p.name}: {p.value}: {p.reason}" for p in (self.int8_projections, self.step_graph, self.verify_graph) if p is not None]
        return lines
