"""The layering the tree promises, checked on the source: the controller does not know about vision, and one
function steps an env inside a rollout."""

from __future__ import annotations

import ast
from pathlib import Path

import grasp_s2r

PACKAGE = Path(grasp_s2r.__file__).parent


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every module a file imports (module level and inside functions), with the line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, node.lineno))
    return found


def test_the_controller_package_does_not_import_vision() -> None:
    offenders = [f"{path.relative_to(PACKAGE)}:{line} imports {module}"
                 for path in sorted((PACKAGE / "control").glob("*.py"))
                 for module, line in _imports(path) if module.startswith("grasp_s2r.vision")]
    assert not offenders, "control/ must reach vision only through grasp_s2r.runtime:\n" + "\n".join(offenders)


def test_one_function_steps_an_env_in_a_rollout() -> None:
    """``GraspEnv.step`` is called by the runtime's worker alone (the Gymnasium wrapper, sim/gym_env.py, is the
    env's own API, not a rollout)."""
    callers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() == "sim/gym_env.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "env":
                callers.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert [c.split(":")[0] for c in callers] == ["runtime/worker.py"], callers


def test_no_function_imports_the_cli_module() -> None:
    """Command modules import the leaf ``grasp_s2r.options`` at top level; nothing dodges a cycle with ``cli.py``
    by importing it inside a function."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for func in ast.walk(ast.parse(path.read_text())):
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                offenders += [f"{path.relative_to(PACKAGE)}:{node.lineno}" for node in ast.walk(func)
                              if isinstance(node, ast.ImportFrom) and node.module == "grasp_s2r.cli"]
    assert not offenders, offenders


def _module_name(path: Path) -> str:
    parts = ("grasp_s2r", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """grasp_s2r's modules and the grasp_s2r modules each imports: module level, inside functions and under
    ``if TYPE_CHECKING`` alike (``from grasp_s2r.x import y`` counts as importing ``grasp_s2r.x.y`` when that is
    a module, else ``grasp_s2r.x``)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package.split(".")[:len(package.split(".")) - node.level + 1], *[base][:bool(base)]])
                targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names}
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (its modules, the first repeated at the end), or [] when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_find_cycle_reports_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_has_no_cycle() -> None:
    """No module reaches itself through imports (module level, in functions, or for type checking only): a layered
    package, where a module's dependencies can be read and tested without it."""
    graph = import_graph()
    assert len(graph) > 50 and "grasp_s2r.control.dagger" in graph["grasp_s2r.cli"] | set().union(*graph.values())
    cycle = find_cycle(graph)
    assert not cycle, "import circle: " + " -> ".join(cycle)


TEST_ONLY = "grasp_s2r.vision.testsets"
"""The held-out test suites and the painted renderer (``testsets/painted.py``): images that measure, never train."""
TRAINING_SIDE = ("grasp_s2r.vision.images", "grasp_s2r.vision.training")


def test_training_never_imports_the_test_only_renderers() -> None:
    """No module that makes training images or trains a network reaches ``vision/testsets`` (the painted renderer
    among them), directly or through any chain of imports: a test image can never become a training image."""
    graph = import_graph()
    assert f"{TEST_ONLY}.painted" in graph
    offenders = []
    for module in sorted(m for m in graph if m.startswith(TRAINING_SIDE)):
        seen, todo = {module}, [module]
        while todo:
            for nxt in sorted(graph[todo.pop()]):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        reached = sorted(m for m in seen if m.startswith(TEST_ONLY))
        if reached:
            offenders.append(f"{module} reaches {', '.join(reached)}")
    assert not offenders, "training code must not import the test sets:\n" + "\n".join(offenders)
