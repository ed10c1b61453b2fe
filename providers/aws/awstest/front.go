package awstest

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// front is the HTTP server clients talk to. It counts every request by operation, answers
// injected failures, serves what moto lacks (published SSM parameters, capacity reservations)
// and the instance health tests set (instancestatus.go), and forwards everything else to moto
// unchanged.
type front struct {
	proxy *httputil.ReverseProxy
	// moto is moto_server's URL, and client calls it directly (for the fleet fix-ups).
	moto   *url.URL
	client *http.Client

	mu           sync.Mutex
	calls        map[string]int
	failures     map[string][]injectedError
	params       map[string]*string // SetParameter overrides; nil marks a deleted parameter
	reservations []CapacityReservation
	health       map[string]InstanceHealth // SetInstanceHealth, by instance ID
	seq          int
}

type injectedError struct {
	status int
	code   string
}

func newFront(motoEndpoint string) (*front, error) {
	u, err := url.Parse(motoEndpoint)
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	// A client that gave up (its context ended) is no news; anything else answers 502.
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() == nil {
			http.Error(w, "awstest: forward to moto: "+err.Error(), http.StatusBadGateway)
		}
	}
	return &front{
		proxy:    proxy,
		moto:     u,
		client:   &http.Client{Timeout: time.Minute},
		calls:    map[string]int{},
		failures: map[string][]injectedError{},
		params:   map[string]*string{},
	}, nil
}

// Calls returns how many requests for op reached the front, failed ones included. op is
// "service:Action" with the service's signing name, such as "ec2:DescribeSubnets",
// "ssm:GetParameter" or "iam:CreateInstanceProfile".
func (m *Moto) Calls(op string) int {
	m.front.mu.Lock()
	defer m.front.mu.Unlock()
	return m.front.calls[op]
}

// FailNext makes the next n requests for op (as in Calls) fail with the HTTP status and error
// code, in the service's wire format. An empty code means the service's throttling code
// (RequestLimitExceeded for EC2, Throttling for IAM, ThrottlingException otherwise), so
// FailNext("ec2:DescribeSubnets", 2, 503, "") throttles twice; the SDK's retryer retries both.
func (m *Moto) FailNext(op string, n int, status int, code string) {
	m.front.mu.Lock()
	defer m.front.mu.Unlock()
	for range n {
		m.front.failures[op] = append(m.front.failures[op], injectedError{status: status, code: code})
	}
}

// SetParameter makes the SSM parameter name have value, also under /aws/service/, where moto
// refuses writes: for instance to publish a new "recommended" AMI. It wins over PublishedAMIs.
func (m *Moto) SetParameter(name, value string) {
	m.front.mu.Lock()
	defer m.front.mu.Unlock()
	m.front.params[name] = &value
}

// DeleteParameter hides an SSM parameter set with SetParameter or published for an AMI.
func (m *Moto) DeleteParameter(name string) {
	m.front.mu.Lock()
	defer m.front.mu.Unlock()
	m.front.params[name] = nil
}

// ownedParameterPrefixes are the SSM paths the front answers for; other names go to moto.
var ownedParameterPrefixes = []string{"/aws/service/eks/", "/aws/service/bottlerocket/", "/aws/service/ami-windows-latest/"}

// parameter resolves an SSM parameter held by the front; owned tells whether the front
// answers for the name at all.
func (f *front) parameter(name string) (value string, found, owned bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.params[name]; ok {
		if v == nil {
			return "", false, true
		}
		return *v, true, true
	}
	if id, ok := PublishedParameter(name); ok {
		return id, true, true
	}
	for _, p := range ownedParameterPrefixes {
		if strings.HasPrefix(name, p) {
			return "", false, true
		}
	}
	return "", false, false
}

var credentialScope = regexp.MustCompile(`Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request`)

// awsCall names the AWS API call a request with this body makes: the service it is signed for, and
// the action its X-Amz-Target names (JSON protocols) or, without one, the Action of its query form,
// which it returns too (nil when the body is not a form). Unknown parts are empty.
func awsCall(r *http.Request, body []byte) (service, action string, form url.Values) {
	if m := credentialScope.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		service = m[1]
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		return service, target[strings.LastIndex(target, ".")+1:], nil
	}
	if v, err := url.ParseQuery(string(body)); err == nil {
		form, action = v, v.Get("Action")
	}
	return service, action, form
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_ = r.Body.Close()
	service, action, form := awsCall(r, body)
	op := service + ":" + action

	f.mu.Lock()
	f.calls[op]++
	var fail *injectedError
	if q := f.failures[op]; len(q) > 0 {
		fail, f.failures[op] = &q[0], q[1:]
	}
	f.mu.Unlock()

	switch {
	case fail != nil:
		writeError(w, service, fail.status, fail.code, "injected by awstest.FailNext")
		return
	case op == "ec2:DescribeCapacityReservations":
		f.describeCapacityReservations(w, form)
		return
	case op == "ec2:DescribeInstanceStatus":
		f.describeInstanceStatus(w, r, form)
		return
	case op == "ec2:CreateFleet":
		f.createFleet(w, r, body)
		return
	case op == "ssm:GetParameter" || op == "ssm:GetParameters":
		if f.getParameters(w, action, body) {
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	f.proxy.ServeHTTP(w, r)
}

// writeError answers with an AWS error in the wire format of service.
func writeError(w http.ResponseWriter, service string, status int, code, message string) {
	requestID := fmt.Sprintf("awstest-%d", time.Now().UnixNano())
	switch service {
	case "ec2":
		if code == "" {
			code = "RequestLimitExceeded"
		}
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>`,
			xmlEscape(code), xmlEscape(message), requestID)
	case "iam", "sts":
		if code == "" {
			code = "Throttling"
		}
		kind := "Sender"
		if status >= 500 {
			kind = "Receiver"
		}
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `<ErrorResponse><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId></ErrorResponse>`,
			kind, xmlEscape(code), xmlEscape(message), requestID)
	default: // JSON protocols: SSM, SQS, EKS, pricing
		if code == "" {
			code = "ThrottlingException"
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-ErrorType", code)
		w.Header().Set("X-Amzn-RequestId", requestID)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": message})
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

type ssmParameter struct {
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
	LastModifiedDate float64 `json:"LastModifiedDate"`
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int     `json:"Version"`
}

func newSSMParameter(name, value string) ssmParameter {
	return ssmParameter{
		ARN: "arn:aws:ssm:" + Region + "::parameter" + name, DataType: "text",
		LastModifiedDate: float64(time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC).Unix()),
		Name:             name, Type: "String", Value: value, Version: 1,
	}
}

// getParameters answers GetParameter and GetParameters when the front holds every name asked
// for; it returns false to let moto answer.
func (f *front) getParameters(w http.ResponseWriter, action string, body []byte) bool {
	var in struct {
		Name  string
		Names []string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return false
	}
	if action == "GetParameter" {
		value, found, owned := f.parameter(in.Name)
		switch {
		case found:
			writeJSON(w, map[string]any{"Parameter": newSSMParameter(in.Name, value)})
			return true
		case owned:
			writeError(w, "ssm", http.StatusBadRequest, "ParameterNotFound", fmt.Sprintf("Parameter %s not found.", in.Name))
			return true
		}
		return false
	}
	out := struct {
		Parameters        []ssmParameter
		InvalidParameters []string
	}{Parameters: []ssmParameter{}, InvalidParameters: []string{}}
	for _, name := range in.Names {
		value, found, owned := f.parameter(name)
		switch {
		case !owned:
			return false
		case found:
			out.Parameters = append(out.Parameters, newSSMParameter(name, value))
		default:
			out.InvalidParameters = append(out.InvalidParameters, name)
		}
	}
	writeJSON(w, out)
	return true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(v)
}
