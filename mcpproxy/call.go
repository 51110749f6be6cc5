package mcpproxy

// This file sends requests to the upstream (MCP 2025-11-25 "Basic" and
// "Tools"): raw JSON-RPC through the connection's transport, so results keep
// every byte mcp-go's typed client would parse away, with one retry on a new
// connection when the first attempt was refused unsent (404 for a forgotten
// session, or no connection at all). Progress notifications of a call are
// relayed to the caller's ProgressFunc.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// Progress is one notifications/progress of a call (MCP 2025-11-25
// "Progress"). Total and Message are zero when the server left them out.
// Message is Company text, untrusted: cleaned of control characters and cut
// to 300 bytes.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

// ProgressFunc receives a call's progress. It must not block.
type ProgressFunc func(Progress)

// callParams is tools/call's params; arguments go as the caller gave them.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      map[string]any  `json:"_meta,omitempty"`
}

// Call calls the upstream tool named name (its own name, not the relayed
// one) with args, a JSON object or empty, and returns its result as the
// server sent it: content items byte for byte, structured content, isError
// and _meta. progress, when not nil, receives the call's progress. A
// JSON-RPC error is an *Error; errors of the HTTP client (such as auth's
// sign-in errors) come wrapped, for errors.As.
func (u *Upstream) Call(ctx context.Context, name string, args json.RawMessage, progress ProgressFunc) (*mcp.CallToolResult, error) {
	p := callParams{Name: name, Arguments: args}
	if progress != nil {
		// Our own token, not the downstream's: two clients may use the same one.
		tok := "poppy-progress-" + strconv.FormatUint(u.seq.Add(1), 10)
		p.Meta = map[string]any{"progressToken": tok}
		u.progMu.Lock()
		u.progress[tok] = progress
		u.progMu.Unlock()
		defer func() {
			u.progMu.Lock()
			delete(u.progress, tok)
			u.progMu.Unlock()
		}()
	}
	raw, err := u.request(ctx, string(mcp.MethodToolsCall), p)
	if err != nil {
		return nil, err
	}
	res, err := parseResult(raw)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: tools/call %s at %s: %w", name, u.url, err)
	}
	return res, nil
}

// request sends one request and returns its result. A request refused
// unsent (a forgotten session, no connection), or one that is safe to
// repeat (not tools/call) whose connection broke, is sent once more on a
// new connection.
func (u *Upstream) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	for attempt := 0; ; attempt++ {
		c, err := u.acquire(ctx)
		if err != nil {
			return nil, err
		}
		res, err := u.send(ctx, c, method, params)
		u.release(c)
		if err == nil {
			return res, nil
		}
		var rpcErr *Error
		if errors.As(err, &rpcErr) || ctx.Err() != nil || attempt > 0 {
			return nil, err
		}
		switch {
		case errors.Is(err, transport.ErrSessionTerminated): // 404: the server did not run it
			u.drop(c)
		case notSent(err):
			u.drop(c) // the next acquire reconnects, with backoff while it is down
		case isTransient(err) && method != string(mcp.MethodToolsCall):
			u.drop(c) // a list may be asked again; a call may have run, so it is not
		case isTransient(err):
			u.drop(c)
			return nil, err
		default:
			return nil, err
		}
		u.log.Info("mcpproxy: sending again on a new connection", "url", u.url, "method", method, "err", err)
	}
}

// send posts one JSON-RPC request on c.
func (u *Upstream) send(ctx context.Context, c *conn, method string, params any) (json.RawMessage, error) {
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, Method: method, Params: params,
		ID: mcp.NewRequestId("poppy-" + strconv.FormatUint(u.seq.Add(1), 10))}
	cut := new(atomic.Bool)
	resp, err := c.c.GetTransport().SendRequest(context.WithValue(ctx, cutKey{}, cut), req)
	if err != nil && cut.Load() && !errors.Is(err, errTooLarge) {
		// mcp-go may have lost the read error (an event stream's): say it.
		err = fmt.Errorf("%w: %w", errTooLarge, err)
	}
	if err != nil {
		return nil, upstreamError(err, "mcpproxy: %s at %s", method, u.url)
	}
	if resp.Error != nil {
		return nil, newError(resp.Error)
	}
	return resp.Result, nil
}

// notification handles a notification from the upstream.
func (u *Upstream) notification(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationToolsListChanged):
		u.toolsChanged()
	case string(mcp.MethodNotificationProgress):
		fields := n.Params.AdditionalFields
		tok, _ := fields["progressToken"].(string)
		u.progMu.Lock()
		f := u.progress[tok]
		u.progMu.Unlock()
		if f == nil {
			return
		}
		p := Progress{}
		p.Progress, _ = fields["progress"].(float64)
		p.Total, _ = fields["total"].(float64)
		msg, _ := fields["message"].(string)
		p.Message = untrusted.Text(msg, 300) // the Company's words, on their way to a client
		f(p)
	}
}

// resultWire is a CallToolResult as it comes (MCP 2025-11-25 "Tool Result").
type resultWire struct {
	Meta              *mcp.Meta         `json:"_meta,omitempty"`
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError,omitempty"`
}

// rawContent is one content item relayed as the upstream sent it.
// Embedding TextContent gives it mcp.Content's unexported marker method;
// MarshalJSON writes the upstream's bytes, so images, audio, embedded
// resources, links, annotations and types newer than mcp-go pass unchanged.
type rawContent struct {
	mcp.TextContent
	raw json.RawMessage
}

func (c rawContent) MarshalJSON() ([]byte, error) { return c.raw, nil }

// parseResult checks a tools/call result and wraps it for relaying.
func parseResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	var w resultWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("result is not a CallToolResult: %w", err)
	}
	res := &mcp.CallToolResult{Content: make([]mcp.Content, 0, len(w.Content)), IsError: w.IsError}
	res.Meta = w.Meta
	for i, item := range w.Content {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(item, &head); err != nil || head.Type == "" {
			return nil, fmt.Errorf("content[%d] is not an object with a type", i)
		}
		res.Content = append(res.Content, rawContent{raw: item})
	}
	if len(w.StructuredContent) > 0 && string(w.StructuredContent) != "null" {
		res.RawStructuredContent = w.StructuredContent
		res.StructuredContent = w.StructuredContent
	}
	return res, nil
}
