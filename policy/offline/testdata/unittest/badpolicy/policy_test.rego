package unittest.weight_cap_test

import data.unittest.weight_cap

test_light_allowed if {
	count(weight_cap.violation) == 0 with input as {"review": {"object": {"spec": {"weight": 10}}}, "parameters": {"maxWeight": 50}}
}

test_heavy_denied if {
	print("checking a heavy NodePool")
	weight_cap.violation == {{"msg": "too heavy", "field": "spec.weight"}} with input as {"review": {"object": {"spec": {"weight": 90}}}, "parameters": {"maxWeight": 50}}
}
