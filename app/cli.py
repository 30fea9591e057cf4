"""`decider` command line: complete, chat, ask, serve, gui and the model tools."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from decider.engine.compile.devices import DEFAULT_VISION_DEVICE
from decider.engine.core.errors import DeciderError, SettingsError
from decider.engine.core.logprobs import MAX_COMPLETION_LOGPROBS, MAX_TOP_LOGPROBS
from decider.engine.core.settings import DECISION_SETTINGS

from .cli_parser import build_parser
from .requests import sampling_from

if TYPE_CHECKING:
    from decider.engine.core.settings import SamplingSettings

    from .calibration_history import CalibrationEntry
    from .service import DecisionService, EngineService


def _device_options(args: argparse.Namespace):
    from decider.engine.compile.devices import DeviceOptions

    kwargs = {"device": args.device, "exact": not args.fast, "path": getattr(args, "execution_path", "auto"),
              "vision_device": args.vision_device}
    if args.npu_max_prompt is not None:
        kwargs["npu_max_prompt_len"] = args.npu_max_prompt
    from .config import compiled_cache_dir

    return DeviceOptions(cache_dir=compiled_cache_dir(), **kwargs)


def _service(args: argparse.Namespace, history: bool = False) -> EngineService:
    from .service import open_local_service

    service = open_local_service(args.model, _device_options(args), history=history,
                                 announce=_say if args.command != "serve" else None)  # serve logs it
    for notice in service.runner.notices:  # e.g. the NPU could not compile the model and the CPU runs it
        print(f"decider: notice: {notice}", file=sys.stderr)
    return service


def _sampling(args: argparse.Namespace, service: DecisionService) -> SamplingSettings:
    return sampling_from(vars(args), service.defaults)


def cmd_complete(args: argparse.Namespace) -> int:
    from decider.engine.completions.openai_format import text_completion

    if args.logprobs is not None and not 0 <= args.logprobs <= MAX_COMPLETION_LOGPROBS:
        raise SettingsError(f"--logprobs must be in 0..{MAX_COMPLETION_LOGPROBS} (got {args.logprobs})")
    service = _service(args)
    request = service.completion_request(args.prompt, _sampling(args, service), args.max_tokens, args.logprobs)
    completion = service.run(request)
    print(json.dumps(text_completion(completion, service.model_name, len(args.prompt)), ensure_ascii=False))
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    from decider.engine.model.chat_template import Message
    from decider.engine.completions.openai_format import chat_completion

    if args.top_logprobs is not None and not 0 <= args.top_logprobs <= MAX_TOP_LOGPROBS:
        raise SettingsError(f"--top-logprobs must be in 0..{MAX_TOP_LOGPROBS} (got {args.top_logprobs})")
    if args.top_logprobs is not None and not args.logprobs:
        raise SettingsError("--top-logprobs needs --logprobs (the API refuses top_logprobs without logprobs too)")
    service = _service(args)
    messages = ([Message("system", args.system)] if args.system else []) + [Message("user", args.message)]
    top = (args.top_logprobs or 0) if args.logprobs else None
    request = service.chat_request(messages, args.think, _sampling(args, service), args.max_tokens, top)
    completion = service.run(request)
    print(json.dumps(chat_completion(completion, service.model_name), ensure_ascii=False))
    return 0


def _say(notice: str) -> None:
    print(f"decider: {notice}", file=sys.stderr)


MAX_CONTEXT_BYTES = 16 * 2**20  # far more than any context window holds; a device like /dev/zero never fills memory


def decision_request(args: argparse.Namespace, defaults, budget=None):
    from decider.engine.decisions.types import DecisionRequest

    from .images import ImageBudget, load_image_file, read_bounded

    context = None
    if args.context:
        data = read_bounded(args.context, MAX_CONTEXT_BYTES, "--context ")
        try:
            context = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SettingsError(f"--context {args.context}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    budget = budget or ImageBudget()  # one budget for all the --image files

    return DecisionRequest(
        question=args.question,
        options=tuple(args.option),
        images=tuple(load_image_file(path, budget) for path in args.image),
        system=args.system,
        context=context,
        sampling=sampling_from(vars(args), defaults),
        **{s.name: getattr(args, s.name) for s in DECISION_SETTINGS},  # `ask` has a flag for each
    )


def _check_engine_flags(args: argparse.Namespace) -> None:
    """Flags of the other engine are refused, never silently dropped."""
    if args.engine:
        local = [flag for flag, given in (("--model", args.model), ("--device", args.device != "AUTO"), ("--fast", args.fast),
                                          ("--npu-max-prompt", args.npu_max_prompt is not None),
                                          ("--vision-device", args.vision_device.upper() != DEFAULT_VISION_DEVICE)) if given]
        if local:
            raise SettingsError(f"{', '.join(local)} {'sets' if len(local) == 1 else 'set'} up the local engine: "
                                "not with --engine (the server runs its own model)")
    else:
        remote = [flag for flag, given in (("--engine-key", args.engine_key), ("--engine-model", args.engine_model),
                                           ("--engine-constraint", args.engine_constraint != "none"),
                                           ("--engine-method", args.engine_method != "auto")) if given]
        if remote:
            raise SettingsError(f"{', '.join(remote)} {'needs' if len(remote) == 1 else 'need'} --engine URL")


def _decision_service(args: argparse.Namespace) -> tuple[DecisionService, EngineService | None]:
    """(the service that decides, the local engine when it is one): a server with --engine, else the local model."""
    if not args.engine:
        local = _service(args, history=not args.no_history)
        return local, local
    from decider.engine.remote.engine import RemoteConfig

    from .history import open_history
    from .service import RemoteService

    config = RemoteConfig(args.engine, args.engine_key, args.engine_model, args.engine_timeout, args.engine_constraint,
                          args.engine_method)
    return RemoteService(config, None if args.no_history else open_history(_say)), None


def cmd_ask(args: argparse.Namespace) -> int:
    from .render import render_decision

    if args.tool:  # the functions are the options, on this machine or through a server (--engine)
        from .tool_decision import ask_with_tools

        _check_engine_flags(args)
        return ask_with_tools(args, lambda: _decision_service(args)[0])
    # Validate the request before the (slow) model load, so a typo fails at once.
    from decider.engine.core.settings import SamplingSettings

    decision_request(args, SamplingSettings())
    _check_engine_flags(args)
    service, local = _decision_service(args)
    if service.history is not None:
        service.history.image_hashes = not args.no_image_hash
    budget = None
    if local is not None:
        from .images import budget_for

        budget = budget_for(local.runner, service.model_name)
    result = service.decide(decision_request(args, service.defaults, budget), source="cli")
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        from .config import demo_label

        label = (local is not None and demo_label(local.runner.folder.path)) or service.model_name
        print(render_decision(args.question, result, label))
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from decider.engine.decisions.types import LABELS

    from .history import default_store

    store = default_store(_say)
    if args.history_command == "list":
        for row in store.rows(limit=args.limit, newest_first=True):
            right = "?" if row.right_index is None else LABELS[row.right_index]
            shown = row.shown_probabilities  # the bars the user saw (debiased where permute ran)
            verb = "drew " if row.drawn else "chose"
            tag = " debiased" if row.shown_field == "debiased_probability" else ""
            seen = f"  {row.images_seen} image{'s' if row.images_seen > 1 else ''}" if row.images_seen else ""
            doubt = " uncertain" if row.uncertain else ""
            print(f"{row.id:>5}  {row.created_at[:19]}  {row.model:<20.20}  {row.precision:<14.14}  {verb} "
                  f"{LABELS[row.choice_index]} ({shown[row.choice_index]:.1%}{tag}){doubt}  right {right}{seen}  "
                  f"{row.question[:50]}")
    elif args.history_command == "label":
        row = store.label(args.id, None if args.label.lower() == "none" else args.label)
        right = "cleared" if row.right_index is None else LABELS[row.right_index]
        print(f"decision {row.id}: right answer {right}")
    else:
        text = store.export_csv() if args.format == "csv" else store.export_jsonl()
        if args.out:
            try:
                with open(args.out, "w", encoding="utf-8", newline="") as handle:
                    handle.write(text)
            except OSError as exc:
                raise DeciderError(f"--out {args.out}: {exc.strerror}") from None
        else:
            sys.stdout.write(text)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from . import calibration_history
    from .history import default_store

    if not 2 <= args.bins <= 50:
        raise SettingsError(f"--bins must be in 2..50 (got {args.bins})")
    store = default_store(_say)
    models = [args.model] if args.model else store.models()
    modes = [args.think] if args.think is not None else [False, True]
    out: list[CalibrationEntry] = []
    for model in models:
        for think in modes:
            groups = calibration_history.by_precision(calibration_history.labelled(store, model, think))
            for precision, rows in groups.items():
                entry: CalibrationEntry = {"model": model, "think": think, "precision": precision,
                                           "report": calibration_history.report(rows, args.bins),
                                           "bias": calibration_history.bias(rows)}
                if args.fit:
                    fitted = entry["fit"] = calibration_history.fit(rows, args.bins)
                    # the saved temperature is per model and mode: one precision's fit only, never a guess among several
                    if args.apply and len(groups) == 1:
                        calibration_history.save_temperature(model, think, fitted.temperature)
                    elif args.apply:
                        _say(f"{model} ({'think' if think else 'no think'}): not applied, its labelled rows come from "
                             f"{len(groups)} precisions ({', '.join(groups)}); the applied temperature is one per model and mode")
                out.append(entry)
    if not out:
        raise SettingsError("no labelled decisions yet: label some with `decider history label ID LETTER`")
    if args.json:
        from dataclasses import asdict

        print(json.dumps([{**e, "report": asdict(e["report"]), **({"fit": asdict(e["fit"])} if "fit" in e else {})} for e in out],
                         default=str))
    else:
        from .render import render_calibration

        print("\n\n".join(render_calibration(e) for e in out))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from .api.server import serve

    api_key = args.api_key or os.environ.get("DECIDER_API_KEY") or None
    def service():
        opened = _service(args, history=True)
        if opened.history is not None:
            opened.history.image_hashes = not args.no_image_hash
        opened.logprob_normalization = args.logprob_normalization
        return opened

    return serve(service, args.host, args.port, api_key, tuple(args.allow_origin))


def cmd_gui(args: argparse.Namespace) -> int:
    from .gui import gui_main

    return gui_main(args)


def cmd_models(args: argparse.Namespace) -> int:
    from .models import devices_here, known_models, render_entry

    entries = known_models()
    seen = devices_here()
    if args.json:
        print(json.dumps([{**e.to_dict(), "devices_here": seen} for e in entries], ensure_ascii=False))
    elif not entries:
        print("no models yet: `decider pull REPO_ID` downloads one (see docs/models.md)")
    else:
        print(f"OpenVINO sees: {', '.join(seen) or 'no device'}")
        print("\n".join(render_entry(e, seen) for e in entries))
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    from .pull import check_repo_id, pull, summary

    if args.mtp_from:
        args.mtp_from = check_repo_id(args.mtp_from)  # a usage error before anything is downloaded
    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, initial=done, unit="B", unit_scale=True, unit_divisor=1024, desc=args.repo_id,
                       disable=None, file=sys.stderr)
        bar.update(done - bar.n)

    try:
        result = pull(args.repo_id, args.revision, progress=progress)
    except KeyboardInterrupt:
        print("\ndecider: pull interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    finally:
        if bar is not None:
            bar.close()
    usable, text = summary(result)
    print(text)
    if usable and not args.no_mtp:
        from .pull_mtp import fetch_mtp_head

        try:
            head = fetch_mtp_head(result, args.mtp_from)
        except KeyboardInterrupt:
            print("! MTP head not fetched: interrupted (the export is complete; pull again to fetch the head)")
            return 130
        for line in head.lines():
            print(line)
    return 0 if usable else 1


def cmd_convert(args: argparse.Namespace) -> int:
    from .convert import ConvertReport, convert, report

    try:
        result = convert(args.hf_dir, args.out_dir, args.weights, run_decision=not args.no_validate)
    except DeciderError as exc:
        if args.report:
            ConvertReport(args.out_dir, "", "", error=str(exc)).write(args.report)
        raise
    outcome = report(result)
    print(outcome.summary)
    if args.report:
        outcome.write(args.report)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from decider.engine.compile.devices import DeviceOptions

    from .doctor import run_doctor

    from .config import compiled_cache_dir

    kwargs = {} if args.npu_max_prompt is None else {"npu_max_prompt_len": args.npu_max_prompt}
    options = DeviceOptions(device=args.device, cache_dir=compiled_cache_dir() if args.tune else None, **kwargs)
    report = run_doctor(args.model, options, compile=not args.no_compile, tune=args.tune)
    print(json.dumps(report.to_dict(), ensure_ascii=False) if args.json else report.render())
    return 0 if report.ok else 1


COMMANDS = {
    "complete": cmd_complete, "chat": cmd_chat, "ask": cmd_ask, "history": cmd_history, "calibrate": cmd_calibrate,
    "serve": cmd_serve, "gui": cmd_gui,
    "models": cmd_models, "pull": cmd_pull, "convert": cmd_convert, "doctor": cmd_doctor,
}


def _check_text(args: argparse.Namespace) -> None:
    """Arguments that are not valid UTF-8 (the OS hands them over as lone surrogates) are refused by name."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    flag = name if name in ("question", "command") else "--" + name.replace("_", "-")
                    raise SettingsError(f"{flag}: not valid UTF-8 text ({item.encode('utf-8', 'replace')[:40]!r})") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv.insert(0, "gui")  # plain `decider` opens the window
    args = parser.parse_args(argv)
    command = args.command
    handler = COMMANDS.get(command)
    if handler is None:
        parser.error(f"command {command!r} is not available yet")
    try:
        _check_text(args)
        return handler(args)
    except BrokenPipeError:
        # The reader went away (`decider history list | head -1`): stop quietly, as a Unix filter does.
        # Python would report the pipe again when flushing stdout at exit; point it at /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except SettingsError as exc:
        print(f"decider: error: {exc}", file=sys.stderr)
        return 2
    except DeciderError as exc:
        print(f"decider: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
