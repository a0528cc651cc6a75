//go:build darwin && !cgo

package notify

import (
	"fmt"
	"log/slog"
)

// New fails with ErrUnavailable: macOS notifications are bound with cgo,
// and this build has none. The menu carries the approvals.
func New(log *slog.Logger, opts Options) (Notifier, error) {
	return nil, fmt.Errorf("%w: this build of Carapace has no cgo, which macOS notifications need", ErrUnavailable)
}
