"""Planning blocks: the choices offered at a decision point, their protocol's rules and mechanics.

    from plancontracts.runtime.planning_blocks import THINK_MODE, Thinker, normalize_block

The family's files follow the layout every family shares
(docs/development.md#a-familys-files): `rules` (the protocol's rules beyond
the schema, by mode), `session` (a planning session's freeze rules between
invocations), `profiles` (the block profile of a mode), `prompts` (the
planning protocol's prompt), `agent` (the `Thinker`: the model writing
blocks, code rolling the planning check) and `commands` (`think`,
`normalize`, `validate --mode`); beside them, `mechanics` (checks, DCs,
rewards, the game clock) and `blocks` (normalizing a block, each repair said).
"""

from .agent import Thinker, Thought
from .blocks import Normalized, Repair, normalize_block
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
    Reattempt,
    advance,
    check_outcome,
    choice_dc,
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
    parallel_time,
    parallel_time_factor,
    reattempt,
    reward_multiplier,
    roll_check,
    snake_case,
    thaw,
    topic_key,
)
from .profiles import BlockProfile, block_profile
from .prompts import planning_messages
from .rules import FROZEN_PLANS, PLANNING_BLOCK, RULES, SESSION, STORY_MODE, THINK_MODE, rules_in
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
    "THINK_MODE",
    "BlockProfile",
    "CheckOutcome",
    "DcAdjustment",
    "EarlyBreak",
    "GameClock",
    "Loot",
    "Mode",
    "Normalized",
    "Reattempt",
    "Repair",
    "Thinker",
    "Thought",
    "advance",
    "after_thought",
    "block_profile",
    "check_outcome",
    "choice_dc",
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
    "parallel_time",
    "parallel_time_factor",
    "planning_messages",
    "reattempt",
    "reward_multiplier",
    "roll_check",
    "rules_in",
    "snake_case",
    "thaw",
    "topic_key",
]
