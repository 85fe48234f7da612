"""Code generation: from the JSON Schemas in `schemas/` to the typed models in `generated/`.

`plancontracts generate` runs `generate.write`; `plancontracts generate --check`
runs `generate.check`.
"""
