//go:build darwin && cgo

package loginitem

import (
	"errors"
	"testing"
)

// TestOutsideBundle runs on macOS (the macOS CI workflow): a test binary
// is not an app bundle, so the login item reports ErrUnsupported and
// registers nothing (registering the test binary's "app" would leave a
// stray login item on the machine).
func TestOutsideBundle(t *testing.T) {
	it := New(Options{})
	if on, err := it.Enabled(); on || !errors.Is(err, ErrUnsupported) {
		t.Errorf("Enabled = %v, %v; want ErrUnsupported", on, err)
	}
	if err := it.SetEnabled(true); !errors.Is(err, ErrUnsupported) {
		t.Errorf("SetEnabled(true) = %v; want ErrUnsupported", err)
	}
}
