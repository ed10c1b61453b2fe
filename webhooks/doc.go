// Package webhooks holds Joiner's admission handlers: defaulting and validation of NodePools, NodeClaims,
// EC2NodeClasses and LocalNodeClasses, validation of ProvisioningPolicies, and NodePool tenancy for Pods.
// Each handler is a controller-runtime admission.Handler, a function from an admission.Request to an
// admission.Response that can be called without a server; Register serves them on a webhook.Server.
//
// Each object of a request is decoded once: a Request holds the object and the old object as Objects,
// decoded into a map on first use and into a typed view (a NodePool, a Pod) on first use, and every
// check of the request reads them from there. Every handler is also a DecodedHandler, which takes the
// objects already decoded: `joiner check` hands its objects over that way instead of as JSON.
//
// The handlers are thin front ends. Semantic checks that CRD CEL cannot express live here (budget cron
// schedules, contradicting requirements, requirements no instance type satisfies, duplicate taints, node
// class existence, limits below usage, tenancy); every policy decision is delegated to the policy engine in
// package policy, which the audit controller and the offline CLI share. This package must not grow its own
// policy logic, and it never writes to the cluster: it only reads through a client.Reader.
//
// # Paths
//
//	/default/nodepool  /default/nodeclaim  /default/ec2nodeclass  /default/localnodeclass      (mutating)
//	/validate/nodepool /validate/nodeclaim /validate/ec2nodeclass /validate/localnodeclass     (validating)
//	/validate/provisioningpolicy                                                               (validating)
//	/mutate/pod /validate/pod                                                                  (Pod tenancy)
//	/validate/workload                      (pod templates of Deployments, StatefulSets, DaemonSets,
//	                                         ReplicaSets, Jobs and CronJobs: tenancy and opted-in Pod policies)
//
// # Failure policy
//
// The webhook configurations must use failurePolicy: Ignore and timeoutSeconds: 5. A webhook that cannot be
// reached must not deadlock the cluster (Pods of the CNI or of Joiner itself could otherwise never be
// created again), so an unreachable or timed-out webhook admits the request; the audit controller reports
// what got through. The Pod webhooks are further limited by a namespaceSelector on the label
// joiner.dev/nodepools=bound, and kube-system, kube-public and kube-node-lease are never touched.
//
// Once a handler answers, it decides: a ProvisioningPolicy with enforcementAction Deny that fails to
// evaluate denies the request (fail closed); a failing Warn policy only warns and a failing DryRun policy is
// only recorded. The Pod validator denies when it cannot read the Pod's Namespace or the NodePools, because
// tenancy is an isolation boundary; the Pod mutator admits unchanged with a warning in that case, leaving
// the decision to the validator.
//
// Requests made by Joiner's own service account (system:serviceaccount:joiner-system:joiner) are admitted
// without validation, as Gatekeeper does for itself: the controller must always be able to update the
// objects it manages. On UPDATE, a semantic problem the old object already had is reported as a warning
// rather than a denial, so an unrelated change (or finalizer removal) is never blocked by an old mistake.
package webhooks
