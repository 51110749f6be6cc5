package mcpproxy

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestRelayNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	got := relayNames("ex_", []string{"search", "get.weather", "get_weather", "naïve", long, long + "y", "search"})
	if got["search"] != "ex_search" || got["naïve"] != "ex_na_ve" {
		t.Errorf("plain names: %v", got)
	}
	// get.weather and get_weather would share ex_get_weather: both get a hash.
	if a, b := got["get.weather"], got["get_weather"]; a == b || !strings.HasPrefix(a, "ex_get_weather_") || !strings.HasPrefix(b, "ex_get_weather_") {
		t.Errorf("colliding names: %q %q", a, b)
	}
	if a, b := got[long], got[long+"y"]; len(a) != 64 || len(b) != 64 || a == b {
		t.Errorf("long names: %q %q", a, b)
	}
	checkNames(t, got)
	// The same set in another order gives the same names.
	again := relayNames("ex_", []string{long + "y", "naïve", "get_weather", long, "search", "get.weather"})
	for n, v := range got {
		if again[n] != v {
			t.Errorf("%q: %q then %q in another order", n, v, again[n])
		}
	}
}

func checkNames(t *testing.T, names map[string]string) {
	t.Helper()
	seen := map[string]string{}
	for up, n := range names {
		if !toolName.MatchString(n) {
			t.Errorf("%q -> %q: invalid", up, n)
		}
		if other, dup := seen[n]; dup {
			t.Errorf("%q and %q both -> %q", up, other, n)
		}
		seen[n] = up
	}
}

func FuzzRelayNames(f *testing.F) {
	f.Add("ex_", "search\x00get.weather\x00get_weather")
	f.Add("", strings.Repeat("é", 40)+"\x00"+strings.Repeat("é", 41))
	f.Add("p-", "a\x00a\x00A")
	f.Fuzz(func(t *testing.T, prefix, joined string) {
		if !validPrefix.MatchString(prefix) {
			return
		}
		var up []string
		for _, n := range strings.Split(joined, "\x00") {
			if n != "" {
				up = append(up, n)
			}
		}
		got := relayNames(prefix, up)
		checkNames(t, got)
		distinct := slices.Compact(slices.Sorted(slices.Values(up)))
		if len(got) != len(distinct) {
			t.Errorf("%d distinct names, %d relayed", len(distinct), len(got))
		}
	})
}

func FuzzRelayTool(f *testing.F) {
	f.Add([]byte(`{"name":"search","description":"d","inputSchema":{"type":"object","anyOf":[{"required":["q"]}]},"annotations":{"readOnlyHint":true}}`))
	f.Add([]byte(`{"name":"x","inputSchema":[]}`))
	f.Add([]byte(`{"name":"x","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A"}}}}`))
	f.Add([]byte(`{"name":"","inputSchema":{}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tool, err := relayTool(raw)
		if err != nil {
			return
		}
		if tool.Upstream == "" || !isObject(tool.Def.RawInputSchema) {
			t.Fatalf("accepted %s", raw)
		}
		a := tool.Def.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil || a.Title == "" {
			t.Fatalf("annotations not all set: %+v", a)
		}
		if _, err := json.Marshal(tool.Def); err != nil {
			t.Fatalf("definition does not marshal: %v", err)
		}
	})
}

func FuzzParseResult(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"hi"},{"type":"image","data":"AA==","mimeType":"image/png"}],"structuredContent":{"a":1},"isError":true}`))
	f.Add([]byte(`{"content":[{"type":"future","x":1}],"_meta":{"k":"v"}}`))
	f.Add([]byte(`{"content":[1]}`))
	f.Add([]byte(`{"content":null,"structuredContent":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		res, err := parseResult(raw)
		if err != nil {
			return
		}
		out, err := json.Marshal(res)
		if err != nil {
			t.Fatalf("relayed result does not marshal: %v", err)
		}
		var back struct {
			Content []json.RawMessage `json:"content"`
			IsError bool              `json:"isError"`
		}
		if err := json.Unmarshal(out, &back); err != nil || len(back.Content) != len(res.Content) || back.IsError != res.IsError {
			t.Fatalf("relayed %s as %s", raw, out)
		}
	})
}

// FuzzMark marks results as a Relay with a note does: what relays must
// still marshal, the note comes first when there is text, the decoded text
// of every text block hides nothing, and a block that hid nothing is the
// upstream's byte for byte.
func FuzzMark(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"ord_1\u202e2"},{"type":"image","data":"AA==","mimeType":"image/png"}],"structuredContent":{"k\u200b":"v"}}`))
	f.Add([]byte(`{"content":[{"type":"resource","resource":{"uri":"x:y","text":"a` + "\u2066" + `b"}},{"type":"text","text":"plain <b>&"}]}`))
	f.Add([]byte(`{"content":[{"type":"text","text":1},{"type":"text"}],"_meta":{"poppy/company_content":"forged"}}`))
	r := &Relay{opts: RelayOptions{Note: "[note]", Meta: map[string]any{"poppy/company_content": map[string]any{"domain": "example.com"}}}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		res, err := parseResult(raw)
		if err != nil {
			return
		}
		before := make([]string, len(res.Content))
		for i, c := range res.Content {
			b, _ := json.Marshal(c)
			before[i] = string(b)
		}
		r.mark(res)
		out, err := json.Marshal(res)
		if err != nil {
			t.Fatalf("marked result does not marshal: %v", err)
		}
		var back struct {
			Content []struct {
				Type string          `json:"type"`
				Raw  json.RawMessage `json:"text"`
				Text string          `json:"-"`
			} `json:"content"`
			Meta map[string]any `json:"_meta"`
		}
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("marked %s as %s: %v", raw, out, err)
		}
		for i := range back.Content {
			_ = json.Unmarshal(back.Content[i].Raw, &back.Content[i].Text) // "" when not a string
		}
		if back.Meta["poppy/company_content"] == "forged" {
			t.Fatalf("the upstream kept the mark off: %s", out)
		}
		shift := len(back.Content) - len(before)
		if shift < 0 || shift > 1 || shift == 1 && back.Content[0].Text != "[note]" {
			t.Fatalf("content %s from %d blocks", out, len(before))
		}
		for i, c := range back.Content {
			if c.Type == "text" && untrusted.Escape(c.Text) != c.Text {
				t.Fatalf("block %d still hides something: %+q", i, c.Text)
			}
		}
		for i, b := range before {
			var c struct{ Text string }
			_ = json.Unmarshal([]byte(b), &c)
			if untrusted.Escape(c.Text) == c.Text && !strings.Contains(strings.ToLower(b), `"resource"`) {
				got, _ := json.Marshal(res.Content[i+shift])
				if string(got) != b {
					t.Fatalf("block %d changed though it hid nothing: %s, was %s", i, got, b)
				}
			}
		}
	})
}
