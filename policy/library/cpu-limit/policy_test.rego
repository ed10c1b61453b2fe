package joiner.library.cpu_limit_test

import data.joiner.library.cpu_limit

params := {"maxCPU": "1000", "teamLabel": "joiner.dev/team", "teamMaxCPU": {"team-a": "200"}}

nodepool(name, team, limits) := {
	"apiVersion": "karpenter.sh/v1",
	"kind": "NodePool",
	"metadata": {"name": name, "labels": {"joiner.dev/team": team}},
	"spec": {"limits": limits},
}

review(obj) := {"review": {"name": obj.metadata.name, "operation": "CREATE", "object": obj}, "parameters": params}

inventory(nodepools) := {"cluster": {"karpenter.sh/v1": {"NodePool": {np.metadata.name: np | some np in nodepools}}}}

test_within_cap_passes if {
	count(cpu_limit.violation) == 0 with input as review(nodepool("a", "team-z", {"cpu": "500"}))
}

test_numeric_and_milli_quantities if {
	count(cpu_limit.violation) == 0 with input as review(nodepool("a", "team-z", {"cpu": 999}))
	count(cpu_limit.violation) == 0 with input as review(nodepool("a", "team-z", {"cpu": "999500m"}))
	count(cpu_limit.violation) == 1 with input as review(nodepool("a", "team-z", {"cpu": "1001"}))
}

test_missing_cpu_limit_denied if {
	vs := cpu_limit.violation with input as review(nodepool("a", "team-z", {"memory": "100Gi"}))
	{v.field | some v in vs} == {"spec.limits.cpu"}
}

test_over_cap_denied if {
	vs := cpu_limit.violation with input as review(nodepool("a", "team-z", {"cpu": "2k"}))
	some v in vs
	v.details == {"limit": 2000, "max": 1000}
}

test_team_cap_counts_other_nodepools if {
	inv := inventory([nodepool("a1", "team-a", {"cpu": "120"}), nodepool("b1", "team-b", {"cpu": "900"})])
	vs := cpu_limit.violation with input as review(nodepool("a2", "team-a", {"cpu": "100"})) with data.inventory as inv
	some v in vs
	v.details.total == 220
	v.details.cap == 200
	v.details.otherNodePools == {"a1": 120}
}

test_team_cap_replaces_own_inventory_entry if {
	# Audit and offline checks see the reviewed NodePool in the inventory too; it must not count twice.
	inv := inventory([nodepool("a1", "team-a", {"cpu": "150"}), nodepool("a2", "team-a", {"cpu": "999"})])
	count(cpu_limit.violation) == 0 with input as review(nodepool("a2", "team-a", {"cpu": "50"})) with data.inventory as inv
}

test_team_without_cap_is_unbounded if {
	inv := inventory([nodepool("z1", "team-z", {"cpu": "900"})])
	count(cpu_limit.violation) == 0 with input as review(nodepool("z2", "team-z", {"cpu": "900"})) with data.inventory as inv
}

test_team_cap_applies_without_inventory if {
	vs := cpu_limit.violation with input as review(nodepool("a1", "team-a", {"cpu": "250"}))
	some v in vs
	v.details.total == 250
	v.details.otherNodePools == {}
}
