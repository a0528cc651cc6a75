package cli_test

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/cmd/carapace/cli"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/internal/appstate"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/keychain"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

// doctorChecks runs carapace doctor --json and returns its checks by name.
func doctorChecks(t *testing.T, run func(args ...string) result) (map[string]cli.Check, int) {
	t.Helper()
	r := run("doctor", "--json")
	var checks []cli.Check
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
		t.Fatalf("doctor --json: %v\n%+v", err, r)
	}
	out := map[string]cli.Check{}
	for _, c := range checks {
		out[c.Name] = c
	}
	return out, r.code
}

// Each check broken on purpose, its fix command run, the check passing
// again.
func TestDoctor(t *testing.T) {
	fc := newFakeCore(t)
	h := fc.home
	run := func(args ...string) result { return carapace(t, h, args...) }
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.Config(), []byte("[runtime]\nengine = \"docker\"\nimage = \"carapace-agent-doctor-test:none\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh := func(fix string) {
		t.Helper()
		if out, err := exec.Command("/bin/sh", "-c", fix).CombinedOutput(); err != nil {
			t.Fatalf("the fix %q failed: %v\n%s", fix, err, out)
		}
	}

	checks, code := doctorChecks(t, run)
	if code != 1 {
		t.Fatalf("doctor exited %d with a failing check", code)
	}
	// The fake core runs version "test"; this carapace is 9.9.9.
	if c := checks["core"]; c.Status != "warn" || !strings.Contains(c.Message, "running version test, this carapace is 9.9.9") {
		t.Errorf("core: %+v", c)
	}
	if c := checks["plugins"]; c.Status != "ok" {
		t.Errorf("plugins: %+v", c)
	}
	if c := checks["config"]; c.Status != "ok" {
		t.Errorf("config: %+v", c)
	}

	// The home open to others.
	if err := os.Chmod(string(h), 0o755); err != nil {
		t.Fatal(err)
	}
	checks, _ = doctorChecks(t, run)
	if c := checks["home"]; c.Status != "fail" || !strings.Contains(c.Fix, "chmod 700 "+string(h)) {
		t.Fatalf("home open to others: %+v", c)
	}
	sh(checks["home"].Fix)
	if checks, _ = doctorChecks(t, run); checks["home"].Status != "ok" {
		t.Fatalf("home after its fix: %+v", checks["home"])
	}

	// The model key missing, then stored with the command doctor gives.
	if c := checks["model key"]; c.Status != "fail" || c.Fix != "carapace auth set --llm anthropic" {
		t.Fatalf("model key: %+v", c)
	}
	var out, errb testutil.Buffer
	if r := carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("sk-ant-doctor-test")}, h, "auth", "set", "--llm", "anthropic"); r.code != 0 {
		t.Fatalf("auth set: %+v", r)
	}
	if checks, _ = doctorChecks(t, run); checks["model key"].Status != "ok" {
		t.Fatalf("model key after its fix: %+v", checks["model key"])
	}

	// config.toml broken.
	good, _ := os.ReadFile(h.Config())
	if err := os.WriteFile(h.Config(), []byte("[runtime]\nengin = \"docker\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checks, _ = doctorChecks(t, run)
	if c := checks["config"]; c.Status != "fail" || !strings.Contains(c.Message, "line 2: unknown key runtime.engin") || c.Fix != "carapace config edit" {
		t.Fatalf("config broken: %+v", c)
	}
	if err := os.WriteFile(h.Config(), good, 0o600); err != nil {
		t.Fatal(err)
	}

	// The engine and the image, against the real Docker.
	testutil.RequireDocker(t, "doctor's engine and image checks run against the real engine")
	checks, code = doctorChecks(t, run)
	if c := checks["engine"]; c.Status != "ok" || !strings.HasPrefix(c.Message, "docker ") {
		t.Errorf("engine: %+v", c)
	}
	if c := checks["image"]; c.Status != "fail" || !strings.Contains(c.Message, "carapace-agent-doctor-test:none is missing") {
		t.Errorf("image: %+v", c)
	}
	if code != 1 {
		t.Errorf("doctor exited %d with the image missing", code)
	}
}

// --online asks the model API, once, whether it takes the stored key; a
// refused key fails with the command that replaces it, and without
// --online nothing is sent.
func TestDoctorOnline(t *testing.T) {
	const good = "sk-ant-api03-doctor-good"
	var requests atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path == "/v1/models" && r.Header.Get("X-Api-Key") == good {
			w.Write([]byte(`{"data":[]}`))
			return
		}
		http.Error(w, `{"type":"error"}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	h := controltest.TempHome(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.Config(), []byte(fmt.Sprintf("[llm]\nupstream = %q\nca_file = %q\n[runtime]\nengine = \"none\"\n", srv.URL, ca)), 0o600); err != nil {
		t.Fatal(err)
	}
	setKey := func(key string) {
		var out, errb testutil.Buffer
		if r := carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(key)}, h, "auth", "set", "--llm", "anthropic"); r.code != 0 {
			t.Fatalf("auth set: %+v", r)
		}
	}
	run := func(args ...string) result { return carapace(t, h, args...) }
	online := func(args ...string) result { return carapace(t, h, append(args, "--online")...) }

	setKey("sk-ant-api03-revoked")
	checks, _ := doctorChecks(t, run)
	if c := checks["model key"]; c.Status != "ok" || requests.Load() != 0 {
		t.Fatalf("offline: %+v, %d requests", c, requests.Load())
	}
	checks, code := doctorChecks(t, online)
	c := checks["model key"]
	if code != 1 || c.Status != "fail" || !strings.Contains(c.Message, "refused the credential") || !strings.HasPrefix(c.Fix, "carapace auth set --llm anthropic") {
		t.Fatalf("a refused key: %d %+v", code, c)
	}
	if requests.Load() != 1 {
		t.Fatalf("%d requests for one doctor --online", requests.Load())
	}
	setKey(good)
	checks, _ = doctorChecks(t, online)
	if c := checks["model key"]; c.Status != "ok" || !strings.Contains(c.Message, "accepted by 127.0.0.1") {
		t.Fatalf("a good key: %+v", c)
	}
	if strings.Contains(run("doctor", "--online").stdout, good) {
		t.Fatal("doctor printed the key")
	}
}

// A user plugin whose handler changed after install fails the pins
// check; the fix doctor names re-pins it.
func TestDoctorPins(t *testing.T) {
	h := controltest.TempHome(t)
	run := func(args ...string) result { return carapace(t, h, args...) }
	checks, _ := doctorChecks(t, run)
	if c := checks["plugin pins"]; c.Status != "ok" || c.Message != "no user plugins" {
		t.Fatalf("no plugins: %+v", c)
	}
	src := writePlugin(t, t.TempDir(), "weather")
	run("plugin", "install", src).want(t, 0, nil, nil)
	if checks, _ = doctorChecks(t, run); checks["plugin pins"].Status != "ok" {
		t.Fatalf("installed: %+v", checks["plugin pins"])
	}
	if err := os.WriteFile(filepath.Join(h.PluginsDir(), "weather", "handler"), []byte("#!/bin/sh\necho changed\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	checks, code := doctorChecks(t, run)
	c := checks["plugin pins"]
	if code != 1 || c.Status != "fail" || !strings.Contains(c.Message, "weather") || c.Fix != "carapace plugin install --replace "+src {
		t.Fatalf("tampered: %d %+v", code, c)
	}
	run(strings.Fields(c.Fix)[1:]...).want(t, 0, nil, nil)
	if checks, _ = doctorChecks(t, run); checks["plugin pins"].Status != "ok" {
		t.Fatalf("after the fix: %+v", checks["plugin pins"])
	}
	// No skills any more: the agent is not taught its tool, but the core
	// starts it, so doctor does not say it will not (core/plugindir's
	// judgment, the core's).
	if err := os.RemoveAll(filepath.Join(h.PluginsDir(), "weather", "skills")); err != nil {
		t.Fatal(err)
	}
	if checks, _ = doctorChecks(t, run); checks["plugin pins"].Status != "ok" {
		t.Fatalf("without skills: %+v", checks["plugin pins"])
	}
}

// Telegram: not set up is fine; a token without a running core is a
// warning; with the core, the plugin's health and the pairing decide.
func TestDoctorTelegram(t *testing.T) {
	fc := newFakeCore(t)
	h := fc.home
	run := func(args ...string) result { return carapace(t, h, args...) }
	checks, _ := doctorChecks(t, run)
	if c := checks["telegram"]; c.Status != "ok" || !strings.Contains(c.Message, "not set up") {
		t.Fatalf("no token: %+v", c)
	}
	if err := keychain.Default(h.CredentialsDir()).Set("telegram", "bot_token", []byte("1:x")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		plugin        api.PluginStatus
		owner         string // a paired owner, "" for none
		pending       bool
		status, words string
		fix           string
	}{
		{api.PluginStatus{Name: "telegram", State: "failed", Problem: "telegram: the Bot API refused the bot token"}, "4242", false, "fail", "refused the bot token", "carapace plugin restart telegram"},
		{api.PluginStatus{Name: "telegram", State: "healthy", Healthy: true}, "", true, "warn", "waiting for the pairing code", "carapace telegram pair"},
		{api.PluginStatus{Name: "telegram", State: "healthy", Healthy: true}, "4242", false, "ok", "reachable; owned by Telegram user 4242 (paired)", ""},
		// A code written while someone owns the bot waits for nothing: doctor says who owns it.
		{api.PluginStatus{Name: "telegram", State: "healthy", Healthy: true}, "4242", true, "ok", "owned by Telegram user 4242", ""},
		{api.PluginStatus{Name: "telegram", State: "failed", Category: "CONFIG_ERROR", Problem: "telegram: no owner"}, "", false, "fail", "nobody owns the bot", "carapace telegram pair"},
		{api.PluginStatus{Name: "telegram", State: "degraded", Problem: "no message from Telegram can arrive"}, "4242", false, "fail", "degraded: no message from Telegram can arrive", "carapace plugin restart telegram"},
		{api.PluginStatus{Name: "telegram", State: api.PluginRestarting, Problem: "handler process died", Restarts: 1, NextTry: time.Now().Add(time.Hour)}, "4242", false,
			"warn", "restarting after a crash: handler process died [next try in ", "none needed"},
		{api.PluginStatus{Name: "telegram", State: api.PluginDown, Problem: "died, hung or failed to start again 5 times within 10m0s"}, "4242", false,
			"fail", "down: died, hung or failed to start again 5 times", "carapace plugin restart telegram"},
	} {
		fc.b.SetStatus(api.Status{Version: "test", Plugins: []api.PluginStatus{tc.plugin}})
		os.RemoveAll(h.DataDir("telegram"))
		if tc.owner != "" {
			pairedOwner(t, h, tc.owner)
		}
		if tc.pending {
			if _, err := pairing.New(h.DataDir("telegram"), time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		checks, _ := doctorChecks(t, run)
		if c := checks["telegram"]; c.Status != tc.status || !strings.Contains(c.Message, tc.words) || !strings.Contains(c.Fix, tc.fix) {
			t.Errorf("%+v, owner %q, pending %v: %+v", tc.plugin, tc.owner, tc.pending, c)
		}
	}
	// owner_id in config.toml owns the bot too.
	os.RemoveAll(h.DataDir("telegram"))
	if err := os.WriteFile(h.Config(), []byte("[plugins.telegram.config]\nowner_id = 777\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fc.b.SetStatus(api.Status{Version: "test", Plugins: []api.PluginStatus{{Name: "telegram", State: "healthy", Healthy: true}}})
	checks, _ = doctorChecks(t, run)
	if c := checks["telegram"]; c.Status != "ok" || !strings.Contains(c.Message, "owned by Telegram user 777 (owner_id in config.toml)") {
		t.Errorf("owner_id in config.toml: %+v", c)
	}
}

// What the menu-bar app reports of itself: nothing while it does not run;
// notifications denied and no login item are warnings with their fixes.
func TestDoctorApp(t *testing.T) {
	h := controltest.TempHome(t)
	run := func(args ...string) result { return carapace(t, h, args...) }
	checks, _ := doctorChecks(t, run)
	if c := checks["app"]; c.Status != "ok" || !strings.Contains(c.Message, "not running") || checks["notifications"].Status != "" {
		t.Fatalf("no app: %+v", checks)
	}
	write := func(s appstate.State) {
		s.PID = os.Getpid() // a live process
		if err := appstate.Write(h, s); err != nil {
			t.Fatal(err)
		}
	}
	write(appstate.State{Notifications: appstate.Notifications{Why: "denied in System Settings"}, LoginItem: appstate.LoginItem{Supported: true}})
	checks, code := doctorChecks(t, run)
	if c := checks["notifications"]; c.Status != "warn" || !strings.Contains(c.Message, "denied in System Settings") || c.Fix == "" {
		t.Errorf("notifications denied: %+v", c)
	}
	if c := checks["login item"]; c.Status != "warn" || !strings.Contains(c.Fix, "Start at Login") {
		t.Errorf("no login item: %+v", c)
	}
	if code != 0 && checks["model key"].Status != "fail" {
		t.Errorf("warnings alone failed doctor: %d", code)
	}
	write(appstate.State{Notifications: appstate.Notifications{OK: true}, LoginItem: appstate.LoginItem{Supported: true, Enabled: true}})
	checks, _ = doctorChecks(t, run)
	if checks["notifications"].Status != "ok" || checks["login item"].Status != "ok" {
		t.Errorf("all allowed: %+v %+v", checks["notifications"], checks["login item"])
	}
}

// The command line is handed its container engines by its main
// (cmd/wiring.Engines); built without them, doctor says so rather than
// failing somewhere else.
func TestDoctorWithoutEngines(t *testing.T) {
	fc := newFakeCore(t)
	if err := os.WriteFile(fc.home.Config(), []byte("[runtime]\nengine = \"docker\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb testutil.Buffer
	root := cli.New(cli.Config{Version: "9.9.9", Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("")})
	root.SetArgs([]string{"--home", string(fc.home), "doctor", "--json"})
	cli.Execute(t.Context(), root)
	var checks []cli.Check
	if err := json.Unmarshal([]byte(out.String()), &checks); err != nil {
		t.Fatalf("doctor --json: %v\n%s\n%s", err, out.String(), errb.String())
	}
	for _, c := range checks {
		if c.Name == "engine" {
			if c.Status != "fail" || !strings.Contains(c.Message, "built without container engines, docker among them") {
				t.Errorf("engine check without engines: %+v", c)
			}
			return
		}
	}
	t.Errorf("doctor has no engine check: %+v", checks)
}

// TestDoctorPlugins: a plugin the core starts again after a crash is a
// warning that needs nothing done; one that is down or failed is a
// failure with the restart that brings it back.
func TestDoctorPlugins(t *testing.T) {
	fc := newFakeCore(t)
	run := func(args ...string) result { return carapace(t, fc.home, args...) }
	healthy := api.PluginStatus{Name: "echo", Healthy: true, State: "healthy"}
	restarting := api.PluginStatus{Name: "mail", State: api.PluginRestarting}
	down := api.PluginStatus{Name: "notes", State: api.PluginDown}
	failed := api.PluginStatus{Name: "weather", State: "failed"}
	for _, tc := range []struct {
		name          string
		plugins       []api.PluginStatus
		status, words string
		fix           string
	}{
		{"all healthy", []api.PluginStatus{healthy}, "ok", "1 healthy", ""},
		{"restarting", []api.PluginStatus{healthy, restarting}, "warn", "restarting after a crash: mail", "none needed"},
		{"down", []api.PluginStatus{healthy, down}, "fail", "not serving: notes (down after repeated crashes)", "carapace plugin restart notes"},
		{"down, failed and restarting", []api.PluginStatus{down, failed, restarting}, "fail", "notes (down after repeated crashes), weather (failed); restarting after a crash: mail",
			"carapace plugin restart notes && carapace plugin restart weather"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc.b.SetStatus(api.Status{Version: "test", Plugins: tc.plugins})
			checks, _ := doctorChecks(t, run)
			c := checks["plugins"]
			if c.Status != tc.status || !strings.Contains(c.Message, tc.words) || !strings.Contains(c.Fix, tc.fix) || (tc.fix == "" && c.Fix != "") {
				t.Errorf("%+v", c)
			}
		})
	}
}

// Mail: not set up is fine; an account without its password fails with
// the command that stores it; stored, it passes; online, a server that
// cannot be reached fails, naming the account (the logins' positive
// control is plugins/mail's TestDoctorHelpers).
func TestDoctorMail(t *testing.T) {
	h := controltest.TempHome(t)
	run := func(args ...string) result { return carapace(t, h, args...) }
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	checks, _ := doctorChecks(t, run)
	if c := checks["mail"]; c.Status != "ok" || !strings.Contains(c.Message, "not set up") {
		t.Fatalf("no mail: %+v", c)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf("[plugins.mail]\n[[plugins.mail.config.accounts]]\nname = \"work\"\nimap = %q\nimap_security = \"plain\"\nsmtp = %q\nsmtp_security = \"plain\"\nusername = \"me@example.com\"\nfrom = \"me@example.com\"\n", closed, closed)
	if err := os.WriteFile(h.Config(), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	checks, _ = doctorChecks(t, run)
	if c := checks["mail"]; c.Status != "fail" || !strings.Contains(c.Message, "account work has no password") || c.Fix != "carapace auth set --plugin mail --key work" {
		t.Fatalf("no password: %+v", c)
	}
	if err := keychain.Default(h.CredentialsDir()).Set("mail", "work", []byte("app-pass")); err != nil {
		t.Fatal(err)
	}
	checks, _ = doctorChecks(t, run)
	if c := checks["mail"]; c.Status != "ok" || !strings.Contains(c.Message, "1 account(s), passwords stored: work") {
		t.Fatalf("password stored: %+v", c)
	}
	// Online, the logins are the running plugin's check (plugin mail, its
	// positive control in plugins/mail's TestDoctorHelpers and
	// core/server's mail e2e): this process reaches no mail server.
	r := run("doctor", "--json", "--online")
	var list []cli.Check
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("doctor --online: %v\n%+v", err, r)
	}
	for _, c := range list {
		if c.Name == "mail" && (c.Status != "ok" || !strings.Contains(c.Message, "plugin mail") || strings.Contains(c.Message, "app-pass")) {
			t.Fatalf("online: %+v", c)
		}
	}
	// A config the plugin refuses is named.
	if err := os.WriteFile(h.Config(), []byte("[plugins.mail]\n[[plugins.mail.config.accounts]]\nname = \"work\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checks, _ = doctorChecks(t, run)
	if c := checks["mail"]; c.Status != "fail" || !strings.Contains(c.Message, "missing imap") {
		t.Fatalf("a bad config: %+v", c)
	}
}

// TestDoctorPluginChecks: with --online, each serving plugin's own check
// is a check of its own, with the plugin's words and fix; a plugin
// without a check adds none; without --online no plugin is asked.
func TestDoctorPluginChecks(t *testing.T) {
	fc := newFakeCore(t)
	run := func(args ...string) result { return carapace(t, fc.home, args...) }
	online := func(args ...string) result { return carapace(t, fc.home, append(args, "--online")...) }
	fc.b.SetStatus(api.Status{Version: "test", Plugins: []api.PluginStatus{
		{Name: "calendar", Healthy: true, State: "healthy"},
		{Name: "echo", Healthy: true, State: "healthy"},
		{Name: "notes", State: api.PluginDown},
	}})
	refused := api.PluginCheck{Name: "calendar", Checked: true, Message: "the CalDAV server refused the username and password",
		Fix: "carapace auth set --plugin calendar --key caldav_password"}
	fc.b.SetCheck(refused)

	checks, _ := doctorChecks(t, run)
	if _, ok := checks["plugin calendar"]; ok || len(fc.b.Verified()) != 0 {
		t.Fatalf("offline, the plugins were asked: %v, %+v", fc.b.Verified(), checks["plugin calendar"])
	}
	checks, code := doctorChecks(t, online)
	c := checks["plugin calendar"]
	if code != 1 || c.Status != "fail" || c.Message != refused.Message || c.Fix != refused.Fix {
		t.Fatalf("a refused password: exit %d, %+v", code, c)
	}
	if _, ok := checks["plugin echo"]; ok {
		t.Errorf("a plugin without a check has one: %+v", checks["plugin echo"])
	}
	if v := fc.b.Verified(); slices.Contains(v, "notes") || !slices.Contains(v, "echo") {
		t.Errorf("asked %v: every serving plugin, not the one that is down", v)
	}
	fc.b.SetCheck(api.PluginCheck{Name: "calendar", Checked: true, OK: true, Message: "logged in; 2 calendars: work (VEVENT); tasks (VTODO)"})
	checks, _ = doctorChecks(t, online)
	if c := checks["plugin calendar"]; c.Status != "ok" || !strings.Contains(c.Message, "2 calendars") || c.Fix != "" {
		t.Fatalf("a good password: %+v", c)
	}
	out := online("doctor").stdout
	if !strings.Contains(out, "plugin calendar") || !strings.Contains(out, "logged in; 2 calendars") {
		t.Fatalf("doctor --online's text lacks the plugin's check:\n%s", out)
	}
}

// TestDoctorCalendarAccess: doctor reports the app's calendar access as
// the app writes it; when the calendar plugin uses EventKit, access short
// of full is a failure with the step that grants it, and an app that is
// not running a warning that says only it can tell.
func TestDoctorCalendarAccess(t *testing.T) {
	h := controltest.TempHome(t)
	run := func(args ...string) result { return carapace(t, h, args...) }
	setBackend := func(backend string) {
		cfg := "[runtime]\nengine = \"none\"\n"
		if backend != "" {
			cfg += "[plugins.calendar.config]\nbackend = \"" + backend + "\"\n"
		}
		if err := os.WriteFile(h.Config(), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write := func(c *appstate.Calendar) {
		if err := appstate.Write(h, appstate.State{PID: os.Getpid(), Notifications: appstate.Notifications{OK: true}, LoginItem: appstate.LoginItem{Supported: true, Enabled: true}, Calendar: c}); err != nil {
			t.Fatal(err)
		}
	}
	notAsked := &appstate.Calendar{Events: appstate.CalendarFull, Reminders: appstate.CalendarNotDetermined}
	for _, tc := range []struct {
		name     string
		backend  string
		app      bool
		calendar *appstate.Calendar
		status   string // "" for no check
		words    string
		fix      string
	}{
		{name: "no app, caldav", backend: "caldav"},
		{name: "no app, eventkit", backend: "eventkit", status: "warn", words: "only the menu-bar app can tell", fix: "Allow calendar and reminders access…"},
		{name: "linux app, no calendar plugin", app: true},
		{name: "linux app, eventkit", backend: "eventkit", app: true, status: "fail", words: "macOS only", fix: `backend = "caldav"`},
		{name: "mac, not asked, caldav", backend: "caldav", app: true, calendar: notAsked, status: "ok", words: "not needed"},
		{name: "mac, not asked, eventkit", backend: "eventkit", app: true, calendar: notAsked, status: "fail", words: "events full, reminders not-determined", fix: "Carapace menu › Allow calendar and reminders access…"},
		{name: "mac, denied, eventkit", backend: "eventkit", app: true, calendar: &appstate.Calendar{Events: appstate.CalendarDenied, Reminders: appstate.CalendarFull},
			status: "fail", words: "events denied", fix: "System Settings › Privacy & Security"},
		{name: "mac, granted, eventkit", backend: "eventkit", app: true, calendar: &appstate.Calendar{Events: appstate.CalendarFull, Reminders: appstate.CalendarFull, Granted: true},
			status: "ok", words: "full access"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setBackend(tc.backend)
			os.Remove(appstate.Path(h))
			if tc.app {
				write(tc.calendar)
			}
			checks, _ := doctorChecks(t, run)
			c, ok := checks["calendar access"]
			if tc.status == "" {
				if ok {
					t.Fatalf("a calendar access check: %+v", c)
				}
				return
			}
			if c.Status != tc.status || !strings.Contains(c.Message, tc.words) || !strings.Contains(c.Fix, tc.fix) || (tc.fix == "" && c.Fix != "") {
				t.Fatalf("%+v", c)
			}
		})
	}
}
