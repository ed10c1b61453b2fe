package crdvalidation_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/crdvalidation"
)

var nodePoolGVK = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}

// nodePool renders a NodePool manifest named name whose spec.template.spec ends with extra (YAML lines
// indented by six spaces) and whose spec ends with specExtra (indented by two).
func nodePool(name, extra, specExtra string) string {
	return `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: ` + name + `
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
` + extra + specExtra
}

func toJSON(t *testing.T, manifest string) []byte {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func joiner(t *testing.T) *crdvalidation.Schemas {
	t.Helper()
	s, err := crdvalidation.Joiner()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// create decodes, prepares and validates manifest as a create, returning the object and the error.
func create(t *testing.T, k *crdvalidation.Kind, manifest string, fv crdvalidation.FieldValidation) (*unstructured.Unstructured, []string, error) {
	t.Helper()
	u, unknown, err := k.Decode(toJSON(t, manifest), fv)
	var warnings []string
	if fv == crdvalidation.FieldValidationWarn {
		for _, p := range unknown {
			warnings = append(warnings, crdvalidation.UnknownFieldMessage(p))
		}
	}
	if err != nil {
		return nil, warnings, err
	}
	k.PrepareForCreate(u)
	return u, warnings, k.ValidateCreate(context.Background(), u)
}

func TestJoinerServesItsKinds(t *testing.T) {
	s := joiner(t)
	var got []string
	for _, gvk := range s.Kinds() {
		got = append(got, gvk.GroupVersion().String()+" "+gvk.Kind)
	}
	want := "autoscaling.x-k8s.io/v1beta1 CapacityBuffer, joiner.dev/v1alpha1 LocalNodeClass, joiner.dev/v1alpha1 ProvisioningPolicy, karpenter.k8s.aws/v1 EC2NodeClass, karpenter.sh/v1 NodeClaim, karpenter.sh/v1 NodePool"
	if strings.Join(got, ", ") != want {
		t.Errorf("kinds = %s, want %s", strings.Join(got, ", "), want)
	}
	if !s.ServesGroup("karpenter.sh") || s.ServesGroup("apps") {
		t.Error("ServesGroup: want karpenter.sh served and apps not")
	}
	if got := s.KindsOf("karpenter.sh"); got != "karpenter.sh/v1 NodeClaim, karpenter.sh/v1 NodePool" {
		t.Errorf("KindsOf(karpenter.sh) = %q", got)
	}
}

func TestCreate(t *testing.T) {
	k, ok := joiner(t).Kind(nodePoolGVK)
	if !ok {
		t.Fatal("NodePool is not served")
	}
	tests := []struct {
		name     string
		manifest string
		fv       crdvalidation.FieldValidation
		// wantErr is the whole message, as the apiserver returns it; "" means valid.
		wantErr      string
		wantWarnings []string
	}{
		{name: "valid", manifest: nodePool("ok", "", "")},
		{
			name:     "one schema error has no brackets",
			manifest: nodePool("bad-weight", "", "  weight: 0\n"),
			wantErr:  `NodePool.karpenter.sh "bad-weight" is invalid: spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1`,
		},
		{
			name:     "schema and scale errors are listed in brackets",
			manifest: nodePool("bad-replicas", "", "  replicas: -1\n"),
			wantErr:  `NodePool.karpenter.sh "bad-replicas" is invalid: [spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0, .spec.replicas: Invalid value: -1: should be a non-negative integer]`,
		},
		{
			name:     "CEL rule",
			manifest: nodePool("in-without-values", "      - {key: karpenter.sh/capacity-type, operator: In}\n", ""),
			wantErr:  `requirements with operator 'In' must have a value defined`,
		},
		{
			name:     "a blocking error skips the CEL rules",
			manifest: nodePool("bad-operator", "      - {key: karpenter.sh/capacity-type, operator: Maybe}\n", ""),
			wantErr:  `some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`,
		},
		{
			name:     "unknown field, strict",
			manifest: nodePool("unknown", "      colour: blue\n", ""),
			wantErr:  `NodePool in version "v1" cannot be handled as a NodePool: strict decoding error: unknown field "spec.template.spec.colour"`,
		},
		{
			name:         "unknown field, warn",
			manifest:     nodePool("unknown", "      colour: blue\n", ""),
			fv:           crdvalidation.FieldValidationWarn,
			wantWarnings: []string{`unknown field "spec.template.spec.colour"`},
		},
		{
			name:     "name must be a DNS subdomain",
			manifest: nodePool("Upper_Case", "", ""),
			wantErr:  `NodePool.karpenter.sh "Upper_Case" is invalid: metadata.name: Invalid value: "Upper_Case": a lowercase RFC 1123 subdomain`,
		},
		{
			name:     "malformed metadata",
			manifest: strings.Replace(nodePool("x", "", ""), "  name: x\n", "  name: x\n  labels: [a]\n", 1),
			wantErr:  `NodePool in version "v1" cannot be handled as a NodePool:`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fv := tt.fv
			if fv == "" {
				fv = crdvalidation.FieldValidationStrict
			}
			_, warnings, err := create(t, k, tt.manifest, fv)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("no error, want %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tt.wantErr)
			}
			if err != nil {
				if _, ok := err.(*apierrors.StatusError); !ok {
					t.Errorf("error is a %T, want an *apierrors.StatusError", err)
				}
			}
			if strings.Join(warnings, "\n") != strings.Join(tt.wantWarnings, "\n") {
				t.Errorf("warnings = %q, want %q", warnings, tt.wantWarnings)
			}
		})
	}
}

func TestDecodeAppliesSchemaDefaultsAndDropsStatusOnCreate(t *testing.T) {
	k, _ := joiner(t).Kind(nodePoolGVK)
	u, _, err := create(t, k, nodePool("defaults", "", "")+"status:\n  nodes: 3\n", crdvalidation.FieldValidationStrict)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"spec.disruption.consolidateAfter":    `"0s"`,
		"spec.disruption.consolidationPolicy": `"WhenEmptyOrUnderutilized"`,
		"spec.disruption.budgets":             `[{"nodes":"10%"}]`,
		"spec.template.spec.expireAfter":      `"720h"`,
	} {
		v, found, err := unstructured.NestedFieldNoCopy(u.Object, strings.Split(path, ".")...)
		got, _ := json.Marshal(v)
		if err != nil || !found || string(got) != want {
			t.Errorf("%s = %s (found %v, err %v), want %s", path, got, found, err, want)
		}
	}
	if _, ok := u.Object["status"]; ok {
		t.Error("status survived the create; the status subresource resets it")
	}
	if u.GetGeneration() != 1 {
		t.Errorf("generation = %d, want 1", u.GetGeneration())
	}
}

func TestUpdate(t *testing.T) {
	k, _ := joiner(t).Kind(nodePoolGVK)
	tests := []struct {
		name     string
		old, new string
		wantErr  string
	}{
		{name: "unchanged", old: nodePool("u", "", ""), new: nodePool("u", "", "")},
		{
			name:    "transition rule",
			old:     nodePool("u", "", ""),
			new:     strings.Replace(nodePool("u", "", ""), "kind: EC2NodeClass", "kind: OtherNodeClass", 1),
			wantErr: `NodePool.karpenter.sh "u" is invalid: spec.template.spec.nodeClassRef: Invalid value: nodeClassRef.kind is immutable`,
		},
		{
			name:    "static to dynamic",
			old:     nodePool("u", "", "  replicas: 1\n"),
			new:     nodePool("u", "", ""),
			wantErr: `Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, _, err := create(t, k, tt.old, crdvalidation.FieldValidationStrict)
			if err != nil {
				t.Fatal(err)
			}
			old.SetResourceVersion("1") // as stored
			u, _, err := k.Decode(toJSON(t, tt.new), crdvalidation.FieldValidationStrict)
			if err != nil {
				t.Fatal(err)
			}
			k.PrepareForUpdate(u, old)
			err = k.ValidateUpdate(context.Background(), u, old)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		files   fstest.MapFS
		wantErr string
	}{
		{name: "no file", files: fstest.MapFS{}, wantErr: "no file matches"},
		{name: "not YAML", files: fstest.MapFS{"crds/a.yaml": {Data: []byte("kind: [")}}, wantErr: "a.yaml document 1"},
		{name: "no schema", files: fstest.MapFS{"crds/a.yaml": {Data: []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Cluster
  versions: [{name: v1, served: true, storage: true}]
`)}}, wantErr: "CRD widgets.example.com: version v1 has no schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := crdvalidation.Load(tt.files, "crds/*.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
