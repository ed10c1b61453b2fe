// Package policyobject converts the ProvisioningPolicy custom resource (joiner.dev/v1alpha1) into the
// policy engine's plain policy.Policy. The admission webhook, the audit controller and the offline CLI all
// convert through ToPolicy, so a policy means the same thing wherever it is evaluated. It only converts:
// it never compiles Rego or talks to the Kubernetes API.
package policyobject

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	"github.com/joiner-dev/joiner/jsonobject"
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
			WorkloadTemplates: pp.Spec.Match.WorkloadTemplates,
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
	m, err := jsonobject.Decode(raw)
	var (
		invalid   *jsonobject.InvalidJSONError
		trailing  *jsonobject.TrailingDataError
		notObject *jsonobject.NotObjectError
	)
	switch {
	case errors.As(err, &invalid):
		return nil, fmt.Errorf("spec.parameters: not valid JSON (%w); write parameters as a YAML/JSON object such as {teamLabel: joiner.dev/team}", invalid.Err)
	case errors.As(err, &trailing):
		return nil, errors.New("spec.parameters: trailing data after the JSON object; write a single object")
	case errors.As(err, &notObject):
		return nil, fmt.Errorf("spec.parameters: must be an object, got %s; write named parameters such as {allowedTeams: [a, b]}", notObject.Kind)
	case err != nil:
		return nil, fmt.Errorf("spec.parameters: %w", err)
	}
	return m, nil
}
