// Package bufferpods is what the CapacityBuffer controller, the provisioner and disruption share
// about CapacityBuffers (autoscaling.x-k8s.io/v1beta1): resolving a buffer's unit (the pod template
// of its PodTemplate or of its Deployment, StatefulSet or ReplicaSet), and turning the buffers the
// controller resolved into virtual pods, which the scheduling simulations place after the real
// pending pods so that capacity is launched to keep them free, and consolidation counts their room
// as used. Virtual pods carry Karpenter's capacity-buffer annotations and are never written to the
// apiserver: no pod, nomination or Event ever names one.
//
// It reads through the client it is given and computes; the only write is the Provisioning
// condition the provisioner reports through Set.Report.
package bufferpods

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
)

// Unit is a buffer's resolved unit: the pod template every unit is shaped like.
type Unit struct {
	// Template is the pod template of one unit.
	Template corev1.PodTemplateSpec
	// Generation is the generation of the object the template was read from.
	Generation int64
	// TemplateRef names the PodTemplate, for a buffer with spec.podTemplateRef.
	TemplateRef *autoscalingv1beta1.LocalObjectRef
	// ScalableReplicas are the replicas of the scalableRef's workload (nil for podTemplateRef).
	ScalableReplicas *int32
}

// ResolveError is why a buffer's unit could not be resolved: Reason is the ReadyForProvisioning
// reason (PodTemplateNotFound, ScalableRefNotFound or ResolutionFailed), Message names the field.
type ResolveError struct {
	Reason  string
	Message string
}

func (e *ResolveError) Error() string { return e.Reason + ": " + e.Message }

// Resolve reads the buffer's unit: the PodTemplate spec.podTemplateRef names, or the pod template
// of the Deployment, StatefulSet or ReplicaSet (group apps) spec.scalableRef names, in the buffer's
// namespace. A missing or unsupported reference is a *ResolveError; any other read failure is
// returned wrapped.
func Resolve(ctx context.Context, c client.Reader, cb *autoscalingv1beta1.CapacityBuffer) (*Unit, error) {
	spec := &cb.Spec
	switch {
	case spec.PodTemplateRef != nil && spec.ScalableRef != nil:
		return nil, &ResolveError{autoscalingv1beta1.ReasonResolutionFailed, "spec.podTemplateRef and spec.scalableRef are mutually exclusive: set one"}
	case spec.PodTemplateRef != nil:
		var pt corev1.PodTemplate
		err := c.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: spec.PodTemplateRef.Name}, &pt)
		if apierrors.IsNotFound(err) {
			return nil, &ResolveError{autoscalingv1beta1.ReasonPodTemplateNotFound,
				fmt.Sprintf("spec.podTemplateRef.name: PodTemplate %s/%s not found", cb.Namespace, spec.PodTemplateRef.Name)}
		}
		if err != nil {
			return nil, fmt.Errorf("get PodTemplate %s/%s of CapacityBuffer %s: %w", cb.Namespace, spec.PodTemplateRef.Name, cb.Name, err)
		}
		return &Unit{Template: pt.Template, Generation: pt.Generation, TemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: pt.Name}}, nil
	case spec.ScalableRef != nil:
		return resolveScalable(ctx, c, cb.Namespace, spec.ScalableRef)
	}
	return nil, &ResolveError{autoscalingv1beta1.ReasonResolutionFailed, "set spec.podTemplateRef or spec.scalableRef"}
}

// resolveScalable reads the pod template and replicas of the workload ref names.
func resolveScalable(ctx context.Context, c client.Reader, namespace string, ref *autoscalingv1beta1.ScalableRef) (*Unit, error) {
	if ref.APIGroup != appsv1.GroupName && ref.APIGroup != "" {
		return nil, &ResolveError{autoscalingv1beta1.ReasonResolutionFailed,
			fmt.Sprintf("spec.scalableRef.apiGroup %q is not supported: use apps (Deployment, StatefulSet, ReplicaSet)", ref.APIGroup)}
	}
	var obj client.Object
	switch ref.Kind {
	case "Deployment":
		obj = &appsv1.Deployment{}
	case "StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "ReplicaSet":
		obj = &appsv1.ReplicaSet{}
	default:
		return nil, &ResolveError{autoscalingv1beta1.ReasonResolutionFailed,
			fmt.Sprintf("spec.scalableRef.kind %q is not supported: use Deployment, StatefulSet or ReplicaSet", ref.Kind)}
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, &ResolveError{autoscalingv1beta1.ReasonScalableRefNotFound,
			fmt.Sprintf("spec.scalableRef: %s %s/%s not found", ref.Kind, namespace, ref.Name)}
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
	}
	u := &Unit{Generation: obj.GetGeneration()}
	var replicas *int32
	switch w := obj.(type) {
	case *appsv1.Deployment:
		u.Template, replicas = w.Spec.Template, w.Spec.Replicas
	case *appsv1.StatefulSet:
		u.Template, replicas = w.Spec.Template, w.Spec.Replicas
	case *appsv1.ReplicaSet:
		u.Template, replicas = w.Spec.Template, w.Spec.Replicas
	}
	// An unset replicas means one, as the workload controllers default it.
	n := int32(1)
	if replicas != nil {
		n = *replicas
	}
	u.ScalableReplicas = &n
	return u, nil
}

// IsResolveError reports whether err is a *ResolveError, and returns it.
func IsResolveError(err error) (*ResolveError, bool) {
	var re *ResolveError
	ok := errors.As(err, &re)
	return re, ok
}
