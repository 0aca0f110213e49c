"""The host side of run_script's wire (fds 3/4): strict decoding of request lines, against the
C JSON decoder in the same run.

``protocol.decode_line`` refuses duplicate keys, NaN/Infinity and invalid UTF-8; the baseline is
``json.loads`` of the same text, which refuses none of them. Lines: a ``call`` request as
``call_many`` writes it, and a reply with a structured result. Figures are CPU time
(``time.process_time``) per line, min of 5 repeats of 20,000 lines; ratio = strict / baseline
(1.0 = as fast as the C decoder). Not a test.

Run: ``.venv/bin/python bench/bench_script_wire.py [--json]``
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from sagents.script import _protocol as protocol

LINES = 20_000
REPEATS = 5
STATUS = {"sn": "SN0001", "status": "online", "battery": 87, "temp": 21.5, "fw": "1.2.3"}
REQUEST = protocol.encode_line(
    {"id": 7, "op": "call", "tool": "fleet__get_device_status", "args": {"sn": "SN0001"}}
)
REPLY = protocol.encode_ok_reply(
    7, {"text": json.dumps(STATUS), "structured": STATUS, "is_error": False, "error": None}
)


def _us(decode: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.process_time()
        for _ in range(LINES):
            decode()
        best = min(best, time.process_time() - start)
    return best / LINES * 1e6


def main() -> None:
    figures: dict[str, float] = {}
    for name, line in (("request", REQUEST), ("reply", REPLY)):
        strict = _us(lambda line=line: protocol.decode_line(line, max_bytes=1 << 26))
        baseline = _us(lambda line=line: json.loads(line.decode("utf-8")))
        figures[f"{name} strict us"] = strict
        figures[f"{name} json.loads us"] = baseline
        figures[f"{name} ratio"] = strict / baseline
        if "--json" not in sys.argv[1:]:
            print(
                f"{name:8} strict {strict:6.2f} us/line  json.loads {baseline:6.2f} us/line  "
                f"ratio {strict / baseline:.2f}"
            )
    if "--json" in sys.argv[1:]:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
