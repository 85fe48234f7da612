"""The `plancontracts` command: the entry point (`cli.main`) and what its commands share.

`main` assembles the commands: those of the contracts themselves (`contracts`,
`schema`, `validate`, `examples`, `generate`, in `cli.commands`) and those
each family registers from its own package (`execute`, `plan` and `play` from
tool plans; `think` and `normalize` from planning blocks). Options, input
reading, reports and stopping on signals are written once, here, for all.

Exit status: 0 when everything checked is valid, 1 when a document is invalid
or cannot be read, 2 when the command line itself is wrong. `execute` exits 0
when the plan succeeds, 1 when it fails, 2 when it is rejected before any
tool runs. An interrupted command (Ctrl-C) exits 130; one stopped by SIGTERM
or SIGHUP exits 128 + the signal's number. Either way every script is stopped
first. A closed standard input (for `-`) or standard output, or output that
cannot be written (a full disk), ends any command with one line on standard
error and exit status 1.
"""
