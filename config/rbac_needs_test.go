package config_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// need is one verb on one resource granted to the controller's ServiceAccount, with the code that
// uses it. Every grant the manifests bind to the controller must have a need, and every need must
// be granted: least privilege, held to the code by TestRBACNeedsMatchCode.
type need struct {
	group, resource, verb string
	// where is the function that needs the grant, as "file:Func" or "file:Type.Method".
	where string
	// via says how a grant is used that no client call in where shows: a library that calls the
	// API for Joiner, or an admission rule of the apiserver. Empty when where makes the call.
	via string
	// certManager marks a grant of cert-manager mode only.
	certManager bool
}

func (n need) key() string { return n.verb + " " + groupResource(n.group, n.resource) }

// Vias of the grants that a library or the apiserver needs.
const (
	viaLeaderElection = "controller-runtime's leader election (client-go's Lease lock) gets, creates and updates the Lease"
	viaRecordEvents   = "the leader election's event recorder (client-go tools/record) creates Events and patches the count of a repeated one"
	viaEventsAPI      = "the controllers' recorders (mgr.GetEventRecorder, client-go tools/events) create Events and patch a repeated one into a series"
	viaOwnerRefs      = "the object it makes owns another with blockOwnerDeletion: true; the OwnerReferencesPermissionEnforcement admission plugin then requires update on the owner's finalizers"
)

// grantNeeds is every grant of the controller's ClusterRole and Roles, with the code that needs it.
// Reads: get where the code gets one object; list and watch where it lists, watches or reads
// through the manager's cache (which lists and then watches every kind it is asked for).
var grantNeeds = []need{
	{group: "karpenter.sh", resource: "nodepools", verb: "get", where: "controllers/nodepoolhash/controller.go:Controller.Reconcile"},
	{group: "karpenter.sh", resource: "nodepools", verb: "list", where: "controllers/nodepool/controller.go:Controller.nodePoolsOfNodeClass"},
	{group: "karpenter.sh", resource: "nodepools", verb: "watch", where: "controllers/nodepoolhash/controller.go:Controller.SetupWithManager"},
	{group: "karpenter.sh", resource: "nodepools", verb: "patch", where: "controllers/statusreconcile/statusreconcile.go:PatchObject"},
	{group: "karpenter.sh", resource: "nodepools/status", verb: "patch", where: "controllers/statusreconcile/statusreconcile.go:PatchStatus"},
	{group: "karpenter.sh", resource: "nodepools/finalizers", verb: "update", where: "api/karpenter/v1/hash.go:NodePool.OwnerReference", via: viaOwnerRefs},

	{group: "karpenter.sh", resource: "nodeclaims", verb: "get", where: "controllers/nodeclaim/controller.go:Controller.Reconcile"},
	{group: "karpenter.sh", resource: "nodeclaims", verb: "list", where: "controllers/garbagecollection/controller.go:Controller.RunOnce"},
	{group: "karpenter.sh", resource: "nodeclaims", verb: "watch", where: "controllers/fieldindex/fieldindex.go:SetupNodeClaimController"},
	{group: "karpenter.sh", resource: "nodeclaims", verb: "create", where: "controllers/nodeclaimgate/gate.go:Gate.Create"},
	{group: "karpenter.sh", resource: "nodeclaims", verb: "delete", where: "controllers/expiration/controller.go:Controller.delete"},
	{group: "karpenter.sh", resource: "nodeclaims", verb: "patch", where: "controllers/nodeclaim/controller.go:Controller.write"},
	{group: "karpenter.sh", resource: "nodeclaims/status", verb: "patch", where: "controllers/nodeclaim/controller.go:Controller.write"},
	{group: "karpenter.sh", resource: "nodeclaims/finalizers", verb: "update", where: "controllers/nodeclaim/registration.go:syncNode", via: viaOwnerRefs},

	{group: "karpenter.k8s.aws", resource: "ec2nodeclasses", verb: "get", where: "controllers/nodepool/readiness.go:Controller.nodeClassReadiness"},
	{group: "karpenter.k8s.aws", resource: "ec2nodeclasses", verb: "list", where: "controllers/controllers.go:registerPolicy"},
	{group: "karpenter.k8s.aws", resource: "ec2nodeclasses", verb: "watch", where: "controllers/controllers.go:registerPolicy"},
	{group: "karpenter.k8s.aws", resource: "ec2nodeclasses", verb: "patch", where: "providers/aws/nodeclass/controller.go:Controller.syncMetadata"},
	{group: "karpenter.k8s.aws", resource: "ec2nodeclasses/status", verb: "patch", where: "providers/aws/nodeclass/status.go:Controller.syncStatus"},

	{group: "joiner.dev", resource: "localnodeclasses", verb: "get", where: "providers/local/nodeclass.go:Provider.nodeClass"},
	{group: "joiner.dev", resource: "localnodeclasses", verb: "list", where: "providers/local/nodeclass_controller.go:NodeClassController.SetupWithManager"},
	{group: "joiner.dev", resource: "localnodeclasses", verb: "watch", where: "providers/local/nodeclass_controller.go:NodeClassController.SetupWithManager"},
	{group: "joiner.dev", resource: "localnodeclasses/status", verb: "patch", where: "controllers/statusreconcile/statusreconcile.go:PatchStatus"},

	{group: "joiner.dev", resource: "provisioningpolicies", verb: "get", where: "controllers/policysync/policy.go:PolicyReconciler.Reconcile"},
	{group: "joiner.dev", resource: "provisioningpolicies", verb: "list", where: "controllers/policysync/policy.go:PolicyReconciler.Synced"},
	{group: "joiner.dev", resource: "provisioningpolicies", verb: "watch", where: "controllers/policysync/policy.go:PolicyReconciler.SetupWithManager"},
	{group: "joiner.dev", resource: "provisioningpolicies/status", verb: "patch", where: "controllers/policysync/policy.go:PolicyReconciler.patchStatus"},

	{group: "autoscaling.x-k8s.io", resource: "capacitybuffers", verb: "get", where: "controllers/statusreconcile/statusreconcile.go:Reconciler.Reconcile"},
	{group: "autoscaling.x-k8s.io", resource: "capacitybuffers", verb: "list", where: "controllers/bufferpods/pods.go:Read"},
	{group: "autoscaling.x-k8s.io", resource: "capacitybuffers", verb: "watch", where: "controllers/capacitybuffer/controller.go:Controller.SetupWithManager"},
	{group: "autoscaling.x-k8s.io", resource: "capacitybuffers/status", verb: "patch", where: "controllers/statusreconcile/statusreconcile.go:PatchStatus"},
	{resource: "podtemplates", verb: "get", where: "controllers/bufferpods/resolve.go:Resolve"},
	{resource: "podtemplates", verb: "list", where: "controllers/bufferpods/resolve.go:Resolve"},
	{resource: "podtemplates", verb: "watch", where: "controllers/bufferpods/resolve.go:Resolve"},
	{group: "apps", resource: "deployments", verb: "get", where: "controllers/bufferpods/resolve.go:resolveScalable"},
	{group: "apps", resource: "deployments", verb: "list", where: "controllers/bufferpods/resolve.go:resolveScalable"},
	{group: "apps", resource: "deployments", verb: "watch", where: "controllers/bufferpods/resolve.go:resolveScalable"},
	{group: "apps", resource: "statefulsets", verb: "get", where: "controllers/bufferpods/resolve.go:resolveScalable"},
	{group: "apps", resource: "statefulsets", verb: "list", where: "controllers/bufferpods/resolve.go:resolveScalable"},
	{group: "apps", resource: "statefulsets", verb: "watch", where: "controllers/bufferpods/resolve.go:resolveScalable"},
	{group: "apps", resource: "replicasets", verb: "get", where: "controllers/bufferpods/resolve.go:resolveScalable"},
	{group: "apps", resource: "replicasets", verb: "list", where: "controllers/bufferpods/resolve.go:resolveScalable"},
	{group: "apps", resource: "replicasets", verb: "watch", where: "controllers/bufferpods/resolve.go:resolveScalable"},
	{group: "batch", resource: "jobs", verb: "get", where: "controllers/expectedpods/expected.go:get"},
	{group: "batch", resource: "jobs", verb: "list", where: "controllers/expectedpods/expected.go:readWorkloads"},
	{group: "batch", resource: "jobs", verb: "watch", where: "controllers/expectedpods/expected.go:readWorkloads"},

	{resource: "nodes", verb: "get", where: "providers/local/launch.go:Provider.getNode"},
	{resource: "nodes", verb: "list", where: "providers/local/lookup.go:Provider.List"},
	{resource: "nodes", verb: "watch", where: "controllers/fieldindex/fieldindex.go:SetupNodeClaimController"},
	{resource: "nodes", verb: "create", where: "providers/local/launch.go:Provider.register"},
	{resource: "nodes", verb: "patch", where: "controllers/nodeclaim/registration.go:registration.Reconcile"},
	{resource: "nodes", verb: "delete", where: "controllers/termination/drain.go:releaseNode"},

	{resource: "pods", verb: "list", where: "controllers/termination/drain.go:Drainer.Drain"},
	{resource: "pods", verb: "watch", where: "controllers/podmetrics/controller.go:Controller.collect"},
	{resource: "pods", verb: "delete", where: "controllers/termination/drain.go:Drainer.deleteAtDeadline"},
	{resource: "pods/eviction", verb: "create", where: "controllers/termination/drain.go:Drainer.evict"},

	{resource: "namespaces", verb: "get", where: "webhooks/tenancy.go:readNamespace"},
	{resource: "namespaces", verb: "list", where: "controllers/state/state.go:ReadClusterState"},
	{resource: "namespaces", verb: "watch", where: "controllers/state/state.go:ReadClusterState"},

	{group: "apps", resource: "daemonsets", verb: "list", where: "controllers/state/state.go:ReadClusterState"},
	{group: "apps", resource: "daemonsets", verb: "watch", where: "controllers/state/state.go:ReadClusterState"},
	{resource: "persistentvolumeclaims", verb: "list", where: "controllers/state/state.go:ReadClusterState"},
	{resource: "persistentvolumeclaims", verb: "watch", where: "controllers/state/state.go:ReadClusterState"},
	{resource: "persistentvolumes", verb: "list", where: "controllers/state/state.go:ReadClusterState"},
	{resource: "persistentvolumes", verb: "watch", where: "controllers/state/state.go:ReadClusterState"},
	{group: "storage.k8s.io", resource: "storageclasses", verb: "list", where: "controllers/state/state.go:ReadClusterState"},
	{group: "storage.k8s.io", resource: "storageclasses", verb: "watch", where: "controllers/state/state.go:ReadClusterState"},
	{group: "storage.k8s.io", resource: "volumeattachments", verb: "list", where: "controllers/termination/volumes.go:pendingAttachments"},
	{group: "storage.k8s.io", resource: "volumeattachments", verb: "watch", where: "controllers/termination/volumes.go:pendingAttachments"},
	{group: "resource.k8s.io", resource: "resourceclaims", verb: "list", where: "controllers/provisioning/dra.go:Provisioner.readDRA"},
	{group: "resource.k8s.io", resource: "resourceclaims", verb: "watch", where: "controllers/provisioning/dra.go:Provisioner.readDRA"},
	{group: "resource.k8s.io", resource: "resourceclaimtemplates", verb: "list", where: "controllers/provisioning/dra.go:Provisioner.readDRA"},
	{group: "resource.k8s.io", resource: "resourceclaimtemplates", verb: "watch", where: "controllers/provisioning/dra.go:Provisioner.readDRA"},
	{group: "resource.k8s.io", resource: "deviceclasses", verb: "list", where: "controllers/provisioning/dra.go:Provisioner.readDRA"},
	{group: "resource.k8s.io", resource: "deviceclasses", verb: "watch", where: "controllers/provisioning/dra.go:Provisioner.readDRA"},
	{group: "networking.k8s.io", resource: "servicecidrs", verb: "get", where: "providers/aws/clusterinfo.go:ClusterServiceCIDR"},
	{group: "policy", resource: "poddisruptionbudgets", verb: "list", where: "controllers/disruption/controller.go:ReadState"},
	{group: "policy", resource: "poddisruptionbudgets", verb: "watch", where: "controllers/disruption/controller.go:ReadState"},

	{resource: "events", verb: "create", where: "operator/operator.go:New", via: viaRecordEvents},
	{resource: "events", verb: "patch", where: "operator/operator.go:New", via: viaRecordEvents},
	{group: "events.k8s.io", resource: "events", verb: "create", where: "controllers/controllers.go:Register", via: viaEventsAPI},
	{group: "events.k8s.io", resource: "events", verb: "patch", where: "controllers/controllers.go:Register", via: viaEventsAPI},

	{group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", verb: "get", where: "certs/webhookconfig.go:getConfig"},
	{group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", verb: "list", where: "certs/setup.go:watchSet.complete"},
	{group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", verb: "watch", where: "certs/setup.go:watchSet.complete"},
	{group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", verb: "update", where: "certs/rotator.go:Rotator.inject"},
	{group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", verb: "get", where: "certs/webhookconfig.go:getConfig"},
	{group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", verb: "list", where: "certs/setup.go:watchSet.complete"},
	{group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", verb: "watch", where: "certs/setup.go:watchSet.complete"},
	{group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", verb: "update", where: "certs/certmanager.go:CertManagerReconciler.annotateConfigs"},

	{group: "coordination.k8s.io", resource: "leases", verb: "get", where: "operator/operator.go:New", via: viaLeaderElection},
	{group: "coordination.k8s.io", resource: "leases", verb: "create", where: "operator/operator.go:New", via: viaLeaderElection},
	{group: "coordination.k8s.io", resource: "leases", verb: "update", where: "operator/operator.go:New", via: viaLeaderElection},

	{resource: "secrets", verb: "get", where: "certs/rotator.go:Rotator.getSecret"},
	{resource: "secrets", verb: "list", where: "certs/setup.go:watchSet.complete"},
	{resource: "secrets", verb: "watch", where: "certs/setup.go:watchSet.complete"},
	{resource: "secrets", verb: "create", where: "certs/rotator.go:Rotator.writeSecret"},
	{resource: "secrets", verb: "update", where: "certs/rotator.go:Rotator.writeSecret"},

	{group: "cert-manager.io", resource: "issuers", verb: "get", where: "certs/certmanager.go:CertManagerReconciler.apply", certManager: true},
	{group: "cert-manager.io", resource: "issuers", verb: "create", where: "certs/certmanager.go:CertManagerReconciler.apply", certManager: true},
	{group: "cert-manager.io", resource: "issuers", verb: "update", where: "certs/certmanager.go:CertManagerReconciler.apply", certManager: true},
	{group: "cert-manager.io", resource: "certificates", verb: "get", where: "certs/certmanager.go:CertManagerReconciler.Reconcile", certManager: true},
	{group: "cert-manager.io", resource: "certificates", verb: "list", where: "certs/certmanager.go:CertManagerReconciler.SetupWithManager", certManager: true},
	{group: "cert-manager.io", resource: "certificates", verb: "watch", where: "certs/certmanager.go:CertManagerReconciler.SetupWithManager", certManager: true},
	{group: "cert-manager.io", resource: "certificates", verb: "create", where: "certs/certmanager.go:CertManagerReconciler.apply", certManager: true},
	{group: "cert-manager.io", resource: "certificates", verb: "update", where: "certs/certmanager.go:CertManagerReconciler.apply", certManager: true},
}

// auditedResources are the kinds controllers/audit's auditedKinds lists.
var auditedResources = []string{"karpenter.sh/nodepools", "karpenter.sh/nodeclaims", "karpenter.k8s.aws/ec2nodeclasses", "joiner.dev/localnodeclasses", "/pods"}

// dynamicCalls are the client calls whose object has an interface type the scan cannot follow, with
// the resources the object can be, read off the code that builds it.
var dynamicCalls = []struct {
	where, verb string
	resources   []string // group/resource
}{
	{"certs/certmanager.go:CertManagerReconciler.apply", "get", []string{"cert-manager.io/issuers", "cert-manager.io/certificates"}},
	{"certs/certmanager.go:CertManagerReconciler.apply", "create", []string{"cert-manager.io/issuers", "cert-manager.io/certificates"}},
	{"certs/certmanager.go:CertManagerReconciler.apply", "update", []string{"cert-manager.io/issuers", "cert-manager.io/certificates"}},
	{"certs/certmanager.go:CertManagerReconciler.annotateConfigs", "update", []string{"admissionregistration.k8s.io/mutatingwebhookconfigurations", "admissionregistration.k8s.io/validatingwebhookconfigurations"}},
	{"certs/rotator.go:Rotator.inject", "update", []string{"admissionregistration.k8s.io/mutatingwebhookconfigurations", "admissionregistration.k8s.io/validatingwebhookconfigurations"}},
	{"certs/webhookconfig.go:getConfig", "get", []string{"admissionregistration.k8s.io/mutatingwebhookconfigurations", "admissionregistration.k8s.io/validatingwebhookconfigurations"}},
	{"controllers/audit/audit.go:Auditor.RunOnce", "list", auditedResources},
	{"controllers/state/state.go:ReadClusterState", "list", []string{"/pods", "/nodes", "karpenter.sh/nodeclaims", "karpenter.sh/nodepools", "apps/daemonsets",
		"/persistentvolumeclaims", "/persistentvolumes", "storage.k8s.io/storageclasses", "/namespaces"}},
	{"controllers/nodepool/readiness.go:Controller.nodeClassReadiness", "get", []string{"karpenter.k8s.aws/ec2nodeclasses", "joiner.dev/localnodeclasses"}},
	{"controllers/policysync/inventory.go:InventoryReconciler.Reconcile", "get", []string{"karpenter.sh/nodepools", "karpenter.k8s.aws/ec2nodeclasses", "joiner.dev/localnodeclasses"}},
	{"webhooks/nodepool.go:templateChecks.nodeClassFindings", "get", []string{"karpenter.k8s.aws/ec2nodeclasses", "joiner.dev/localnodeclasses"}},
	// The status skeleton serves the consolidatable, drift and expiration controllers (NodeClaims)
	// and the LocalNodeClass and CapacityBuffer statuses; PatchStatus also the NodePool status,
	// PatchObject the hash stamp.
	{"controllers/statusreconcile/statusreconcile.go:Reconciler.Reconcile", "get", []string{"karpenter.sh/nodeclaims", "joiner.dev/localnodeclasses", "autoscaling.x-k8s.io/capacitybuffers"}},
	{"controllers/statusreconcile/statusreconcile.go:PatchStatus", "patch", []string{"karpenter.sh/nodeclaims/status", "karpenter.sh/nodepools/status", "joiner.dev/localnodeclasses/status",
		"autoscaling.x-k8s.io/capacitybuffers/status"}},
	{"controllers/bufferpods/resolve.go:resolveScalable", "get", []string{"apps/deployments", "apps/statefulsets", "apps/replicasets"}},
	{"controllers/expectedpods/expected.go:get", "get", []string{"apps/deployments", "apps/statefulsets", "apps/replicasets", "batch/jobs"}},
	{"controllers/statusreconcile/statusreconcile.go:PatchObject", "patch", []string{"karpenter.sh/nodepools"}},
}

// checkGrantsHaveNeeds asserts, for one rendering, that every (group, resource, verb) bound to the
// controller has an entry in grantNeeds and that every entry is granted.
func checkGrantsHaveNeeds(t *testing.T, m manifest, w want) {
	t.Helper()
	granted := map[string]bool{}
	for _, r := range boundRules(t, m, w) {
		for _, g := range r.rule.APIGroups {
			for _, res := range r.rule.Resources {
				for _, v := range r.rule.Verbs {
					granted[need{group: g, resource: res, verb: v}.key()] = true
				}
			}
		}
	}
	needed := map[string]need{}
	for _, n := range grantNeeds {
		needed[n.key()] = n
		if n.certManager && !w.certManager {
			if granted[n.key()] {
				t.Errorf("%s is granted without cert-manager mode; only %s in cert-manager mode needs it", n.key(), n.where)
			}
			continue
		}
		if !granted[n.key()] {
			t.Errorf("%s is not granted, but %s needs it", n.key(), n.where)
		}
	}
	keys := make([]string, 0, len(granted))
	for k := range granted {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := needed[k]; ok {
			continue
		}
		t.Errorf("%s is granted but no code needs it (no entry in grantNeeds): drop the grant, or add the entry naming the function that uses it", k)
	}
}

// TestRBACNeedsMatchCode holds grantNeeds to the controller's code: every client call the code
// makes is a need in the table, and every need names a function that makes that call (reads: a
// function that reads or watches that kind; vias: a function that exists).
func TestRBACNeedsMatchCode(t *testing.T) {
	s := scanCode(t)

	// The calls the scan could not type are stated in dynamicCalls; expand them.
	type site struct{ where, verb string }
	dynamic := map[site][]string{}
	for _, d := range dynamicCalls {
		dynamic[site{d.where, d.verb}] = d.resources
	}
	usedDynamic := map[site]bool{}
	var calls []clientCall
	for _, c := range s.calls {
		if c.resource != "" {
			calls = append(calls, c)
			continue
		}
		at := site{c.file + ":" + c.fn, c.verb}
		resources, ok := dynamic[at]
		if !ok {
			t.Errorf("%s: the object is a %s, which the scan cannot follow: add the resources it can be to dynamicCalls", c, c.objType)
			continue
		}
		usedDynamic[at] = true
		for _, gr := range resources {
			g, r, _ := strings.Cut(gr, "/")
			d := c
			d.group, d.resource, d.objType = g, r, ""
			calls = append(calls, d)
		}
	}
	for _, d := range dynamicCalls {
		if !usedDynamic[site{d.where, d.verb}] {
			t.Errorf("dynamicCalls lists %s %s, which makes no such call any more: remove the entry", d.verb, d.where)
		}
	}

	needed := map[string]need{}
	for _, n := range grantNeeds {
		if _, dup := needed[n.key()]; dup {
			t.Errorf("grantNeeds lists %s twice", n.key())
		}
		needed[n.key()] = n
	}
	// Code → table: every call is granted.
	for _, c := range calls {
		if _, ok := needed[need{group: c.group, resource: c.resource, verb: c.verb}.key()]; !ok {
			t.Errorf("%s: the controller makes this call, but grantNeeds has no entry (and so the RBAC no grant) for it", c)
		}
	}
	// Table → code: every need names a function that uses it.
	for _, n := range grantNeeds {
		t.Run(strings.ReplaceAll(n.key(), "/", "_"), func(t *testing.T) {
			if !s.funcs[n.where] {
				t.Fatalf("%s: no function %s in the controller's packages", n.key(), n.where)
			}
			if n.via != "" {
				return
			}
			base, _, _ := strings.Cut(n.resource, "/")
			if n.verb == "list" || n.verb == "watch" {
				if s.refs[n.where][n.group+"/"+base] || slices.ContainsFunc(calls, func(c clientCall) bool {
					return c.file+":"+c.fn == n.where && c.group == n.group && c.resource == n.resource && c.verb == "list"
				}) {
					return
				}
				t.Fatalf("%s: %s neither lists nor watches %s", n.key(), n.where, groupResource(n.group, n.resource))
			}
			if !slices.ContainsFunc(calls, func(c clientCall) bool {
				return c.file+":"+c.fn == n.where && c.group == n.group && c.resource == n.resource && c.verb == n.verb
			}) {
				t.Fatalf("%s: %s makes no such client call%s", n.key(), n.where, callsIn(calls, n.where))
			}
		})
	}
}

// callsIn describes the client calls a function makes, for a failure message.
func callsIn(calls []clientCall, where string) string {
	var out []string
	for _, c := range calls {
		if c.file+":"+c.fn == where {
			out = append(out, c.verb+" "+groupResource(c.group, c.resource))
		}
	}
	if len(out) == 0 {
		return " (it makes none)"
	}
	return fmt.Sprintf(" (it makes: %s)", strings.Join(out, ", "))
}
