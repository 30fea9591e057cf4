"""A tool offered to the model and a call in its answer: the two values tools.py and tool_format.py share.

Apart so that the wire format (tool_format.py) can build calls without importing tools.py, which uses it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tool:
    name: str
    parameters: dict
    description: str | None = None
    strict: bool = False

    def signature(self) -> dict:
        """The OpenAI tool object, as the template renders it into the system turn."""
        function: dict = {"name": self.name}
        if self.description is not None:
            function["description"] = self.description
        function["parameters"] = self.parameters
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # a JSON object, as text
    id: str = ""

    def to_openai(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}
