// Package scripts_test tests the shell scripts the Makefile and the macOS
// workflow run: bundle-plugins.sh, which lays out the bundled plugins and
// prints their pins (make build, make app-bundle), and check-bundle.sh,
// which checks a carapace binary against the plugins beside it. The macOS
// half (lipo, codesign) runs here with stand-ins that record their calls
// and, like codesign, rewrite what they sign; the rest runs for real.
package scripts_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil"
)

// bundled are the plugins with a handler in this tree, as the scripts
// find them.
func bundled(t *testing.T) []string {
	t.Helper()
	mains, err := filepath.Glob("../plugins/*/handler/main.go")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no bundled plugin in ../plugins (%v)", err)
	}
	var names []string
	for _, m := range mains {
		names = append(names, filepath.Base(filepath.Dir(filepath.Dir(m))))
	}
	return names
}

func sum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sameTree fails the test unless the trees at a and b hold the same files
// with the same bytes.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	files := func(root string) map[string]string {
		m := map[string]string{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			raw, err := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			m[rel] = string(raw)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	fa, fb := files(a), files(b)
	if len(fa) == 0 || len(fa) != len(fb) {
		t.Fatalf("%s has %d files, %s %d", a, len(fa), b, len(fb))
	}
	for k, v := range fa {
		if fb[k] != v {
			t.Errorf("%s differs between %s and %s", k, a, b)
		}
	}
}

// bundle runs bundle-plugins.sh with args and env and returns its stdout.
func bundle(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("./bundle-plugins.sh", args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bundle-plugins.sh %q: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// make build's layout: each plugin folder with its handler, manifest and
// skills, and on stdout only the pins, each the handler's SHA-256.
func TestBundlePlugins(t *testing.T) {
	testutil.Require(t, "bash", "the scripts are bash")
	out := t.TempDir()
	stdout := bundle(t, nil, out)
	var want []string
	for _, name := range bundled(t) {
		dir := filepath.Join(out, name)
		if fi, err := os.Stat(filepath.Join(dir, "handler")); err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Fatalf("%s/handler: %v", dir, err)
		}
		sameTree(t, filepath.Join("..", "plugins", name, "skills"), filepath.Join(dir, "skills"))
		if a, b := sum(t, filepath.Join("..", "plugins", name, "manifest.json")), sum(t, filepath.Join(dir, "manifest.json")); a != b {
			t.Errorf("%s/manifest.json is not the plugin's", dir)
		}
		want = append(want, name+"="+sum(t, filepath.Join(dir, "handler")))
	}
	if got := strings.TrimSuffix(stdout, "\n"); got != strings.Join(want, ",") {
		t.Errorf("pins %q, want %q", got, strings.Join(want, ","))
	}
	// A name that is not a bundled plugin is refused, and nothing built.
	cmd := exec.Command("./bundle-plugins.sh", filepath.Join(out, "x"), "../etc")
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "is not a plugin with a handler") {
		t.Errorf("bundle-plugins.sh ../etc: %v\n%s", err, b)
	}
}

// stand-ins for the macOS tools, recording their calls in $LOG. The fake
// go writes what it was asked to build; lipo joins the files (and
// verify_arch checks both are there); codesign, like the real one,
// rewrites the file it signs.
var fakes = map[string]string{
	"go": `#!/bin/sh
out=; prev=
for a; do [ "$prev" = -o ] && out=$a; prev=$a; done
echo "go $GOOS/$GOARCH cgo=$CGO_ENABLED macos=$MACOSX_DEPLOYMENT_TARGET" >> "$LOG"
echo "handler $GOOS/$GOARCH" > "$out"
`,
	"lipo": `#!/bin/sh
if [ "$1" = -create ]; then
  echo "lipo -create" >> "$LOG"
  cat "$4" "$5" > "$3"
  exit 0
fi
echo "lipo $2 $3 $4" >> "$LOG"
grep -q darwin/arm64 "$1" && grep -q darwin/amd64 "$1"
`,
	"codesign": `#!/bin/sh
echo "codesign $*" | sed "s|$ROOT|ROOT|g" >> "$LOG"
for f; do :; done
echo "ad-hoc signature" >> "$f"
`,
}

// make app-bundle's half: a universal handler (both darwin slices, with
// cgo, for macOS 13), signed, and pinned after the signing, since codesign
// rewrites the file: the pin must be of the bytes the bundle ships.
func TestBundlePluginsDarwin(t *testing.T) {
	testutil.Require(t, "bash", "the scripts are bash")
	bin := t.TempDir()
	for name, script := range fakes {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	out := filepath.Join(root, "Carapace.app", "Contents", "Resources", "plugins")
	log := filepath.Join(root, "log")
	names := bundled(t)
	stdout := bundle(t, []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "GO=" + filepath.Join(bin, "go"), "LOG=" + log, "ROOT=" + root}, "--darwin", out)

	var want, calls []string
	for _, name := range names {
		handler := filepath.Join(out, name, "handler")
		raw, err := os.ReadFile(handler)
		if err != nil {
			t.Fatal(err)
		}
		if want := "handler darwin/arm64\nhandler darwin/amd64\nad-hoc signature\n"; string(raw) != want {
			t.Errorf("%s is %q, want both slices, signed: %q", handler, raw, want)
		}
		want = append(want, name+"="+sum(t, handler))
		calls = append(calls,
			"go darwin/arm64 cgo=1 macos=13.0",
			"go darwin/amd64 cgo=1 macos=13.0",
			"lipo -create",
			"lipo -verify_arch arm64 x86_64",
			"codesign --force --sign - ROOT/Carapace.app/Contents/Resources/plugins/"+name+"/handler")
	}
	if got := strings.TrimSuffix(stdout, "\n"); got != strings.Join(want, ",") {
		t.Errorf("pins %q, want the signed handlers' %q", got, strings.Join(want, ","))
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n"); !slices.Equal(got, calls) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(calls, "\n"))
	}
}

// built returns make build's bin/carapace, whose pins are bin/plugins'.
func built(t *testing.T) string {
	t.Helper()
	carapace, err := filepath.Abs("../bin/carapace")
	if err != nil {
		t.Fatal(err)
	}
	testutil.RequireFile(t, carapace, "the scripts are checked against make build's output: run make build")
	return carapace
}

// copyTree copies the tree at src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-R", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -R %s %s: %v\n%s", src, dst, err, out)
	}
}

// check-bundle.sh passes make build's bin/ and the same layout inside an
// app bundle, and fails, saying what is wrong, on each broken copy.
func TestCheckBundle(t *testing.T) {
	testutil.Require(t, "bash", "the scripts are bash")
	carapace := built(t)
	plugins := filepath.Join(filepath.Dir(carapace), "plugins")
	name := bundled(t)[0]

	// layout makes a carapace (a link: the script reads it, never runs
	// it) with a copy of bin/plugins where the core would look: beside it,
	// or in Contents/Resources when it is in Contents/MacOS.
	layout := func(t *testing.T, app bool) (exe, dir string) {
		root := t.TempDir()
		exeDir, dir := root, filepath.Join(root, "plugins")
		if app {
			exeDir = filepath.Join(root, "Carapace.app", "Contents", "MacOS")
			dir = filepath.Join(root, "Carapace.app", "Contents", "Resources", "plugins")
		}
		if err := os.MkdirAll(exeDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		copyTree(t, plugins, dir)
		exe = filepath.Join(exeDir, "carapace")
		if err := os.Symlink(carapace, exe); err != nil {
			t.Fatal(err)
		}
		return exe, dir
	}
	tests := []struct {
		name    string
		app     bool
		breakIt func(t *testing.T, dir string)
		says    string // "" : passes
	}{
		{name: "make build", says: ""},
		{name: "Carapace.app", app: true, says: ""},
		{name: "a handler changed after pinning", app: true, breakIt: func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, name, "handler"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("ad-hoc signature")
			f.Close()
		}, says: "does not carry the pin"},
		{name: "no plugins folder", breakIt: func(t *testing.T, dir string) { os.RemoveAll(dir) }, says: "the core would not find the plugin"},
		{name: "a skill missing", breakIt: func(t *testing.T, dir string) {
			ents, _ := os.ReadDir(filepath.Join(dir, name, "skills"))
			os.Remove(filepath.Join(dir, name, "skills", ents[0].Name()))
		}, says: "skills is not plugins/" + name + "/skills"},
		{name: "a manifest changed", breakIt: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, name, "manifest.json"), []byte("{}"), 0o644)
		}, says: "manifest.json is not"},
		{name: "a handler that does not run", breakIt: func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, name, "handler"), []byte("#!/bin/sh\nkill -9 $$\n"), 0o755)
		}, says: "handler did not run (exit 137)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exe, dir := layout(t, tt.app)
			if tt.breakIt != nil {
				tt.breakIt(t, dir)
			}
			out, err := exec.Command("./check-bundle.sh", exe).CombinedOutput()
			if tt.says == "" {
				if err != nil || !strings.Contains(string(out), "ok  "+name+": "+filepath.Join(dir, name)) {
					t.Fatalf("check-bundle.sh %s: %v\n%s", exe, err, out)
				}
				return
			}
			if err == nil || !strings.Contains(string(out), tt.says) {
				t.Fatalf("check-bundle.sh passes with %s, or does not say %q: %v\n%s", tt.name, tt.says, err, out)
			}
		})
	}
}

// appEnv names a built Carapace.app for TestAppRunsTheBundledPlugin to
// run in place of the app-shaped copy of make build's output. The macOS
// workflow sets it; it also lets the test store a dummy Telegram token in
// the user's Keychain (deleted afterwards), so set it only on a machine
// whose Keychain holds no real one.
const appEnv = "CARAPACE_TEST_APP"

// The real core, run from an app bundle's Contents/MacOS, finds the
// bundled Telegram plugin in Contents/Resources/plugins and starts its
// handler: the plugin gets as far as asking the Bot API (here a closed
// port), past the folder lookup, the pin check and, on a Mac, the
// handler's signature. A copy whose handler differs from its pin is
// refused by the same core (the control).
func TestAppRunsTheBundledPlugin(t *testing.T) {
	app := os.Getenv(appEnv)
	if app == "" && goruntime.GOOS == "darwin" {
		t.Skip("on macOS the test's credential goes to the user's Keychain: set " + appEnv + " to a built Carapace.app on a throwaway machine (the macOS workflow does)")
	}
	if app == "" {
		app = appFromBuild(t)
	}
	if !slices.Contains(bundled(t), "telegram") {
		t.Skip("no bundled telegram plugin in this tree")
	}
	p := telegramIn(t, app)
	problem, _ := p["problem"].(string)
	if p["source"] != "bundled" || p["dir"] != filepath.Join(app, "Contents", "Resources", "plugins", "telegram") ||
		!strings.Contains(problem, "init: telegram: could not reach the Bot API at http://127.0.0.1:9") {
		t.Fatalf("the bundled plugin did not start from %s: %v", app, p)
	}

	changed := filepath.Join(t.TempDir(), "Carapace.app")
	copyTree(t, app, changed)
	f, err := os.OpenFile(filepath.Join(changed, "Contents", "Resources", "plugins", "telegram", "handler"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("ad-hoc signature")
	f.Close()
	p = telegramIn(t, changed)
	if problem, _ := p["problem"].(string); !strings.Contains(problem, "does not match its SHA-256 pin") {
		t.Fatalf("a handler changed after pinning was not refused: %v", p)
	}
}

// appFromBuild lays make build's carapace and plugins out as Carapace.app
// holds them.
func appFromBuild(t *testing.T) string {
	t.Helper()
	carapace := built(t)
	app := filepath.Join(t.TempDir(), "Carapace.app")
	macos := filepath.Join(app, "Contents", "MacOS")
	resources := filepath.Join(app, "Contents", "Resources")
	for _, d := range []string{macos, resources} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A copy, not a link: the core resolves its own path (os.Executable).
	copyTree(t, carapace, filepath.Join(macos, "carapace"))
	copyTree(t, filepath.Join(filepath.Dir(carapace), "plugins"), filepath.Join(resources, "plugins"))
	return app
}

// telegramIn runs the core of app with the Telegram plugin on, in a home
// of its own, with a dummy token and a Bot API on a closed port, and
// returns what `carapace plugin list --json` says of the plugin once it
// has started or failed.
func telegramIn(t *testing.T, app string) map[string]any {
	t.Helper()
	exe := filepath.Join(app, "Contents", "MacOS", "carapace")
	home := filepath.Join(t.TempDir(), "home")
	carapace := func(stdin string, args ...string) ([]byte, error) {
		cmd := exec.Command(exe, append([]string{"--home", home}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		return cmd.Output()
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "[runtime]\nengine = \"none\"\n\n[plugins.telegram]\n[plugins.telegram.config]\napi_url = \"http://127.0.0.1:9\"\nowner_id = 1\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := carapace("123456:AAF-not-a-token\n", "auth", "set", "--plugin", "telegram", "--key", "bot_token"); err != nil {
		t.Fatalf("carapace auth set: %v\n%s", err, out)
	}
	defer carapace("", "auth", "delete", "--plugin", "telegram", "--key", "bot_token")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serve := exec.CommandContext(ctx, exe, "--home", home, "serve")
	var log testutil.Buffer
	serve.Stdout, serve.Stderr = &log, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		carapace("", "stop")
		serve.Wait()
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		var list []map[string]any
		if out, err := carapace("", "plugin", "list", "--json"); err == nil && json.Unmarshal(out, &list) == nil {
			for _, p := range list {
				if p["name"] == "telegram" && p["state"] != "starting" {
					return p
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the core never listed telegram as started or failed; its log:\n%s", log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
