"""Placeholder CLI entry point; replaced by the full CLI."""

from __future__ import annotations


def main() -> None:
    print("walrus-mem")
