package testbed

import (
	"slices"
	"testing"
)

func TestClientRateArgs(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{name: "unset: the components' defaults", opts: Options{}, want: nil},
		{name: "raised", opts: Options{ClientQPS: 1000, ClientBurst: 2000}, want: []string{"--kube-api-qps=1000", "--kube-api-burst=2000"}},
		{name: "a burst below the rate is raised to it", opts: Options{ClientQPS: 1000, ClientBurst: 10}, want: []string{"--kube-api-qps=1000", "--kube-api-burst=1000"}},
		{name: "a burst alone changes nothing", opts: Options{ClientBurst: 500}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.opts.clientRateArgs(); !slices.Equal(got, tt.want) {
				t.Errorf("clientRateArgs() = %v, want %v", got, tt.want)
			}
		})
	}
}
