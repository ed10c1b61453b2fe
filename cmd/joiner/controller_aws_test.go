package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/joiner-dev/joiner/providers/aws"
)

func TestControllerAWSFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o aws.FactoryOptions)
	}{
		{name: "cluster name is required", args: []string{"--cloud-provider=aws"},
			wantErr: "joiner controller: --cluster-name is required with --cloud-provider=aws"},
		{name: "defaults", args: []string{"--cloud-provider=aws", "--cluster-name=prod"}, check: func(t *testing.T, o aws.FactoryOptions) {
			if o.ClusterName != "prod" || o.ClusterEndpoint != "" || o.ConfigOptions.EndpointURL != "" || o.InterruptionQueue != "" ||
				o.VMMemoryOverheadPercent != aws.DefaultVMMemoryOverheadPercent || o.ReservedENIs != 0 || o.NodeClass.KubernetesVersion == nil {
				t.Errorf("options %+v", o)
			}
		}},
		{name: "every aws flag", args: []string{"--cloud-provider", "aws", "--cluster-name", "prod", "--cluster-endpoint", "https://api.prod",
			"--aws-endpoint-url", "http://127.0.0.1:5000", "--interruption-queue", "prod-interruption",
			"--vm-memory-overhead-percent", "0.05", "--reserved-enis", "1"}, check: func(t *testing.T, o aws.FactoryOptions) {
			if o.ClusterEndpoint != "https://api.prod" || o.ConfigOptions.EndpointURL != "http://127.0.0.1:5000" ||
				o.InterruptionQueue != "prod-interruption" || o.VMMemoryOverheadPercent != 0.05 || o.ReservedENIs != 1 {
				t.Errorf("options %+v", o)
			}
		}},
		{name: "overhead out of range", args: []string{"--cloud-provider=aws", "--cluster-name=prod", "--vm-memory-overhead-percent=7.5"},
			wantErr: "--vm-memory-overhead-percent 7.5: want a fraction in [0, 1), such as 0.075"},
		{name: "negative reserved ENIs", args: []string{"--cloud-provider=aws", "--cluster-name=prod", "--reserved-enis=-1"},
			wantErr: "--reserved-enis -1: want 0 or more"},
		{name: "unknown provider", args: []string{"--cloud-provider=gcp"},
			wantErr: `--cloud-provider "gcp" is not available in this build; use local or aws`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			f, err := parseControllerFlags(tt.args, &stderr)
			if tt.wantErr != "" {
				if !errors.Is(err, errBadFlags) || !strings.Contains(stderr.String(), tt.wantErr) {
					t.Fatalf("err = %v, stderr %q; want errBadFlags and %q", err, stderr.String(), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v\n%s", err, stderr.String())
			}
			if f.cloudProvider != aws.Name {
				t.Fatalf("cloud provider %q", f.cloudProvider)
			}
			version := func(context.Context) (string, error) { return "1.36", nil }
			tt.check(t, f.awsFactoryOptions(logr.Discard(), version))
		})
	}
}
