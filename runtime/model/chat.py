"""Chat messages, and the text a model reads for them.

Each prompt the project renders is a list of chat messages; `render_chat`
turns them into the model's own text format when its GGUF file carries a
chat template, and into plain labelled text when it does not (base models
such as the packaged one).
"""

from __future__ import annotations

__all__ = ["Message", "render_chat"]

Message = dict[str, str]
"One chat message: its `role` and its `content`."


def render_chat(
    messages: list[Message],
    chat_template: str | None,
    eos: str = "",
    bos: str = "",
    *,
    answer: str = "Plan JSON",
) -> str:
    """`messages` as the model reads them, ending where the model's answer starts.

    With a chat template (from the GGUF metadata `tokenizer.chat_template`),
    it is rendered with a generation prompt; without one, each message is a
    labelled paragraph and the text ends with `answer` and a colon, such as
    `Plan JSON: `.
    """
    if chat_template:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        return environment.from_string(chat_template).render(
            messages=messages, add_generation_prompt=True, eos_token=eos, bos_token=bos
        )
    parts = [f"{message['role'].capitalize()}:\n{message['content']}" for message in messages]
    return "\n\n".join(parts) + f"\n\n{answer}: "
