"""Running plans: the executor, tool processes, skills, script I/O, traces and limits.

The executor (`executor.py`, its public entry) is made of the checks before
anything runs (`checks.py`), the order and concurrency tools run in
(`scheduling.py`), one tool's attempts (`attempts.py`), the sink its events
go through (`sink.py`) and the result (`result.py`); `runs.py` is the record
of one tool they share, `spans.py` what they tell OpenTelemetry. It imports
`runtime.core` only.
"""
