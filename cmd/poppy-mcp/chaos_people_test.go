package main

// The people of TestChaosHosted: each one a go-sdk MCP client of the
// balancer with their own access token, who retries a call after a
// transport failure the way a real client does (a new connection, the
// same call again), and records what they asked for and what they saw.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// chaosPerson is one person of the run. Only their own goroutine uses
// their fields until the run ends.
type chaosPerson struct {
	c       *chaosRun
	i       int
	name    string // p042: the sub of their access token
	token   string
	rev     string // their client's MCP revision
	cs      *sdk.ClientSession
	rng     *rand.Rand
	conv    string          // the conversation they continue
	convs   map[string]bool // every conversation ID their results named
	sent    []*chaosMessage
	signIns []*chaosSignIn
	seq     int
	leaks   []string // another person's data in their results
	// failed are the causes of the transport failures of the last call,
	// each followed by the same call again.
	failed []string
	// signedOut counts the calls answered sign_in_required after one of
	// their sign-ins was complete.
	signedOut int
}

// chaosMessage is one message a person sent, and what they were told.
type chaosMessage struct {
	text      string
	conv      string   // "" for one that starts a conversation
	attempts  int      // send_message calls of it that ended in a result or gave up
	history   []string // what each of those calls ended with, and the transport failures before
	confirmed bool     // a send_message of it returned a result that is not an error
	failure   string   // the last failure's cause when not confirmed
	// resentDelivered: a later result's resent said poppy-mcp delivered it.
	resentDelivered bool
}

// chaosSignIn is one Device Sign-In a person started, and how it ended
// for them.
type chaosSignIn struct {
	scopes   []string
	userCode string   // "" when no sign_in_device call returned one
	outcome  string   // complete, denied, expired, failed; pending when it never ended; "not started"
	cause    string   // why it did not start or complete
	statuses []string // the statuses sign_in_status gave, repeats left out
	took     time.Duration
}

// sentAgain reports whether the message's person sent it more than once:
// after an error result, or after a transport failure.
func (m *chaosMessage) sentAgain() bool {
	for _, h := range m.history {
		if !strings.Contains(h, " after 0 transport failures") {
			return true
		}
	}
	return m.attempts > 1
}

func newChaosPerson(c *chaosRun, i int) *chaosPerson {
	return &chaosPerson{c: c, i: i, name: chaosName(i), token: c.idp.AccessToken(c.t, "claude", chaosName(i)),
		rev: "2026-07-28", rng: rand.New(rand.NewPCG(uint64(i), 27)), convs: map[string]bool{}}
}

// errTransport marks a call that got no MCP result: the connection broke,
// the balancer answered 502, the call timed out.
var errTransport = errors.New("transport failure")

// connect opens a new client session through the balancer.
func (p *chaosPerson) connect(ctx context.Context) error {
	if p.cs != nil {
		p.cs.Close()
		p.cs = nil
		p.c.stats.count("reconnect", "ok", "")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl := sdk.NewClient(&sdk.Implementation{Name: "chaos-" + p.name, Version: "1"}, nil)
	hc := &http.Client{Transport: headerTransport{bearer(p.token)}}
	// MaxRetries zero: the SDK's own reconnections of a broken stream, as a real client has them.
	cs, err := cl.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: p.c.proxy, HTTPClient: hc},
		&sdk.ClientSessionOptions{ProtocolVersion: p.rev})
	if err != nil {
		p.c.stats.count("connect", "transport", transportCause(err))
		return fmt.Errorf("%w: connect: %v", errTransport, err)
	}
	p.c.stats.count("connect", "ok", "")
	p.cs = cs
	return nil
}

// call calls a tool as a real client would: after a transport failure it
// connects again and sends the same call again, up to 5 attempts in all,
// a second apart. It returns the result's structured content and whether
// it is an error result; every result is scanned for others' data.
func (p *chaosPerson) call(ctx context.Context, name string, args map[string]any, wait time.Duration) (map[string]any, bool, error) {
	var err error
	p.failed = nil
	for attempt := range 5 {
		if attempt > 0 {
			time.Sleep(time.Second)
		}
		if p.cs == nil {
			if err = p.connect(ctx); err != nil {
				continue
			}
		}
		var res *sdk.CallToolResult
		res, err = p.callOnce(ctx, name, args, wait)
		if err == nil {
			m, _ := res.StructuredContent.(map[string]any)
			p.saw(name, res)
			kind, cause := "ok", ""
			if res.IsError {
				kind, cause = "tool error", toolCause(m, res)
				p.c.stats.example(name+": tool error: "+cause, resultText(res))
				if cause == "sign_in_required" && p.signedIn() {
					p.signedOut++
				}
			}
			p.c.stats.count(name, kind, cause)
			return m, res.IsError, nil
		}
		p.failed = append(p.failed, transportCause(err))
		p.c.stats.count(name, "transport", transportCause(err))
		p.c.stats.example(name+": transport: "+transportCause(err), err.Error())
		p.cs.Close()
		p.cs = nil
	}
	return nil, false, fmt.Errorf("%w: %s: %v", errTransport, name, err)
}

// callOnce is one attempt of a call, bounded by its wait and 40 s more
// (a paused replica answers late; a dead one never).
func (p *chaosPerson) callOnce(ctx context.Context, name string, args map[string]any, wait time.Duration) (*sdk.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+40*time.Second)
	defer cancel()
	return p.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
}

// markers are what carries a person's identity in results: their marker
// (in their order's summary and their messages), their account and order.
var markers = regexp.MustCompile(`(?:chaos-|acct_|ord_|itm_)(p\d{3})`)

// saw records the conversations a result names and any other person's
// marker in it.
func (p *chaosPerson) saw(tool string, res *sdk.CallToolResult) {
	raw, _ := json.Marshal(res)
	for _, m := range markers.FindAllStringSubmatch(string(raw), -1) {
		if m[1] != p.name {
			p.leaks = append(p.leaks, fmt.Sprintf("%s's %s result shows %s", p.name, tool, m[0]))
		}
	}
	if sc, ok := res.StructuredContent.(map[string]any); ok {
		if id, _ := sc["conversation_id"].(string); id != "" {
			p.convs[id] = true
		}
	}
}

// resultText is a result's first text.
func resultText(res *sdk.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// toolCause is an error result's cause: its error code.
func toolCause(m map[string]any, res *sdk.CallToolResult) string {
	if code, _ := m["error"].(string); code != "" {
		return code
	}
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			return shorten(tc.Text)
		}
	}
	return "error result without text"
}

// transportCauses name the usual transport failures.
var transportCauses = []struct{ substr, cause string }{
	{"connection refused", "connection refused"},
	{"connection reset", "connection reset"},
	{"Bad Gateway", "502 from the balancer (replica gone)"},
	{"502", "502 from the balancer (replica gone)"},
	{"deadline exceeded", "timed out"},
	{"EOF", "connection closed (EOF)"},
	{"broken pipe", "broken pipe"},
	{"404", "404 (session unknown)"},
	{"session not found", "session unknown"},
	{"connection closed", "client connection closed"},
}

// transportCause is a short name of a transport failure.
func transportCause(err error) string {
	s := err.Error()
	for _, c := range transportCauses {
		if strings.Contains(s, c.substr) {
			return c.cause
		}
	}
	return shorten(s)
}

// shorten is the first line of s, at most 100 characters.
func shorten(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return s
}

// chaosStats counts operations by tool and outcome, and failures by cause.
type chaosStats struct {
	mu     sync.Mutex
	ops    map[string]map[string]int // tool -> ok, tool error, transport -> count
	causes map[string]int            // "tool: kind: cause" -> count
	texts  map[string]string         // "tool: kind: cause" -> the first one's whole text
	faults map[string]int            // kill, pause, restart, postgres restart -> count
}

// count records one operation's outcome.
func (s *chaosStats) count(op, kind, cause string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if s.ops[op] == nil {
		s.ops[op] = map[string]int{}
	}
	s.ops[op][kind]++
	if cause != "" {
		s.causes[op+": "+kind+": "+cause]++
	}
}

// fault records one fault the chaos loop caused.
func (s *chaosStats) fault(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.faults[name]++
}

// init makes the maps; the caller holds mu.
func (s *chaosStats) init() {
	if s.ops == nil {
		s.ops, s.causes, s.faults, s.texts = map[string]map[string]int{}, map[string]int{}, map[string]int{}, map[string]string{}
	}
}

// example keeps text as the example of cause, if it has none yet.
func (s *chaosStats) example(cause, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if _, ok := s.texts[cause]; !ok {
		s.texts[cause] = text
	}
}
