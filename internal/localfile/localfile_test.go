package localfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRead: a regular file is read up to the limit; a larger one,
// a directory or a device is refused without reading it.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(path, 10); err != nil || string(b) != "0123456789" {
		t.Errorf("a file at the limit: %q, %v", b, err)
	}
	if _, err := Read(path, 9); err == nil || !strings.Contains(err.Error(), "larger than 9 bytes") {
		t.Errorf("a file past the limit: %v", err)
	}
	if _, err := Read(dir, 10); !IsNotRegular(err) || !strings.Contains(err.Error(), "a directory") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := Read("/dev/zero", 10); !IsNotRegular(err) || !strings.Contains(err.Error(), "a device") {
			t.Errorf("/dev/zero: %v", err)
		}
	}
}
