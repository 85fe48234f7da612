"""Story assets made as files, checked by `validate --assets`, and a draft cleared.

Placeholders are read back by real parsers (`xml.etree` for the SVG, `wave`
for the music); the user's command is a real program (a small Python
script, run as a process) whose arguments it records, so what reaches it
is what a user's program would get. Hostile prompts and URLs go through the
same paths a model's calls take.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import string
import sys
import time
import wave
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import msgspec
import pytest
from commands import cli
from local_servers import conforming, model_server
from test_story_draft import (
    CHARACTER,
    FINALIZE,
    FINALIZE_NODE,
    PREMISE,
    STORY,
    UPDATE,
    call,
    character,
    finalize_node,
    premise,
    refused,
    succeeded,
)

from plancontracts.generated.story_packages import StoryPackage
from plancontracts.runtime.story_packages import (
    AssetCommand,
    AssetGenerationError,
    AssetRequest,
    DraftSession,
    DraftStore,
    FileAssets,
    asset_file,
    missing_assets,
)
from plancontracts.runtime.story_packages.asset_files import placeholder_image, silent_music

SVG = "{http://www.w3.org/2000/svg}"
PACKAGE_ID = "3f1c2a9e-0000-4000-8000-000000000001"


def request(kind: str = "portrait", prompt: str = "a keeper", key: str = "ines") -> AssetRequest:
    prompts = ((prompt, 1.0),) if kind != "music" else ((prompt, 0.7), ("piano", 0.3))
    return AssetRequest(PACKAGE_ID, kind, key, prompts, "ink wash")  # type: ignore[arg-type]


def svg_text(data: bytes) -> str:
    """The text an SVG shows, its lines joined by spaces, parsed as any XML reader would."""
    root = ElementTree.fromstring(data)
    assert root.tag == f"{SVG}svg"
    return " ".join("".join(span.itertext()) for span in root.iter(f"{SVG}tspan"))


def package_of(session: DraftSession) -> StoryPackage:
    assert session.package is not None
    return session.package


def urls(package: StoryPackage) -> list[str]:
    assets = package.assets
    return [
        f.url
        for files in (assets.backgrounds, assets.characters, assets.music)
        for f in files.values()
    ]


# Placeholders ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prompt",
    [
        "a keeper <b>&amp;</b> \"quoted\" 'single' ]]> <!-- x --> <![CDATA[ y ]]>",
        "$(touch pwned); `id` | rm -rf / && echo {out} %s \\",
        "nul \x00 bell \x07 escape \x1b form \x0c \ufffe \uffff lone \ud800 surrogate",
        "right-to-left \u202e and tab\tand newline\nand CR\r",
    ],
)
def test_a_placeholder_image_is_well_formed_svg_showing_any_prompt(prompt: str) -> None:
    shown = svg_text(placeholder_image(request(prompt=prompt)))
    # What XML cannot hold is U+FFFD; the rest reads back as written, whitespace folded.
    expected = "".join(
        " "
        if ch in string.whitespace
        else "\ufffd"
        if ord(ch) < 0x20 or ord(ch) in (0xFFFE, 0xFFFF) or 0xD800 <= ord(ch) <= 0xDFFF
        else ch
        for ch in prompt
    )
    assert shown.split() == expected.split()


def test_a_huge_prompt_makes_a_placeholder_of_bounded_size() -> None:
    small = placeholder_image(request(prompt="word " * 10))
    for huge in ("word " * 200_000, "x" * 1_000_000, "<&>" * 300_000):
        started = time.process_time()
        data = placeholder_image(request(prompt=huge, kind="background"))
        assert time.process_time() - started < 5  # a hang, not a speed: it reads only what fits
        assert len(data) < 20 * len(small)  # a picture's worth of text, escaped
        assert svg_text(data).endswith("\u2026")


def test_a_short_prompt_is_shown_whole_with_no_ellipsis() -> None:
    assert svg_text(placeholder_image(request(prompt="a keeper in an oilskin coat"))) == (
        "a keeper in an oilskin coat"
    )


def test_placeholder_music_is_half_a_second_of_silent_wav(tmp_path: Path) -> None:
    (tmp_path / "fog.wav").write_bytes(silent_music())
    with wave.open(str(tmp_path / "fog.wav"), "rb") as audio:
        assert audio.getnchannels() == 1
        assert audio.getsampwidth() == 2
        assert audio.getnframes() / audio.getframerate() == 0.5
        assert set(audio.readframes(audio.getnframes())) == {0}


# Where a served path's file is -----------------------------------------------------------------


def test_a_served_path_is_its_file_under_the_folder(tmp_path: Path) -> None:
    assert asset_file(f"/generated/{PACKAGE_ID}/ines.svg", tmp_path) == (
        tmp_path / PACKAGE_ID / "ines.svg"
    )
    assert asset_file("/generated/a/b%20c.png?size=2#top", tmp_path) == tmp_path / "a" / "b c.png"
    assert asset_file("https://cdn.example/generated/a.png", tmp_path) is None
    assert asset_file("//cdn.example/generated/a.png", tmp_path) is None


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("/generated/../secret.png", ".. segment"),
        ("/generated/a/%2e%2e/%2E%2E/secret.png", ".. segment"),
        ("/generated/a/../../etc/passwd", ".. segment"),
        ("/generated//etc/passwd", "empty"),
        ("/generated/a/./b.png", ". or .."),
        ("/generated/a/b%00.png", "holds a NUL"),
        ("/generated/", "empty"),
        ("/etc/passwd", "not under /generated/"),
        ("generated/a.png", "not under /generated/"),
        ("../../a.png", "not under /generated/"),
        ("file:///etc/passwd", None),
    ],
)
def test_a_path_no_file_of_the_folder_serves_is_refused(
    tmp_path: Path, url: str, why: str | None
) -> None:
    if why is None:  # a URL with a scheme is served from elsewhere: never a file here
        assert asset_file(url, tmp_path) is None
        return
    with pytest.raises(ValueError, match=why.replace(".", r"\.")):
        asset_file(url, tmp_path)


def test_a_link_leading_outside_the_folder_is_refused(tmp_path: Path) -> None:
    folder, outside = tmp_path / "assets", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / PACKAGE_ID).symlink_to(outside)
    (folder / "inside").mkdir()
    (folder / "inside" / "cover.png").symlink_to(tmp_path / "outside" / "cover.png")
    for url in (f"/generated/{PACKAGE_ID}/ines.svg", "/generated/inside/cover.png"):
        with pytest.raises(ValueError, match="leads outside the assets folder through a link"):
            asset_file(url, folder)
    (folder / "within").symlink_to(folder / "inside")
    assert asset_file("/generated/within/x.png", folder) == folder / "within" / "x.png"


# The hook that writes the files ---------------------------------------------------------------


def story_with(hook: FileAssets, upto: int = len(STORY)) -> DraftSession:
    session = DraftSession(assets=hook)
    for tool, arguments in STORY[:upto]:
        succeeded(session, tool, arguments)
    return session


def test_placeholders_are_written_for_every_asset_url_of_the_package(tmp_path: Path) -> None:
    hook = FileAssets(tmp_path)
    session = story_with(hook)
    succeeded(session, FINALIZE, {"title": "Salt"})
    package = package_of(session)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    named = sorted(url.removeprefix("/generated/") for url in urls(package))
    assert (
        files
        == named
        == sorted(
            f"{package.id}/{name}"
            for name in (
                "ines.svg",
                "lamp.svg",
                "harbour.svg",
                "lamp-theme.wav",
                "harbour-theme.wav",
            )
        )
    )
    assert missing_assets(package, tmp_path) == []
    portrait = package.assets.characters["ines"]
    assert portrait.mime_type == "image/svg+xml"
    assert svg_text((tmp_path / package.id / "ines.svg").read_bytes()) == "portrait of ines"
    assert package.assets.music["lamp-theme"].mime_type == "audio/wav"
    with wave.open(str(tmp_path / package.id / "lamp-theme.wav"), "rb") as audio:
        assert audio.getnframes() > 0


def test_a_file_already_there_is_kept_and_a_step_asking_anew_makes_it_again(
    tmp_path: Path,
) -> None:
    hook = FileAssets(tmp_path)
    session = story_with(hook, upto=1)
    folder = tmp_path / session.draft.package_id
    folder.mkdir()
    (folder / "ines.svg").write_bytes(b"made before")  # a call refused after its first asset
    succeeded(session, CHARACTER, character())
    assert (folder / "ines.svg").read_bytes() == b"made before"
    assert hook.kept == [folder / "ines.svg"]
    # regenerateImage asks anew for a key the draft has: made again.
    succeeded(
        session,
        UPDATE,
        {
            "type": "character",
            "id": "ines",
            "changes": {"imagePrompt": "the keeper at dawn"},
            "regenerateImage": True,
        },
    )
    assert svg_text((folder / "ines.svg").read_bytes()) == "the keeper at dawn"
    for tool, arguments in STORY[2:]:
        succeeded(session, tool, arguments)
    before = (folder / "lamp.svg").read_bytes()
    succeeded(session, FINALIZE_NODE, finalize_node("lamp", prompt="the lamp at dawn"))
    assert (folder / "lamp.svg").read_bytes() != before
    assert svg_text((folder / "lamp.svg").read_bytes()) == "the lamp at dawn"


def test_overwrite_makes_every_file_again(tmp_path: Path) -> None:
    session = story_with(FileAssets(tmp_path, overwrite=True), upto=1)
    folder = tmp_path / session.draft.package_id
    folder.mkdir()
    (folder / "ines.svg").write_bytes(b"made before")
    succeeded(session, CHARACTER, character())
    assert svg_text((folder / "ines.svg").read_bytes()) == "portrait of ines"


def test_a_file_that_cannot_be_written_refuses_the_call_and_writes_nothing_outside(
    tmp_path: Path,
) -> None:
    folder, outside = tmp_path / "assets", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    session = story_with(FileAssets(folder), upto=1)
    (folder / session.draft.package_id).symlink_to(outside)
    done = refused(session, CHARACTER, character())
    assert done.message == (
        f'the portrait "ines" was not made: "/generated/{session.draft.package_id}/ines.svg": '
        "leads outside the assets folder through a link"
    )
    assert list(outside.iterdir()) == []
    (folder / session.draft.package_id).unlink()
    (folder / session.draft.package_id).write_text("a file where a folder goes")
    done = refused(session, CHARACTER, character())
    assert done.message.startswith('the portrait "ines" was not made: cannot write ')


# The user's command ---------------------------------------------------------------------------

MAKER = r"""
import json, os, sys, time
kind, prompt, out, log = sys.argv[1:5]
with open(log, "a") as stream:
    stream.write(json.dumps(sys.argv[1:]) + "\n")
behaviour = os.environ.get("MAKER", "ok")
if behaviour == "fail":
    print("loading the model...")
    print("out of memory: the GPU has 2 GB", file=sys.stderr)
    sys.exit(1)
if behaviour == "hang":
    child = os.fork()
    if child == 0:
        time.sleep(300)
        os._exit(0)
    with open(log + ".pids", "w") as stream:
        stream.write(f"{os.getpid()} {child}")
    time.sleep(300)
if behaviour == "chatty":
    sys.stdout.write("x" * 20_000_000)
    sys.stdout.write("\nthe last words\n")
    sys.exit(3)
if behaviour == "nothing":
    sys.exit(0)
if behaviour == "link":
    os.symlink("/etc/passwd", out)
    sys.exit(0)
if behaviour == "fifo":
    os.mkfifo(out)
    sys.exit(0)
if behaviour == "background":
    child = os.fork()
    if child == 0:  # keeps the output open long after the program ends
        time.sleep(120)
        open(log + ".ended", "w").close()
        os._exit(0)
    with open(log + ".pids", "w") as stream:
        stream.write(str(child))
if behaviour == "late":
    child = os.fork()
    if child == 0:  # writes the file once the program has exited 0 without it
        time.sleep(1)
        open(out, "wb").write(b"\x89PNG\r\n\x1a\n" + bytes(8))
        os._exit(0)
    with open(log + ".pids", "w") as stream:
        stream.write(str(child))
    sys.exit(0)
if behaviour == "folder":
    os.mkdir(out)
    sys.exit(0)
if behaviour == "gif":
    open(out, "wb").write(b"GIF89a" + bytes(20))
    sys.exit(0)
with open(out, "wb") as stream:
    if kind == "music":
        stream.write(b"RIFF\0\0\0\0WAVEfmt ")
    else:
        stream.write(b"\x89PNG\r\n\x1a\n" + bytes(8))
"""


@pytest.fixture
def maker(tmp_path: Path) -> tuple[str, Path]:
    """An --asset-command running MAKER, and the log where it records its arguments."""
    script, log = tmp_path / "maker.py", tmp_path / "maker.log"
    script.write_text(MAKER)
    return f"{sys.executable} {script} {{kind}} {{prompt}} {{out}} {log}", log


def story_run(
    tmp_path: Path, lines: list[str], *options: str, env: dict[str, str] | None = None
) -> tuple[int, list[dict[str, Any]], str]:
    path = tmp_path / "calls.ndjson"
    path.write_text("".join(line + "\n" for line in lines))
    done = cli("story", "run", str(path), *options, env=env)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr


HOSTILE_PROMPT = "$(touch pwned) `touch pwned2`; rm -rf {out} > pwned3 \"'\n{prompt}"


@pytest.mark.process
def test_the_command_makes_every_asset_with_its_arguments_never_through_a_shell(
    tmp_path: Path, maker: tuple[str, Path]
) -> None:
    command, log = maker
    assets = tmp_path / "assets"
    assets.mkdir()
    calls = [call(tool, arguments) for tool, arguments in STORY]
    calls[1] = call(CHARACTER, character(imagePrompt=HOSTILE_PROMPT))
    calls.append(call(FINALIZE, {"title": "Salt"}))
    status, records, stderr = story_run(
        tmp_path, calls, "--assets", str(assets), "--asset-command", command, "--out", str(tmp_path)
    )
    assert (status, stderr) == (0, "")
    session = records[0]["session"]
    made = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(kind, prompt) for kind, prompt, _, _ in made] == [
        ("portrait", HOSTILE_PROMPT),
        ("background", "a lamp room"),
        ("music", "low drones; piano"),
        ("background", "a harbour"),
        ("music", "low drones; piano"),
    ]
    # The program writes a hidden file of the asset's extension, renamed once it is right.
    assert all(Path(out).name.startswith(".") for _, _, out, _ in made)
    assert [Path(out).suffix for _, _, out, _ in made] == [".png", ".png", ".wav", ".png", ".wav"]
    assert not any(path.name.startswith("pwned") for path in tmp_path.rglob("*"))
    package = msgspec.json.decode((tmp_path / f"{session}.json").read_bytes(), type=StoryPackage)
    assert package.assets.characters["ines"].url == f"/generated/{session}/ines.png"
    assert package.assets.characters["ines"].mime_type == "image/png"
    assert package.assets.music["lamp-theme"].mime_type == "audio/wav"
    assert missing_assets(package, assets) == []
    assert sorted(p.name for p in (assets / session).iterdir()) == [
        "harbour-theme.wav",
        "harbour.png",
        "ines.png",
        "lamp-theme.wav",
        "lamp.png",
    ]
    done = cli(
        "validate", "story-package", str(tmp_path / f"{session}.json"), "--assets", str(assets)
    )
    assert done.returncode == 0, done.stdout


@pytest.mark.process
@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        ("fail", "exited 1: out of memory: the GPU has 2 GB"),
        ("chatty", "exited 3: the last words"),
        ("nothing", "exited 0 but wrote no file at "),
        ("gif", "wrote no PNG image at "),
        ("link", "exited 0 but wrote a link at "),
        ("fifo", "exited 0 but wrote a FIFO at "),
        ("folder", "exited 0 but wrote a folder at "),
    ],
)
def test_a_command_that_fails_refuses_the_call_naming_the_asset_and_leaves_no_file(
    tmp_path: Path, maker: tuple[str, Path], behaviour: str, message: str
) -> None:
    command, _ = maker
    assets = tmp_path / "assets"
    assets.mkdir()
    lines = [call(PREMISE, premise()), call(CHARACTER, character())]
    options = ("--assets", str(assets), "--asset-command", command, "--db", str(tmp_path / "s.db"))
    status, records, stderr = story_run(tmp_path, lines, *options, env={"MAKER": behaviour})
    assert (status, stderr) == (1, "")
    error = records[1]["error"]["message"]
    assert error.startswith('the portrait "ines" was not made: the asset command ')
    assert message in error
    assert "\n" not in error
    assert len(error) < 400
    assert [p for p in assets.rglob("*") if p.parent != assets] == []  # no file, link, FIFO, folder
    with DraftStore(tmp_path / "s.db") as store:
        assert store.load_draft(records[0]["session"]).characters == []


@pytest.mark.process
def test_a_command_that_hangs_is_killed_with_what_it_started(
    tmp_path: Path, maker: tuple[str, Path]
) -> None:
    command, log = maker
    assets = tmp_path / "assets"
    assets.mkdir()
    lines = [call(PREMISE, premise()), call(CHARACTER, character())]
    options = ("--assets", str(assets), "--asset-command", command, "--asset-timeout", "2")
    status, records, _ = story_run(tmp_path, lines, *options, env={"MAKER": "hang"})
    assert status == 1
    assert records[1]["error"]["message"].endswith("took more than 2 seconds: killed")
    pids = [int(pid) for pid in Path(f"{log}.pids").read_text().split()]
    for pid in pids:  # the program and its child: both gone, neither a zombie of ours
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)


@pytest.mark.process
def test_what_a_failed_program_left_running_is_killed_and_writes_nothing_later(
    tmp_path: Path, maker: tuple[str, Path]
) -> None:
    command, log = maker
    assets = tmp_path / "assets"
    assets.mkdir()
    lines = [call(PREMISE, premise()), call(CHARACTER, character())]
    options = ("--assets", str(assets), "--asset-command", command)
    status, records, _ = story_run(tmp_path, lines, *options, env={"MAKER": "late"})
    assert status == 1
    assert "exited 0 but wrote no file at " in records[1]["error"]["message"]
    child = int(Path(f"{log}.pids").read_text())
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert [p for p in assets.rglob("*") if p.parent != assets] == []  # and never wrote its file


@pytest.mark.process
def test_a_program_that_leaves_something_running_is_not_waited_for(
    tmp_path: Path, maker: tuple[str, Path]
) -> None:
    command, log = maker
    assets = tmp_path / "assets"
    assets.mkdir()
    lines = [call(PREMISE, premise()), call(CHARACTER, character())]
    options = ("--assets", str(assets), "--asset-command", command)
    try:
        status, records, stderr = story_run(tmp_path, lines, *options, env={"MAKER": "background"})
        assert (status, stderr) == (0, "")
        assert records[1]["ok"] is True
        # Its output still open, the background child had not ended when the call did.
        assert not Path(f"{log}.ended").exists()
        child = int(Path(f"{log}.pids").read_text())
        deadline = time.monotonic() + 30
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)  # killed with the program's group, once the program ended
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(Path(f"{log}.pids").read_text()), signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie is dead, waiting for a parent that is not this test


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--asset-command", "gen {out}"], "--asset-command needs --assets DIR"),
        (["--overwrite-assets"], "--overwrite-assets needs --assets DIR"),
        (["--assets", "{tmp}/missing"], "missing: not an existing folder"),
        (["--assets", "{tmp}", "--asset-timeout", "5"], "--asset-timeout bounds --asset-command"),
        (["--assets", "{tmp}", "--asset-command", "gen {kind}"], "never names {out}"),
        (["--assets", "{tmp}", "--asset-command", "gen {out} {size}"], "no placeholder {size}"),
        (["--assets", "{tmp}", "--asset-command", "gen {out"], "expected '}' before end"),
        (["--assets", "{tmp}", "--asset-command", "gen 'a {out}"], "No closing quotation"),
        (["--assets", "{tmp}", "--asset-command", ""], "names no program"),
        (["--assets", "{tmp}", "--asset-command", "no-such-program-x {out}"], "not on PATH"),
        (["--assets", "{tmp}", "--asset-command", "{prompt} {out}"], 'program "{prompt}" is'),
        (["--assets", "{tmp}", "--asset-command", "{out}"], 'program "{out}" is a placeholder'),
        (["--assets", "{tmp}", "--asset-command", "/bin/{key} {out}"], "/bin/{key}"),
    ],
)
def test_asset_options_are_refused_in_one_line_before_any_call(
    tmp_path: Path, options: list[str], message: str
) -> None:
    given = [each.format(tmp=tmp_path) if "{tmp}" in each else each for each in options]
    status, records, stderr = story_run(tmp_path, [call(PREMISE, premise())], *given)
    assert (status, records) == (2, [])
    assert len(stderr.splitlines()) == 1, stderr
    assert message in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize("prompt", ["a \x00 NUL", "a lone \ud800 surrogate"])
def test_a_prompt_no_program_can_be_given_refuses_the_call(tmp_path: Path, prompt: str) -> None:
    hook = FileAssets(tmp_path, AssetCommand.parse(f"{sys.executable} -c pass {{prompt}} {{out}}"))
    with pytest.raises(
        AssetGenerationError, match="cannot be given its arguments: one holds a NUL"
    ):
        hook(request(prompt=prompt))
    assert list(tmp_path.rglob("*")) == [tmp_path / PACKAGE_ID]  # its folder, and no file


def test_placeholders_are_substituted_once_and_braces_doubled_are_braces() -> None:
    command = AssetCommand.parse("gen --json '{{\"k\": 1}}' {prompt}={out}")
    values = {"prompt": "{out}", "out": "/x.png"}
    assert command.argv(values) == ["gen", "--json", '{"k": 1}', "{out}=/x.png"]


# validate story-package --assets --------------------------------------------------------------


def test_validate_reports_each_url_with_no_file_at_its_pointer(tmp_path: Path) -> None:
    session = story_with(FileAssets(tmp_path))
    succeeded(session, FINALIZE, {"title": "Salt"})
    package = msgspec.to_builtins(package_of(session))
    package["assets"]["characters"]["ines"]["url"] = "/generated/../ines.svg"
    package["assets"]["characters"]["remote"] = {
        "url": "https://cdn.example/remote.png",
        "mimeType": "image/png",
    }
    (tmp_path / package["id"] / "lamp-theme.wav").unlink()
    (tmp_path / package["id"] / "harbour.svg").unlink()
    (tmp_path / package["id"] / "harbour.svg").mkdir()
    document = tmp_path / "package.json"
    document.write_text(json.dumps(package))
    done = cli("validate", "story-package", str(document), "--assets", str(tmp_path))
    assert done.returncode == 1
    lines = [line.strip() for line in done.stdout.splitlines()[1:-1]]
    folder = tmp_path / package["id"]
    assert lines == [
        f'/assets/backgrounds/harbour/url: "/generated/{package["id"]}/harbour.svg" '
        f'is not a file "{folder}/harbour.svg"',
        '/assets/characters/ines/url: "/generated/../ines.svg": '
        "an empty, . or .. segment: no file of the assets folder",
        f'/assets/music/lamp-theme/url: "/generated/{package["id"]}/lamp-theme.wav" '
        f'has no file "{folder}/lamp-theme.wav"',
    ]
    # Without --assets the same package is valid: each line above is a missing file.
    assert cli("validate", "story-package", str(document)).returncode == 0
    # With it, the package's own rules still judge it.
    del package["assets"]["characters"]["ines"]
    document.write_text(json.dumps(package))
    done = cli("validate", "story-package", str(document), "--assets", str(tmp_path))
    assert '/characters/0/id: "ines" has no portrait in /assets/characters' in done.stdout
    assert "lamp-theme.wav" in done.stdout


def test_validate_assets_applies_to_story_packages_and_an_existing_folder(tmp_path: Path) -> None:
    done = cli("validate", "plan", "-", "--assets", str(tmp_path), stdin="{}")
    assert done.returncode == 2
    assert done.stderr.strip().endswith("--assets applies to story-package only, not plan")
    done = cli("validate", "story-package", "-", "--assets", str(tmp_path / "no"), stdin="{}")
    assert done.returncode == 2
    assert done.stderr.strip().endswith("no: not an existing folder")


# story clear ----------------------------------------------------------------------------------


def saved_story(db: Path, finalize: bool = False) -> str:
    with DraftStore(db) as store:
        session = DraftSession(store=store)
        for tool, arguments in STORY if finalize else STORY[:2]:
            succeeded(session, tool, arguments)
        if finalize:
            succeeded(session, FINALIZE, {"title": "Salt"})
        return session.draft.package_id


def test_clear_draft_deletes_one_draft_and_keeps_the_others(tmp_path: Path) -> None:
    db = tmp_path / "stories.db"
    first, second = saved_story(db), saved_story(db)
    with DraftStore(db) as store:
        assert store.clear_draft(first) is True
        assert store.clear_draft(first) is False
        assert store.sessions() == [second]
        assert store.find_draft(first) is None


def test_a_run_still_going_on_saves_a_cleared_draft_again_at_its_next_call(
    tmp_path: Path,
) -> None:
    db = tmp_path / "stories.db"
    with DraftStore(db) as store:
        session = DraftSession(store=store)
        succeeded(session, PREMISE, premise())
        with DraftStore(db) as other:
            assert other.clear_draft(session.draft.package_id)
        assert store.sessions() == []
        succeeded(session, CHARACTER, character())
        assert store.load_draft(session.draft.package_id) == session.draft


def test_story_clear_deletes_the_draft_and_keeps_its_package(tmp_path: Path) -> None:
    db = tmp_path / "stories.db"
    session, other = saved_story(db, finalize=True), saved_story(db)
    done = cli("story", "clear", "--db", str(db), "--session", session.upper())
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        f"cleared the draft {session} from {db}; its finalized package is kept\n"
    )
    with DraftStore(db) as store:
        assert store.sessions() == [other]
        assert store.load_package(session).id == session
    done = cli("story", "clear", "--db", str(db), "--session", other)
    assert (done.returncode, done.stdout) == (0, f"cleared the draft {other} from {db}\n")
    done = cli("story", "clear", "--db", str(db), "--session", other)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f'plancontracts: error: no draft "{other}" in {db}: nothing cleared\n'


@pytest.mark.parametrize(
    ("make", "session", "message"),
    [
        (None, PACKAGE_ID, "no such file (a database is never made to be cleared)"),
        ("text", PACKAGE_ID, "cannot be used as a story database: file is not a database"),
        ("sqlite", PACKAGE_ID, "not a story database (no drafts or packages table)"),
        ("story", "not-a-uuid", '--session "not-a-uuid": not a UUID'),
    ],
)
def test_story_clear_refuses_what_it_cannot_clear_in_one_line_and_makes_nothing(
    tmp_path: Path, make: str | None, session: str, message: str
) -> None:
    db = tmp_path / "stories.db"
    if make == "text":
        db.write_text("not a database, and long enough to be read as one " * 4)
    elif make == "sqlite":
        with sqlite3.connect(db) as other:
            other.execute("CREATE TABLE notes (text TEXT)")
    elif make == "story":
        saved_story(db)
    before = sorted(os.listdir(tmp_path)), db.read_bytes() if db.exists() else None
    done = cli("story", "clear", "--db", str(db), "--session", session)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert message in done.stderr
    assert (sorted(os.listdir(tmp_path)), db.read_bytes() if db.exists() else None) == before


# story build --assets -------------------------------------------------------------------------


def test_a_build_writes_the_file_of_every_asset_its_calls_make(tmp_path: Path) -> None:
    with model_server(conforming) as server:
        done = cli(
            "story",
            "build",
            "A keeper finds a logbook of ships not yet sailed.",
            "--server",
            server.url,
            "--assets",
            str(tmp_path),
        )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    calls = [line for line in lines if "tool" in line]
    finalized = [c["result"] for c in calls if c["tool"] == FINALIZE_NODE and c["ok"]]
    assert finalized  # the stub's simplest arguments reach the assets
    for result in finalized:
        background = asset_file(result["backgroundUrl"], tmp_path)
        music = asset_file(result["musicUrl"], tmp_path)
        assert background is not None
        assert music is not None
        assert ElementTree.parse(background).getroot().tag == f"{SVG}svg"
        with wave.open(str(music), "rb") as audio:
            assert audio.getnframes() > 0
    for line in lines:  # a package, if the build made one, has every file
        if "package" in line:
            package = msgspec.convert(line["package"], StoryPackage)
            assert missing_assets(package, tmp_path) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--assets", "/nonexistent/folder"],
            "--assets /nonexistent/folder: not an existing folder",
        ),
        (["--asset-command", "gen {out}"], "--asset-command needs --assets DIR"),
    ],
)
def test_a_build_refuses_asset_options_before_any_model(options: list[str], message: str) -> None:
    done = cli(
        "story", "build", "A keeper.", *options, env={"PLANCONTRACTS_SERVER": "http://127.0.0.1:9"}
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert message in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert "model:" not in done.stderr
