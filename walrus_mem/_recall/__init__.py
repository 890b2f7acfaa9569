"""Recall: from a query to ranked memories, locally, in milliseconds.

    query -> query_features (who / when; temporal) -> embedding (a Memory's embedder:
             batched, checked, query cache) over embeddings (MiniLM: minilm numpy,
             minilm_onnx warm path; native: load order of native libs)
          -> recall: index (USearch ANN per namespace; index_store: every namespace's
             index, opened lazily, caught up, rebuilt) + lexical (bm25 over the
             catalog's postings) -> ranking (fusion, cutoff) -> filters (metadata)
    relevance_gate: does a prompt want a memory at all (auto-recall)?
"""
