package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	cpmetrics "github.com/joiner-dev/joiner/cloudprovider/metrics"
)

const (
	durationName = "karpenter_cloudprovider_duration_seconds"
	errorsName   = "karpenter_cloudprovider_errors_total"
)

func nodeClaim(providerID string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "nc", Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}},
		Status:     karpv1.NodeClaimStatus{ProviderID: providerID},
	}
}

func TestDecoratorMeasuresEveryMethod(t *testing.T) {
	cases := []struct {
		name   string
		method string
		// setup configures the fake provider before the call.
		setup func(*fake.CloudProvider)
		call  func(context.Context, cloudprovider.CloudProvider) error
		// wantError is the error label of the one error counted, or nil when none is.
		wantError *string
	}{
		{name: "create succeeds", method: cpmetrics.MethodCreate,
			call: func(ctx context.Context, cp cloudprovider.CloudProvider) error {
				_, err := cp.Create(ctx, nodeClaim(""))
				return err
			}},
		{name: "create runs out of capacity", method: cpmetrics.MethodCreate, wantError: ptr("InsufficientCapacityError"),
			setup: func(f *fake.CloudProvider) { f.InsufficientCapacity = []fake.CapacityPool{{}} },
			call: func(ctx context.Context, cp cloudprovider.CloudProvider) error {
				_, err := cp.Create(ctx, nodeClaim(""))
				return err
			}},
		{name: "create fails with a create error", method: cpmetrics.MethodCreate, wantError: ptr("CreateError"),
			setup: func(f *fake.CloudProvider) {
				f.FailNextCreate(fmt.Errorf("launch: %w", cloudprovider.NewCreateError(errors.New("boom"), "Boom", "it broke")))
			},
			call: func(ctx context.Context, cp cloudprovider.CloudProvider) error {
				_, err := cp.Create(ctx, nodeClaim(""))
				return err
			}},
		{name: "delete of a missing machine", method: cpmetrics.MethodDelete, wantError: ptr("NodeClaimNotFoundError"),
			call: func(ctx context.Context, cp cloudprovider.CloudProvider) error {
				return cp.Delete(ctx, nodeClaim("fake:///zone/404"))
			}},
		{name: "get fails with an untyped error", method: cpmetrics.MethodGet, wantError: ptr(""),
			setup: func(f *fake.CloudProvider) { f.FailNextGet(errors.New("connection refused")) },
			call: func(ctx context.Context, cp cloudprovider.CloudProvider) error {
				_, err := cp.Get(ctx, "fake:///zone/1")
				return err
			}},
		{name: "list succeeds", method: cpmetrics.MethodList,
			call: func(ctx context.Context, cp cloudprovider.CloudProvider) error {
				_, err := cp.List(ctx)
				return err
			}},
		{name: "instance types of a node class that is not ready", method: cpmetrics.MethodGetInstanceTypes, wantError: ptr("NodeClassNotReadyError"),
			setup: func(f *fake.CloudProvider) {
				f.ErrorsForNodePool = map[string]error{"default": cloudprovider.NewNodeClassNotReadyError(errors.New("not yet"))}
			},
			call: func(ctx context.Context, cp cloudprovider.CloudProvider) error {
				_, err := cp.GetInstanceTypes(ctx, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
				return err
			}},
		{name: "drift check", method: cpmetrics.MethodIsDrifted,
			call: func(ctx context.Context, cp cloudprovider.CloudProvider) error {
				_, err := cp.IsDrifted(ctx, nodeClaim("fake:///zone/1"))
				return err
			}},
		{name: "name", method: cpmetrics.MethodName,
			call: func(_ context.Context, cp cloudprovider.CloudProvider) error {
				if got := cp.Name(); got != "fake" {
					return fmt.Errorf("name %q", got)
				}
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			f := fake.New()
			if tc.setup != nil {
				tc.setup(f)
			}
			d, err := cpmetrics.Decorate(f, reg)
			if err != nil {
				t.Fatal(err)
			}
			err = tc.call(t.Context(), cpmetrics.ForController(d, "nodeclaim.lifecycle"))
			if (err != nil) != (tc.wantError != nil) {
				t.Fatalf("call returned %v, want an error: %v", err, tc.wantError != nil)
			}
			families := gather(t, reg)
			calls := series(families[durationName])
			want := fmt.Sprintf("controller=nodeclaim.lifecycle,method=%s,provider=fake", tc.method)
			if len(calls) != 1 || calls[want] == nil || calls[want].GetHistogram().GetSampleCount() != 1 {
				t.Errorf("duration series %v, want one sample of {%s}", keys(calls), want)
			}
			errs := series(families[errorsName])
			if tc.wantError == nil {
				if len(errs) != 0 {
					t.Errorf("error series %v, want none", keys(errs))
				}
				return
			}
			wantErr := fmt.Sprintf("controller=nodeclaim.lifecycle,error=%s,method=%s,provider=fake", *tc.wantError, tc.method)
			if len(errs) != 1 || errs[wantErr].GetCounter().GetValue() != 1 {
				t.Errorf("error series %v, want {%s} = 1", keys(errs), wantErr)
			}
		})
	}
}

func TestViewsShareMetricsAndNameTheirController(t *testing.T) {
	reg := prometheus.NewRegistry()
	d, err := cpmetrics.Decorate(fake.New(), reg)
	if err != nil {
		t.Fatal(err)
	}
	// A second decoration against the same registry reuses the metrics rather than failing.
	again, err := cpmetrics.Decorate(fake.New(), reg)
	if err != nil {
		t.Fatalf("second Decorate: %v", err)
	}
	ctx := t.Context()
	for _, cp := range []cloudprovider.CloudProvider{
		d.For("provisioner"), d.For("provisioner"), cpmetrics.ForController(d, "nodeclaim.garbagecollection"),
		again.For("provisioner"), d,
	} {
		if _, err := cp.List(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]uint64{}
	for k, m := range series(gather(t, reg)[durationName]) {
		got[k] = m.GetHistogram().GetSampleCount()
	}
	want := map[string]uint64{
		"controller=provisioner,method=List,provider=fake":                 3,
		"controller=nodeclaim.garbagecollection,method=List,provider=fake": 1,
		"controller=,method=List,provider=fake":                            1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("samples %v, want %v", got, want)
	}
}

func TestForControllerLeavesOtherProvidersAlone(t *testing.T) {
	f := fake.New()
	if got := cpmetrics.ForController(f, "x"); got != cloudprovider.CloudProvider(f) {
		t.Errorf("ForController wrapped an undecorated provider: %T", got)
	}
	d, err := cpmetrics.Decorate(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Unwrap(); got != cloudprovider.CloudProvider(f) {
		t.Errorf("Unwrap returned %T", got)
	}
	if _, err := cpmetrics.Decorate(nil, nil); err == nil {
		t.Error("Decorate(nil) did not fail")
	}
}

func TestErrorType(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("plain"), ""},
		{cloudprovider.NewInsufficientCapacityError("it", "z", "spot", nil), "InsufficientCapacityError"},
		{fmt.Errorf("wrapped: %w", cloudprovider.NewNodeClaimNotFoundError(nil)), "NodeClaimNotFoundError"},
		{cloudprovider.NewNodeClassNotReadyError(nil), "NodeClassNotReadyError"},
		{cloudprovider.NewCreateError(nil, "R", "m"), "CreateError"},
	}
	for _, tc := range cases {
		if got := cpmetrics.ErrorType(tc.err); got != tc.want {
			t.Errorf("ErrorType(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}

// series indexes a family's metrics by their labels, "k=v,k=v" sorted by name (as Gather sorts them).
func series(f *dto.MetricFamily) map[string]*dto.Metric {
	out := map[string]*dto.Metric{}
	for _, m := range f.GetMetric() {
		key := ""
		for i, l := range m.GetLabel() {
			if i > 0 {
				key += ","
			}
			key += l.GetName() + "=" + l.GetValue()
		}
		out[key] = m
	}
	return out
}

func keys(m map[string]*dto.Metric) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func ptr(s string) *string { return &s }
