package crdvalidation

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
)

// Kind judges the objects of one served version of one CRD.
type Kind struct {
	// GVK is the group, version and kind the CRD serves.
	GVK schema.GroupVersionKind
	// Resource is the CRD's plural resource name, such as nodepools.
	Resource string
	// Namespaced reports whether the objects live in namespaces.
	Namespaced bool

	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        func() *cel.Validator // nil result: the schema has no CEL rules
	hasStatus  bool
	scale      *apiextensionsv1.CustomResourceSubresourceScale
}

// FieldValidation is a request's fieldValidation parameter: what the apiserver does with fields the
// schema does not declare.
type FieldValidation string

const (
	// FieldValidationStrict rejects a request with unknown fields (kubectl's default).
	FieldValidationStrict FieldValidation = "Strict"
	// FieldValidationWarn drops unknown fields with a warning each (the API's default).
	FieldValidationWarn FieldValidation = "Warn"
	// FieldValidationIgnore drops unknown fields silently.
	FieldValidationIgnore FieldValidation = "Ignore"
)

// ParseFieldValidation reads a fieldValidation value; empty means FieldValidationStrict.
func ParseFieldValidation(s string) (FieldValidation, error) {
	switch FieldValidation(s) {
	case "":
		return FieldValidationStrict, nil
	case FieldValidationStrict, FieldValidationWarn, FieldValidationIgnore:
		return FieldValidation(s), nil
	}
	return "", fmt.Errorf("field validation %q is not supported; use %s, %s or %s", s, FieldValidationStrict, FieldValidationWarn, FieldValidationIgnore)
}

// Decode reads a request body (the JSON of one object of this kind) as the apiserver does before
// admission: numbers become int64 or float64, metadata is coerced, fields the schema does not declare
// are pruned and nulls the schema does not allow are dropped, then the schema's defaults are applied.
// Unknown fields are an error under FieldValidationStrict; under FieldValidationWarn their paths are
// returned, and the apiserver warns about each with UnknownFieldMessage. Errors are
// *apierrors.StatusError (BadRequest) carrying the apiserver's message.
func (k *Kind) Decode(raw []byte, fv FieldValidation) (_ *unstructured.Unstructured, unknown []string, _ error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, nil, k.decodeError(err)
	}
	track := fv != FieldValidationIgnore
	unknown, err := k.coerce(u, track)
	if err != nil {
		return nil, nil, k.decodeError(err)
	}
	k.ApplyDefaults(u)
	if len(unknown) == 0 || !track {
		return u, nil, nil
	}
	if fv == FieldValidationStrict {
		errs := make([]error, len(unknown))
		for i, p := range unknown {
			errs[i] = errors.New(UnknownFieldMessage(p))
		}
		return nil, unknown, k.decodeError(runtime.NewStrictDecodingError(errs))
	}
	return u, unknown, nil
}

// UnknownFieldMessage is how the apiserver reports the unknown field at path (spec.x), in a strict
// decoding error or as a warning.
func UnknownFieldMessage(path string) string {
	return fmt.Sprintf("unknown field %q", path)
}

// decodeError is the apiserver's answer to a body it cannot read as this kind.
func (k *Kind) decodeError(err error) error {
	return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", k.GVK.Kind, k.GVK.Version, k.GVK.Kind, err))
}

// coerce is the apiserver's schema coercion of a decoded body: metadata is read into ObjectMeta and
// written back, unknown fields are pruned and disallowed nulls dropped. It returns the unknown
// fields' paths when track is set.
func (k *Kind) coerce(u *unstructured.Unstructured, track bool) ([]string, error) {
	kind, foundKind, err := unstructured.NestedString(u.Object, "kind")
	if err != nil {
		return nil, err
	}
	apiVersion, foundAPIVersion, err := unstructured.NestedString(u.Object, "apiVersion")
	if err != nil {
		return nil, err
	}
	objectMeta, foundMeta, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: track})
	if err != nil {
		return nil, err
	}
	unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, k.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: track})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, k.structural)
	fieldErr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, k.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: track})
	if fieldErr != nil {
		return nil, fieldErr
	}
	unknown = append(unknown, paths...)
	if foundKind {
		u.SetKind(kind)
	}
	if foundAPIVersion {
		u.SetAPIVersion(apiVersion)
	}
	if foundMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// ApplyDefaults applies the schema's defaults to u, as the apiserver does after decoding a body and
// again after a mutating webhook changed the object.
func (k *Kind) ApplyDefaults(u *unstructured.Unstructured) {
	structuraldefaulting.Default(u.Object, k.structural)
}

// PrepareForCreate is the apiserver's preparation of a new object before validation: a kind with a
// status subresource cannot set status on create, and the generation starts at 1.
func (k *Kind) PrepareForCreate(u *unstructured.Unstructured) {
	if k.hasStatus {
		delete(u.Object, "status")
	}
	u.SetGeneration(1)
}

// PrepareForUpdate is the apiserver's preparation of an update of the stored object old before
// validation: the system metadata (uid, creation timestamp) stays old's, with a status subresource the
// status does too, and the generation is old's, plus one when anything but metadata changed. An update
// without a resourceVersion gets old's, as kubectl apply and replace send the live object's.
func (k *Kind) PrepareForUpdate(u, old *unstructured.Unstructured) {
	if u.GetResourceVersion() == "" {
		u.SetResourceVersion(old.GetResourceVersion())
	}
	if u.GetUID() == "" {
		u.SetUID(old.GetUID())
	}
	if ts := old.GetCreationTimestamp(); !ts.IsZero() {
		u.SetCreationTimestamp(ts)
	}
	if k.hasStatus {
		if status, ok := old.Object["status"]; ok {
			u.Object["status"] = status
		} else {
			delete(u.Object, "status")
		}
	}
	u.SetGeneration(old.GetGeneration())
	if !equality.Semantic.DeepEqual(withoutMetadata(u.Object), withoutMetadata(old.Object)) {
		u.SetGeneration(old.GetGeneration() + 1)
	}
}

// withoutMetadata is a shallow copy of obj without its metadata.
func withoutMetadata(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// ValidateCreate validates a prepared new object as the apiserver does on create: object metadata, the
// OpenAPI schema, the scale subresource's paths, embedded objects, list types and, unless one of those
// errors blocks them, the CEL rules; then the name as a path segment. It returns nil or an Invalid
// *apierrors.StatusError whose message is the apiserver's (`<Kind>.<group> "<name>" is invalid: ...`).
func (k *Kind) ValidateCreate(ctx context.Context, u *unstructured.Unstructured) error {
	errs := metavalidation.ValidateObjectMetaAccessor(u, k.Namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.Object, k.validator)...)
	errs = append(errs, k.validateScale(u.Object)...)
	errs = append(errs, k.validateStructure(ctx, u.Object, errs)...)
	if len(errs) == 0 {
		// The generic metadata check runs once the kind's own checks pass, as in the apiserver.
		errs = metavalidation.ValidateObjectMetaAccessor(u, k.Namespaced, pathSegmentName, field.NewPath("metadata"))
	}
	return k.invalid(u, errs)
}

// ValidateUpdate validates a prepared update as the apiserver does, against the stored object old: the
// common metadata rules, then the kind's rules with ratcheting (an invalid value the old object already
// had is not an error), including the CEL transition rules that compare self with oldSelf. It returns
// nil or an Invalid *apierrors.StatusError.
func (k *Kind) ValidateUpdate(ctx context.Context, u, old *unstructured.Unstructured) error {
	metaPath := field.NewPath("metadata")
	// The rules every resource shares come first...
	errs := metavalidation.ValidateObjectMetaAccessor(u, k.Namespaced, pathSegmentName, metaPath)
	errs = append(errs, metavalidation.ValidateObjectMetaAccessorUpdate(u, old, metaPath)...)
	// ...then the kind's own, which check the metadata update again (the apiserver does so too; the
	// message lists a repeated error once).
	correlated := common.NewCorrelatedObject(u.Object, old.Object, &model.Structural{Structural: k.structural})
	own := metavalidation.ValidateObjectMetaAccessorUpdate(u, old, metaPath)
	own = append(own, apiservervalidation.ValidateCustomResourceUpdate(nil, u.Object, old.Object, k.validator, apiservervalidation.WithRatcheting(correlated))...)
	own = append(own, k.validateScale(u.Object)...)
	own = append(own, k.validateStructureUpdate(ctx, u.Object, old.Object, own, correlated)...)
	return k.invalid(u, append(errs, own...))
}

// validateStructure checks embedded objects and list types, then the CEL rules unless one of their
// errors or of the earlier ones blocks them.
func (k *Kind) validateStructure(ctx context.Context, obj map[string]any, earlier field.ErrorList) field.ErrorList {
	errs := schemaobjectmeta.Validate(nil, obj, k.structural, false)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, k.structural, obj)...)
	return append(errs, k.validateCEL(ctx, obj, nil, slices.Concat(earlier, errs))...)
}

// validateStructureUpdate is validateStructure for an update: list types are only checked when the old
// object passed them, and the CEL rules see oldSelf and ratchet.
func (k *Kind) validateStructureUpdate(ctx context.Context, obj, old map[string]any, earlier field.ErrorList, correlated *common.CorrelatedObject) field.ErrorList {
	errs := schemaobjectmeta.Validate(nil, obj, k.structural, false)
	if oldErrs := structurallisttype.ValidateListSetsAndMaps(nil, k.structural, old); len(oldErrs) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, k.structural, obj)...)
	}
	return append(errs, k.validateCEL(ctx, obj, old, slices.Concat(earlier, errs), cel.WithRatcheting(correlated))...)
}

// validateCEL evaluates the CEL rules, or reports that they were skipped when earlier holds an error
// that makes the object too malformed for them (a wrong type, a missing required field, a value that is
// not allowed, too long or has too many items).
func (k *Kind) validateCEL(ctx context.Context, obj, old map[string]any, earlier field.ErrorList, opts ...cel.Option) field.ErrorList {
	v := k.cel()
	if v == nil {
		return nil
	}
	for _, e := range earlier {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.ErrorList{field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")}
		}
	}
	var oldObj any
	if old != nil {
		oldObj = old
	}
	errs, _ := v.Validate(ctx, nil, k.structural, obj, oldObj, celconfig.RuntimeCELCostBudget, opts...)
	return errs
}

// validateScale checks the replica counts and label selector that the scale subresource reads.
func (k *Kind) validateScale(obj map[string]any) field.ErrorList {
	if k.scale == nil {
		return nil
	}
	errs := replicasErrors(obj, k.scale.SpecReplicasPath)
	errs = append(errs, replicasErrors(obj, k.scale.StatusReplicasPath)...)
	if p := k.scale.LabelSelectorPath; p != nil {
		if selector, _, err := unstructured.NestedString(obj, splitPath(*p)...); err != nil {
			errs = append(errs, field.Invalid(field.NewPath(*p), selector, err.Error()))
		}
	}
	return errs
}

// replicasErrors checks the replica count at a scale path (.spec.replicas): an integer, absent or from
// 0 to the largest int32.
func replicasErrors(obj map[string]any, p string) field.ErrorList {
	n, _, err := unstructured.NestedInt64(obj, splitPath(p)...)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(field.NewPath(p), n, err.Error())}
	case n < 0:
		return field.ErrorList{field.Invalid(field.NewPath(p), n, "should be a non-negative integer")}
	case n > math.MaxInt32:
		return field.ErrorList{field.Invalid(field.NewPath(p), n, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32))}
	}
	return nil
}

// splitPath splits a subresource path such as .spec.replicas into its fields.
func splitPath(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "."), ".")
}

// pathSegmentName is the apiserver's generic name rule: a name must be usable as a URL path segment.
func pathSegmentName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// invalid returns the apiserver's Invalid error for errs, or nil when there are none.
func (k *Kind) invalid(u *unstructured.Unstructured, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(k.GVK.GroupKind(), u.GetName(), errs)
}
