"""The `decider` CLI on the fixture models: OpenAI-shaped JSON out, clear errors."""

import json
import subprocess
import sys

import pytest

from decider.app.cli import main
from support.models import model_dir

MODEL = str(model_dir("qwen35-text"))
GREEDY = ["--temperature", "0", "--frequency-penalty", "0", "--presence-penalty", "0"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_complete_prints_a_text_completion(capsys):
    code, out, _ = run(capsys, "complete", "--model", MODEL, "--prompt", "The scouts report that", "--max-tokens", "4",
                       "--logprobs", "2", *GREEDY)
    assert code == 0
    body = json.loads(out)
    assert body["object"] == "text_completion"
    choice = body["choices"][0]
    logprobs = choice["logprobs"]
    assert len(logprobs["tokens"]) == len(logprobs["token_logprobs"]) == len(logprobs["top_logprobs"]) == 4
    readable = [t for t in logprobs["tokens"] if "\\x" not in t]  # byte fragments show as \xNN escapes
    assert all(t in choice["text"] for t in readable)
    assert sum(len(t) for t in readable) <= len(choice["text"])
    assert logprobs["text_offset"][0] == len("The scouts report that")
    assert all(len(t) <= 2 for t in logprobs["top_logprobs"])
    assert body["usage"]["completion_tokens"] == 4 and choice["finish_reason"] == "length"


def test_complete_with_logprobs_zero_gives_the_drawn_token_only(capsys):
    code, out, _ = run(capsys, "complete", "--model", MODEL, "--prompt", "Hello", "--max-tokens", "2", "--logprobs", "0", *GREEDY)
    logprobs = json.loads(out)["choices"][0]["logprobs"]
    assert len(logprobs["token_logprobs"]) == 2 and logprobs["top_logprobs"] == [{}, {}]


def test_chat_prints_a_chat_completion_with_logprobs(capsys):
    code, out, _ = run(capsys, "chat", "--model", MODEL, "--message", "Hi", "--system", "Be brief.", "--no-think",
                       "--logprobs", "--top-logprobs", "3", "--max-tokens", "3", *GREEDY)
    assert code == 0
    body = json.loads(out)
    assert body["object"] == "chat.completion"
    content = body["choices"][0]["logprobs"]["content"]
    assert 1 <= len(content) <= 3
    assert all(set(e) == {"token", "logprob", "bytes", "top_logprobs"} and len(e["top_logprobs"]) == 3 for e in content)
    assert "reasoning_content" not in body["choices"][0]["message"]


def test_chat_with_think_reports_reasoning(capsys):
    code, out, _ = run(capsys, "chat", "--model", MODEL, "--message", "Hi", "--think", "--max-tokens", "3", *GREEDY)
    message = json.loads(out)["choices"][0]["message"]
    assert "reasoning_content" in message


def test_ask_json_has_the_documented_fields(capsys):
    code, out, _ = run(capsys, "ask", "--model", MODEL, "Which is an animal?", "--option", "Hammer", "--option", "Horse",
                       "--option", "Bread", "--json", *GREEDY)
    assert code == 0
    body = json.loads(out)
    assert {"choice", "options", "coverage", "reasoning", "alternatives", "timings", "usage"} <= set(body)
    assert set(body["choice"]) >= {"label", "index", "text"}
    assert [o["label"] for o in body["options"]] == ["A", "B", "C"]
    assert abs(sum(o["probability"] for o in body["options"]) - 1) < 1e-9
    assert body["choice"]["index"] == max(range(3), key=lambda i: body["options"][i]["probability"])


def test_ask_prints_one_bar_per_option(capsys):
    code, out, _ = run(capsys, "ask", "--model", MODEL, "Which is an animal?", "--option", "Hammer", "--option", "Horse", *GREEDY)
    lines = [l for l in out.splitlines() if "%" in l and "█" in l or "░" in l]
    assert len(lines) == 2 and sum("← chosen" in l for l in lines) == 1
    assert "coverage" in out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["complete", "--prompt", "x", "--temperature", "5"], "temperature must be a number in [0.0, 2.0]"),
        (["complete", "--prompt", "x", "--logprobs", "9"], "--logprobs must be in 0..5"),
        (["chat", "--message", "x", "--top-logprobs", "21"], "--top-logprobs must be in 0..20"),
        (["complete", "--prompt", "x", "--max-tokens", "0"], "max_tokens must be an integer ≥ 1"),
        (["ask", "Q?", "--option", "only one"], "only one option"),
        (["ask", "Q?", "--option", "a", "--option", "A"], "duplicate option"),
    ],
)
def test_invalid_values_exit_2_with_one_line(capsys, argv, message):
    code, out, err = run(capsys, argv[0], "--model", MODEL, *argv[1:])
    assert code == 2
    assert err.count("\n") == 1 and message in err


def test_bad_model_folder_exits_1_with_the_file_named(capsys, tmp_path):
    code, _, err = run(capsys, "complete", "--model", str(tmp_path), "--prompt", "x")
    assert code == 1 and "config.json: missing file" in err


def test_console_script_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "decider.app.cli", "complete", "--model", MODEL, "--prompt", "Hi", "--max-tokens", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["usage"]["completion_tokens"] == 1


def test_ask_runs_from_a_directory_outside_the_checkout(tmp_path):
    # From the repository root the layers are importable under their bare names too, which hid a lookup of
    # the prompt templates by the name "engine"; an installed `decider` runs from anywhere.
    out = subprocess.run([sys.executable, "-m", "decider.app.cli", "ask", "--model", MODEL, "Which?", "--option", "Left",
                          "--option", "Right", "--json", *GREEDY], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert [o["text"] for o in json.loads(out.stdout)["options"]] == ["Left", "Right"]
