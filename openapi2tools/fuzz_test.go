package openapi2tools

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzLoad feeds the translator arbitrary documents: it must not panic or
// overflow its stack, and whatever it emits must meet the tool rules.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.json")
	nasty, _ := filepath.Glob("testdata/nasty/*.json")
	for _, p := range append(seeds, nasty...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(petstoreYAML))
	f.Add([]byte(swagger2))
	f.Add([]byte(requestsDoc))
	f.Add(deepInline(50))
	f.Add(deepRefs(50))
	f.Add([]byte(`{"openapi":"3.1.0","paths":{"/{a}/{a}":{"get":{"parameters":[{"$ref":"#/paths/~1{a}~1{a}/get/parameters/0"}]}}}}`))
	f.Add([]byte(`{"openapi":"3.0.0","components":{"schemas":{"A":{"allOf":[{"$ref":"#/components/schemas/A"}]}}},"paths":{"/":{"post":{"requestBody":{"content":{"*/*":{"schema":{"$ref":"#/components/schemas/A"}}}}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Load(context.Background(), data, "https://api.example.com/doc", &Options{Prefix: "f_"})
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for i := range c.Tools {
			tool := &c.Tools[i]
			if !toolNamePattern.MatchString(tool.Name) || seen[tool.Name] {
				t.Fatalf("bad or duplicate name %q", tool.Name)
			}
			seen[tool.Name] = true
			var top map[string]any
			if err := json.Unmarshal(tool.InputSchema, &top); err != nil || top["type"] != "object" {
				t.Fatalf("%s: input schema %s", tool.Name, tool.InputSchema)
			}
			if len(tool.InputSchema) > 4<<20 {
				t.Fatalf("%s: input schema of %d bytes", tool.Name, len(tool.InputSchema))
			}
			// Building a request must not panic either.
			_, _ = c.NewRequest(context.Background(), tool.Name, map[string]any{})
		}
		blob, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := UnmarshalCatalog(blob); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzResult feeds Company responses to the result shaper.
func FuzzResult(f *testing.F) {
	f.Add("application/json", []byte(`{"a": [1, 2]}`))
	f.Add("text/plain; charset=utf-8", []byte("héllo"))
	f.Add("", []byte("\x89PNG\r\n\x1a\n\x00"))
	f.Add("application/json", []byte(`{"a": "`+string(make([]byte, 40))+`"}`))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {contentType}}}
		o := (&ResultOptions{MaxBody: 16, ReadLimit: 64}).withDefaults()
		if int64(len(body)) > o.ReadLimit+1 {
			body = body[:o.ReadLimit+1]
		}
		r := readResult(resp, body, &o)
		if len(r.Body) > o.MaxBody {
			t.Fatalf("body of %d bytes over the %d limit", len(r.Body), o.MaxBody)
		}
		if r.Truncated && r.Note == "" {
			t.Fatal("cut without a note")
		}
	})
}

// FuzzObjectMembers: on any valid JSON, objectMembers and arrayElements split
// containers exactly as encoding/json does, and never panic.
func FuzzObjectMembers(f *testing.F) {
	f.Add([]byte(` { "a\"}" : "}\\" , "b":[1, {"c":"]"} ,null],"n":-1.5e3,"t":true, "a\"}":{"x":"{"} } `))
	f.Add([]byte(`[1,"2",[3],{"4":5}]`))
	f.Add([]byte(`{"\u00e9":{},"":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var wantObj map[string]json.RawMessage
		if json.Unmarshal(data, &wantObj) == nil && wantObj != nil {
			got, err := objectMembers(data)
			if err != nil || !cmp.Equal(got, wantObj, cmpopts.EquateEmpty()) {
				t.Fatalf("objectMembers(%s) = %q, %v; want %q", data, got, err, wantObj)
			}
		}
		var wantArr []json.RawMessage
		if json.Unmarshal(data, &wantArr) == nil && wantArr != nil {
			got, err := arrayElements(data)
			if err != nil || !cmp.Equal(got, wantArr, cmpopts.EquateEmpty()) {
				t.Fatalf("arrayElements(%s) = %q, %v; want %q", data, got, err, wantArr)
			}
		}
	})
}
