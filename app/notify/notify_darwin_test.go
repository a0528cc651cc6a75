//go:build darwin && cgo

package notify

import (
	"errors"
	"testing"
)

// TestNewOutsideBundle runs on macOS (the macOS CI workflow): a test
// binary has no bundle identifier, so New must refuse with ErrUnavailable
// and must not touch the notification centre — if it did, the process
// would die of an Objective-C exception here.
func TestNewOutsideBundle(t *testing.T) {
	n, err := New(nil, Options{})
	if !errors.Is(err, ErrUnavailable) || n != nil {
		t.Fatalf("New = %v, %v; want ErrUnavailable outside a bundle", n, err)
	}
	t.Log(err)
}
