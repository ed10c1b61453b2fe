package cloudformation_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/joiner-dev/joiner/config/cloudformation"
)

// decodeTemplate reads a CloudFormation YAML template into plain values, with the short forms of
// the intrinsic functions in their long forms (!Ref X → {"Ref": X}, !Sub s → {"Fn::Sub": s},
// !GetAtt A.B → {"Fn::GetAtt": [A, B]}), as CloudFormation itself reads them.
func decodeTemplate(text string) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 {
		return nil, fmt.Errorf("the template holds %d YAML documents, want 1", len(doc.Content))
	}
	v, err := nodeValue(doc.Content[0])
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the template is a %T, not a mapping", v)
	}
	return m, nil
}

func nodeValue(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			val, err := nodeValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		l := []any{}
		for _, c := range n.Content {
			val, err := nodeValue(c)
			if err != nil {
				return nil, err
			}
			l = append(l, val)
		}
		v = l
	case yaml.ScalarNode:
		v = n.Value
	case yaml.AliasNode:
		return nodeValue(n.Alias)
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
	}
	tag, ok := strings.CutPrefix(n.Tag, "!")
	if !ok || strings.HasPrefix(tag, "!") { // no tag, or a standard one (!!str, !!map, ...)
		return v, nil
	}
	if tag == "Ref" {
		return map[string]any{"Ref": v}, nil
	}
	if s, isString := v.(string); tag == "GetAtt" && isString {
		logical, attr, _ := strings.Cut(s, ".")
		v = []any{logical, attr}
	}
	return map[string]any{"Fn::" + tag: v}, nil
}

// template is the decoded joiner.yaml, failing t when it does not decode.
func template(t *testing.T) map[string]any {
	t.Helper()
	tpl, err := decodeTemplate(cloudformation.Template)
	if err != nil {
		t.Fatalf("decode joiner.yaml: %v", err)
	}
	return tpl
}

// at walks a decoded value by map keys and list indexes, failing t when the path is missing.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for i, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok || m[k] == nil {
				t.Fatalf("joiner.yaml: no %v", path[:i+1])
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("joiner.yaml: no %v", path[:i+1])
			}
			v = l[k]
		}
	}
	return v
}

// strs returns a string or a list of strings as a list.
func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// subVariable is a ${...} reference of Fn::Sub (not ${!...}, which is a literal).
var subVariable = regexp.MustCompile(`\$\{([^!}][^}]*)\}`)

// controllerPolicy returns the controller policy of the template, a JSON string under Fn::Sub,
// decoded with each ${X} replaced by "<X>", so that it decodes whatever the parameters.
func controllerPolicy(t *testing.T) map[string]any {
	t.Helper()
	text, ok := at(t, template(t), "Resources", "ControllerPolicy", "Properties", "PolicyDocument", "Fn::Sub").(string)
	if !ok {
		t.Fatal("joiner.yaml: the ControllerPolicy's PolicyDocument is not a !Sub string")
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(subVariable.ReplaceAllString(text, "<$1>")), &doc); err != nil {
		t.Fatalf("joiner.yaml: the ControllerPolicy's PolicyDocument is not JSON: %v", err)
	}
	return doc
}

// statement is one IAM policy statement of the template.
type statement struct {
	Sid, Effect        string
	Actions, Resources []string
	raw                map[string]any
}

// statements returns the statements of a policy document, failing t on a malformed one.
func statements(t *testing.T, doc any) []statement {
	t.Helper()
	var out []statement
	for i, s := range at(t, doc, "Statement").([]any) {
		m, ok := s.(map[string]any)
		if !ok {
			t.Fatalf("statement %d is a %T", i, s)
		}
		st := statement{raw: m, Actions: strs(m["Action"])}
		st.Sid, _ = m["Sid"].(string)
		st.Effect, _ = m["Effect"].(string)
		if r, ok := m["Resource"]; ok {
			st.Resources = strs(r)
		}
		out = append(out, st)
	}
	return out
}

// conditionsOf returns a statement's Condition block: operator → key → value.
func conditionsOf(s map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	cond, _ := s["Condition"].(map[string]any)
	for op, v := range cond {
		out[op], _ = v.(map[string]any)
	}
	return out
}

// policyActions returns the sorted, distinct actions that the Allow statements grant.
func policyActions(sts []statement) []string {
	var out []string
	for _, s := range sts {
		if s.Effect == "Allow" {
			out = append(out, s.Actions...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestTemplateShape checks what moto cannot (it ignores ManagedPolicyArns and does not create
// AWS::SQS::QueuePolicy or AWS::EKS::* resources): the node role's AWS managed policies, the queue
// policy that lets EventBridge send, the access entry and the Pod Identity association, and that
// every statement of the controller policy is an Allow with a Sid and no wildcard action, and
// every condition key that names a cluster names this one.
func TestTemplateShape(t *testing.T) {
	tpl := template(t)
	res := at(t, tpl, "Resources").(map[string]any)

	var managed []string
	for _, arn := range at(t, res, "NodeRole", "Properties", "ManagedPolicyArns").([]any) {
		s, _ := at(t, arn, "Fn::Sub").(string)
		managed = append(managed, s[strings.LastIndex(s, "/")+1:])
	}
	slices.Sort(managed)
	if want := []string{"AmazonEC2ContainerRegistryPullOnly", "AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonSSMManagedInstanceCore"}; !slices.Equal(managed, want) {
		t.Errorf("node role managed policies %v, want %v", managed, want)
	}

	queuePolicy := statements(t, at(t, res, "InterruptionQueuePolicy", "Properties", "PolicyDocument"))
	if len(queuePolicy) != 2 {
		t.Fatalf("queue policy has %d statements, want 2 (EventBridge sends, no plain HTTP)", len(queuePolicy))
	}
	send := queuePolicy[0]
	if send.Effect != "Allow" || !slices.Equal(send.Actions, []string{"sqs:SendMessage"}) ||
		!slices.Contains(strs(at(t, send.raw, "Principal", "Service")), "events.amazonaws.com") {
		t.Errorf("queue policy statement %s does not let events.amazonaws.com send: %v", send.Sid, send.raw)
	}
	if deny := queuePolicy[1]; deny.Effect != "Deny" || at(t, deny.raw, "Condition", "Bool", "aws:SecureTransport") != "false" {
		t.Errorf("queue policy statement %s does not deny requests without TLS: %v", deny.Sid, deny.raw)
	}
	if q := at(t, res, "InterruptionQueuePolicy", "Properties", "Queues", 0, "Ref"); q != "InterruptionQueue" {
		t.Errorf("the queue policy applies to %v, want the InterruptionQueue", q)
	}

	entry := at(t, res, "NodeAccessEntry", "Properties").(map[string]any)
	if entry["Type"] != "EC2_LINUX" || !slices.Equal(strs(at(t, entry, "PrincipalArn", "Fn::GetAtt")), []string{"NodeRole", "Arn"}) {
		t.Errorf("node access entry %v: want type EC2_LINUX for the node role", entry)
	}
	assoc := at(t, res, "ControllerPodIdentityAssociation", "Properties").(map[string]any)
	if at(t, assoc, "Namespace", "Ref") != "ServiceAccountNamespace" || at(t, assoc, "ServiceAccount", "Ref") != "ServiceAccountName" ||
		!slices.Equal(strs(at(t, assoc, "RoleArn", "Fn::GetAtt")), []string{"ControllerRole", "Arn"}) {
		t.Errorf("Pod Identity association %v: want the controller role for the chart's ServiceAccount", assoc)
	}

	for _, s := range statements(t, controllerPolicy(t)) {
		if s.Sid == "" || s.Effect != "Allow" {
			t.Errorf("controller policy statement %v: want a Sid and Effect Allow", s.raw)
		}
		for _, a := range s.Actions {
			if strings.Contains(a, "*") {
				t.Errorf("controller policy statement %s grants the wildcard action %s", s.Sid, a)
			}
		}
		for _, keys := range conditionsOf(s.raw) {
			for key, v := range keys {
				if strings.Contains(key, "kubernetes.io/cluster/") && !strings.HasSuffix(key, "/<ClusterName>") ||
					strings.HasSuffix(key, "/eks:eks-cluster-name") && v != "<ClusterName>" {
					t.Errorf("controller policy statement %s: condition %s = %v does not name the stack's cluster", s.Sid, key, v)
				}
			}
		}
	}
}

// TestGuideNamesEveryStatement keeps docs/install-eks.md in step with the template: its policy table
// names every statement of the controller policy, and it names every output.
func TestGuideNamesEveryStatement(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join(repoRoot, "docs", "install-eks.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range statements(t, controllerPolicy(t)) {
		names = append(names, s.Sid)
	}
	for name := range at(t, template(t), "Outputs").(map[string]any) {
		names = append(names, name)
	}
	for _, name := range names {
		if !strings.Contains(string(guide), "`"+name+"`") {
			t.Errorf("docs/install-eks.md does not name `%s` of joiner.yaml", name)
		}
	}
}
