package operator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTuneMemoryLimit(t *testing.T) {
	const gi = int64(1) << 30
	tests := []struct {
		name      string
		env       map[string]string
		cgroup    *string // contents of memory.max; nil: no such file
		wantLimit int64   // what debug.SetMemoryLimit receives; 0: not called
		wantFrom  string  // "cgroup" stands for the file's path
		wantErr   string
	}{
		{"cgroup limit", nil, ptr("1073741824\n"), gi / 100 * 90, "cgroup", ""},
		{"cgroup without a limit: the default", nil, ptr("max\n"), DefaultMemoryLimit, MemoryLimitDefault, ""},
		{"no cgroup v2 file: the default", nil, nil, DefaultMemoryLimit, MemoryLimitDefault, ""},
		{"downward API in bytes", map[string]string{MemoryLimitEnv: "1073741824"}, nil, gi / 100 * 90, MemoryLimitEnv, ""},
		{"downward API as a quantity", map[string]string{MemoryLimitEnv: "2Gi"}, ptr("max"), 2 * gi / 100 * 90, MemoryLimitEnv, ""},
		{"both: the smaller wins (cgroup)", map[string]string{MemoryLimitEnv: "2Gi"}, ptr("1073741824"), gi / 100 * 90, "cgroup", ""},
		{"both: the smaller wins (environment)", map[string]string{MemoryLimitEnv: "512Mi"}, ptr("1073741824"), gi / 2 / 100 * 90, MemoryLimitEnv, ""},
		{"GOMEMLIMIT set: left to the runtime", map[string]string{"GOMEMLIMIT": "300MiB", MemoryLimitEnv: "1Gi"}, ptr("1073741824"), 0, "GOMEMLIMIT", ""},
		{"malformed environment: cgroup still used", map[string]string{MemoryLimitEnv: "lots"}, ptr("1073741824"), gi / 100 * 90, "cgroup", MemoryLimitEnv + `="lots"`},
		{"zero in the environment", map[string]string{MemoryLimitEnv: "0"}, nil, DefaultMemoryLimit, MemoryLimitDefault, "must be positive"},
		{"malformed cgroup file", nil, ptr("unlimited"), DefaultMemoryLimit, MemoryLimitDefault, `holds "unlimited"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory.max")
			if tc.cgroup != nil {
				if err := os.WriteFile(path, []byte(*tc.cgroup), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var set int64
			calls := 0
			limit, from, err := tuneMemoryLimit(func(k string) string { return tc.env[k] }, path, func(n int64) int64 { calls++; set = n; return 0 })
			if tc.wantFrom == "cgroup" {
				tc.wantFrom = path
			}
			if limit != tc.wantLimit || set != tc.wantLimit || (calls == 0) != (tc.wantLimit == 0) || from != tc.wantFrom {
				t.Errorf("limit %d from %q, SetMemoryLimit(%d) called %d times; want %d from %q", limit, from, set, calls, tc.wantLimit, tc.wantFrom)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func ptr(s string) *string { return &s }
