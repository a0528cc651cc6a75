package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/keychain"
)

// kitActions are the tools of the oopkit test plugin, as <prefix>_<action>.
var kitActions = []struct{ action, risk, schema string }{
	{"echo", "low", `{"type":"object","additionalProperties":false,"properties":{"message":{"type":"string","maxLength":1000}}}`},
	{"crash", "low", `{"type":"object","additionalProperties":false,"properties":{}}`},
	{"hang", "low", `{"type":"object","additionalProperties":false,"properties":{}}`},
	{"cred", "low", `{"type":"object","additionalProperties":false,"required":["key"],"properties":{"key":{"type":"string","maxLength":128}}}`},
	{"env", "low", `{"type":"object","additionalProperties":false,"properties":{}}`},
	{"flood", "low", `{"type":"object","additionalProperties":false,"properties":{}}`},
	{"scope", "low", `{"type":"object","additionalProperties":false,"properties":{}}`},
	{"spawn", "low", `{"type":"object","additionalProperties":false,"properties":{}}`},
	{"probe", "low", `{"type":"object","additionalProperties":false,"required":["kind","target"],"properties":{"kind":{"type":"string","maxLength":32},"target":{"type":"string","maxLength":1000}}}`},
	{"publish", "low", `{"type":"object","additionalProperties":false,"required":["topic"],"properties":{"topic":{"type":"string","maxLength":64},` +
		`"group":{"type":"string","maxLength":64},"text":{"type":"string","maxLength":4000},"conversation":{"type":"string","maxLength":200},"untrusted":{"type":"boolean"}}}`},
	{"fetch", "low", `{"type":"object","additionalProperties":false,"required":["url"],"properties":{"url":{"type":"string","maxLength":2000}}}`},
	{"send", "low", `{"type":"object","additionalProperties":false,"required":["text"],"properties":{"text":{"type":"string","maxLength":2000}}}`},
	{"draft", "low", `{"type":"object","additionalProperties":false,"required":["id","text"],"properties":{"id":{"type":"string","maxLength":64},"text":{"type":"string","maxLength":100000}}}`},
	{"post", "low", `{"type":"object","additionalProperties":false,"required":["id"],"properties":{"id":{"type":"string","maxLength":64}}}`},
}

// kitFlags are the provenance, taint and preview fields of the oopkit
// actions that have them: fetch stands for web_fetch, send for
// send_telegram, post for mail_send (low risk here: its preview alone
// puts it to the user).
var kitFlags = map[string]string{
	"fetch": `,"url_arguments":["url"],"untrusted_output":true,"egress":true`,
	"send":  `,"egress":true`,
	"post":  `,"egress":true,"preview":true`,
}

// kitManifest is the manifest of an oopkit plugin called name, subscribed
// to the topics given.
func kitManifest(name string, subscribes ...string) string {
	prefix := strings.ReplaceAll(name, "-", "_")
	var tools []string
	for _, a := range kitActions {
		tools = append(tools, fmt.Sprintf(`{"name":%q,"description":"oopkit %s","risk_level":%q,"arguments_schema":%s%s}`,
			prefix+"_"+a.action, a.action, a.risk, a.schema, kitFlags[a.action]))
	}
	return fmt.Sprintf(`{
  "description": "out-of-process test plugin", "version": "1.2.3", "app_compat": ">=0.1.0", "author": {"name": "tests"},
  "provides": {"channels": [], "tools": [%s]},
  "subscribes": %s,
  "config_schema": {"type": "object", "additionalProperties": false, "properties": {
    "fail_init": {"type": "string", "enum": ["auth", "network", "plain", "hang", "exit"]}}}
}`, strings.Join(tools, ","), jsonList(subscribes))
}

// jsonList is a JSON array of strings, [] for none.
func jsonList(ss []string) string {
	if ss == nil {
		ss = []string{}
	}
	b, _ := json.Marshal(ss)
	return string(b)
}

// rawSource writes a plugin folder for pluginhost's rawpeer, a handler
// without the SDK whose behaviour its name selects (see its doc), with one
// tool <prefix>_raw that answers its "raw" argument verbatim.
func rawSource(t *testing.T, name string) string {
	t.Helper()
	prefix := strings.ReplaceAll(name, "-", "_")
	m := fmt.Sprintf(`{"description":"raw protocol peer","version":"1.0.0","app_compat":">=0.1.0","author":{"name":"tests"},
"provides":{"channels":[],"tools":[{"name":"%s_raw","description":"answer raw","risk_level":"low",
"arguments_schema":{"type":"object","additionalProperties":false,"properties":{"raw":{"type":"string","maxLength":100000}}}}]},
"subscribes":[]}`, prefix)
	src := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(filepath.Join(src, "skills"), 0o700); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(bins.rawpeer)
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{
		"manifest.json":          []byte(m),
		"skills/" + name + ".md": []byte("# " + name + "\n\n## " + prefix + "_raw\n"),
		"handler":                bin,
	} {
		if err := os.WriteFile(filepath.Join(src, path), data, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// kitSource writes an oopkit plugin folder (manifest, skills, handler)
// called name under a temporary directory and returns it.
func kitSource(t *testing.T, name, manifestJSON string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(filepath.Join(src, "skills"), 0o700); err != nil {
		t.Fatal(err)
	}
	prefix := strings.ReplaceAll(name, "-", "_")
	var skill strings.Builder
	fmt.Fprintf(&skill, "# %s\n\nTest tools.\n\n", name)
	for _, a := range kitActions {
		fmt.Fprintf(&skill, "## %s_%s\n\n    ipc tool.invoke.%s_%s '{}'\n\n", prefix, a.action, prefix, a.action)
	}
	bin, err := os.ReadFile(bins.oopkit)
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{
		"manifest.json":          []byte(manifestJSON),
		"skills/" + name + ".md": []byte(skill.String()),
		"handler":                bin,
	} {
		if err := os.WriteFile(filepath.Join(src, path), data, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// installKit installs an oopkit plugin called name into h the way `carapace
// plugin install` does.
func installKit(t *testing.T, h home.Dir, name string) {
	t.Helper()
	if _, err := install.Install(h, kitSource(t, name, kitManifest(name)), install.Options{}); err != nil {
		t.Fatalf("install %s: %v", name, err)
	}
}

// pluginStatus returns the core's view of plugin name.
func pluginStatus(t testing.TB, c *testCore, name string) api.PluginStatus {
	t.Helper()
	st, err := c.Client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Plugins {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("plugin %s not in status %+v", name, st.Plugins)
	return api.PluginStatus{}
}

func TestOutOfProcessPluginServesTheAgent(t *testing.T) {
	c := startCoreWith(t, coreOptions{Setup: func(h home.Dir) { installKit(t, h, "alpha") }})
	s := c.Session(t, "main")

	r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_echo", `{"message":"hi there"}`)
	if r.Code != 0 {
		t.Fatalf("alpha_echo: exit %d: %s", r.Code, r.Stderr)
	}
	if r.Result["message"] != "hi there" || r.Result["plugin"] != "alpha" || r.Result["group"] != "main" {
		t.Fatalf("result %v", r.Result)
	}
	st := pluginStatus(t, c, "alpha")
	if st.State != "healthy" || st.Source != "user" || st.PID == 0 || st.Version != "1.2.3" || !slices.Contains(st.Tools, "alpha_echo") {
		t.Fatalf("status %+v", st)
	}
	if pid := r.Result["pid"].(float64); int(pid) != st.PID || int(pid) == os.Getpid() {
		t.Fatalf("handler pid %v, status pid %d, core pid %d: the handler must run in its own process", pid, st.PID, os.Getpid())
	}

	// The session's skill tree teaches the agent this plugin's tools.
	skill, err := os.ReadFile(filepath.Join(s.Skills, "alpha", "SKILL.md"))
	if err != nil {
		t.Fatalf("session skills: %v", err)
	}
	if !strings.Contains(string(skill), "alpha_echo") || !strings.HasPrefix(string(skill), "---\n") {
		t.Fatalf("alpha/SKILL.md does not teach alpha_echo:\n%s", skill)
	}
	if fi, err := os.Stat(filepath.Join(s.Skills, "alpha", "SKILL.md")); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Fatalf("skill file must be read-only: %v %v", fi.Mode(), err)
	}

	// Minimal environment, own folder, private data directory.
	r = runIPC(t, s.Socket, nil, "tool.invoke.alpha_env", `{}`)
	if r.Code != 0 {
		t.Fatalf("alpha_env: %s", r.Stderr)
	}
	var env []string
	for _, v := range r.Result["env"].([]any) {
		env = append(env, v.(string))
	}
	for _, name := range env {
		if !slices.Contains([]string{"PATH", "HOME", "TMPDIR", "LANG", "GOMAXPROCS", "CARAPACE_PLUGIN_ENDPOINT", "CARAPACE_PLUGIN_TOKEN", "CARAPACE_PLUGIN_NAME", "CARAPACE_PLUGIN_DATA", "CARAPACE_PLUGIN_CONN_FD", "CARAPACE_PLUGIN_EGRESS_FD"}, name) {
			t.Errorf("handler environment has %s: the core must pass a minimal environment", name)
		}
	}
	if r.Result["home"] != c.Home.DataDir("alpha") {
		t.Errorf("HOME %v, want %s", r.Result["home"], c.Home.DataDir("alpha"))
	}
	if wd, _ := filepath.EvalSymlinks(r.Result["cwd"].(string)); !strings.HasSuffix(wd, filepath.Join("plugins", "alpha")) {
		t.Errorf("working directory %v, want the plugin folder", r.Result["cwd"])
	}
	if fi, err := os.Stat(c.Home.DataDir("alpha")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir: %v %v", fi, err)
	}
}

// TestCrashedPluginComesBack: a handler that crashes is started again by
// the core, with no `carapace plugin restart`, and serves the agent again
// through bin/ipc; the crash and the restart are audited.
func TestCrashedPluginComesBack(t *testing.T) {
	c := startCoreWith(t, coreOptions{Revival: loader.Revival{Backoff: 10 * time.Millisecond}, Setup: func(h home.Dir) { installKit(t, h, "alpha") }})
	s := c.Session(t, "main")
	before := pluginStatus(t, c, "alpha").PID

	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.alpha_crash", `{}`), ipc.CodePluginError, 0, "")
	var after api.PluginStatus
	waitFor(t, "alpha to come back", func() bool {
		after = pluginStatus(t, c, "alpha")
		return after.State == "healthy" && after.Restarts == 1 && after.PID != 0
	})
	if after.PID == before {
		t.Errorf("after the revival: %+v, the same process as before", after)
	}
	if r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_echo", `{"message":"back"}`); r.Code != 0 || r.Result["message"] != "back" || int(r.Result["pid"].(float64)) != after.PID {
		t.Fatalf("after the revival: %+v", r)
	}
	var crashes, revived int
	for _, e := range c.Audit(t) {
		switch {
		case e.Source == "alpha" && e.Outcome == "crashed":
			crashes++
		case e.Source == "alpha" && strings.Contains(e.Reason, "started again by the core"):
			revived++
		}
	}
	if crashes != 1 || revived != 1 {
		t.Fatalf("audit: %d crashes, %d restarts by the core; want 1 and 1", crashes, revived)
	}
}

// TestDownPluginIsUnavailableUntilRestarted: a plugin that crashed as
// often as the core allows (here once) stays down, its calls get
// PLUGIN_UNAVAILABLE, plugin list says how to bring it back, and
// `carapace plugin restart` does.
func TestDownPluginIsUnavailableUntilRestarted(t *testing.T) {
	c := startCoreWith(t, coreOptions{Revival: loader.Revival{MaxCrashes: 1}, Setup: func(h home.Dir) { installKit(t, h, "alpha") }})
	s := c.Session(t, "main")
	before := pluginStatus(t, c, "alpha").PID

	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.alpha_crash", `{}`), ipc.CodePluginError, 0, "")
	waitFor(t, "the crash to be noticed", func() bool { return pluginStatus(t, c, "alpha").State == "down" })
	r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_echo", `{"message":"x"}`)
	wantError(t, r, ipc.CodePluginUnavailable, 6, "")
	if out, _, code := runCLI(t, c.Home, "plugin", "list"); code != 0 || !strings.Contains(out, "alpha down: INTERNAL_ERROR: died, hung or failed to start again once within 10m0s") ||
		!strings.Contains(out, "bring it back with `carapace plugin restart alpha`") {
		t.Errorf("plugin list with alpha down: exit %d\n%s", code, out)
	}

	// The agent sees the category, never the detail.
	info := runIPC(t, s.Socket, nil, "tool.invoke.get_session_info", `{}`)
	if !strings.Contains(info.Stdout, `"name":"alpha"`) || !strings.Contains(info.Stdout, "INTERNAL_ERROR") || strings.Contains(info.Stdout, "exit status") {
		t.Fatalf("get_session_info after a crash: %s", info.Stdout)
	}
	// The other plugins never noticed.
	if r := runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"still here"}`); r.Code != 0 {
		t.Fatalf("built-in echo after alpha crashed: %s", r.Stderr)
	}

	if _, stderr, code := runCLI(t, c.Home, "plugin", "restart", "alpha"); code != 0 {
		t.Fatalf("plugin restart: exit %d: %s", code, stderr)
	}
	after := pluginStatus(t, c, "alpha")
	if after.State != "healthy" || after.PID == 0 || after.PID == before {
		t.Fatalf("after restart: %+v (pid before %d)", after, before)
	}
	if r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_echo", `{"message":"back"}`); r.Code != 0 || r.Result["message"] != "back" {
		t.Fatalf("after restart: %+v", r)
	}
	crashes := 0
	for _, e := range c.Audit(t) {
		if e.Source == "alpha" && e.Outcome == "crashed" {
			crashes++
		}
	}
	if crashes != 1 {
		t.Fatalf("%d crash entries in the audit log, want 1", crashes)
	}
}

func TestHungPluginTimesOutAndIsKilledAtShutdown(t *testing.T) {
	c := startCoreWith(t, coreOptions{
		Config: "[core]\nhandler_timeout = \"1s\"\nshutdown_timeout = \"1s\"\n",
		Setup:  func(h home.Dir) { installKit(t, h, "alpha") },
	})
	s := c.Session(t, "main")
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.alpha_hang", `{}`), ipc.CodePluginTimeout, 6, "")
	// Calls run concurrently: the hung one does not block the next.
	if r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_echo", `{"message":"x"}`); r.Code != 0 {
		t.Fatalf("echo after a hang: %s", r.Stderr)
	}
	pid := pluginStatus(t, c, "alpha").PID
	if err := c.Stop(t); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Fatalf("handler %d still alive after the core stopped", pid)
	}
}

func TestChattyPluginDoesNotBlock(t *testing.T) {
	c := startCoreWith(t, coreOptions{Setup: func(h home.Dir) { installKit(t, h, "alpha") }})
	s := c.Session(t, "main")
	if r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_flood", `{}`); r.Code != 0 || r.Result["flooded"] != true {
		t.Fatalf("flood: %+v", r)
	}
	if r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_echo", `{"message":"x"}`); r.Code != 0 {
		t.Fatalf("echo after a flood: %s", r.Stderr)
	}
	if n := strings.Count(c.Log.String(), strings.Repeat("x", 200)); n > 2000 {
		t.Fatalf("the core logged %d of 20000 flooded lines: plugin output must be rate-limited", n)
	}
}

func TestPluginInitFailuresAreContained(t *testing.T) {
	cfg := `
[plugins.alpha.config]
fail_init = "auth"
[plugins.beta.config]
fail_init = "network"
[plugins.gamma.config]
fail_init = "plain"
[plugins.delta.config]
fail_init = "exit"
[plugins.eps.config]
fail_init = "hang"
`
	c := startCoreWith(t, coreOptions{Config: cfg, InitTimeout: 2 * time.Second, Setup: func(h home.Dir) {
		for _, n := range []string{"alpha", "beta", "gamma", "delta", "eps", "zeta"} {
			installKit(t, h, n)
		}
	}})
	want := map[string]string{"alpha": "AUTH_ERROR", "beta": "NETWORK_ERROR", "gamma": "INTERNAL_ERROR", "delta": "INTERNAL_ERROR", "eps": "INTERNAL_ERROR"}
	for name, cat := range want {
		st := pluginStatus(t, c, name)
		if st.State != "failed" || st.Category != cat || st.PID != 0 {
			t.Errorf("%s: %+v, want failed with %s and no process", name, st, cat)
		}
	}
	if st := pluginStatus(t, c, "zeta"); st.State != "healthy" {
		t.Fatalf("zeta: %+v; the others' failures must not cascade", st)
	}
	s := c.Session(t, "main")
	info := runIPC(t, s.Socket, nil, "tool.invoke.get_session_info", `{}`)
	for name, cat := range want {
		if !strings.Contains(info.Stdout, fmt.Sprintf(`{"name":%q,"category":%q}`, name, cat)) {
			t.Errorf("get_session_info lacks %s/%s: %s", name, cat, info.Stdout)
		}
	}
	for _, secret := range []string{"alice", "10.1.2.3", "/home/alice"} {
		if strings.Contains(info.Stdout, secret) {
			t.Errorf("get_session_info leaks %q: %s", secret, info.Stdout)
		}
	}
	// Failed plugins' tools are unknown and their skills absent.
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.alpha_echo", `{}`), ipc.CodeUnknownTool, 2, "")
	if _, err := os.Stat(filepath.Join(s.Skills, "alpha")); !os.IsNotExist(err) {
		t.Errorf("failed plugin's skills were assembled: %v", err)
	}
	if r := runIPC(t, s.Socket, nil, "tool.invoke.zeta_echo", `{"message":"ok"}`); r.Code != 0 {
		t.Fatalf("zeta_echo: %s", r.Stderr)
	}
	// The audit log has the detail the agent never sees.
	var sawDetail bool
	for _, e := range c.Audit(t) {
		if e.Source == "alpha" && e.Code == "AUTH_ERROR" && strings.Contains(e.Reason, "token rejected") {
			sawDetail = true
		}
	}
	if !sawDetail {
		t.Error("the audit log lacks alpha's init failure detail")
	}
	if err := c.Stop(t); err != nil {
		t.Fatal(err)
	}
	// Shutdown is called on the healthy plugin only.
	for _, n := range []string{"alpha", "beta", "gamma", "delta", "eps"} {
		if _, err := os.Stat(filepath.Join(c.Home.DataDir(n), "shutdown-calls")); !os.IsNotExist(err) {
			t.Errorf("shutdown was called on %s, which never initialised", n)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Home.DataDir("zeta"), "shutdown-calls")); err != nil {
		t.Errorf("shutdown was not called on zeta: %v", err)
	}
}

func TestEveryPluginFailingStillBootsTheCore(t *testing.T) {
	cfg := "[plugins.alpha.config]\nfail_init = \"plain\"\n"
	c := startCoreWith(t, coreOptions{Config: cfg, NoTestkit: true, Setup: func(h home.Dir) {
		installKit(t, h, "alpha")
		// A user plugin replacing the built-in echo, broken on purpose.
		if err := os.MkdirAll(filepath.Join(h.PluginsDir(), "echo"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h.PluginsDir(), "echo", "manifest.json"), []byte(`{"description":`), 0o600); err != nil {
			t.Fatal(err)
		}
	}})
	s := c.Session(t, "main")
	r := runIPC(t, s.Socket, nil, "tool.invoke.list_tools", `{}`)
	if r.Code != 0 || strings.Contains(r.Stdout, `"echo"`) || !strings.Contains(r.Stdout, "get_diagnostics") {
		t.Fatalf("list_tools with every plugin failed: %+v", r)
	}
	if st := pluginStatus(t, c, "echo"); st.State != "failed" || st.Category != "CONFIG_ERROR" || st.Source != "user" || !strings.Contains(st.Problem, "manifest.json") {
		t.Fatalf("broken user echo: %+v", st)
	}
}

func TestCredentialsReachOnlyTheirOwnPlugin(t *testing.T) {
	const secret = "canary-7f3e9a1c5b2d4e6f8a0b1c2d3e4f5a6b"
	c := startCoreWith(t, coreOptions{Setup: func(h home.Dir) {
		installKit(t, h, "alpha")
		installKit(t, h, "beta")
		if err := keychain.NewFileStore(h.CredentialsDir()).Set("alpha", "token", []byte(secret)); err != nil {
			t.Fatal(err)
		}
	}})
	s := c.Session(t, "main")
	sum := sha256.Sum256([]byte(secret))

	var replies []string
	r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_cred", `{"key":"token"}`)
	replies = append(replies, r.Stdout+r.Stderr)
	if r.Code != 0 || r.Result["found"] != true || r.Result["sha256"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("alpha reading its own credential: %+v", r)
	}
	r = runIPC(t, s.Socket, nil, "tool.invoke.beta_cred", `{"key":"token"}`)
	replies = append(replies, r.Stdout+r.Stderr)
	if r.Code != 0 || r.Result["found"] != false {
		t.Fatalf("beta read alpha's credential: %+v", r)
	}
	for _, key := range []string{"../alpha/token", "..", "a/b"} {
		r := runIPC(t, s.Socket, nil, "tool.invoke.beta_cred", fmt.Sprintf(`{"key":%q}`, key))
		replies = append(replies, r.Stdout+r.Stderr)
		if r.Code == 0 && r.Result["found"] == true {
			t.Fatalf("beta read %q: %+v", key, r)
		}
	}
	for _, name := range []string{"alpha", "beta"} {
		r := runIPC(t, s.Socket, nil, "tool.invoke."+name+"_env", `{}`)
		replies = append(replies, r.Stdout+r.Stderr)
		if strings.Contains(r.Result["environ"].(string), secret) {
			t.Fatalf("%s's environment holds the secret", name)
		}
	}
	for i, reply := range replies {
		if strings.Contains(reply, secret) {
			t.Fatalf("reply %d holds the secret: %s", i, reply)
		}
	}
	if err := c.Stop(t); err != nil {
		t.Fatal(err)
	}
	logs, _ := os.ReadFile(c.Home.AuditLog())
	if strings.Contains(string(logs), secret) || strings.Contains(c.Log.String(), secret) {
		t.Fatal("the secret reached the audit log or the core's log")
	}
	if !strings.Contains(string(logs), "credential read: token") {
		t.Fatal("credential reads are not audited")
	}
}

func TestServicesAreScopedToTheRequestGroup(t *testing.T) {
	c := startCoreWith(t, coreOptions{
		Config: "[plugins.testkit]\nallowed_groups = [\"main\"]\n",
		Setup:  func(h home.Dir) { installKit(t, h, "alpha") },
	})
	other := c.Session(t, "other")
	for range 3 {
		runIPC(t, other.Socket, nil, "tool.invoke.echo", `{"message":"b"}`)
	}
	s := c.Session(t, "main")
	runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"a"}`)
	// Another plugin's internal failure in this group: its detail must
	// not reach alpha through the audit log service.
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.tk_fail", `{"mode":"error"}`), ipc.CodePluginError, 0, "")
	r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_scope", `{}`)
	if r.Code != 0 {
		t.Fatalf("alpha_scope: %s", r.Stderr)
	}
	groups := fmt.Sprint(r.Result["audit_groups"])
	if r.Result["group"] != "main" || r.Result["session"] != s.ID || groups != "[main]" || r.Result["unscoped_refused"] != true {
		t.Fatalf("scoped services: %v", r.Result)
	}
	if n := r.Result["entries"].(float64); n < 2 {
		t.Fatalf("only %v audit entries for group main", n)
	}
	if n := r.Result["foreign_details"].(float64); n != 0 {
		t.Fatalf("alpha saw %v handler details of other plugins", n)
	}
	// The catalogue alpha sees in a request of group other lacks the
	// tools that group may not use.
	r = runIPC(t, other.Socket, nil, "tool.invoke.alpha_scope", `{}`)
	if tools := fmt.Sprint(r.Result["tools"]); r.Code != 0 || strings.Contains(tools, "tk_count") || !strings.Contains(tools, "alpha_scope") {
		t.Fatalf("catalogue for group other: %v (%s)", tools, r.Stderr)
	}
}

func TestRestartAppliesFixedConfigAndCredentials(t *testing.T) {
	var src string
	c := startCoreWith(t, coreOptions{
		Config: "[plugins.alpha.config]\nfail_init = \"auth\"\n",
		Setup: func(h home.Dir) {
			installKit(t, h, "alpha")
			m := strings.Replace(kitManifest("beta"), `"subscribes": []`, `"subscribes": [], "install": {"credentials": [{"key": "token", "description": "API token", "required": true}]}`, 1)
			src = kitSource(t, "beta", m)
			if _, err := install.Install(h, src, install.Options{}); err != nil {
				t.Fatal(err)
			}
		},
	})
	if st := pluginStatus(t, c, "alpha"); st.State != "failed" || st.Category != "AUTH_ERROR" {
		t.Fatalf("alpha: %+v", st)
	}
	if st := pluginStatus(t, c, "beta"); st.State != "failed" || st.Category != "AUTH_ERROR" || !strings.Contains(st.Problem, "carapace auth set --plugin beta --key token") {
		t.Fatalf("beta without its required credential: %+v", st)
	}
	// Fix both, then restart each: no core restart needed.
	if err := os.WriteFile(c.Home.Config(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keychain.NewFileStore(c.Home.CredentialsDir()).Set("beta", "token", []byte("t0k3n")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alpha", "beta"} {
		st, err := c.Client.RestartPlugin(context.Background(), name)
		if err != nil || st.State != "healthy" {
			t.Fatalf("restart %s after the fix: %+v %v", name, st, err)
		}
	}
	// A broken config.toml is reported, and the running plugin is left alone.
	if err := os.WriteFile(c.Home.Config(), []byte("[core\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RestartPlugin(context.Background(), "alpha"); err == nil || !strings.Contains(err.Error(), "config") {
		t.Fatalf("restart with a broken config: %v", err)
	}
	if st := pluginStatus(t, c, "alpha"); st.State != "healthy" {
		t.Fatalf("alpha after a refused restart: %+v", st)
	}
}

func TestToolCollisionFailsStartup(t *testing.T) {
	h := newHome(t)
	m := strings.Replace(kitManifest("alpha"), `"name":"alpha_echo"`, `"name":"echo"`, 1)
	if _, err := install.Install(h, kitSource(t, "alpha", m), install.Options{}); err != nil {
		t.Fatal(err)
	}
	_, err := runCore(t, h, coreOptions{})
	if err == nil || !strings.Contains(err.Error(), `"echo"`) || !strings.Contains(err.Error(), `"alpha"`) {
		t.Fatalf("startup with a collision: %v; want an error naming the tool and both plugins", err)
	}
}

func TestUserPluginReplacesBuiltin(t *testing.T) {
	c := startCoreWith(t, coreOptions{Setup: func(h home.Dir) { installKit(t, h, "echo") }})
	s := c.Session(t, "main")
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"x"}`), ipc.CodeUnknownTool, 2, "")
	if r := runIPC(t, s.Socket, nil, "tool.invoke.echo_echo", `{"message":"mine"}`); r.Code != 0 || r.Result["plugin"] != "echo" {
		t.Fatalf("user echo: %+v", r)
	}
	if st := pluginStatus(t, c, "echo"); st.Source != "user" {
		t.Fatalf("status %+v", st)
	}
}

func TestUnusablePluginFoldersFailWithConfigError(t *testing.T) {
	c := startCoreWith(t, coreOptions{Setup: func(h home.Dir) {
		installKit(t, h, "pinned")
		// Tampered after install: the pin no longer matches.
		f, err := os.OpenFile(filepath.Join(h.PluginsDir(), "pinned", "handler"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("tampered")
		f.Close()
		// Dropped in by hand: never pinned.
		src := kitSource(t, "unpinned", kitManifest("unpinned"))
		if err := os.Rename(src, filepath.Join(h.PluginsDir(), "unpinned")); err != nil {
			t.Fatal(err)
		}
		// Not kebab-case.
		if err := os.MkdirAll(filepath.Join(h.PluginsDir(), "Bad_Name"), 0o700); err != nil {
			t.Fatal(err)
		}
		// Installed as a link to a folder deleted since: listed, not
		// skipped (core/plugindir judges it as the command line does).
		src = kitSource(t, "dangling", kitManifest("dangling"))
		if _, err := install.Install(h, src, install.Options{Link: true}); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(src); err != nil {
			t.Fatal(err)
		}
	}})
	for name, wants := range map[string][]string{
		"pinned": {"pin"},
		// The fix named works: install refuses a folder inside plugins/.
		"unpinned": {"carapace plugin install", "carapace plugin remove unpinned"},
		"Bad_Name": {"kebab"},
		"dangling": {"symbolic link", "which does not exist"},
	} {
		st := pluginStatus(t, c, name)
		for _, want := range wants {
			if st.State != "failed" || st.Category != "CONFIG_ERROR" || !strings.Contains(strings.ToLower(st.Problem), strings.ToLower(want)) {
				t.Errorf("%s: %+v; want CONFIG_ERROR mentioning %q", name, st, want)
			}
		}
	}
}

func TestRestartLoadsNewAndUnloadsRemovedPlugins(t *testing.T) {
	c := startCore(t, "")
	s := c.Session(t, "main")
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.alpha_echo", `{}`), ipc.CodeUnknownTool, 2, "")
	installKit(t, c.Home, "alpha")
	st, err := c.Client.RestartPlugin(context.Background(), "alpha")
	if err != nil || st.State != "healthy" {
		t.Fatalf("restart of a newly installed plugin: %+v %v", st, err)
	}
	if r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_echo", `{"message":"new"}`); r.Code != 0 {
		t.Fatalf("after load: %s", r.Stderr)
	}
	pid := st.PID
	if err := install.Remove(c.Home, "alpha"); err != nil {
		t.Fatal(err)
	}
	st, err = c.Client.RestartPlugin(context.Background(), "alpha")
	if err != nil || st.State != "removed" {
		t.Fatalf("restart of a removed plugin: %+v %v", st, err)
	}
	wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.alpha_echo", `{}`), ipc.CodeUnknownTool, 2, "")
	if processAlive(pid) {
		t.Fatalf("the removed plugin's process %d is still alive", pid)
	}
	if _, err := c.Client.RestartPlugin(context.Background(), "nosuch"); err == nil {
		t.Fatal("restart of an unknown plugin succeeded")
	}
	if _, err := c.Client.RestartPlugin(context.Background(), "../etc"); err == nil {
		t.Fatal("restart of a path succeeded")
	}
}

// processAlive reports whether pid names a live, non-zombie process.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3 is the state; Z is a zombie.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestMisbehavingHandlerIsCutOff drives handlers that break the protocol on
// a tool call through the real core and bin/ipc: a non-object result is
// the handler's error; a frame that is not JSON, or one over the size cap,
// cuts the handler off (its process killed) and the agent gets
// PLUGIN_ERROR, then PLUGIN_UNAVAILABLE (the core is told to give up after
// one crash, so that the plugin stays down).
func TestMisbehavingHandlerIsCutOff(t *testing.T) {
	names := []string{"results", "late-garbage-json", "late-oversized"}
	c := startCoreWith(t, coreOptions{Revival: loader.Revival{MaxCrashes: 1}, Setup: func(h home.Dir) {
		for _, n := range names {
			if _, err := install.Install(h, rawSource(t, n), install.Options{}); err != nil {
				t.Fatalf("install %s: %v", n, err)
			}
		}
	}})
	s := c.Session(t, "main")
	r := runIPC(t, s.Socket, nil, "tool.invoke.results_raw", `{"raw":"[1,2]"}`)
	wantError(t, r, ipc.CodeHandlerError, 0, "")
	if !strings.Contains(r.Err.Message, "JSON array, not an object") {
		t.Fatalf("non-object result: %+v", r.Err)
	}
	if r := runIPC(t, s.Socket, nil, "tool.invoke.results_raw", `{"raw":"{\"a\":1}"}`); r.Code != 0 || fmt.Sprint(r.Result["a"]) != "1" {
		t.Fatalf("object result: %+v", r)
	}
	for _, name := range names[1:] {
		tool := "tool.invoke." + strings.ReplaceAll(name, "-", "_") + "_raw"
		pid := pluginStatus(t, c, name).PID
		wantError(t, runIPC(t, s.Socket, nil, tool, `{"raw":"{}"}`), ipc.CodePluginError, 0, "")
		waitFor(t, name+" to be cut off", func() bool { return pluginStatus(t, c, name).State == "down" })
		if processAlive(pid) {
			t.Fatalf("%s: handler %d still alive after it was cut off", name, pid)
		}
		wantError(t, runIPC(t, s.Socket, nil, tool, `{"raw":"{}"}`), ipc.CodePluginUnavailable, 6, "")
	}
	if st := pluginStatus(t, c, "results"); st.State != "healthy" {
		t.Fatalf("the well-behaved handler: %+v", st)
	}
}

// TestHandlerChildrenDieWithTheCore checks that a process a handler starts
// (in its process group) does not outlive the core's shutdown.
func TestHandlerChildrenDieWithTheCore(t *testing.T) {
	c := startCoreWith(t, coreOptions{Setup: func(h home.Dir) { installKit(t, h, "alpha") }})
	s := c.Session(t, "main")
	r := runIPC(t, s.Socket, nil, "tool.invoke.alpha_spawn", `{}`)
	if r.Code != 0 {
		t.Fatalf("alpha_spawn: %s", r.Stderr)
	}
	child := int(r.Result["pid"].(float64))
	if !processAlive(child) {
		t.Fatalf("the handler's child %d is not running", child)
	}
	if err := c.Stop(t); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the handler's child to be gone", func() bool { return !processAlive(child) })
}

// A bundled plugin — a first-party out-of-process plugin shipped beside the
// core with its handler's hash fixed at build — is loaded only when
// config.toml has its section, with no install step; a handler that is not
// the one built is refused; a user plugin of the same name replaces it.
func TestBundledPlugins(t *testing.T) {
	dir := kitSource(t, "shipped", kitManifest("shipped"))
	raw, err := os.ReadFile(filepath.Join(dir, "handler"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	good := []loader.Bundled{{Name: "shipped", Dir: dir, SHA256: hex.EncodeToString(sum[:])}}

	// Not enabled: not loaded.
	c := startCoreWith(t, coreOptions{Bundled: good})
	st, err := c.Client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Plugins {
		if p.Name == "shipped" {
			t.Errorf("a bundled plugin without a [plugins.shipped] section was loaded: %+v", p)
		}
	}
	c.Stop(t)

	// Enabled: loaded, out of process, and serving through bin/ipc.
	c = startCoreWith(t, coreOptions{Config: "[plugins.shipped]\n", Bundled: good})
	p := pluginStatus(t, c, "shipped")
	if !p.Healthy || p.Source != "bundled" || p.PID == 0 {
		t.Fatalf("bundled plugin: %+v", p)
	}
	s := c.Session(t, "main")
	if r := runIPC(t, s.Socket, nil, "tool.invoke.shipped_echo", `{"message":"from the bundle"}`); r.Code != 0 || r.Result["message"] != "from the bundle" {
		t.Errorf("shipped_echo: exit %d %s", r.Code, r.Stderr)
	}
	c.Stop(t)

	// A handler that is not the one built: refused.
	bad := []loader.Bundled{{Name: "shipped", Dir: dir, SHA256: strings.Repeat("0", 64)}}
	c = startCoreWith(t, coreOptions{Config: "[plugins.shipped]\n", Bundled: bad})
	if p := pluginStatus(t, c, "shipped"); p.Healthy || p.Category != "CONFIG_ERROR" {
		t.Errorf("a bundled handler with another hash: %+v, want CONFIG_ERROR", p)
	}
	c.Stop(t)

	// A user plugin of the same name replaces it.
	c = startCoreWith(t, coreOptions{Config: "[plugins.shipped]\n", Bundled: good, Setup: func(h home.Dir) { installKit(t, h, "shipped") }})
	if p := pluginStatus(t, c, "shipped"); !p.Healthy || p.Source != "user" {
		t.Errorf("with a user plugin of the same name: %+v, want the user's", p)
	}
}
