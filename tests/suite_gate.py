"""After `make test`: the citation gate held in every answer the suite recorded.

Reads the JSON `reactome-answers logs stats --json` printed over the logs the suite's answers
wrote (collected by tests/conftest.py) and fails unless, in every answer with both citations
and tokens, the last citation came before the first token. Run as
``python -m tests.suite_gate STATS.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.suite_gate STATS.json", file=sys.stderr)
        return 2
    summary = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    gate = summary["gate"]
    print(
        f"suite logs: {summary['logs']} ({summary['unreadable']} unreadable), states "
        f"{summary['states']}; citations before the first token in {gate['held']} of "
        f"{gate['of']} answers with both (last citation at seq {gate['last_citation_seq']}, "
        f"first token at seq {gate['first_token_seq']})"
    )
    if summary["logs"] == 0 or gate["of"] == 0:
        print("suite_gate: no recorded answer had both citations and tokens", file=sys.stderr)
        return 1
    if gate["held"] != gate["of"] or summary["unreadable"]:
        print("suite_gate: the gate did not hold in every answer, or a log is unreadable",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
