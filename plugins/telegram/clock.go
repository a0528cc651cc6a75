package telegram

import (
	"context"
	"time"

	"github.com/carapace-dev/carapace/internal/clock"
)

// Clock is the plugin's time: the debounce, the typing indicator, the rate
// limits and retry_after waits all go through it, so that tests can run
// them on a fake clock they advance (internal/clock).
type Clock = clock.Clock

// Timer is a pending Clock.AfterFunc.
type Timer = clock.Timer

// sleep waits d on c, or until ctx ends.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	done := make(chan struct{})
	t := c.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}
