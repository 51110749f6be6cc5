package discovery_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// Discover a Company through the HTTP cache and refuse it when its documents
// break a rule.
func ExampleClient_Discover() {
	t := &poppytest.Reporter{}
	company := poppytest.NewServer(t, &poppytest.Options{
		Metadata: func(md map[string]any) { md["poppy_domains"] = []any{"example.org"} },
	})
	defer company.Close()

	d := discovery.New(&http.Client{Transport: cache.New(company.Transport(), nil)}, nil)
	co, err := d.Discover(context.Background(), "example.com", false)
	if err != nil {
		fmt.Println("could not check:", err)
		return
	}
	for _, f := range co.Findings {
		fmt.Println(f)
	}
	fmt.Println("usable:", co.OK())
	// Output:
	// error §3.2: the metadata's poppy_domains [Company text "example.org"] does not include Company text "example.com"
	// usable: false
}
