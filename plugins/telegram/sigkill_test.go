//go:build unix

package telegram

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"

	"github.com/carapace-dev/carapace/internal/testutil"
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
	envCalls  = "TELEGRAM_TEST_CALLS" // the surface calls (SetPaused, Decide) are appended to it
	envCard   = "TELEGRAM_TEST_CARD"  // "1": show an approval card at the start
)

// fileServices records published events and surface calls in files,
// synced, so that they survive the process's SIGKILL. Its Decide is the
// core's: a confirmation decided once (in this process or an earlier
// one) is refused as already decided.
type fileServices struct {
	*plugintest.Services
	mu    sync.Mutex
	path  string
	calls string
}

// appendLine appends line to path and syncs it.
func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		return err
	}
	return f.Sync()
}

func (s *fileServices) SetPaused(ctx context.Context, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return appendLine(s.calls, []byte(fmt.Sprintf("SetPaused %v", paused)))
}

func (s *fileServices) Decide(ctx context.Context, d plugin.Decision) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, _ := os.ReadFile(s.calls)
	if strings.Contains(string(raw), "Decide "+d.ID) {
		return fmt.Errorf("%w: approved on telegram by %s", plugin.ErrAlreadyDecided, d.Decider)
	}
	return appendLine(s.calls, []byte(fmt.Sprintf("Decide %s %v", d.ID, d.Approve)))
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
	svc := &fileServices{path: os.Getenv(envEvents), calls: os.Getenv(envCalls), Services: &plugintest.Services{Plugin: Name, Channel: true, Surface: true,
		Credentials: plugintest.NewFakeCredentials(map[string]string{CredentialKey: fakebot.Token}),
		Status:      plugin.CoreStatus{Sessions: 1}}}
	cfg := map[string]any{"owner_id": json.Number("4242"), "api_url": os.Getenv(envURL), "debounce_ms": json.Number("0")}
	if err := h.Init(context.Background(), cfg, svc); err != nil {
		t.Fatalf("helper: Init: %v", err)
	}
	if os.Getenv(envCard) == "1" {
		c := api.Confirmation{ID: confID, Tool: "send_email", Group: "main", Session: "s-1", ArgsHash: argsHash,
			Arguments: json.RawMessage(`{"to":"bob@example.com"}`), CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
		if err := h.HandleEvent(context.Background(), &plugin.Event{Topic: "confirmation.requested", Group: "main", Source: "core", Payload: plugintest.Payload(c)}); err != nil {
			t.Fatalf("helper: the card: %v", err)
		}
	}
	time.Sleep(30 * time.Second) // until the test kills it
	t.Fatal("helper: not killed")
}

// helper is a running helper process.
type helper struct{ *testutil.Proc }

func startHelper(t *testing.T, url, dir, events, crash string, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envHelper+"=1", envURL+"="+url, envDir+"="+dir, envEvents+"="+events, envCrash+"="+crash,
		envCalls+"="+filepath.Join(dir, "calls.txt"))
	cmd.Env = append(cmd.Env, env...)
	return &helper{testutil.StartProc(t, cmd, fmt.Sprintf("helper (crash at %q)", crash))}
}

// killed waits for the helper to die of SIGKILL.
func (h *helper) killed(t *testing.T) { t.Helper(); h.Killed(t, 20*time.Second) }

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
		{"update:after-commit", 1, false}, // a relaxed commit (debounce 0): in the WAL, which outlives the process
		{"publish:before-mark", 1, false},
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
			_ = second.Cmd.Process.Signal(syscall.SIGKILL)
			second.killed(t)
			if !settled(t, dir) {
				t.Fatal("prompts still queued or being handed over")
			}
			evs := readEvents(t, events)
			if len(evs) != tc.events {
				t.Fatalf("%d message.inbound events across the crash, want %d", len(evs), tc.events)
			}
			for _, ev := range evs {
				if plugintest.Member(&ev, "text") != "exactly once, please" {
					t.Errorf("event text %q", plugintest.Member(&ev, "text"))
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

// calls returns the surface calls the helper processes made, in order.
func calls(t *testing.T, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "calls.txt"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(raw)), " ", "_"))
}

// actionsSettled reports whether no command or button press in dir's
// database waits to be done.
func actionsSettled(t *testing.T, dir string) bool {
	t.Helper()
	st, err := openStore(t.Context(), dir)
	if err != nil {
		return false
	}
	defer st.close()
	left, err := st.pendingActions(t.Context())
	return err == nil && len(left) == 0
}

// TestSIGKILLCommands kills a real plugin process at each step of a
// command's and a button press's handling — after the update is
// recorded, before its effect, after its effect, after it is marked done
// — restarts it on the same data folder, and checks that the effect
// happened (nothing lost), that no decision was taken twice and no answer
// sent twice, and that Telegram was told to forget the update.
func TestSIGKILLCommands(t *testing.T) {
	points := []struct {
		point   string
		effects int  // surface calls in all (an effect repeated after the crash is the same state)
		answer  bool // the answer reaches the phone (it is lost when the crash falls after done, before it leaves)
	}{
		{"update:after-commit", 1, true},
		{"action:before-effect", 1, true},
		{"action:after-effect", 2, true},
		{"action:done", 1, false},
	}
	for _, p := range points {
		t.Run("pause at "+p.point, func(t *testing.T) {
			fake := fakebot.New(t)
			dir, events := t.TempDir(), t.TempDir()+"/events.jsonl"
			id := fake.PrivateText(owner, "/pause")
			startHelper(t, fake.URL(), dir, events, p.point).killed(t)
			if fake.Confirmed() >= id {
				t.Fatalf("the command was confirmed to Telegram before the crash")
			}
			second := startHelper(t, fake.URL(), dir, events, "")
			waitFor(t, "the command handled after the restart", func() bool {
				return fake.Confirmed() >= id && actionsSettled(t, dir) && len(calls(t, dir)) >= 1 && (!p.answer || len(fake.Texts(owner)) > 0)
			})
			time.Sleep(200 * time.Millisecond) // a second answer would come now
			_ = second.Cmd.Process.Signal(syscall.SIGKILL)
			second.killed(t)
			got := calls(t, dir)
			if len(got) != p.effects {
				t.Errorf("surface calls %v, want SetPaused true %d time(s)", got, p.effects)
			}
			for _, c := range got {
				if c != "SetPaused_true" {
					t.Errorf("surface call %s", c)
				}
			}
			answers := 0
			for _, m := range fake.Texts(owner) {
				if strings.Contains(m, "Paused") {
					answers++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[p.answer]; answers != want {
				t.Errorf("%d answers %q, want %d", answers, fake.Texts(owner), want)
			}
		})
		t.Run("Approve at "+p.point, func(t *testing.T) {
			fake := fakebot.New(t)
			dir, events := t.TempDir(), t.TempDir()+"/events.jsonl"
			first := startHelper(t, fake.URL(), dir, events, p.point, envCard+"=1")
			var card fakebot.Message
			waitFor(t, "the card", func() bool {
				ms := fake.Messages(owner)
				if len(ms) > 0 {
					card = ms[0]
				}
				return len(ms) > 0
			})
			id, q := fake.Callback(owner, fakebot.PrivateChat(owner), card.MessageID, button(t, card, "Approve"))
			first.killed(t)
			second := startHelper(t, fake.URL(), dir, events, "", envCard+"=1")
			waitFor(t, "the press handled after the restart", func() bool {
				return fake.Confirmed() >= id && actionsSettled(t, dir) && len(calls(t, dir)) >= 1 && (!p.answer || len(fake.Answered()) > 0)
			})
			time.Sleep(200 * time.Millisecond) // a second answer would come now
			_ = second.Cmd.Process.Signal(syscall.SIGKILL)
			second.killed(t)
			if got := calls(t, dir); len(got) != 1 || got[0] != "Decide_"+confID+"_true" {
				t.Errorf("decisions %v, want one approval", got)
			}
			answered := 0
			for _, a := range fake.Answered() {
				if a == q {
					answered++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[p.answer]; answered != want {
				t.Errorf("the press was answered %d times, want %d", answered, want)
			}
			if n := len(fake.Messages(owner)); n != 1 {
				t.Errorf("%d messages, want the one card", n)
			}
		})
	}
}
