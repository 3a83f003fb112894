"""Answers as OpenTelemetry traces: the spans drawn from an answer's records, live and from its
log, the trace an answer joins, and export that never holds an answer up."""
