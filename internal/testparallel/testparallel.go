// Package testparallel is for tests: a TestMain helper for packages whose
// parallel tests mostly wait (on poll intervals, leases, long-polls, child
// processes) rather than compute. go test runs GOMAXPROCS parallel tests at
// once by default, two on a 2-core machine, which leaves the CPU idle while
// each waits; Run lets more run at once unless -parallel was given.
package testparallel

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// Run is Set, then m run, exiting with its code.
func Run(m *testing.M) {
	Set()
	os.Exit(m.Run())
}

// Set parses the test flags and sets -parallel to 4 per CPU (at least 8)
// unless the command line set it. Call it from TestMain, before m.Run.
func Set() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(max(8, 4*runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
}
