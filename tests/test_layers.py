"""The package's import graph: every import runs down the layers, and no modules import in a circle.

The layer order is declared here once (docs/architecture.md shows it). Every `import` counts,
including those inside functions and under `TYPE_CHECKING`: an import deferred to run time is
still a dependency a reader has to follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import arsched

ROOT = Path(arsched.__file__).parent

LAYERS: tuple[tuple[str, ...], ...] = (
    # base: no arsched imports but each other
    ("units", "errors", "fileio", "defaults", "csr", "limits", "lifeline"),
    ("topology",),
    ("collective", "bounds"),
    ("collective_bounds",),
    ("sim", "runtime"),
    ("algorithms", "cluster"),
    ("rl",),
    ("viz",),
    ("experiments",),
    ("cli",),
)
"""Bottom to top. A module may import its own unit (top-level package or module) and any unit
of a lower layer; units of one layer do not import each other (the base modules excepted,
which may use each other as long as they form no circle). `arsched/__init__.py`, the public
API, sits above all of them."""

RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under the package folder `root`."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = p.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def import_graph(root: Path = ROOT) -> nx.DiGraph:
    """Module -> module for every arsched import under `root` (`from a import b` points at a.b
    when b is a module)."""
    modules = _modules(root)
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            g.add_edges_from((name, t) for t in targets if t.split(".")[0] == "arsched" and t != name)
    return g


def unit(module: str) -> str:
    """The layer unit of a module: its first name below `arsched`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def upward_imports(g: nx.DiGraph) -> list[str]:
    """Edges that do not run down the layers (the public API's own imports excepted)."""
    bad = []
    for src, dst in g.edges:
        if src == "arsched" or unit(src) == unit(dst):
            continue
        if dst == "arsched":
            bad.append(f"{src} -> arsched (the public API; import the module itself)")
            continue
        a, b = RANK[unit(src)], RANK[unit(dst)]
        if b > a or (b == a and a != 0):
            bad.append(f"{src} -> {dst}")
    return sorted(bad)


def circles(g: nx.DiGraph) -> list[list[str]]:
    return [c for c in nx.simple_cycles(g) if len(c) > 1]


def test_every_module_belongs_to_a_declared_layer():
    stray = sorted(m for m in _modules(ROOT) if m != "arsched" and unit(m) not in RANK)
    assert not stray, f"modules outside every declared layer (add them to LAYERS): {stray}"


def test_imports_run_down_the_layers():
    bad = upward_imports(import_graph())
    assert not bad, "imports that do not run down the layers:\n" + "\n".join(bad)


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, "modules importing in a circle:\n" + "\n".join(" -> ".join(c) for c in found[:10])


def test_the_checks_catch_upward_imports_and_circles(tmp_path):
    """A package with an upward import under TYPE_CHECKING, a sibling import inside a function,
    and a circle through a relative import: each is reported."""
    files = {
        "__init__.py": "",
        "units.py": "",
        "sim/__init__.py": "",
        "sim/flow.py": "import typing\nif typing.TYPE_CHECKING:\n    from arsched.cli import main\n",
        "runtime/__init__.py": "def f():\n    import arsched.sim.flow\n",
        "cli/__init__.py": "from . import a\n",
        "cli/a.py": "from arsched.cli import b\nimport arsched.units\n",
        "cli/b.py": "from .a import x\n",
    }
    for name, text in files.items():
        path = tmp_path / "arsched" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    g = import_graph(tmp_path / "arsched")
    assert upward_imports(g) == ["arsched.runtime -> arsched.sim.flow", "arsched.sim.flow -> arsched.cli"]
    assert sorted(map(sorted, circles(g))) == [["arsched.cli.a", "arsched.cli.b"]]
