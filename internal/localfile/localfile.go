// Package localfile reads the local files the CLI reads that another process on
// the machine could have replaced with something that never ends: the
// assistants' configurations that doctor reads (a project's .mcp.json
// linked to /dev/zero, or a FIFO nobody writes), the HTTP bearer token
// file, an OpenAPI document named on the command line. Each is opened
// without blocking (O_NONBLOCK: opening a FIFO waits for no writer), must
// be a regular file where the CLI expects one, and is read up to a limit
// in size and in time.
package localfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// MaxConfigFile bounds an assistant's configuration. ~/.claude.json, where
// Claude Code also keeps each project's history, runs to megabytes.
const MaxConfigFile = 16 << 20

// ReadTimeout bounds a local file's read in time: a file on a network
// mount that stopped answering is reported, not waited for.
const ReadTimeout = 5 * time.Second

// ErrTooSlow is a local read that took longer than ReadTimeout.
var ErrTooSlow = fmt.Errorf("reading it took longer than %v", ReadTimeout)

// NotRegularError is a path that is not a regular file: a device, a FIFO,
// a socket or a directory, which a configuration never is.
type NotRegularError struct{ Mode os.FileMode }

// Error names what the path is instead.
func (e *NotRegularError) Error() string {
	kind := "a " + e.Mode.Type().String() + " file"
	switch {
	case e.Mode&os.ModeDevice != 0:
		kind = "a device"
	case e.Mode&os.ModeNamedPipe != 0:
		kind = "a FIFO"
	case e.Mode&os.ModeSocket != 0:
		kind = "a socket"
	case e.Mode.IsDir():
		kind = "a directory"
	}
	return "it is " + kind + ", not a regular file: not read"
}

// TooLargeError is a file larger than the CLI reads.
type TooLargeError struct{ Limit int64 }

// Error says the limit, in bytes, KiB or MiB.
func (e *TooLargeError) Error() string {
	switch {
	case e.Limit < 1<<10:
		return fmt.Sprintf("it is larger than %d bytes: not read", e.Limit)
	case e.Limit < 1<<20:
		return fmt.Sprintf("it is larger than %d KiB: not read", e.Limit>>10)
	}
	return fmt.Sprintf("it is larger than %d MiB: not read", e.Limit>>20)
}

// OpenNonblocking opens path for reading without waiting for a FIFO's
// writer. Reads of a FIFO or a terminal then wait in Go's poller, not in a
// thread; a regular file reads as usual.
func OpenNonblocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// Read reads the regular file at path, at most limit bytes, within
// ReadTimeout. A path that is not a regular file (after following
// links), a larger file, or a slower read is an error and nothing is read
// past the limit.
func Read(path string, limit int64) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := readRegular(path, limit)
		done <- result{b, err}
	}()
	timer := time.NewTimer(ReadTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.b, r.err
	case <-timer.C:
		return nil, ErrTooSlow // the read goes on in its goroutine until the process ends
	}
}

// readRegular is Read's read, checked on the opened file itself so
// that the file cannot be swapped between a check and the read.
func readRegular(path string, limit int64) ([]byte, error) {
	f, err := OpenNonblocking(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &NotRegularError{Mode: fi.Mode()}
	}
	if fi.Size() > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // it grew since Stat
		return nil, &TooLargeError{Limit: limit}
	}
	return b, nil
}

// IsNotRegular reports whether err is Read's refusal of a path
// that is not a regular file.
func IsNotRegular(err error) bool {
	var nr *NotRegularError
	return errors.As(err, &nr)
}
