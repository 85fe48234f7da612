"""A stop signal at any moment of a command's start ends it as one during its work does.

The entry point imports the commands (a third of a second) only after it has
taken the stop signals: a signal in that time exits 128 + the signal's number
with one line on standard error, where it printed a traceback or killed the
process (issue 26, item 21). What comes before the entry point runs is out of
its reach: the interpreter's own start, and the import of the packages above
the entry point's module, which Python does before any of its code; the
command here reports when it begins to import the commands, and the signals
come from then on.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

# The command as the console script runs it, with Ctrl-C as from a terminal (a
# suite started in the background inherits SIGINT ignored, and Python keeps it
# so), saying on standard output when the command kit, the first of the
# commands' modules, begins to import.
_REPORTING_ITS_START = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "reported = []\n"
    "def report(event, args):\n"
    "    if event == 'import' and args[0] == 'plancontracts.runtime.commandkit' and not reported:\n"
    "        reported.append(True)\n"
    "        os.write(1, b'started\\n')\n"
    "sys.addaudithook(report)\n"
    "from plancontracts.runtime.cli.main import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)

STOPS = {
    signal.SIGINT: b"plancontracts: interrupted\n",
    signal.SIGTERM: b"plancontracts: stopped by SIGTERM\n",
    signal.SIGHUP: b"plancontracts: stopped by SIGHUP\n",
}

# Seconds after the commands begin to import: from their first import to well
# past their last one, when the command waits on its standard input.
DELAYS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)

PATIENCE = 300.0
"Seconds a command may take to start, or to stop, on a busy machine; no test claims a speed."


@pytest.mark.process  # a signal to the command
@pytest.mark.slow  # a process per signal and moment
@pytest.mark.parametrize("signum", list(STOPS), ids=lambda signum: signum.name)
def test_a_stop_signal_while_the_command_starts_ends_it_in_one_line(
    signum: signal.Signals,
) -> None:
    for delay in DELAYS:
        # Standard input stays open: the command, once started, waits on it.
        cli = subprocess.Popen(
            [sys.executable, "-c", _REPORTING_ITS_START, "validate", "plan", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert cli.stdout is not None
            assert cli.stdout.readline() == b"started\n"
            time.sleep(delay)  # a moment of the start, not a claim about speed
            cli.send_signal(signum)
            out, err = cli.communicate(timeout=PATIENCE)
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.communicate()
        said = f"{signum.name} {delay} s after the start: {err!r}"
        assert cli.returncode == 128 + signum, said
        assert err == STOPS[signum], said
        assert out == b"", said


# The command as the console script runs it, sending itself a first signal in
# the middle of its work (when it imports jsonschema to validate) and a second
# while it stops (when it imports the model's module to tell whether a
# generation runs), saying on standard output as it sends each.
_SIGNALLED_TWICE = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "first, second = signal.Signals[sys.argv[1]], signal.Signals[sys.argv[2]]\n"
    "sent = []\n"
    "def send(event, args):\n"
    "    if event != 'import':\n"
    "        return\n"
    "    if args[0] == 'jsonschema' and not sent:\n"
    "        sent.append(first)\n"
    "        os.write(1, b'first\\n')\n"
    "        os.kill(os.getpid(), first)\n"
    "    elif args[0] == 'plancontracts.runtime.model.local' and len(sent) == 1:\n"
    "        sent.append(second)\n"
    "        os.write(1, b'second\\n')\n"
    "        os.kill(os.getpid(), second)\n"
    "sys.addaudithook(send)\n"
    "from plancontracts.runtime.cli.main import main\n"
    "raise SystemExit(main(sys.argv[3:]))\n"
)


@pytest.mark.process  # signals to the command
@pytest.mark.parametrize(
    ("first", "second"),
    [
        (signal.SIGINT, signal.SIGINT),  # Ctrl-C pressed twice
        (signal.SIGTERM, signal.SIGINT),
        (signal.SIGTERM, signal.SIGTERM),
        (signal.SIGHUP, signal.SIGTERM),  # a terminal closed, then a supervisor
    ],
    ids=lambda signum: signum.name,
)
def test_a_second_stop_signal_while_the_command_stops_is_let_pass(
    first: signal.Signals, second: signal.Signals
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SIGNALLED_TWICE, first.name, second.name, "validate", "plan", "-"],
        input=b"{}",
        capture_output=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.stdout == b"first\nsecond\n"  # both signals came where they should
    assert done.returncode == 128 + first, done.stderr
    assert done.stderr == STOPS[first]


# The command as the console script runs it, its own process's (`main()` without
# arguments), stopped by SIGTERM in the middle of its work as above and sent
# Ctrl-C once more while the interpreter exits.
_SIGNALLED_AT_EXIT = (
    "import atexit, os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "def send(event, args):\n"
    "    if event == 'import' and args[0] == 'jsonschema':\n"
    "        os.kill(os.getpid(), signal.SIGTERM)\n"
    "sys.addaudithook(send)\n"
    "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))\n"
    "from plancontracts.runtime.cli.main import main\n"
    "sys.exit(main())\n"
)


@pytest.mark.process  # signals to the command, the process's exit
def test_ctrl_c_while_a_stopped_command_exits_is_let_pass() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SIGNALLED_AT_EXIT, "validate", "plan", "-"],
        input=b"{}",
        capture_output=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stderr == STOPS[signal.SIGTERM]


# The command as the console script runs it, sending itself `signum` as the
# first class with a dataclass field is defined while the commands import:
# Python 3.11 wraps what a `__set_name__` raises in a RuntimeError.
_SIGNALLED_IN_SET_NAME = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "signum = signal.Signals[sys.argv[1]]\n"
    "import plancontracts\n"
    "def send(frame, event, arg):\n"
    "    if event == 'call' and frame.f_code.co_name == '__set_name__':\n"
    "        sys.setprofile(None)\n"
    "        os.write(1, b'sent\\n')\n"
    "        os.kill(os.getpid(), signum)\n"
    "sys.setprofile(send)\n"
    "from plancontracts.runtime.cli.main import main\n"
    "raise SystemExit(main(sys.argv[2:]))\n"
)


@pytest.mark.process  # a signal to the command
@pytest.mark.parametrize("signum", list(STOPS), ids=lambda signum: signum.name)
def test_a_stop_signal_while_a_class_is_defined_is_not_a_runtime_error(
    signum: signal.Signals,
) -> None:
    _stops_once_signalled_from(_SIGNALLED_IN_SET_NAME, signum)


def _stops_once_signalled_from(script: str, signum: signal.Signals) -> None:
    """`script` runs `validate plan -` and sends itself `signum`: the command stops in one line."""
    done = subprocess.run(
        [sys.executable, "-c", script, signum.name, "validate", "plan", "-"],
        input=b"",
        capture_output=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.stdout == b"sent\n"  # the signal came where it should
    assert done.returncode == 128 + signum, done.stderr
    assert done.stderr == STOPS[signum]


# The command as the console script runs it, sending itself `signum` from inside
# msgspec's C code: at the first Python function it calls while it builds a
# decoder for `msgspec.inspect`, as the commands import. There a signal raised
# at once is lost (the command ran on to its end) or crashes msgspec (SIGSEGV).
_SIGNALLED_IN_MSGSPEC = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "signum = signal.Signals[sys.argv[1]]\n"
    "import plancontracts\n"
    "def send(frame, event, arg):\n"
    "    caller = frame.f_back\n"
    "    if (\n"
    "        event == 'call'\n"
    "        and caller is not None\n"
    "        and caller.f_code.co_filename.endswith('msgspec/inspect.py')\n"
    "        and caller.f_code.co_name == 'run'\n"
    "        and 'importlib' not in frame.f_code.co_filename\n"
    "    ):\n"
    "        sys.setprofile(None)\n"
    "        os.write(1, b'sent\\n')\n"
    "        os.kill(os.getpid(), signum)\n"
    "sys.setprofile(send)\n"
    "from plancontracts.runtime.cli.main import main\n"
    "raise SystemExit(main(sys.argv[2:]))\n"
)


@pytest.mark.process  # a signal to the command
@pytest.mark.parametrize("signum", list(STOPS), ids=lambda signum: signum.name)
def test_a_stop_signal_inside_msgspec_while_the_commands_import_stops_the_command(
    signum: signal.Signals,
) -> None:
    _stops_once_signalled_from(_SIGNALLED_IN_MSGSPEC, signum)
