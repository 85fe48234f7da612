"""`plancontracts story`: the story-package commands, a group of subcommands.

`story run CALLS` applies NDJSON tool calls to one draft, in order, and
prints one NDJSON line per call; `story build PREMISE` lets the local model
make the calls, a whole package's worth (`story drive` and `story tools`, in `drive`,
let the model or an outside agent choose them). Nothing is written unless asked: `--db PATH`
keeps the draft (saved after every successful call) and the finalized
package in a SQLite database, `--session ID` goes on with a draft saved
there, and `--out DIR` saves the finalized package as `DIR/<id>.json`.

`story graph PACKAGE` draws a package for review, as Mermaid or Graphviz dot
text, or as SVG through Graphviz's `dot` program.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from contextlib import ExitStack
from functools import partial
from itertools import islice
from pathlib import Path

import msgspec

from ...generated import STORY_PACKAGE
from ...generated.story_packages import StoryDraft, StoryPackage
from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    Output,
    RulesOption,
    add_max_bytes,
    add_model_options,
    bounded_int,
    complain,
    label,
    model_choice,
    opened,
    outcome,
    read_at_most,
    reason,
    require_extra,
    run_calls,
    run_trio,
    say,
    stdin_at_most_once,
    unreadable,
    user_text,
    writer_extra,
)
from ..commandkit.progress import current_progress, showing_progress
from ..core.errors import (
    MAX_VIOLATIONS,
    ContractError,
    GenerationFailed,
    StoreError,
    UsageError,
    Violation,
)
from ..core.rules import Rules
from ..core.sessions import ToolCall
from ..core.validation import convert, parse_document
from .asset_files import ASSETS_OPTION, add_asset_options, asset_hook_from
from .assets import AssetHook
from .clear import add_clear
from .drive import add_drive, add_tools
from .graph import FORMATS, dot
from .playing import add_play
from .rules import STORY_PACKAGE_RULES
from .session import DraftSession
from .storage import DraftStore, kept_note, opened_store, require_draft_places, session_id

__all__ = ["RULES_OPTIONS", "register"]

RULES_OPTIONS: tuple[RulesOption, ...] = (ASSETS_OPTION,)
"`validate story-package --assets DIR`: the one set of rules, and a file for every asset URL."


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `story` group and its subcommands."""
    story = commands.add_parser("story", help="plan a visual-novel story package through its tools")
    group = story.add_subparsers(required=True, metavar="SUBCOMMAND")
    run = group.add_parser(
        "run", help="apply NDJSON tool calls to one story draft, printing each outcome as NDJSON"
    )
    run.add_argument(
        "calls",
        metavar="CALLS",
        help='a file of tool calls, one per line: {"tool": NAME, "arguments": {...}}; - for stdin',
    )
    run.add_argument(
        "--db",
        type=Path,
        metavar="PATH",
        help="a SQLite database (made if missing) that keeps the draft after every successful "
        "call and the finalized package; without it, nothing is kept",
    )
    run.add_argument(
        "--session",
        metavar="ID",
        help="go on with the draft saved in --db under this id (its package id)",
    )
    run.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="an existing folder where the finalized package is saved as <package id>.json",
    )
    add_max_bytes(run, "a line")
    add_asset_options(run)
    run.set_defaults(run=_run)
    _add_build(group)
    add_drive(group)
    add_tools(group)
    add_clear(group)

    graph = group.add_parser(
        "graph",
        help="draw a story package's acts, locations, connections and flag dependencies",
    )
    graph.add_argument("package", metavar="PACKAGE", help="a story-package JSON file; - for stdin")
    graph.add_argument(
        "--format",
        choices=tuple(FORMATS),
        help="the text printed: a Mermaid flowchart (the default) or Graphviz dot",
    )
    graph.add_argument(
        "--svg",
        type=Path,
        metavar="OUT",
        help="render the dot drawing to the SVG file OUT with Graphviz's dot (needs Graphviz), "
        "instead of printing text",
    )
    add_max_bytes(graph, "a package")
    graph.set_defaults(run=_graph)
    add_play(group)


def _run(args: argparse.Namespace, out: Output) -> int:
    require_draft_places(args.db, args.session, args.out)
    assets = asset_hook_from(args)
    with ExitStack() as stack:
        session = _session(args, stack, assets)

        def after() -> dict[str, str]:
            return {"session": session.draft.package_id}

        return run_calls(args.calls, args.max_bytes, out, session, after)


def _session(args: argparse.Namespace, stack: ExitStack, assets: AssetHook | None) -> DraftSession:
    """The session the calls go to: a new draft, or the one `--session` names in `--db`."""
    if args.db is None:
        return DraftSession(packages=args.out, assets=assets)
    try:
        store = stack.enter_context(DraftStore(args.db))
        if args.session is None:
            return DraftSession(store=store, packages=args.out, assets=assets)
        session = session_id(args.session)
        return DraftSession.resume(store, session, packages=args.out, assets=assets)
    except StoreError as error:
        raise UsageError(str(error)) from None


# graph --------------------------------------------------------------------------

_SCHEMA_ALONE = Rules(STORY_PACKAGE.name, "the schema alone", lambda value: iter(()))
"No rules beyond the schema: a package that breaks only those is still drawn, for review."

SVG_TIMEOUT = 300
"Seconds Graphviz may take to lay out a drawing: a package's largest is a few hundred nodes."


def _graph(args: argparse.Namespace, out: Output) -> int:
    program = None if args.svg is None else _graphviz(args.format)
    stdin_at_most_once([args.package])
    package = _drawable(args.package, args.max_bytes)
    if package is None:
        return EXIT_INVALID
    if program is None:
        out.write(FORMATS[args.format or "mermaid"](package))
        return EXIT_OK
    return _render_svg(program, dot(package), args.svg)


def _graphviz(chosen: str | None) -> str:
    """Graphviz's `dot` program, for --svg; a `UsageError` when it is missing or not asked for."""
    if chosen == "mermaid":
        raise UsageError("--svg renders the dot drawing: --format mermaid does not apply")
    program = shutil.which("dot")
    if program is None:
        raise UsageError("--svg needs Graphviz's dot program (https://graphviz.org), not on PATH")
    return program


def _drawable(name: str, limit: int) -> StoryPackage | None:
    """The package in file `name` (`-`: standard input), judged by its schema alone.

    Raises `UsageError` for a named file that cannot be read. Says on standard
    error, in one line, why there is no package (not JSON, not a
    story-package), or warns that the package breaks the rules
    beyond its schema: such a package is drawn as it is.
    """
    try:
        with opened(name) as stream:
            data = read_at_most(stream, limit)
    except OSError as error:
        if name != "-":  # a usage error, as in every command
            raise UsageError(f"{label(name)}: {unreadable(error)}") from None
        complain(f"{label(name)}: {unreadable(error)}")
        return None
    if isinstance(data, Violation):
        complain(f"{label(name)}: {data.message}")
        return None
    try:
        value = parse_document(STORY_PACKAGE, data)
    except ContractError as error:  # not JSON: one violation, at the document
        complain(f"{label(name)}: {error.violations[0].message}")
        return None
    try:
        package = convert(STORY_PACKAGE, value, rules=_SCHEMA_ALONE)
    except ContractError as error:
        problems = error.violations
        complain(
            f"{label(name)}: not a valid story-package ({problems.summary()}), "
            f"the first: {problems[0]}; `plancontracts validate story-package` lists them all"
        )
        return None
    broken = len(list(islice(STORY_PACKAGE_RULES.find(value), MAX_VIOLATIONS + 1)))
    if broken:
        count = f"more than {MAX_VIOLATIONS}" if broken > MAX_VIOLATIONS else str(broken)
        say(
            f"warning: {label(name)} breaks the story package's rules beyond its schema "
            f"({count} problem{'s' if broken > 1 else ''}): drawn as it is; "
            "`plancontracts validate story-package` lists them"
        )
    return package


def _render_svg(program: str, text: str, target: Path) -> int:
    """Render dot `text` as SVG into `target` with Graphviz's `program`; say why not in one line."""
    try:
        done = subprocess.run(
            [program, "-Tsvg"],
            input=text.encode(),
            capture_output=True,
            timeout=SVG_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        complain(f"Graphviz's dot took more than {SVG_TIMEOUT} seconds; nothing was written")
        return EXIT_INVALID
    except OSError as error:
        complain(f"cannot run Graphviz's dot: {reason(error)}")
        return EXIT_INVALID
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        complain(f"Graphviz's dot failed ({said[0] if said else f'exit status {done.returncode}'})")
        return EXIT_INVALID
    try:
        target.write_bytes(done.stdout)
    except OSError as error:
        complain(f"{label(str(target))}: cannot write: {reason(error)}")
        return EXIT_INVALID
    return EXIT_OK


MAX_BUILD_CALLS = 100
"The most calls a build may be given: a three-act pipeline and many repairs."


def _add_build(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .agent import SPARE_CALLS
    from .profiles import ACTS, ENCOUNTERS, LOCATIONS, Shape

    build = group.add_parser(
        "build",
        help="let the local model build a story package of a premise through the tools, "
        "printing each call as NDJSON, then the package",
    )
    build.add_argument(
        "premise", metavar="PREMISE", type=user_text, help="the story in one or two sentences"
    )
    # The schemas bound each size; `Shape.checked` refuses one past its bound, naming it.
    for option, sizes, default, what in (
        ("--acts", ACTS, Shape.acts, "acts (story-package's plot.acts)"),
        (
            "--locations-per-act",
            LOCATIONS,
            Shape.locations,
            "locations an act (story-package's sandboxLocations)",
        ),
        (
            "--encounters-per-location",
            ENCOUNTERS,
            Shape.encounters,
            "encounters a location (story-node-encounters' encounters)",
        ),
    ):
        build.add_argument(
            option,
            type=int,
            default=default,
            metavar="N",
            help=f"how many {what}, {sizes[0]} to {sizes[-1]} (default {default})",
        )
    build.add_argument(
        "--max-calls",
        type=bounded_int(1, MAX_BUILD_CALLS),
        metavar="N",
        help=f"the most tool calls made, 1 to {MAX_BUILD_CALLS} (default: the pipeline's, "
        f"plus {SPARE_CALLS} for refusals and repairs)",
    )
    build.add_argument(
        "--db",
        type=Path,
        metavar="PATH",
        help="a SQLite database (made if missing, and removed if the build saves nothing in "
        "it) that keeps the draft after every successful call and the finalized package",
    )
    build.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="an existing folder where the finalized package is saved as <package id>.json",
    )
    add_model_options(build, seed="seed of the sampling")
    add_asset_options(build)
    build.set_defaults(run=_build)


def _build(args: argparse.Namespace, out: Output) -> int:
    with showing_progress("story build", out):
        return _build_with(args, out)


def _build_with(args: argparse.Namespace, out: Output) -> int:
    require_extra(writer_extra(args), "story build")
    from ..model.choice import load_writer
    from .agent import SPARE_CALLS, Builder, checked_premise
    from .profiles import Shape, pipeline_length

    try:
        premise = checked_premise(args.premise)
        shape = Shape(args.acts, args.locations_per_act, args.encounters_per_location).checked()
    except ValueError as error:
        raise UsageError(str(error)) from None
    require_draft_places(args.db, None, args.out)
    assets = asset_hook_from(args)
    with ExitStack() as stack:
        store = None if args.db is None else opened_store(args.db, stack)
        session = DraftSession(store=store, packages=args.out, assets=assets)
        progress = current_progress()
        with progress.doing("loading the model"):
            builder = Builder(load_writer(model_choice(args), needs="a story build needs one"))
        made: list[ToolCall[StoryDraft]] = []
        # The build's own bound when --max-calls is not given (`Builder.build`).
        calls = args.max_calls
        if calls is None:
            calls = pipeline_length(shape) + SPARE_CALLS
        progress.call(1, calls)

        def printed(call: ToolCall[StoryDraft]) -> None:
            made.append(call)
            record = {"call": len(made), **outcome(call.result), "arguments": call.arguments}
            out.write(msgspec.json.encode(record).decode() + "\n")
            out.flush()  # each call shows as it is made
            progress.call(len(made) + 1, calls)

        work = partial(
            builder.build,
            premise,
            acts=shape.acts,
            locations=shape.locations,
            encounters=shape.encounters,
            max_calls=args.max_calls,
            seed=args.seed,
            on_call=printed,
            session=session,
        )

        def kept() -> str:  # asked of the database once the build stops: what it really holds
            return kept_note(store, session.draft.package_id, label(str(args.db)))

        try:
            build = run_trio(work)
        except GenerationFailed as failure:
            stopped = f"the model stopped after {len(made)} calls: {label(str(failure))}"
            say(f"no package: {stopped}{kept()}")
            return EXIT_INVALID
        if build.package is None:
            calls = f"{len(made)} call" + ("" if len(made) == 1 else "s")
            last = made[-1].result if made else None
            refused = f"; the last was refused: {last.message}" if last and not last.ok else ""
            say(f"no package: the build ran out of calls after {calls}{refused}{kept()}")
            return EXIT_INVALID
        out.write(msgspec.json.encode({"package": build.package}).decode() + "\n")
        return EXIT_OK
