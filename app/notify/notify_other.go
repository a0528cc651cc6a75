//go:build !linux && !darwin

package notify

import (
	"fmt"
	"log/slog"
	"runtime"
)

// New reports that this platform has no notification backend: the app
// runs with its menu alone. The signature is every platform's (see
// Options).
func New(log *slog.Logger, opts Options) (Notifier, error) {
	return nil, fmt.Errorf("%w on %s: approve from the Carapace menu", ErrUnavailable, runtime.GOOS)
}
