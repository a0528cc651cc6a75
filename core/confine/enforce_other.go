//go:build !linux

package confine

import (
	"fmt"
	"runtime"
)

// enforce has no launcher to run on this system: on macOS Wrap runs the
// handler under sandbox-exec instead.
func enforce(Policy, Support) error {
	return fmt.Errorf("%w: the launcher confines on Linux only, not %s", ErrUnsupported, runtime.GOOS)
}
