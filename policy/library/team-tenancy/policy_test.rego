package joiner.library.team_tenancy_test

import data.joiner.library.team_tenancy

params := {"teamLabel": "joiner.dev/team", "allowedTeams": ["team-a", "platform"], "requireNodeLabel": true}

nodepool(labels, node_labels, requirements) := {
	"apiVersion": "karpenter.sh/v1",
	"kind": "NodePool",
	"metadata": {"name": "np", "labels": labels},
	"spec": {"template": {
		"metadata": {"labels": node_labels},
		"spec": {"requirements": requirements},
	}},
}

review(obj) := {"review": {"object": obj, "name": obj.metadata.name, "operation": "CREATE"}, "parameters": params}

fields(vs) := {v.field | some v in vs}

test_allowed_team_passes if {
	obj := nodepool({"joiner.dev/team": "team-a"}, {"joiner.dev/team": "team-a"}, [{"key": "joiner.dev/team", "operator": "In", "values": ["team-a"]}])
	count(team_tenancy.violation) == 0 with input as review(obj)
}

test_missing_team_label_denied if {
	obj := nodepool({}, {}, [])
	vs := team_tenancy.violation with input as review(obj)
	fields(vs) == {"metadata.labels"}
}

test_unknown_team_denied if {
	obj := nodepool({"joiner.dev/team": "team-z"}, {"joiner.dev/team": "team-z"}, [])
	vs := team_tenancy.violation with input as review(obj)
	some v in vs
	v.field == "metadata.labels[joiner.dev/team]"
	v.details.team == "team-z"
	v.details.allowedTeams == ["platform", "team-a"]
}

test_node_label_must_match_team if {
	obj := nodepool({"joiner.dev/team": "team-a"}, {"joiner.dev/team": "platform"}, [])
	vs := team_tenancy.violation with input as review(obj)
	fields(vs) == {"spec.template.metadata.labels[joiner.dev/team]"}
}

test_node_label_optional_when_disabled if {
	obj := nodepool({"joiner.dev/team": "team-a"}, {}, [])
	inp := object.union(review(obj), {"parameters": {"requireNodeLabel": false}})
	count(team_tenancy.violation) == 0 with input as inp
}

test_requirement_for_other_team_denied if {
	reqs := [
		{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
		{"key": "joiner.dev/team", "operator": "In", "values": ["team-a", "platform"]},
	]
	obj := nodepool({"joiner.dev/team": "team-a"}, {"joiner.dev/team": "team-a"}, reqs)
	vs := team_tenancy.violation with input as review(obj)
	fields(vs) == {"spec.template.spec.requirements[1]"}
}
