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
