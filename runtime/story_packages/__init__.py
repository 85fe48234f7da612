"""Story packages: a visual novel's package, drafted through eight tools in a pipeline.

    from plancontracts.runtime.story_packages import DraftSession, DraftStore

The family's files follow the layout every family shares
(docs/development.md#a-familys-files): `rules` (the whole story's checks
beyond the schema), `tools` (the eight tools, read from their contracts),
`session` (`DraftSession`: one draft, saved after every call), `handlers`
(each tool's checks and change of the draft), `profiles` (the build's
steps and what each call writes), `prompts` (what the model reads before a
call), `agent` (the `Builder`: the model building a package) and `commands`
(`story run`, `graph`, `build`); beside them, `drafts` (a draft's copy to
change, the package it makes), `storage` (drafts and packages in SQLite,
packages as files), `assets` (the hook that makes images and music) and
`graph` (a package drawn for review).
"""

from ..core.errors import AssetGenerationError, StoreError
from .agent import Build, Builder, checked_premise
from .assets import AssetHook, AssetRequest, RecordingAssets
from .graph import FORMATS, dot, mermaid, picture
from .rules import RULES, STORY_PACKAGE_RULES
from .session import DraftSession
from .storage import DraftStore, read_package, write_package
from .tools import TOOLS

__all__ = [
    "FORMATS",
    "RULES",
    "STORY_PACKAGE_RULES",
    "TOOLS",
    "AssetGenerationError",
    "AssetHook",
    "AssetRequest",
    "Build",
    "Builder",
    "DraftSession",
    "DraftStore",
    "RecordingAssets",
    "StoreError",
    "checked_premise",
    "dot",
    "mermaid",
    "picture",
    "read_package",
    "write_package",
]
