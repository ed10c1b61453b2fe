package cloudformation_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// eventBridge calls the EventBridge JSON API with the credentials and endpoint of an aws.Config
// (the module has no EventBridge SDK client; the test needs three calls).
type eventBridge struct {
	cfg aws.Config
}

// rule is an EventBridge rule with its targets' ARNs.
type rule struct {
	Name, State, EventPattern string
	Targets                   []string
}

// call sends one AWSEvents operation with in as its JSON body and decodes the answer into out.
func (e eventBridge) call(ctx context.Context, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(aws.ToString(e.cfg.BaseEndpoint), "/")+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "AWSEvents."+op)
	creds, err := e.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "events", e.cfg.Region, time.Now()); err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("events:%s: %w", op, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("events:%s: read the answer: %w", op, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("events:%s: HTTP %d: %.300s", op, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("events:%s: decode %.300s: %w", op, data, err)
	}
	return nil
}

// rules returns the rules of the default bus whose names start with prefix, with their targets.
func (e eventBridge) rules(ctx context.Context, prefix string) ([]rule, error) {
	var list struct {
		Rules []rule
	}
	if err := e.call(ctx, "ListRules", map[string]any{"NamePrefix": prefix}, &list); err != nil {
		return nil, err
	}
	for i, r := range list.Rules {
		var targets struct {
			Targets []struct{ Arn string }
		}
		if err := e.call(ctx, "ListTargetsByRule", map[string]any{"Rule": r.Name}, &targets); err != nil {
			return nil, err
		}
		for _, t := range targets.Targets {
			list.Rules[i].Targets = append(list.Rules[i].Targets, t.Arn)
		}
	}
	return list.Rules, nil
}

// put sends one event to the default bus, as EC2 or AWS Health would.
func (e eventBridge) put(ctx context.Context, source, detailType string, detail map[string]any) error {
	d, err := json.Marshal(detail)
	if err != nil {
		return err
	}
	var out struct {
		FailedEntryCount int
		Entries          []struct{ ErrorCode, ErrorMessage string }
	}
	in := map[string]any{"Entries": []map[string]any{{"Source": source, "DetailType": detailType, "Detail": string(d)}}}
	if err := e.call(ctx, "PutEvents", in, &out); err != nil {
		return err
	}
	if out.FailedEntryCount != 0 {
		return fmt.Errorf("events:PutEvents refused %s %q: %+v", source, detailType, out.Entries)
	}
	return nil
}
