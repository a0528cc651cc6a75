// Package app is the menu-bar app: it finds or starts the home's core
// (app/boot), follows it on the watch stream, keeps the menu's State
// (app/menu) and shows it on a Tray, raises a notification for each
// pending approval, and turns the user's clicks — in the menu or on a
// notification — into calls of the control API. It reaches the core only
// through core/control's client.
//
// Everything that touches the desktop is behind a small interface
// declared here or in the platform packages: Tray (app/tray implements it
// on fyne.io/systray), notify.Notifier, loginitem.Item, and Options.Open.
// Run's tests use fakes of each and a real core.
//
// One goroutine, Run's, owns the State: the watch stream, the core's
// death, and the answers of the calls the app makes reach it as messages,
// so nothing is shared and every change re-renders the menu.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/app/boot"
	"github.com/carapace-dev/carapace/app/calaccess"
	"github.com/carapace-dev/carapace/app/loginitem"
	"github.com/carapace-dev/carapace/app/menu"
	"github.com/carapace-dev/carapace/app/notify"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/appstate"
)

// Tray shows the menu and reports clicks; app/tray implements it on the
// desktop's menu bar.
type Tray interface {
	// Update shows tree; it must not block on the GUI (a tray keeps the
	// latest tree and applies it when it can).
	Update(tree menu.Tree)
	// Clicks delivers the clicks on items with an action, saying whether
	// the tray vouches that they came from the desktop's own menu.
	Clicks() <-chan menu.Click
	// Quit ends the tray's main loop.
	Quit()
}

// Surfaces the app decides on, as the core records them.
const (
	SurfaceMenu         = "app"
	SurfaceNotification = "notification"
)

// Options configure Run.
type Options struct {
	Home home.Dir
	Tray Tray
	// Notifier shows approvals as notifications; nil: none (the menu
	// carries them, and its status line says so).
	Notifier notify.Notifier
	// LoginItem is "Start at login"; nil: not supported here.
	LoginItem loginitem.Item
	// CalendarAccess asks for and reads the access to calendars and
	// reminders (macOS EventKit); nil: none to ask for here, and the menu
	// has no item for it.
	CalendarAccess calaccess.Access
	Logger         *slog.Logger // nil: discard
	// Boot says how to start a core when none runs; Home, Logger and
	// Client are filled in by Run.
	Boot boot.Options
	// Decider names the person deciding, for the audit log; "" means the
	// OS user name.
	Decider string
	// Open opens a file with the desktop's default application (the audit
	// log); nil means xdg-open, or open on macOS.
	Open func(path string) error
	// Now is the clock the menu shows ages against; nil means time.Now.
	Now func() time.Time
	// Tick is how often the menu is drawn again for its ages and
	// expiries (DefaultTick if 0).
	Tick time.Duration
}

// DefaultTick is how often the menu is drawn again when nothing changed.
const DefaultTick = 30 * time.Second

// requestTimeout bounds one control API call the app makes.
const requestTimeout = 10 * time.Second

// Run runs the app until the user quits or ctx is done (SIGINT, SIGTERM):
// then it stops the core if it started it, closes the notifier and quits
// the tray. It returns nil after a clean quit.
func Run(ctx context.Context, o Options) error {
	if o.Home == "" || o.Tray == nil {
		return errors.New("app: Home and Tray are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Decider == "" {
		o.Decider = osUser()
	}
	if o.Open == nil {
		o.Open = openFile
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	client := control.NewClient(o.Home.ControlSocket())
	o.Boot.Home, o.Boot.Logger, o.Boot.Client = o.Home, o.Logger, client
	r := &runner{
		o:        o,
		log:      o.Logger,
		client:   client,
		msgs:     make(chan func()),
		done:     make(chan struct{}),
		notified: map[string]bool{},
	}
	return r.run(ctx)
}

// runner is Run's state; only Run's goroutine touches it, except for the
// fields noted.
type runner struct {
	o      Options
	log    *slog.Logger
	client *control.Client // safe for concurrent use

	msgs chan func()   // work for Run's goroutine, from the others
	done chan struct{} // closed when Run's loop ends: msgs has no reader
	bg   sync.WaitGroup

	state    menu.State
	core     *boot.Core         // nil while none is reached
	gen      int                // the current core's generation: messages of older ones are stale
	stopW    context.CancelFunc // ends the current watch
	booting  bool
	notified map[string]bool // confirmations with a notification shown
	cancel   context.CancelFunc
	// reported is what the app last reported of itself for carapace
	// doctor (internal/appstate); nil before the first report.
	reported *appstate.State
	// calendarReport is the calendar access as the report says it; nil
	// where there is none to ask for.
	calendarReport *appstate.Calendar
}

func (r *runner) run(ctx context.Context) error {
	// Quitting from the menu ends whatever the app still waits for: a
	// core starting, a watch, a call.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.cancel = cancel
	r.state = r.state.Starting()
	r.state.Notifications = r.permission()
	r.state.LoginItem = r.loginState()
	r.state.Calendar = r.calendarState()
	r.render()
	r.boot(ctx)
	var nActions <-chan notify.Action
	if r.o.Notifier != nil {
		nActions = r.o.Notifier.Actions()
	}
	tClicks := r.o.Tray.Clicks()
	tick := time.NewTicker(r.o.Tick)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			r.log.Info("app: quitting", "why", context.Cause(ctx))
			break loop
		case f := <-r.msgs:
			f()
		case c, ok := <-tClicks:
			if !ok {
				r.log.Info("app: the tray closed; quitting")
				break loop
			}
			if c.Kind == menu.ActionQuit {
				r.log.Info("app: quit from the menu", "from", c.From)
				break loop
			}
			r.menuAction(ctx, c)
		case a, ok := <-nActions:
			if !ok {
				nActions = nil
				continue
			}
			r.notificationAction(ctx, a)
		case <-tick.C:
			r.state.Notifications = r.permission()
			r.state.Calendar = r.calendarState()
			r.render()
		}
	}
	r.shutdown()
	return nil
}

// post runs f on Run's goroutine; false if Run's loop has ended.
func (r *runner) post(f func()) bool {
	select {
	case r.msgs <- f:
		return true
	case <-r.done:
		return false
	}
}

// goBG runs f in the background, waited for on shutdown.
func (r *runner) goBG(f func()) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		f()
	}()
}

func (r *runner) render() {
	r.o.Tray.Update(menu.Render(r.state, r.o.Now()))
	r.report()
}

// report writes the app's notification permission and login item for
// carapace doctor when they changed: only the app can read them.
func (r *runner) report() {
	s := appstate.State{
		PID:           os.Getpid(),
		Notifications: appstate.Notifications{OK: r.state.Notifications.OK, Why: r.state.Notifications.Why},
		LoginItem:     appstate.LoginItem{Supported: r.state.LoginItem.Supported, Enabled: r.state.LoginItem.Enabled, Problem: r.state.LoginItem.Problem},
	}
	if c := r.calendarReport; c != nil {
		cc := *c
		s.Calendar = &cc
	}
	if r.reported != nil && r.reported.Notifications == s.Notifications && r.reported.LoginItem == s.LoginItem && sameCalendar(r.reported.Calendar, s.Calendar) {
		return
	}
	s.Updated = r.o.Now().UTC()
	if err := appstate.Write(r.o.Home, s); err != nil {
		r.log.Warn("app: could not write its state for carapace doctor", "err", err)
		return
	}
	r.reported = &s
}

// shutdown ends the watch, stops the core if the app started it, closes
// the notifier and quits the tray.
func (r *runner) shutdown() {
	close(r.done)
	r.cancel()
	if r.core != nil && r.core.Started() {
		r.log.Info("app: stopping the core this app started", "pid", r.core.PID())
		if err := r.core.Stop(context.Background()); err != nil {
			r.log.Warn("app: stop the core", "err", err)
		}
	}
	r.bg.Wait()
	appstate.Remove(r.o.Home, os.Getpid())
	r.client.CloseIdleConnections()
	if r.o.Notifier != nil {
		if err := r.o.Notifier.Close(); err != nil {
			r.log.Warn("app: close the notifier", "err", err)
		}
	}
	r.o.Tray.Quit()
}

// boot finds or starts the core in the background.
func (r *runner) boot(ctx context.Context) {
	if r.booting {
		return
	}
	r.booting = true
	r.state = r.state.Starting()
	r.render()
	r.goBG(func() {
		core, err := boot.Ensure(ctx, r.o.Boot)
		ok := r.post(func() {
			r.booting = false
			if err != nil {
				r.log.Error("app: no core", "err", err)
				r.state = r.state.NotRunning(err.Error())
				r.render()
				return
			}
			r.attach(ctx, core)
		})
		if !ok && err == nil && core.Started() {
			// Quit came first: a core started for nobody is stopped.
			_ = core.Stop(context.Background())
		}
	})
}

// attach makes core the current one: watch it, and for a core the app
// started, notice its exit.
func (r *runner) attach(ctx context.Context, core *boot.Core) {
	r.gen++
	gen := r.gen
	r.core = core
	r.state.StartedCore = core.Started()
	wctx, cancel := context.WithCancel(ctx)
	r.stopW = cancel
	exited := core.Exited()
	r.goBG(func() { r.watch(wctx, gen, exited) })
	if exited != nil {
		r.goBG(func() {
			select {
			case <-exited:
				why := "the core exited"
				if err := core.ExitError(); err != nil {
					why += ": " + err.Error()
				}
				why += " (its log: " + core.LogPath() + ")"
				r.post(func() { r.gone(gen, why) })
			case <-wctx.Done():
			}
		})
	}
}

// gone records that the core of generation gen is no longer reachable.
func (r *runner) gone(gen int, why string) {
	if gen != r.gen || r.state.Core == menu.CoreNotRunning {
		return
	}
	r.log.Warn("app: the core is not running", "why", why)
	if r.stopW != nil {
		r.stopW()
	}
	// What the gone core's goroutines still send is stale.
	r.gen++
	r.core = nil
	r.state = r.state.NotRunning(why)
	r.syncNotifications()
	r.render()
}

// apply applies one line of core gen's watch stream.
func (r *runner) apply(gen int, ev api.WatchEvent, full *api.Confirmation) {
	if gen != r.gen {
		return
	}
	r.state = r.state.Apply(ev)
	if full != nil {
		r.state = r.state.WithArguments(*full)
	}
	if ev.Type == api.WatchSnapshot {
		r.state.Notifications = r.permission()
	}
	r.syncNotifications()
	r.render()
}

// connecting records that core gen's stream ended while it still answers.
func (r *runner) connecting(gen int, why string) {
	if gen != r.gen {
		return
	}
	r.state = r.state.Connecting(why)
	r.render()
}

// exitWait bounds how long a watch that lost a core the app started waits
// for the process's exit, whose status says more than "it stopped".
const exitWait = 5 * time.Second

// watch follows core gen's watch stream until ctx is done or the core no
// longer answers, watching again after a stream ends. exited is the
// started core's Exited (nil for a core the app found).
func (r *runner) watch(ctx context.Context, gen int, exited <-chan struct{}) {
	backoff := 100 * time.Millisecond
	for {
		err := r.watchOnce(ctx, gen, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		// Does the core still answer? Then the stream ended for another
		// reason (the app fell behind, a restart of the connection):
		// watch again for a fresh snapshot.
		sctx, cancel := context.WithTimeout(ctx, requestTimeout)
		_, serr := r.client.Status(sctx)
		cancel()
		if errors.Is(serr, control.ErrNotRunning) {
			if exited != nil {
				// The app's own core: its exit reports how it ended.
				t := time.NewTimer(exitWait)
				select {
				case <-exited:
					t.Stop()
					return
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			r.post(func() { r.gone(gen, "the core stopped") })
			return
		}
		why := fmt.Sprintf("reconnecting: %v", err)
		r.log.Info("app: the watch stream ended; watching again", "err", err, "in", backoff)
		r.post(func() { r.connecting(gen, why) })
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// watchOnce reads one watch stream to its end; live is called after its
// snapshot.
func (r *runner) watchOnce(ctx context.Context, gen int, live func()) error {
	ws, err := r.client.Watch(ctx)
	if err != nil {
		return err
	}
	defer ws.Close()
	for {
		ev, err := ws.Next()
		if err != nil {
			return err
		}
		if ev.Type == api.WatchSnapshot {
			live()
		}
		var full *api.Confirmation
		if ev.Type == api.WatchConfirmationRequested && ev.Confirmation != nil && (ev.Confirmation.ArgumentsOmitted || ev.Confirmation.PreviewOmitted) {
			// Too large for the stream: fetch them before showing it, so
			// that the menu can show every argument.
			fctx, cancel := context.WithTimeout(ctx, requestTimeout)
			c, err := r.client.Confirmation(fctx, ev.Confirmation.ID)
			cancel()
			if err != nil {
				r.log.Warn("app: fetch a confirmation's arguments", "confirmation", ev.Confirmation.ID, "err", err)
			} else {
				full = &c
			}
		}
		if !r.post(func() { r.apply(gen, ev, full) }) {
			return context.Canceled
		}
		if ev.Type == api.WatchEnd {
			return fmt.Errorf("the core ended the watch: %s", ev.Error)
		}
	}
}

// permission reads the notifier's permission for the status line.
func (r *runner) permission() menu.Permission {
	if r.o.Notifier == nil {
		return menu.Permission{Why: "not available here: approve in this menu"}
	}
	ok, why := r.o.Notifier.Permission()
	return menu.Permission{OK: ok, Why: why}
}

// calendarState reads the access to calendars and reminders, for the menu
// and the report.
func (r *runner) calendarState() menu.CalendarAccess {
	if r.o.CalendarAccess == nil {
		r.calendarReport = nil
		return menu.CalendarAccess{}
	}
	st, err := r.o.CalendarAccess.Status()
	if errors.Is(err, calaccess.ErrUnsupported) {
		r.calendarReport = nil
		return menu.CalendarAccess{}
	}
	if err != nil {
		r.calendarReport = &appstate.Calendar{Events: calaccess.Unknown, Reminders: calaccess.Unknown, Problem: err.Error()}
		return menu.CalendarAccess{Supported: true, Advice: err.Error()}
	}
	r.calendarReport = &appstate.Calendar{Events: st.Events, Reminders: st.Reminders, Granted: st.Granted()}
	return menu.CalendarAccess{Supported: true, Granted: st.Granted(), Detail: "events " + st.Events + ", reminders " + st.Reminders, Advice: calaccess.Advice(st)}
}

func sameCalendar(a, b *appstate.Calendar) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// loginState reads the login item's state for the checkbox.
func (r *runner) loginState() menu.LoginItem {
	if r.o.LoginItem == nil {
		return menu.LoginItem{Problem: loginitem.ErrUnsupported.Error()}
	}
	on, err := r.o.LoginItem.Enabled()
	switch {
	case errors.Is(err, loginitem.ErrUnsupported):
		return menu.LoginItem{Problem: err.Error()}
	case err != nil:
		return menu.LoginItem{Supported: true, Problem: err.Error()}
	}
	return menu.LoginItem{Supported: true, Enabled: on}
}

// osUser names the person at this desktop: the login name.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

// openFile opens path with the desktop's default application.
func openFile(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	cmd := exec.Command(opener, path)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("open %s with %s: %w", path, opener, err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
