"""Tool suggestion: recall on a public tool-retrieval set, tokens saved, ranking cost.

Run: ``.venv/bin/python bench/bench_suggest.py [--json] [--skip-peers]``.

1. Recall@1/3/5/10 of :func:`sagents.agent.suggest_tools` on the Berkeley Function-Calling
   Leaderboard's non-live categories (``simple_python``, ``multiple``, ``parallel``,
   ``parallel_multiple``), from the ``bfcl-eval`` wheel (``scripts/setup.sh --test`` installs
   it, data only). The functions of all four categories are pooled into one registry (one
   spec per name, the first seen); each question is ranked against all of them; the ground
   truth is the set of functions its answer calls. Recall@k of a question is the share of
   those functions in the top k, averaged over the questions. BM25 alone (the baseline) and
   the fused ranking (BM25 + WordLlama) run in the same process, on the same pool.
2. Tool-definition tokens per turn, suggestion off (every schema) against on (the k=10
   suggested schemas), counted with the project's offline counter (tiktoken ``cl100k_base``)
   over ``json.dumps`` of the OpenAI tools: the 500-device fleet demo server, the five
   reference MCP servers (from ``.peers``; ``--skip-peers`` leaves them out) and a synthetic
   1,000-tool registry.
3. Ranking cost per query on a synthetic 2,000-tool registry, CPU time, against the baseline of
   serialising those 2,000 tools' OpenAI schemas (what a turn without suggestion sends); for
   one-request queries and for queries of two to four requests (each also ranked on its own).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import anyio
from mcp import StdioServerParameters

from sagents.agent import OfflineToolSelector
from sagents.core._spec import ToolSpec
from sagents.core._tokens import default_token_counter
from sagents.tool import ToolManager

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEERS = ROOT / ".peers"
NODE_MODULES = PEERS / "node" / "node_modules" / "@modelcontextprotocol"
PEER_BIN = PEERS / "venv" / "bin"
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
LIVE_CATEGORIES = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
# ^ user-contributed questions and functions. The first design choices were checked on these
# (the non-live set held out); the per-request ranking and named tools were compared on the
# non-live set, the goal's, with these held out: each set is the other's check
KS = (1, 3, 5, 10)
SUGGESTED = 10


# -- 1. recall on BFCL -------------------------------------------------------------------------


def _bfcl_data() -> pathlib.Path:
    try:
        import bfcl_eval
    except ImportError:
        sys.exit(
            "bfcl-eval is not installed: run scripts/setup.sh --test (or pip install --no-deps)"
        )
    return pathlib.Path(bfcl_eval.__file__).parent / "data"


def _lines(path: pathlib.Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def bfcl_pool(
    categories: Sequence[str] = CATEGORIES,
) -> tuple[list[ToolSpec], list[tuple[str, set[str]]]]:
    """The pooled registry and ``(question, ground-truth names)`` of every question."""
    data = _bfcl_data()
    pool: dict[str, ToolSpec] = {}
    questions: list[tuple[str, set[str]]] = []
    for category in categories:
        answers = {
            a["id"]: a for a in _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")
        }
        for item in _lines(data / f"BFCL_v4_{category}.json"):
            for function in item["function"]:
                if function["name"] not in pool:
                    pool[function["name"]] = ToolSpec(
                        name=function["name"],
                        description=function.get("description", ""),
                        input_schema=function.get("parameters") or {},
                    )
            turns = item["question"]
            text = "\n".join(m["content"] for turn in turns for m in turn if m["role"] == "user")
            truth = {name for call in answers[item["id"]]["ground_truth"] for name in call}
            questions.append((text, truth))
    return list(pool.values()), questions


def recall(
    selector: OfflineToolSelector,
    pool: Sequence[ToolSpec],
    questions: Sequence[tuple[str, set[str]]],
) -> dict[int, float]:
    totals = dict.fromkeys(KS, 0.0)
    for text, truth in questions:
        ranked = selector.rank(text, pool, max(KS))
        for k in KS:
            totals[k] += len(truth & set(ranked[:k])) / len(truth)
    return {k: totals[k] / len(questions) for k in KS}


def recall_by_category(
    selector: OfflineToolSelector, pool: Sequence[ToolSpec], categories: Sequence[str]
) -> dict[str, float]:
    """R@5 of each category's questions, ranked against the whole pool."""
    return {
        category: round(recall(selector, pool, bfcl_pool((category,))[1])[5], 3)
        for category in categories
    }


def recall_plain_bm25(
    pool: Sequence[ToolSpec], questions: Sequence[tuple[str, set[str]]]
) -> dict[int, float]:
    """The textbook baseline: bm25s with its own tokenizer (English stop words) over each
    function's name and description as they are, nothing split, stemmed or added."""
    import bm25s
    import numpy as np

    names = [s.name for s in pool]
    retriever = bm25s.BM25()
    corpus = [f"{s.name} {s.description}" for s in pool]
    retriever.index(
        bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False
    )
    totals = dict.fromkeys(KS, 0.0)
    for text, truth in questions:
        words = bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0]
        scores = retriever.get_scores(words) if words else np.zeros(len(names))
        ranked = [names[i] for i in np.argsort(-scores, kind="stable")[: max(KS)]]
        for k in KS:
            totals[k] += len(truth & set(ranked[:k])) / len(truth)
    return {k: totals[k] / len(questions) for k in KS}


# -- synthetic registries ----------------------------------------------------------------------

_SERVICE_TEXT = (
    "crm billing inventory shipping hr payroll calendar mail chat wiki tickets monitoring "
    "logging storage dns cdn database cache queue search analytics ads auth users groups "
    "projects repos builds deploys secrets certificates backups vpn firewall printers badges "
    "rooms travel expenses invoices contracts legal surveys forms kiosk fleet sensors maps "
    "weather news translate"
)
_SERVICES = _SERVICE_TEXT.split()
_ACTIONS = (
    ("list", "List the {n} records, filtered and paginated."),
    ("get", "Get one {n} record by its id."),
    ("create", "Create a new {n} record."),
    ("update", "Update fields of an existing {n} record."),
    ("delete", "Delete a {n} record permanently."),
    ("search", "Full-text search over {n} records."),
    ("export", "Export {n} records as CSV."),
    ("import", "Import {n} records from a CSV file."),
    ("archive", "Archive old {n} records."),
    ("restore", "Restore an archived {n} record."),
    ("count", "Count {n} records matching a filter."),
    ("subscribe", "Subscribe to changes of {n} records."),
    ("unsubscribe", "Stop a subscription to {n} changes."),
    ("validate", "Validate a {n} record without saving it."),
    ("merge", "Merge two duplicate {n} records."),
    ("share", "Share a {n} record with another user."),
    ("tag", "Add tags to a {n} record."),
    ("history", "Show the change history of a {n} record."),
    ("lock", "Lock a {n} record against edits."),
    ("report", "Build a summary report of {n} records."),
)


def synthetic_registry(size: int) -> list[ToolSpec]:
    """``size`` CRUD-like tools, ``<service>__<action>_<noun>``, with 2-4 parameters each."""
    rng = random.Random(size)
    specs: list[ToolSpec] = []
    index = 0
    while len(specs) < size:
        service = _SERVICES[index % len(_SERVICES)]
        action, description = _ACTIONS[(index // len(_SERVICES)) % len(_ACTIONS)]
        suffix = index // (len(_SERVICES) * len(_ACTIONS))
        noun = f"{service}_item{suffix}" if suffix else f"{service}_item"
        params = {
            "id": {"type": "string", "description": f"The {service} record id."},
            "filter": {"type": "string", "description": "A filter expression, field=value."},
            "limit": {
                "type": "integer",
                "description": "At most this many results.",
                "default": 50,
            },
            "fields": {"type": "array", "items": {"type": "string"}, "description": "Fields."},
        }
        chosen = dict(rng.sample(sorted(params.items()), rng.randint(2, 4)))
        specs.append(
            ToolSpec(
                name=f"{service}__{action}_{noun}",
                description=description.format(n=service),
                input_schema={"type": "object", "properties": chosen, "required": list(chosen)[:1]},
            )
        )
        index += 1
    return specs


def synthetic_multi_queries(count: int) -> list[str]:
    """Queries of two to four requests each ("... Then ...", "Also ..."): each request is
    ranked on its own too, so these cost more than one request."""
    rng = random.Random(count + 1)
    singles = synthetic_queries(count * 4)
    joins = (". Then ", ". Also ", ". After that, ")
    queries = []
    for _ in range(count):
        parts = rng.sample(singles, rng.randint(2, 4))
        text = parts[0]
        for part in parts[1:]:
            text += rng.choice(joins) + part
        queries.append(text + ".")
    return queries


def synthetic_queries(count: int) -> list[str]:
    rng = random.Random(count)
    templates = (
        "please {a} the {s} entries for last week",
        "can you {a} {s} record 42",
        "I need to {a} our {s} data",
        "{a} {s}",
    )
    return [
        rng.choice(templates).format(a=rng.choice(_ACTIONS)[0], s=rng.choice(_SERVICES))
        for _ in range(count)
    ]


# -- 2. tokens ---------------------------------------------------------------------------------


def _openai_tools(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": s.name,
                "description": s.description,
                "parameters": dict(s.input_schema),
            },
        }
        for s in specs
    ]


def definition_tokens(specs: Sequence[ToolSpec]) -> int:
    return default_token_counter().count(json.dumps(_openai_tools(specs)))


def tokens_row(
    label: str, manager_tools: list[dict[str, Any]], specs: Sequence[ToolSpec], queries: list[str]
) -> dict[str, Any]:
    counter = default_token_counter()
    off = counter.count(json.dumps(manager_tools))
    by_name = {t["function"]["name"]: t for t in manager_tools}
    selector = OfflineToolSelector()
    on = [
        counter.count(json.dumps([by_name[n] for n in selector.rank(q, specs, SUGGESTED)]))
        for q in queries
    ]
    mean_on = statistics.fmean(on)
    return {
        "registry": label,
        "tools": len(specs),
        "tokens_off": off,
        "tokens_on_mean": round(mean_on),
        "ratio_on_off": round(mean_on / off, 3) if off else None,
    }


REFERENCE_QUERIES = {
    # hand-written requests and the tools that answer them (any one of a set counts)
    "what time is it in Tokyo right now": {"time__get_current_time"},
    "show me the last five commits of the repository": {"git__git_log"},
    "read the file notes.txt": {"filesystem__read_text_file", "filesystem__read_file"},
    "remember that Alice prefers tea": {"memory__create_entities", "memory__add_observations"},
    "list the files in the project directory": {"filesystem__list_directory"},
    "add two numbers for me": {"everything__get-sum"},
    "what does the diff of my staged changes look like": {"git__git_diff_staged"},
    "convert 3pm London time to New York time": {"time__convert_time"},
}
FLEET_QUERIES = [
    "which devices are offline",
    "reboot device SN-0042",
    "set the firmware channel of SN-0007 to beta",
    "show the status of every device with a critical alert",
]


async def _server_tools(
    params: dict[str, StdioServerParameters],
) -> tuple[list[Any], list[ToolSpec]]:
    async with ToolManager() as manager:
        for name, server in params.items():
            await manager.register_mcp_server(name=name, params=server)
        return manager.get_openai_tools(), manager.list_specs()


def reference_params(tmp: pathlib.Path) -> dict[str, StdioServerParameters]:
    import subprocess

    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)

    def node(package: str, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
        script = NODE_MODULES / package / "dist" / "index.js"
        return StdioServerParameters(command="node", args=[str(script), *args], env=env)

    return {
        "everything": node("server-everything", "stdio"),
        "filesystem": node("server-filesystem", str(tmp)),
        "memory": node("server-memory", env={"MEMORY_FILE_PATH": str(tmp / "m.json")}),
        "time": StdioServerParameters(command=str(PEER_BIN / "mcp-server-time")),
        "git": StdioServerParameters(
            command=str(PEER_BIN / "mcp-server-git"), args=["--repository", str(repo)]
        ),
    }


def token_rows(skip_peers: bool) -> list[dict[str, Any]]:
    import tempfile

    rows: list[dict[str, Any]] = []
    fleet = {
        "fleet": StdioServerParameters(
            command=sys.executable, args=["-m", "sagents.demo.fleet_server"]
        )
    }
    tools, specs = anyio.run(_server_tools, fleet)
    rows.append(tokens_row("fleet demo server (500 devices)", tools, specs, FLEET_QUERIES))
    if skip_peers or not NODE_MODULES.is_dir() or not PEER_BIN.is_dir():
        rows.append(
            {
                "registry": "the five reference servers",
                "skipped": "no .peers (scripts/setup.sh --test)",
            }
        )
    else:
        with tempfile.TemporaryDirectory() as tmp:
            tools, specs = anyio.run(_server_tools, reference_params(pathlib.Path(tmp)))
        rows.append(tokens_row("the five reference servers", tools, specs, list(REFERENCE_QUERIES)))
        selector = OfflineToolSelector()
        ranked = {q: selector.rank(q, specs, SUGGESTED) for q in REFERENCE_QUERIES}
        rows[-1]["hits"] = {
            f"@{k}": sum(bool(want & set(ranked[q][:k])) for q, want in REFERENCE_QUERIES.items())
            for k in (1, 3, 10)
        }
        rows[-1]["queries"] = len(REFERENCE_QUERIES)
    synthetic = synthetic_registry(1000)
    rows.append(
        tokens_row(
            "synthetic, 1,000 tools", _openai_tools(synthetic), synthetic, synthetic_queries(50)
        )
    )
    return rows


# -- 3. cost -----------------------------------------------------------------------------------


def cost(size: int = 2000, queries: int = 200) -> dict[str, Any]:
    specs = synthetic_registry(size)
    texts = synthetic_queries(queries)
    selector = OfflineToolSelector()
    started = time.process_time()
    selector.index(specs)
    build = time.process_time() - started
    started = time.process_time()
    for text in texts:
        selector.rank(text, specs, SUGGESTED)
    per_query = (time.process_time() - started) / queries
    multi = synthetic_multi_queries(queries)
    started = time.process_time()
    for text in multi:
        selector.rank(text, specs, SUGGESTED)
    per_multi_query = (time.process_time() - started) / queries
    subset = specs[: size * 3 // 4]  # a session allowed three quarters of the registry
    started = time.process_time()
    selector.rank(texts[0], subset, SUGGESTED)
    view_first = time.process_time() - started
    started = time.process_time()
    for text in texts:
        selector.rank(text, subset, SUGGESTED)
    view_query = (time.process_time() - started) / queries
    started = time.process_time()
    for _ in range(10):
        json.dumps(_openai_tools(specs))
    serialise = (time.process_time() - started) / 10
    return {
        "tools": size,
        "index_build_ms": round(build * 1000, 1),
        "per_query_ms": round(per_query * 1000, 3),
        "per_multi_request_query_ms": round(per_multi_query * 1000, 3),
        "serialise_all_schemas_ms": round(serialise * 1000, 3),
        "ratio": round(per_query / serialise, 3),
        "subset_tools": len(subset),
        "subset_first_query_ms": round(view_first * 1000, 1),
        "subset_per_query_ms": round(view_query * 1000, 3),
        "index_builds": selector.index_builds,
        "embeddings": selector.index(specs).uses_embeddings,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--skip-peers", action="store_true", help="leave the reference servers out")
    parser.add_argument("--only", choices=("recall", "tokens", "cost"), help="one part only")
    args = parser.parse_args()
    result: dict[str, Any] = {}
    if args.only in (None, "recall"):
        for label, categories in (("bfcl", CATEGORIES), ("bfcl_live", LIVE_CATEGORIES)):
            pool, questions = bfcl_pool(categories)
            result[label] = {
                "functions": len(pool),
                "questions": len(questions),
                "recall_plain_bm25": recall_plain_bm25(pool, questions),
                "recall_bm25": recall(OfflineToolSelector(embeddings=False), pool, questions),
                "recall_fused": recall(OfflineToolSelector(), pool, questions),
                "r5_fused_by_category": recall_by_category(OfflineToolSelector(), pool, categories),
            }
    if args.only in (None, "tokens"):
        result["tokens"] = token_rows(args.skip_peers)
    if args.only in (None, "cost"):
        result["cost"] = cost()
    if args.json:
        print(json.dumps(result))
        return
    for label, title in (("bfcl", "non-live"), ("bfcl_live", "live")):
        if label not in result:
            continue
        part = result[label]
        print(f"BFCL {title}: {part['functions']} functions, {part['questions']} questions")
        print("ranking        " + "  ".join(f"R@{k:<4}" for k in KS))
        for ranking in ("plain_bm25", "bm25", "fused"):
            row = part[f"recall_{ranking}"]
            print(f"{ranking:14s} " + "  ".join(f"{row[k]:.3f} " for k in KS))
        print("fused R@5 by category:", part["r5_fused_by_category"])
    for row in result.get("tokens", []):
        print(row)
    if "cost" in result:
        print(result["cost"])


if __name__ == "__main__":
    main()
