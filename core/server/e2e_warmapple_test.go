package server_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/applecontainer"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// fakeAppleCLI builds applecontainer's stand-in for Apple's `container`
// CLI (applecontainer/testdata/README.md) and returns its path and the
// file it logs every argv to. Its containers run until stopped.
func fakeAppleCLI(t *testing.T) (bin, argvLog string) {
	t.Helper()
	dir := t.TempDir()
	bin, argvLog = filepath.Join(dir, "container"), filepath.Join(dir, "argv.log")
	cmd := exec.Command("go", "build", "-o", bin, "../../applecontainer/testdata/fakecontainer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the fake container CLI: %v\n%s", err, out)
	}
	data, err := filepath.Abs("../../applecontainer/testdata/versions")
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	// The services' app root, with the kernel Check looks for.
	kernels := filepath.Join(dir, "appRoot", "com.apple.container", "kernels")
	if err := os.MkdirAll(kernels, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kernels, "vmlinux-6.12.28-153"), []byte("not a kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("vmlinux-6.12.28-153", filepath.Join(kernels, "default.kernel-arm64")); err != nil {
		t.Fatal(err)
	}
	env, _ := json.Marshal(map[string]string{
		"FAKE_CONTAINER_LOG": argvLog, "FAKE_CONTAINER_VERSION": "1.2.2", "FAKE_CONTAINER_DATA": data,
		"FAKE_CONTAINER_STATE": state, "FAKE_CONTAINER_RUN_SLEEP": "10m",
		"FAKE_CONTAINER_APP_ROOT": filepath.Dir(kernels),
	})
	if err := os.WriteFile(filepath.Join(dir, "fake.env"), env, 0o644); err != nil {
		t.Fatal(err)
	}
	return bin, argvLog
}

// runCalls returns the `container run` argvs logged so far.
func runCalls(t *testing.T, argvLog string) [][]string {
	t.Helper()
	f, err := os.Open(argvLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var argv []string
		if err := json.Unmarshal(sc.Bytes(), &argv); err != nil {
			t.Fatalf("argv log: %v", err)
		}
		if len(argv) > 0 && argv[0] == "run" {
			out = append(out, argv)
		}
	}
	return out
}

var sessionIDRE = regexp.MustCompile(`s-[a-z2-7]{13}`)

// generic replaces what changes from run to run in args: the home, its
// hash (the instance label), session ids and the container's done token.
func generic(args []string, h string) []string {
	sum := sha256.Sum256([]byte(h))
	out := make([]string, len(args))
	for i, a := range args {
		a = strings.ReplaceAll(a, h, "$HOME")
		a = strings.ReplaceAll(a, hex.EncodeToString(sum[:6]), "$INSTANCE")
		if strings.HasPrefix(a, "CARAPACE_DONE=") {
			a = "CARAPACE_DONE=$TOKEN"
		}
		out[i] = sessionIDRE.ReplaceAllString(a, "$$SESSION")
	}
	return out
}

// The command line of a warm container on Apple's driver (pinned in a
// golden file) is that of a cold session of the group plus only the warm
// label, the claim folder (read-only), CARAPACE_WARM and
// CARAPACE_WARM_TIMEOUT; its claim folder
// has no FIFO (the VM does not share one), so the entrypoint polls for
// "go", which the claim writes. The fake CLI stands in for `container`.
func TestWarmOnTheAppleDriver(t *testing.T) {
	bin, argvLog := fakeAppleCLI(t)
	kit := &channelKit{}
	c := startCoreWith(t, coreOptions{Config: "[runtime]\nengine = \"apple\"\n[groups.main]\n",
		NewEngine: func(name string) (runtime.Engine, error) {
			return applecontainer.New(applecontainer.Options{Bin: bin}), nil
		},
		Builtins: func(bs []loader.Builtin) []loader.Builtin {
			return append(bs, loader.Builtin{Name: "chan", Manifest: []byte(channelKitManifest), New: func(loader.Env) plugin.Handler { return kit }})
		}})
	h := string(c.Home)
	waitWithin(t, 60*time.Second, "the warm container's run", func() bool { return len(runCalls(t, argvLog)) == 1 })
	warm := runCalls(t, argvLog)[0]
	testutil.Golden(t, filepath.Join("testdata", "golden", "apple-warm-run.args"), []byte(strings.Join(generic(warm, h), "\n")+"\n"))

	// A cold session of the group, through the control API (which warm
	// containers do not serve).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cold, err := c.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "container", Prompt: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	waitWithin(t, 60*time.Second, "the cold session's run", func() bool { return len(runCalls(t, argvLog)) == 2 })
	coldArgs := generic(runCalls(t, argvLog)[1], h)
	extra := []string{"--label", runtime.LabelSession + "=$SESSION", "--label", "carapace.warm=main",
		"-v", "$HOME/run/agent/$SESSION/claim:/run/carapace/claim:ro", "-e", "CARAPACE_WARM=/run/carapace/claim", "-e", "CARAPACE_WARM_TIMEOUT=…"}
	var rest []string
	warmG := generic(warm, h)
	for i := 0; i < len(warmG); i++ {
		if i+1 < len(warmG) && (warmG[i] == "--label" && warmG[i+1] == "carapace.warm=main" ||
			warmG[i] == "-v" && strings.HasSuffix(warmG[i+1], ":/run/carapace/claim:ro") ||
			warmG[i] == "-e" && (strings.HasPrefix(warmG[i+1], "CARAPACE_WARM=") || strings.HasPrefix(warmG[i+1], "CARAPACE_WARM_TIMEOUT="))) {
			i++
			continue
		}
		rest = append(rest, warmG[i])
	}
	if !slices.Equal(rest, coldArgs) {
		t.Errorf("the warm container's command line, less %q, differs from a cold session's:\n%q\n%q", extra[2:], rest, coldArgs)
	}

	// Claimed by an event of the group: "go" is written, no FIFO exists,
	// and another warm container starts behind it.
	id := sessionIDRE.FindString(strings.Join(warm, " "))
	claim := c.Home.Path("run", "agent", id, "claim")
	if _, err := os.Stat(filepath.Join(claim, "wake")); !os.IsNotExist(err) {
		t.Errorf("a FIFO in the claim folder of an Apple container: %v", err)
	}
	trigger := c.Session(t, "dev")
	sendEvent(t, c, trigger, "main", `tool.invoke.echo {"message":"apple"}`)
	waitFor(t, "the claim's go file", func() bool { _, err := os.Stat(filepath.Join(claim, "go")); return err == nil })
	waitWithin(t, 60*time.Second, "a warm container behind the claimed one", func() bool {
		calls := runCalls(t, argvLog)
		return len(calls) == 3 && slices.Contains(calls[2], "carapace.warm=main")
	})
}
