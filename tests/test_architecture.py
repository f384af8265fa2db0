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


def test_no_subpackage_shadows_an_api_name():
    """Importing a submodule sets it as an attribute of the package: a
    subpackage named like an API function (``swgpu_tools.align``) would turn
    ``sw.align`` into a module as soon as anything imported it."""
    import subprocess
    import sys

    from architecture import modules

    import swgpu_tools

    top = {m.split(".")[1] for m in modules() if m.count(".") >= 1}
    assert not top & set(swgpu_tools.__all__)
    code = (
        "import swgpu_tools as sw, swgpu_tools.api, swgpu_tools.alignment; "
        "assert callable(sw.align) and callable(sw.search), sw.align"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
