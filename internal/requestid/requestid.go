// Package requestid gives every HTTP request poppy-mcp serves an ID, so the
// lines logged while handling it can be found together: the caller's
// X-Request-Id when it is well-formed (a proxy or a load balancer in front
// sets one), else a new random one, echoed in the response either way.
// Every record logged with the request's context carries it, as
// "request_id", through Handler.
package requestid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
)

// Header is the request and response header that carries the ID.
const Header = "X-Request-Id"

// maxLen bounds an ID taken from a request.
const maxLen = 128

type key struct{}

// From returns the ID of the request ctx belongs to, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context { return context.WithValue(ctx, key{}, id) }

// Middleware gives each request an ID: the caller's, when Valid, else a
// new one. It is set on the response before next writes anything.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(Header)
		if !Valid(id) {
			id = New()
		}
		w.Header().Set(Header, id)
		next.ServeHTTP(w, r.WithContext(With(r.Context(), id)))
	})
}

// Valid reports whether id may be taken from a request as it is: 1 to 128
// characters of letters, digits and "-", "_", ".", ":" (UUIDs, and the IDs
// of common proxies and load balancers), so a log line cannot be forged
// or made long through it.
func Valid(id string) bool {
	if id == "" || len(id) > maxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// New returns a new random ID: 16 bytes, hex.
func New() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Handler wraps h so that every record logged with a request's context
// gets a "request_id" attribute.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if id := From(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.Handler.WithGroup(name)} }
