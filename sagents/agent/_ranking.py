"""The offline ranking behind ``suggest_tools`` and ``select_workflow``
(docs/tool-suggestion.md).

Two rankings of the same documents, fused by adding their scores after standardising each to
z-scores (CombSUM over z-normalised scores, Montague and Aslam, CIKM 2001), with equal weights:

- lexical: BM25 (the ``bm25s`` library, Lucene's variant and defaults ``k1=1.5``, ``b=0.75``)
  over words split from names (``_``, ``.``, ``-``, ``/``, camelCase, digits), descriptions,
  parameter names, parameter descriptions and string enum values; English stop words removed,
  Snowball-stemmed when ``PyStemmer`` is installed. A tool's own name words count twice, since
  a name is its shortest description.
- semantic: WordLlama static embeddings of the name words and the description (the
  ``wordllama`` wheel ships its 256-dimension weights; they are loaded from the package folder
  with downloads disabled, once per process).
  Without ``wordllama`` the lexical ranking is used alone and a log line says so, once.

A query of several requests ("... Also find a flight") is ranked whole and per request: each
tool's score is its whole-query score plus its best score over the requests
(:func:`request_parts`), so a request whose words are outnumbered still gets its tool near the
top. A tool the query names verbatim (``weather__get_forecast``, or ``get_forecast`` for an
MCP tool) ranks first (:func:`named_tools`).

Everything imported here that is not the standard library is imported lazily, so that
``import sagents.agent`` stays cheap. Indexes are built once per document set and cached by the
caller (:class:`IndexCache`).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from sagents.core._spec import ToolSpec

__all__ = [
    "MAX_QUERY_CHARS",
    "Document",
    "IndexCache",
    "IndexView",
    "Ranking",
    "RankingIndex",
    "bounded_query",
    "cosines",
    "embedding_model",
    "named_tools",
    "request_parts",
    "spec_content_key",
    "split_words",
    "standardised",
    "terms",
    "tool_document",
]

logger = logging.getLogger("sagents.agent._suggest")

NAME_WEIGHT = 2
"""How many times a tool's own name words count in its lexical document."""

MAX_SCHEMA_WORDS_DEPTH = 4
"""How deep nested object properties of an input schema contribute words."""

CACHE_ENTRIES = 16
"""How many indexes (distinct tool sets) one :class:`IndexCache` keeps."""

MAX_QUERY_CHARS = 8000
"""Characters of a query that are ranked: longer ones (a pasted log, a 1 MB search) keep
their first and last half of this, where a request's own words usually are; ranking the whole
of a 1 MB query took seconds of a worker thread."""

MAX_EMBEDDED_CHARS = 4000
"""Characters of one text (a query, a tool's name and description) that are embedded: a
static embedding is a mean of token vectors, which a longer text hardly moves, while its cost
grows with the length (a 1 MB query took seconds). The lexical ranking reads the whole text."""

_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself nor now of once only or other our ours ourselves
own same she should so some such than that the their theirs them themselves then there
these they this those through to too until very was we were what when where which
while who whom why will with would you your yours yourself yourselves
please want need like using use used given based specified specific certain
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# ^ English function words (the usual IR list) plus request filler ("please", "want", "need",
# "using", "given", "specified") that says nothing about which tool fits. Kept as words: the
# particles that make an action ("shut down", "scale up", "turn off", "sign out", "take over")
# and negation ("no", "not"), which the usual list drops.

_CHUNK = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def split_words(text: str) -> list[str]:
    """Lower-case words of ``text``: split on non-alphanumerics, camelCase and digit runs.

    ``"fleet__getDeviceStatus"`` gives ``["fleet", "get", "device", "status"]`` and
    ``"HTTPServer2"`` gives ``["http", "server", "2"]``.
    """
    words: list[str] = []
    for chunk in _CHUNK.findall(text):
        words.extend(part.lower() for part in _CAMEL.findall(chunk))
    return words


MAX_REQUEST_PARTS = 12
"""At most this many requests of one query are ranked each on their own: a text of more
sentences (a pasted log or document) is ranked whole, so a query's cost stays bounded."""

MIN_PART_TERMS = 3
"""A part of a query with fewer terms (a greeting, "could you help me?") is not a request."""

_SENTENCE_END = re.compile(r"(?<=[.?!;])\s+|\n+")
_SEQUENCE_WORD = re.compile(
    r"\b(?:also|then|after that|afterwards|next|finally|lastly|additionally|moreover|"
    r"besides|as well as|second(?:ly)?|third(?:ly)?|fourth(?:ly)?)\b[,:]?",
    re.IGNORECASE,
)
_IDENTIFIER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*[A-Za-z0-9_]")
_IDENTIFIER_LIKE = re.compile(r"[_.\-]|[a-z][A-Z]")


def request_parts(query: str) -> list[str]:
    """The separate requests of a query of several, or ``[]`` for a single request.

    The query is cut at sentence ends and before words that start another request ("also",
    "then", "after that", "next", "finally", "second"...); parts of fewer than
    :data:`MIN_PART_TERMS` terms are dropped. Fewer than two parts left, or more than
    :data:`MAX_REQUEST_PARTS`, give ``[]``: the query is ranked whole.
    """
    parts: list[str] = []
    for sentence in _SENTENCE_END.split(query):
        for part in _SEQUENCE_WORD.split(sentence):
            if len(terms(part)) >= MIN_PART_TERMS:
                parts.append(part.strip())
                if len(parts) > MAX_REQUEST_PARTS:
                    return []
    return parts if len(parts) > 1 else []


def named_tools(query: str, names: Mapping[str, Sequence[int]]) -> set[int]:
    """The rows of the tools ``query`` names verbatim: a whole identifier of the query equal to
    a key of ``names`` (see :func:`name_keys`)."""
    found: set[int] = set()
    for word in _IDENTIFIER.findall(query):
        found.update(names.get(word, ()))
    return found


def name_keys(keys: Sequence[str]) -> dict[str, list[int]]:
    """The names a query can call a tool by, to its rows: its full name and, for an MCP tool
    ``<server>__<name>``, its own name; only names that read as identifiers (with ``_``,
    ``.``, ``-`` or camelCase), since a plain word ("search") in a request is not a name."""
    found: dict[str, list[int]] = {}
    for row, key in enumerate(keys):
        own = key.rpartition("__")[2]
        for name in dict.fromkeys((key, own)):
            if _IDENTIFIER_LIKE.search(name) and _IDENTIFIER.fullmatch(name):
                found.setdefault(name, []).append(row)
    return found


@functools.cache
def _stemmer() -> Callable[[list[str]], list[str]] | None:
    try:
        import Stemmer
    except ImportError:
        logger.info("tool suggestion: PyStemmer is not installed; words are not stemmed")
        return None
    stem: Callable[[list[str]], list[str]] = Stemmer.Stemmer("english").stemWords
    return stem


def terms(text: str) -> list[str]:
    """The BM25 terms of ``text``: :func:`split_words` without stop words, stemmed."""
    words = [w for w in split_words(text) if w not in _STOPWORDS]
    stem = _stemmer()
    return stem(words) if stem is not None and words else words


@dataclass(frozen=True, kw_only=True)
class Document:
    """One rankable thing: its key, its lexical text (with weights applied) and its
    semantic text."""

    key: str
    lexical: str
    semantic: str


def _schema_words(schema: Any, depth: int = 0) -> Iterable[str]:
    if not isinstance(schema, Mapping) or depth > MAX_SCHEMA_WORDS_DEPTH:
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, prop in properties.items():
            yield str(name)
            if isinstance(prop, Mapping):
                description = prop.get("description")
                if isinstance(description, str):
                    yield description
                enum = prop.get("enum")
                if isinstance(enum, list):
                    yield " ".join(v for v in enum if isinstance(v, str))
                yield from _schema_words(prop, depth + 1)
                yield from _schema_words(prop.get("items"), depth + 1)


def tool_document(spec: ToolSpec) -> Document:
    """The document of a tool: name words (twice), server, description, parameters."""
    server, _, own = spec.name.rpartition("__")
    name_text = " ".join([own] * NAME_WEIGHT)
    parameters = " ".join(_schema_words(spec.input_schema))
    lexical = " ".join(p for p in (name_text, server, spec.description, parameters) if p)
    # the embedded text is the name and the description only: parameter words (ids, limits,
    # formats) pull every tool's vector towards the same generic ones
    semantic = ". ".join(p for p in (" ".join(split_words(own)), spec.description.strip()) if p)
    return Document(key=spec.name, lexical=lexical, semantic=semantic)


# -- embeddings --------------------------------------------------------------------------------


class _Embedder:
    """The loaded WordLlama model (thread-safe for inference: it is numpy over fixed arrays)."""

    def __init__(self, model: Any) -> None:
        self._model = model

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        vectors = np.asarray(
            self._model.embed([_embeddable(t) for t in texts], norm=False), dtype=np.float32
        )
        vectors = np.nan_to_num(vectors, nan=0.0, posinf=0.0, neginf=0.0)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0  # a text without known tokens stays a zero vector, never NaN
        unit: npt.NDArray[np.float32] = vectors / norms
        return unit


def bounded_query(query: str) -> str:
    """``query`` cut to :data:`MAX_QUERY_CHARS`: its head and its tail when it is longer.

    Raises:
        TypeError: ``query`` is not a string.
    """
    if not isinstance(query, str):
        raise TypeError(f"the query must be a string (the request's text), not {query!r}")
    if len(query) <= MAX_QUERY_CHARS:
        return query
    half = MAX_QUERY_CHARS // 2
    return f"{query[:half]} {query[-half:]}"


def _embeddable(text: str) -> str:
    """``text`` as the tokenizer takes it: at most :data:`MAX_EMBEDDED_CHARS` characters (its
    head and tail), and valid Unicode (a lone surrogate, which JSON's ``\\ud800`` escapes can
    carry, makes the tokenizer raise; it becomes ``?``)."""
    if len(text) > MAX_EMBEDDED_CHARS:
        half = MAX_EMBEDDED_CHARS // 2
        text = f"{text[:half]} {text[-half:]}"
    return text.encode("utf-8", "replace").decode("utf-8")


@functools.cache
def embedding_model() -> _Embedder | None:
    """WordLlama's bundled model, loaded once per process; None (logged once) when unavailable.

    The loader is pointed at the package folder (``cache_dir``) with downloads disabled: the
    wheel carries ``weights/`` and ``tokenizers/`` there, and nothing is fetched.
    """
    try:
        from pathlib import Path

        import wordllama
        from wordllama import WordLlama
    except ImportError:
        logger.warning(
            "tool suggestion: wordllama is not installed; ranking with BM25 alone "
            "(pip install wordllama for the embedding ranking)"
        )
        return None
    folder = Path(wordllama.__file__).parent
    try:
        model = WordLlama.load(cache_dir=folder, disable_download=True)
    except (OSError, ValueError) as error:
        logger.warning(
            "tool suggestion: the wordllama weights in %s cannot be loaded (%s); ranking with "
            "BM25 alone",
            folder,
            error,
        )
        return None
    return _Embedder(model)


# -- the index ---------------------------------------------------------------------------------


class RankingIndex:
    """BM25 and (optionally) embeddings over a fixed list of documents.

    Args:
        documents: The documents, in the order ties are broken in.
        embeddings: Use the embedding ranking too, when the model is available.
    """

    def __init__(self, documents: Sequence[Document], *, embeddings: bool = True) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it sets DEBUG on import
        self.keys = [d.key for d in documents]
        self._names = name_keys(self.keys)
        corpus = [terms(d.lexical) or [""] for d in documents]
        self._bm25 = bm25s.BM25()
        self._vocabulary: frozenset[str] = frozenset()
        if documents:
            self._bm25.index(corpus, show_progress=False)
            self._vocabulary = frozenset(self._bm25.vocab_dict)
        self._embedder = embedding_model() if embeddings and documents else None
        self._vectors = (
            self._embedder.embed([d.semantic for d in documents])
            if self._embedder is not None
            else None
        )

    @property
    def uses_embeddings(self) -> bool:
        """True when the embedding ranking takes part."""
        return self._vectors is not None

    def scores(self, query: str) -> list[float]:
        """A fused score per document (higher is better); all zero when nothing matches."""
        return [float(score) for score in self.fused(query)]

    def rank(self, query: str, k: int) -> list[str]:
        """The ``k`` best keys, best first; ties (and no signal at all) keep document order."""
        return _top(self.keys, self.fused(query), k)

    def fused(self, query: str, rows: Sequence[int] | None = None) -> npt.NDArray[np.float64]:
        """The fused scores of the documents at ``rows`` (all when None), each ranking
        standardised over those documents only: the whole query's, plus the best over its
        requests when it has several (:func:`request_parts`); a tool the query names verbatim
        scores above all others (:func:`named_tools`)."""
        import numpy as np

        count = len(self.keys) if rows is None else len(rows)
        if count == 0:
            return np.zeros(0, dtype=np.float64)
        query = bounded_query(query)
        texts = [query, *request_parts(query)]
        vectors: list[npt.NDArray[np.float32] | None] = [None] * len(texts)
        if self._embedder is not None and self._vectors is not None and query.strip():
            vectors = list(self._embedder.embed(texts))  # one call for the query and its parts
        scores = [
            self._fused_one(text, vector, rows) for text, vector in zip(texts, vectors, strict=True)
        ]
        fused = scores[0] if len(scores) == 1 else scores[0] + np.max(scores[1:], axis=0)
        named = named_tools(query, self._names)
        if named:
            position = {row: at for at, row in enumerate(rows)} if rows is not None else None
            top = float(fused.max()) + 1.0
            for row in named:
                at = row if position is None else position.get(row)
                if at is not None:
                    fused[at] = top
        return fused

    def _fused_one(
        self,
        text: str,
        vector: npt.NDArray[np.float32] | None,
        rows: Sequence[int] | None,
    ) -> npt.NDArray[np.float64]:
        import numpy as np

        count = len(self.keys) if rows is None else len(rows)
        fused = np.zeros(count, dtype=np.float64)
        query_terms = [t for t in terms(text) if t in self._vocabulary]
        if query_terms:
            lexical = self._bm25.get_scores(query_terms)
            fused += standardised(lexical if rows is None else lexical[list(rows)])
        if vector is not None and self._vectors is not None:
            vectors = self._vectors if rows is None else self._vectors[list(rows)]
            fused += standardised(cosines(vectors, vector))
        return fused


class IndexView:
    """Some documents of a :class:`RankingIndex`, ranked among themselves: a session whose
    allowed tools are a subset of an indexed set needs no index of its own. BM25's document
    frequencies stay those of the whole set; each ranking is standardised over the subset.

    Args:
        index: The index of the larger set.
        rows: The positions of the subset's documents in ``index``, in the subset's order.
    """

    def __init__(self, index: RankingIndex, rows: Sequence[int]) -> None:
        self._index = index
        self._rows = list(rows)
        self.keys = [index.keys[r] for r in self._rows]

    @property
    def uses_embeddings(self) -> bool:
        """True when the embedding ranking takes part."""
        return self._index.uses_embeddings

    def scores(self, query: str) -> list[float]:
        """A fused score per document of the subset (see :meth:`RankingIndex.scores`)."""
        return [float(score) for score in self._index.fused(query, self._rows)]

    def rank(self, query: str, k: int) -> list[str]:
        """The ``k`` best keys of the subset, best first; ties keep the subset's order."""
        return _top(self.keys, self._index.fused(query, self._rows), k)


Ranking = RankingIndex | IndexView
"""An index or a view of one: what :class:`IndexCache` returns."""


def _top(keys: Sequence[str], scores: npt.NDArray[np.float64], k: int) -> list[str]:
    import numpy as np

    order = np.argsort(-scores, kind="stable")[:k]
    return [keys[i] for i in order.tolist()]


def cosines(vectors: npt.NDArray[Any], query: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """``vectors @ query`` for unit vectors (their cosine similarities), without BLAS: a
    threaded OpenBLAS matrix-vector product costs milliseconds on a small, shared machine,
    numpy's own ``einsum`` loop a fraction of one for 2,000 x 256."""
    import numpy as np

    products: npt.NDArray[np.float64] = np.einsum("ij,j->i", vectors, query).astype(np.float64)
    return products


def standardised(scores: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """``scores`` as z-scores (mean 0, standard deviation 1); all zero when they are equal."""
    import numpy as np

    values = np.asarray(scores, dtype=np.float64)
    spread = float(values.std())
    if spread == 0.0 or not np.isfinite(spread):
        return np.zeros_like(values)
    standardised: npt.NDArray[np.float64] = (values - values.mean()) / spread
    return standardised


# -- the cache ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Built:
    """A built index with the specs it was built from (kept alive, so their ids stay theirs)."""

    specs: Sequence[object]
    index: RankingIndex
    rows: Mapping[int, int]  # id(spec) -> its position in the index


class IndexCache:
    """Indexes by document set, least recently used first out (thread-safe).

    The fast key is the identity of the specs (the same ``ToolSpec`` objects, kept alive by
    the entry so their ids cannot be reused); on a miss, a content key (names, descriptions and
    schemas) finds an index built from equal specs, and a set whose specs are all in a built
    index (a session's allowed subset of a registry) gets a view of that index
    (:class:`IndexView`) instead of an index of its own.
    """

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self._entries = entries
        self._by_identity: OrderedDict[tuple[int, ...], tuple[Sequence[object], Ranking]]
        self._by_identity = OrderedDict()
        self._by_content: OrderedDict[Hashable, Ranking] = OrderedDict()
        self._built: OrderedDict[Hashable, _Built] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0

    def get(
        self,
        items: Sequence[Any],
        prepare: Callable[[], tuple[Sequence[object], Hashable, Callable[[], RankingIndex]]],
    ) -> Ranking:
        """The index of ``items``. On an identity miss, ``prepare()`` gives the checked specs
        (one per name), their content key, and the function that builds their index."""
        identity = tuple(map(id, items))
        with self._lock:
            hit = self._by_identity.get(identity)
            if hit is not None:
                self._by_identity.move_to_end(identity)
                return hit[1]
            specs, key, build = prepare()
            index = self._by_content.get(key)
            if index is None:
                index = self._view(specs)
            if index is None:
                built = build()
                self.builds += 1
                index = built
                rows = {id(spec): row for row, spec in enumerate(specs)}
                self._built[key] = _Built(specs=list(specs), index=built, rows=rows)
                _trim(self._built, self._entries)
            self._by_content[key] = index
            self._by_content.move_to_end(key)
            _trim(self._by_content, self._entries)
            self._by_identity[identity] = (list(items), index)
            _trim(self._by_identity, self._entries)
            return index

    def _view(self, specs: Sequence[object]) -> IndexView | None:
        for built in reversed(self._built.values()):  # the most recent first
            rows = [built.rows.get(id(spec)) for spec in specs]
            if all(row is not None for row in rows):
                return IndexView(built.index, [row for row in rows if row is not None])
        return None


def _trim(entries: OrderedDict[Any, Any], size: int) -> None:
    while len(entries) > size:
        entries.popitem(last=False)


def spec_content_key(specs: Sequence[ToolSpec], embeddings: bool) -> Hashable:
    """A key equal for equal tool sets (name, description and input schema of each)."""
    return (
        embeddings,
        tuple(
            (s.name, s.description, json.dumps(s.input_schema, sort_keys=True, default=str))
            for s in specs
        ),
    )
