"""The import structure (../shared/DESIGN.md, "layers that only look down"): a module imports only
from lower layers or from its own package, and no two modules import each other at load time."""

import ast
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "src" / "transformer_mt"
# what each part of transformer_mt may build on: lower numbers only (its own package aside)
LAYERS = {
    "errors": 0,
    "validate": 1, "atomic": 1, "config": 1, "markdown": 1,  # helpers every layer may use
    "packing": 1,  # the layout of packed sequences: data builds it, the model runs on it
    "progress": 2, "plots": 2, "run_folder": 2, "multirun": 2,
    "model": 3, "data": 3, "evaluation": 3,  # data knows nothing of the model, nor the model of data
    "decoding": 4, "interop": 4,  # decoding uses the model's public API only
    "training": 5,  # joins model, data, evaluation
    "tasks": 6,  # a Hydra config into one job
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part(module: str) -> str:
    """transformer_mt.data.corpus -> data; transformer_mt.atomic -> atomic."""
    return module.split(".")[1]


def imports(path: Path, load_time_only: bool) -> set[str]:
    """The transformer_mt modules `path` imports (at load time only: not inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if load_time_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("transformer_mt."):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # `from pkg import module`
        elif isinstance(node, ast.ImportFrom) and node.module == "transformer_mt":
            found.update(f"transformer_mt.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("transformer_mt."))
    return found


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def test_every_part_has_a_layer():
    assert {part(m) for m in MODULES if m != "transformer_mt"} <= set(LAYERS)


def test_no_module_imports_from_a_higher_layer_or_a_sibling_of_its_layer():
    wrong = []
    for module, path in MODULES.items():
        if module == "transformer_mt":
            continue
        for target in imports(path, load_time_only=False):
            if target in MODULES and part(target) != part(module) and LAYERS[part(target)] >= LAYERS[part(module)]:
                wrong.append(f"{module} -> {target}")
    assert not wrong, wrong


def test_no_import_cycle_at_load_time():
    """(A module's own package is loaded before it: an edge to an ancestor package is no cycle.)"""
    graph = {m: {t for t in imports(p, load_time_only=True)
                 if t in MODULES and t != m and not m.startswith(t + ".")} for m, p in MODULES.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            assert state.get(target) != 1, " -> ".join([*path, module, target])
            if target not in state:
                visit(target, [*path, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
