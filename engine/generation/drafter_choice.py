"""Which drafter a request's `draft` setting asks for: prompt lookup (engine/generation/drafts.py), the MTP head's
drafts (engine/generation/mtp_drafts.py, loaded only where a head is) or none. Its own module so that the drafters
import nothing of each other's choice (mtp_drafts builds on drafts; this module sits above both)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.errors import SettingsError
from .drafts import AutoLookup, AutoState, PromptLookup

if TYPE_CHECKING:
    from ..runners.mtp_head import MtpHead


def make_drafter(draft: str, model: str = "this model", head: MtpHead | None = None,
                 states: dict[str, AutoState] | None = None) -> PromptLookup | None:
    """The drafter for a request's `draft` setting; None: plain decoding. head: the runner's MTP head (engine/
    mtp_head.py), None where the export kept none (`decider convert` keeps it from the checkpoint's `mtp.*` tensors;
    exports made otherwise have none): `mtp` is then a SettingsError. states: the runner's `auto_states`, where
    `auto` keeps what it measured for the runner's next request (drafts.AutoState); None: this request's own."""
    if draft == "none":
        return None
    if draft == "lookup":
        return PromptLookup()
    if draft == "auto" and head is None:
        return AutoLookup(state=_state(states, "lookup"))
    if draft in ("mtp", "auto"):
        if head is None:
            raise SettingsError(f"draft mtp is not available for {model}: its export has no MTP head "
                                "(convert the checkpoint with `decider convert` to keep it, or use --draft lookup or auto)",
                                field="draft")
        from .mtp_drafts import AutoMtp, MtpDrafts  # openvino-free callers of this module never load the head's code

        if draft == "mtp":
            return MtpDrafts(head)
        return AutoMtp(head, state=_state(states, "lookup"), head_state=_state(states, "mtp"))
    raise SettingsError(f"draft must be one of none, lookup, auto, mtp (got {draft!r})", field="draft")


def _state(states: dict[str, AutoState] | None, kind: str) -> AutoState | None:
    return None if states is None else states.setdefault(kind, AutoState())
