package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/carapace-dev/carapace/app"
	"github.com/carapace-dev/carapace/app/loginitem"
	"github.com/carapace-dev/carapace/app/menu"
	"github.com/carapace-dev/carapace/app/notify"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/appstate"
	"github.com/carapace-dev/carapace/internal/testutil/leaktest"
)

func testLogger(w io.Writer) *slog.Logger {
	if testing.Verbose() {
		w = io.MultiWriter(w, os.Stderr)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// omitting is a fake core that, like the real one for large arguments,
// leaves every confirmation's arguments out of its watch events: surfaces
// must fetch them.
type omitting struct{ *controltest.Backend }

func (o omitting) Changes() (control.Changes, error) {
	f, err := o.Backend.Changes()
	return omittingFeed{f}, err
}

// omittingFeed is a watch's changes with the confirmations' arguments
// left out.
type omittingFeed struct{ control.Changes }

func (f omittingFeed) Next(ctx context.Context) (control.Change, error) {
	c, err := f.Changes.Next(ctx)
	if err != nil || !strings.HasPrefix(c.Type, "confirmation.") {
		return c, err
	}
	var cf api.Confirmation
	if err := json.Unmarshal(c.Payload, &cf); err != nil {
		return c, err
	}
	cf.Arguments, cf.ArgumentsOmitted = nil, true
	c.Payload, err = json.Marshal(cf)
	return c, err
}

// fakeCore serves a controltest backend (wrapped by wrap, if not nil) on a
// fresh home.
func fakeCore(t *testing.T, wrap func(*controltest.Backend) control.Backend) (home.Dir, *controltest.Backend) {
	t.Helper()
	h := controltest.TempHome(t)
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	b := controltest.NewBackend(h)
	var backend control.Backend = b
	if wrap != nil {
		backend = wrap(b)
	}
	controltest.Start(t, backend, h.ControlSocket())
	return h, b
}

func confirmation(id, args string) api.Confirmation {
	return api.Confirmation{ID: id, Tool: "send_email", Group: "main", Session: "s1",
		ArgsHash: strings.Repeat("ab", 32), Arguments: json.RawMessage(args),
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
}

const (
	idA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// A decision goes to the core with the id, the hash shown, the surface it
// was made on and who made it; the confirmation then leaves the menu and
// its notification is withdrawn.
func TestDecisions(t *testing.T) {
	tests := []struct {
		name    string
		approve bool
		notif   bool // decided on the notification, else in the menu
		surface string
	}{
		{"approve in the menu", true, false, app.SurfaceMenu},
		{"deny in the menu", false, false, app.SurfaceMenu},
		{"approve on the notification", true, true, app.SurfaceNotification},
		{"deny on the notification", false, true, app.SurfaceNotification},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, b := fakeCore(t, nil)
			n := newFakeNotifier()
			a := startApp(t, h, func(o *app.Options) { o.Notifier = n })
			a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))
			c := confirmation(idA, `{"to":"alice@example.com"}`)
			b.AddConfirmation(c)
			tr := a.tray.waitFor(t, "the approval", has("confirm/"+idA+"/approve"))
			n.waitShown(t, idA)
			switch {
			case tt.notif:
				n.act(t, notify.Action{Key: idA, Approve: tt.approve})
			case tt.approve:
				a.tray.click(t, tr, "confirm/"+idA+"/approve")
			default:
				a.tray.click(t, tr, "confirm/"+idA+"/deny")
			}
			a.tray.waitFor(t, "the approval gone", hasNot("confirm/"+idA))
			n.waitWithdrawn(t, idA)
			want := api.Decision{ID: idA, Approve: tt.approve, ArgsHash: c.ArgsHash, Surface: tt.surface, Decider: "tester"}
			if got := b.Decisions(); len(got) != 1 || got[0] != want {
				t.Errorf("decisions %+v, want [%+v]", got, want)
			}
		})
	}
}

// An Approve the tray cannot vouch for (a dbusmenu Event from a
// connection that is not the panel's) decides nothing: the menu says
// where to approve, and the notification is raised again, whose Approve
// decides. Deny is taken from any click: it approves nothing.
func TestUnvouchedClicks(t *testing.T) {
	h, b := fakeCore(t, nil)
	n := newFakeNotifier()
	a := startApp(t, h, func(o *app.Options) { o.Notifier = n })
	a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))
	b.AddConfirmation(confirmation(idA, `{"to":"alice@example.com"}`))
	b.AddConfirmation(confirmation(idB, `{"to":"bob@example.com"}`))
	tr := a.tray.waitFor(t, "the approvals", func(tr menu.Tree) bool {
		return has("confirm/"+idA+"/approve")(tr) && has("confirm/"+idB+"/deny")(tr)
	})
	n.waitShown(t, idA)

	a.tray.clickFrom(t, tr, "confirm/"+idA+"/approve", false)
	reconfirm := a.tray.waitFor(t, "where to approve instead", func(tr menu.Tree) bool {
		_, ok := tr.Find("confirm/" + idA + "/reconfirm/0")
		return ok
	})
	if text := reconfirm.String(); !strings.Contains(text, "carapace confirm approve aaaaaaaa") {
		t.Errorf("the menu does not say how to approve instead:\n%s", text)
	}
	n.waitFor(t, "the notification raised again", func() bool {
		return len(shownFor(n.shown, idA)) == 2 && strings.HasPrefix(shownFor(n.shown, idA)[1].Body, "Confirm here:")
	})
	if got := b.Decisions(); len(got) != 0 {
		t.Fatalf("an unvouched Approve decided: %+v", got)
	}
	if !strings.Contains(a.log.String(), "from=\"a test\"") {
		t.Errorf("the log does not name the click's sender:\n%s", a.log)
	}

	// Deny needs no voucher.
	a.tray.clickFrom(t, tr, "confirm/"+idB+"/deny", false)
	a.tray.waitFor(t, "B denied", hasNot("confirm/"+idB))
	// The notification's Approve decides.
	n.act(t, notify.Action{Key: idA, Approve: true})
	a.tray.waitFor(t, "A approved", hasNot("confirm/"+idA))
	got := b.Decisions()
	if len(got) != 2 || got[0].ID != idB || got[0].Approve || got[0].Surface != app.SurfaceMenu ||
		got[1].ID != idA || !got[1].Approve || got[1].Surface != app.SurfaceNotification {
		t.Fatalf("decisions %+v; want B denied in the menu, then A approved on the notification", got)
	}
}

// shownFor returns the notifications shown with key.
func shownFor(shown []notify.Notification, key string) []notify.Notification {
	return slices.DeleteFunc(slices.Clone(shown), func(n notify.Notification) bool { return n.Key != key })
}

// A confirmation whose display hides values is approved nowhere in the
// app: the menu's Approve is disabled, the notification offers Deny only,
// and an Approve that reaches the app anyway (a stale button) is not sent.
func TestHiddenValuesApproveNothing(t *testing.T) {
	h, b := fakeCore(t, nil)
	n := newFakeNotifier()
	a := startApp(t, h, func(o *app.Options) { o.Notifier = n })
	c := confirmation(idA, `{"prompt":"-----BEGIN RSA PRIVATE KEY-----[REDACTED]"}`)
	c.Hidden = []api.Hidden{{Path: "prompt", Kind: "private-key", Chars: 52}}
	b.AddConfirmation(c)
	tr := a.tray.waitFor(t, "the approval", has("confirm/"+idA+"/hidden/0"))
	if it, _ := tr.Find("confirm/" + idA + "/approve"); it.Enabled {
		t.Error("the menu offers Approve on hidden values")
	}
	if got := n.waitShown(t, idA); got.Approve || !strings.Contains(got.Body, "carapace confirm show --raw aaaaaaaa") {
		t.Errorf("notification %+v; want Deny only and the --raw pointer", got)
	}
	n.act(t, notify.Action{Key: idA, Approve: true})
	n.act(t, notify.Action{Key: idA, Approve: false})
	a.tray.waitFor(t, "the approval gone", hasNot("confirm/"+idA))
	if got := b.Decisions(); len(got) != 1 || got[0].Approve {
		t.Errorf("decisions %+v; want the deny alone", got)
	}
	if !strings.Contains(a.log.String(), "its display hides values") {
		t.Error("the refused approval was not logged")
	}
}

// A click that comes after a decision made elsewhere changes nothing and
// is no error: the first decision wins.
func TestLateClicks(t *testing.T) {
	h, b := fakeCore(t, nil)
	n := newFakeNotifier()
	a := startApp(t, h, func(o *app.Options) { o.Notifier = n })
	b.AddConfirmation(confirmation(idA, `{"m":1}`))
	tr := a.tray.waitFor(t, "the approval", has("confirm/"+idA+"/approve"))
	n.waitShown(t, idA)
	// Decided on the CLI.
	if _, err := control.NewClient(h.ControlSocket()).Decide(t.Context(), api.Decision{ID: idA, Approve: false, ArgsHash: strings.Repeat("ab", 32), Surface: "cli"}); err != nil {
		t.Fatal(err)
	}
	n.waitWithdrawn(t, idA)
	a.tray.waitFor(t, "the approval gone", hasNot("confirm/"+idA))
	// The stale menu item and the notification's button, clicked late.
	a.tray.click(t, tr, "confirm/"+idA+"/approve")
	n.act(t, notify.Action{Key: idA, Approve: true})
	// A click is handled before the next message: Pause, then see it.
	a.tray.click(t, a.tray.current(), "pause")
	a.tray.waitFor(t, "paused", titled("status", "Carapace: paused"))
	if got := b.Decisions(); len(got) != 1 || got[0].Surface != "cli" {
		t.Errorf("decisions %+v, want only the CLI's", got)
	}
	if s, w := n.count(idA); s != 1 || w != 1 {
		t.Errorf("notification shown %d and withdrawn %d times, want once each", s, w)
	}
}

// Arguments the watch stream leaves out are fetched before the approval
// is shown; if they cannot be fetched, the menu and the notification
// offer no Approve, only Deny.
func TestArgumentsLeftOut(t *testing.T) {
	var mu sync.Mutex
	var decides int
	h, b := fakeCore(t, func(b *controltest.Backend) control.Backend { return omitting{b} })
	b.Fail = func(method string) error {
		if method == "Decide" {
			mu.Lock()
			decides++
			mu.Unlock()
		}
		return nil
	}
	n := newFakeNotifier()
	a := startApp(t, h, func(o *app.Options) { o.Notifier = n })
	a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))

	b.AddConfirmation(confirmation(idA, `{"to":"alice@example.com","body":"hello"}`))
	tr := a.tray.waitFor(t, "the fetched arguments", titled("confirm/"+idA+"/arg/1", `body = "hello"`))
	if it, _ := tr.Find("confirm/" + idA + "/approve"); !it.Enabled {
		t.Error("no Approve for arguments that were fetched")
	}
	if got := n.waitShown(t, idA); !strings.Contains(got.Body, `to = "alice@example.com", body = "hello"`) || !got.Approve {
		t.Errorf("notification %+v lacks the arguments, or Approve", got)
	}

	// A confirmation the core will not show (gone already): announced
	// without arguments, which cannot be fetched.
	ghost := confirmation(idB, `{}`)
	ghost.Arguments, ghost.ArgumentsOmitted = nil, true
	b.Emit(api.WatchEvent{Type: api.WatchConfirmationRequested, Confirmation: &ghost})
	tr = a.tray.waitFor(t, "the unfetched approval", has("confirm/"+idB+"/deny"))
	if it, _ := tr.Find("confirm/" + idB + "/approve"); it.Enabled {
		t.Error("Approve offered for arguments never shown")
	}
	if got := n.waitShown(t, idB); !strings.Contains(got.Body, "see the menu") || got.Approve {
		t.Errorf("notification %+v; want Deny only, pointing to the menu", got)
	}
	n.act(t, notify.Action{Key: idB, Approve: true})
	// Then a deny, which is sent: the approve before it was not.
	n.act(t, notify.Action{Key: idB, Approve: false})
	waitLog(t, a, `msg="app: decide" confirmation=`+idB)
	if !strings.Contains(a.log.String(), `msg="app: not approved: its arguments could not be shown" confirmation=`+idB) {
		t.Error("the refused approval was not logged")
	}
	mu.Lock()
	defer mu.Unlock()
	if decides != 1 {
		t.Errorf("%d decisions sent for %s, want only the deny", decides, idB)
	}
}

// waitLog waits until the app has logged want.
func waitLog(t *testing.T, a *running, want string) {
	t.Helper()
	for i := 0; !strings.Contains(a.log.String(), want); i++ {
		if i == 3000 {
			t.Fatalf("the app did not log %q:\n%s", want, a.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSessionsPauseAuditAndLogin(t *testing.T) {
	h, b := fakeCore(t, nil)
	login := &fakeLogin{}
	opened := make(chan string, 1)
	a := startApp(t, h, func(o *app.Options) {
		o.LoginItem = login
		o.Open = func(p string) error { opened <- p; return nil }
	})
	tr := a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))

	t.Run("stop a session", func(t *testing.T) {
		sh, err := control.NewClient(h.ControlSocket()).OpenSession(context.Background(), "work")
		if err != nil {
			t.Fatal(err)
		}
		defer sh.Close()
		s := sh.Info()
		b.Emit(api.WatchEvent{Type: api.WatchSessionOpened, Session: &s})
		tr := a.tray.waitFor(t, "the session", has("session/"+s.ID+"/stop"))
		a.tray.click(t, tr, "session/"+s.ID+"/stop")
		b.WaitClosed(t, s.ID)
	})
	t.Run("run and pause a task", func(t *testing.T) {
		next := time.Now().Add(time.Hour)
		task := api.Task{ID: "t-abc12345", Group: "main", Schedule: "every hour", Enabled: true, Next: &next}
		b.AddTaskView(task)
		b.Emit(api.WatchEvent{Type: api.WatchTaskCreated, Task: &task})
		tr := a.tray.waitFor(t, "the task", has("task/t-abc12345/run"))
		a.tray.click(t, tr, "task/t-abc12345/run")
		a.tray.click(t, tr, "task/t-abc12345/pause")
		deadline := time.Now().Add(waitTimeout)
		for calls := b.TaskCalls(); !slices.Equal(slices.Sorted(slices.Values(calls)), []string{"pause t-abc12345", "run t-abc12345"}); calls = b.TaskCalls() { // each click is its own request: any order
			if time.Now().After(deadline) {
				t.Fatalf("task actions %v", b.TaskCalls())
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Run("pause and resume", func(t *testing.T) {
		a.tray.click(t, a.tray.current(), "pause")
		tr := a.tray.waitFor(t, "paused", titled("pause", "Resume (sessions for events start again)"))
		if st := b.Status(t.Context()); !st.Paused {
			t.Error("the core is not paused")
		}
		a.tray.click(t, tr, "pause")
		a.tray.waitFor(t, "resumed", titled("pause", "Pause (no new sessions from events)"))
		if st := b.Status(t.Context()); st.Paused {
			t.Error("the core is still paused")
		}
	})
	t.Run("open the audit log", func(t *testing.T) {
		a.tray.click(t, tr, "audit")
		if got := <-opened; got != h.AuditLog() {
			t.Errorf("opened %s, want %s", got, h.AuditLog())
		}
	})
	t.Run("start at login", func(t *testing.T) {
		checked := func(want bool) func(menu.Tree) bool {
			return func(tr menu.Tree) bool { it, _ := tr.Find("login"); return it.Enabled && it.Checked == want }
		}
		a.tray.click(t, a.tray.waitFor(t, "the box unchecked", checked(false)), "login")
		a.tray.click(t, a.tray.waitFor(t, "the box checked", checked(true)), "login")
		a.tray.waitFor(t, "the box unchecked again", checked(false))
		// A failure leaves the box as the item really is.
		login.mu.Lock()
		login.err = errors.New("not in /Applications")
		login.mu.Unlock()
		a.tray.click(t, a.tray.current(), "login")
		waitLog(t, a, "not in /Applications")
		if it, _ := a.tray.waitFor(t, "the box", checked(false)).Find("login"); it.Checked {
			t.Error("the box is checked after a failure")
		}
	})
}

func TestLoginItemStates(t *testing.T) {
	tests := []struct {
		name             string
		item             loginitem.Item
		enabled, checked bool
	}{
		{"none", nil, false, false},
		{"unsupported", &fakeLogin{enabled: loginitem.ErrUnsupported}, false, false},
		{"on", &fakeLogin{on: true}, true, true},
		{"off", &fakeLogin{}, true, false},
		{"unreadable", &fakeLogin{enabled: errors.New("launchd says no")}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := fakeCore(t, nil)
			a := startApp(t, h, func(o *app.Options) {
				if tt.item != nil {
					o.LoginItem = tt.item
				}
			})
			tr := a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))
			it, _ := tr.Find("login")
			if it.Enabled != tt.enabled || it.Checked != tt.checked {
				t.Errorf("login item enabled %v checked %v, want %v %v", it.Enabled, it.Checked, tt.enabled, tt.checked)
			}
		})
	}
}

// The notification permission shows in the status line.
func TestNotificationPermission(t *testing.T) {
	tests := []struct {
		name     string
		notifier func() notify.Notifier
		want     string
	}{
		{"none", func() notify.Notifier { return nil }, "Notifications: off — not available here: approve in this menu"},
		{"denied", func() notify.Notifier {
			n := newFakeNotifier()
			n.ok, n.why = false, "denied in System Settings › Notifications"
			return n
		}, "Notifications: off — denied in System Settings › Notifications"},
		{"on", func() notify.Notifier { return newFakeNotifier() }, "Notifications: on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := fakeCore(t, nil)
			a := startApp(t, h, func(o *app.Options) { o.Notifier = tt.notifier() })
			a.tray.waitFor(t, tt.want, titled("status/notifications", tt.want))
		})
	}
}

func TestNotificationContent(t *testing.T) {
	long := strings.Repeat("x", 200)
	tests := []struct {
		name               string
		tool, group, args  string
		title, body0, body string
		approve            bool
	}{
		{"plain", "send_email", "main", `{"to":"alice"}`, "Approve send_email?", "Group main · digest abababababab", `to = "alice"`, true},
		{"hostile tool and group", "rm\u202e-rf", "ma\x1b[2Jin", `{}`, `Approve rm\u202e-rf?`, `Group ma\u001b[2Jin · digest abababababab`, "{}", true},
		{"newlines stay on one line", "t", "", `{"m":"a\nb"}`, "Approve t?", "Group - · digest abababababab", `m = "a\u000ab"`, true},
		{"cut: Deny only", "t", "main", `{"m":"` + long + `"}`, "Approve t?", "Group main · digest abababababab",
			`m = "` + long[:summaryWidth-6] + "…\n" + `Not all of it is shown here: review it in the Carapace menu to approve, or with carapace confirm show aaaaaaaa`, false},
		{"not readable: Deny only", "t", "main", `{`, "Approve t?", "Group main · digest abababababab",
			"arguments not readable: see the menu\nNot all of it is shown here: review it in the Carapace menu to approve, or with carapace confirm show aaaaaaaa", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := confirmation(idA, tt.args)
			c.Tool, c.Group = tt.tool, tt.group
			n := app.Notification(c)
			body0, body, _ := strings.Cut(n.Body, "\n")
			if n.Key != idA || n.Title != tt.title || body0 != tt.body0 || body != tt.body || n.Approve != tt.approve {
				t.Errorf("got %+v\nwant title %q body %q / %q, approve %v", n, tt.title, tt.body0, tt.body, tt.approve)
			}
		})
	}
}

// summaryWidth is app's: how much of the arguments a notification shows.
const summaryWidth = 120

// Quitting a core the app found leaves it running and leaves no
// goroutine behind.
func TestQuitLeavesAFoundCoreAndNoGoroutines(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	h, b := fakeCore(t, nil)
	n := newFakeNotifier()
	a := startApp(t, h, func(o *app.Options) { o.Notifier = n })
	tr := a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))
	if it, _ := tr.Find("quit"); !strings.Contains(it.Tooltip, "keeps running") {
		t.Errorf("quit tooltip %q", it.Tooltip)
	}
	a.tray.click(t, tr, "quit")
	a.wait(t)
	if b.Stops() != 0 {
		t.Error("the app stopped a core it did not start")
	}
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if !closed {
		t.Error("the notifier was not closed")
	}
	// The fake core's server is still up: its goroutines are the test's.
	leaktest.Check(t, ignore, goleak.IgnoreAnyFunction("net/http.(*conn).serve"), goleak.IgnoreAnyFunction("net/http.(*Server).Serve"),
		goleak.IgnoreAnyFunction("github.com/carapace-dev/carapace/core/control.(*Server).handleWatch"))
}

// The app reports its notification permission and login item for
// carapace doctor while it runs, as they change, and takes the report
// away when it quits.
func TestReportsForDoctor(t *testing.T) {
	h, _ := fakeCore(t, nil)
	n := newFakeNotifier()
	n.ok, n.why = false, "denied in System Settings › Notifications"
	login := &fakeLogin{}
	a := startApp(t, h, func(o *app.Options) { o.Notifier, o.LoginItem = n, login })
	tr := a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))
	st, err := appstate.Read(h)
	if err != nil || st.Notifications.OK || st.Notifications.Why != n.why || !st.LoginItem.Supported || st.LoginItem.Enabled {
		t.Fatalf("the report: %+v, %v", st, err)
	}
	a.tray.click(t, tr, "login")
	deadline := time.Now().Add(waitTimeout)
	for !st.LoginItem.Enabled {
		if time.Now().After(deadline) {
			t.Fatalf("the report never showed the login item on: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
		st, _ = appstate.Read(h)
	}
	a.stop()
	a.wait(t)
	if _, err := os.Stat(appstate.Path(h)); !os.IsNotExist(err) {
		t.Fatalf("the report outlived the app: %v", err)
	}
}
