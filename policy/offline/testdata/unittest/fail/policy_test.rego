package unittest.weight_cap_test

import data.unittest.weight_cap

test_light_allowed if {
	count(weight_cap.violation) == 0 with input as {"review": {"object": {"spec": {"weight": 10}}}, "parameters": {"maxWeight": 50}}
}

# Wrong on purpose: a weight of 40 is allowed, so this test fails.
test_expects_denial_wrongly if {
	count(weight_cap.violation) == 1 with input as {"review": {"object": {"spec": {"weight": 40}}}, "parameters": {"maxWeight": 50}}
}

# Undefined on purpose: to_number fails on a non-numeric string, which makes the expression
# undefined (as in the engine), so this test fails.
test_builtin_error_undefined if {
	to_number(input.review.object.metadata.name) > 0 with input as {"review": {"object": {"metadata": {"name": "abc"}}}}
}

# Errors on purpose: a range over the engine's cap stops the evaluation.
test_builtin_limit if {
	count(numbers.range(1, input.n)) > 0 with input as {"n": 200000}
}
