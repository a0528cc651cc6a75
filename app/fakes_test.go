package app_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/app"
	"github.com/carapace-dev/carapace/app/loginitem"
	"github.com/carapace-dev/carapace/app/menu"
	"github.com/carapace-dev/carapace/app/notify"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// waitTimeout bounds every wait of these tests: a bound for a loaded
// machine, not an expectation of how long anything takes.
const waitTimeout = 60 * time.Second

// fakeTray records the menus the app shows and sends clicks.
type fakeTray struct {
	mu      sync.Mutex
	tree    menu.Tree
	updates int
	changed chan struct{}
	clicks  chan menu.Click
	quit    chan struct{}
	once    sync.Once
}

var _ app.Tray = (*fakeTray)(nil)

func newFakeTray() *fakeTray {
	return &fakeTray{changed: make(chan struct{}, 1), clicks: make(chan menu.Click), quit: make(chan struct{})}
}

func (f *fakeTray) Update(t menu.Tree) {
	f.mu.Lock()
	f.tree = t
	f.updates++
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeTray) Clicks() <-chan menu.Click { return f.clicks }
func (f *fakeTray) Quit()                     { f.once.Do(func() { close(f.quit) }) }

func (f *fakeTray) current() menu.Tree {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tree
}

// waitFor waits until the menu shown satisfies cond, and returns it.
func (f *fakeTray) waitFor(t *testing.T, what string, cond func(menu.Tree) bool) menu.Tree {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		tr := f.current()
		if cond(tr) {
			return tr
		}
		select {
		case <-f.changed:
		case <-timeout.C:
			t.Fatalf("timed out waiting for the menu to show %s; it shows:\n%s", what, tr)
		}
	}
}

// click clicks item id of tr, which must be enabled, as the desktop's
// own menu does (a vouched click).
func (f *fakeTray) click(t *testing.T, tr menu.Tree, id string) {
	t.Helper()
	f.clickFrom(t, tr, id, true)
}

// clickFrom clicks item id of tr, vouched for or not.
func (f *fakeTray) clickFrom(t *testing.T, tr menu.Tree, id string, vouched bool) {
	t.Helper()
	it, ok := tr.Find(id)
	if !ok || !it.Enabled {
		t.Fatalf("no enabled item %s in the menu:\n%s", id, tr)
	}
	select {
	case f.clicks <- menu.Click{Action: it.Action, Vouched: vouched, From: "a test"}:
	case <-time.After(waitTimeout):
		t.Fatalf("the app does not read clicks")
	}
}

// has reports whether the tree has item id.
func has(id string) func(menu.Tree) bool {
	return func(tr menu.Tree) bool { _, ok := tr.Find(id); return ok }
}

// hasNot reports whether the tree lacks item id (and is rendered at all).
func hasNot(id string) func(menu.Tree) bool {
	return func(tr menu.Tree) bool { _, ok := tr.Find(id); return len(tr.Items) > 0 && !ok }
}

func titled(id, title string) func(menu.Tree) bool {
	return func(tr menu.Tree) bool { it, ok := tr.Find(id); return ok && it.Title == title }
}

// fakeNotifier records what the app shows and withdraws, and sends
// actions.
type fakeNotifier struct {
	mu        sync.Mutex
	shown     []notify.Notification
	withdrawn []string
	closed    bool
	ok        bool
	why       string
	changed   chan struct{}
	actions   chan notify.Action
}

var _ notify.Notifier = (*fakeNotifier)(nil)

func newFakeNotifier() *fakeNotifier {
	return &fakeNotifier{ok: true, changed: make(chan struct{}, 1), actions: make(chan notify.Action)}
}

func (f *fakeNotifier) Permission() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ok, f.why
}

func (f *fakeNotifier) Show(n notify.Notification) error {
	f.mu.Lock()
	f.shown = append(f.shown, n)
	f.mu.Unlock()
	f.poke()
	return nil
}

func (f *fakeNotifier) Withdraw(key string) error {
	f.mu.Lock()
	f.withdrawn = append(f.withdrawn, key)
	f.mu.Unlock()
	f.poke()
	return nil
}

func (f *fakeNotifier) Actions() <-chan notify.Action { return f.actions }

func (f *fakeNotifier) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.poke()
	return nil
}

func (f *fakeNotifier) poke() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// waitShown waits for the notification with key and returns it.
func (f *fakeNotifier) waitShown(t *testing.T, key string) notify.Notification {
	t.Helper()
	var got notify.Notification
	f.waitFor(t, "a notification for "+key, func() bool {
		for _, n := range f.shown {
			if n.Key == key {
				got = n
				return true
			}
		}
		return false
	})
	return got
}

func (f *fakeNotifier) waitWithdrawn(t *testing.T, key string) {
	t.Helper()
	f.waitFor(t, "the withdrawal of "+key, func() bool { return slices.Contains(f.withdrawn, key) })
}

// waitFor waits until cond, called with f locked, holds.
func (f *fakeNotifier) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.changed:
		case <-timeout.C:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("timed out waiting for %s; shown %+v, withdrawn %v", what, f.shown, f.withdrawn)
		}
	}
}

func (f *fakeNotifier) count(key string) (shown, withdrawn int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.shown {
		if n.Key == key {
			shown++
		}
	}
	for _, k := range f.withdrawn {
		if k == key {
			withdrawn++
		}
	}
	return shown, withdrawn
}

// act presses a notification's button.
func (f *fakeNotifier) act(t *testing.T, a notify.Action) {
	t.Helper()
	select {
	case f.actions <- a:
	case <-time.After(waitTimeout):
		t.Fatalf("the app does not read notification actions")
	}
}

// fakeLogin is a login item in memory.
type fakeLogin struct {
	mu      sync.Mutex
	on      bool
	err     error // SetEnabled's
	enabled error // Enabled's
}

var _ loginitem.Item = (*fakeLogin)(nil)

func (f *fakeLogin) Enabled() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on, f.enabled
}

func (f *fakeLogin) SetEnabled(on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.on = on
	return nil
}

// running is an app under test.
type running struct {
	tray *fakeTray
	log  *testutil.Buffer
	done chan error
	stop context.CancelFunc
}

// startApp runs the app for home h until the test ends; edit adjusts its
// options.
func startApp(t *testing.T, h home.Dir, edit func(*app.Options)) *running {
	t.Helper()
	r := &running{tray: newFakeTray(), log: &testutil.Buffer{}, done: make(chan error, 1)}
	o := app.Options{Home: h, Tray: r.tray, Decider: "tester", Logger: testLogger(r.log),
		Open: func(string) error { return nil }}
	if edit != nil {
		edit(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- app.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		r.wait(t)
	})
	return r
}

// wait waits for Run to return and checks it returned nil and quit the
// tray.
func (r *running) wait(t *testing.T) {
	t.Helper()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("Run: %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("Run did not return")
	}
	select {
	case <-r.tray.quit:
	default:
		t.Error("Run returned without quitting the tray")
	}
}
