package localrun

import (
	"encoding/json"
	"fmt"
	"io"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var errIOEOF = io.EOF

// webhookObject decodes a webhook configuration and rewrites its client configs to URLs; other
// kinds (a kustomization) yield nil.
func webhookObject(kind string, raw map[string]any, baseURL string) (client.Object, error) {
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "MutatingWebhookConfiguration":
		obj := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := json.Unmarshal(data, obj); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kind, err)
		}
		for i := range obj.Webhooks {
			cc := &obj.Webhooks[i].ClientConfig
			cc.URL, cc.Service = url(baseURL, cc.Service), nil
		}
		return obj, nil
	case "ValidatingWebhookConfiguration":
		obj := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := json.Unmarshal(data, obj); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kind, err)
		}
		for i := range obj.Webhooks {
			cc := &obj.Webhooks[i].ClientConfig
			cc.URL, cc.Service = url(baseURL, cc.Service), nil
		}
		return obj, nil
	}
	return nil, nil
}
