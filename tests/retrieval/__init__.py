"""Retrieval: ranking arithmetic, the advice gate, refusal rules, the expander, other languages."""
