"""The example skills bundled with plancontracts, one folder each.

Each folder holds a `skill.json` manifest, a `prompt.md` for the narrator and
Python scripts that speak the tool protocol through
`plancontracts.runtime.engine.script_io`. The executor finds them here when no other
skills folder is given.
"""

from pathlib import Path

BUNDLED_SKILLS = Path(__file__).resolve().parent
"The folder that holds the bundled skill folders."
