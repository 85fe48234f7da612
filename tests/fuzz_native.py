"""A libFuzzer harness (atheris) for the native fast path, plancontracts_fast.

Run it by hand for as long as you like, with corpus folders to read and grow:

    .venv/bin/python tests/fuzz_native.py -runs=1000000 CORPUS_DIR [MORE_DIRS]

test_native.py runs it for a bounded number of inputs. Each input is:

- scanned: `scan` must not crash, and when it says True the project's strict
  parser must accept the text too (scan may only be more cautious than it);
- split by a FuzzedDataProvider into strings, which a fixed `Dfa` must judge
  as Python's `re` does, and which `check` must judge, in a list and a dict,
  as the Dfa does string by string.

A failed assertion or a crash stops the run and libFuzzer writes the input
to a `crash-*` file: keep it in tests/fuzz_crashes/ as a regression case.
The C code is not instrumented (it is built by gcc, without libFuzzer's
coverage), so the search is guided by the Python parser's coverage only.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import atheris  # type: ignore[import-untyped]  # no stubs, no py.typed

with atheris.instrument_imports():
    from plancontracts.runtime.core.errors import MalformedJSON
    from plancontracts.runtime.core.jsontext import TOO_DEEP, parse

from plancontracts_fast import Dfa, check, scan

MAX_DEPTH = 1000

# Letters: every other one of a..y (13 single ranges, so that the Dfa's
# states hold more than 8 ranges and take the binary search), é (two bytes of
# UTF-8) and the emoticons block (four bytes). A word of them, then
# optionally a dash and digits.
_LETTERS = [(c, c) for c in range(ord("a"), ord("z"), 2)] + [(0xE9, 0xE9), (0x1F600, 0x1F64F)]
_DIGITS = [(ord("0"), ord("9"))]
WORD = Dfa(
    [False, True, False, True],
    [
        [(lo, hi, 1) for lo, hi in _LETTERS],
        [(ord("-"), ord("-"), 2), *[(lo, hi, 1) for lo, hi in _LETTERS]],
        [(lo, hi, 3) for lo, hi in _DIGITS],
        [(lo, hi, 3) for lo, hi in _DIGITS],
    ],
)
_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" if lo != hi else chr(lo) for lo, hi in _LETTERS)
WORD_RE = re.compile(rf"\A[{_CLASS}]+(?:-[0-9]+)?\Z")


def judge_text(data: bytes) -> None:
    """Scan `data`; when the scan says True, the strict parser must accept it.

    The parser runs on every input, scanned True or not: its diagnosis of
    malformed text is instrumented Python, whose coverage steers the fuzzer
    towards JSON. Its own nesting limit is Python's recursion limit, a little
    under MAX_DEPTH levels, so a text it refuses as too deep is no
    disagreement.
    """
    scanned = scan(data, MAX_DEPTH)
    try:
        parse(data)
    except MalformedJSON as error:
        if scanned and error.message != TOO_DEEP:
            raise AssertionError(
                f"scan accepted what the parser refuses: {error.message}"
            ) from None


def judge_strings(data: bytes) -> None:
    """The fixed Dfa agrees with `re`, and `check` with the Dfa, on strings drawn from `data`."""
    provider = atheris.FuzzedDataProvider(data)
    texts = [provider.ConsumeUnicode(provider.ConsumeIntInRange(0, 40)) for _ in range(4)]
    for text in texts:
        expected = WORD_RE.search(text) is not None
        if WORD.matches(text) != expected:
            raise AssertionError(f"the Dfa and re disagree on {text!r}")
    every = all(WORD_RE.search(text) is not None for text in texts)
    if check(texts, (1, (0, WORD))) != every:
        raise AssertionError(f"check of a list disagrees with the Dfa on {texts!r}")
    mapping = dict.fromkeys(texts, "a")
    keys_match = all(WORD_RE.search(text) is not None for text in mapping)
    if check(mapping, (2, (0, WORD_RE), (0, WORD))) != keys_match:
        raise AssertionError(f"check of a dict disagrees with re on {list(mapping)!r}")


def TestOneInput(data: bytes) -> None:
    judge_text(data)
    judge_strings(data)


# libFuzzer's dictionary: JSON's tokens and the byte sequences at the edges of
# the rules scan enforces, which random mutation would seldom find.
DICTIONARY = [
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b'"',
    b'":',
    b"true",
    b"false",
    b"null",
    b"-",
    b"0",
    b".",
    b"e",
    b"E+",
    b"e-",
    b"1e308",
    b"1e309",
    b"123456789012345678",
    b"\\",
    b"\\u",
    b"\\ud83d",
    b"\\ude00",
    b"\\udc00",
    b"\\u0061",
    b"\\n",
    b"\xc2\x80",
    b"\xc0\xaf",
    b"\xe0\xa0\x80",
    b"\xed\x9f\xbf",
    b"\xed\xa0\x80",
    b"\xf0\x90\x80\x80",
    b"\xf4\x8f\xbf\xbf",
    b"\xf4\x90\x80\x80",
    b"\xef\xbb\xbf",
]


def _dictionary_file() -> str:
    """DICTIONARY written in libFuzzer's format to a file in the temporary folder; its path.

    One fixed file, written again by each run: libFuzzer ends the process
    itself, so nothing would remove a file per run.
    """
    lines = ['"' + "".join(f"\\x{byte:02x}" for byte in token) + '"' for token in DICTIONARY]
    path = Path(tempfile.gettempdir()) / "plancontracts_fuzz_native.dict"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def main() -> None:
    """Run libFuzzer with sys.argv's options and corpus folders, and DICTIONARY by default."""
    arguments = list(sys.argv)
    if not any(argument.startswith("-dict=") for argument in arguments):
        arguments.insert(1, f"-dict={_dictionary_file()}")
    atheris.Setup(arguments, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
