"""Planning blocks: the choices offered at a decision point, their protocol's rules and mechanics.

    from plancontracts.runtime.planning_blocks import THINK_MODE, Thinker, normalize_block

The family's files follow the layout every family shares
(docs/development.md#a-familys-files): `rules` (the protocol's rules beyond
the schema, by mode), `session` (a planning session's freeze rules between
invocations), `profiles` (the block profile of a mode), `prompts` (the
planning protocol's prompts), `agent` (the `Thinker`: the model writing
blocks and story responses, code rolling the planning check) and `commands`
(`think`, `choose`, `validate --mode`, which `normalize --mode` shares); beside
them, `mechanics` (checks, DCs, rewards, the parallel option's outcome, the
game clock) and `repairs` (normalizing a block, each repair said, and the
`NORMALIZERS` that `plancontracts normalize` finds).
"""

from ..core.repairs import Normalized, Repair
from .agent import Narration, Thinker, Thought
from .mechanics import (
    ABILITIES,
    AVERAGE_SCORE,
    COMPLEXITY_DC,
    HOUR,
    MAX_DC,
    MAX_DC_ADJUSTMENT,
    MIN_DC,
    CheckOutcome,
    DcAdjustment,
    EarlyBreak,
    GameClock,
    Loot,
    Mode,
    ParallelOutcome,
    ParallelResult,
    ParallelRoll,
    Reattempt,
    RolledCheck,
    TaskStatus,
    advance,
    check_outcome,
    choice_dc,
    coordination_check_dc,
    coordination_dc,
    execution_dc,
    freeze,
    freeze_hours,
    is_meta,
    is_parallel,
    loot,
    mode_of,
    parallel_dc_modifier,
    parallel_option_time,
    parallel_outcome,
    parallel_tasks,
    parallel_time,
    parallel_time_factor,
    reattempt,
    reward_multiplier,
    roll_check,
    roll_parallel,
    snake_case,
    thaw,
    topic_key,
)
from .profiles import BlockProfile, ResponseProfile, block_profile, response_profile
from .prompts import planning_messages, story_messages
from .repairs import normalize_block
from .rules import (
    FROZEN_PLANS,
    PLANNING_BLOCK,
    RULES,
    SESSION,
    STORY_MODE,
    STORY_RESPONSE,
    THINK_MODE,
    rules_in,
)
from .session import after_thought, may_think, new_session

__all__ = [
    "ABILITIES",
    "AVERAGE_SCORE",
    "COMPLEXITY_DC",
    "FROZEN_PLANS",
    "HOUR",
    "MAX_DC",
    "MAX_DC_ADJUSTMENT",
    "MIN_DC",
    "PLANNING_BLOCK",
    "RULES",
    "SESSION",
    "STORY_MODE",
    "STORY_RESPONSE",
    "THINK_MODE",
    "BlockProfile",
    "CheckOutcome",
    "DcAdjustment",
    "EarlyBreak",
    "GameClock",
    "Loot",
    "Mode",
    "Narration",
    "Normalized",
    "ParallelOutcome",
    "ParallelResult",
    "ParallelRoll",
    "Reattempt",
    "Repair",
    "ResponseProfile",
    "RolledCheck",
    "TaskStatus",
    "Thinker",
    "Thought",
    "advance",
    "after_thought",
    "block_profile",
    "check_outcome",
    "choice_dc",
    "coordination_check_dc",
    "coordination_dc",
    "execution_dc",
    "freeze",
    "freeze_hours",
    "is_meta",
    "is_parallel",
    "loot",
    "may_think",
    "mode_of",
    "new_session",
    "normalize_block",
    "parallel_dc_modifier",
    "parallel_option_time",
    "parallel_outcome",
    "parallel_tasks",
    "parallel_time",
    "parallel_time_factor",
    "planning_messages",
    "reattempt",
    "response_profile",
    "reward_multiplier",
    "roll_check",
    "roll_parallel",
    "rules_in",
    "snake_case",
    "story_messages",
    "thaw",
    "topic_key",
]
