package joiner.library.instance_allow_list_test

import data.joiner.library.instance_allow_list as allow

params := {"allowedCategories": ["c", "m", "r"], "allowedFamilies": [], "requireRestriction": true}

review(requirements, p) := {"review": {"name": "np", "operation": "CREATE", "object": {
	"metadata": {"name": "np"},
	"spec": {"template": {"spec": {"requirements": requirements}}},
}}, "parameters": p}

req(key, op, values) := {"key": key, "operator": op, "values": values}

fields(vs) := {v.field | some v in vs}

test_allowed_categories_pass if {
	reqs := [req("karpenter.k8s.aws/instance-category", "In", ["c", "m"]), req("karpenter.k8s.aws/instance-generation", "Gt", ["5"])]
	count(allow.violation) == 0 with input as review(reqs, params)
}

test_gpu_category_denied if {
	reqs := [req("kubernetes.io/arch", "In", ["amd64"]), req("karpenter.k8s.aws/instance-category", "In", ["m", "p"])]
	vs := allow.violation with input as review(reqs, params)
	some v in vs
	v.field == "spec.template.spec.requirements[1]"
	v.details.disallowed == ["p"]
}

test_notin_denied if {
	reqs := [req("karpenter.k8s.aws/instance-category", "NotIn", ["p", "g"])]
	vs := allow.violation with input as review(reqs, params)
	fields(vs) == {"spec.template.spec.requirements[0]", "spec.template.spec.requirements"}
}

test_unrestricted_denied if {
	vs := allow.violation with input as review([req("kubernetes.io/arch", "In", ["arm64"])], params)
	fields(vs) == {"spec.template.spec.requirements"}
}

test_unrestricted_allowed_when_not_required if {
	p := object.union(params, {"requireRestriction": false})
	count(allow.violation) == 0 with input as review([], p)
}

test_family_allow_list if {
	p := object.union(params, {"allowedFamilies": ["m7i", "c7i"]})
	count(allow.violation) == 0 with input as review([req("karpenter.k8s.aws/instance-family", "In", ["m7i"])], p)
	vs := allow.violation with input as review([req("karpenter.k8s.aws/instance-family", "In", ["m7i", "m5"])], p)
	some v in vs
	v.details.disallowed == ["m5"]
}

test_family_of_disallowed_category_denied if {
	vs := allow.violation with input as review([req("karpenter.k8s.aws/instance-family", "In", ["g6e", "inf2", "r7g"])], params)
	some v in vs
	v.details.disallowed == ["g6e", "inf2"]
}

test_instance_types_checked_by_family if {
	count(allow.violation) == 0 with input as review([req("node.kubernetes.io/instance-type", "In", ["m7i.large", "c6g.xlarge"])], params)
	vs := allow.violation with input as review([req("node.kubernetes.io/instance-type", "In", ["m7i.large", "p5.48xlarge"])], params)
	some v in vs
	v.details.disallowed == ["p5.48xlarge"]
}
