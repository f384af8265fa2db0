"""The package's module map and import graph, from the source (no imports run).

    python tests/architecture.py          # module map with line counts, import graph, cycles

Every import of a ``swgpu_tools`` module counts, also those inside functions
(an import done lazily is still a dependency).  tests/test_architecture.py
checks the rules: no module over 800 lines, no import cycles.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "swgpu_tools"
MAX_LINES = 800


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(current: str, is_pkg: bool, level: int, module: str | None) -> str:
    base = current.split(".")
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(name, is_pkg, node.level, node.module) if node.level else node.module
            targets = [f"{mod}.{a.name}" for a in node.names] + [mod]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and t.startswith("swgpu_tools"):
                found.add(t)
    # a package's own submodules it re-exports are not cycles through the package
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    g = {}
    for name, path in mods.items():
        deps = imports(name, path, known)
        # importing a submodule imports its parent packages: those edges are implied
        g[name] = {d for d in deps if not name.startswith(d + ".")}
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def line_counts() -> dict[str, int]:
    return {name: len(path.read_text().splitlines()) for name, path in modules().items()}


def main() -> int:
    counts = line_counts()
    g = graph()
    print(f"{'module':<44}{'lines':>6}  imports")
    for name in sorted(counts):
        deps = ", ".join(sorted(d.replace("swgpu_tools.", "") for d in g[name]))
        print(f"{name:<44}{counts[name]:>6}  {deps}")
    print(
        f"\n{len(counts)} modules, {sum(counts.values()):,} lines; largest "
        f"{max(counts.values())} ({max(counts, key=counts.get)})"
    )
    found = cycles(g)
    print("import cycles: " + ("none" if not found else "; ".join(" -> ".join(c) for c in found)))
    return 1 if found or max(counts.values()) > MAX_LINES else 0


if __name__ == "__main__":
    sys.exit(main())
