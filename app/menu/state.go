package menu

import (
	"slices"

	"github.com/carapace-dev/carapace/core/api"
)

// State is what the menu knows: the core as the watch stream last showed
// it, and the app's own facts (notification permission, the login item,
// whether the app started the core). It is a value: Apply and the other
// transitions return a new State and never change the one they were
// called on, so a State can be handed to another goroutine.
type State struct {
	Core Core
	// Problem says why the core is not (or no longer) reached: the end of
	// a watch, a start-up that failed, the core's exit. "" while running.
	Problem string
	// Status is the core's status as last reported.
	Status api.Status
	// Confirmations are the pending confirmations, oldest first. One whose
	// arguments the watch event left out (ArgumentsOmitted) keeps it set
	// until the app has fetched them; the menu offers no Approve for it.
	Confirmations []api.Confirmation
	Sessions      []api.Session // the live sessions, in the order they opened
	Tasks         []api.Task    // the scheduled tasks, oldest first
	// StartedCore says the app started the core it shows, so that Quit
	// stops it; a core the app found running keeps running.
	StartedCore   bool
	Notifications Permission
	LoginItem     LoginItem
	Calendar      CalendarAccess
	// Reconfirm lists the pending confirmations whose Approve was clicked
	// in the menu by a click the tray could not vouch for (Click.Vouched):
	// their submenus say where to approve instead.
	Reconfirm []string
}

// Core is how the app reaches the core.
type Core int

// The core's states, as the app sees them; the status refines
// CoreRunning (paused, draining).
const (
	CoreStarting   Core = iota // finding or starting the core; nothing shown yet
	CoreRunning                // the watch stream is live
	CoreConnecting             // the watch stream ended; the app watches again
	CoreNotRunning             // no core answers: Restart is offered
)

// Permission is whether approvals can be shown as notifications.
type Permission struct {
	OK  bool   // notifications with Approve and Deny can be shown
	Why string // when not OK, why, for the status line
}

// LoginItem is the state of "Start at login".
type LoginItem struct {
	Supported bool   // the platform and the app can have a login item
	Enabled   bool   // the app starts at login now
	Problem   string // why it is unsupported, or the last error
}

// CalendarAccess is the app's access to the calendars and reminders
// (macOS EventKit, app/calaccess), which the calendar plugin's eventkit
// backend needs.
type CalendarAccess struct {
	Supported bool   // the platform has it to ask for (macOS)
	Granted   bool   // full access to both events and reminders
	Detail    string // e.g. "events full, reminders not-determined"
	Advice    string // what to do when not granted, or the last error
}

// Apply returns s with one line of the watch stream applied. The stream's
// lines are states, not deltas (a change may show both in the snapshot and
// after it), so applying a line twice changes nothing. Unknown types, from
// newer cores, change nothing.
func (s State) Apply(ev api.WatchEvent) State {
	switch ev.Type {
	case api.WatchSnapshot:
		s.Core, s.Problem = CoreRunning, ""
		if ev.Status != nil {
			s.Status = *ev.Status
		}
		if ev.Plugins != nil {
			s.Status.Plugins = slices.Clone(ev.Plugins)
		}
		old := s.Confirmations
		s.Confirmations = nil
		for _, c := range ev.Confirmations {
			if c.Pending() {
				s.Confirmations = append(s.Confirmations, keepLoaded(old, c))
			}
		}
		s.Sessions = slices.Clone(ev.Sessions)
		s.Tasks = slices.Clone(ev.Tasks)
	case api.WatchTaskCreated, api.WatchTaskChanged, api.WatchTaskFired, api.WatchTaskFinished:
		if ev.Task != nil {
			s.Tasks = upsert(s.Tasks, *ev.Task, func(t api.Task) bool { return t.ID == ev.Task.ID })
		}
	case api.WatchTaskRemoved:
		if ev.Task != nil {
			s.Tasks = slices.DeleteFunc(slices.Clone(s.Tasks), func(t api.Task) bool { return t.ID == ev.Task.ID })
		}
	case api.WatchConfirmationRequested:
		if ev.Confirmation == nil {
			break
		}
		c := *ev.Confirmation
		if !c.Pending() {
			s.Confirmations = withoutConfirmation(s.Confirmations, c.ID)
			break
		}
		s.Confirmations = upsertConfirmation(s.Confirmations, c)
	case api.WatchConfirmationResolved:
		if ev.Confirmation != nil {
			s.Confirmations = withoutConfirmation(s.Confirmations, ev.Confirmation.ID)
		}
	case api.WatchSessionOpened:
		if ev.Session != nil {
			s.Sessions = upsert(s.Sessions, *ev.Session, func(x api.Session) bool { return x.ID == ev.Session.ID })
		}
	case api.WatchSessionClosed:
		if ev.Session != nil {
			s.Sessions = slices.DeleteFunc(slices.Clone(s.Sessions), func(x api.Session) bool { return x.ID == ev.Session.ID })
		}
	case api.WatchPluginHealth:
		if ev.Plugin != nil {
			s.Status.Plugins = upsert(s.Status.Plugins, *ev.Plugin, func(p api.PluginStatus) bool { return p.Name == ev.Plugin.Name })
		}
	case api.WatchStatus:
		if ev.Status != nil {
			s.Status = *ev.Status
		}
	case api.WatchEnd:
		s.Core, s.Problem = CoreConnecting, "the core ended the watch: "+orUnknown(ev.Error)
	}
	s.Status.PendingConfirmations, s.Status.Sessions = len(s.Confirmations), len(s.Sessions)
	s.Reconfirm = slices.DeleteFunc(slices.Clone(s.Reconfirm), func(id string) bool {
		_, pending := s.Confirmation(id)
		return !pending
	})
	return s
}

// WithReconfirm returns s with confirmation id in Reconfirm.
func (s State) WithReconfirm(id string) State {
	if _, ok := s.Confirmation(id); !ok || slices.Contains(s.Reconfirm, id) {
		return s
	}
	s.Reconfirm = append(slices.Clone(s.Reconfirm), id)
	return s
}

// Connecting returns s while the app is watching the core again, having
// lost the stream for why: what it showed stays, but nothing can be
// decided until a fresh snapshot arrives.
func (s State) Connecting(why string) State {
	s.Core, s.Problem = CoreConnecting, why
	return s
}

// NotRunning returns s for a core that no longer answers (it exited, or
// could not be started) for why. A core restart leaves nothing
// approvable, and no session survives it: both lists empty.
func (s State) NotRunning(why string) State {
	s.Core, s.Problem = CoreNotRunning, orUnknown(why)
	s.Confirmations, s.Sessions, s.Reconfirm = nil, nil, nil
	s.Status.Draining, s.Status.Paused = false, false
	s.Status.PendingConfirmations, s.Status.Sessions = 0, 0
	s.StartedCore = false
	return s
}

// Starting returns s while the app finds or starts the core.
func (s State) Starting() State {
	s.Core, s.Problem = CoreStarting, ""
	return s
}

// WithArguments returns s with the full arguments of a pending
// confirmation whose event left them out (fetched with
// control.Client.Confirmation). They replace nothing else, and only if
// the hash is the one the menu shows: the user must decide what they
// read.
func (s State) WithArguments(full api.Confirmation) State {
	i := slices.IndexFunc(s.Confirmations, func(c api.Confirmation) bool { return c.ID == full.ID })
	if i < 0 || s.Confirmations[i].ArgsHash != full.ArgsHash || full.ArgumentsOmitted ||
		s.Confirmations[i].PreviewDigest != full.PreviewDigest || full.PreviewOmitted {
		return s
	}
	s.Confirmations = slices.Clone(s.Confirmations)
	s.Confirmations[i].Arguments, s.Confirmations[i].ArgumentsOmitted = full.Arguments, false
	s.Confirmations[i].Hidden = slices.Clone(full.Hidden)
	s.Confirmations[i].Preview, s.Confirmations[i].PreviewOmitted = full.Preview, false
	return s
}

// Confirmation returns the pending confirmation with id.
func (s State) Confirmation(id string) (api.Confirmation, bool) {
	i := slices.IndexFunc(s.Confirmations, func(c api.Confirmation) bool { return c.ID == id })
	if i < 0 {
		return api.Confirmation{}, false
	}
	return s.Confirmations[i], true
}

// upsertConfirmation replaces or appends c, keeping arguments already
// loaded for the same hash when c left them out.
func upsertConfirmation(list []api.Confirmation, c api.Confirmation) []api.Confirmation {
	c = keepLoaded(list, c)
	return upsert(list, c, func(x api.Confirmation) bool { return x.ID == c.ID })
}

// keepLoaded returns c with the arguments of its namesake in old, when c
// left them out and old has them for the same hash.
func keepLoaded(old []api.Confirmation, c api.Confirmation) api.Confirmation {
	for _, o := range old {
		if o.ID != c.ID || o.ArgsHash != c.ArgsHash {
			continue
		}
		if c.ArgumentsOmitted && !o.ArgumentsOmitted {
			c.Arguments, c.ArgumentsOmitted = o.Arguments, false
		}
		if c.PreviewOmitted && !o.PreviewOmitted && o.PreviewDigest == c.PreviewDigest {
			c.Preview, c.PreviewOmitted = o.Preview, false
		}
	}
	return c
}

func withoutConfirmation(list []api.Confirmation, id string) []api.Confirmation {
	return slices.DeleteFunc(slices.Clone(list), func(c api.Confirmation) bool { return c.ID == id })
}

// upsert returns a copy of list with v in place of the element same
// accepts, or appended.
func upsert[T any](list []T, v T, same func(T) bool) []T {
	list = slices.Clone(list)
	if i := slices.IndexFunc(list, same); i >= 0 {
		list[i] = v
		return list
	}
	return append(list, v)
}

func orUnknown(why string) string {
	if why == "" {
		return "no reason given"
	}
	return why
}
