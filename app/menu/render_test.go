package menu

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/internal/textutil"
)

const fullHash = "b58921601d60d0fd8716d963de97b59a34af8caaf50ef411bc3fae1fdd97f2d5"

// running is a core as the first snapshot shows it.
func running(cs []api.Confirmation, ss []api.Session) State {
	st := api.Status{Version: "1.2.3", Engines: []api.EngineStatus{{Name: "docker", Version: "27.1"}},
		Plugins: []api.PluginStatus{{Name: "echo", Healthy: true, State: "healthy"}, {Name: "memory", State: "crashed"}}}
	s := State{Notifications: Permission{OK: true}, LoginItem: LoginItem{Supported: true}}
	return s.Apply(snapshot(st, cs, ss))
}

func TestRender(t *testing.T) {
	email := conf("44b733b20a71bc9ea06a36e21f5080be", "send_email", `{"to":"alice@example.com","subject":"Lunch"}`)
	email.ArgsHash = fullHash
	now := t0.Add(90 * time.Second)
	tests := []struct {
		name  string
		state State
		want  string
	}{
		{"starting", State{}, `icon normal
Carapace: starting… (off)
Notifications: off — approve in this menu (off)
---
Pending approvals (0)
  Nothing waits for you (off)
Sessions (0)
  No live sessions (off)
Tasks (0)
  No scheduled tasks (carapace tasks add) (off)
---
Pause (no new sessions from events) (off) -> pause
Open audit log -> open-audit-log
[ ] Start at login (off) -> start-at-login
---
Quit Carapace -> quit
`},
		{"running with an approval and a session", func() State {
			s := running([]api.Confirmation{email}, []api.Session{sess("s-abc", "main")})
			s.LoginItem.Enabled, s.StartedCore = true, true
			return s
		}(), `icon attention badge 1
Carapace: running (off)
Version: 1.2.3 (off)
Runtime: docker 27.1 (off)
Plugins: 1 healthy, not: memory (crashed) (off)
Notifications: on (off)
---
Pending approvals (1)
  send_email · main · b58921601d60
    Tool: send_email (off)
    Group: main (off)
    Session: s-1 (off)
    Digest: b58921601d60 (off)
    Expires in 3m30s (then denied) (off)
    ---
    Arguments: (off)
    to = "alice@example.com" (off)
    subject = "Lunch" (off)
    ---
    Approve -> approve
    Deny -> deny
Sessions (1)
  main · docker · 1m30s
    Session: s-abc (off)
    Stop -> stop-session
Tasks (0)
  No scheduled tasks (carapace tasks add) (off)
---
Pause (no new sessions from events) -> pause
Open audit log -> open-audit-log
[x] Start at login -> start-at-login
---
Quit Carapace -> quit
`},
		{"paused, notifications denied", func() State {
			s := running(nil, nil)
			s = s.Apply(statusEv(api.Status{Version: "1.2.3", Paused: true}))
			s.Notifications = Permission{Why: "denied in System Settings › Notifications"}
			return s
		}(), `icon normal
Carapace: paused (off)
Version: 1.2.3 (off)
Runtime: no container engine checked yet (off)
Notifications: off — denied in System Settings › Notifications (off)
---
Pending approvals (0)
  Nothing waits for you (off)
Sessions (0)
  No live sessions (off)
Tasks (0)
  No scheduled tasks (carapace tasks add) (off)
---
Resume (sessions for events start again) -> resume
Open audit log -> open-audit-log
[ ] Start at login -> start-at-login
---
Quit Carapace -> quit
`},
		{"the core died", running([]api.Confirmation{email}, nil).NotRunning("the core exited: exit status 1\nerror: config.toml: line 3"), `icon attention
Carapace: not running (off)
the core exited: exit status 1 error: config.toml: line 3 (off)
Notifications: on (off)
Restart core -> restart-core
---
Pending approvals (0)
  Nothing waits for you (off)
Sessions (0)
  No live sessions (off)
Tasks (0)
  No scheduled tasks (carapace tasks add) (off)
---
Pause (no new sessions from events) (off) -> pause
Open audit log -> open-audit-log
[ ] Start at login -> start-at-login
---
Quit Carapace -> quit
`},
		{"reconnecting: shown but not decidable", running([]api.Confirmation{email}, []api.Session{sess("s-abc", "main")}).Connecting("the core ended the watch: cut off"), `icon attention badge 1
Carapace: reconnecting… (off)
the core ended the watch: cut off (off)
Version: 1.2.3 (off)
Runtime: docker 27.1 (off)
Plugins: 1 healthy, not: memory (crashed) (off)
Notifications: on (off)
---
Pending approvals (1)
  send_email · main · b58921601d60
    Tool: send_email (off)
    Group: main (off)
    Session: s-1 (off)
    Digest: b58921601d60 (off)
    Expires in 3m30s (then denied) (off)
    ---
    Arguments: (off)
    to = "alice@example.com" (off)
    subject = "Lunch" (off)
    ---
    Approve (off) -> approve
    Deny (off) -> deny
Sessions (1)
  main · docker · 1m30s
    Session: s-abc (off)
    Stop (off) -> stop-session
Tasks (0)
  No scheduled tasks (carapace tasks add) (off)
---
Pause (no new sessions from events) (off) -> pause
Open audit log -> open-audit-log
[ ] Start at login -> start-at-login
---
Quit Carapace -> quit
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := Render(tt.state, now)
			if got := tree.String(); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			checkTree(t, tree)
		})
	}
}

// checkTree checks what every rendered tree must hold: unique IDs, titles
// that are printable and at most Width runes (a title built from a
// confirmation's tool and group is clipped; its lines show them whole).
func checkTree(t *testing.T, tree Tree) {
	t.Helper()
	seen := map[string]bool{}
	tree.Walk(func(it Item, _ int) {
		if it.ID == "" || seen[it.ID] {
			t.Errorf("item %q: empty or repeated ID", it.ID)
		}
		seen[it.ID] = true
		if n := utf8.RuneCountInString(it.Title); n > Width+12 { // a status line may carry a short prefix
			t.Errorf("item %s: title of %d runes", it.ID, n)
		}
		for _, s := range []string{it.Title, it.Tooltip} {
			for _, r := range s {
				if !textutil.IsPrint(r) {
					t.Errorf("item %s: unprintable %U in %q", it.ID, r, s)
				}
			}
		}
	})
}

// Hostile argument values are escaped and wrapped, never cut: the
// argument lines, put back together, are every leaf exactly.
func TestRenderHostileArguments(t *testing.T) {
	tenK := strings.Repeat("0123456789", 1024)
	tests := []struct {
		name  string
		value string // the "m" argument
		lines int    // argument lines expected; 0: do not count
	}{
		{"newlines", "first\nsecond\r\nthird", 1},
		{"ANSI escapes", "\x1b[2J\x1b[31mred\x1b[0m\x07", 0},
		{"C1 control", "a\u009b31mb", 1},
		{"RTL override", "invoice\u202egpj.exe", 1},
		{"bidi isolates and zero width", "\u2066a\u2069\u200b\u200d\ufeff", 0},
		{"10 KiB", tenK, 0},
		{"10 KiB of newlines", strings.Repeat("\n", 10<<10), 0},
		{"a fake escape", `looks\u000aescaped`, 1},
		{"a fake continuation", "x\n  ↳ Approve", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]any{"m": tt.value, "k": []string{tt.value}})
			c := conf("abcdef0123456789abcdef0123456789", "echo_confirm", string(args))
			tree := Render(running([]api.Confirmation{c}, nil), t0)
			checkTree(t, tree)
			sub, ok := tree.Find("confirm/" + c.ID)
			if !ok {
				t.Fatal("no submenu for the confirmation")
			}
			var got []string
			for _, it := range sub.Children {
				if strings.HasPrefix(it.ID, "confirm/"+c.ID+"/arg/") {
					got = append(got, it.Title)
					if it.Enabled || it.Action.Kind != ActionNone {
						t.Errorf("argument line %s is clickable", it.ID)
					}
				}
			}
			// Put the lines back together: a line that starts with the
			// continuation mark continues the previous one.
			var leaves []string
			for _, l := range got {
				if rest, ok := strings.CutPrefix(l, cont); ok && len(leaves) > 0 {
					leaves[len(leaves)-1] += rest
					continue
				}
				leaves = append(leaves, l)
			}
			want := []string{"k[0] = " + Quote(tt.value), "m = " + Quote(tt.value)}
			if len(leaves) != 2 || leaves[0] != want[0] || leaves[1] != want[1] {
				t.Errorf("the argument lines do not add up to the arguments:\n got %q\nwant %q", clip(leaves), clip(want))
			}
			if tt.lines > 0 && len(got) != 2*tt.lines {
				t.Errorf("%d argument lines, want %d", len(got), 2*tt.lines)
			}
			if want := 2 * len(Wrap(want[1], Width, cont)); len(got) != want {
				t.Errorf("%d argument lines, want %d", len(got), want)
			}
			approve, _ := tree.Find("confirm/" + c.ID + "/approve")
			if !approve.Enabled {
				t.Error("Approve is not offered although every argument is shown")
			}
		})
	}
}

func clip(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = textutil.Clip(s, 120)
	}
	return out
}

// Approve is offered only for arguments the menu shows whole, and only
// while the core is live; Deny whenever the core is live.
func TestRenderWhenToApprove(t *testing.T) {
	many := map[string]int{}
	for i := range MaxArgumentLines + 1 {
		many[fmt.Sprintf("k%04d", i)] = i
	}
	manyJSON, _ := json.Marshal(many)
	base := conf("abcdef0123456789abcdef0123456789", "t", `{"m":"x"}`)
	with := func(f func(*api.Confirmation)) api.Confirmation { c := base; f(&c); return c }
	tests := []struct {
		name             string
		state            func(api.Confirmation) State
		c                api.Confirmation
		approve, deny    bool
		line0, lastTitle string
	}{
		{"shown whole", live, base, true, true, `m = "x"`, ""},
		{"no arguments", live, with(func(c *api.Confirmation) { c.Arguments = nil }), true, true, "(none)", ""},
		{"left out of the event", live, omitted(base), false, true, "(not loaded yet: too large for the watch stream)", ""},
		{"not JSON", live, with(func(c *api.Confirmation) { c.Arguments = json.RawMessage(`{"m":`) }), false, true, "(cannot be shown: read the arguments: unexpected EOF)", ""},
		{"more lines than the menu shows", live, with(func(c *api.Confirmation) { c.Arguments = manyJSON }), false, true, "k0000 = 0",
			"… 1 more arguments not shown: see carapace confirm list --json"},
		{"reconnecting", func(c api.Confirmation) State { return live(c).Connecting("x") }, base, false, false, `m = "x"`, ""},
		{"a value hidden", live, with(func(c *api.Confirmation) {
			c.Arguments = json.RawMessage(`{"m":"-----BEGIN RSA PRIVATE KEY-----[REDACTED]"}`)
			c.Hidden = []api.Hidden{{Path: "m", Kind: "private-key", Chars: 52}}
		}), false, true, `m = "-----BEGIN RSA PRIVATE KEY-----[REDACTED]"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := Render(tt.state(tt.c), t0)
			id := "confirm/" + tt.c.ID
			approve, _ := tree.Find(id + "/approve")
			deny, _ := tree.Find(id + "/deny")
			if approve.Enabled != tt.approve || deny.Enabled != tt.deny {
				t.Errorf("approve %v deny %v, want %v %v", approve.Enabled, deny.Enabled, tt.approve, tt.deny)
			}
			want := Action{Kind: ActionApprove, Target: tt.c.ID, ArgsHash: tt.c.ArgsHash}
			if approve.Action != want {
				t.Errorf("approve action %+v, want %+v", approve.Action, want)
			}
			if want.Kind = ActionDeny; deny.Action != want {
				t.Errorf("deny action %+v, want %+v", deny.Action, want)
			}
			if l, _ := tree.Find(id + "/arg/0"); l.Title != tt.line0 {
				t.Errorf("first argument line %q, want %q", l.Title, tt.line0)
			}
			if tt.lastTitle != "" {
				if l, _ := tree.Find(fmt.Sprintf("%s/arg/%d", id, MaxArgumentLines)); l.Title != tt.lastTitle {
					t.Errorf("last argument line %q, want %q", l.Title, tt.lastTitle)
				}
			}
		})
	}
}

func live(c api.Confirmation) State { return running([]api.Confirmation{c}, nil) }

// An item's ID names the same thing in every render, whatever else
// changed, so a tray updates it in place and a click means what it showed.
// Hidden values are listed — where, what they looked like, how much —
// with the commands that read and approve what runs; Approve says where
// it is done instead. An Approve that did not count says so too.
func TestRenderHiddenAndReconfirm(t *testing.T) {
	c := conf("abcdef0123456789abcdef0123456789", "schedule_task", `{"prompt":"[REDACTED]","x":["a", "[REDACTED]"]}`)
	c.Hidden = []api.Hidden{{Path: "prompt", Kind: "private-key", Chars: 52}, {Path: "x[1]", Kind: "sensitive-key"}, {Path: "", Kind: ""}}
	s := live(c).WithReconfirm(c.ID)
	tree := Render(s, t0)
	sub, _ := tree.Find("confirm/" + c.ID)
	var titles []string
	for _, it := range sub.Children {
		titles = append(titles, it.Title)
	}
	text := strings.Join(titles, "\n")
	for _, want := range []string{
		"Hidden, shown above as [REDACTED] — maybe not a secret:",
		"• prompt · private-key · 52 characters",
		"• x[1] · sensitive-key · characters not counted",
		"• the value · secret · characters not counted",
		"Read what runs: carapace confirm show --raw abcdef01",
		"and approve it there: carapace confirm approve --raw abcdef01",
		"Approve here did not count",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the submenu lacks %q:\n%s", want, text)
		}
	}
	approve, _ := tree.Find("confirm/" + c.ID + "/approve")
	if approve.Enabled || !strings.Contains(approve.Tooltip, "carapace confirm approve --raw abcdef01") {
		t.Errorf("approve %+v; want it disabled, saying where to approve", approve)
	}
	// Once it is decided elsewhere, nothing of it stays.
	if s = s.Apply(api.WatchEvent{Type: api.WatchConfirmationResolved, Confirmation: &c}); len(s.Reconfirm) != 0 {
		t.Errorf("Reconfirm %v after the confirmation was resolved", s.Reconfirm)
	}
}

func TestRenderStableIDs(t *testing.T) {
	a := conf("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "send_email", `{"to":"x","body":"`+strings.Repeat("y", 300)+`"}`)
	b := conf("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "rm", `{"path":"/"}`)
	s1 := running([]api.Confirmation{a}, []api.Session{sess("s-1", "main")})
	s2 := s1.Apply(requested(b)).Apply(opened(sess("s-2", "work"))).Apply(statusEv(api.Status{Paused: true}))
	before, after := Render(s1, t0), Render(s2, t0.Add(time.Hour))
	ids := map[string]Item{}
	before.Walk(func(it Item, _ int) { ids[it.ID] = it })
	after.Walk(func(it Item, _ int) {
		old, ok := ids[it.ID]
		if !ok {
			return
		}
		if old.Action.Target != it.Action.Target || old.Action.ArgsHash != it.Action.ArgsHash || old.Separator != it.Separator {
			t.Errorf("item %s: was %+v, now %+v", it.ID, old.Action, it.Action)
		}
		if strings.Contains(it.ID, "/arg/") && old.Title != it.Title {
			t.Errorf("argument line %s changed: %q -> %q", it.ID, old.Title, it.Title)
		}
	})
	for _, id := range []string{"confirm/" + a.ID + "/approve", "confirm/" + a.ID + "/arg/2", "session/s-1/stop", "pause", "quit"} {
		if _, ok := after.Find(id); !ok {
			t.Errorf("item %s is gone after an unrelated change", id)
		}
	}
	p, _ := after.Find("pause")
	if p.Action.Kind != ActionResume {
		t.Errorf("pause item action %v while paused", p.Action.Kind)
	}
}

func TestRenderQuitSaysWhatHappensToTheCore(t *testing.T) {
	for _, started := range []bool{false, true} {
		s := running(nil, nil)
		s.StartedCore = started
		q, _ := Render(s, t0).Find("quit")
		if got := strings.Contains(q.Tooltip, "stop the core"); got != started {
			t.Errorf("started %v: quit tooltip %q", started, q.Tooltip)
		}
	}
}

// The tasks submenu follows the watch stream: created, fired and finished
// (the last run), paused (Resume offered), removed.
func TestTasksMenu(t *testing.T) {
	next := t0.Add(3 * time.Hour)
	task := api.Task{ID: "t-abc12345", Group: "main", Schedule: "every day at 07:00 (Europe/Berlin)", Prompt: "Summarise\nmy calendar",
		Enabled: true, Next: &next}
	s := running(nil, nil)
	s = s.Apply(api.WatchEvent{Type: api.WatchTaskCreated, Task: &task})
	done := task
	done.Last = &api.TaskRun{ID: 1, State: "failed", Reason: "the agent exited with status 1", Scheduled: t0}
	s = s.Apply(api.WatchEvent{Type: api.WatchTaskFinished, Task: &done, TaskRun: done.Last})
	tree := Render(s, t0)
	checkTree(t, tree)
	got := tree.String()
	want := `Tasks (1)
  every day at 07:00 (Europe/Berlin) · main · next in 3h
    Task: t-abc12345 (off)
    Prompt: Summarise my calendar (off)
    Next: ` + next.Local().Format("Mon 2 Jan 15:04") + ` (off)
    Last: failed (the agent exited with status 1), ` + t0.Local().Format("Mon 2 Jan 15:04") + ` (off)
    Run now -> run-task
    Pause -> pause-task
`
	if !strings.Contains(got, want) {
		t.Fatalf("got:\n%s\nwant it to contain:\n%s", got, want)
	}
	if it, ok := tree.Find("task/t-abc12345/run"); !ok || it.Action.Target != "t-abc12345" || !it.Enabled {
		t.Errorf("run now: %+v", it)
	}

	paused := done
	paused.Enabled, paused.Next, paused.PausedReason = false, nil, "paused after 3 failed runs in a row"
	s = s.Apply(api.WatchEvent{Type: api.WatchTaskChanged, Task: &paused})
	tree = Render(s, t0)
	if it, ok := tree.Find("task/t-abc12345/resume"); !ok || it.Action.Kind != ActionResumeTask {
		t.Errorf("a paused task offers no Resume:\n%s", tree)
	}
	if !strings.Contains(tree.String(), "main · paused itself") || !strings.Contains(tree.String(), "Paused: paused after 3 failed runs") {
		t.Errorf("a task that paused itself:\n%s", tree)
	}
	s = s.Apply(api.WatchEvent{Type: api.WatchTaskRemoved, Task: &paused})
	if len(s.Tasks) != 0 || !strings.Contains(Render(s, t0).String(), "Tasks (0)") {
		t.Errorf("after task.removed: %+v", s.Tasks)
	}
	// A fresh snapshot replaces the list.
	s = s.Apply(api.WatchEvent{Type: api.WatchSnapshot, Tasks: []api.Task{task}})
	if len(s.Tasks) != 1 {
		t.Errorf("snapshot tasks: %+v", s.Tasks)
	}
}

// A plugin that reports itself degraded (the Telegram channel that hears
// nothing from Telegram) shows on the Plugins line, as it arrives on the
// watch stream, and leaves it when it recovers.
func TestRenderDegradedPlugin(t *testing.T) {
	s := running(nil, nil).Apply(health(api.PluginStatus{Name: "memory", Healthy: true, State: "healthy"}))
	line := func(s State) string {
		for _, it := range Render(s, t0).Items {
			if strings.HasPrefix(it.Title, "Plugins:") {
				return it.Title
			}
		}
		return ""
	}
	if got := line(s); got != "Plugins: 2 healthy" {
		t.Fatalf("before: %q", got)
	}
	s = s.Apply(health(api.PluginStatus{Name: "telegram", State: "degraded", Problem: "no message from Telegram can arrive"}))
	if got, want := line(s), "Plugins: 2 healthy, not: telegram (degraded)"; got != want {
		t.Errorf("degraded: %q, want %q", got, want)
	}
	s = s.Apply(health(api.PluginStatus{Name: "telegram", Healthy: true, State: "healthy"}))
	if got := line(s); got != "Plugins: 3 healthy" {
		t.Errorf("recovered: %q", got)
	}
}

// A plugin the core starts again after a crash shows as restarting; one
// the core gave up on (down) shows with the command that brings it back,
// turns the icon to attention and is named in the tooltip, until it comes
// back.
func TestRenderDownPlugin(t *testing.T) {
	s := running(nil, nil).Apply(health(api.PluginStatus{Name: "memory", Healthy: true, State: "healthy"}))
	plugins := func(tree Tree) string {
		var out []string
		for _, it := range tree.Items {
			if strings.HasPrefix(it.ID, "status/plugins") {
				out = append(out, strings.TrimPrefix(it.Title, cont))
			}
		}
		return strings.Join(out, "")
	}
	s = s.Apply(health(api.PluginStatus{Name: "telegram", State: api.PluginRestarting, Problem: "handler process died"}))
	tree := Render(s, t0)
	if got, want := plugins(tree), "Plugins: 2 healthy, not: telegram (restarting)"; got != want || tree.Icon != IconNormal {
		t.Errorf("restarting: %q (icon %v), want %q and the normal icon", got, tree.Icon, want)
	}
	s = s.Apply(health(api.PluginStatus{Name: "telegram", State: api.PluginDown, Problem: "died 5 times within 10m0s"}))
	tree = Render(s, t0)
	checkTree(t, tree)
	if got, want := plugins(tree), "Plugins: 2 healthy, not: telegram (down: carapace plugin restart telegram)"; got != want {
		t.Errorf("down: %q, want %q", got, want)
	}
	if tree.Icon != IconAttention || !strings.HasSuffix(tree.Tooltip, " — down: telegram") {
		t.Errorf("down: icon %v, tooltip %q; want attention, naming telegram", tree.Icon, tree.Tooltip)
	}
	s = s.Apply(health(api.PluginStatus{Name: "telegram", Healthy: true, State: "healthy"}))
	if tree := Render(s, t0); plugins(tree) != "Plugins: 3 healthy" || tree.Icon != IconNormal || strings.Contains(tree.Tooltip, "down") {
		t.Errorf("back: %q, icon %v, tooltip %q", plugins(tree), tree.Icon, tree.Tooltip)
	}
}

// TestRenderCalendarAccess: on a platform with EventKit the menu offers to
// ask for calendar and reminders access until both are granted, then
// shows it granted with nothing to click; elsewhere there is no item.
func TestRenderCalendarAccess(t *testing.T) {
	now := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	s := running(nil, nil)
	if _, ok := Render(s, now).Find("calendar-access"); ok {
		t.Fatal("an item where calendar access is not supported")
	}
	s.Calendar = CalendarAccess{Supported: true, Detail: "events full, reminders not-determined", Advice: "Carapace menu › Allow calendar and reminders access…"}
	it, ok := Render(s, now).Find("calendar-access")
	if !ok || it.Title != "Allow calendar and reminders access…" || !it.Enabled || it.Action.Kind != ActionCalendarAccess || !strings.Contains(it.Tooltip, "reminders not-determined") {
		t.Fatalf("not granted: %+v", it)
	}
	s.Calendar = CalendarAccess{Supported: true, Granted: true, Detail: "events full, reminders full"}
	it, ok = Render(s, now).Find("calendar-access")
	if !ok || !it.Checked || it.Enabled || it.Action.Kind != ActionNone {
		t.Fatalf("granted: %+v", it)
	}
	if ActionCalendarAccess.String() != "calendar-access" {
		t.Errorf("the action's name: %q", ActionCalendarAccess.String())
	}
}

// Warm containers (core.status's Warm) show on a line of their own under
// Sessions, by group, and never count as sessions; the line goes when
// they do.
func TestRenderWarmContainers(t *testing.T) {
	s := running(nil, []api.Session{sess("s-abc", "main")})
	st := s.Status
	st.Warm = []api.WarmContainer{{Group: "main", Container: "carapace-s-w1"}, {Group: "side", Container: "carapace-s-w2"}, {Group: "side", Container: "carapace-s-w3"}}
	s = s.Apply(api.WatchEvent{Type: api.WatchStatus, Status: &st})
	tree := Render(s, t0)
	checkTree(t, tree)
	got := tree.String()
	if !strings.Contains(got, "Sessions (1)\n") || !strings.Contains(got, "  Warm, waiting: main (1), side (2) (off)\n") {
		t.Errorf("warm containers:\n%s", got)
	}
	idle := running(nil, nil)
	st2 := idle.Status
	st2.Warm = st.Warm[:1]
	idle = idle.Apply(api.WatchEvent{Type: api.WatchStatus, Status: &st2})
	if got := Render(idle, t0).String(); !strings.Contains(got, "Sessions (0)\n  No live sessions (off)\n  Warm, waiting: main (1) (off)\n") {
		t.Errorf("warm containers and no session:\n%s", got)
	}
	st2.Warm = nil
	idle = idle.Apply(api.WatchEvent{Type: api.WatchStatus, Status: &st2})
	if got := Render(idle, t0).String(); strings.Contains(got, "Warm") {
		t.Errorf("the warm line outlived the warm containers:\n%s", got)
	}
}
