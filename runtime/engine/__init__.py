"""Running plans: the executor, tool processes, skills, script I/O, traces and limits.

It imports `runtime.core` only.
"""
