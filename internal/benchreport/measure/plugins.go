package measure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/server"
)

// OOPEchoTopic invokes the out-of-process echo plugin InstallEchoPlugins
// installs as "oop".
const OOPEchoTopic = "tool.invoke.oop_echo"

// BuildEchoPlugin builds the out-of-process echo handler
// (internal/benchreport/oopecho) into dst, statically, as `carapace plugin
// build` does.
func BuildEchoPlugin(dst string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", dst, "github.com/carapace-dev/carapace/internal/benchreport/oopecho")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build oopecho: %w\n%s", err, out)
	}
	return nil
}

// InstallEchoPlugins installs names as out-of-process echo plugins into h
// with `carapace plugin install`'s code; plugin "x" provides tool "x_echo".
func InstallEchoPlugins(h home.Dir, handler string, names ...string) error {
	bin, err := os.ReadFile(handler)
	if err != nil {
		return err
	}
	for _, name := range names {
		src, err := os.MkdirTemp("", "oopsrc")
		if err != nil {
			return err
		}
		defer os.RemoveAll(src)
		src = filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Join(src, "skills"), 0o700); err != nil {
			return err
		}
		tool := name + "_echo"
		manifest := fmt.Sprintf(`{"description":"echo, out of process","version":"1.0.0","app_compat":">=0.1.0","author":{"name":"bench"},
"provides":{"channels":[],"tools":[{"name":%q,"description":"Return the message","risk_level":"low",
"arguments_schema":{"type":"object","required":["message"],"additionalProperties":false,"properties":{"message":{"type":"string","maxLength":4096}}}}]},
"subscribes":[]}`, tool)
		files := map[string][]byte{
			"manifest.json":          []byte(manifest),
			"skills/" + name + ".md": []byte("# " + name + "\n\n## " + tool + "\n\n    ipc tool.invoke." + tool + " '{\"message\":\"hi\"}'\n"),
			"handler":                bin,
		}
		for p, data := range files {
			if err := os.WriteFile(filepath.Join(src, p), data, 0o700); err != nil {
				return err
			}
		}
		if _, err := install.Install(h, src, install.Options{}); err != nil {
			return fmt.Errorf("install %s: %w", name, err)
		}
	}
	return nil
}

// StartCoreWith starts a core like StartCore after setup has prepared its
// home, and reports how long server.Run took from its start to ready.
func StartCoreWith(config string, setup func(home.Dir) error) (*Core, time.Duration, error) {
	return startCoreLogged(config, setup, nil)
}

// startCoreLogged is StartCoreWith with the core logging to log (nil
// discards).
func startCoreLogged(config string, setup func(home.Dir) error, log *slog.Logger) (*Core, time.Duration, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if config == "" {
		config = BenchConfig
	}
	dir, err := os.MkdirTemp("", "cp")
	if err != nil {
		return nil, 0, err
	}
	h := home.Dir(dir)
	fail := func(err error) (*Core, time.Duration, error) {
		os.RemoveAll(dir)
		return nil, 0, err
	}
	if err := h.Ensure(); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(h.Config(), []byte(config), 0o600); err != nil {
		return fail(err)
	}
	if setup != nil {
		if err := setup(h); err != nil {
			return fail(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Core{Home: h, Client: control.NewClient(h.ControlSocket()), cancel: cancel, done: make(chan error, 1)}
	ready := make(chan time.Time, 1)
	start := time.Now()
	go func() {
		c.done <- server.Run(ctx, server.Options{Home: h, Logger: log, Version: "bench",
			Ready: func(*server.Server) { ready <- time.Now() }})
	}()
	select {
	case at := <-ready:
		return c, at.Sub(start), nil
	case err := <-c.done:
		cancel()
		return fail(fmt.Errorf("core did not start: %w", err))
	case <-time.After(30 * time.Second):
		cancel()
		return fail(errors.New("core did not start within 30s"))
	}
}

// Healthy reports how many plugins the core reports healthy.
func (c *Core) Healthy() (int, error) {
	st, err := c.Client.Status(context.Background())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range st.Plugins {
		if p.Healthy {
			n++
		}
	}
	return n, nil
}

// OpenCallerTopic opens a session and connects a Caller that invokes topic.
func (c *Core) OpenCallerTopic(topic string) (*Session, error) {
	h, err := c.OpenSession()
	if err != nil {
		return nil, err
	}
	cl, err := newCaller(h.Info().Socket, topic)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &Session{Caller: cl, Handle: h}, nil
}

// StartCrossFloor is the transport floor across two processes: the echo
// server runs in a child process (bin -floor ENDPOINT, the oopecho
// binary, with GOMAXPROCS=1 as the core gives plugin handlers) and the
// DEALER here. It is what any out-of-process hop costs before the
// protocol does anything.
func StartCrossFloor(bin string) (*Floor, error) {
	dir, err := os.MkdirTemp("", "cpx")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "e.sock")
	cmd := exec.Command(bin, "-floor", "ipc://"+sock)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "GOMAXPROCS=1"}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stop := func() error {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return os.RemoveAll(dir)
	}
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			stop()
			return nil, errors.New("cross-process echo server did not start")
		}
	}
	peer, err := Dial("ipc://" + sock)
	if err != nil {
		stop()
		return nil, err
	}
	f := &Floor{stop: stop, peer: peer, msg: bytes.Repeat([]byte{'x'}, FloorMessageSize)}
	if err := f.RoundTrip(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
