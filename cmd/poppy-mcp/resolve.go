package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// resolveFlag maps HOST:PORT to an address at dial time, like curl's
// --resolve HOST:PORT:ADDR. As an extension ADDR may carry its own port
// (127.0.0.1:8443 or [::1]:8443), so a Company served on a high port can be
// reached under its real names and default port.
type resolveFlag map[string]string

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

// lookup returns the address HOST:PORT is mapped to, for netguard.Options.Resolve.
func (r resolveFlag) lookup(hostport string) (string, bool) {
	to, ok := r[strings.ToLower(hostport)]
	return to, ok
}
