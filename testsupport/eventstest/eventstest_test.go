package eventstest

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
)

func TestDrain(t *testing.T) {
	r := events.NewFakeRecorder(10)
	if got := Drain(r); got != nil {
		t.Errorf("Drain of an empty recorder = %v, want nil", got)
	}
	pod := &corev1.Pod{}
	r.Eventf(pod, nil, corev1.EventTypeNormal, "First", "Act", "one")
	r.Eventf(pod, nil, corev1.EventTypeWarning, "Second", "Act", "two %d", 2)
	want := []string{"Normal First one", "Warning Second two 2"}
	if got := Drain(r); !slices.Equal(got, want) {
		t.Errorf("Drain = %q, want %q", got, want)
	}
	if got := Drain(r); got != nil {
		t.Errorf("a second Drain = %v, want nil: the first must empty the recorder", got)
	}
}
