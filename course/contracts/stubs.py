"""Which of a student's functions still hold the release's stub (`raise NotImplementedError()`).

Judged by the code, not by the `# PUT YOUR CODE HERE` comment: a student may keep the comment
above their own code, and may also leave the raise below it.
"""

from __future__ import annotations

import ast


def _raises_not_implemented(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
                return True
    return False


def stubbed_functions(source: str) -> list[str]:
    """Names of the top-level functions in `source` that still raise NotImplementedError."""
    tree = ast.parse(source)
    return [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and _raises_not_implemented(node)
    ]
