package poppytest

import (
	"fmt"
	"log"
	"sync"
)

// Reporter is a T for running a Server outside a test: the demo, Example
// functions, a Company developer's own program. Each protocol violation goes
// to Log and is counted; Close runs the cleanups, last first. The zero value
// logs with the standard log package. It is safe for concurrent use.
type Reporter struct {
	// Log receives each violation's message. Nil: log.Print.
	Log func(msg string)

	// mu guards cleanups and failures.
	mu       sync.Mutex
	cleanups []func()
	failures int
}

// Helper does nothing: there is no test to mark.
func (r *Reporter) Helper() {}

// Errorf reports a violation.
func (r *Reporter) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failures++
	r.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if r.Log != nil {
		r.Log(msg)
		return
	}
	log.Print(msg)
}

// Cleanup registers f to run at Close.
func (r *Reporter) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// Failures is how many violations were reported.
func (r *Reporter) Failures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures
}

// Close runs the registered cleanups, the last registered first, once.
func (r *Reporter) Close() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
