"""One process per Megatron source tree for a whole test session: the tree is prepared and torch
and Megatron are imported once (≈10 s a process), then each request is answered in turn.

    python megatron_worker.py TREE

A request is one line of JSON on stdin, ``{"kind": "parse" | "build" | "resume", "cases": [...]}``
(the cases of megatron_parse.py, megatron_build.py or megatron_resume.py); its answer is a line ``MARK [results]`` on stdout
(other lines are what the frameworks print). The process ends when stdin closes.
"""

from __future__ import annotations

import json
import sys

from megatron_build import build
from megatron_parse import MARK, _prepare, parse
from megatron_resume import check_args

ANSWER = {"parse": parse, "build": build, "resume": check_args}


def main() -> None:
    tree = sys.argv[1]
    _prepare(tree)
    for line in sys.stdin:
        request = json.loads(line)
        results = ANSWER[request["kind"]](tree, request["cases"])
        sys.stdout.write(f"\n{MARK} {json.dumps(results)}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
