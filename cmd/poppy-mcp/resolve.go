package main

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// resolveFlag maps HOST:PORT to an address at dial time, like curl's
// --resolve HOST:PORT:ADDR. Two extensions: ADDR may carry its own port
// (127.0.0.1:8443 or [::1]:8443), so a Company served on a high port can be
// reached under its real names and default port; and HOST may be a
// wildcard, *.example.com, for every name under example.com (at any depth)
// but not example.com itself, as a TLS certificate's wildcard reads. A
// Company has several hosts (its domain, www., auth., api., mcp.), so
// `--resolve example.com:443:A --resolve '*.example.com:443:A'` reaches
// them all. A name mapped exactly wins over a wildcard, and a longer
// wildcard over a shorter one. curl's own wildcard, a bare *, is refused:
// it would take every Company's every name past the network guard.
type resolveFlag map[string]string // "host:port" or "*.domain:port" -> "ip:port"

func (r *resolveFlag) String() string { return fmt.Sprint(map[string]string(*r)) }

func (r *resolveFlag) Set(v string) error {
	host, rest, ok := strings.Cut(v, ":")
	port, addr, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || host == "" || addr == "" {
		return fmt.Errorf("want HOST:PORT:ADDR, got %q", v)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("bad port in %q", v)
	}
	if err := checkResolveHost(strings.ToLower(host)); err != nil {
		return fmt.Errorf("%q: %w", v, err)
	}
	target, err := resolveTarget(addr, port)
	if err != nil {
		return fmt.Errorf("%q: %w", v, err)
	}
	if *r == nil {
		*r = resolveFlag{}
	}
	(*r)[net.JoinHostPort(strings.ToLower(host), port)] = target
	return nil
}

// checkResolveHost accepts a name, or a wildcard *.NAME where NAME has at
// least two labels: *.example.com, not *.com nor *.
func checkResolveHost(host string) error {
	if host == "*" {
		return fmt.Errorf("a bare * would map every name past the network guard: name the domain, as *.example.com (which leaves example.com itself out)")
	}
	suffix, wild := strings.CutPrefix(host, "*.")
	if !wild {
		if strings.Contains(host, "*") {
			return fmt.Errorf("a wildcard goes first and alone, as *.example.com")
		}
		return nil
	}
	labels := strings.Split(suffix, ".")
	if len(labels) < 2 || slices.Contains(labels, "") || strings.Contains(suffix, "*") {
		return fmt.Errorf("a wildcard names a domain of two labels or more, as *.example.com")
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Errorf("a wildcard names a domain, not IP addresses")
	}
	return nil
}

// resolveTarget accepts ADDR as an IP, a bracketed IPv6, or either with a port.
func resolveTarget(addr, port string) (string, error) {
	if h, p, err := net.SplitHostPort(addr); err == nil && net.ParseIP(h) != nil {
		return net.JoinHostPort(h, p), nil
	}
	ip := strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
	if net.ParseIP(ip) == nil {
		return "", fmt.Errorf("ADDR %q is not an IP address", addr)
	}
	return net.JoinHostPort(ip, port), nil
}

// lookup returns the address HOST:PORT is mapped to, for
// netguard.Options.Resolve: its own entry, else the longest wildcard whose
// domain the host is under.
func (r resolveFlag) lookup(hostport string) (string, bool) {
	hostport = strings.ToLower(hostport)
	if to, ok := r[hostport]; ok {
		return to, true
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || net.ParseIP(host) != nil { // an IP literal is no name under a domain
		return "", false
	}
	// a.b.example.com tries *.b.example.com, then *.example.com, then *.com
	// (never stored), so the longest wildcard wins; the host itself is never
	// tried as a wildcard's domain.
	for i := strings.IndexByte(host, '.'); i >= 0; i = strings.IndexByte(host, '.') {
		host = host[i+1:]
		if to, ok := r[net.JoinHostPort("*."+host, port)]; ok {
			return to, true
		}
	}
	return "", false
}
