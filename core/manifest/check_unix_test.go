//go:build unix

package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadFIFO: a named pipe in place of the manifest is refused without
// blocking on open.
func TestLoadFIFO(t *testing.T) {
	dir := copyPlugin(t, "good-plugin")
	file := filepath.Join(dir, ManifestFile)
	must(t, os.Remove(file))
	must(t, syscall.Mkfifo(file, 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := Load(dir, Options{})
		done <- err
	}()
	select {
	case err := <-done:
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Problems[0].Message, "is not a regular file") {
			t.Fatalf("Load err = %v", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the reader so the goroutine ends.
		if f, err := os.OpenFile(file, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("Load blocked on a FIFO")
	}
}
