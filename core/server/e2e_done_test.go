package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/runtime"
)

// doneEngine stands in for a container engine whose agent says it is
// done when the test wants, and whose container's teardown takes as long
// as the test wants. A warm container first waits for its claim as the
// real entrypoints do (Apple's way: polling for "go" in its claim
// folder). Then the agent prints an answer and the entrypoint's done line
// — with the token of the container's spec, or wrongToken when set —
// once sayDone is closed (at once when nil), and the "container" lives on
// until hold is closed or it is stopped.
type doneEngine struct {
	fakeEngine
	wrongToken string
	sayDone    chan struct{}
	hold       chan struct{}

	mu      sync.Mutex
	starts  int
	running int
}

func (e *doneEngine) Run(ctx context.Context, s runtime.Spec, io runtime.IO) (int, error) {
	e.mu.Lock()
	e.starts++
	e.running++
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running--
		e.mu.Unlock()
	}()
	stopped := func() (int, error) { return 143, context.Cause(ctx) }
	var claim string
	for _, m := range s.Mounts {
		if m.Target == "/run/carapace/claim" {
			claim = m.Source
		}
	}
	for claim != "" {
		if _, err := os.Stat(filepath.Join(claim, "go")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return stopped()
		case <-time.After(5 * time.Millisecond):
		}
	}
	if e.sayDone != nil {
		select {
		case <-e.sayDone:
		case <-ctx.Done():
			return stopped()
		}
	}
	token := e.wrongToken
	for _, v := range s.Env {
		if t, ok := strings.CutPrefix(v, "CARAPACE_DONE="); ok && token == "" {
			token = t
		}
	}
	fmt.Fprintf(io.Stdout, "the agent's answer\n\ncarapace-agent-done %s 0\n", token)
	select {
	case <-e.hold:
		return 0, nil
	case <-ctx.Done():
		return stopped()
	}
}

// counts returns how many containers were started and how many still run.
func (e *doneEngine) counts() (started, running int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.starts, e.running
}

// A task run ends when the agent's entrypoint says the agent is done, not
// when the engine has torn the container down: the run is recorded "ok"
// while the container still runs, and its session stays open until the
// container has gone. The control: a done line with another token is
// output like any other, and the run waits for the container's exit.
func TestAnswerWhenTheAgentIsDone(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wrongToken string
	}{{"the container's token", ""}, {"another token", "0123456789abcdef01234567"}} {
		t.Run(tc.name, func(t *testing.T) {
			e := &doneEngine{fakeEngine: fakeEngine{info: homebrewApple}, wrongToken: tc.wrongToken, hold: make(chan struct{})}
			c := startFakeCore(t, e, "[groups.main]\n[sessions]\nwarm = 0\n")
			id := runTaskNow(t, c.Home, "anything")
			waitFor(t, "the container to run", func() bool { return running(e) == 1 })
			if tc.wrongToken == "" {
				waitFor(t, "the run to end while its container runs", func() bool {
					rs := taskRuns(t, c.Home, id)
					return len(rs) == 1 && rs[0].State == "ok"
				})
				if running(e) != 1 {
					t.Fatal("the container was gone before the run was recorded: the test proves nothing")
				}
				if ss, err := c.Client.Sessions(context.Background()); err != nil || len(ss) != 1 {
					t.Fatalf("while its container runs, the session is not open: %v, %v", ss, err)
				}
			} else {
				// Nothing ends the run but the container: give the core time
				// it would need to end it on the line, then check it did not.
				waitFor(t, "the run to start", func() bool {
					rs := taskRuns(t, c.Home, id)
					return len(rs) == 1 && rs[0].State == "running"
				})
				for range 20 {
					if rs := taskRuns(t, c.Home, id); rs[0].State != "running" {
						t.Fatalf("a done line with another token ended the run: %+v", rs[0])
					}
				}
			}
			close(e.hold)
			waitFor(t, "the run to be recorded ok and the session closed", func() bool {
				rs := taskRuns(t, c.Home, id)
				ss, err := c.Client.Sessions(context.Background())
				return len(rs) == 1 && rs[0].State == "ok" && err == nil && len(ss) == 0
			})
		})
	}
}

// A claimed warm container's replacement starts once the claimed
// container has gone, or a second after the claim on the core's clock at
// the latest: not at the claim, nor when the agent says it is done, where
// the engine's work of starting it would slow the answer the claim was
// for.
func TestWarmReplacedOnceTheClaimedIsGone(t *testing.T) {
	// noneStarted fails if a second container starts within 300 ms.
	noneStarted := func(t *testing.T, e *doneEngine, when string) {
		t.Helper()
		for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if n := started(e); n != 1 {
				t.Fatalf("%d containers started %s: the replacement did not wait for the claimed one to go", n, when)
			}
		}
	}
	for _, by := range []string{"gone", "clock"} {
		t.Run(by, func(t *testing.T) {
			e := &doneEngine{fakeEngine: fakeEngine{info: homebrewApple}, sayDone: make(chan struct{}), hold: make(chan struct{})}
			clk := newFakeClock()
			c := startCoreWith(t, coreOptions{Config: "[runtime]\nengine = \"apple\"\n[groups.main]\n[sessions]\nwarm_idle = \"1h\"\n", Clock: clk,
				NewEngine: func(name string) (runtime.Engine, error) { return e, nil }})
			waitFor(t, "a warm container", func() bool { return len(warmOf(t, c, "main")) == 1 && started(e) == 1 })
			id := runTaskNow(t, c.Home, "anything")
			waitFor(t, "the claim", func() bool {
				rs := taskRuns(t, c.Home, id)
				return len(rs) == 1 && rs[0].State == "running"
			})
			noneStarted(t, e, "by the claim's time")
			if by == "clock" {
				clk.Advance(time.Second)
				waitFor(t, "the replacement", func() bool { return started(e) == 2 })
				if rs := taskRuns(t, c.Home, id); rs[0].State != "running" {
					t.Fatalf("the run ended without its agent: %+v", rs[0])
				}
				return
			}
			close(e.sayDone)
			waitFor(t, "the run's end", func() bool { rs := taskRuns(t, c.Home, id); return rs[0].State == "ok" })
			noneStarted(t, e, "once the agent said it was done, its container still there")
			close(e.hold)
			waitFor(t, "the replacement", func() bool { return started(e) == 2 })
		})
	}
}

func started(e *doneEngine) int { n, _ := e.counts(); return n }
func running(e *doneEngine) int { _, n := e.counts(); return n }
