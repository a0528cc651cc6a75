//go:build unix

package telegram

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/internal/testutil/fakebot"
)

// The helper process: the test binary re-executed as a plugin process that
// a test can SIGKILL. Its environment names the fake Bot API, the data
// folder, a file its published events are appended to, and the step at
// which it kills itself.
const (
	envHelper = "TELEGRAM_TEST_HELPER"
	envURL    = "TELEGRAM_TEST_URL"
	envDir    = "TELEGRAM_TEST_DIR"
	envEvents = "TELEGRAM_TEST_EVENTS"
	envCrash  = "TELEGRAM_TEST_CRASH"
)

// fileServices records published events in a file, synced, so that they
// survive the process's SIGKILL.
type fileServices struct {
	*plugintest.Services
	mu   sync.Mutex
	path string
}

func (s *fileServices) PublishEvent(ctx context.Context, ev *plugin.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	b, _ := json.Marshal(ev)
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	return f.Sync()
}

// TestHelperProcess is not a test: it is the plugin process of TestSIGKILL
// and does nothing unless that test started it.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		return
	}
	crashAt := os.Getenv(envCrash)
	h := New(Options{DataDir: os.Getenv(envDir), Logger: testLogger(t), PollTimeout: 2 * time.Second,
		crash: func(p string) {
			if p == crashAt {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}})
	svc := &fileServices{path: os.Getenv(envEvents), Services: &plugintest.Services{Plugin: Name, Channel: true, Surface: true,
		Credentials: plugintest.NewFakeCredentials(map[string]string{CredentialKey: fakebot.Token}),
		Status:      plugin.CoreStatus{Sessions: 1}}}
	cfg := map[string]any{"owner_id": json.Number("4242"), "api_url": os.Getenv(envURL), "debounce_ms": json.Number("0")}
	if err := h.Init(context.Background(), cfg, svc); err != nil {
		t.Fatalf("helper: Init: %v", err)
	}
	time.Sleep(30 * time.Second) // until the test kills it
	t.Fatal("helper: not killed")
}

// helper is a running helper process.
type helper struct {
	cmd    *exec.Cmd
	stderr *strings.Builder
	done   chan struct{}
}

func startHelper(t *testing.T, url, dir, events, crash string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envHelper+"=1", envURL+"="+url, envDir+"="+dir, envEvents+"="+events, envCrash+"="+crash)
	var stderr strings.Builder
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stderr: &stderr, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-h.done
		if t.Failed() {
			t.Logf("helper (crash at %q) output:\n%s", crash, stderr.String())
		}
	})
	return h
}

// killed waits for the helper to die of SIGKILL.
func (h *helper) killed(t *testing.T) {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the helper did not crash")
	}
	if ws, ok := h.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the helper ended with %v, not SIGKILL", h.cmd.ProcessState)
	}
}

func readEvents(t *testing.T, path string) []plugin.Event {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []plugin.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev plugin.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// TestSIGKILL kills a real plugin process at each step of the
// exactly-once protocol, restarts it on the same data folder and checks
// that the owner's message reached the core once — or, where the crash
// fell between handing it over and recording that, at most once with the
// owner told.
func TestSIGKILL(t *testing.T) {
	cases := []struct {
		point  string
		events int
		note   bool // the owner is told the message may not have arrived
	}{
		{"update:before-commit", 1, false},
		{"update:after-commit", 1, false},
		{"publish:before", 0, true},
		{"publish:after", 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.point, func(t *testing.T) {
			fake := fakebot.New(t)
			dir, events := t.TempDir(), t.TempDir()+"/events.jsonl"
			id := fake.PrivateText(owner, "exactly once, please")
			startHelper(t, fake.URL(), dir, events, tc.point).killed(t)
			if c := fake.Confirmed(); c >= id && strings.HasPrefix(tc.point, "update:") {
				t.Fatalf("update %d was confirmed to Telegram before the crash", id)
			}

			second := startHelper(t, fake.URL(), dir, events, "")
			waitFor(t, "the update handled after the restart", func() bool { return fake.Confirmed() >= id })
			waitFor(t, "the outcome", func() bool {
				return len(readEvents(t, events)) >= tc.events && (!tc.note || len(fake.Texts(owner)) > 0) && settled(t, dir)
			})
			_ = second.cmd.Process.Signal(syscall.SIGKILL)
			second.killed(t)
			if !settled(t, dir) {
				t.Fatal("prompts still queued or being handed over")
			}
			evs := readEvents(t, events)
			if len(evs) != tc.events {
				t.Fatalf("%d message.inbound events across the crash, want %d", len(evs), tc.events)
			}
			for _, ev := range evs {
				if ev.Payload["text"] != "exactly once, please" {
					t.Errorf("event text %q", ev.Payload["text"])
				}
			}
			told := strings.Contains(strings.Join(fake.Texts(owner), "\n"), "may or may not have reached")
			if told != tc.note {
				t.Errorf("owner told %q; want a note: %v", fake.Texts(owner), tc.note)
			}
		})
	}
}

// settled reports whether no prompt in dir's database is queued or being
// handed over: nothing more can be published.
func settled(t *testing.T, dir string) bool {
	t.Helper()
	st, err := openStore(t.Context(), dir)
	if err != nil {
		return false
	}
	defer st.close()
	left, err := st.prompts(t.Context(), stQueued, stPublishing)
	return err == nil && len(left) == 0
}
