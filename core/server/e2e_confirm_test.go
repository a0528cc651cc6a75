package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/ipc"
)

// watcher reads a watch stream in the background and keeps every line.
type watcher struct {
	ws   *control.WatchStream
	mu   sync.Mutex
	evs  []api.WatchEvent
	err  error
	done chan struct{}
}

func watch(t *testing.T, c *testCore) *watcher {
	t.Helper()
	ws, err := c.Client.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	w := &watcher{ws: ws, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			ev, err := ws.Next()
			w.mu.Lock()
			if err != nil {
				w.err = err
				w.mu.Unlock()
				return
			}
			w.evs = append(w.evs, ev)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = ws.Close(); <-w.done })
	return w
}

// find waits for the first line that match accepts.
func (w *watcher) find(t *testing.T, what string, match func(api.WatchEvent) bool) api.WatchEvent {
	t.Helper()
	var found api.WatchEvent
	waitFor(t, what+" on the watch stream", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, ev := range w.evs {
			if match(ev) {
				found = ev
				return true
			}
		}
		if w.err != nil {
			t.Fatalf("the watch stream ended: %v", w.err)
		}
		return false
	})
	return found
}

func (w *watcher) count(match func(api.WatchEvent) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ev := range w.evs {
		if match(ev) {
			n++
		}
	}
	return n
}

func confirmationEvent(typ, id string) func(api.WatchEvent) bool {
	return func(ev api.WatchEvent) bool {
		return ev.Type == typ && ev.Confirmation != nil && ev.Confirmation.ID == id
	}
}

// The watch stream, read by a real client, across a confirmation approved
// from the CLI by a prefix of its id: the snapshot, session.opened,
// confirmation.requested with everything a surface shows, and
// confirmation.resolved saying it was approved on the CLI and by whom.
func TestWatchAcrossACLIApproval(t *testing.T) {
	c := startCore(t, confirmConfig)
	w := watch(t, c)
	snap := w.find(t, "the snapshot", func(ev api.WatchEvent) bool { return ev.Type == api.WatchSnapshot })
	if snap.Status == nil || snap.Status.Version == "" || len(snap.Plugins) == 0 || len(snap.Confirmations) != 0 || len(snap.Sessions) != 0 {
		t.Fatalf("snapshot %+v", snap)
	}
	if w.evs[0].Type != api.WatchSnapshot {
		t.Fatalf("the first line is %q, not the snapshot", w.evs[0].Type)
	}
	s := c.Session(t, "main")
	w.find(t, "session.opened", func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchSessionOpened && ev.Session != nil && ev.Session.ID == s.ID && ev.Session.Group == "main"
	})

	bg := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"launch the rocket"}`)
	id := bg.waitPending(t)
	req := w.find(t, "confirmation.requested", confirmationEvent(api.WatchConfirmationRequested, id)).Confirmation
	if req.Tool != "echo_confirm" || req.Group != "main" || req.Session != s.ID || len(req.ArgsHash) != 64 ||
		!strings.Contains(string(req.Arguments), "launch the rocket") || req.CreatedAt.IsZero() || !req.ExpiresAt.After(req.CreatedAt) || !req.Pending() {
		t.Fatalf("requested %+v", req)
	}
	out, errs, code := runCLI(t, c.Home, "confirm", "approve", id[:8])
	if code != 0 || !strings.Contains(out, "approved "+id) || !strings.Contains(out, req.ArgsHash) {
		t.Fatalf("confirm approve %s: exit %d\n%s%s", id[:8], code, out, errs)
	}
	mustOK(t, bg.wait(t))
	res := w.find(t, "confirmation.resolved", confirmationEvent(api.WatchConfirmationResolved, id)).Confirmation
	if res.Decision != "approved" || res.Surface != "cli" || res.Decider == "" || res.DecidedAt == nil {
		t.Fatalf("resolved %+v", res)
	}
	if n := w.count(confirmationEvent(api.WatchConfirmationResolved, id)); n != 1 {
		t.Errorf("%d resolutions of one confirmation on the stream", n)
	}
	// The CLI says how a decided one ended.
	_, errs, code = runCLI(t, c.Home, "confirm", "deny", id[:8])
	if code != 1 || !strings.Contains(errs, "already decided: approved on cli by "+res.Decider) {
		t.Errorf("a late deny: exit %d, %s", code, errs)
	}
}

// Decisions that race on one confirmation: exactly one applies, the call
// gets that one, every other is refused as already decided, and all of
// them are audited.
func TestConcurrentDecisions(t *testing.T) {
	c := startCore(t, confirmConfig)
	s := c.Session(t, "main")
	bg := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"race"}`)
	id := bg.waitPending(t)
	cf, err := c.Client.Confirmation(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = c.Client.Decide(context.Background(), api.Decision{ID: id, Approve: i%2 == 0, ArgsHash: cf.ArgsHash, Surface: fmt.Sprintf("surface%d", i)})
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won < 0:
			won = i
		case err == nil:
			t.Fatalf("decisions %d and %d both applied", won, i)
		case !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "already decided"):
			t.Errorf("decision %d: %v, want already decided", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no decision applied")
	}
	r := bg.wait(t)
	if won%2 == 0 {
		mustOK(t, r)
	} else {
		wantError(t, r, ipc.CodeConfirmationDenied, 5, "")
	}
	var decided, refused int
	for _, e := range c.Audit(t) {
		if e.Stage == audit.StageConfirm && e.Confirmation == id && e.Source == "core" && e.ID == "" {
			switch {
			case e.Outcome == audit.OutcomeApproved || e.Outcome == audit.OutcomeDenied:
				decided++
				if !strings.Contains(e.Reason, fmt.Sprintf("surface%d", won)) {
					t.Errorf("the decision's entry names %q, the winner was surface%d", e.Reason, won)
				}
			case e.Outcome == audit.OutcomeRejected && strings.Contains(e.Reason, "already decided"):
				refused++
			}
		}
	}
	if decided != 1 || refused != n-1 {
		t.Errorf("audit: %d decisions and %d refused ones, want 1 and %d", decided, refused, n-1)
	}
}

// A decision with the wrong hash, after expiry or after withdrawal is
// refused and changes nothing.
func TestRefusedDecisions(t *testing.T) {
	c := startCore(t, "[confirm]\ntimeout = \"1s\"\n")
	decide := func(id, hash string) error {
		_, err := c.Client.Decide(context.Background(), api.Decision{ID: id, Approve: true, ArgsHash: hash, Surface: "cli"})
		return err
	}

	s := c.Session(t, "main")
	bg := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"expires"}`)
	id := bg.waitPending(t)
	cf, err := c.Client.Confirmation(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := decide(id, strings.Repeat("0", 64)); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "differ") {
		t.Errorf("a wrong hash: %v", err)
	}
	if cf, _ := c.Client.Confirmation(context.Background(), id); !cf.Pending() {
		t.Fatalf("a refused decision decided: %+v", cf)
	}
	wantError(t, bg.wait(t), ipc.CodeConfirmationTimeout, 5, "")
	if err := decide(id, cf.ArgsHash); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "already decided: expired") {
		t.Errorf("after expiry: %v", err)
	}

	// Withdrawn: the session closes while its call waits.
	h, err := c.Client.OpenSession(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	bg = startIPC(t, h.Info().Socket, "tool.invoke.echo_confirm", `{"message":"withdrawn"}`)
	id = bg.waitPending(t)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	var got api.Confirmation
	waitFor(t, "the withdrawal", func() bool {
		got, _ = c.Client.Confirmation(context.Background(), id)
		return got.Decision == "withdrawn"
	})
	if got.Surface != "core" || !strings.Contains(got.Reason, "session closed") {
		t.Errorf("withdrawn %+v", got)
	}
	if err := decide(id, got.ArgsHash); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "already decided: withdrawn") {
		t.Errorf("after withdrawal: %v", err)
	}
	var withdrawn bool
	for _, e := range c.Audit(t) {
		withdrawn = withdrawn || e.Confirmation == id && e.Outcome == audit.OutcomeWithdrawn
	}
	if !withdrawn {
		t.Error("the withdrawal is not audited")
	}
}

// An identical call while one is pending joins it: one confirmation, one
// decision, both calls answered. Past [confirm] max_pending in a group, a
// call is denied at once; another group is not affected.
func TestCoalescingAndTheCap(t *testing.T) {
	c := startCore(t, "[confirm]\ntimeout = \"20s\"\nmax_pending = 2\n")
	s := c.Session(t, "main")
	a := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"same"}`)
	id := a.waitPending(t)
	b := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"same"}`)
	if got := b.waitPending(t); got != id {
		t.Fatalf("the identical call waits on %s, not on %s", got, id)
	}
	list := cliConfirmations(t, c)
	if len(list) != 1 {
		t.Fatalf("%d confirmations for two identical calls", len(list))
	}

	// The cap: a second confirmation fits, a third is denied at once.
	other := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"other"}`)
	other.waitPending(t)
	r := runIPC(t, s.Socket, nil, "tool.invoke.echo_confirm", `{"message":"one too many"}`)
	wantError(t, r, ipc.CodeConfirmationDenied, 5, "")
	if !strings.Contains(r.Err.Message, "too many confirmations") {
		t.Errorf("the refusal does not say why: %q", r.Err.Message)
	}
	if n := len(cliConfirmations(t, c)); n != 2 {
		t.Errorf("%d pending after the refusal, want 2", n)
	}
	s2 := c.Session(t, "family")
	startIPC(t, s2.Socket, "tool.invoke.echo_confirm", `{"message":"another group"}`).waitPending(t)

	if _, err := c.Client.Decide(context.Background(), api.Decision{ID: id, Approve: true, ArgsHash: list[0].ArgsHash, Surface: "cli"}); err != nil {
		t.Fatal(err)
	}
	for _, bg := range []*bgIPC{a, b} {
		if res := mustOK(t, bg.wait(t)); res["message"] != "same" {
			t.Errorf("joined call: %+v", res)
		}
	}
	var joined int
	for _, e := range c.Audit(t) {
		if e.Confirmation == id && e.Outcome == audit.OutcomePending && strings.Contains(e.Reason, "joined") {
			joined++
		}
	}
	if joined != 1 {
		t.Errorf("%d audit lines for the joined call, want 1", joined)
	}
}

// A watcher that never reads is cut off and does not hold anything up:
// every call is answered, and a watcher that does read sees every change.
func TestAWatcherThatNeverReads(t *testing.T) {
	c := startCore(t, confirmConfig+"[rate_limit.tools.echo_confirm]\nper_minute = 6000\n")
	stuck, err := net.Dial("unix", c.Home.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if _, err := fmt.Fprint(stuck, "GET /v1/watch HTTP/1.1\r\nHost: carapace\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	good := watch(t, c)
	s := c.Session(t, "main")
	// Each confirmation puts about 8 KiB on the stream (requested and
	// resolved, with 4 KiB of arguments): enough of them overflow the
	// socket's buffers and then the bus's buffer for the stuck watcher.
	const calls = 120
	for i := range calls {
		msg := fmt.Sprintf("%03d%s", i, strings.Repeat("x", 4000))
		bg := startIPC(t, s.Socket, "tool.invoke.echo_confirm", `{"message":"`+msg+`"}`)
		id := bg.waitPending(t)
		cf := good.find(t, "the request", confirmationEvent(api.WatchConfirmationRequested, id)).Confirmation
		if _, err := c.Client.Decide(context.Background(), api.Decision{ID: id, Approve: true, ArgsHash: cf.ArgsHash, Surface: "cli"}); err != nil {
			t.Fatal(err)
		}
		if res := mustOK(t, bg.wait(t)); !strings.HasPrefix(fmt.Sprint(res["message"]), fmt.Sprintf("%03d", i)) {
			t.Fatalf("call %d: %+v", i, res)
		}
	}
	good.find(t, "the last resolution", func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchConfirmationResolved && strings.HasPrefix(string(ev.Confirmation.Arguments), fmt.Sprintf(`{"message":"%03d`, calls-1))
	})
	if n := good.count(func(ev api.WatchEvent) bool { return ev.Type == api.WatchConfirmationResolved }); n != calls {
		t.Errorf("the reading watcher saw %d resolutions of %d", n, calls)
	}
	waitFor(t, "the stuck watcher to be cut off", func() bool { return strings.Contains(c.Log.String(), "cut off") })
}

// A channel plugin, out of process, through the real ipc: it may publish
// its own topics but none of the core's — no forged approval, session or
// status reaches the watch stream (the menu, the notifications), and
// nothing is audited as published.
func TestPluginsCannotForgeCoreEvents(t *testing.T) {
	c := startCoreWith(t, coreOptions{Config: confirmConfig, Setup: func(h home.Dir) {
		m := strings.Replace(kitManifest("forger"), `"channels": []`, `"channels": ["forger"]`, 1)
		if _, err := install.Install(h, kitSource(t, "forger", m), install.Options{}); err != nil {
			t.Fatal(err)
		}
	}})
	w := watch(t, c)
	w.find(t, "the snapshot", func(ev api.WatchEvent) bool { return ev.Type == api.WatchSnapshot })
	s := c.Session(t, "main")
	for _, topic := range []string{"confirmation.requested", "session.opened", "core.status", "task.created", "channel.reply"} {
		res := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.forger_publish", `{"topic":"`+topic+`"}`))
		if res["published"] != false || !strings.Contains(fmt.Sprint(res["error"]), "the core's own") {
			t.Errorf("publishing %s: %v", topic, res)
		}
	}
	// Positive control: a topic of its own is published, audited, and the
	// same watch and audit searches would see a forged one.
	if res := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.forger_publish", `{"topic":"forger.note"}`)); res["published"] != true {
		t.Fatalf("publishing its own topic: %v", res)
	}
	waitFor(t, "the plugin's own event audited", func() bool {
		for _, e := range c.Audit(t) {
			if e.Source == "forger" && e.Topic == "forger.note" && e.Outcome == audit.OutcomePublished {
				return true
			}
		}
		return false
	})
	for _, e := range c.Audit(t) {
		if e.Source == "forger" && e.Stage == audit.StageEvent && e.Topic != "forger.note" {
			t.Errorf("a forged event was published: %+v", e)
		}
	}
	forged := func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchConfirmationRequested || ev.Type == api.WatchStatus || ev.Type == api.WatchTaskCreated ||
			ev.Type == api.WatchSessionOpened && ev.Session != nil && ev.Session.ID != s.ID
	}
	if n := w.count(forged); n != 0 {
		t.Errorf("%d forged events on the watch stream", n)
	}
	if p := pendingConfirmations(t, c); len(p) != 0 {
		t.Errorf("pending confirmations: %+v", p)
	}
}
