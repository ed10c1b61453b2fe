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
		return decodeWebhooks(data, kind, obj, func() {
			for i := range obj.Webhooks {
				pointAt(&obj.Webhooks[i].ClientConfig, baseURL)
			}
		})
	case "ValidatingWebhookConfiguration":
		obj := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		return decodeWebhooks(data, kind, obj, func() {
			for i := range obj.Webhooks {
				pointAt(&obj.Webhooks[i].ClientConfig, baseURL)
			}
		})
	}
	return nil, nil
}

// decodeWebhooks decodes data into obj, then lets repoint aim its webhooks at the local server.
func decodeWebhooks(data []byte, kind string, obj client.Object, repoint func()) (client.Object, error) {
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, fmt.Errorf("decode %s: %w", kind, err)
	}
	repoint()
	return obj, nil
}

// pointAt makes cc call the webhook server at baseURL directly instead of through a Service.
func pointAt(cc *admissionregistrationv1.WebhookClientConfig, baseURL string) {
	cc.URL, cc.Service = url(baseURL, cc.Service), nil
}
