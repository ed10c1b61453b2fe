package joiner.library.production_budgets_test

import data.joiner.library.production_budgets as budgets

params := {"environmentLabel": "joiner.dev/environment", "productionValues": ["production"], "maxNodesPercent": 20}

review(env, disruption) := {"review": {"name": "np", "operation": "CREATE", "object": {
	"metadata": {"name": "np", "labels": {"joiner.dev/environment": env}},
	"spec": {"disruption": disruption},
}}, "parameters": params}

test_production_with_budget_allowed if {
	d := {"budgets": [{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]}
	count(budgets.violation) == 0 with input as review("production", d)
}

test_production_without_budgets_denied if {
	vs := budgets.violation with input as review("production", {"consolidationPolicy": "WhenEmpty"})
	{v.field | some v in vs} == {"spec.disruption.budgets"}
	vs2 := budgets.violation with input as review("production", {"budgets": []})
	count(vs2) == 1
}

test_production_budget_too_wide_denied if {
	vs := budgets.violation with input as review("production", {"budgets": [{"nodes": "5"}, {"nodes": "50%"}]})
	some v in vs
	v.field == "spec.disruption.budgets[1].nodes"
	v.details.nodes == "50%"
}

test_staging_without_budgets_allowed if {
	count(budgets.violation) == 0 with input as review("staging", {})
}
