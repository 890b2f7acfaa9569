"""The public surface: walrus_mem.__all__ and the error tree."""

from __future__ import annotations

import inspect

import walrus_mem
import walrus_mem.errors as errors


def test_all_is_sorted_and_unique():
    names = list(walrus_mem.__all__)
    assert names == sorted(names)
    assert len(names) == len(set(names))


def test_every_exported_name_exists():
    missing = [name for name in walrus_mem.__all__ if not hasattr(walrus_mem, name)]
    assert missing == []


def test_star_import_gives_exactly_all():
    namespace: dict[str, object] = {}
    exec("from walrus_mem import *", namespace)
    exported = {name for name in namespace if name != "__builtins__"}
    assert exported == set(walrus_mem.__all__)


def test_every_error_is_exported_and_rooted():
    classes = {
        name: obj
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == errors.__name__
    }
    assert set(errors.__all__) == set(classes)
    assert list(errors.__all__) == sorted(errors.__all__)
    for name, cls in classes.items():
        assert issubclass(cls, errors.WalrusMemError), name
        assert name in walrus_mem.__all__ and getattr(walrus_mem, name) is cls
        assert cls.__doc__, name


def test_error_tree_docstring_lists_every_error():
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        assert name in doc, name
