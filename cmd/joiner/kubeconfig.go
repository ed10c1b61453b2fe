package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/joiner-dev/joiner/fileinput"
)

// restConfig loads the kubeconfig of a command that talks to a cluster: explicit (--kubeconfig), else the
// files of $KUBECONFIG, else ~/.kube/config, merged as kubectl merges them. Each file is first read
// through the input layer, so that a FIFO, a device, a binary, an empty file or one over maxFileSize is
// refused with an error naming it, and a signal stops the read; client-go then reads the files again to
// merge them.
func restConfig(ctx context.Context, explicit string, maxFileSize int64) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = explicit
	paths := rules.Precedence
	if explicit != "" {
		paths = []string{explicit}
	}
	for _, p := range paths {
		data, err := fileinput.ReadFile(ctx, p, fileinput.Options{MaxFileSize: maxFileSize})
		if explicit == "" && errors.Is(err, fs.ErrNotExist) {
			continue // as client-go, which skips the missing files of $KUBECONFIG
		}
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, fmt.Errorf("kubeconfig: read %s: it is empty; name a kubeconfig that holds a cluster and credentials with --kubeconfig", p)
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no Kubernetes configuration (--kubeconfig, $KUBECONFIG or ~/.kube/config): %w", err)
	}
	return cfg, nil
}
