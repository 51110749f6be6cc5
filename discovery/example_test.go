package discovery_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// exampleT stands in for a *testing.T in examples.
type exampleT struct{ cleanups []func() }

func (*exampleT) Helper()                      {}
func (*exampleT) Errorf(f string, args ...any) { fmt.Printf(f+"\n", args...) }
func (t *exampleT) Cleanup(f func())           { t.cleanups = append(t.cleanups, f) }

// Discover a Company through the HTTP cache and refuse it when its documents
// break a rule.
func ExampleClient_Discover() {
	t := &exampleT{}
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
	// error §3.2: the metadata's poppy_domains ["example.org"] does not include "example.com"
	// usable: false
}
