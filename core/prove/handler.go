package prove

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/plugin"
)

// PluginName is the probe plugin's name: the core starts it under this
// name, and no installed plugin may take it (manifest.ReservedPlugins).
const PluginName = "carapace-prove"

// init turns a binary that links this package into the probe plugin's
// handler when the core started it as such: the core runs its own
// executable as the handler (pluginhost sets the plugin's name and token
// in its environment), so that nothing extra ships, as core/confine's
// launcher does in self mode.
func init() {
	if os.Getenv(pluginproto.EnvName) != PluginName || os.Getenv(pluginproto.EnvToken) == "" {
		return
	}
	if err := plugin.Serve(&handler{}); err != nil {
		fmt.Fprintln(os.Stderr, "carapace-prove handler:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// The probe kinds the handler knows: each tries one thing a hostile
// handler would, or one a plugin must be able to do, and says whether it
// worked.
const (
	probeRead    = "read"    // open a file and read a byte, or list a folder
	probeWrite   = "write"   // create a file and write to it
	probeControl = "control" // GET /v1/status on the control socket
	probeSignal  = "signal"  // signal 0 to a process
	probeTCP     = "tcp"     // a TCP connection, straight
	probeUDP     = "udp"     // a datagram, straight
	probeResolve = "resolve" // a DNS query to the server at target
	probeEgress  = "egress"  // a TCP connection through the egress point (plugin.Dial)
)

// probeTimeout bounds one probe inside the handler.
const probeTimeout = 5 * time.Second

// handler is the probe plugin: one tool, "probe", {"kind", "target"} →
// {"ok": bool, "error": "…"}. It never returns a tool error, so that the
// core reads every outcome the same way.
type handler struct{}

var _ plugin.Handler = (*handler)(nil)

func (*handler) Init(context.Context, map[string]any, plugin.Services) error { return nil }
func (*handler) Shutdown(context.Context) error                              { return nil }

func (*handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	kind, _ := req.Arguments["kind"].(string)
	target, _ := req.Arguments["target"].(string)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := try(ctx, kind, target); err != nil {
		return map[string]any{"ok": false, "error": err.Error()}, nil
	}
	return map[string]any{"ok": true}, nil
}

// try runs one probe; nil means it worked.
func try(ctx context.Context, kind, target string) error {
	switch kind {
	case probeRead:
		f, err := os.Open(target)
		if err != nil {
			return err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			_, err = f.ReadDir(1)
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return err
		}
		_, err = f.Read(make([]byte, 1))
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return err
	case probeWrite:
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = f.WriteString("written by the probe plugin\n")
		return errors.Join(err, f.Close())
	case probeControl:
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", target)
		if err != nil {
			return err
		}
		defer c.Close()
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(dl)
		}
		if _, err := io.WriteString(c, "GET /v1/status HTTP/1.0\r\nHost: carapace\r\n\r\n"); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, "HTTP/1.") {
			return fmt.Errorf("not an HTTP answer: %.40q", line)
		}
		return nil
	case probeSignal:
		pid, err := strconv.Atoi(target)
		if err != nil {
			return err
		}
		if pid == 0 {
			pid = os.Getpid()
		}
		return syscall.Kill(pid, 0)
	case probeTCP:
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", target)
		if err != nil {
			return err
		}
		_, err = c.Write([]byte("direct\n"))
		return errors.Join(err, c.Close())
	case probeUDP:
		var d net.Dialer
		c, err := d.DialContext(ctx, "udp", target)
		if err != nil {
			return err
		}
		_, err = c.Write([]byte("direct"))
		return errors.Join(err, c.Close())
	case probeResolve:
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", target)
		}}
		qctx, qcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer qcancel()
		_, err := r.LookupHost(qctx, "carapace-prove.example")
		if e, ok := errors.AsType[*net.DNSError](err); ok && e.IsTimeout {
			return nil // sent: the core's listener counts it and never answers
		}
		return err
	case probeEgress:
		c, err := plugin.Dial(ctx, "tcp", target)
		if err != nil {
			return err
		}
		_, err = c.Write([]byte("egress\n"))
		return errors.Join(err, c.Close())
	}
	return fmt.Errorf("unknown probe %q", kind)
}
