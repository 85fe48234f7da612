"""Narrates what the tools a call depends on did, from their outputs.

Input: {"style": "terse" | "vivid", "subject": "..."}, both optional; style
defaults to terse and subject holds at most 200 characters. Each dependency,
in the order the request lists them, becomes one or two sentences: its `done`
summary woven into the style's template; a dependency whose output is null
(it failed and was not required) is told as a step that did not work out; one
without a summary is told by the state keys it changed. With no dependencies
the passage is about the subject, or a quiet moment. The same request always
gives the same text. State: {"narration": {"last": text}}; the summary is the
text, at most 4000 characters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plancontracts.generated.tool_plans import ToolRequest
from plancontracts.runtime.engine.script_io import Reply, run_script

MAX_TEXT = 4000
TEMPLATES: dict[str, dict[str, tuple[str, ...]]] = {
    "terse": {
        "subject": ("On {subject}:",),
        "told": ("{summary}",),
        "failed": ("The {step} step did not work out.",),
        "changed": ("The {step} step changed {changes}.",),
        "done": ("The {step} step is done.",),
        "quiet_subject": ("You consider {subject}. Nothing stirs.",),
        "quiet": ("A quiet moment passes.",),
    },
    "vivid": {
        "subject": ("The tale turns to {subject}.",),
        # Rotated by position, so that a long passage does not repeat one line.
        "told": (
            "{summary} The moment hangs in the air.",
            "{summary} Shadows shift at the edge of the light.",
            "{summary} Somewhere, something takes note.",
        ),
        "failed": ("The {step} step falters and comes to nothing; it did not work out.",),
        "changed": ("The {step} step leaves its mark on {changes}.",),
        "done": ("The {step} step is done, without a word.",),
        "quiet_subject": (
            "You turn your attention to {subject}. "
            "For a long moment the world holds still around it.",
        ),
        "quiet": ("A quiet moment passes; dust drifts in the lamplight and far off, water drips.",),
    },
}


def sentence(text: str) -> str:
    """`text` on one line, ending like a sentence."""
    text = " ".join(text.split())
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def tell(step_id: str, output: dict[str, Any] | None, position: int, style: str) -> str:
    templates = TEMPLATES[style]
    step = " ".join(filter(None, step_id.replace("-", "_").split("_")))
    if output is None:
        return templates["failed"][0].format(step=step)
    summary = output.get("summary")
    if isinstance(summary, str) and summary.strip():
        told = templates["told"]
        return told[position % len(told)].format(summary=sentence(summary))
    state = output.get("state")
    if isinstance(state, dict) and state:
        changes = " and ".join(sorted(str(key) for key in state))
        return templates["changed"][0].format(step=step, changes=changes)
    return templates["done"][0].format(step=step)


def narrate(style: str, subject: str | None, dependencies: dict[str, Any]) -> str:
    templates = TEMPLATES[style]
    if not dependencies:
        if subject is None:
            return templates["quiet"][0]
        return templates["quiet_subject"][0].format(subject=subject)
    parts = [templates["subject"][0].format(subject=subject)] if subject else []
    parts += [
        tell(step_id, output, position, style)
        for position, (step_id, output) in enumerate(dependencies.items())
    ]
    text = " ".join(parts)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def main(request: ToolRequest, reply: Reply) -> str:
    style = request.input.get("style", "terse")
    # White space folds to single spaces; a subject of white space alone is none.
    subject = " ".join(request.input.get("subject", "").split())
    text = narrate(style, subject or None, request.dependencies)
    reply.patch_state({"narration": {"last": text}})
    return text


if __name__ == "__main__":
    run_script(main, input_schema=Path(__file__).with_name("narrate.input.json"))
