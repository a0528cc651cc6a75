package server_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/keychain"
)

// A hostile plugin, run by the real core through the real confinement,
// tries each escape; the same plugin run unconfined ([plugins.bare]
// unconfined = true) in the same core succeeds at each, so a probe that
// cannot work proves nothing. "box" is confined; "bare" is its control.

// tcpCounter is a loopback TCP listener that counts the connections it
// accepted.
type tcpCounter struct {
	ln net.Listener
	n  atomic.Int64
}

func listenTCP(t *testing.T) *tcpCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &tcpCounter{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			go func() { buf := make([]byte, 64); _, _ = conn.Read(buf); conn.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

// udpCounter is a loopback UDP socket that counts the datagrams it got
// and never answers.
type udpCounter struct {
	pc net.PacketConn
	n  atomic.Int64
}

func listenUDP(t *testing.T) *udpCounter {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &udpCounter{pc: pc}
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			c.n.Add(1)
		}
	}()
	t.Cleanup(func() { pc.Close() })
	return c
}

func TestHostilePluginIsConfined(t *testing.T) {
	if err := confine.Probe().Missing(); err != nil {
		testutil.Missing(t, fmt.Sprintf("the kernel cannot confine plugins: %v", err))
	}
	declared, undeclared := listenTCP(t), listenTCP(t)
	udp, dns := listenUDP(t), listenUDP(t)
	outside := filepath.Join(t.TempDir(), "canary") // a file of the user's, outside every folder of the plugin's
	if err := os.WriteFile(outside, []byte("user's file"), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := strings.Replace(kitManifest("box"), `"subscribes"`,
		fmt.Sprintf(`"network": {"hosts": [%q]}, "subscribes"`, declared.ln.Addr().String()), 1)
	c := startCoreWith(t, coreOptions{Config: "[plugins.bare]\nunconfined = true\n", Setup: func(h home.Dir) {
		for _, name := range []string{"box", "bare"} {
			m := strings.ReplaceAll(manifest, "box_", name+"_")
			if _, err := install.Install(h, kitSource(t, name, m), install.Options{}); err != nil {
				t.Fatal(err)
			}
			if err := keychain.NewFileStore(h.CredentialsDir()).Set(name, "token", []byte(name+"-secret")); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(h.DataDir(name), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(h.DataDir(name), "private"), []byte(name+" data"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := keychain.NewFileStore(h.CredentialsDir()).Set(keychain.LLMPlugin, keychain.LLMKeyAPI, []byte("sk-ant-api03-model-key")); err != nil {
			t.Fatal(err)
		}
	}})
	for name, mode := range map[string]string{"box": api.ConfinementConfined, "bare": api.ConfinementUnconfined} {
		st := pluginStatus(t, c, name)
		if !st.Healthy || st.Confinement == nil || st.Confinement.Mode != mode {
			t.Fatalf("plugin %s: %+v (confinement %+v), want healthy and %s", name, st, st.Confinement, mode)
		}
	}
	h := c.Home
	s := c.Session(t, "main")
	modelKey := filepath.Join(h.CredentialsDir(), "plugins", keychain.LLMPlugin, keychain.LLMKeyAPI)
	other := map[string]string{"box": "bare", "bare": "box"}
	probe := func(name, kind, target string) (bool, string) {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"kind": kind, "target": target})
		r := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke."+name+"_probe", string(b)))
		ok, _ := r["ok"].(bool)
		why, _ := r["error"].(string)
		return ok, why
	}
	type escape struct {
		what, kind string
		target     func(name string) string
	}
	escapes := []escape{
		{"read the model key", "read", func(string) string { return modelKey }},
		{"read another plugin's credential", "read", func(n string) string {
			return filepath.Join(h.CredentialsDir(), "plugins", other[n], "token")
		}},
		{"read another plugin's data", "read", func(n string) string { return filepath.Join(h.DataDir(other[n]), "private") }},
		{"read config.toml", "read", func(string) string { return h.Config() }},
		{"read the audit log", "read", func(string) string { return h.AuditLog() }},
		{"read a file of the user's", "read", func(string) string { return outside }},
		{"ask the control socket for the core's status", "control", func(string) string { return h.ControlSocket() }},
		{"connect to an agent session's socket", "unix", func(string) string { return s.Socket }},
		{"signal the core", "signal", func(string) string { return fmt.Sprint(os.Getpid()) }},
		{"open a TCP connection to a loopback listener", "tcp", func(string) string { return undeclared.ln.Addr().String() }},
		{"send UDP", "udp", func(string) string { return udp.pc.LocalAddr().String() }},
		{"resolve a name", "resolve", func(string) string { return dns.pc.LocalAddr().String() }},
		{"write into its own plugin folder", "write", func(n string) string { return filepath.Join(h.PluginsDir(), n, "dropped") }},
		{"write next to the user's file", "write", func(string) string { return outside + "." + "dropped" }},
	}
	if runtime.GOOS == "linux" { // macOS has no /proc
		escapes = append(escapes, escape{"read the core's /proc environment", "environ", func(string) string { return fmt.Sprint(os.Getpid()) }})
	}
	if _, err := os.Stat("/var/run/docker.sock"); err == nil {
		escapes = append(escapes, escape{"connect to the Docker engine's socket", "unix", func(string) string { return "/var/run/docker.sock" }})
	}
	for _, e := range escapes {
		for _, name := range []string{"bare", "box"} { // the control first: a probe that cannot work proves nothing
			ok, why := probe(name, e.kind, e.target(name))
			switch {
			case name == "bare" && !ok:
				t.Errorf("positive control: unconfined, %s (%s %s) failed: %s", e.what, e.kind, e.target(name), why)
			case name == "box" && ok:
				t.Errorf("CONFINED PLUGIN ESCAPED: %s (%s %s) worked", e.what, e.kind, e.target(name))
			case name == "box":
				t.Logf("confined: %s: refused: %s", e.what, why)
			}
		}
	}
	if n := udp.n.Load(); n != 1 {
		t.Errorf("the UDP listener got %d datagrams, want 1 (the unconfined one)", n)
	}
	if n := dns.n.Load(); n == 0 {
		t.Errorf("the DNS listener got no query from the unconfined plugin")
	}
	// What a confined plugin may do, it can: its own folder, its data, and
	// its declared host through its egress point.
	for _, e := range []escape{
		{"read its own manifest", "read", func(n string) string { return filepath.Join(h.PluginsDir(), n, "manifest.json") }},
		{"write its data folder", "write", func(n string) string { return filepath.Join(h.DataDir(n), "note") }},
		{"write its temp folder", "write", func(n string) string { return filepath.Join(h.DataDir(n), "tmp", "note") }},
		{"reach its declared host through its egress point", "egress", func(string) string { return declared.ln.Addr().String() }},
	} {
		if ok, why := probe("box", e.kind, e.target("box")); !ok {
			t.Errorf("confined, it cannot %s: %s", e.what, why)
		}
	}
	// An undeclared host through the egress point is refused, confined or
	// not, and audited.
	for _, name := range []string{"box", "bare"} {
		if ok, why := probe(name, "egress", undeclared.ln.Addr().String()); ok || !strings.Contains(why, "HOST_NOT_DECLARED") {
			t.Errorf("%s reached an undeclared host through its egress point: ok=%v %s", name, ok, why)
		}
	}
	if n := undeclared.n.Load(); n != 1 {
		t.Errorf("the undeclared listener accepted %d connections, want 1 (the unconfined plugin's direct one)", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var refused, closed bool
		for _, e := range c.Audit(t) {
			if e.Stage != audit.StageEgress || e.Source != "box" {
				continue
			}
			refused = refused || (e.Outcome == audit.OutcomeRejected && e.Code == "HOST_NOT_DECLARED" && strings.Contains(e.Reason, undeclared.ln.Addr().String()))
			closed = closed || (e.Outcome == audit.OutcomeClosed && strings.Contains(e.Reason, declared.ln.Addr().String()) && strings.Contains(e.Reason, "6 bytes out"))
		}
		if refused && closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit: egress refusal %v, connection with its bytes %v", refused, closed)
		}
		time.Sleep(50 * time.Millisecond)
	}

}

// Where the kernel cannot confine, a plugin does not start unconfined: it
// fails with the feature it lacks and the setting that accepts the risk;
// with that setting it starts, reported as unconfined.
func TestNoConfinementNoStart(t *testing.T) {
	none := &confine.Support{OS: "linux"} // a kernel without Landlock
	c := startCoreWith(t, coreOptions{ConfineSupport: none, Config: "[plugins.trusted]\nunconfined = true\n", Setup: func(h home.Dir) {
		installKit(t, h, "plain")
		installKit(t, h, "trusted")
	}})
	st := pluginStatus(t, c, "plain")
	if st.Healthy || st.State != "failed" || !strings.Contains(st.Problem, "Landlock") || !strings.Contains(st.Problem, "[plugins.plain] unconfined = true") {
		t.Errorf("plain on a kernel without Landlock: %+v", st)
	}
	st = pluginStatus(t, c, "trusted")
	if !st.Healthy || st.Confinement == nil || st.Confinement.Mode != api.ConfinementUnconfined {
		t.Errorf("trusted, unconfined by the user's setting: %+v confinement %+v", st, st.Confinement)
	}
	r := runIPC(t, c.Session(t, "main").Socket, nil, "tool.invoke.trusted_echo", `{"message":"hi"}`)
	if r.Code != 0 || r.Result["message"] != "hi" {
		t.Errorf("trusted_echo: %d %s %v", r.Code, r.Stderr, r.Result)
	}
}

// The Telegram plugin reaches its api_url and nothing else: a Bot API that
// redirects it to another host (an undeclared one) gets the plugin's
// request refused at its egress point, and audited; the redirect target
// sees nothing. The positive control is every other Telegram test, which
// runs the same confined plugin against its declared api_url.
func TestTelegramRedirectedToAnUndeclaredHost(t *testing.T) {
	elsewhere := listenTCP(t)
	redirect := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+elsewhere.ln.Addr().String()+r.URL.Path, http.StatusTemporaryRedirect)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = redirect.Serve(ln) }()
	t.Cleanup(func() { redirect.Close() })
	cfg := dockerConfig(t, fmt.Sprintf("[groups.main]\n[plugins.telegram]\nsurface = true\n[plugins.telegram.config]\nowner_id = %d\napi_url = %q\n", tgOwner, "http://"+ln.Addr().String()))
	c := startCoreWith(t, coreOptions{Config: cfg, Bundled: []loader.Bundled{telegramBundle(t)}, Setup: func(h home.Dir) { setToken(t, h) }})
	st := pluginStatus(t, c, "telegram")
	if st.Healthy {
		t.Fatalf("the telegram plugin is healthy behind a redirect to an undeclared host: %+v", st)
	}
	if !strings.Contains(st.Problem, "HOST_NOT_DECLARED") {
		t.Errorf("the plugin's problem does not name the refusal: %s", st.Problem)
	}
	var refused bool
	for _, e := range c.Audit(t) {
		if e.Source == "telegram" && e.Stage == audit.StageEgress && e.Outcome == audit.OutcomeRejected && e.Code == "HOST_NOT_DECLARED" &&
			strings.Contains(e.Reason, elsewhere.ln.Addr().String()) {
			refused = true
		}
	}
	if !refused {
		t.Errorf("no audited refusal of %s", elsewhere.ln.Addr())
	}
	if n := elsewhere.n.Load(); n != 0 {
		t.Errorf("the undeclared host got %d connections", n)
	}
}
