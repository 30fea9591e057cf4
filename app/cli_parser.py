"""The `decider` command line's parser: one builder per command, the sampling and decision flags generated
from the engine's settings schema (engine.settings), so a declared setting is a flag without a line here."""

from __future__ import annotations

import argparse

from decider.engine.compile.devices import DEFAULT_VISION_DEVICE
from decider.engine.core.logprobs import MAX_COMPLETION_LOGPROBS, MAX_TOP_LOGPROBS, NORMALIZATIONS, VOCABULARY
from decider.engine.remote.engine import CONSTRAINTS, METHODS
from decider.engine.core.settings import DECISION_SETTINGS, SAMPLING_SETTINGS, SETTINGS

from .convert import WEIGHTS


def _add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model folder (an optimum-intel OpenVINO export)")
    parser.add_argument("--device", default="AUTO", help="AUTO, CPU, GPU or NPU (default AUTO: NPU > GPU > CPU)")
    parser.add_argument("--vision-device", default=DEFAULT_VISION_DEVICE,
                        help=f"device of the vision encoder: AUTO, CPU, GPU or NPU (default {DEFAULT_VISION_DEVICE}; "
                             "NPU: images scaled into a fixed budget)")
    parser.add_argument(
        "--fast", action="store_true",
        help="compile for speed, stated: the reduced-precision compile measured fastest on this CPU (by default the "
             "CPU's fastest float: bf16, f16, else f32, a u8 KV cache and int8 activations; f16 on a GPU), or exact "
             "where none measured faster; the bars are labelled with what ran",
    )
    parser.add_argument("--npu-max-prompt", type=int, default=None, help="NPU static prompt limit in tokens (default 1024)")
    parser.add_argument(
        "--execution-path", choices=("auto", "dynamic", "static", "npuw_llm"), default="auto",
        help="auto: static shapes on the NPU, the dynamic export elsewhere; npuw_llm: the NPU plugin's LLM pipeline",
    )


# The bars are read from the model's distribution, never drawn: sampling only shapes tokens that are drawn.
DECISION_SAMPLING_NOTE = (
    "they act on drawn tokens only (the reasoning with --think, the pick with --sample-choice): "
    "without --think they do not change the bars"
)


def _add_sampling_args(parser: argparse.ArgumentParser, decision: bool = False) -> None:
    """One flag per sampling setting users set (engine.settings declares them), plus --max-tokens.

    decision: the command shows bars, so each flag's help says sampling does not move them without --think."""
    group = parser.add_argument_group(
        "sampling (defaults: the model's generation_config, else Qwen3.5's)",
        DECISION_SAMPLING_NOTE[0].upper() + DECISION_SAMPLING_NOTE[1:] + "." if decision else None)
    suffix = "; without --think the bars do not change" if decision else ""
    for setting in SAMPLING_SETTINGS:
        if not setting.exposed:
            continue
        # No default here: an absent flag leaves the model's own default in place.
        group.add_argument(setting.flag, type=setting.kind, choices=setting.choices or None,
                           help=f"{setting.help} ({setting.range_text()}){suffix}")
    _add_setting(group, "max_tokens")


def _add_decision_args(parser: argparse.ArgumentParser) -> None:
    """One flag per decision setting (engine.settings' DecisionSettings), in the declared order."""
    group = parser.add_argument_group("decision")
    for setting in DECISION_SETTINGS:
        _add_setting(group, setting.name)


def _add_setting(parser: argparse.ArgumentParser | argparse._ArgumentGroup, name: str) -> None:
    """A decision setting's flag with its declared type, default and help (--x/--no-x for a bool)."""
    setting = SETTINGS[name]
    text = setting.help
    if setting.kind is bool:
        parser.add_argument(setting.flag, action=argparse.BooleanOptionalAction, default=setting.default, help=text)
    else:
        parser.add_argument(setting.flag, type=setting.kind, default=setting.default, help=f"{text} ({setting.range_text()})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="decider", description="A desktop decision agent on Qwen3.5 + OpenVINO.")
    sub = parser.add_subparsers(dest="command")
    _complete_command(sub)
    _chat_command(sub)
    _ask_command(sub)
    _history_command(sub)
    _calibrate_command(sub)
    _serve_command(sub)
    _gui_command(sub)
    _models_command(sub)
    _pull_command(sub)
    _convert_command(sub)
    _doctor_command(sub)
    return parser


def _complete_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("complete", help="raw text completion; prints an OpenAI text_completion object")
    _add_model_args(p)
    p.add_argument("--prompt", required=True, help="the text to continue")
    p.add_argument("--logprobs", type=int, default=None,
                   help=f"0-{MAX_COMPLETION_LOGPROBS}: the drawn token's logprob plus N alternatives")
    _add_sampling_args(p)


def _chat_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("chat", help="one chat turn; prints an OpenAI chat.completion object")
    _add_model_args(p)
    p.add_argument("--message", required=True, help="the user's message")
    p.add_argument("--system", help="system prompt")
    _add_setting(p, "think")
    p.add_argument("--logprobs", action="store_true", help="report each answer token's logprob")
    p.add_argument("--top-logprobs", type=int, default=None,
                   help=f"0-{MAX_TOP_LOGPROBS} alternatives per token (needs --logprobs)")
    _add_sampling_args(p)


def _ask_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ask", help="decide between options; prints bars (or --json)")
    _add_model_args(p)
    p.add_argument("question")
    p.add_argument("--option", action="append", default=[], help="an option (repeat 2-10 times)")
    p.add_argument("--tool", metavar="FILE", help="JSON file of OpenAI tools: the functions are the options (bars: how "
                   "likely the model calls each; the chosen call's arguments follow its schema)")
    p.add_argument("--context", help="file with shared context (rules, a document); its state is kept in the prompt cache and reused by later decisions")
    p.add_argument("--image", action="append", default=[], metavar="PATH",
                   help="an image the model looks at (PNG, JPEG, …; repeatable; needs a vision-language export)")
    p.add_argument("--system", help="system prompt")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _add_decision_args(p)
    _add_sampling_args(p, decision=True)

    p.add_argument("--no-history", action="store_true", help="do not record this decision in the history")
    p.add_argument("--no-image-hash", action="store_true",
                   help="the history keeps only each image's size, not the sha256 of its pixels (never the image itself)")
    remote = p.add_argument_group("remote engine (an OpenAI-compatible server with logprobs instead of --model)")
    remote.add_argument("--engine", metavar="URL", help="base URL, e.g. http://gpu-box:8000/v1 (vLLM, OVMS, llama.cpp)")
    remote.add_argument("--engine-key", help="API key for --engine")
    remote.add_argument("--engine-model", help="model name on the server (default: its first)")
    remote.add_argument("--engine-constraint", choices=CONSTRAINTS, default="none",
                        help="force an answer constraint (believed only if the answer shows it renormalised)")
    remote.add_argument("--engine-method", choices=METHODS, default="auto",
                        help="force how the bars are read (default auto: the most exact method the server offers)")
    remote.add_argument("--engine-timeout", type=float, default=120.0, help="seconds to wait for the server (default 120)")


def _history_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("history", help="decision history: list, label outcomes, export")
    hsub = p.add_subparsers(dest="history_command", required=True)
    q = hsub.add_parser("list", help="the latest decisions")
    q.add_argument("--limit", type=int, default=20, help="how many decisions to list, newest first (default 20)")
    q = hsub.add_parser("label", help="mark a decision's right answer")
    q.add_argument("id", type=int)
    q.add_argument("label", help="the right option's letter (A, B, ...), or 'none' to clear")
    q = hsub.add_parser("export", help="export the history")
    q.add_argument("--format", choices=("csv", "jsonl"), default="jsonl", help="file format (default jsonl)")
    q.add_argument("--out", help="file to write (default: standard output)")


def _calibrate_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("calibrate", help="calibration of labelled decisions: accuracy, Brier, ECE, reliability")
    p.add_argument("--model", help="model name as recorded (default: all models, each separately)")
    p.add_argument("--think", action=argparse.BooleanOptionalAction, default=None, help="only think / no-think decisions")
    p.add_argument("--bins", type=int, default=10, help="confidence bins of the reliability table and ECE (default 10)")
    p.add_argument("--fit", action="store_true", help="fit a temperature on 2/3 of the rows, report ECE on the rest")
    p.add_argument("--apply", action="store_true", help="with --fit: show calibrated confidence for this model from now on")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")


def _serve_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="local OpenAI-compatible API server")
    _add_model_args(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; another needs --api-key)")
    p.add_argument("--port", type=int, default=8765, help="TCP port to listen on (default 8765)")
    p.add_argument("--api-key", help="required for a non-loopback --host")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="let web pages from ORIGIN (e.g. http://localhost:3000) call the API; repeatable, '*' for any")
    p.add_argument("--no-image-hash", action="store_true",
                   help="the history keeps only each image's size, not the sha256 of its pixels (never the image itself)")
    p.add_argument("--logprob-normalization", choices=NORMALIZATIONS, default=VOCABULARY,
                   help="what prompt logprobs (echo) are normalised over unless a request says: 'vocabulary' (default): "
                        "over the tokenizer's real ids (the head's padding rows excluded); 'padded_head': over the "
                        "model's whole padded output head, as transformers and llama.cpp do")


def _gui_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("gui", help="the desktop window (the default command)")
    _add_model_args(p)
    p.add_argument("--question", help="put this question in the form (decided at start only with --screenshot)")
    p.add_argument("--option", action="append", default=[], help="an option for the form (repeat 2-10 times)")
    p.add_argument("--tool", metavar="FILE", help="JSON file of OpenAI tools: the form's options become the functions")
    p.add_argument("--think", action=argparse.BooleanOptionalAction, default=None,
                   help="let the model reason first (default: the window's saved setting)")
    p.add_argument("--screenshot", help="run the decision, save a PNG of the window and exit")
    p.add_argument("--overlay-screenshot", help="with --screenshot: also save a PNG of the overlay")
    p.add_argument("--tab", choices=("decision", "inspector", "calibration", "history"),
                   help="the tab to show (with --screenshot: the tab in the picture)")


def _models_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("models", help="the models Decider knows: recent, demo and downloaded folders")
    p.add_argument("--json", action="store_true", help="print one JSON array")


def _pull_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("pull", help="download a model repository from the Hugging Face Hub (resumable, verified)")
    p.add_argument("repo_id", metavar="REPO_ID", help="owner/name of an OpenVINO export or a Qwen3.5 checkpoint")
    p.add_argument("--revision", help="branch, tag or commit (default: main)")
    head = p.add_mutually_exclusive_group()
    head.add_argument("--mtp-from", metavar="OWNER/NAME",
                      help="for an export without an MTP draft head: the checkpoint to fetch only the head's tensors "
                      "from (default: the base_model its README names)")
    head.add_argument("--no-mtp", action="store_true", help="do not fetch an MTP draft head for an export without one")


def _convert_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("convert", help="export a Qwen3.5 checkpoint to OpenVINO (needs decider[convert])")
    p.add_argument("hf_dir", metavar="HF_DIR", help="Hugging Face checkpoint folder (config.json + safetensors)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="new folder for the OpenVINO export")
    p.add_argument("--weights", choices=tuple(WEIGHTS), default="int4-npu",
                   help="weight format (default int4-npu: int4 symmetric channel-wise, the NPU's preferred)")
    p.add_argument("--no-validate", action="store_true", help="skip the test decision on CPU")
    p.add_argument("--report", metavar="FILE", help="also write the outcome as JSON to FILE (for the app's convert dialog)")


def _doctor_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("doctor", help="check OpenVINO, the devices and (optionally) a model folder")
    p.add_argument("model", metavar="MODEL", nargs="?", help="model folder to check")
    p.add_argument("--npu-max-prompt", type=int, default=None, help="NPU static prompt limit to report (default 1024)")
    p.add_argument("--device", default="AUTO", help="device to compile the model on (default AUTO: NPU > GPU > CPU)")
    p.add_argument("--no-compile", action="store_true", help="check the folder only; do not compile the model")
    p.add_argument("--tune", action="store_true", help="time the reduced-precision compiles on this CPU, keep the fastest "
                   "for --fast and fast reasoning, and say which (and whether fast reasoning pays here); for a model that sees, "
                   "also measure the largest image budget whose screen decision fits 3 s here and keep it as this "
                   "machine's default")
    p.add_argument("--json", action="store_true", help="print one JSON object")
