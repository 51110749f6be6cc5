package main

// This file is the summary: the events of `go test -json` (cmd/test2json's
// TestEvent, with the build-output and build-fail events of a package that
// does not build) turned into lines for a person.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// event is one line of `go test -json` (go doc cmd/test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output, build-fail: the package being built
	FailedBuild string // a package's fail: the package whose build failed
}

// counts are the tests (and subtests) seen. Failed also counts a package
// that failed with no failing test: a build failure, a crash in TestMain.
type counts struct {
	Passed, Failed, Skipped int
}

// skip is one skipped test and why.
type skip struct {
	name, reason string
}

// summary is what has been read so far. It is not safe for concurrent use.
type summary struct {
	w      io.Writer
	counts counts
	// output holds each running test's output (key: package, test) and
	// each package's own (test ""), until they end.
	output map[[2]string][]string
	build  map[string][]string // build output, by ImportPath
	failed map[string]bool     // the packages with a failing test
	skips  []skip
}

// summarize reads events from r and writes the summary to w.
func summarize(r io.Reader, w io.Writer) (counts, error) {
	s := &summary{w: w, output: map[[2]string][]string{}, build: map[string][]string{}, failed: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a test may print long lines
	for sc.Scan() {
		var e event
		if line := sc.Bytes(); json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintln(w, string(line)) // not an event: go's own messages, shown as they are
			continue
		}
		s.add(e)
	}
	if err := sc.Err(); err != nil {
		return s.counts, err
	}
	s.finish()
	return s.counts, nil
}

// add takes one event.
func (s *summary) add(e event) {
	key := [2]string{e.Package, e.Test}
	switch {
	case e.Action == "build-output":
		s.build[e.ImportPath] = append(s.build[e.ImportPath], e.Output)
	case e.Action == "output":
		s.output[key] = append(s.output[key], e.Output)
	case e.Test != "":
		s.testEnded(e, key)
	case e.Action == "pass" || e.Action == "skip" || e.Action == "fail":
		s.packageEnded(e)
	}
}

// testEnded counts a test that passed, failed or was skipped; a failing
// test's output is printed at once.
func (s *summary) testEnded(e event, key [2]string) {
	out := s.output[key]
	switch e.Action {
	case "pass":
		s.counts.Passed++
	case "skip":
		s.counts.Skipped++
		s.skips = append(s.skips, skip{e.Package + " " + e.Test, skipReason(out)})
	case "fail":
		s.counts.Failed++
		s.failed[e.Package] = true
		fmt.Fprintf(s.w, "--- FAIL: %s %s\n%s", e.Package, e.Test, strings.Join(out, ""))
	default:
		return // run, pause, cont: still running
	}
	delete(s.output, key)
}

// packageEnded prints a package's line as `go test` does. A package that
// failed with no failing test (it did not build, or crashed outside a test)
// is printed whole and counted as a failure, with the tests it left running.
func (s *summary) packageEnded(e event) {
	key := [2]string{e.Package, ""}
	out := s.output[key]
	delete(s.output, key)
	if e.Action != "fail" {
		for _, line := range out { // "ok  pkg 1.2s" or "?  pkg [no test files]", not PASS
			if strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "? ") {
				fmt.Fprint(s.w, line)
			}
		}
		return
	}
	if e.FailedBuild != "" {
		fmt.Fprint(s.w, strings.Join(s.build[e.FailedBuild], ""))
	}
	left := s.running(e.Package)
	if !s.failed[e.Package] && len(left) == 0 {
		s.counts.Failed++
	}
	for _, t := range left {
		s.counts.Failed++
		fmt.Fprintf(s.w, "--- FAIL: %s %s (did not finish)\n%s", e.Package, t, strings.Join(s.output[[2]string{e.Package, t}], ""))
		delete(s.output, [2]string{e.Package, t})
	}
	fmt.Fprint(s.w, strings.Join(out, ""))
}

// running are the tests of pkg that started and have not ended.
func (s *summary) running(pkg string) []string {
	var out []string
	for k := range s.output {
		if k[0] == pkg && k[1] != "" {
			out = append(out, k[1])
		}
	}
	return out
}

// finish lists the skipped tests, then the counts, last and alone on their line.
func (s *summary) finish() {
	if len(s.skips) > 0 {
		fmt.Fprintf(s.w, "\nSkipped:\n")
	}
	for _, sk := range s.skips {
		fmt.Fprintf(s.w, "  %s: %s\n", sk.name, sk.reason)
	}
	fmt.Fprintf(s.w, "%d passed, %d failed, %d skipped\n", s.counts.Passed, s.counts.Failed, s.counts.Skipped)
}

// skipReason is what a skipped test said, without the lines the testing
// package adds (=== RUN, --- SKIP) and the file:line each log line starts
// with.
func skipReason(out []string) string {
	var said []string
	for _, line := range out {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "=== ") || strings.HasPrefix(line, "--- SKIP") {
			continue
		}
		if file, rest, ok := strings.Cut(line, ": "); ok && strings.Contains(file, "_test.go:") {
			line = rest
		}
		said = append(said, line)
	}
	if len(said) == 0 {
		return "(no reason given)"
	}
	return strings.Join(said, " / ")
}
