"""The local model: which one (resolution), loading it, generating under a schema, chat text.

It imports `runtime.core` only; llama.cpp and Outlines are imported when first used.
"""
