"""The house stays walkable: no product file over 350 lines, no function over 60 of code.

A function's code is its lines less its docstring, blank lines and comments (issue 35).
"""

from __future__ import annotations

import ast
from pathlib import Path

from cardrag.ingest.settings import PROJECT_ROOT

FOLDERS = ("app", "ingest", "retrievers", "evals")
MAX_FILE_LINES = 350
MAX_FUNCTION_CODE = 60


def sources() -> list[Path]:
    """Every Python file of the product and the evaluation."""
    return sorted(p for folder in FOLDERS for p in (PROJECT_ROOT / folder).rglob("*.py"))


def code_lines(source: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines of code: not its docstring, blank lines or comments."""
    first = node.body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    start = first.end_lineno + 1 if docstring and first.end_lineno else first.lineno
    body = source[start - 1 : node.end_lineno]
    return sum(1 for line in body if line.strip() and not line.strip().startswith("#"))


def test_no_file_is_over_350_lines() -> None:
    long = {
        str(p.relative_to(PROJECT_ROOT)): n
        for p in sources()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_function_is_over_60_lines_of_code() -> None:
    long = {}
    for path in sources():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            functions = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if functions and (n := code_lines(lines, node)) > MAX_FUNCTION_CODE:
                long[f"{path.relative_to(PROJECT_ROOT)}:{node.name}"] = n
    assert long == {}


def test_a_function_s_docstring_and_comments_are_not_code() -> None:
    source = '''def f():
    """Doc.

    More doc.
    """
    # a comment
    x = 1

    return x
'''.splitlines()
    [node] = ast.parse("\n".join(source)).body
    assert isinstance(node, ast.FunctionDef)
    assert code_lines(source, node) == 2
