package joiner.library.expire_after_test

import data.joiner.library.expire_after

review(template_spec) := {
	"review": {"name": "np", "operation": "CREATE", "object": {"metadata": {"name": "np"}, "spec": {"template": {"spec": template_spec}}}},
	"parameters": {"maxExpireAfter": "720h"},
}

test_allowed_durations if {
	every d in ["720h", "168h", "24h30m", "3600s"] {
		count(expire_after.violation) == 0 with input as review({"expireAfter": d})
	}
}

test_unset_is_allowed if {
	count(expire_after.violation) == 0 with input as review({})
}

test_never_denied if {
	vs := expire_after.violation with input as review({"expireAfter": "Never"})
	{v.field | some v in vs} == {"spec.template.spec.expireAfter"}
}

test_too_long_denied if {
	vs := expire_after.violation with input as review({"expireAfter": "720h1m"})
	some v in vs
	v.details == {"expireAfter": "720h1m", "max": "720h"}
}

test_malformed_denied if {
	vs := expire_after.violation with input as review({"expireAfter": "30d"})
	count(vs) == 1
}
