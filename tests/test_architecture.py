"""The package's shape (ARCHITECTURE.md): no module over 800 lines, no import cycles."""
from __future__ import annotations

from architecture import MAX_LINES, cycles, graph, line_counts


def test_no_module_over_800_lines():
    big = {m: n for m, n in line_counts().items() if n > MAX_LINES}
    assert big == {}


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
