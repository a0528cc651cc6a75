package server_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/cmd/wiring/coretest"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/server"
)

// fakeEngine stands in for a container engine in the real core: its Run
// runs nothing, optionally connects to the session's socket as an agent
// does, and on cancellation records which of the container's socket
// mounts still exist.
type fakeEngine struct {
	info  runtime.Info
	dial  bool          // Run connects to the session's socket, as an agent's first ipc call does
	watch time.Duration // after cancellation, how long Run checks that the sockets stay

	mu      sync.Mutex
	sockets map[string][]string // by container: socket sources that vanished while it was stopping
	stopped map[string]bool     // containers whose Run has returned
}

var _ runtime.Engine = (*fakeEngine)(nil)

func (e *fakeEngine) Name() string { return e.info.Engine }

func (e *fakeEngine) Check(context.Context) (runtime.Info, error) { return e.info, nil }

func (e *fakeEngine) Run(ctx context.Context, s runtime.Spec, _ runtime.IO) (int, error) {
	var socks []string
	for _, m := range s.Mounts {
		if fi, err := os.Stat(m.Source); err == nil && fi.Mode().Type() == os.ModeSocket {
			socks = append(socks, m.Source)
		}
	}
	if e.dial {
		for _, m := range s.Mounts {
			if m.Target == runtime.SocketPath {
				c, err := net.Dial("unix", m.Source)
				if err != nil {
					return -1, fmt.Errorf("fake agent: %w", err)
				}
				defer c.Close()
			}
		}
	}
	<-ctx.Done()
	// The container is being stopped: it still lives, so its sockets must
	// still be there, for as long as it takes to go.
	var gone []string
	for end := time.Now().Add(e.watch); ; time.Sleep(10 * time.Millisecond) {
		for _, p := range socks {
			if _, err := os.Stat(p); err != nil && !slices.Contains(gone, p) {
				gone = append(gone, p)
			}
		}
		if time.Now().After(end) {
			break
		}
	}
	e.mu.Lock()
	if e.sockets == nil {
		e.sockets, e.stopped = map[string][]string{}, map[string]bool{}
	}
	e.sockets[s.Name] = gone
	e.stopped[s.Name] = true
	e.mu.Unlock()
	return 143, fmt.Errorf("container %s stopped: %w", s.Name, context.Cause(ctx))
}

func (e *fakeEngine) Stop(context.Context, string) error { return nil }

func (e *fakeEngine) List(context.Context, string, string) ([]string, error) { return nil, nil }

// vanished returns the sockets of container name that were gone while it
// was stopping, and whether its Run has returned.
func (e *fakeEngine) vanished(name string) ([]string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sockets[name], e.stopped[name]
}

// startFakeCore runs a real core whose "apple" engine is e, with extra
// after the config's [runtime] section.
func startFakeCore(t *testing.T, e runtime.Engine, extra string) *coretest.Core {
	t.Helper()
	return coretest.MustStart(t, coretest.Options{
		Config: "[runtime]\nengine = \"apple\"\n" + extra,
		Server: server.Options{NewEngine: func(name string) (runtime.Engine, error) {
			if name != "apple" {
				return nil, fmt.Errorf("no engine %s in this test", name)
			}
			return e, nil
		}},
	})
}

var homebrewApple = runtime.Info{Engine: "apple", Version: "1.2.2", Bin: "/opt/homebrew/bin/container", BinFrom: "Homebrew, not on PATH"}

// The core checks its engine at start (to remove leftovers) and says in
// its status which binary it runs and how it found it; `carapace status`
// prints it.
func TestStatusNamesTheEngineBinary(t *testing.T) {
	c := startFakeCore(t, &fakeEngine{info: homebrewApple}, "")
	st, err := c.Client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []api.EngineStatus{{Name: "apple", Version: "1.2.2", Bin: "/opt/homebrew/bin/container", BinFrom: "Homebrew, not on PATH"}}
	if !slices.Equal(st.Engines, want) {
		t.Errorf("engines %+v, want %+v", st.Engines, want)
	}
	out, errOut, code := runCLI(t, c.Home, "status")
	if code != 0 || !strings.Contains(out, "apple 1.2.2") || !strings.Contains(out, "/opt/homebrew/bin/container (Homebrew, not on PATH)") {
		t.Errorf("carapace status: exit %d\n%s%s", code, out, errOut)
	}
}
