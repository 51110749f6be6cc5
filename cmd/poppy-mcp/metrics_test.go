package main

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/poppy-mcp/poppy-mcp/internal/testlog"
)

// metricsURL finds the metrics URL serve logs.
var metricsURL = regexp.MustCompile(`msg="serving metrics" url=(http://\S+/metrics)`)

// boundedLabel is what a poppy_mcp_ label value may be: a word of poppy-mcp's
// own (a tool, an outcome, an endpoint kind, a status class). A domain has a
// dot; a user ID, a token or a Company's tool name is none of these words.
var boundedLabel = regexp.MustCompile(`^([a-z_]+|[1-5]xx|429)$`)

// scrape GETs the metrics at u and parses them with Prometheus's own text
// parser.
func scrape(t *testing.T, u string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	resp, body := getWith(t, u, map[string]string{"Accept": "text/plain"})
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v\n%s", err, body)
	}
	return families, body
}

// counted sums the samples of the counter family whose labels include want.
func counted(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	f := families[name]
	if f == nil {
		return 0
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			ok = ok && labels[k] == v
		}
		if ok {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestMetrics: serve over stdio with --metrics-addr serves Prometheus
// metrics on a listener of its own: the waiting-calls gauge and the Go and
// process collectors are there before any call; a tool call against a
// Company counts the call (by tool and outcome) and the requests to the
// Company (by endpoint kind and status class); and no label value is a
// domain, a user ID or anything else not of poppy-mcp's own words.
func TestMetrics(t *testing.T) {
	t.Parallel()
	p := newPerson(t, nil)
	cmd := exec.Command(binary, append([]string{"serve", "--metrics-addr", "127.0.0.1:0"}, p.flags...)...)
	cmd.Env = append(cmd.Environ(), p.env...)
	stderr := &testlog.Buffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	var u string
	waitFor(t, 30*time.Second, "the metrics URL in the log", func() bool {
		m := metricsURL.FindStringSubmatch(stderr.String())
		if m != nil {
			u = m[1]
		}
		return m != nil
	})
	before, _ := scrape(t, u)
	for _, name := range []string{"poppy_mcp_waiting_calls", "poppy_mcp_sign_ins_in_progress", "poppy_mcp_leases_held", "go_goroutines", "process_start_time_seconds"} {
		if before[name] == nil {
			t.Errorf("%s is not exported before any call", name)
		}
	}
	if res, text := call(t, cs, "start_session", map[string]any{"domain": "example.com"}); res.IsError {
		t.Fatalf("start_session: %s", text)
	}
	after, body := scrape(t, u)
	if n := counted(after, "poppy_mcp_tool_calls_total", map[string]string{"tool": "start_session", "outcome": "ok"}); n != 1 {
		t.Errorf("start_session counted %v times, want 1\n%s", n, body)
	}
	if n := counted(after, "poppy_mcp_company_requests_total", map[string]string{"endpoint": "document", "status": "2xx"}); n == 0 {
		t.Errorf("no document fetched from the Company was counted\n%s", body)
	}
	if n := counted(after, "poppy_mcp_company_requests_total", map[string]string{"endpoint": "oauth"}); n == 0 {
		t.Errorf("no request to the Company's token endpoint was counted\n%s", body)
	}
	checkLabels(t, after, body, p.srv.AgentHost())
}

// checkLabels fails the test when a poppy_mcp_ label value is not one of
// poppy-mcp's own words, or the exposition names the Company's domain
// anywhere.
func checkLabels(t *testing.T, families map[string]*dto.MetricFamily, body string, hosts ...string) {
	t.Helper()
	for name, f := range families {
		if !strings.HasPrefix(name, "poppy_mcp_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !boundedLabel.MatchString(l.GetValue()) {
					t.Errorf("%s{%s=%q}: not a bounded label value", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	for _, h := range append(hosts, "example.com") {
		if strings.Contains(body, h) {
			t.Errorf("the metrics name %s", h)
		}
	}
}
