package poppytest

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
)

// FuzzParseScenario: no file makes ParseScenario panic, and a scenario it
// accepts builds its documents and routes without panicking and marshals to
// JSON that parses to a scenario again.
func FuzzParseScenario(f *testing.F) {
	if b, err := os.ReadFile("testdata/scenario-example.yaml"); err == nil {
		f.Add(b)
	}
	for _, seed := range []string{"", "{}", "apis: [{name: a, operations: [{id: x, method: GET, path: /x, parameters: [{name: 1, in: path}]}]}]",
		"poppy_json: {auth: {direct: null}}", "mcp_tools: [{name: t, structured: {a: [1, {b: 2}]}}]", "&a [*a]", "sign_in: !!binary aGk="} {
		f.Add([]byte(seed))
	}
	s := NewUnstartedServer(quietT{}, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario(data)
		if err != nil {
			return
		}
		s.opts.Scenario = sc
		s.scenarioPoppyJSON(s.defaultPoppyJSON())
		for _, api := range sc.APIs {
			if _, err := json.Marshal(s.cannedDocument(api)); err != nil {
				t.Fatalf("the document of %q does not marshal: %v", api.Name, err)
			}
		}
		routes := http.NewServeMux() // the patterns installScenario registers must not conflict
		for _, api := range sc.APIs {
			for _, op := range api.Operations {
				routes.HandleFunc(op.Method+" /"+api.Name+op.Path, http.NotFound)
			}
		}
		b, err := json.Marshal(sc)
		if err != nil {
			t.Fatalf("an accepted scenario does not marshal: %v", err)
		}
		if _, err := ParseScenario(b); err != nil {
			t.Fatalf("an accepted scenario, as JSON, is refused: %v\n%s", err, b)
		}
	})
}
