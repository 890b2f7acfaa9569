"""The catalog's postings reads (:mod:`walrus_mem._catalog.postings`), by query word.

A mixin of :class:`~walrus_mem._catalog.catalog.Catalog`, which writes the postings with
the FTS5 rows. A query word is one quoted word as
:func:`~walrus_mem._recall.ranking.fts_query` writes it; the postings answer it when
FTS5's tokenizer makes exactly one term of it (a word it splits, such as
``"e_mail"``, is a phrase: FTS5 answers those).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from . import postings
from .guard import CatalogPart, _guarded
from .postings import Postings

__all__ = ["PostingsQueries"]

_CACHE_MAX: Final = 4096  # cached term counts per namespace


class PostingsQueries(CatalogPart):
    """Row counts, statistics and postings of a namespace's terms."""

    # Set by Catalog.__init__: namespace -> term -> rows, namespace -> (rows, tokens),
    # valid for one (data_version, total_changes) pair (_fresh_caches).
    _lex_counts: dict[str, dict[str, int]]
    _lex_stats: dict[str, tuple[int, int] | None]
    _pending_postings: dict[str, list[tuple[int, str]]]

    def _term(self, word: str) -> str | None:
        return self._terms([word])[0]

    def _terms(self, words: Sequence[str]) -> list[str | None]:
        """Each query word's one term (None: FTS5 makes a phrase or nothing of it)."""
        found = postings.tokenizer().terms([word.strip('"') for word in words])
        return [terms[0] if len(terms) == 1 else None for terms in found]

    @_guarded
    def lexicon_stats(self, namespace: str) -> tuple[int, int]:
        """(rows, tokens) of the namespace: FTS5's nRow and nToken."""
        with self._lock:
            self._flush_postings()  # rows added earlier in this thread's write
            self._fresh_caches()
            if namespace not in self._lex_stats:
                self._lex_stats[namespace] = postings.stats(self.conn, namespace)
            found = self._lex_stats[namespace]
        return found if found is not None else (0, 0)

    @_guarded
    def lexicon_counts(self, namespace: str, words: Sequence[str]) -> dict[str, int] | None:
        """How many rows hold each query word, or None when the postings cannot answer
        them all (a word FTS5 splits into a phrase, or a catalog without postings)."""
        terms: list[str] = []
        for term in self._terms(words):
            if term is None:
                return None
            terms.append(term)
        with self._lock:
            self._flush_postings()  # rows added earlier in this thread's write
            self._fresh_caches()
            if namespace not in self._lex_stats:
                self._lex_stats[namespace] = postings.stats(self.conn, namespace)
            if self._lex_stats[namespace] is None:
                return None
            cache = self._lex_counts.setdefault(namespace, {})
            missing = [term for term in terms if term not in cache]
            if missing:
                if len(cache) + len(missing) > _CACHE_MAX:
                    cache.clear()
                cache.update(postings.doc_counts(self.conn, namespace, missing))
            return {word: cache[term] for word, term in zip(words, terms, strict=True)}

    @_guarded
    def lexicon_postings(self, namespace: str, word: str) -> Postings:
        """Every posting of a query word the postings answer (:meth:`lexicon_counts`)."""
        term = self._term(word)
        assert term is not None
        with self._lock:
            self._flush_postings()
            return postings.read(self.conn, namespace, term)

    @_guarded
    def lexicon_postings_many(self, namespace: str,
                              words: Sequence[str]) -> dict[str, Postings]:
        """:meth:`lexicon_postings` of several words, read in one query."""
        terms = self._terms(words)
        assert None not in terms
        with self._lock:
            self._flush_postings()
            found = postings.read_many(self.conn, namespace, [t for t in terms if t])
        return {word: found[term] for word, term in zip(words, terms, strict=True) if term}

    @_guarded
    def lexicon_postings_at(self, namespace: str, word: str,
                            keys: npt.NDArray[np.int64]) -> Postings:
        """The postings of a query word in the blocks that can hold ``keys`` (ascending)."""
        term = self._term(word)
        assert term is not None
        with self._lock:
            self._flush_postings()
            return postings.read_at(self.conn, namespace, term, keys)

    @_guarded
    def rebuild_postings(self, namespace: str) -> None:
        """Rebuild the namespace's postings from its FTS5 table (bulk loads, upgrades)."""
        with self.write() as c:
            self._pending_postings.pop(namespace, None)  # the rebuild reads them from FTS5
            postings.rebuild(c, namespace)
