"""The import structure (docs/layout.md, "Layers that only look down"): a module imports only
from lower layers or from its own package, and no two modules import each other at load time."""

import ast
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT
from transformer_mt.tasks.options import TASKS as TASK_SCHEMAS

PACKAGE = ROOT / "src" / "transformer_mt"
# what each part of transformer_mt may build on: lower numbers only (its own package aside)
LAYERS = {
    "errors": 0,
    "validate": 1, "atomic": 1, "config": 1, "markdown": 1, "renamed": 1, "choices": 1,  # helpers every layer may use
    "config_keys": 1,  # keys that do not exist: the nearest real one
    "stops": 1,  # a process stopped by a signal: one line, exit statuses 130 / 143, the signals raised
    "schema": 2,  # the config's keys (Hydra structured configs), registered before Hydra composes
    "composition": 2,  # Hydra's composition errors as one line (run.py)
    "packing": 1,  # the layout of packed sequences: data builds it, the model runs on it
    "user_cache": 1,  # the user's cache folder: what belongs to the machine or a checkpoint, not to a run
    "progress": 2, "plots": 2, "run_folder": 2, "multirun": 2,
    "model": 3, "data": 3, "evaluation": 3,  # data knows nothing of the model, nor the model of data
    "decoding": 4, "interop": 4,  # decoding uses the model's public API only
    "checkpoints": 4,  # reading and averaging checkpoints as plain data
    "inference": 5,  # loading for decoding, the Translator, lines translated and scored: no Lightning, no Hydra
    "training": 6,  # joins model, data, evaluation, inference
    "serving": 6,  # the translation server's parts (FastAPI): inference behind HTTP, no Lightning, no Hydra
    "tasks": 7,  # a Hydra config into one job
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part(module: str) -> str:
    """transformer_mt.data.corpus -> data; transformer_mt.atomic -> atomic."""
    return module.split(".")[1]


def type_only(node: ast.stmt) -> list[ast.stmt]:
    """The statements of a module-level `if TYPE_CHECKING:` block (imports for annotations only)."""
    if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
        return node.body
    return []


def imports(path: Path, load_time_only: bool) -> set[str]:
    """The transformer_mt modules `path` imports (at load time only: not inside functions; imports
    for type checking count as load-time ones, so that no cycle hides behind TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [*tree.body, *(s for n in tree.body for s in type_only(n))] if load_time_only else list(ast.walk(tree))
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


TASKS = sorted(TASK_SCHEMAS)


def test_the_tasks_package_shows_its_entry_points():
    """tasks/ holds one module per task (its class in tasks/options names its run function there) and its
    helpers in named subpackages."""
    top = PACKAGE / "tasks"
    assert sorted(p.stem for p in top.glob("*.py") if p.stem != "__init__") == TASKS
    folders = sorted(p.name for p in top.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == ["lines", "options", "pipelines", "runs"]


def test_no_two_modules_share_a_confusable_name():
    """Module and package names, without a plural `s` or an `ing`, are unique across the package
    (the task modules, named after their `task=` option, aside)."""
    seen: dict[str, str] = {}
    clashes = []
    for path in sorted(PACKAGE.rglob("*")):
        if path.name == "__init__.py" or "__pycache__" in path.parts or not (path.is_dir() or path.suffix == ".py"):
            continue
        if path.parent == PACKAGE / "tasks" and path.stem in TASKS:
            continue
        stem = re.sub(r"(ing|s)$", "", path.stem)
        if stem in seen:
            clashes.append(f"{seen[stem]} ~ {path.relative_to(PACKAGE)}")
        seen.setdefault(stem, str(path.relative_to(PACKAGE)))
    assert not clashes, clashes


def test_inference_and_serving_load_neither_lightning_nor_hydra():
    """transformer_mt.inference decodes without the training stack, and the server's parts serve
    without it: importing every module of them (and so everything they import) loads no Lightning,
    Hydra or datasets."""
    modules = sorted(m for m in MODULES if m.startswith(("transformer_mt.inference", "transformer_mt.serving")))
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print(sorted({m.split('.')[0] for m in sys.modules} & {'lightning', 'hydra', 'datasets'}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(modules) >= 13 and result.stdout.strip() == "[]", result.stdout


def test_no_two_modules_define_the_same_name():
    """A class or function name means one thing across the package: each is defined at the top
    level of one module only (the tasks' `run`, each task's entry point, aside)."""
    places: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not (node.name == "run" and ".tasks" in module):
                places.setdefault(node.name, []).append(module)
    assert not {name: where for name, where in places.items() if len(where) > 1}
