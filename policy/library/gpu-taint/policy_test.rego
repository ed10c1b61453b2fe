package joiner.library.gpu_taint_test

import data.joiner.library.gpu_taint

params := {"gpuCategories": ["g", "p"], "taintKey": "nvidia.com/gpu", "taintEffects": ["NoSchedule", "NoExecute"]}

review(requirements, taints) := {"review": {"name": "np", "operation": "CREATE", "object": {
	"metadata": {"name": "np"},
	"spec": {"template": {"spec": {"requirements": requirements, "taints": taints}}},
}}, "parameters": params}

req(key, op, values) := {"key": key, "operator": op, "values": values}

gpu_taint_ok := [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]

test_cpu_nodepool_needs_no_taint if {
	count(gpu_taint.violation) == 0 with input as review([req("karpenter.k8s.aws/instance-category", "In", ["c", "m"])], [])
}

test_gpu_category_without_taint_denied if {
	reqs := [req("kubernetes.io/arch", "In", ["amd64"]), req("karpenter.k8s.aws/instance-category", "In", ["g"])]
	vs := gpu_taint.violation with input as review(reqs, [])
	some v in vs
	v.field == "spec.template.spec.taints"
	v.details.gpuRequirements == ["spec.template.spec.requirements[1]"]
}

test_gpu_category_with_taint_allowed if {
	count(gpu_taint.violation) == 0 with input as review([req("karpenter.k8s.aws/instance-category", "In", ["g"])], gpu_taint_ok)
}

test_wrong_effect_denied if {
	taints := [{"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"}]
	count(gpu_taint.violation) == 1 with input as review([req("karpenter.k8s.aws/instance-family", "In", ["p5"])], taints)
}

test_gpu_instance_type_denied if {
	count(gpu_taint.violation) == 1 with input as review([req("node.kubernetes.io/instance-type", "In", ["m7i.large", "g6e.xlarge"])], [])
}

test_gpu_count_requirement_denied if {
	count(gpu_taint.violation) == 1 with input as review([req("karpenter.k8s.aws/instance-gpu-count", "Gt", ["0"])], [])
	count(gpu_taint.violation) == 1 with input as review([req("karpenter.k8s.aws/instance-gpu-manufacturer", "Exists", [])], [])
}

test_no_gpu_requirements_allowed if {
	count(gpu_taint.violation) == 0 with input as review([req("karpenter.k8s.aws/instance-gpu-count", "In", ["0"])], [])
	count(gpu_taint.violation) == 0 with input as review([req("karpenter.k8s.aws/instance-gpu-name", "DoesNotExist", [])], [])
}
