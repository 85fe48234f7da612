"""`session section` and `session tools`: the planning tools' prompt section and definitions."""

from __future__ import annotations

import argparse
import json

from ..commandkit import EXIT_OK, Output
from .prompt import PlanningStrategy, planning_section, tool_definitions

__all__ = ["add_prompt_commands"]


def add_prompt_commands(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `section` and `tools` to `group`, the subcommands of `session`."""
    section = group.add_parser(
        "section", help="print the planning tools' prompt section, in Markdown"
    )
    section.add_argument(
        "--strategy",
        choices=[strategy.value for strategy in PlanningStrategy],
        default=PlanningStrategy.REACT.value,
        help=f"the mindset the section nudges the model toward "
        f"(default: {PlanningStrategy.REACT.value})",
    )
    section.set_defaults(run=_section)
    tools = group.add_parser(
        "tools", help="print the planning tools' definitions for function calling, as JSON"
    )
    tools.set_defaults(run=_tools)


def _section(args: argparse.Namespace, out: Output) -> int:
    out.write(planning_section(PlanningStrategy(args.strategy)))
    return EXIT_OK


def _tools(args: argparse.Namespace, out: Output) -> int:
    out.write(json.dumps(tool_definitions(), indent=2) + "\n")
    return EXIT_OK
