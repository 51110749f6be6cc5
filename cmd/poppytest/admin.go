package main

// This file is the admin API's plumbing: JSON over HTTP on its own loopback
// port, for test suites in any language. Every route is registered through
// adminMux.handle, which keeps the list the OpenAPI test compares with the
// document (GET /admin/openapi.json). Requests whose Host is not a loopback
// name (DNS rebinding) or that come from a web page (Origin) are refused.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
)

// maxAdminBody bounds a request body; a run's scenario is the largest.
const maxAdminBody = 5 << 20

// adminError is an error answer: {"error": code, "message": ...}.
type adminError struct {
	status int
	code   string
	msg    string
}

func (e *adminError) Error() string { return "poppytest: " + e.msg }

func badRequest(msg string) error { return &adminError{http.StatusBadRequest, "bad_request", msg} }
func notFound(msg string) error   { return &adminError{http.StatusNotFound, "not_found", msg} }
func conflict(msg string) error   { return &adminError{http.StatusConflict, "conflict", msg} }

// fromServer turns a poppytest error into an answer: "no such ..." is
// not_found, anything else (already decided, closed) conflict.
func fromServer(err error) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "poppytest: ")
	if strings.HasPrefix(msg, "no ") {
		return notFound(msg)
	}
	return conflict(msg)
}

// route is one registered route.
type route struct{ method, path string }

// adminMux is the admin API's router. It records what it registers.
type adminMux struct {
	mux    *http.ServeMux
	routes []route
}

// handle registers h for method and path; h's answer or error is written
// as JSON.
func (m *adminMux) handle(method, path string, h func(r *http.Request) (int, any, error)) {
	m.routes = append(m.routes, route{method, path})
	pattern := path
	if strings.HasSuffix(path, "/") {
		pattern += "{$}"
	}
	m.mux.HandleFunc(method+" "+pattern, func(w http.ResponseWriter, r *http.Request) {
		status, v, err := h(r)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeAdminJSON(w, status, v)
	})
}

// ServeHTTP refuses what is not a local test suite, then routes.
func (m *adminMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !loopbackHost(r.Host) {
		writeAdminError(w, &adminError{http.StatusForbidden, "forbidden", "the admin API answers only to a loopback Host"})
		return
	}
	if r.Header.Get("Origin") != "" {
		writeAdminError(w, &adminError{http.StatusForbidden, "forbidden", "the admin API does not answer web pages (Origin)"})
		return
	}
	if _, pattern := m.mux.Handler(r); pattern == "" {
		if allow := m.allowed(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeAdminError(w, &adminError{http.StatusMethodNotAllowed, "method_not_allowed", r.URL.Path + " takes " + strings.Join(allow, ", ")})
			return
		}
		writeAdminError(w, &adminError{http.StatusNotFound, "not_found", r.Method + " " + r.URL.Path + " is not a route (GET /admin/openapi.json lists them)"})
		return
	}
	m.mux.ServeHTTP(w, r)
}

// allowed lists the methods that have a route at r's path.
func (m *adminMux) allowed(r *http.Request) []string {
	var out []string
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		r2 := r.Clone(r.Context())
		r2.Method = method
		if _, pattern := m.mux.Handler(r2); pattern != "" {
			out = append(out, method)
		}
	}
	return out
}

// loopbackHost reports whether a Host header names this machine.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeAdminError(w http.ResponseWriter, err error) {
	var e *adminError
	if !errors.As(err, &e) {
		e = &adminError{http.StatusInternalServerError, "internal", err.Error()}
	}
	writeAdminJSON(w, e.status, map[string]string{"error": e.code, "message": e.msg})
}

// readBody decodes a JSON request body into v, refusing unknown fields. An
// empty body leaves v as it is when optional.
func readBody(r *http.Request, v any, optional bool) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody+1))
	switch {
	case err != nil:
		return badRequest("reading the body: " + err.Error())
	case len(body) > maxAdminBody:
		return badRequest(fmt.Sprintf("the body is larger than %d bytes", maxAdminBody))
	case len(strings.TrimSpace(string(body))) == 0 && optional:
		return nil
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return badRequest("send the body as Content-Type: application/json")
	}
	if err := strictJSON(body, v); err != nil {
		return badRequest("the body: " + err.Error())
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
