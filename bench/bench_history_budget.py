"""History budget: what counting the request's tokens before every model call costs.

Run: ``.venv/bin/python bench/bench_history_budget.py``. With ``SAgent(max_history_tokens=N)``
the loop counts the system prompt and history (each message as the JSON it is sent as) before
each model call. The baseline is what every call does anyway: serialising the request body to
JSON. Printed as ratios against that baseline, measured in this same run, for histories of
growing length (tool results of about 300 tokens each): counting the whole history ("full"), and
a next turn's count with the loop's per-message cache (``MessageTokens``, two new messages).
"""

from __future__ import annotations

import json
import time
from typing import Any

from sagents.agent._compress import MessageTokens, message_tokens, split_history
from sagents.core._tokens import default_token_counter

REPEATS = 20


def _history(exchanges: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Summarise the document."}]
    for n in range(exchanges):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "read_page"}}
        call["function"]["arguments"] = json.dumps({"page": n})
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        text = " ".join(f"word{n}x{i} of the page" for i in range(80))
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": text})
    return messages


def _best(work: Any) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    counter = default_token_counter()
    print(f"counter: {counter.name}")
    print(
        f"{'messages':>8} {'tokens':>8} {'json ms':>8} {'full ms':>8} {'ratio':>6} "
        f"{'next ms':>8} {'ratio':>6} {'split ms':>9}"
    )
    for exchanges in (10, 50, 200):
        messages = _history(exchanges)
        body = {"model": "m", "messages": messages}
        baseline = _best(lambda body=body: json.dumps(body))
        full = _best(lambda m=messages: sum(message_tokens(x, counter) for x in m))
        tokens = sum(message_tokens(x, counter) for x in messages)
        tally = MessageTokens(counter)
        tally.total(messages[:-2])  # the turns before: already counted
        following = _best(lambda m=messages, t=tally: t.total(m))
        keep = tokens // 2
        split = _best(lambda m=messages, k=keep: split_history(m, keep_tokens=k, counter=counter))
        print(
            f"{len(messages):>8} {tokens:>8} {baseline * 1e3:>8.2f} {full * 1e3:>8.2f} "
            f"{full / baseline:>6.1f} {following * 1e3:>8.2f} {following / baseline:>6.1f} "
            f"{split * 1e3:>9.2f}"
        )


if __name__ == "__main__":
    main()
