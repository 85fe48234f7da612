"""The `plancontracts` command: the entry point, the only code that imports the families.

`main` builds the parser from the contracts' own commands (`contracts`,
`schema`, `validate`, `examples`, `generate`, in `commands`) and those each
family registers (`register`, and its `validate` options as `RULES_OPTIONS`,
which `normalize`, in `normalizing`, offers for the families that repair),
runs the command chosen and turns how it ended into the exit status. What
the commands share is the command kit, `runtime.commandkit`, one layer below
the families (docs/development.md#layers).

Exit status: 0 when everything checked is valid, 1 when a document is invalid,
2 when the command line itself is wrong or names a file that cannot be read
(docs/contracts.md#a-file-that-cannot-be-read). `execute` exits 0
when the plan succeeds, 1 when it fails, 2 when it is rejected before any
tool runs. An interrupted command (Ctrl-C) exits 130; one stopped by SIGTERM
or SIGHUP exits 128 + the signal's number. Either way every script is stopped
first. A closed standard input (for `-`) or standard output, or output that
cannot be written (a full disk), ends any command with one line on standard
error and exit status 1.
"""
