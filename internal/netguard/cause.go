package netguard

import "errors"

// Cause is the innermost error err wraps: what a *url.Error and the
// *net.OpError inside it say once their operation and address, which a
// message about that address already gives, are dropped ("connection
// refused" rather than "Get "https://…": dial tcp 192.0.2.1:443: connect:
// connection refused").
func Cause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
