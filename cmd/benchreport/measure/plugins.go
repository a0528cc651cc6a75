package measure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
)

// OOPEchoTopic invokes the out-of-process echo plugin InstallEchoPlugins
// installs as "oop".
const OOPEchoTopic = "tool.invoke.oop_echo"

// BuildEchoPlugin builds the out-of-process echo handler
// (cmd/benchreport/oopecho) into dst, statically, as `carapace plugin
// build` does.
func BuildEchoPlugin(dst string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", dst, "github.com/carapace-dev/carapace/cmd/benchreport/oopecho")
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
	return connectFloor("ipc://"+sock, stop)
}
