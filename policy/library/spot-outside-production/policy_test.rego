package joiner.library.spot_outside_production_test

import data.joiner.library.spot_outside_production as spot

params := {"environmentLabel": "joiner.dev/environment", "productionValues": ["production"]}

review(env, requirements) := {"review": {"name": "np", "operation": "CREATE", "object": {
	"metadata": {"name": "np", "labels": {"joiner.dev/environment": env}},
	"spec": {"template": {"spec": {"requirements": requirements}}},
}}, "parameters": params}

arch := {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}

test_staging_spot_allowed if {
	count(spot.violation) == 0 with input as review("staging", [arch, {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}])
}

test_staging_on_demand_denied if {
	vs := spot.violation with input as review("staging", [arch, {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}])
	some v in vs
	v.field == "spec.template.spec.requirements[1]"
	v.details.values == ["spot", "on-demand"]
}

test_staging_notin_denied if {
	vs := spot.violation with input as review("dev", [{"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["on-demand"]}])
	{v.field | some v in vs} == {"spec.template.spec.requirements[0]"}
}

test_missing_capacity_type_denied if {
	vs := spot.violation with input as review("staging", [arch])
	{v.field | some v in vs} == {"spec.template.spec.requirements"}
}

test_unlabelled_nodepool_is_not_production if {
	inp := {"review": {"name": "np", "object": {"metadata": {"name": "np"}, "spec": {"template": {"spec": {"requirements": []}}}}}, "parameters": params}
	count(spot.violation) == 1 with input as inp
}

test_production_on_demand_allowed if {
	count(spot.violation) == 0 with input as review("production", [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
}
