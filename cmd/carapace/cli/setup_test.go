package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/applecontainer"
	"github.com/carapace-dev/carapace/cmd/carapace/cli"
	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/agentimage/agentimagetest"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/runtime/docker"
	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/keychain"
	"github.com/carapace-dev/carapace/plugins/calendar"
	"github.com/carapace-dev/carapace/plugins/telegram"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

// The token's credential key is the plugin's.
func TestTelegramTokenKey(t *testing.T) {
	h := emptyHome(t)
	var out, errb testutil.Buffer
	r := carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("123:token\n"), NewEngine: noEngine}, h,
		"setup", "--yes", "--telegram-token-stdin")
	if r.code != 1 { // no engine: the engine step fails
		t.Fatalf("setup: %+v", r)
	}
	b, err := keychain.Default(h.CredentialsDir()).Get("telegram", telegram.CredentialKey)
	if err != nil || string(b) != "123:token" {
		t.Fatalf("the plugin's credential %s: %q, %v", telegram.CredentialKey, b, err)
	}
}

// emptyHome is a home that does not exist yet.
func emptyHome(t *testing.T) home.Dir {
	t.Helper()
	user := t.TempDir()
	t.Setenv("HOME", user)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(user, "cfg"))
	return home.Dir(filepath.Join(user, "carapace-home"))
}

// noEngine is a machine without any container engine.
func noEngine(name string) (runtime.Engine, error) {
	return docker.New(docker.Options{Bin: "/nonexistent/" + name}), nil
}

// serviceFake answers systemctl: what was installed is active.
type serviceFake struct{ ran []string }

func (s *serviceFake) run(_ context.Context, name string, args ...string) ([]byte, error) {
	cmd := name + " " + strings.Join(args, " ")
	s.ran = append(s.ran, cmd)
	if strings.Contains(cmd, "is-active") {
		for _, r := range s.ran {
			if strings.Contains(r, "restart") {
				return []byte("active\n"), nil
			}
		}
		return []byte("inactive\n"), nil
	}
	return nil, nil
}

// testImage builds a small image with the test image's recipe (busybox
// standing in for ipc, which nothing here runs) and removes it at the end.
func testImage(t *testing.T) string {
	t.Helper()
	testutil.RequireDocker(t, "setup and doctor check the image in the real engine")
	testutil.RequireFile(t, agentimagetest.DefaultBusybox, "the test image is built with Debian's static busybox (apt-get install busybox-static)")
	tag := fmt.Sprintf("carapace-agent-test:setup-%d", os.Getpid())
	if err := agentimagetest.BuildTest(t.Context(), agentimage.Options{Tag: tag, IPC: agentimagetest.DefaultBusybox, Relay: agentimagetest.DefaultBusybox}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agentimagetest.Remove(tag) })
	return tag
}

// setupLines returns setup's step lines by step ("ok    engine …").
func stepLine(out, status, step string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, fmt.Sprintf("%-4s  %-10s ", status, step)) {
			return l
		}
	}
	return ""
}

// From an empty home to a passing doctor with the Docker test image,
// without a prompt; then again, changing nothing; then one change.
func TestSetupNonInteractive(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("the Linux service and Docker")
	}
	h := emptyHome(t)
	image := testImage(t)
	svc := &serviceFake{}
	run := func(stdin string, args ...string) result {
		var out, errb testutil.Buffer
		return carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin), ServiceRunner: svc.run}, h, args...)
	}

	// Without a terminal and without --yes, nothing is asked and nothing
	// is done.
	r := run("", "setup")
	if r.code != 2 || !strings.Contains(r.stderr, "stdin is not a terminal") || !strings.Contains(r.stderr, "--yes") {
		t.Fatalf("setup without a terminal: %+v", r)
	}
	if _, err := os.Stat(string(h)); !os.IsNotExist(err) {
		t.Fatalf("the refused setup made the home: %v", err)
	}

	r = run("sk-ant-api03-setup-test\n", "setup", "--yes", "--engine", "docker", "--image", image, "--llm-key-stdin", "--service")
	if r.code != 0 {
		t.Fatalf("setup: %+v", r)
	}
	for _, want := range [][2]string{
		{"done", "home"}, {"done", "config"}, {"ok", "engine"}, {"ok", "image"}, {"done", "model key"}, {"skip", "telegram"}, {"done", "service"},
	} {
		if stepLine(r.stdout, want[0], want[1]) == "" {
			t.Errorf("no %q step %q:\n%s", want[0], want[1], r.stdout)
		}
	}
	if l := stepLine(r.stdout, "done", "model key"); !strings.Contains(l, "anthropic-api-key, 23 bytes") {
		t.Errorf("model key: %q", l)
	}
	if !strings.Contains(r.stdout, `runtime.engine = "docker"`) || !strings.Contains(r.stdout, `runtime.image = "`+image+`"`) {
		t.Errorf("the settings changed are not shown:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout+r.stderr, "sk-ant-api03-setup-test") {
		t.Fatal("setup printed the key")
	}
	cfgData, err := os.ReadFile(h.Config())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cfgData, []byte("# Carapace's configuration")) || !bytes.Contains(cfgData, []byte("# memory_mb = 4096")) {
		t.Errorf("config.toml lost the template's comments:\n%s", cfgData)
	}
	cfg, err := config.Load(h.Config())
	if err != nil || cfg.Runtime.Engine != "docker" || cfg.Runtime.Image != image {
		t.Fatalf("config.toml: %+v, %v", cfg.Runtime, err)
	}
	if fi, _ := os.Stat(h.Config()); fi.Mode().Perm() != 0o600 {
		t.Errorf("config.toml is %04o", fi.Mode().Perm())
	}
	key, err := keychain.Default(h.CredentialsDir()).Get(keychain.LLMPlugin, keychain.LLMKeyAPI)
	if err != nil || string(key) != "sk-ant-api03-setup-test" {
		t.Fatalf("the stored key: %q, %v", key, err)
	}

	checks, code := doctorChecks(t, func(args ...string) result { return run("", args...) })
	if code != 0 {
		t.Fatalf("doctor after setup exited %d: %+v", code, checks)
	}
	for _, name := range []string{"home", "config", "model key", "engine", "image", "audit log"} {
		if checks[name].Status != "ok" {
			t.Errorf("doctor %s: %+v", name, checks[name])
		}
	}

	// Again: nothing to do, nothing changed.
	r = run("", "setup", "--yes")
	if r.code != 0 {
		t.Fatalf("setup again: %+v", r)
	}
	if strings.Contains(r.stdout, "\ndone  ") || strings.HasPrefix(r.stdout, "done") {
		t.Errorf("setup again changed something:\n%s", r.stdout)
	}
	for _, step := range []string{"home", "config", "engine", "image", "model key", "service"} {
		if stepLine(r.stdout, "ok", step) == "" {
			t.Errorf("setup again: %s not ok:\n%s", step, r.stdout)
		}
	}
	if again, _ := os.ReadFile(h.Config()); !bytes.Equal(again, cfgData) {
		t.Errorf("config.toml changed:\n%s", again)
	}

	// An image the engine does not have: a failure that names the fix,
	// and config.toml unchanged.
	r = run("", "setup", "--yes", "--image", "carapace-never-built:none")
	if r.code != 1 || !strings.Contains(stepLine(r.stdout, "fail", "image"), "carapace-never-built:none is not in docker's images") ||
		!strings.Contains(r.stdout, "fix: docker pull carapace-never-built:none") {
		t.Fatalf("setup with a missing image: %+v", r)
	}
	if again, _ := os.ReadFile(h.Config()); !bytes.Equal(again, cfgData) {
		t.Errorf("a failed setup changed config.toml:\n%s", again)
	}

	// One change: only its line differs.
	r = run("", "setup", "--yes", "--engine", "auto")
	if r.code != 0 {
		t.Fatalf("setup --engine auto: %+v", r)
	}
	after, _ := os.ReadFile(h.Config())
	if d := diffLines(string(cfgData), string(after)); len(d) != 2 || d[0] != `-engine = "docker"` || d[1] != `+engine = "auto"` {
		t.Errorf("setup --engine auto changed %q", d)
	}
}

// diffLines lists the lines only in a ("-") and only in b ("+"), for
// files that differ in place.
func diffLines(a, b string) []string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, "-"+x, "+"+y)
		}
	}
	return out
}

// fakeDocker is a docker CLI: version answers, image inspect finds
// nothing, and build prints steps and then fails as without a registry
// (fail) or succeeds.
func fakeDocker(t *testing.T, fail bool) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "docker")
	failure := ""
	if fail {
		failure = `echo 'ERROR: failed to resolve source metadata for docker.io/library/node:22-bookworm-slim: dial tcp: lookup registry-1.docker.io: no such host' >&2; exit 1`
	}
	script := `#!/bin/sh
case "$1 $3" in
"version {{.Server.Version}}") echo 27.5.1 ;;
"version {{.Server.Arch}}") echo ` + goruntime.GOARCH + ` ;;
"image "*) echo "Error response from daemon: No such image: $3" >&2; exit 1 ;;
"build "*)
	echo "#1 [internal] load build definition from Containerfile"
	echo "#2 [1/5] FROM docker.io/library/node:22-bookworm-slim"
	` + failure + `
	echo "#3 [2/5] RUN npm install -g @anthropic-ai/claude-code"
	;;
*) echo "unexpected: $*" >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// The image missing, then built: the engine's output is shown as it
// comes, and a build that cannot reach a registry says so and what to do.
func TestSetupBuildImage(t *testing.T) {
	testutil.RequireFile(t, agentimagetest.DefaultBusybox, "setup --build-image is given it as the static ipc (apt-get install busybox-static)")
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprint("fail=", fail), func(t *testing.T) {
			h := emptyHome(t)
			bin := fakeDocker(t, fail)
			engines := func(name string) (runtime.Engine, error) { return docker.New(docker.Options{Bin: bin}), nil }
			run := func(args ...string) result {
				var out, errb testutil.Buffer
				return carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, NewEngine: engines, ServiceRunner: (&serviceFake{}).run}, h, args...)
			}
			r := run("setup", "--yes", "--engine", "docker")
			if r.code != 0 || !strings.Contains(stepLine(r.stdout, "warn", "image"), "carapace-agent:9.9.9 is missing") ||
				!strings.Contains(r.stdout, "fix: carapace setup --build-image") {
				t.Fatalf("setup with the image missing: %+v", r)
			}
			// busybox stands in for ipc, and for ipc-relay beside it.
			data, err := os.ReadFile(agentimagetest.DefaultBusybox)
			if err != nil {
				t.Fatal(err)
			}
			ipc := filepath.Join(t.TempDir(), "ipc")
			if err := os.WriteFile(ipc, data, 0o755); err != nil {
				t.Fatal(err)
			}
			r = run("setup", "--yes", "--build-image", "--ipc", ipc)
			if r.code != 1 || !strings.Contains(stepLine(r.stdout, "fail", "image"), "ipc-relay") || !strings.Contains(r.stdout, "make build (bin/linux-") {
				t.Fatalf("setup --build-image without ipc-relay beside ipc: %+v", r)
			}
			if err := os.WriteFile(filepath.Join(filepath.Dir(ipc), "ipc-relay"), data, 0o755); err != nil {
				t.Fatal(err)
			}
			r = run("setup", "--yes", "--build-image", "--ipc", ipc)
			if !strings.Contains(r.stdout, "│ #2 [1/5] FROM docker.io/library/node:22-bookworm-slim") {
				t.Errorf("no progress:\n%s", r.stdout)
			}
			if !strings.Contains(r.stdout, "building carapace-agent:9.9.9 with docker ("+agentimage.Registry+")") {
				t.Errorf("setup does not say why the build needs the network:\n%s", r.stdout)
			}
			if !fail {
				if r.code != 0 || !strings.Contains(stepLine(r.stdout, "done", "image"), "carapace-agent:9.9.9 built in") {
					t.Fatalf("build: %+v", r)
				}
				return
			}
			if r.code != 1 || !strings.Contains(r.stdout, "no such host") || !strings.Contains(stepLine(r.stdout, "fail", "image"), "the build failed") ||
				!strings.Contains(r.stdout, "fix: check the network (a registry and npm)") {
				t.Fatalf("a build without a registry: %+v", r)
			}
		})
	}
}

// Each engine failure a newcomer meets names its fix, in setup and in
// doctor.
func TestSetupEngineErrors(t *testing.T) {
	notRunning := filepath.Join(t.TempDir(), "docker")
	if err := os.WriteFile(notRunning, []byte("#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tooOld := filepath.Join(t.TempDir(), "docker")
	if err := os.WriteFile(tooOld, []byte("#!/bin/sh\necho 19.03.15\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := func(body string) string {
		p := filepath.Join(t.TempDir(), "container")
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	appleOld := script("echo 'container CLI version 0.9.0 (build: release, commit: 1a2b3c4)'\n")
	appleStopped := script(`case "$1" in
--version) echo 'container CLI version 1.2.2 (build: release, commit: 0190097)' ;;
system) echo '{"status":"not running"}' ;;
esac
`)
	for _, tc := range []struct {
		name, bin, msg, fix string
	}{
		{"apple too old", appleOld, "container CLI 0.9.0 is too old", "install Apple container 1.1.0 or later from https://github.com/apple/container/releases"},
		{"apple not running", appleStopped, "the Apple container services are not running", "container system start"},
		{"not installed", "/nonexistent/docker", "is not installed", "sudo apt-get install docker.io"},
		{"not running", notRunning, "the engine is not running", "sudo systemctl start docker"},
		{"too old", tooOld, "Docker Engine 19.03.15 is too old", "upgrade docker: https://docs.docker.com/engine/install/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apple := strings.HasPrefix(tc.name, "apple")
			if goruntime.GOOS != "linux" && !apple {
				t.Skip("the Linux fixes")
			}
			h := emptyHome(t)
			engine := "docker"
			engines := func(string) (runtime.Engine, error) { return docker.New(docker.Options{Bin: tc.bin}), nil }
			if apple {
				engine = "apple"
				engines = func(string) (runtime.Engine, error) {
					return applecontainer.New(applecontainer.Options{Bin: tc.bin}), nil
				}
			}
			var out, errb testutil.Buffer
			r := carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, NewEngine: engines, ServiceRunner: (&serviceFake{}).run}, h, "setup", "--yes", "--engine", engine)
			if r.code != 1 || !strings.Contains(stepLine(r.stdout, "fail", "engine"), tc.msg) || !strings.Contains(r.stdout, "fix: "+tc.fix) ||
				stepLine(r.stdout, "skip", "image") == "" {
				t.Fatalf("setup: %+v", r)
			}
			var out2, errb2 testutil.Buffer
			checks, code := doctorChecks(t, func(args ...string) result {
				return carapaceWith(t, cli.Config{Stdout: &out2, Stderr: &errb2, NewEngine: engines}, h, args...)
			})
			if c := checks["engine"]; code != 1 || c.Status != "fail" || !strings.Contains(c.Message, tc.msg) || !strings.HasPrefix(c.Fix, tc.fix) {
				t.Fatalf("doctor: %d %+v", code, c)
			}
		})
	}
}

// fakeContainer is applecontainer's fake `container` CLI
// (applecontainer/testdata/fakecontainer), built once.
var fakeContainer struct {
	once sync.Once
	bin  string
	err  error
}

// appleFixture returns a `container` that answers as the recorded version
// of applecontainer/testdata/versions/ does, with the appRoot (the
// kernels) that version's folder holds.
func appleFixture(t *testing.T, version string) string {
	t.Helper()
	fakeContainer.once.Do(func() {
		dir, err := os.MkdirTemp("", "fakecontainer")
		if err != nil {
			fakeContainer.err = err
			return
		}
		fakeContainer.bin = filepath.Join(dir, "container")
		cmd := exec.Command("go", "build", "-o", fakeContainer.bin, "../../../applecontainer/testdata/fakecontainer")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fakeContainer.err = fmt.Errorf("build the fake container CLI: %v\n%s", err, out)
		}
	})
	if fakeContainer.err != nil {
		t.Fatal(fakeContainer.err)
	}
	data, err := filepath.Abs("../../../applecontainer/testdata/versions")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env, err := json.Marshal(map[string]string{"FAKE_CONTAINER_LOG": filepath.Join(dir, "argv.log"), "FAKE_CONTAINER_VERSION": version, "FAKE_CONTAINER_DATA": data})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fake.env"), env, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "container")
	if err := os.Symlink(fakeContainer.bin, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// Apple container 1.5: a fresh installation without a kernel and an
// upgrade that left the old services running each fail the engine step
// and doctor's engine check, with the command that fixes them; with a
// kernel and matching services the engine is ready.
func TestSetupAppleContainer15(t *testing.T) {
	for _, tc := range []struct {
		version, status, msg, fix string
	}{
		{"1.5.0", "ok", "apple 1.5.0", ""},
		{"1.5.0-nokernel", "fail", "have no kernel to run containers with", "container system kernel set --recommended"},
		{"1.5.0-oldserver", "fail", "the running container API server is 1.4.1 but the CLI is 1.5.0: the services of the version before an upgrade still run",
			"container system stop && container system start"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			h := emptyHome(t)
			bin := appleFixture(t, tc.version)
			engines := func(string) (runtime.Engine, error) { return applecontainer.New(applecontainer.Options{Bin: bin}), nil }
			var out, errb testutil.Buffer
			r := carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, NewEngine: engines, ServiceRunner: (&serviceFake{}).run}, h, "setup", "--yes", "--engine", "apple")
			line := stepLine(r.stdout, tc.status, "engine")
			if !strings.Contains(line, tc.msg) || tc.fix != "" && (r.code != 1 || !strings.Contains(r.stdout, "fix: "+tc.fix+"\n")) {
				t.Fatalf("setup: engine line %q\n%+v", line, r)
			}
			var out2, errb2 testutil.Buffer
			checks, _ := doctorChecks(t, func(args ...string) result {
				return carapaceWith(t, cli.Config{Stdout: &out2, Stderr: &errb2, NewEngine: engines}, h, args...)
			})
			if c := checks["engine"]; c.Status != tc.status || !strings.Contains(c.Message, tc.msg) || c.Fix != tc.fix {
				t.Fatalf("doctor: %+v", c)
			}
		})
	}
}

// --telegram-token-stdin stores the token, turns the channel on in
// config.toml and, with --telegram-pair, writes a pairing code.
func TestSetupTelegram(t *testing.T) {
	h := emptyHome(t)
	var out, errb testutil.Buffer
	r := carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("123456:AAF-secret\n"), NewEngine: noEngine, ServiceRunner: (&serviceFake{}).run}, h,
		"setup", "--yes", "--telegram-token-stdin", "--telegram-pair")
	if !strings.Contains(stepLine(r.stdout, "done", "telegram"), "bot token stored (17 bytes)") || !strings.Contains(r.stdout, "/start ") ||
		!strings.Contains(r.stdout, "plugins.telegram.surface = true") || !strings.Contains(r.stdout, `groups.main.topics = ["message.inbound", "task.triggered"]`) {
		t.Fatalf("setup: %+v", r)
	}
	if strings.Contains(r.stdout+r.stderr, "AAF-secret") {
		t.Fatal("setup printed the token")
	}
	cfg, err := config.Load(h.Config())
	if err != nil || !cfg.Plugins["telegram"].Surface || len(cfg.Groups["main"].Topics) != 2 {
		t.Fatalf("config: %+v %+v, %v", cfg.Plugins, cfg.Groups, err)
	}
	if !pairing.Pending(h.DataDir("telegram")) {
		t.Fatal("no pairing code written")
	}
	// A model key that cannot be one is not stored.
	r = carapaceWith(t, cli.Config{Stdout: &testutil.Buffer{}, Stderr: &errb, Stdin: strings.NewReader("sk-ant-api03 and some text\n"), NewEngine: noEngine, ServiceRunner: (&serviceFake{}).run}, h,
		"setup", "--yes", "--llm-key-stdin")
	if r.code != 1 || !strings.Contains(stepLine(r.stdout, "fail", "model key"), "that is not a key") || strings.Contains(r.stdout, "some text") {
		t.Fatalf("a paste with spaces: %+v", r)
	}
	if _, err := keychain.Default(h.CredentialsDir()).Get(keychain.LLMPlugin, keychain.LLMKeyAPI); err == nil {
		t.Fatal("the bad key was stored")
	}
	// Two secrets cannot both come from stdin.
	r = carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, NewEngine: noEngine}, h, "setup", "--yes", "--telegram-token-stdin", "--llm-key-stdin")
	if r.code != 2 {
		t.Fatalf("both secrets from stdin: %+v", r)
	}
}

// A token stored while a core runs reaches its Telegram plugin at once.
func TestSetupTelegramRestartsThePlugin(t *testing.T) {
	fc := newFakeCore(t)
	fc.b.SetStatus(api.Status{Version: "test", PID: 4242, Plugins: []api.PluginStatus{{Name: "telegram", State: "failed", Problem: "telegram: no bot token"}}})
	var out, errb testutil.Buffer
	r := carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("123456:AAF-secret\n"), NewEngine: noEngine, ServiceRunner: (&serviceFake{}).run}, fc.home,
		"setup", "--yes", "--telegram-token-stdin")
	if got := fc.b.Restarts(); len(got) != 1 || got[0] != "telegram" {
		t.Fatalf("restarts %v:\n%s", got, r.stdout)
	}
	if !strings.Contains(r.stdout, "done  telegram   the running core's Telegram plugin restarted with the token") {
		t.Errorf("the restart is not shown:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "restart it for this to take effect") {
		t.Errorf("the config change is not said to need a restart:\n%s", r.stdout)
	}
}

// A stored model key the store will not read (here: a file open to
// others) is a failure that names the fix, not a missing key to prompt
// for over it.
func TestSetupUnreadableKey(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("the file store; macOS uses the Keychain")
	}
	h := emptyHome(t)
	store := keychain.Default(h.CredentialsDir())
	if err := store.Set(keychain.LLMPlugin, keychain.LLMKeyAPI, []byte("sk-ant-api03-x")); err != nil {
		t.Fatal(err)
	}
	run := func() result {
		var out, errb testutil.Buffer
		return carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, NewEngine: noEngine, ServiceRunner: (&serviceFake{}).run}, h, "setup", "--yes")
	}
	if r := run(); stepLine(r.stdout, "ok", "model key") == "" {
		t.Fatalf("a readable key: %+v", r)
	}
	if err := os.Chmod(filepath.Join(h.CredentialsDir(), "plugins", keychain.LLMPlugin, keychain.LLMKeyAPI), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run()
	if l := stepLine(r.stdout, "fail", "model key"); !strings.Contains(l, "unreadable") || r.code != 1 {
		t.Fatalf("an unreadable key: %+v", r)
	}
}

// TestSetupCalendar: the flags set the calendar up (config and the
// password in the store); a run without them keeps it; a URL the plugin
// would refuse, or a zone that is not one, fails naming why, and changes
// nothing.
func TestSetupCalendar(t *testing.T) {
	h := emptyHome(t)
	run := func(stdin string, args ...string) result {
		var out, errb testutil.Buffer
		return carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin), NewEngine: noEngine, ServiceRunner: (&serviceFake{}).run}, h,
			append([]string{"setup", "--yes", "--engine", "none"}, args...)...)
	}
	r := run("")
	if !strings.Contains(stepLine(r.stdout, "skip", "calendar"), "not set up") {
		t.Fatalf("no flags, no calendar: %+v", r)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--calendar-url", "http://caldav.example.com/"}, "plain http only to this machine"},
		{[]string{"--calendar-url", "caldav.example.com"}, "is not a URL"},
		{[]string{"--calendar-url", "https://caldav.example.com/", "--calendar-zone", "Paris"}, `"Paris" is not an IANA time zone`},
		{[]string{"--calendar-user", "me"}, "no CalDAV URL"},
	} {
		r := run("pw", append(tc.args, "--calendar-password-stdin")...)
		if r.code != 1 || !strings.Contains(stepLine(r.stdout, "fail", "calendar"), tc.says) {
			t.Errorf("%v: %+v", tc.args, r)
		}
	}
	if _, err := keychain.Default(h.CredentialsDir()).Get("calendar", "caldav_password"); err == nil {
		t.Fatal("a refused setup stored the password")
	}
	if cfg, err := config.Load(h.Config()); err != nil || cfg.Plugins["calendar"].Config != nil {
		t.Fatalf("a refused setup wrote the config: %+v, %v", cfg.Plugins, err)
	}

	const pw = "caldav app password"
	r = run(pw, "--calendar-url", "http://127.0.0.1:5232/", "--calendar-user", "alice", "--calendar-zone", "Europe/Paris", "--calendar-password-stdin")
	if r.code != 0 || !strings.Contains(stepLine(r.stdout, "done", "calendar"), "CalDAV password stored (19 bytes)") || strings.Contains(r.stdout+r.stderr, pw) {
		t.Fatalf("setup --calendar-…: %+v", r)
	}
	// Where the plugin reads it (its credential key).
	if b, err := keychain.Default(h.CredentialsDir()).Get("calendar", calendar.CredentialKey); err != nil || string(b) != pw {
		t.Fatalf("stored: %q, %v", b, err)
	}
	cfg, err := config.Load(h.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, on := cfg.Plugins["calendar"]; !on {
		t.Fatal("the calendar plugin is not turned on")
	}
	if c := cfg.Plugins["calendar"].Config; c["caldav_url"] != "http://127.0.0.1:5232/" || c["username"] != "alice" || c["time_zone"] != "Europe/Paris" {
		t.Fatalf("[plugins.calendar.config]: %+v", c)
	}
	r = run("")
	if !strings.Contains(stepLine(r.stdout, "ok", "calendar"), "CalDAV at http://127.0.0.1:5232/") {
		t.Fatalf("again, nothing to change: %+v", r)
	}
}
