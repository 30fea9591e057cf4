"""LangChain's `with_structured_output` against `decider serve`: a parsed object comes back.

langchain-openai is not a dependency of Decider; run it from an environment that has it:

    /path/venv-eval/bin/pip install langchain-openai
    python tools/langchain_check.py --python /path/venv-eval/bin/python [--model DIR]

Starts `decider serve` on a free port (the demo model by default), then, in that interpreter, asks
`ChatOpenAI(...).with_structured_output(Action)` (LangChain's default method: a strict json_schema
response_format) and prints what came back. Exit 0 when it is a parsed Action. (method="json_mode" sends
a json_object without a schema: nothing bounds it, so a small model may run into max_tokens.)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from lm_eval_check import DEMO, free_port, start_server

CLIENT = r'''
import json, sys
from typing import Literal
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

class Action(BaseModel):
    """What the party does next."""
    action: Literal["attack", "defend", "retreat"]
    urgent: bool
    party_size: int = Field(ge=1, le=9)

llm = ChatOpenAI(base_url=sys.argv[1], api_key="unused", model="decider", temperature=0, max_tokens=200)
result = llm.with_structured_output(Action).invoke("Scouts report that Retreat is the safe choice. What should we do?")
out = {"type": type(result).__name__, "value": result.model_dump()}
print(json.dumps(out))
'''


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="an interpreter with langchain-openai")
    parser.add_argument("--model", type=Path, default=DEMO)
    args = parser.parse_args(argv)
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="langchain-check-")) / "serve.log"
    server = start_server(args.model, port, log)
    try:
        run = subprocess.run([args.python, "-c", CLIENT, f"http://127.0.0.1:{port}/v1"], capture_output=True, text=True,
                             timeout=300)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(run.stdout.strip() or run.stderr.strip()[-3000:])
    ok = run.returncode == 0 and '"type": "Action"' in run.stdout
    print("OK: with_structured_output returned an Action" if ok else f"FAIL (exit {run.returncode}); server log {log}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
