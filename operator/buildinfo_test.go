package operator

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestBuildInfoMetric: joiner_build_info is 1 with the stamped version and commit (dev and unknown
// when the binary was not stamped), and building the operator twice against one registry works.
func TestBuildInfoMetric(t *testing.T) {
	tests := []struct {
		name                    string
		bi                      BuildInfo
		wantVersion, wantCommit string
	}{
		{name: "plain go build", wantVersion: "dev", wantCommit: "unknown"},
		{name: "make image", bi: BuildInfo{Version: "0.1.0", Commit: "0123abc"}, wantVersion: "0.1.0", wantCommit: "0123abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			for range 2 {
				if err := registerBuildInfo(reg, tt.bi); err != nil {
					t.Fatal(err)
				}
			}
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			if len(families) != 1 || families[0].GetName() != "joiner_build_info" || len(families[0].GetMetric()) != 1 {
				t.Fatalf("gathered %v, want one joiner_build_info series", families)
			}
			m := families[0].GetMetric()[0]
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			want := map[string]string{"version": tt.wantVersion, "commit": tt.wantCommit, "goversion": runtime.Version(), "goarch": runtime.GOARCH}
			if len(labels) != len(want) {
				t.Errorf("labels %v, want %v", labels, want)
			}
			for k, v := range want {
				if labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, labels[k], v)
				}
			}
			if v := m.GetGauge().GetValue(); v != 1 {
				t.Errorf("value %v, want 1", v)
			}
		})
	}
}
