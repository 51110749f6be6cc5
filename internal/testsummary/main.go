// Command testsummary reads `go test -json` on stdin and writes what a
// person needs from it (scripts/test.sh runs it; see README.md): a line per
// package as `go test` prints it, the whole output of each failing test and
// of each package that failed to build or crashed, each skipped test with
// its reason, and last, alone on its line, "N passed, M failed, K skipped".
// It exits 1 when anything failed, 2 when stdin could not be read.
package main

import (
	"fmt"
	"os"
)

func main() {
	counts, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if counts.Failed > 0 {
		os.Exit(1)
	}
}
