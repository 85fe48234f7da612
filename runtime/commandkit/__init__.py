"""The command kit: what every `plancontracts` command is made of, written once.

Exit statuses and one-line errors (`base`), options (`options`), reading
inputs within bounds (`inputs`), validation reports in every format
(`reports`), NDJSON tool calls (`calls`), the extras a command needs
(`extras`), what a model command shows on a terminal while a model writes
(`progress`), the files a command keeps its state in between runs (`state`)
and stopping on signals (`signals`). The families' commands and the entry
point (`runtime.cli`) import it; it imports the layers below the families
only ([layers](../../docs/development.md#layers)).
"""

from __future__ import annotations

from ..core.errors import StreamError, UsageError
from .base import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    Output,
    StandardOutput,
    complain,
    json_for_people,
    json_name,
    label,
    reason,
    say,
    standard_input,
    to_stderr,
)
from .calls import CALL_SHAPE, Call, NoCall, outcome, read_call, run_calls
from .extras import EXTRAS, missing_modules, require_extra, writer_extra
from .inputs import (
    lines_of,
    opened,
    read_at_most,
    standard_lines,
    stdin_at_most_once,
    texts,
    unreadable,
)
from .options import (
    DEFAULT_MAX_BYTES,
    MAX_BYTES_LIMIT,
    RulesOption,
    add_format,
    add_json,
    add_max_bytes,
    add_model_options,
    add_skill_options,
    bounded_int,
    model_choice,
    positive_int,
    seconds,
    server_address,
    user_text,
    uses_server,
)
from .reports import (
    FORMATS,
    GithubReport,
    JsonReport,
    Outcome,
    Report,
    SarifReport,
    TextReport,
    report_for,
    violations_as_json,
)
from .signals import Stopped, run_trio, stop_signals, stopped

__all__ = [
    "CALL_SHAPE",
    "DEFAULT_MAX_BYTES",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXTRAS",
    "FORMATS",
    "MAX_BYTES_LIMIT",
    "Call",
    "GithubReport",
    "JsonReport",
    "NoCall",
    "Outcome",
    "Output",
    "Report",
    "RulesOption",
    "SarifReport",
    "StandardOutput",
    "Stopped",
    "StreamError",
    "TextReport",
    "UsageError",
    "add_format",
    "add_json",
    "add_max_bytes",
    "add_model_options",
    "add_skill_options",
    "bounded_int",
    "complain",
    "json_for_people",
    "json_name",
    "label",
    "lines_of",
    "missing_modules",
    "model_choice",
    "opened",
    "outcome",
    "positive_int",
    "read_at_most",
    "read_call",
    "reason",
    "report_for",
    "require_extra",
    "run_calls",
    "run_trio",
    "say",
    "seconds",
    "server_address",
    "standard_input",
    "standard_lines",
    "stdin_at_most_once",
    "stop_signals",
    "stopped",
    "texts",
    "to_stderr",
    "unreadable",
    "user_text",
    "uses_server",
    "violations_as_json",
    "writer_extra",
]
