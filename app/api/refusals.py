"""The fields each endpoint refuses, read from the request classes themselves: docs/api.md's "Refused"
table is this list (tests/test_api_refused.py compares the two and sends every row to a real server),
so the page cannot go on naming fields the server has since learnt to take.

A refused field is one declared `Annotated[Refused, refused(neutral, why)]` (app/api/fields.py): a known
OpenAI field whose neutral values pass and any other is a 400 `unsupported_parameter`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from .fields import Neutral
from .protocol import ChatCompletionRequest, CompletionRequest, DecideRequest, DetokenizeRequest, TokenizeRequest

# The JSON endpoints and the request class each parses its body into (app/api/routes.py)
ENDPOINTS: dict[str, type[BaseModel]] = {
    "/v1/chat/completions": ChatCompletionRequest,
    "/v1/completions": CompletionRequest,
    "/v1/decide": DecideRequest,
    "/tokenize": TokenizeRequest,
    "/detokenize": DetokenizeRequest,
}

TABLE_HEAD = "| endpoint | field | passes only | why it is refused |\n|---|---|---|---|"


@dataclass(frozen=True)
class Refusal:
    endpoint: str
    field: str
    neutral: Neutral  # the values that still pass
    why: str  # the reason the 400 gives

    @property
    def row(self) -> str:
        return f"| `{self.endpoint}` | `{self.field}` | {self.neutral.text} | {self.why} |"


def refusals() -> list[Refusal]:
    """Every refused field of every endpoint, in declaration order."""
    found = []
    for endpoint, kind in ENDPOINTS.items():
        for name, info in kind.model_fields.items():
            for meta in info.metadata:
                refusal = getattr(getattr(meta, "func", None), "refusal", None)
                if refusal is not None:
                    found.append(Refusal(endpoint, name, *refusal))
    return found


def refusals_table() -> str:
    """The Markdown table docs/api.md carries under "Refused"."""
    return "\n".join([TABLE_HEAD, *(r.row for r in refusals())])
