package app_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/app"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/control/controltest"
)

// cutting is a fake core whose watches the test can end, as the real core
// ends the watch of a reader that fell behind.
type cutting struct {
	*controltest.Backend
	mu      sync.Mutex
	watches int
	cuts    []func()
	watched chan struct{} // a watch started
}

func (c *cutting) Changes() (control.Changes, error) {
	f, err := c.Backend.Changes()
	if err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	var once sync.Once
	c.mu.Lock()
	c.watches++
	c.cuts = append(c.cuts, func() { once.Do(func() { close(stop) }) })
	c.mu.Unlock()
	c.watched <- struct{}{}
	return cutFeed{f, stop}, nil
}

// cutFeed is a watch's changes until stop is closed, and then the core's
// cut-off.
type cutFeed struct {
	control.Changes
	stop chan struct{}
}

func (f cutFeed) Next(ctx context.Context) (control.Change, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-f.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := f.Changes.Next(ctx)
	select {
	case <-f.stop:
		return control.Change{}, control.ErrCutOff
	default:
		return c, err
	}
}

// cut ends the latest watch.
func (c *cutting) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cuts[len(c.cuts)-1]()
}

// A watch the core ends while it still runs is started again: the menu
// follows the core again from a fresh snapshot, and a confirmation
// pending across the gap keeps its one notification.
func TestWatchAgainAfterACut(t *testing.T) {
	var c *cutting
	h, b := fakeCore(t, func(b *controltest.Backend) control.Backend {
		c = &cutting{Backend: b, watched: make(chan struct{}, 8)}
		return c
	})
	n := newFakeNotifier()
	a := startApp(t, h, func(o *app.Options) { o.Notifier = n })
	<-c.watched
	a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))
	b.AddConfirmation(confirmation(idA, `{"m":1}`))
	a.tray.waitFor(t, "the first approval", has("confirm/"+idA+"/approve"))
	n.waitShown(t, idA)

	c.cut()
	<-c.watched // the app watches again
	a.tray.waitFor(t, "the core running again", titled("status", "Carapace: running"))
	b.AddConfirmation(confirmation(idB, `{"m":2}`))
	a.tray.waitFor(t, "the approval after the cut", has("confirm/"+idB+"/approve"))
	n.waitShown(t, idB)
	if tr := a.tray.current(); !has("confirm/" + idA + "/approve")(tr) {
		t.Errorf("the approval pending across the cut is gone:\n%s", tr)
	}
	if shown, withdrawn := n.count(idA); shown != 1 || withdrawn != 0 {
		t.Errorf("the approval pending across the cut: shown %d, withdrawn %d times; want 1, 0", shown, withdrawn)
	}
	if !strings.Contains(a.log.String(), "the watch stream ended; watching again") {
		t.Error("the reconnection was not logged")
	}
}
