package calendar

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Name is the plugin's name.
const Name = "calendar"

//go:embed manifest.json
var manifest []byte

//go:embed skills
var skills embed.FS

// Manifest returns the plugin's manifest.json.
func Manifest() []byte { return manifest }

// Skills returns the plugin's skills folder.
func Skills() fs.FS {
	sub, _ := fs.Sub(skills, "skills")
	return sub
}

// Options are the handler's dependencies.
type Options struct {
	// HTTP is the client of the CalDAV backend: in the handler, the core's
	// egress point (plugin.HTTPClient). nil: http.DefaultClient (tests).
	HTTP *http.Client
	// EventKit builds the EventKit backend (macOS); nil where there is
	// none, and backend = "eventkit" fails Init saying so.
	EventKit func(cfg Config) (Backend, error)
	Logger   *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Handler serves the calendar tools.
type Handler struct {
	opts    Options
	cfg     Config
	backend Backend
}

// New returns the handler.
func New(o Options) *Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Handler{opts: o}
}

// NewWithBackend returns a handler on b, for tests of the tools through
// the interface (the EventKit backend's unit tests among them).
func NewWithBackend(b Backend, cfg Config) *Handler {
	h := New(Options{})
	h.backend, h.cfg = b, cfg
	if h.cfg.Location == nil {
		h.cfg.Location = time.Local
	}
	return h
}

// Init implements plugin.Handler: the config, then the backend (the
// CalDAV password from the plugin's credentials). It does not reach the
// server: a server down at start leaves the tools there, each call saying
// why it failed.
func (h *Handler) Init(ctx context.Context, config map[string]any, svc plugin.Services) error {
	cfg, err := ParseConfig(config)
	if err != nil {
		return plugin.NewInitError(plugin.CategoryConfig, fmt.Errorf("calendar: %w", err))
	}
	h.cfg = cfg
	switch cfg.Backend {
	case "eventkit":
		if h.opts.EventKit == nil {
			return plugin.NewInitError(plugin.CategoryConfig, errors.New("calendar: backend eventkit is macOS only: use backend caldav here (docs/CALENDAR.md)"))
		}
		b, err := h.opts.EventKit(cfg)
		if err != nil {
			return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("calendar: EventKit: %w", err))
		}
		h.backend = b
	default:
		pw, err := svc.ReadCredential(ctx, CredentialKey)
		if errors.Is(err, plugin.ErrNoCredential) || (err == nil && strings.TrimSpace(pw) == "") {
			return plugin.NewInitError(plugin.CategoryAuth, fmt.Errorf("calendar: no CalDAV password: run `carapace auth set --plugin calendar --key %s` (an app-specific password for iCloud or Fastmail), then `carapace plugin restart calendar`", CredentialKey))
		}
		if err != nil {
			return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("calendar: read the CalDAV password: %w", err))
		}
		b, err := NewCalDAV(CalDAVOptions{
			URL: cfg.URL, Username: cfg.Username, Password: strings.TrimSpace(pw), Location: cfg.Location,
			DefaultCalendar: cfg.DefaultCalendar, RemindersList: cfg.RemindersList, HTTP: h.opts.HTTP, Now: h.opts.Now,
		})
		if err != nil {
			return plugin.NewInitError(plugin.CategoryConfig, fmt.Errorf("calendar: %w", err))
		}
		h.backend = b
	}
	return nil
}

// Shutdown implements plugin.Handler.
func (h *Handler) Shutdown(context.Context) error { return nil }

// Verify implements plugin.Verifier (carapace doctor --online): it logs in
// and lists the calendars. A refused password comes with the command that
// stores it again.
func (h *Handler) Verify(ctx context.Context) (*plugin.VerifyResult, error) {
	if h.backend == nil {
		return &plugin.VerifyResult{OK: false, Message: "the calendar plugin is not set up", Fix: "carapace setup (or docs/CALENDAR.md)"}, nil
	}
	cals, err := h.backend.Calendars(ctx)
	if err != nil {
		msg, fix := verifyText(err)
		return &plugin.VerifyResult{OK: false, Message: oneLine(msg), Fix: fix}, nil
	}
	names := make([]string, 0, len(cals))
	for _, c := range cals {
		names = append(names, fmt.Sprintf("%s (%s)", c.Name, strings.Join(c.Components, ", ")))
	}
	if len(names) == 0 {
		return &plugin.VerifyResult{OK: false, Message: "logged in, but the account has no calendars", Fix: "check caldav_url in [plugins.calendar.config]: it should name your calendar home or the server's root"}, nil
	}
	return &plugin.VerifyResult{OK: true, Message: fmt.Sprintf("logged in; %d calendars: %s", len(names), strings.Join(names, "; "))}, nil
}

// verifyText is Verify's words for err, and its fix.
func verifyText(err error) (msg, fix string) {
	if errors.Is(err, ErrAuth) {
		return "the CalDAV server refused the username and password",
			"check username in [plugins.calendar.config], store the password again with carapace auth set --plugin calendar --key " + CredentialKey + ", then carapace plugin restart calendar"
	}
	return err.Error(), "check caldav_url in [plugins.calendar.config] and that the server answers, then carapace plugin restart calendar"
}

// Invoke implements plugin.Handler.
func (h *Handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	if h.backend == nil {
		return nil, plugin.NewToolError("the calendar plugin is not set up (docs/CALENDAR.md)", false)
	}
	a := args{m: req.Arguments, loc: h.cfg.Location}
	var out map[string]any
	var err error
	switch req.Tool {
	case "calendar_list":
		out, err = h.list(ctx, a)
	case "calendar_create":
		out, err = h.create(ctx, a)
	case "calendar_update":
		out, err = h.update(ctx, a)
	case "calendar_delete":
		out, err = h.delete(ctx, a)
	case "reminder_list":
		out, err = h.reminderList(ctx, a)
	case "reminder_create":
		out, err = h.reminderCreate(ctx, a)
	case "reminder_complete":
		out, err = h.reminderComplete(ctx, a)
	default:
		return nil, plugin.NewToolError("unknown tool "+req.Tool, false)
	}
	if err != nil {
		return nil, toolError(err)
	}
	return out, nil
}

// toolError turns a backend's error into what the agent reads: the known
// cases by name, with the way forward; the rest stays a plugin failure
// (its detail in the audit log only).
func toolError(err error) error {
	if te, ok := plugin.AsToolError(err); ok {
		return te
	}
	switch {
	case errors.Is(err, ErrConflict):
		return &plugin.ToolError{Code: "CONFLICT", Message: "CONFLICT: the item changed since it was read (someone else edited it); nothing was written. List it again, and apply the change to what it is now if it still makes sense."}
	case errors.Is(err, ErrNotFound):
		return &plugin.ToolError{Code: "NOT_FOUND", Message: "NOT_FOUND: no such item (it may have been deleted): list again for current ids", Field: "id"}
	case errors.Is(err, ErrBadID):
		return &plugin.ToolError{Code: "BAD_ID", Message: "BAD_ID: not an id this plugin gave: use an id from calendar_list or reminder_list", Field: "id"}
	case errors.Is(err, ErrNoCalendar):
		return &plugin.ToolError{Code: "NO_CALENDAR", Message: "NO_CALENDAR: " + strings.TrimPrefix(err.Error(), ErrNoCalendar.Error()+": ")}
	case errors.Is(err, ErrHasAttendees):
		return &plugin.ToolError{Code: "HAS_ATTENDEES", Message: "HAS_ATTENDEES: the event has attendees, whom the server may notify of a change: call again with notify_attendees true (the user is asked first)", Field: "notify_attendees"}
	case errors.Is(err, errBadTimes):
		return &plugin.ToolError{Code: "BAD_TIME", Message: "BAD_TIME: " + strings.TrimPrefix(err.Error(), errBadTimes.Error()+": ")}
	case errors.Is(err, ErrNoAccess):
		return &plugin.ToolError{Code: "NO_ACCESS", Message: "NO_ACCESS: " + strings.TrimPrefix(err.Error(), ErrNoAccess.Error()+": ") + " — tell the user"}
	case errors.Is(err, ErrAttendeesUnsupported):
		return &plugin.ToolError{Code: "ATTENDEES_UNSUPPORTED", Message: "ATTENDEES_UNSUPPORTED: on this Mac the calendar is reached through EventKit, which cannot invite people: create the event without attendees and tell the user to invite them from the Calendar app", Field: "attendees"}
	case errors.Is(err, ErrAuth):
		return &plugin.ToolError{Code: "AUTH", Message: "AUTH: the calendar server refused the account's password; the user must set it again (carapace auth set --plugin calendar --key " + CredentialKey + ")"}
	}
	return err
}
