package admissioncheck_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/admissioncheck"
	"github.com/joiner-dev/joiner/policy"
)

// benchManifests returns n manifests of a GitOps repository: NodePools (valid, invalid for the schema,
// violating a policy, on an EC2NodeClass), EC2NodeClasses, NodeClaims and LocalNodeClasses.
func benchManifests(b *testing.B, n int) []admissioncheck.Item {
	b.Helper()
	items := make([]admissioncheck.Item, 0, n)
	for i := range n {
		var text string
		name := fmt.Sprintf("m-%04d", i)
		switch i % 10 {
		case 0, 1, 2, 3:
			text = strings.Replace(localNodePool(name, "      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}\n", "  disruption: {consolidateAfter: 5m, budgets: [{nodes: \"10%\"}, {nodes: \"0\", schedule: \"0 9 * * mon-fri\", duration: 8h}]}\n"),
				"name: local}", fmt.Sprintf("name: local-%d}", i%4), 1)
		case 4:
			text = strings.Replace(localNodePool(name, "", ""), "group: joiner.dev, kind: LocalNodeClass, name: local", "group: karpenter.k8s.aws, kind: EC2NodeClass, name: ec2-0010", 1)
		case 5:
			text = localNodePool(name, "      - {key: karpenter.sh/capacity-type, operator: In}\n", "  weight: 101\n")
		case 6:
			text = strings.Replace(localNodePool(name, "", ""), `cpu: "10"`, `cpu: "500"`, 1)
		case 7:
			text = fmt.Sprintf(`apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: ec2-%04d}
spec:
  role: KarpenterNodeRole-cluster
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: cluster}}]
`, i)
		case 8:
			text = fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: %s}
spec:
  nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: local-0}
  requirements:
  - {key: kubernetes.io/arch, operator: In, values: [amd64]}
  - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
`, name)
		case 9:
			text = fmt.Sprintf("apiVersion: joiner.dev/v1alpha1\nkind: LocalNodeClass\nmetadata: {name: local-%d}\nspec: {region: us-east-1}\n", i%4)
			if i >= 40 {
				text = fmt.Sprintf("apiVersion: joiner.dev/v1alpha1\nkind: LocalNodeClass\nmetadata: {name: %s}\nspec: {region: us-east-1, zones: [us-east-1a]}\n", name)
			}
		}
		items = append(items, admissioncheck.Item{Source: fmt.Sprintf("repo.yaml#%d", i+1), Object: manifest(b, text)})
	}
	return items
}

// BenchmarkCheck1000 is `joiner check` on 1,000 manifests with three policies: building the checker
// (CRDs, webhook configurations, catalog, policies) and judging every manifest, as one CLI run does.
//
//	GOMAXPROCS=2 go test -run '^$' -bench BenchmarkCheck1000 -benchtime 5x ./admissioncheck/
func BenchmarkCheck1000(b *testing.B) {
	items := benchManifests(b, 1000)
	policies := []policy.Policy{cpuCap, teamLabel, {
		Name: "spot-only", EnforcementAction: policy.ActionDryRun, Match: policy.Match{Kinds: []string{policy.KindNodePool}},
		Rego: `package bench.spot

violation contains {"msg": "on-demand allowed", "field": sprintf("spec.template.spec.requirements[%d]", [i])} if {
	some i, r in input.review.object.spec.template.spec.requirements
	r.key == "karpenter.sh/capacity-type"
	"on-demand" in r.values
}
`,
	}}
	ctx := context.Background()
	b.ReportAllocs()
	var denied int
	for b.Loop() {
		c, err := admissioncheck.New(ctx, admissioncheck.Options{Policies: policies})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := c.Check(ctx, items)
		if err != nil {
			b.Fatal(err)
		}
		denied = rep.Summary.Denied
	}
	if denied != 200 {
		b.Fatalf("%d manifests denied, want the 200 invalid or over the cap", denied)
	}
}
