package operator_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/aws"
	"github.com/joiner-dev/joiner/testbed"
)

// TestOperatorRegistersTheDocumentedMetrics builds the operator (without starting it) and lists
// what it registered. Vector metrics have no series before they are used, so the list comes from
// the registered collectors' descriptions rather than from a scrape.
func TestOperatorRegistersTheDocumentedMetrics(t *testing.T) {
	// wantMetrics is every metric the operator registers with any provider, as "name type
	// {labels}" with the labels sorted. The README's Metrics section lists the same, and awsMetrics. Names and labels of the karpenter_ ones
	// follow Karpenter v1.14, so that its dashboards and alerts work unchanged: renaming one by
	// accident must fail here.
	wantMetrics := []string{
		"karpenter_cloudprovider_duration_seconds histogram {controller,method,provider}",
		"karpenter_cloudprovider_errors_total counter {controller,error,method,provider}",
		"karpenter_nodeclaims_created_total counter {min_values_relaxed,nodepool,reason}",
		"karpenter_nodeclaims_disrupted_total counter {capacity_type,nodepool,reason}",
		"karpenter_nodeclaims_drifted_total counter {nodepool,type}",
		"karpenter_nodeclaims_terminated_total counter {capacity_type,nodepool,zone}",
		"karpenter_nodeclaims_termination_duration_seconds histogram {nodepool}",
		"karpenter_nodepools_allowed_disruptions gauge {nodepool,reason}",
		"karpenter_nodepools_limit gauge {nodepool,resource_type}",
		"karpenter_nodepools_nodes_consuming_budgets gauge {nodepool,reason}",
		"karpenter_nodepools_usage gauge {nodepool,resource_type}",
		"karpenter_nodes_created_total counter {nodepool,zone}",
		"karpenter_nodes_drained_total counter {nodepool}",
		"karpenter_nodes_terminated_total counter {nodepool,zone}",
		"karpenter_nodes_termination_duration_seconds summary {nodepool}",
		"karpenter_pods_drained_total counter {reason}",
		"karpenter_pods_eviction_requests_total counter {code}",
		"karpenter_pods_state gauge {arch,capacity_type,instance_type,name,namespace,node,nodepool,owner,phase,ready,zone}",
		"karpenter_scheduler_scheduling_duration_seconds histogram {controller}",
		"karpenter_scheduler_unschedulable_pods_count gauge {controller}",
		"karpenter_voluntary_disruption_consolidation_timeouts_total counter {consolidation_type}",
		"karpenter_voluntary_disruption_decision_evaluation_duration_seconds histogram {consolidation_type,reason}",
		"karpenter_voluntary_disruption_decisions_by_nodepool_total counter {consolidation_type,decision,nodepool,reason}",
		"karpenter_voluntary_disruption_decisions_total counter {consolidation_type,decision,reason}",
		"karpenter_voluntary_disruption_eligible_nodes gauge {reason}",
		"karpenter_voluntary_disruption_failed_validations_total counter {consolidation_type}",
		"karpenter_voluntary_disruption_queue_failures_total counter {consolidation_type,decision,reason}",
		"joiner_audit_duration_seconds histogram {}",
		"joiner_audit_runs_total counter {}",
		"joiner_audit_violations gauge {enforcement_action,policy}",
		"joiner_build_info gauge {commit,goarch,goversion,version}",
		"joiner_garbage_collection_instances_terminated_total counter {}",
		"joiner_nodeclaims_adopted_total counter {nodepool}",
		"joiner_nodeclaims_initialized_total counter {nodepool}",
		"joiner_tenancy_refused_nodeclaims_total counter {controller,nodepool}",
		"joiner_webhook_cert_expiry_timestamp_seconds gauge {cert}",
		"joiner_webhook_cert_rotations_total counter {cert}",
		"joiner_webhook_policy_evaluation_errors_total counter {action,kind,policy}",
		"joiner_webhook_policy_violations_total counter {action,kind,policy}",
	}
	// awsMetrics are registered only by the AWS provider's controllers: the instance status
	// poller's, and the interruption controller's with an interruption queue.
	awsMetrics := []string{
		"joiner_interruption_instance_status_errors_total counter {error}",
		"karpenter_interruption_deleted_messages_total counter {}",
		"karpenter_interruption_instance_status_unhealthy_total counter {category}",
		"karpenter_interruption_message_queue_duration_seconds histogram {}",
		"karpenter_interruption_received_messages_total counter {message_type}",
	}
	// gatedMetrics are registered only with a feature gate on: node repair's (NodeRepair).
	gatedMetrics := []string{
		"karpenter_nodeclaims_unhealthy_disrupted_total counter {capacity_type,condition,image_id,nodepool}",
	}
	env := testbed.StartForTest(t, testbed.Options{CRDDirs: []string{"../config/crd/bases"}})
	all := slices.Sorted(slices.Values(slices.Concat(wantMetrics, awsMetrics, gatedMetrics)))
	if readme := readmeMetrics(t, "../README.md"); !slices.Equal(readme, all) {
		t.Errorf("the README's Metrics table does not match what the operator registers with the AWS provider:\nREADME:     %q\nregistered: %q", readme, all)
	}
	awsConfig := awssdk.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("metrics", "test", "")}
	tests := []struct {
		name     string
		provider cloudprovider.Factory
		gates    controllers.Options
		want     []string
	}{
		{name: "fake", provider: cloudprovider.Static(fake.New()), want: wantMetrics},
		{name: "fake with every gate on", provider: cloudprovider.Static(fake.New()),
			gates: controllers.Options{NodeRepair: true, CapacityBuffer: true}, want: slices.Concat(wantMetrics, gatedMetrics)},
		// Building the AWS provider calls no AWS API.
		{name: "aws", want: all, gates: controllers.Options{NodeRepair: true}, provider: aws.Factory(aws.FactoryOptions{
			Options: aws.Options{ClusterName: "metrics", ClusterEndpoint: "https://127.0.0.1", ClusterCABundle: "Q0E=", ServiceCIDR: "10.96.0.0/12"},
			Config:  &awsConfig, InterruptionQueue: "metrics-interruption",
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := &recordingRegisterer{Registry: prometheus.NewRegistry()}
			_, err := operator.New(env.Config, operator.Options{
				CloudProvider:                tt.provider,
				Controllers:                  tt.gates,
				Registerer:                   reg,
				MetricsAddr:                  "0",
				ProbeAddr:                    "0",
				Namespace:                    "joiner-metrics-test",
				Log:                          testr.New(t),
				SkipControllerNameValidation: true,
			})
			if err != nil {
				t.Fatalf("build the operator: %v", err)
			}
			got := reg.describe(t)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				for _, m := range got {
					if !slices.Contains(want, m) {
						t.Errorf("registered but not documented: %s", m)
					}
				}
				for _, m := range want {
					if !slices.Contains(got, m) {
						t.Errorf("documented but not registered: %s", m)
					}
				}
			}
			// Every collector must describe a metric: one that describes none escapes the list above.
			if families, err := reg.Gather(); err != nil {
				t.Errorf("gather: %v", err)
			} else {
				for _, f := range families {
					if name := f.GetName(); !slices.ContainsFunc(want, func(m string) bool { return strings.HasPrefix(m, name+" ") }) {
						t.Errorf("gathered undocumented metric %s", name)
					}
				}
			}
		})
	}
}

// readmeMetrics reads the README's Metrics table as "name type {labels}" lines, sorted.
func readmeMetrics(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the README: %v", err)
	}
	row := regexp.MustCompile("^\\| `((?:karpenter|joiner)_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\|")
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		out = append(out, fmt.Sprintf("%s %s {%s}", m[1], m[2], strings.Join(labels, ",")))
	}
	slices.Sort(out)
	return out
}

// recordingRegisterer registers into its Registry and remembers every collector it accepted.
type recordingRegisterer struct {
	*prometheus.Registry

	mu         sync.Mutex
	collectors []prometheus.Collector
}

// Register registers c and remembers it when the registry accepts it.
func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister registers cs, panicking on the first error.
func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// describe returns "name type {labels}" for every metric the recorded collectors describe, sorted.
func (r *recordingRegisterer) describe(t *testing.T) []string {
	t.Helper()
	descPattern := regexp.MustCompile(`fqName: "([^"]*)".*variableLabels: \{([^}]*)\}`)
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.collectors {
		kind := metricType(t, c)
		ch := make(chan *prometheus.Desc, 16)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			m := descPattern.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			var labels []string
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			slices.Sort(labels)
			out = append(out, fmt.Sprintf("%s %s {%s}", m[1], kind, strings.Join(labels, ",")))
		}
	}
	slices.Sort(out)
	return out
}

// metricType names the type of the metrics c collects.
func metricType(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	case interface{ ValueType() prometheus.ValueType }:
		// A collector that computes its series when scraped, and may have none now, says its type.
		if c.(interface{ ValueType() prometheus.ValueType }).ValueType() == prometheus.GaugeValue {
			return "gauge"
		}
		return "counter"
	}
	// A plain metric always has its one series.
	ch := make(chan prometheus.Metric, 16)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	kind := ""
	for m := range ch {
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		switch {
		case out.Counter != nil:
			kind = "counter"
		case out.Gauge != nil:
			kind = "gauge"
		case out.Histogram != nil:
			kind = "histogram"
		case out.Summary != nil:
			kind = "summary"
		}
	}
	if kind == "" {
		t.Fatalf("cannot tell the type of %T", c)
	}
	return kind
}
