"""Build the compile plan (engine/compile/plan.py): one pure function from what was asked and what was measured.

`plan_compile(options, host, path=…, tuning=…)` decides every property of every compile a runner makes — the
language model, the text embeddings, the vision encoder on each candidate device, and the CPU properties NPUW's CPU
partitions take from the Core — with the reason for each. Its inputs: the device options (device resolved), the
precision request (options.exact), the host's CPU capabilities and NPU testing aids (`Host`, read once by
engine/compile/measurements.read_host) and this machine's fast-tuning measurement (engine/compile/measurements.Tuning). It reads no
file, no environment and no device; `plan_for` is the one convenience that reads those inputs, then calls it.

The precision rules themselves are engine/compile/precision.py's (cpu_properties, gpu_properties, npu_host_properties); the
device rules (NPUW, the static prompt limit) are here. Compiled models are cached per property set: OpenVINO 2026.4's
CPU model cache leaves the precision hints out of its key, so a bf16 and an f32 compile of one model in one CACHE_DIR
share a blob and the second imports the first's arithmetic (measured: its logits are the other precision's while
its INFERENCE_PRECISION_HINT reads back as asked). Each distinct property set gets a subfolder of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from collections.abc import Sequence
from dataclasses import replace

from .plan import (FIXED_WIDTH, FIXED_WIDTH_SNAPSHOTS, INTEGER_PIECES, ONE_TOKEN, PROJECTIONS_ENV, SHARED, STEP_GRAPH_ENV, VERIFY_GRAPH_ENV, WIDENED, CompilePlan, CompileTarget, Host,
                   Property)
from .devices import DeviceOptions, choose_device, npuw_devices_override, vision_candidates, visible_devices
from .measurements import Subject, Tuning, cache_file, cached, read_host
from ..model.folder import ModelFolder
from .precision import cpu_properties, fast_inference, gpu_properties, npu_host_properties, npuw_precision


# What each property does, for the reasons a plan states.
_MEANING = {
    "INFERENCE_PRECISION_HINT": "the arithmetic, always asked for: the plugin's own default differs by CPU",
    "KV_CACHE_PRECISION": "the KV cache's element type (the IR's metadata asks for f16)",
    "DYNAMIC_QUANTIZATION_GROUP_SIZE": "int8 quantisation of activations in front of integer weights ('0': none)",
    "INFERENCE_NUM_THREADS": "threads per inference",
}
CACHE_REASON = ("the compiled-model cache, a subfolder per property set: OpenVINO 2026.4's CPU cache key leaves the "
                "precision hints out, so two precisions sharing a folder import each other's compile")


def _precision(properties: dict[str, object], why: str) -> list[Property]:
    return [Property(name, value, f"{why} ({_MEANING.get(name, name)})") for name, value in properties.items()]


def _npuw(host: Host) -> list[Property]:
    settings = [
        Property("NPU_USE_NPUW", "YES", "the NPU runs Qwen3.5 through NPUW, which partitions the model"),
        # With f16 interconnects, multi-token static variants of Qwen3.5 fail to create an infer request where a
        # partition runs on the CPU (an f16 subgraph input receives f32), measured with OpenVINO 2026.4.1.
        Property("NPUW_F16IC", "NO", "f16 interconnects break multi-token variants with CPU partitions (OpenVINO 2026.4.1)"),
    ]
    if host.npuw_devices:
        settings.append(Property("NPUW_DEVICES", host.npuw_devices, "the testing aid DECIDER_NPUW_DEVICES: NPUW runs on these devices"))
    return settings


def _cpu_precision(options: DeviceOptions, host: Host) -> list[Property]:
    if options.exact:
        return _precision(cpu_properties(True), "exact log-probabilities requested")
    why = f"--fast, not measured here: the stated default ({fast_inference(host.capabilities)} is this CPU's fastest arithmetic)"
    return _precision(cpu_properties(False, host.capabilities), why)


def _language(device: str, options: DeviceOptions, host: Host, path: str) -> list[Property]:
    """The properties of the language model's compile before any measurement or override (CACHE_DIR apart)."""
    family = device.split(".")[0]
    latency = Property("PERFORMANCE_HINT", "LATENCY", "one conversation at a time: latency, not throughput")
    if family == "CPU":
        settings = [*_cpu_precision(options, host), latency]
        if options.runtime_cache_capacity is not None:
            settings.append(Property("CPU_RUNTIME_CACHE_CAPACITY", options.runtime_cache_capacity,
                                    "the CPU plugin's per-shape kernel cache, as asked (DeviceOptions.runtime_cache_capacity)"))
        return settings
    if family == "GPU":
        why = "exact log-probabilities requested" if options.exact else "--fast: the GPU's f16"
        return [*_precision(gpu_properties(options.exact), why), latency]
    if family == "NPU" and path == "static":
        # The host keeps the caches; NPUW only partitions and runs a static graph (its CPU partitions' arithmetic is
        # the Core's, see `_host`).
        return _npuw(host)
    limit = "NPUW_LLM reshapes the prefill model to a static prompt"
    return [*_npuw(host),
            Property("NPUW_LLM", "YES", "NPUW's own LLM pipeline (the npuw_llm path)"),
            Property("NPUW_LLM_BATCH_DIM", 0, "the export's batch axis"),
            Property("NPUW_LLM_SEQ_LEN_DIM", 2, "the export's sequence axis of the KV cache"),
            Property("NPUW_LLM_MAX_PROMPT_LEN", options.npu_max_prompt_len, f"{limit} (DeviceOptions.npu_max_prompt_len)"),
            Property("NPUW_LLM_MIN_RESPONSE_LEN", options.npu_min_response_len, f"{limit} (DeviceOptions.npu_min_response_len)")]


# Without AMX, the integer pieces pay at one thread and where the weights dominate what each thread does per token:
# measured (BENCHMARKS.md, seventh and eleventh passes, 0.8B and 2B exact steps) they won at every one-thread point and
# wherever a thread streamed ≥ 720 MiB of the int8 export (0.8B at one thread: Zen 4 55.0 vs 59.2 ms, Zen 5 33.6 vs
# 38.6; 2B at one and two threads on the Zen 5: 66.7 vs 99.2, 44.9 vs 58.4) and lost at 360 MiB (0.8B at two threads:
# Zen 4 41.7 vs 37.0, Zen 5 27.0 vs 25.4).
PIECES_BYTES_PER_THREAD = 512 * 2**20


def _weights_share(host: Host, weight_bytes: int) -> tuple[bool, str]:
    """Whether the integer pieces pay without AMX (PIECES_BYTES_PER_THREAD's measurements), and the share in words."""
    if host.threads == 1:
        return True, "one thread per inference"
    per_thread = weight_bytes // host.threads if host.threads else 0
    if not per_thread:
        return False, "the weights per thread unknown"
    return per_thread >= PIECES_BYTES_PER_THREAD, f"{per_thread / 2**20:,.0f} MiB of weights per thread ({host.threads} threads)"


def _int8_projections(options: DeviceOptions, host: Host, path: str, weight_bytes: int) -> Property | None:
    """How the exact CPU compile multiplies int8 weights: in integer pieces (engine/graphs/int8_pieces.py) where the
    CPU has AMX's int8 tiles, or an int8 dot-product instruction and one thread per inference or at least
    PIECES_BYTES_PER_THREAD of weights per inference thread, or where asked for; else widened to f32 as the plugin
    does. weight_bytes: the language model's weights file (0: unknown)."""
    if options.device.split(".")[0] != "CPU" or path != "dynamic" or not options.exact:
        return None
    asked = os.environ.get(PROJECTIONS_ENV, "").strip().lower()
    if asked == "widened":
        return Property("int8 projections", WIDENED, f"{PROJECTIONS_ENV}=widened")
    if "VNNI" not in host.capabilities:
        return Property("int8 projections", WIDENED, "no int8 dot-product instruction here (AVX-512 VNNI, AVX-VNNI or AMX): "
                                                    "AVX2's int8 path sums pairs of products in 16 bits, with saturation")
    pays, share = _weights_share(host, weight_bytes)
    if asked == "pieces":
        why = "asked for"
    elif "AMX_INT8" in host.capabilities:
        why = "AMX's int8 tiles on this CPU"
    elif pays:
        why = (f"int8 dot products and {share}: the pieces measured faster there (2B at two threads: 44.9 vs 58.4 ms a "
               "step on a Zen 5)")
    else:
        return Property("int8 projections", WIDENED,
                        f"int8 dot products here, but no AMX and {share}: below {PIECES_BYTES_PER_THREAD // 2**20} MiB the "
                        "integer pieces measured slower than the widened path (0.8B at two threads: 27.0 vs 25.4 ms a step "
                        f"on a Zen 5; {PROJECTIONS_ENV}=pieces asks for them)")
    return Property("int8 projections", INTEGER_PIECES,
                    why + ": activations in four 8-bit pieces (29 bits), exact int32 "
                    f"sums, f32-grade results; the weights stream at the int8 kernels' rate ({PROJECTIONS_ENV}=widened: "
                    "the plugin's f32 path)")


def _side_graph(name: str, env: str, own: str, why: str, options: DeviceOptions, path: str, twin: bool) -> Property | None:
    """Where some of the CPU's forwards run: on a compile of their own (`own`, because `why`) unless `env`=shared or
    the runner is a twin (a fast-reasoning twin or a tuning candidate: already a second copy of the weights)."""
    if options.device.split(".")[0] != "CPU" or path != "dynamic":
        return None
    if os.environ.get(env, "").strip().lower() == "shared":
        return Property(name, SHARED, f"{env}=shared")
    if twin:
        return Property(name, SHARED, "a twin's forwards share its compile (it already holds the weights twice)")
    return Property(name, own, why)


def _step_graph(options: DeviceOptions, path: str, twin: bool) -> Property | None:
    """Where the CPU's one-token steps run: on a compile of the same graph with its shapes fixed at one token
    (engine/graphs/one_token.py), unless DECIDER_STEP_GRAPH=shared or the runner is a twin."""
    return _side_graph("decode steps", STEP_GRAPH_ENV, ONE_TOKEN,
                       "the same graph with its shapes fixed at one token: the plugin prepares its nodes once instead of "
                       "at every step (0.8B: 65 → 55 ms at one thread); its own packed weights (0.8B: +0.85 GiB resident), "
                       f"the state moved to it and back once per prompt ({STEP_GRAPH_ENV}=shared: steps on the runner's "
                       "compile)", options, path, twin)


def _verify_graph(options: DeviceOptions, path: str, twin: bool) -> Property | None:
    """Where the CPU's verify forwards (a token and its drafts) run: on a compile fixed at the drafts' width, made when
    a request first drafts, unless DECIDER_VERIFY_GRAPH=shared or the runner is a twin."""
    why = ("the same graph with its shapes fixed at the width a drafted loop verifies at: a 4-token forward costs ~1.3x a "
           "step there against ~1.6x on the runner's compile (0.8B, 1 thread); its own packed weights (0.8B: +0.85 GiB "
           f"resident) only once a request drafts ({VERIFY_GRAPH_ENV}=shared: verifies on the runner's compile)")
    if os.environ.get(VERIFY_GRAPH_ENV, "").strip().lower() == "snapshot":
        own, why = FIXED_WIDTH_SNAPSHOTS, (f"{VERIFY_GRAPH_ENV}=snapshot: {why}; each verify copies the DeltaNet states "
                                           "first, a rollback restores them and the kept tokens are fed again")
    else:
        own, why = FIXED_WIDTH, (f"{why}; a verify leaves its tokens pending in the DeltaNet states and the next forward "
                                 "commits the ones kept: a rejected draft costs no state copy and no replay "
                                 f"({VERIFY_GRAPH_ENV}=snapshot: snapshots and restores)")
    return _side_graph("verify forwards", VERIFY_GRAPH_ENV, own, why, options, path, twin)


def _host(device: str, exact: bool, host: Host) -> tuple[Property, ...]:
    """What the Core's CPU properties are set to before an NPU compile: NPUW's CPU partitions compile with them (its own
    configuration does not reach them, measured with OpenVINO 2026.4.1)."""
    if device.split(".")[0] != "NPU":
        return ()
    why = ("DECIDER_NPUW_PRECISION=f16: the NPU's own f16 (or the nearest arithmetic this CPU has)" if host.npuw_precision == "f16"
           else "NPUW's CPU partitions compute what the CPU path computes")
    return tuple(_precision(npu_host_properties(exact, host.capabilities, host.npuw_precision), why))


def _cached(settings: list[Property], device: str, host: tuple[Property, ...], options: DeviceOptions) -> tuple[Property, ...]:
    """The settings with CACHE_DIR first: a subfolder of the cache folder named by a hash of everything else."""
    if options.cache_dir is None:
        return tuple(settings)
    keyed = {"device": device, "properties": {s.name: s.value for s in settings},
             "host": {s.name: s.value for s in host}}
    digest = hashlib.sha256(json.dumps(keyed, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return (Property("CACHE_DIR", str(Path(options.cache_dir) / digest), CACHE_REASON), *settings)


def _merge(settings: list[Property], changes: list[Property]) -> list[Property]:
    """`settings` with `changes` replacing the same names in place and new names appended (as dict.update)."""
    by_name = {s.name: s for s in changes}
    merged = [by_name.pop(s.name, s) for s in settings]
    return merged + list(by_name.values())


def _tuned(settings: list[Property], tuning: Tuning, options: DeviceOptions, host: Host) -> list[Property]:
    """--fast after a measurement: the winner's properties (with the thread count it ran best at), or the exact compile
    where nothing beat it."""
    chosen = tuning.properties
    if chosen is None:
        exact = _language(options.device, replace(options, exact=True), host, "dynamic")
        why = "--fast, but no reduced compile beat the exact step here: exact"
        return _merge(settings, [replace(s, reason=f"{why} ({_MEANING[s.name]})") if s.name in _MEANING else s for s in exact])
    return _merge(settings, _precision(chosen, f"--fast: measured fastest here ({tuning.chosen})"))


def tuning_words(tuning: Tuning | None, applies: bool) -> str:
    if not applies:
        return ""
    if tuning is None:
        return "not measured here: --fast compiles its stated default"
    if tuning.chosen is None:
        return "measured: no reduced compile beat the exact step, so --fast compiles exact"
    threads = f" at {tuning.threads} threads" if tuning.threads else ""
    return f"measured: {tuning.chosen}{threads} is fastest here"


def _target(role: str, device: str, settings: list[Property], options: DeviceOptions, host: tuple[Property, ...]) -> CompileTarget:
    return CompileTarget(role, device, _cached(settings, device, host, options), host)


def _vision(options: DeviceOptions, host: Host, devices: Sequence[str]) -> tuple[CompileTarget, ...]:
    return tuple(_target("vision encoder", device, _language(device, options, host, "static"), options,
                         _host(device, options.exact, host)) for device in devices)


def vision_targets(options: DeviceOptions, host: Host, available: Sequence[str]) -> tuple[CompileTarget, ...]:
    """The vision encoder's compiles on its candidate devices, for options.vision_device among `available` (OpenVINO's
    devices: the NPU testing aid's NPU is added here)."""
    return _vision(options, host, vision_candidates(options.vision_device, visible_devices(list(available))))


def plan_compile(options: DeviceOptions, host: Host, *, path: str, tuning: Tuning | None = None, can_measure: bool = False,
                 overrides: dict[str, object] | None = None, embeddings: bool = False,
                 vision_devices: Sequence[str] = (), weight_bytes: int = 0) -> CompilePlan:
    """The plan for a runner on options.device (resolved) computing on `path` ("dynamic", "static", "npuw_llm").

    tuning: this machine's measurement for the model (None: none); it decides --fast on the CPU's dynamic path.
    can_measure: there is a folder to keep a measurement in (an unmeasured --fast plan then says measure_first).
    overrides: a twin's properties (a tuning candidate, fast reasoning): applied last, no measurement (a twin built from
    a runner uses that runner's embeddings and vision encoder). embeddings: the export has a text embeddings model.
    vision_devices: the vision encoder's candidate devices in order (empty: no vision encoder). weight_bytes: the
    language model's weights file (how the exact CPU compile multiplies int8 weights depends on it; 0: unknown)."""
    device = options.device
    core_cpu = _host(device, options.exact, host)
    settings = _language(device, options, host, path)
    applies = overrides is None and not options.exact and device.split(".")[0] == "CPU" and path == "dynamic"
    if applies and tuning is not None:
        settings = _tuned(settings, tuning, options, host)
    if overrides is not None:
        settings = _merge(settings, [Property(name, value, "asked for by this twin (a fast-tuning candidate or fast reasoning)")
                                     for name, value in overrides.items()])
    exact = replace(options, exact=True)
    fallback = _target("language model (exact: the planned compile killed a test process)", device,
                       _language(device, exact, host, "dynamic"), exact, ())
    table = None
    if embeddings:
        # A table lookup, always exact (the fast compile's arithmetic starts after it). The static path compiles it
        # without the cache folder or the kernel-cache capacity, as it always has.
        lookup = exact if path != "static" else DeviceOptions(device="CPU", exact=True)
        table = _target("text embeddings", "CPU", _language("CPU", lookup, host, "dynamic"), lookup, ())
    vision = _vision(options, host, vision_devices)
    return CompilePlan(options, path, _target("language model", device, settings, options, core_cpu), fallback, table, vision,
                       tuning_words(tuning, applies), applies and tuning is None and can_measure, overrides is not None,
                       _int8_projections(options, host, path, weight_bytes), _step_graph(options, path, overrides is not None),
                       _verify_graph(options, path, overrides is not None))


def compile_properties(device: str, options: DeviceOptions, capabilities: Sequence[str] = (), host: Host | None = None,
                       path: str = "dynamic") -> dict[str, object]:
    """The language model's stated compile on `device` (no measurement applied): the plan's properties, for callers
    that compile a model of their own beside a runner (the prompt scorer, the benches). host: the NPU testing aids
    are read from the environment unless given."""
    if host is None:
        host = Host(tuple(capabilities), npuw_devices_override(), npuw_precision())
    return plan_compile(replace(options, device=device), replace(host, capabilities=tuple(capabilities)), path=path).language.properties


def static_compile_properties(device: str, options: DeviceOptions, capabilities: Sequence[str] = ()) -> dict[str, object]:
    """As compile_properties for the static runner's variants (on the NPU: NPUW without its LLM pipeline)."""
    return compile_properties(device, options, capabilities, path="static")


def plan_for(folder: ModelFolder, options: DeviceOptions, core, *, static: bool = False,
             overrides: dict[str, object] | None = None, notices: list[str] | None = None) -> CompilePlan:
    """The plan for a runner of `folder` with these options on this Core: the device resolved among the visible ones,
    the host read once (engine/compile/measurements.read_host), this machine's measurement read (never taken: that is
    engine/runners/choice.measured_plan's step). static: the static runner; else the dynamic one (NPUW_LLM on the
    NPU). notices: where a damaged measurement file is said."""
    available = visible_devices(core.available_devices)
    options = replace(options, device=choose_device(options.device, available))
    path = "static" if static else "npuw_llm" if options.device.startswith("NPU") else "dynamic"
    subject = Subject(folder, options.device, options, notices if notices is not None else [])
    measured = overrides is None and not options.exact and options.device.startswith("CPU") and path == "dynamic"
    vision = vision_candidates(options.vision_device, available) if folder.has_vision else []
    return plan_compile(options, read_host(core), path=path, tuning=cached(subject) if measured else None,
                        can_measure=cache_file(subject) is not None, overrides=overrides,
                        embeddings=folder.layout == "vl", vision_devices=vision, weight_bytes=_weight_bytes(folder))


def _weight_bytes(folder: ModelFolder) -> int:
    try:
        return folder.language_ir.with_suffix(".bin").stat().st_size
    except OSError:
        return 0
