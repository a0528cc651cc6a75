package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/agentimage/agentimagetest"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/keychain"
	"github.com/carapace-dev/carapace/plugins/mail"
)

// tmuxSession is a real terminal: a tmux session running one command.
type tmuxSession struct {
	t    *testing.T
	name string
}

// tmuxServers numbers the tmux servers of this test process: each
// session gets a server of its own, so that one test's kill-server, which
// returns before that server is gone, cannot take the next test's
// new-session with it ("server exited unexpectedly").
var tmuxServers atomic.Int64

// linuxTerminal skips t off Linux. The setup's terminal tests run on the
// project's Linux machines and CI, where tmux is required
// (testutil.Require in tmuxStart: a missing tmux fails under CI); on a
// Mac, setup's terminal path is the same code, run by the other tests.
func linuxTerminal(t *testing.T) {
	t.Helper()
	if goruntime.GOOS != "linux" {
		t.Skip("the setup's terminal tests run on Linux (tmux in a private server), not on " + goruntime.GOOS)
	}
}

// tmuxStart runs command (a shell line) in a new detached tmux session of
// its own server (socket -L), 120x50.
func tmuxStart(t *testing.T, command string) *tmuxSession {
	t.Helper()
	testutil.Require(t, "tmux", "setup is driven in a real terminal (apt-get install tmux)")
	s := &tmuxSession{t: t, name: fmt.Sprintf("carapace-setup-%d-%d", os.Getpid(), tmuxServers.Add(1))}
	if out, err := s.tmux("new-session", "-d", "-s", s.name, "-x", "120", "-y", "50", command); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { s.tmux("kill-server") })
	return s
}

func (s *tmuxSession) tmux(args ...string) ([]byte, error) {
	return exec.Command("tmux", append([]string{"-L", s.name}, args...)...).CombinedOutput()
}

// screen is what the terminal shows, with its scrollback.
func (s *tmuxSession) screen() string {
	out, err := s.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", s.name)
	if err != nil {
		s.t.Fatalf("tmux capture-pane: %v\n%s", err, out)
	}
	return string(out)
}

// waitFor waits until the screen shows want.
func (s *tmuxSession) waitFor(want string) string {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		scr := s.screen()
		if strings.Contains(scr, want) {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the terminal never showed %q:\n%s", want, scr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// typeLine types text and Enter.
func (s *tmuxSession) typeLine(text string) {
	s.t.Helper()
	if text != "" {
		if out, err := s.tmux("send-keys", "-t", s.name, "-l", text); err != nil {
			s.t.Fatalf("tmux send-keys: %v\n%s", err, out)
		}
	}
	if out, err := s.tmux("send-keys", "-t", s.name, "Enter"); err != nil {
		s.t.Fatalf("tmux send-keys: %v\n%s", err, out)
	}
}

// The interactive setup in a real terminal: each question, the secrets
// typed without echo, the image built with its progress shown, and at the
// end a home that doctor passes.
func TestSetupInteractive(t *testing.T) {
	linuxTerminal(t)
	testutil.RequireDocker(t, "setup builds and checks the image in the real engine")
	testutil.RequireFile(t, agentimagetest.DefaultBusybox, "the test image is built with Debian's static busybox (apt-get install busybox-static)")
	// The image the build "makes": the test image's recipe, tagged as
	// the agent image by a docker whose build prints the steps of the
	// real one (offline, the real one cannot finish).
	base := fmt.Sprintf("carapace-agent-test:tmux-%d", os.Getpid())
	if err := agentimagetest.BuildTest(t.Context(), agentimage.Options{Tag: base, IPC: agentimagetest.DefaultBusybox, Relay: agentimagetest.DefaultBusybox}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agentimagetest.Remove(base, "carapace-agent:"+version) })
	realDocker, _ := exec.LookPath("docker")
	fakeDir := t.TempDir()
	fake := `#!/bin/sh
if [ "$1" = build ]; then
	tag=
	prev=
	for a; do [ "$prev" = --tag ] && tag=$a; prev=$a; done
	echo "Step 1/9 : FROM node:22-bookworm-slim"
	sleep 1
	echo "Step 2/9 : RUN npm install -g @anthropic-ai/claude-code"
	exec ` + realDocker + ` tag ` + base + ` "$tag"
fi
exec ` + realDocker + ` "$@"
`
	if err := os.WriteFile(filepath.Join(fakeDir, "docker"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}

	user := t.TempDir()
	h := home.Dir(filepath.Join(user, "carapace-home"))
	const apiKey, botToken = "sk-ant-api03-typed-in-tmux", "424242:AAtypedbottoken"
	env := fmt.Sprintf("env HOME=%s XDG_CONFIG_HOME=%s/cfg CARAPACE_HOME=%s PATH=%s:%s", user, user, h, fakeDir, os.Getenv("PATH"))
	s := tmuxStart(t, env+" "+bins.carapace+" setup --engine docker; echo SETUP-EXIT=$?; sleep 600")

	s.waitFor("done  home")
	s.waitFor("Build it now [b], name an image you have, or press Enter to skip:")
	s.typeLine("b")
	// The model API is offered; Enter keeps Anthropic.
	if scr := s.waitFor("Model API [anthropic]:"); !strings.Contains(scr, "  ollama     a model on this machine, no key (Ollama ") {
		t.Errorf("the providers are not offered:\n%s", scr)
	}
	s.typeLine("")
	scr := s.waitFor("Anthropic API key or Claude OAuth token (input hidden; Enter to skip):")
	for _, want := range []string{
		"building carapace-agent:" + version + " with docker (" + agentimage.Registry + ")",
		"│ Step 1/9 : FROM node:22-bookworm-slim",
		"│ Step 2/9 : RUN npm install -g @anthropic-ai/claude-code",
		"done  image      carapace-agent:" + version + " built in",
	} {
		if !strings.Contains(scr, want) {
			t.Errorf("the build did not show %q:\n%s", want, scr)
		}
	}
	s.typeLine(apiKey)
	s.waitFor("done  model key  stored (anthropic-api-key, 26 bytes)")
	s.waitFor("Telegram bot token (input hidden):")
	s.typeLine(botToken)
	s.waitFor("Pair your Telegram account now (a code to send the bot)? [Y/n]")
	s.typeLine("")
	s.waitFor("/start ")
	s.waitFor("CalDAV URL (Enter to skip):")
	s.typeLine("")
	s.waitFor("Set up a mail account (IMAP and SMTP, with an app password)? [y/N]")
	s.typeLine("")
	s.waitFor("Start the core in the background at login, as a systemd user service? [y/N]")
	s.typeLine("n")
	scr = s.waitFor("SETUP-EXIT=")
	if !strings.Contains(scr, "SETUP-EXIT=0") {
		t.Fatalf("setup failed:\n%s", scr)
	}
	// Positive control: the search that finds no secret finds what was
	// shown.
	if !strings.Contains(scr, "bot token stored (") {
		t.Fatalf("the screen is not what was expected:\n%s", scr)
	}
	for _, secret := range []string{apiKey, botToken, "typed-in-tmux", "AAtyped"} {
		if strings.Contains(scr, secret) {
			t.Errorf("the terminal showed the secret %q:\n%s", secret, scr)
		}
	}
	store := keychain.Default(h.CredentialsDir())
	if b, err := store.Get(keychain.LLMPlugin, keychain.LLMKeyAPI); err != nil || string(b) != apiKey {
		t.Errorf("the model key stored: %q, %v", b, err)
	}
	if b, err := store.Get("telegram", "bot_token"); err != nil || string(b) != botToken {
		t.Errorf("the bot token stored: %q, %v", b, err)
	}
	cfg, err := config.Load(h.Config())
	if err != nil || cfg.Runtime.Engine != "docker" || !cfg.Plugins["telegram"].Surface {
		t.Fatalf("config.toml: %+v, %v", cfg, err)
	}

	// doctor passes on what setup made.
	cmd := exec.Command(bins.carapace, "doctor", "--json")
	cmd.Env = append(os.Environ(), "HOME="+user, "CARAPACE_HOME="+string(h))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	var checks []struct{ Name, Status, Message string }
	if err := json.Unmarshal(out, &checks); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if c.Status == "fail" {
			t.Errorf("doctor: %+v", c)
		}
		if c.Name == "image" && (c.Status != "ok" || c.Message != "carapace-agent:"+version) {
			t.Errorf("doctor image: %+v", c)
		}
	}
}

// Ctrl-C at a hidden prompt ends setup as an interrupt does (status 130)
// and leaves the terminal echoing, with nothing stored.
func TestSetupInterruptRestoresEcho(t *testing.T) {
	linuxTerminal(t)
	user := t.TempDir()
	h := home.Dir(filepath.Join(user, "carapace-home"))
	env := fmt.Sprintf("env HOME=%s XDG_CONFIG_HOME=%s/cfg CARAPACE_HOME=%s", user, user, h)
	// runtime.engine none: no engine or image step before the key's prompt.
	s := tmuxStart(t, "stty echo; "+env+" "+bins.carapace+" setup --engine none; echo SETUP-EXIT=$?; stty -a | tr ' ' '\\n' | grep -x -- '-\\{0,1\\}echo' | sed 's/^/TTY-/'; sleep 600")
	s.waitFor("Model API [anthropic]:")
	s.typeLine("")
	s.waitFor("Anthropic API key or Claude OAuth token (input hidden; Enter to skip):")
	s.tmux("send-keys", "-t", s.name, "-l", "sk-ant-half")
	s.tmux("send-keys", "-t", s.name, "C-c")
	scr := s.waitFor("TTY-")
	if !strings.Contains(scr, "SETUP-EXIT=130") {
		t.Errorf("setup did not end as interrupted:\n%s", scr)
	}
	if !strings.Contains(scr, "TTY-echo") || strings.Contains(scr, "TTY--echo") {
		t.Errorf("the terminal was left without echo:\n%s", scr)
	}
	if strings.Contains(scr, "sk-ant-half") {
		t.Errorf("the half-typed key was shown:\n%s", scr)
	}
	if _, err := keychain.Default(h.CredentialsDir()).Get(keychain.LLMPlugin, keychain.LLMKeyAPI); err == nil {
		t.Error("an interrupted setup stored a key")
	}
}

// The interactive setup finds a running Ollama (a fake, where
// $OLLAMA_HOST says), lists its models, and on the choice of ollama and a
// model writes [llm] and asks for no key.
func TestSetupInteractiveOllama(t *testing.T) {
	linuxTerminal(t)
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/tags" || r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"models":[{"name":"qwen3-coder:latest"},{"name":"gpt-oss:20b"}]}`)
	}))
	defer ollama.Close()
	hostPort := strings.TrimPrefix(ollama.URL, "http://")
	user := t.TempDir()
	h := home.Dir(filepath.Join(user, "carapace-home"))
	env := fmt.Sprintf("env HOME=%s XDG_CONFIG_HOME=%s/cfg CARAPACE_HOME=%s OLLAMA_HOST=%s", user, user, h, hostPort)
	s := tmuxStart(t, env+" "+bins.carapace+" setup --engine none; echo SETUP-EXIT=$?; sleep 600")
	scr := s.waitFor("Model API [anthropic]:")
	if want := "(Ollama running at " + hostPort + " with 2 model(s): qwen3-coder:latest, gpt-oss:20b)"; !strings.Contains(scr, want) {
		t.Errorf("the running Ollama is not shown (%q):\n%s", want, scr)
	}
	s.typeLine("ollama")
	s.waitFor("Model for the agents [qwen3-coder:latest]:")
	s.typeLine("gpt-oss:20b")
	s.waitFor("ok    model key  none needed (ollama, auth none)")
	s.waitFor("Telegram bot token (input hidden):")
	s.typeLine("")
	s.waitFor("CalDAV URL (Enter to skip):")
	s.typeLine("")
	s.waitFor("skip  calendar   not set up")
	s.waitFor("Set up a mail account (IMAP and SMTP, with an app password)? [y/N]")
	s.typeLine("n")
	s.waitFor("systemd user service? [y/N]")
	s.typeLine("n")
	scr = s.waitFor("SETUP-EXIT=")
	if !strings.Contains(scr, "SETUP-EXIT=0") {
		t.Fatalf("setup failed:\n%s", scr)
	}
	cfg, err := config.Load(h.Config())
	if _, on := cfg.Plugins["calendar"]; on {
		t.Errorf("a skipped calendar is turned on: %+v", cfg.Plugins)
	}
	if err != nil || cfg.LLM.Provider != "ollama" || cfg.LLM.Upstream != ollama.URL || cfg.LLM.Model != "gpt-oss:20b" || cfg.LLM.Auth != "none" {
		t.Fatalf("config.toml [llm]: %+v, %v", cfg.LLM, err)
	}
	if st, _ := keychain.Default(h.CredentialsDir()).List(keychain.LLMPlugin); len(st) != 0 {
		t.Errorf("a key was stored for a keyless Ollama: %v", st)
	}
}

// setupPastTelegram starts carapace setup --engine none in a real
// terminal with env and takes the default model, no key and no Telegram
// bot: a test of a later step starts there.
func setupPastTelegram(t *testing.T, env string) *tmuxSession {
	t.Helper()
	s := tmuxStart(t, env+" "+bins.carapace+" setup --engine none; echo SETUP-EXIT=$?; sleep 600")
	s.waitFor("Model API [anthropic]:")
	s.typeLine("")
	s.waitFor("Anthropic API key or Claude OAuth token (input hidden; Enter to skip):")
	s.typeLine("")
	s.waitFor("Telegram bot token (input hidden):")
	s.typeLine("")
	return s
}

// The calendar step in a real terminal: the URL asked again when it is
// plain http to another machine, the user name and zone asked, the
// password typed without echo and stored as carapace auth set stores it,
// and [plugins.calendar.config] written.
func TestSetupInteractiveCalendar(t *testing.T) {
	linuxTerminal(t)
	user := t.TempDir()
	h := home.Dir(filepath.Join(user, "carapace-home"))
	env := fmt.Sprintf("env HOME=%s XDG_CONFIG_HOME=%s/cfg CARAPACE_HOME=%s OLLAMA_HOST=127.0.0.1:9", user, user, h)
	const password = "typed-caldav-app-password"
	s := setupPastTelegram(t, env)
	s.waitFor("CalDAV URL (Enter to skip):")
	s.typeLine("http://caldav.example.com/dav/")
	s.waitFor("plain http only to this machine")
	s.typeLine("https://caldav.example.com/dav/calendars/user/me/")
	s.waitFor("User name:")
	s.typeLine("me@example.com")
	s.waitFor("Enter for this machine's):")
	s.typeLine("Mars/Olympus")
	s.waitFor(`"Mars/Olympus" is not an IANA time zone`)
	s.typeLine("America/New_York")
	s.waitFor("CalDAV password (input hidden):")
	s.typeLine(password)
	s.waitFor("done  calendar   CalDAV password stored (25 bytes)")
	s.waitFor("Set up a mail account (IMAP and SMTP, with an app password)? [y/N]")
	s.typeLine("n")
	s.waitFor("systemd user service? [y/N]")
	s.typeLine("n")
	scr := s.waitFor("SETUP-EXIT=")
	if !strings.Contains(scr, "SETUP-EXIT=0") || !strings.Contains(scr, `plugins.calendar.config.time_zone = "America/New_York"`) {
		t.Fatalf("setup:\n%s", scr)
	}
	if strings.Contains(scr, password) {
		t.Errorf("the terminal showed the password:\n%s", scr)
	}
	if b, err := keychain.Default(h.CredentialsDir()).Get("calendar", "caldav_password"); err != nil || string(b) != password {
		t.Errorf("the password stored: %q, %v", b, err)
	}
	cfg, err := config.Load(h.Config())
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Plugins["calendar"].Config
	if c["caldav_url"] != "https://caldav.example.com/dav/calendars/user/me/" || c["username"] != "me@example.com" || c["time_zone"] != "America/New_York" {
		t.Fatalf("[plugins.calendar.config]: %+v", c)
	}
}

// The interactive setup adds a mail account: asked whether to, the
// address (an iCloud one: its servers known), the app password typed
// without echo; config.toml gets the account for group main, the
// credential store its password.
func TestSetupInteractiveMail(t *testing.T) {
	linuxTerminal(t)
	user := t.TempDir()
	h := home.Dir(filepath.Join(user, "carapace-home"))
	env := fmt.Sprintf("env HOME=%s XDG_CONFIG_HOME=%s/cfg CARAPACE_HOME=%s", user, user, h)
	const appPassword = "abcd-efgh-typed-tmux"
	s := setupPastTelegram(t, env)
	s.waitFor("CalDAV URL (Enter to skip):")
	s.typeLine("")
	s.waitFor("Set up a mail account (IMAP and SMTP, with an app password)? [y/N]")
	s.typeLine("y")
	s.waitFor("Your mail address:")
	s.typeLine("me@icloud.com")
	scr := s.waitFor("App password for me@icloud.com (input hidden; Enter to skip):")
	if !strings.Contains(scr, "icloud: make an app password for Carapace at appleid.apple.com") {
		t.Errorf("setup does not say where to make the app password:\n%s", scr)
	}
	s.typeLine(appPassword)
	s.waitFor("systemd user service? [y/N]")
	s.typeLine("n")
	scr = s.waitFor("SETUP-EXIT=")
	if !strings.Contains(scr, "SETUP-EXIT=0") || !strings.Contains(scr, "app password of account personal stored (20 bytes)") {
		t.Fatalf("setup:\n%s", scr)
	}
	if strings.Contains(scr, "typed-tmux") {
		t.Errorf("the terminal showed the app password:\n%s", scr)
	}
	if b, err := keychain.Default(h.CredentialsDir()).Get("mail", "personal"); err != nil || string(b) != appPassword {
		t.Errorf("the app password stored: %q, %v", b, err)
	}
	cfg, err := config.Load(h.Config())
	if err != nil {
		t.Fatal(err)
	}
	names, err := mail.AccountNames(cfg.Plugins["mail"].Config)
	acct, _ := cfg.Plugins["mail"].Config["accounts"].([]any)
	if err != nil || len(names) != 1 || names[0] != "personal" || len(acct) != 1 ||
		acct[0].(map[string]any)["imap"] != "imap.mail.me.com:993" || acct[0].(map[string]any)["smtp_security"] != "starttls" {
		t.Fatalf("config.toml's mail accounts %v (%v): %v", names, err, acct)
	}
}
