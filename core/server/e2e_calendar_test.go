package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/internal/testutil/caldavserver"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/keychain"
	"github.com/carapace-dev/carapace/plugins/calendar"
)

// The calendar plugin end to end: the real handler process, built as make
// build builds it and loaded as a bundled plugin with its pin, confined by
// the real core, reaching a real Radicale on the loopback only through its
// egress point (caldav_url is its one declared host), its password from
// the credential store; called by the scripted agent of the test image in
// a Docker container, and by the real bin/ipc from sessions whose
// confirmations the real CLI decides.

// calendarBundle is plugins/calendar as make build bundles it
// (pluginBundle).
func calendarBundle(t testing.TB) loader.Bundled { return pluginBundle(t, "calendar") }

// calendarObjects returns the text of the objects Radicale stores in
// alice's collection name, unfolded, with \n line ends: what is on the
// server, read apart from the plugin.
func calendarObjects(t *testing.T, srv *caldavserver.Server, name string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(srv.Storage, "collection-root", "alice", name, "*.ics"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Unfolded: a long line is folded at 75 octets.
		out = append(out, strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n ", ""), "\r\n", "\n"))
	}
	return out
}

func TestCalendarThroughTheCore(t *testing.T) {
	if err := confine.Probe().Missing(); err != nil {
		testutil.Missing(t, fmt.Sprintf("the kernel cannot confine plugins: %v", err))
	}
	alice := caldavserver.User{Name: "alice", Password: "e2e calendar pass"}
	srv := caldavserver.Start(t, alice)
	srv.MkCalendar(t, alice, "work", "VEVENT")
	srv.MkCalendar(t, alice, "tasks", "VTODO")

	// The plugin's calls reach Radicale on a loaded machine: the default
	// handler timeout, not confirmConfig's 1 s.
	cfg := dockerConfig(t, "[confirm]\ntimeout = \"90s\"\n"+fmt.Sprintf("[groups.main]\n[plugins.calendar]\n[plugins.calendar.config]\ncaldav_url = %q\nusername = \"alice\"\ntime_zone = \"Europe/Paris\"\ndefault_calendar = \"work\"\nreminders_list = \"tasks\"\n", srv.URL))
	c := startCoreWith(t, coreOptions{Config: cfg, Bundled: []loader.Bundled{calendarBundle(t)}, Setup: func(h home.Dir) {
		if err := keychain.NewFileStore(h.CredentialsDir()).Set("calendar", calendar.CredentialKey, []byte(alice.Password)); err != nil {
			t.Fatal(err)
		}
	}})
	st := pluginStatus(t, c, "calendar")
	if !st.Healthy || st.Source != "bundled" || st.Confinement == nil || st.Confinement.Mode != api.ConfinementConfined {
		t.Fatalf("the calendar plugin: %+v (confinement %+v)\ncore log:\n%s", st, st.Confinement, c.Log.String())
	}

	// The agent in its container creates an event and a reminder, then
	// lists both.
	stdout, stderr, exit, _ := runAgent(t, c, api.SessionRequest{Group: "main", Runtime: "docker", Prompt: strings.Join([]string{
		`tool.invoke.calendar_create {"title":"Dentist","start":"2026-10-27T14:30","duration":"45m"}`,
		`tool.invoke.reminder_create {"title":"Call the plumber","due":"2026-10-27T10:00"}`,
		`tool.invoke.calendar_list {"from":"2026-10-26","to":"2026-11-01"}`,
		`tool.invoke.reminder_list {}`,
	}, "\n")})
	for _, want := range []string{`"start":"2026-10-27T14:30:00+01:00"`, `"title":"Dentist"`, `"title":"Call the plumber"`, `"due":"2026-10-27T10:00:00+01:00"`, `"count":1`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the agent's output lacks %s", want)
		}
	}
	if exit != 0 || t.Failed() {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nradicale:\n%s", exit, stdout, stderr, srv.Logs())
	}
	// On the server, read apart from the plugin: the event, and the
	// reminder with its alarm.
	if objs := calendarObjects(t, srv, "work"); len(objs) != 1 || !strings.Contains(objs[0], "SUMMARY:Dentist") || !strings.Contains(objs[0], "DTSTART:20261027T133000Z") {
		t.Fatalf("work on the server: %q", objs)
	}
	if objs := calendarObjects(t, srv, "tasks"); len(objs) != 1 || !strings.Contains(objs[0], "SUMMARY:Call the plumber") || !strings.Contains(objs[0], "BEGIN:VALARM") {
		t.Fatalf("tasks on the server: %q", objs)
	}

	// Attendees raise the risk: without, the call runs at once (the
	// control); with, it waits for the user, whose card shows who is
	// invited, and runs once approved.
	s := promptSession(t, c, "Plan my week")
	// list_tools says which arguments raise the risk; a tool without (the
	// control) says nothing of it.
	seen := map[string]string{}
	for _, x := range mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.list_tools", `{}`))["tools"].([]any) {
		tl := x.(map[string]any)
		seen[tl["name"].(string)] = fmt.Sprint(tl["risk_level"], tl["high_risk_if"])
	}
	if seen["calendar_create"] != "low[attendees]" || seen["calendar_delete"] != "high<nil>" || seen["calendar_list"] != "low<nil>" {
		t.Fatalf("list_tools: %v", seen)
	}
	plain := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.calendar_create", `{"title":"Focus time","start":"2026-10-28T09:00","end":"2026-10-28T11:00"}`))
	bg := startIPC(t, s.Socket, "tool.invoke.calendar_create", `{"title":"Lunch","start":"2026-10-29T12:00","duration":"1h","attendees":["bob@example.com"]}`)
	cf := pendingWhy(t, c, bg)
	if cf.Tool != "calendar_create" || !strings.Contains(string(cf.Arguments), "bob@example.com") {
		t.Fatalf("the confirmation %+v does not show the invited address", cf)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "approve", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm approve: exit %d\n%s%s", code, out, errs)
	}
	lunch := mustOK(t, bg.wait(t))
	if ev, _ := lunch["event"].(map[string]any); ev == nil || fmt.Sprint(ev["attendees"]) != "[bob@example.com]" {
		t.Fatalf("approved invitation: %v", lunch)
	}
	found := false
	for _, o := range calendarObjects(t, srv, "work") {
		found = found || strings.Contains(o, "SUMMARY:Lunch") && strings.Contains(o, "ATTENDEE") && strings.Contains(o, "mailto:bob@example.com")
	}
	if !found {
		t.Fatalf("the invitation is not on the server: %q", calendarObjects(t, srv, "work"))
	}

	// An update that lost the race: another device changes the event
	// after the agent read it; the agent's update with the version it read
	// is refused, and the other change is still there.
	focus := plain["event"].(map[string]any)
	other, err := calendar.NewCalDAV(calendar.CalDAVOptions{URL: srv.URL, Username: alice.Name, Password: alice.Password})
	if err != nil {
		t.Fatal(err)
	}
	notes := "moved by the phone"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := other.UpdateEvent(ctx, focus["id"].(string), calendar.EventChange{Notes: &notes}); err != nil {
		t.Fatalf("the other device's update: %v", err)
	}
	b, _ := json.Marshal(map[string]any{"id": focus["id"], "version": focus["version"], "title": "Deep work"})
	r := runIPC(t, s.Socket, nil, "tool.invoke.calendar_update", string(b))
	if r.Code == 0 || r.Err == nil || !strings.Contains(r.Err.Message, "CONFLICT") {
		t.Fatalf("the stale update: exit %d, %+v; want CONFLICT", r.Code, r.Err)
	}
	kept := false
	for _, o := range calendarObjects(t, srv, "work") {
		if strings.Contains(o, "SUMMARY:Focus time") {
			kept = strings.Contains(o, "DESCRIPTION:moved by the phone") && !strings.Contains(o, "Deep work")
		}
	}
	if !kept {
		t.Fatalf("after the refused update the server holds: %q", calendarObjects(t, srv, "work"))
	}

	// Calendar text is someone else's: a session that listed events is
	// tainted, and its next write waits for the user with that reason
	// (the same write ran at once in the untainted session above).
	s3 := promptSession(t, c, "What is on this week?")
	mustOK(t, runIPC(t, s3.Socket, nil, "tool.invoke.calendar_list", `{"from":"2026-10-26","to":"2026-11-01"}`))
	bg = startIPC(t, s3.Socket, "tool.invoke.calendar_create", `{"title":"Follow-up","start":"2026-10-30T09:00","duration":"30m"}`)
	cf = pendingWhy(t, c, bg)
	if !whyContains(cf, "calendar_list") {
		t.Fatalf("the tainted write's reasons %q do not name calendar_list", cf.Why)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "deny", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
	}
	wantError(t, bg.wait(t), ipc.CodeConfirmationDenied, 5, "")

	// Deleting waits for the user; denied, the event stays; approved, it
	// goes.
	del, _ := json.Marshal(map[string]any{"id": focus["id"]})
	bg = startIPC(t, s.Socket, "tool.invoke.calendar_delete", string(del))
	cf = pendingWhy(t, c, bg)
	if out, errs, code := runCLI(t, c.Home, "confirm", "deny", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
	}
	wantError(t, bg.wait(t), ipc.CodeConfirmationDenied, 5, "")
	if n := len(calendarObjects(t, srv, "work")); n != 3 {
		t.Fatalf("%d events after a denied delete, want 3", n)
	}
	bg = startIPC(t, s.Socket, "tool.invoke.calendar_delete", string(del))
	cf = pendingWhy(t, c, bg)
	if out, errs, code := runCLI(t, c.Home, "confirm", "approve", cf.ID[:8]); code != 0 {
		t.Fatalf("confirm approve: exit %d\n%s%s", code, out, errs)
	}
	mustOK(t, bg.wait(t))
	for _, o := range calendarObjects(t, srv, "work") {
		if strings.Contains(o, "SUMMARY:Focus time") {
			t.Fatalf("the deleted event is still on the server")
		}
	}
}

// doctorPluginCheck runs the real carapace doctor --online --json on the
// core's home and returns its check of plugin name's own check.
func doctorPluginCheck(t *testing.T, c *testCore, name string) (status, message, fix string) {
	t.Helper()
	out, errs, _ := runCLI(t, c.Home, "doctor", "--online", "--json")
	var checks []struct{ Name, Status, Message, Fix string }
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("doctor --online --json: %v\n%s\n%s", err, out, errs)
	}
	for _, ch := range checks {
		if ch.Name == "plugin "+name {
			return ch.Status, ch.Message, ch.Fix
		}
	}
	t.Fatalf("doctor --online has no check of plugin %s:\n%s", name, out)
	return "", "", ""
}

// TestCalendarDoctorOnline: carapace doctor --online runs the calendar
// plugin's own check in the real confined handler, which logs in to a real
// Radicale through its egress point and lists the calendars; a wrong
// password is reported with the command that replaces it, and that
// command, then a restart, makes the check pass. The web plugin, out of
// process too but without a check, answers "not implemented" and gets no
// line.
func TestCalendarDoctorOnline(t *testing.T) {
	if err := confine.Probe().Missing(); err != nil {
		testutil.Missing(t, fmt.Sprintf("the kernel cannot confine plugins: %v", err))
	}
	alice := caldavserver.User{Name: "alice", Password: "doctor calendar pass"}
	srv := caldavserver.Start(t, alice)
	srv.MkCalendar(t, alice, "work", "VEVENT")
	srv.MkCalendar(t, alice, "tasks", "VTODO")
	const wrong = "not alice's password"
	cfg := fmt.Sprintf("[runtime]\nengine = \"none\"\n[groups.main]\n[plugins.web]\n[plugins.calendar]\n[plugins.calendar.config]\ncaldav_url = %q\nusername = \"alice\"\ntime_zone = \"Europe/Paris\"\n", srv.URL)
	c := startCoreWith(t, coreOptions{Config: cfg, Bundled: []loader.Bundled{calendarBundle(t), webBundle(t)}, Setup: func(h home.Dir) {
		if err := keychain.NewFileStore(h.CredentialsDir()).Set("calendar", calendar.CredentialKey, []byte(wrong)); err != nil {
			t.Fatal(err)
		}
	}})
	if st := pluginStatus(t, c, "calendar"); !st.Healthy || st.Confinement == nil || st.Confinement.Mode != api.ConfinementConfined {
		t.Fatalf("the calendar plugin: %+v\ncore log:\n%s", st, c.Log.String())
	}

	if st := pluginStatus(t, c, "web"); !st.Healthy || st.PID == 0 {
		t.Fatalf("the web plugin: %+v", st)
	}
	if pc, err := c.Client.VerifyPlugin(t.Context(), "web"); err != nil || pc.Checked {
		t.Fatalf("the web plugin has no check: %+v, %v", pc, err)
	}
	out, _, _ := runCLI(t, c.Home, "doctor", "--online")
	if strings.Contains(out, "plugin web") || !strings.Contains(out, "plugin calendar") {
		t.Fatalf("doctor --online: a line for the web plugin, or none for the calendar:\n%s", out)
	}

	status, message, fix := doctorPluginCheck(t, c, "calendar")
	if status != "fail" || !strings.Contains(message, "refused the username and password") ||
		!strings.Contains(fix, "carapace auth set --plugin calendar --key caldav_password") {
		t.Fatalf("a wrong password: %s %q fix %q\nradicale:\n%s", status, message, fix, srv.Logs())
	}
	if strings.Contains(message+fix, wrong) {
		t.Fatal("doctor printed the password")
	}

	// The fix doctor names, with the real CLI, then the restart.
	cmd := exec.Command(bins.carapace, "--home", string(c.Home), "auth", "set", "--plugin", "calendar", "--key", calendar.CredentialKey)
	cmd.Stdin = strings.NewReader(alice.Password)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("auth set: %v\n%s", err, out)
	}
	if out, errs, code := runCLI(t, c.Home, "plugin", "restart", "calendar"); code != 0 {
		t.Fatalf("plugin restart: %d\n%s\n%s", code, out, errs)
	}
	status, message, fix = doctorPluginCheck(t, c, "calendar")
	if status != "ok" || !strings.Contains(message, "logged in; 2 calendars") || !strings.Contains(message, "work (VEVENT)") ||
		!strings.Contains(message, "tasks (VTODO)") || fix != "" {
		t.Fatalf("the right password: %s %q fix %q\nradicale:\n%s", status, message, fix, srv.Logs())
	}
}
