// Package metrics defines poppy-mcp's Prometheus metrics (serve
// --metrics-addr, docs/operations.md) on a registry of its own, never the
// global default, and records them through a Recorder whose methods do
// nothing on a nil *Recorder: a package that is given none still works.
//
// No label carries a person: no user ID, no domain a person typed, no
// token, no name a Company chose. Tool names are poppy-mcp's own, or the
// kind of a Company's tool (ToolAPIOperation, ToolRelay); Company requests
// are labelled by the kind of endpoint and the status class.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The tool label of a Company's tools, whose names the Company chooses.
const (
	ToolAPIOperation = "api_operation" // a Company's OpenAPI operation as a tool of its own
	ToolRelay        = "relay"         // a tool of a Company's MCP server, relayed
	ToolOther        = "other"         // a name poppy-mcp does not know
)

// The outcome label of a tool call.
const (
	OutcomeOK        = "ok"        // a result that is not an error
	OutcomeToolError = "error"     // a result with isError set
	OutcomeFailed    = "failed"    // a JSON-RPC error: the call had no result
	OutcomeTimeout   = "timeout"   // the call ran past its deadline
	OutcomeCancelled = "cancelled" // the client cancelled it
	OutcomeDraining  = "draining"  // refused: poppy-mcp is shutting down
)

// Recorder records poppy-mcp's metrics. A nil *Recorder records nothing.
// It is safe for concurrent use.
type Recorder struct {
	reg             *prometheus.Registry
	toolCalls       *prometheus.CounterVec
	toolSeconds     *prometheus.HistogramVec
	companyRequests *prometheus.CounterVec
	waitingCalls    prometheus.Gauge
	signIns         prometheus.Gauge
	leases          prometheus.Gauge
	storeErrors     prometheus.Counter
}

// New returns a Recorder on a new registry that also has the Go runtime's
// and the process's collectors.
func New() *Recorder {
	r := &Recorder{
		reg: prometheus.NewRegistry(),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "poppy_mcp_tool_calls_total",
			Help: "Tool calls answered, by tool (a Company's tools by kind: api_operation, relay) and outcome."}, []string{"tool", "outcome"}),
		toolSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "poppy_mcp_tool_call_duration_seconds",
			Help:    "How long tool calls took, by tool (a Company's tools by kind).",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"tool"}),
		companyRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "poppy_mcp_company_requests_total",
			Help: "HTTP requests to Companies (and the issuer's documents), by kind of endpoint and status class."}, []string{"endpoint", "status"}),
		waitingCalls: prometheus.NewGauge(prometheus.GaugeOpts{Name: "poppy_mcp_waiting_calls",
			Help: "Tool calls waiting now (wait_seconds) for the Company or the user."}),
		signIns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "poppy_mcp_sign_ins_in_progress",
			Help: "Device sign-ins this process is polling now."}),
		leases: prometheus.NewGauge(prometheus.GaugeOpts{Name: "poppy_mcp_leases_held",
			Help: "Store leases this process holds now: acquired, and not released or lost."}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "poppy_mcp_store_errors_total",
			Help: "Statements the store's database failed (not counting records not found)."}),
	}
	r.reg.MustRegister(r.toolCalls, r.toolSeconds, r.companyRequests, r.waitingCalls, r.signIns, r.leases, r.storeErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Registry is the Recorder's registry.
func (r *Recorder) Registry() *prometheus.Registry { return r.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// ToolCall records a tool call's outcome and how long it took. tool must
// be a bounded label: poppy-mcp's own tool name or a kind.
func (r *Recorder) ToolCall(tool, outcome string, took time.Duration) {
	if r == nil {
		return
	}
	r.toolCalls.WithLabelValues(tool, outcome).Inc()
	r.toolSeconds.WithLabelValues(tool).Observe(took.Seconds())
}

// Waiting counts a call as waiting until the returned function is called.
func (r *Recorder) Waiting() (done func()) {
	return track(r, func(r *Recorder) prometheus.Gauge { return r.waitingCalls })
}

// SigningIn counts a device sign-in as polled until the returned function
// is called.
func (r *Recorder) SigningIn() (done func()) {
	return track(r, func(r *Recorder) prometheus.Gauge { return r.signIns })
}

// LeasesHeld sets how many store leases this process holds now.
func (r *Recorder) LeasesHeld(n int) {
	if r != nil {
		r.leases.Set(float64(n))
	}
}

// StoreError counts a failed statement.
func (r *Recorder) StoreError() {
	if r != nil {
		r.storeErrors.Inc()
	}
}

// track raises the gauge gauge(r) until done is called, once.
func track(r *Recorder, gauge func(*Recorder) prometheus.Gauge) (done func()) {
	if r == nil {
		return func() {}
	}
	g := gauge(r)
	g.Inc()
	var once sync.Once
	return func() { once.Do(g.Dec) }
}

// statusClass is a response's status as a bounded label: 429 on its own
// (Poppy 0.1 §4.3 holds the endpoint), else its class (2xx ... 5xx).
func statusClass(code int) string {
	switch {
	case code == http.StatusTooManyRequests:
		return "429"
	case code >= 100 && code < 600:
		return strconv.Itoa(code/100) + "xx"
	}
	return "other"
}
