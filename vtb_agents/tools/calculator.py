"""The ``calculator`` tool: arithmetic with a safe evaluator (simpleeval), where ``^`` is power.

The reference harness advertises ``^`` but cannot evaluate it (VTB_FACTS.md flaw 5).
"""

from __future__ import annotations

import ast
import json
import math

from langchain_core.tools import ToolException, tool
from pydantic import BaseModel, Field
from simpleeval import DEFAULT_OPERATORS, SimpleEval

_FUNCTIONS = {
    "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tan": math.tan,
    "log": math.log, "ln": math.log, "log10": math.log10, "exp": math.exp,
    "abs": abs, "round": round, "min": min, "max": max,
}
_NAMES = {"pi": math.pi, "e": math.e}
_ALLOWED_OPERATORS = {ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod, ast.USub, ast.UAdd}


def evaluate(expression: str) -> float | int:
    """Evaluate an arithmetic expression; raise ValueError with a reason when it is not one.

    >>> evaluate("2^10 + sqrt(16) * 3 % 5")
    1026.0
    """
    # ``^`` becomes ``**`` before parsing, so it binds tighter than * and + as in mathematics.
    text = expression.strip().replace("×", "*").replace("÷", "/").replace("−", "-").replace("^", "**")
    if not text:
        raise ValueError("empty expression")
    operators = {op: fn for op, fn in DEFAULT_OPERATORS.items() if op in _ALLOWED_OPERATORS}
    evaluator = SimpleEval(operators=operators, functions=_FUNCTIONS, names=_NAMES)
    try:
        result = evaluator.eval(text)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except SyntaxError as exc:
        raise ValueError(f"not a valid expression: {exc.msg}") from None
    except Exception as exc:  # simpleeval raises several unrelated classes for refused input
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
    if isinstance(result, bool) or not isinstance(result, (int, float)):
        raise ValueError(f"expression did not give a number (got {type(result).__name__})")
    if isinstance(result, float) and not math.isfinite(result):
        raise ValueError(f"result is not finite ({result})")
    return result


class CalculatorArgs(BaseModel):
    expression: str = Field(description="Arithmetic expression, e.g. '(3.5 + 2) * 4 ^ 2 / sqrt(9)'.")


@tool("calculator", args_schema=CalculatorArgs)
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly and return the number.

    Supports + - * / % and ^ (power), parentheses, sqrt, sin, cos, tan (radians), log (natural),
    log10, exp, abs, round, min, max and the constants pi and e. Use it instead of mental
    arithmetic for any calculation with more than one step.
    """
    try:
        result = evaluate(expression)
    except ValueError as exc:
        raise ToolException(json.dumps({"expression": expression, "error": str(exc)})) from None
    return json.dumps({"expression": expression, "result": result})


calculator.handle_tool_error = True  # a refused expression is an error ToolMessage, not a crash
