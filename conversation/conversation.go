// Package conversation is the Personal Agent's side of conversations with
// a Company Agent (Poppy 0.1 §7): starting a conversation and sending
// messages with IDs it makes and retries safely (§7.3), replies in the
// response and reads of events from a cursor (§7.5), streams of
// server-sent events with reconnection (§7.6), handoff to a person (§7.9),
// Direct Conversations (§7.10) and closing (§7.12).
//
// A [Client] makes the requests of one Company's conversation endpoint,
// each through the *http.Client of a Session (package auth), which adds the
// Session Token and DPoP proof: this package never builds an auth header,
// and knows nothing of MCP. A [Tracker] follows a User's conversations at
// one Company on top of a Client, and keeps in the store what must survive
// a restart: each conversation's cursor, the events already handled, the
// IDs of the messages it sent (its own messages are known by them, never
// by role), and the messages not yet known to be delivered, which its next
// call sends again while they are young. Each of its calls is bounded
// ([TrackerOptions]), so that no Company can keep one running.
package conversation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// ProtocolPoppy is the type of the conversation protocol of Poppy 0.1 §7
// in agent.protocols (§7.1).
const ProtocolPoppy = "poppy"

// ErrNoProtocol is returned by ChooseEndpoint when the Company lists no
// conversation protocol this package speaks.
var ErrNoProtocol = errors.New("conversation: the Company lists no poppy conversation protocol")

// ChooseEndpoint returns the endpoint of the first poppy entry of a
// Company's agent.protocols. Poppy 0.1 §7.1: "The Personal Agent chooses a
// protocol it supports and uses that entry's endpoint for the conversation.
// It skips unfamiliar types."
func ChooseEndpoint(protocols []discovery.Protocol) (string, error) {
	for _, p := range protocols {
		if p.Type == ProtocolPoppy && p.Endpoint != "" {
			return p.Endpoint, nil
		}
	}
	return "", ErrNoProtocol
}

// Options configure New. A nil *Options is the same as a zero Options.
type Options struct {
	// MaxBody limits the body of a JSON answer. Zero: 1 MiB.
	MaxBody int64
	// MaxEvent limits one server-sent event, and one line of a stream.
	// Zero: 1 MiB.
	MaxEvent int
	// MaxWait caps the wait asked of the Company in one request. Zero: 60 s.
	MaxWait time.Duration
	// RequestTimeout bounds one request beyond the wait it asks for; a
	// stream is bounded by its context only. Zero: 30 s.
	RequestTimeout time.Duration
	// NewBackOff returns the policy for retrying one request after a
	// network failure or a 5xx answer. Zero: exponential from 200 ms, up
	// to 5 retries and 30 s in all.
	NewBackOff func() backoff.BackOff
}

// Client makes the conversation requests of one Company's endpoint
// (Poppy 0.1 §7.2) through a Session's *http.Client. It holds no state of
// its own and is safe for concurrent use.
type Client struct {
	// hc sends every request. It is the Session's client with its Timeout
	// removed: a held read lasts as long as its wait, and requests are
	// bounded by their contexts instead.
	hc       *http.Client
	endpoint string // without a trailing slash
	opts     Options
}

// New returns a Client for the conversation endpoint of a Company, chosen
// with ChooseEndpoint, sending every request through hc: the Session's
// client, which authorizes each request (Poppy 0.1 §7.2: "Every request
// carries a Session Token with a DPoP Proof").
func New(hc *http.Client, endpoint string, opts *Options) (*Client, error) {
	if hc == nil {
		return nil, errors.New("conversation: New needs the Session's *http.Client")
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("conversation: endpoint %q is not an https URL without query", endpoint)
	}
	c := &Client{endpoint: strings.TrimSuffix(u.String(), "/")}
	if opts != nil {
		c.opts = *opts
	}
	long := *hc
	long.Timeout = 0
	c.hc = &long
	if c.opts.MaxBody <= 0 {
		c.opts.MaxBody = 1 << 20
	}
	if c.opts.MaxEvent <= 0 {
		c.opts.MaxEvent = 1 << 20
	}
	if c.opts.MaxWait <= 0 {
		c.opts.MaxWait = 60 * time.Second
	}
	if c.opts.RequestTimeout <= 0 {
		c.opts.RequestTimeout = 30 * time.Second
	}
	if c.opts.NewBackOff == nil {
		c.opts.NewBackOff = defaultBackOff
	}
	return c, nil
}

func defaultBackOff() backoff.BackOff {
	return backoff.WithMaxRetries(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(200*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(30*time.Second),
	), 5)
}

// Endpoint returns the conversation endpoint.
func (c *Client) Endpoint() string { return c.endpoint }

// url returns the URL of a conversation's resource (suffix "" for the
// endpoint itself) with the query of a read: wait, and cursor unless empty.
func (c *Client) url(conversationID, suffix string, cursor string, wait time.Duration) (string, error) {
	u := c.endpoint
	if conversationID != "" {
		if !validID(conversationID) {
			return "", fmt.Errorf("conversation: %q is not a conversation ID", conversationID)
		}
		u += "/" + conversationID + suffix
	}
	q := url.Values{}
	if wait > 0 {
		secs := int64(min(wait, c.opts.MaxWait)+time.Second-1) / int64(time.Second)
		q.Set("wait", strconv.FormatInt(secs, 10))
	}
	if cursor != "" {
		if !validID(cursor) {
			return "", errors.New("conversation: the cursor is not a valid event ID")
		}
		q.Set("cursor", cursor)
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u, nil
}

// answer is one HTTP answer, its body read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// attempt sends one request and reads its answer, waiting at most wait
// plus RequestTimeout.
func (c *Client) attempt(ctx context.Context, method, u string, body []byte, wait time.Duration) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, min(wait, c.opts.MaxWait)+c.opts.RequestTimeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body) // NewRequest sets GetBody: the Session's transport may replay it
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, fmt.Errorf("conversation: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("conversation: reading the answer: %w", err)
	}
	if int64(len(b)) > c.opts.MaxBody {
		return nil, protocolErr("7.2", "an answer larger than %d bytes", c.opts.MaxBody)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// do sends a request, retrying it with the same body after a network
// failure or a 5xx answer (Poppy 0.1 §7.3: "To retry a message, it sends it
// again with the same ID"), and returns a 2xx answer whose body is JSON.
// Any other answer becomes an *Error.
func (c *Client) do(ctx context.Context, method, u string, body []byte, wait time.Duration) (*answer, error) {
	var last error
	a, err := backoff.RetryWithData(func() (*answer, error) {
		a, err := c.attempt(ctx, method, u, body, wait)
		if err == nil && a.status >= 300 {
			err = parseError(a.status, a.header, a.body)
		}
		if err != nil {
			last = err
			if !retryable(ctx, err) {
				return nil, backoff.Permanent(err)
			}
			return nil, err
		}
		return a, nil
	}, backoff.WithContext(c.opts.NewBackOff(), ctx))
	if err != nil {
		if last != nil && !errors.Is(err, last) {
			return nil, fmt.Errorf("%w (last attempt: %w)", err, last)
		}
		return nil, err
	}
	if !httpbody.IsJSON(a.header.Get("Content-Type")) {
		return nil, protocolErr("7.2", "a %d answer of type %s, not JSON", a.status, untrusted.Quote(a.header.Get("Content-Type"), 200))
	}
	return a, nil
}

// retryable reports whether a failed attempt is worth sending again: a
// network failure or a 5xx answer, while the caller still waits. An
// answer of the Company (a 4xx, a token error, a rate limit the caller
// cannot wait out) or a broken protocol is final.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || isProtocolError(err) || isAuthFinal(err) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 500
	}
	return true
}
