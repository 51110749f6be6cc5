package tools

import "time"

// SetWebClock makes join pages read the time from now until restore is
// called.
func SetWebClock(now func() time.Time) (restore func()) {
	webClock.Store(&now)
	return func() { webClock.Store(nil) }
}
