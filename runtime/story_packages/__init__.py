"""Story packages: a visual novel's package, drafted through eight tools in a pipeline.

    from plancontracts.runtime.story_packages import DraftSession, DraftStore

The family's files follow the layout every family shares
(docs/development.md#a-familys-files): `rules` (the whole story's checks
beyond the schema), `tools` (the eight tools, read from their contracts),
`session` (`DraftSession`: one draft, saved after every call), `handlers`
(each tool's checks and change of the draft), `profiles` (the build's
steps and what each call writes), `prompts` (what the model reads before a
call), `agent` (the `Builder`: the model building a package; the `Driver`:
the model co-writing one, choosing each call) and `commands` (`story run`,
`graph`, `build`); beside them, `drive` (`story drive`, `story tools`),
`drafts` (a draft's copy to change, the package it makes), `storage` (drafts and packages in SQLite,
packages as files), `assets` (the hook that makes images and music, and
where a served asset's file is), `asset_files` (the hook that writes them:
placeholders or the user's command), `clear` (`story clear`) and `graph`
(a package drawn for review), `play` (a finished package played, in pure
functions) and `playing` (`story play`).
"""

from ..core.errors import AssetGenerationError, PlayRefused, StoreError
from .agent import Build, Builder, Drive, Driver, checked_premise
from .asset_files import AssetCommand, FileAssets
from .assets import AssetHook, AssetRequest, RecordingAssets, asset_file, missing_assets
from .graph import FORMATS, dot, mermaid, picture
from .play import Offer, choose, happenings, offered, package_hash, resolve, resumed, start
from .rules import RULES, STORY_PACKAGE_RULES, STORY_PLAYTHROUGH_RULES
from .session import DraftSession
from .storage import DraftStore, read_package, write_package
from .tools import TOOLS, tool_definitions

__all__ = [
    "FORMATS",
    "RULES",
    "STORY_PACKAGE_RULES",
    "STORY_PLAYTHROUGH_RULES",
    "TOOLS",
    "AssetCommand",
    "AssetGenerationError",
    "AssetHook",
    "AssetRequest",
    "Build",
    "Builder",
    "DraftSession",
    "DraftStore",
    "Drive",
    "Driver",
    "FileAssets",
    "Offer",
    "PlayRefused",
    "RecordingAssets",
    "StoreError",
    "asset_file",
    "checked_premise",
    "choose",
    "dot",
    "happenings",
    "mermaid",
    "missing_assets",
    "offered",
    "package_hash",
    "picture",
    "read_package",
    "resolve",
    "resumed",
    "start",
    "tool_definitions",
    "write_package",
]
