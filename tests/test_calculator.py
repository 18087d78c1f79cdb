import json

import pytest

from vtb_agents.tools.calculator import calculator, evaluate


@pytest.mark.parametrize("expression, expected", [
    ("2^10", 1024), ("-2^2", -4), ("2^3^2", 512), ("2^10 + sqrt(16) * 3 % 5", 1026.0),
    ("(3.5 + 2) * 4", 22.0), ("10 % 3", 1), ("exp(0) + log(1)", 1.0), ("sin(pi/2)", 1.0),
    ("2 × 3 − 1", 5), ("1,5".replace(",", "."), 1.5),
])
def test_evaluates_arithmetic_with_caret_as_power(expression, expected):
    assert evaluate(expression) == pytest.approx(expected)


@pytest.mark.parametrize("expression, reason", [
    ("1/0", "division by zero"), ("", "empty expression"), ("2 +", "not a valid expression"),
    ("__import__('os')", "FunctionNotDefined"), ("9^9999999", "NumberTooHigh"), ("1e308*10", "not finite"),
    ("'a' + 'b'", "did not give a number"),
])
def test_refuses_what_is_not_arithmetic(expression, reason):
    with pytest.raises(ValueError, match=reason):
        evaluate(expression)


def test_tool_result_is_json_and_errors_are_error_tool_messages():
    ok = calculator.invoke({"type": "tool_call", "id": "c1", "name": "calculator", "args": {"expression": "3^2"}})
    assert json.loads(ok.content) == {"expression": "3^2", "result": 9} and ok.status == "success"
    bad = calculator.invoke({"type": "tool_call", "id": "c2", "name": "calculator", "args": {"expression": "1/0"}})
    assert bad.status == "error" and json.loads(bad.content)["error"] == "division by zero"
