package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o options)
	}{
		{name: "defaults", check: func(t *testing.T, o options) {
			if o.apiServerPort != 0 || o.kubeconfigOut != ".cache/run/kubeconfig" || o.crdDir != "config/crd/bases" {
				t.Errorf("unexpected defaults %+v", o)
			}
		}},
		{name: "port", args: []string{"--apiserver-port", "6443"}, check: func(t *testing.T, o options) {
			if o.apiServerPort != 6443 {
				t.Errorf("port = %d", o.apiServerPort)
			}
		}},
		{name: "port out of range", args: []string{"--apiserver-port", "70000"}, wantErr: "out of range"},
		{name: "stray argument", args: []string{"up"}, wantErr: "unexpected arguments"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			o, err := parseFlags(tt.args, &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, o)
		})
	}
}

func TestHelp(t *testing.T) {
	var stderr bytes.Buffer
	_, err := parseFlags([]string{"--help"}, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: joiner-local", "-apiserver-port", "Ctrl-C"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stderr.String())
		}
	}
}
