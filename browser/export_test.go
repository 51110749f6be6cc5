package browser

import (
	"net/url"
	"testing"
)

// StartProxyForTest starts the browser's proxy over dial, for tests that
// drive it without Chromium. It is closed with the test.
func StartProxyForTest(t *testing.T, dial DialFunc) *url.URL {
	t.Helper()
	p, err := startProxy(dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	u, _ := url.Parse(p.url())
	return u
}
