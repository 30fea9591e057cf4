"""`decider` command line: complete, chat, ask, serve, gui and the model tools."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from engine.errors import DeciderError, SettingsError

from .requests import sampling_from


def _add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model folder (an optimum-intel OpenVINO export)")
    parser.add_argument("--device", default="AUTO", help="AUTO, CPU, GPU or NPU (default AUTO: NPU > GPU > CPU)")
    parser.add_argument(
        "--fast", action="store_true",
        help="let the device pick lower precision (bf16/f16 KV cache); faster, logprobs no longer exact",
    )
    parser.add_argument("--npu-max-prompt", type=int, default=None, help="NPU static prompt limit in tokens (default 1024)")


def _add_sampling_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sampling (defaults: the model's generation_config, else Qwen3.5's)")
    group.add_argument("--temperature", type=float)
    group.add_argument("--top-k", type=int)
    group.add_argument("--top-p", type=float)
    group.add_argument("--min-p", type=float)
    group.add_argument("--repetition-penalty", type=float)
    group.add_argument("--frequency-penalty", type=float)
    group.add_argument("--presence-penalty", type=float)
    group.add_argument("--seed", type=int)
    group.add_argument("--max-tokens", type=int, default=256)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="decider", description="A desktop decision agent on Qwen3.5 + OpenVINO.")
    sub = parser.add_subparsers(dest="command")

    p = sub.add_parser("complete", help="raw text completion; prints an OpenAI text_completion object")
    _add_model_args(p)
    p.add_argument("--prompt", required=True)
    p.add_argument("--logprobs", type=int, default=None, help="0-5: the drawn token's logprob plus N alternatives")
    _add_sampling_args(p)

    p = sub.add_parser("chat", help="one chat turn; prints an OpenAI chat.completion object")
    _add_model_args(p)
    p.add_argument("--message", required=True)
    p.add_argument("--system")
    p.add_argument("--think", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--logprobs", action="store_true")
    p.add_argument("--top-logprobs", type=int, default=0, help="0-20 alternatives per token (with --logprobs)")
    _add_sampling_args(p)
    return parser


def _device_options(args: argparse.Namespace):
    from engine.devices import DeviceOptions

    kwargs = {"device": args.device, "exact": not args.fast}
    if args.npu_max_prompt is not None:
        kwargs["npu_max_prompt_len"] = args.npu_max_prompt
    from .config import compiled_cache_dir

    return DeviceOptions(cache_dir=compiled_cache_dir(), **kwargs)


def _service(args: argparse.Namespace):
    from .config import resolve_model_dir
    from .service import EngineService

    return EngineService(resolve_model_dir(args.model), _device_options(args))


def _sampling(args: argparse.Namespace, service) -> object:
    return sampling_from(vars(args), service.defaults)


def cmd_complete(args: argparse.Namespace) -> int:
    from engine.openai_format import text_completion

    if args.logprobs is not None and not 0 <= args.logprobs <= 5:
        raise SettingsError(f"--logprobs must be in 0..5 (got {args.logprobs})")
    service = _service(args)
    request = service.completion_request(args.prompt, _sampling(args, service), args.max_tokens, args.logprobs)
    completion = service.run(request)
    print(json.dumps(text_completion(completion, service.model_name, len(args.prompt)), ensure_ascii=False))
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    from engine.chat_template import Message
    from engine.openai_format import chat_completion

    if not 0 <= args.top_logprobs <= 20:
        raise SettingsError(f"--top-logprobs must be in 0..20 (got {args.top_logprobs})")
    service = _service(args)
    messages = ([Message("system", args.system)] if args.system else []) + [Message("user", args.message)]
    top = args.top_logprobs if args.logprobs else None
    request = service.chat_request(messages, args.think, _sampling(args, service), args.max_tokens, top)
    completion = service.run(request)
    print(json.dumps(chat_completion(completion, service.model_name), ensure_ascii=False))
    return 0


COMMANDS = {"complete": cmd_complete, "chat": cmd_chat}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command or "gui"
    handler = COMMANDS.get(command)
    if handler is None:
        parser.error(f"command {command!r} is not available yet")
    try:
        return handler(args)
    except SettingsError as exc:
        print(f"decider: error: {exc}", file=sys.stderr)
        return 2
    except DeciderError as exc:
        print(f"decider: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
