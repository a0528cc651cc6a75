package notify

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCenter records what the macOS notifier asks of the notification
// centre.
type fakeCenter struct {
	mu       sync.Mutex
	shown    map[string]macShown
	removed  []string
	stopped  bool
	addErr   error
	set      macSettings
	setErr   error
	setCalls int
}

// macShown is a notification the fake centre shows.
type macShown struct {
	title, body string
	approve     bool // of the category with Approve
}

func newFakeCenter() *fakeCenter { return &fakeCenter{shown: map[string]macShown{}} }

func (f *fakeCenter) settings() (macSettings, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setCalls++
	return f.set, f.setErr
}

func (f *fakeCenter) add(key, title, body string, approve bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.addErr != nil {
		return f.addErr
	}
	f.shown[key] = macShown{title, body, approve}
	return nil
}

func (f *fakeCenter) remove(keys []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.shown, k)
		f.removed = append(f.removed, k)
	}
	return nil
}

func (f *fakeCenter) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
}

// newTestNotifier returns a notifier on a fake centre, closed at the end
// of the test.
func newTestNotifier(t *testing.T) (*macNotifier, *fakeCenter) {
	t.Helper()
	f := newFakeCenter()
	n := newMacNotifier(nil, f)
	t.Cleanup(func() { _ = n.Close() })
	return n, f
}

// show shows key or fails the test.
func show(t *testing.T, n *macNotifier, key string) {
	t.Helper()
	if err := n.Show(Notification{Key: key, Title: "Approve send_email?", Body: "tool send_email", Approve: true}); err != nil {
		t.Fatal(err)
	}
}

// pending returns the actions queued now.
func pending(n *macNotifier) []Action {
	var out []Action
	for {
		select {
		case a, ok := <-n.actions:
			if !ok {
				return out
			}
			out = append(out, a)
		default:
			return out
		}
	}
}

func TestMacRespond(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		shown   []string
		respond [][2]string // key, action identifier
		want    []Action
	}{
		{"approve", []string{"a"}, [][2]string{{"a", macApprove}}, []Action{{Key: "a", Approve: true}}},
		{"deny", []string{"a"}, [][2]string{{"a", macDeny}}, []Action{{Key: "a"}}},
		{"a click on the notification decides nothing", []string{"a"},
			[][2]string{{"a", "com.apple.UNNotificationDefaultActionIdentifier"}, {"a", "com.apple.UNNotificationDismissActionIdentifier"}}, nil},
		{"an unknown action decides nothing", []string{"a"}, [][2]string{{"a", "approve"}}, nil},
		{"a key this notifier did not show", []string{"a"}, [][2]string{{"b", macApprove}}, nil},
		{"one answer per notification", []string{"a"},
			[][2]string{{"a", macDeny}, {"a", macApprove}}, []Action{{Key: "a"}}},
		{"two notifications", []string{"a", "b"},
			[][2]string{{"b", macApprove}, {"a", macDeny}}, []Action{{Key: "b", Approve: true}, {Key: "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, _ := newTestNotifier(t)
			for _, k := range tt.shown {
				show(t, n, k)
			}
			for _, r := range tt.respond {
				n.respond(r[0], r[1])
			}
			if got := pending(n); !slices.Equal(got, tt.want) {
				t.Errorf("actions %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMacWithdrawnIsNotAnswerable(t *testing.T) {
	t.Parallel()
	n, f := newTestNotifier(t)
	show(t, n, "a")
	if err := n.Withdraw("a"); err != nil {
		t.Fatal(err)
	}
	n.respond("a", macApprove)
	if got := pending(n); len(got) != 0 {
		t.Errorf("a withdrawn notification was answered: %v", got)
	}
	if _, ok := f.shown["a"]; ok || !slices.Equal(f.removed, []string{"a"}) {
		t.Errorf("centre still shows a (removed %q)", f.removed)
	}
	// Withdrawing what the notifier does not track still asks the centre.
	if err := n.Withdraw("stale"); err != nil || !slices.Contains(f.removed, "stale") {
		t.Errorf("withdraw stale: %v, removed %q", err, f.removed)
	}
}

// TestMacRespondNeverBlocks: the delegate's callback must return at once
// even when nobody reads Actions; what does not fit is dropped.
func TestMacRespondNeverBlocks(t *testing.T) {
	t.Parallel()
	n, _ := newTestNotifier(t)
	const total = macActionQueue + 10
	for i := range total {
		show(t, n, fmt.Sprint("k", i))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range total {
			n.respond(fmt.Sprint("k", i), macApprove)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("respond blocked on a full queue")
	}
	if got := len(pending(n)); got != macActionQueue {
		t.Errorf("%d actions queued, want %d (the rest dropped)", got, macActionQueue)
	}
}

func TestMacShow(t *testing.T) {
	t.Parallel()
	n, f := newTestNotifier(t)
	err := n.Show(Notification{Key: "k", Title: "Approve\x00 rm?", Body: "args: \xff-rf /", Approve: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.shown["k"]; got != (macShown{"Approve\uFFFD rm?", "args: \uFFFD-rf /", true}) {
		t.Errorf("centre got %+v: NUL and invalid UTF-8 must become U+FFFD, nothing cut", got)
	}
	for _, key := range []string{"", strings.Repeat("x", macMaxKey+1), "a\nb", "a\x00b", "\xff"} {
		if err := n.Show(Notification{Key: key}); err == nil {
			t.Errorf("Show accepted key %q", key)
		}
		if err := n.Withdraw(key); err == nil {
			t.Errorf("Withdraw accepted key %q", key)
		}
	}

	// A notification the centre refused is not answerable.
	f.addErr = errors.New("Notifications are not allowed for this application")
	err = n.Show(Notification{Key: "refused"})
	if err == nil || !strings.Contains(err.Error(), "refused") || !errors.Is(err, f.addErr) {
		t.Errorf("Show = %v, want the centre's error with the key", err)
	}
	n.respond("refused", macApprove)
	// Showing k again fails, but the k shown before stays answerable.
	if err := n.Show(Notification{Key: "k"}); err == nil {
		t.Fatal("Show succeeded")
	}
	n.respond("k", macApprove)
	if got := pending(n); !slices.Equal(got, []Action{{Key: "k", Approve: true}}) {
		t.Errorf("actions %v, want only k's", got)
	}
}

// A notification that may not offer Approve (it cannot show every
// argument) is of the Deny-only category, and an Approve response to it —
// which only a stale or confused centre could send — decides nothing; a
// notification replaced by a Deny-only one loses its Approve.
func TestMacDenyOnly(t *testing.T) {
	t.Parallel()
	n, f := newTestNotifier(t)
	if err := n.Show(Notification{Key: "cut", Title: "Approve t?", Body: "m = \"xxx…"}); err != nil {
		t.Fatal(err)
	}
	if got := f.shown["cut"]; got.approve {
		t.Errorf("centre got %+v; want the Deny-only category", got)
	}
	show(t, n, "replaced")
	if err := n.Show(Notification{Key: "replaced", Title: "Approve t?", Body: "now cut…"}); err != nil {
		t.Fatal(err)
	}
	show(t, n, "whole") // the positive control
	for _, key := range []string{"cut", "replaced", "whole"} {
		n.respond(key, macApprove)
	}
	n.respond("cut", macDeny)
	want := []Action{{Key: "whole", Approve: true}, {Key: "cut"}}
	if got := pending(n); !slices.Equal(got, want) {
		t.Errorf("actions %v, want %v", got, want)
	}
}

func TestMacClose(t *testing.T) {
	t.Parallel()
	f := newFakeCenter()
	n := newMacNotifier(nil, f)
	show(t, n, "a")
	show(t, n, "b")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(f.removed)
	if !f.stopped || !slices.Equal(f.removed, []string{"a", "b"}) || len(f.shown) != 0 {
		t.Errorf("after Close: stopped %v, removed %q, still shown %v", f.stopped, f.removed, f.shown)
	}
	if _, ok := <-n.Actions(); ok {
		t.Error("Actions is open after Close")
	}
	n.respond("a", macApprove) // must not panic on the closed channel
	if err := n.Show(Notification{Key: "c"}); err == nil {
		t.Error("Show after Close succeeded")
	}
	if err := n.Withdraw("a"); err != nil {
		t.Errorf("Withdraw after Close: %v", err)
	}
	if ok, why := n.Permission(); ok || why == "" {
		t.Errorf("Permission after Close = %v, %q", ok, why)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestMacCloseWhileResponding runs responses against Close (under -race):
// no send on a closed channel, no lost lock.
func TestMacCloseWhileResponding(t *testing.T) {
	t.Parallel()
	n, _ := newTestNotifier(t)
	for i := range 100 {
		show(t, n, fmt.Sprint("k", i))
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { n.respond(fmt.Sprint("k", i), macDeny) })
	}
	wg.Go(func() { _ = n.Close() })
	wg.Wait()
}

func TestMacPermission(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		set   macSettings
		asked string
		ok    bool
		why   string // a part of the reason
	}{
		{"allowed", macSettings{Status: macAuthorized, Alert: macSettingEnabled, Style: 2}, "", true, ""},
		{"banners", macSettings{Status: macAuthorized, Alert: macSettingEnabled, Style: 1}, "", true, ""},
		{"denied", macSettings{Status: macDenied}, "", false, "System Settings › Notifications › Carapace"},
		{"not asked yet", macSettings{Status: macNotDetermined}, "", false, "answer the prompt"},
		{"request failed", macSettings{Status: macNotDetermined}, "Notifications are not allowed for this application", false, "not allowed for this application"},
		{"provisional", macSettings{Status: macProvisional, Alert: macSettingEnabled, Style: 1}, "", false, "quietly"},
		{"no alerts", macSettings{Status: macAuthorized, Alert: 1, Style: 0}, "", false, "no banners"},
		{"style none", macSettings{Status: macAuthorized, Alert: macSettingEnabled, Style: macStyleNone}, "", false, "no banners"},
		{"unknown", macSettings{Status: 9}, "", false, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, f := newTestNotifier(t)
			f.set = tt.set
			if tt.asked != "" {
				n.authorized(false, tt.asked)
			}
			ok, why := n.Permission()
			if ok != tt.ok || !strings.Contains(why, tt.why) || ok != (why == "") {
				t.Errorf("Permission = %v, %q; want %v with %q", ok, why, tt.ok, tt.why)
			}
			if !ok && !strings.Contains(why, "menu") {
				t.Errorf("reason %q does not say that the menu carries the approvals", why)
			}
		})
	}
}

// TestMacPermissionUnreadable: when the settings cannot be read, the last
// ones read stand; with none, permission is refused.
func TestMacPermissionUnreadable(t *testing.T) {
	t.Parallel()
	n, f := newTestNotifier(t)
	f.setErr = errors.New("no answer")
	if ok, why := n.Permission(); ok || !strings.Contains(why, "no answer") {
		t.Errorf("Permission = %v, %q", ok, why)
	}
	f.setErr = nil
	f.set = macSettings{Status: macAuthorized, Alert: macSettingEnabled, Style: 2}
	if ok, _ := n.Permission(); !ok {
		t.Fatal("not allowed")
	}
	f.setErr = errors.New("no answer")
	if ok, why := n.Permission(); !ok {
		t.Errorf("Permission = %v, %q; want the last settings read", ok, why)
	}
	if f.setCalls != 3 {
		t.Errorf("settings read %d times, want every time", f.setCalls)
	}
}

func TestMacCalls(t *testing.T) {
	t.Parallel()
	var c macCalls
	id, ch := c.start()
	c.finish(id, macResult{settings: macSettings{Status: macDenied}})
	if r, err := c.wait(id, ch, time.Second, "read"); err != nil || r.settings.Status != macDenied {
		t.Errorf("wait = %v, %v", r, err)
	}

	id, ch = c.start()
	go c.finish(id, macResult{err: "not allowed"})
	if _, err := c.wait(id, ch, 5*time.Second, "show"); err == nil || err.Error() != "not allowed" {
		t.Errorf("wait = %v, want the handler's error", err)
	}

	id, ch = c.start()
	_, err := c.wait(id, ch, 10*time.Millisecond, "show k")
	if err == nil || !strings.Contains(err.Error(), "show k") {
		t.Errorf("wait = %v, want a timeout naming the call", err)
	}
	c.finish(id, macResult{}) // late: ignored, never blocks
	c.finish(12345, macResult{})
	if len(c.waiting) != 0 {
		t.Errorf("%d calls still waiting", len(c.waiting))
	}
}
