// Package policyobject converts the ProvisioningPolicy custom resource (joiner.dev/v1alpha1) into the
// policy engine's plain policy.Policy. The admission webhook, the audit controller and the offline CLI all
// convert through ToPolicy, so a policy means the same thing wherever it is evaluated. It only converts:
// it never compiles Rego or talks to the Kubernetes API.
package policyobject

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	"github.com/joiner-dev/joiner/policy"
)

// ToPolicy converts a ProvisioningPolicy into the engine's Policy: metadata.name and metadata.generation,
// spec.rego, spec.enforcementAction (empty stays empty, which the engine reads as Deny), spec.match and
// spec.parameters. Parameters must be a JSON object; numbers keep their exact JSON text (json.Number) so
// large integers are not rounded. The returned error names the offending field and the fix.
//
// ToPolicy does not validate the Rego or the match; call policy.Validate on the result for that.
func ToPolicy(pp *v1alpha1.ProvisioningPolicy) (policy.Policy, error) {
	if pp == nil {
		return policy.Policy{}, errors.New("convert ProvisioningPolicy: nil object")
	}
	params, err := Parameters(pp)
	if err != nil {
		return policy.Policy{}, fmt.Errorf("convert ProvisioningPolicy %q: %w", pp.Name, err)
	}
	p := policy.Policy{
		Name:              pp.Name,
		Generation:        pp.Generation,
		Rego:              pp.Spec.Rego,
		EnforcementAction: policy.Action(pp.Spec.EnforcementAction),
		Match: policy.Match{
			Kinds:             append([]string(nil), pp.Spec.Match.Kinds...),
			Operations:        append([]string(nil), pp.Spec.Match.Operations...),
			NamespaceSelector: pp.Spec.Match.NamespaceSelector.DeepCopy(),
		},
		Parameters: params,
	}
	return p, nil
}

// Parameters decodes spec.parameters into a JSON object. Unset parameters (nil, empty or JSON null) give a
// nil map, which the engine treats as an empty object.
func Parameters(pp *v1alpha1.ProvisioningPolicy) (map[string]any, error) {
	if pp.Spec.Parameters == nil {
		return nil, nil
	}
	raw := bytes.TrimSpace(pp.Spec.Parameters.Raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("spec.parameters: not valid JSON (%v); write parameters as a YAML/JSON object such as {teamLabel: joiner.dev/team}", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("spec.parameters: trailing data after the JSON object; write a single object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("spec.parameters: must be an object, got %s; write named parameters such as {allowedTeams: [a, b]}", jsonTypeName(v))
	}
	return m, nil
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
