package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

// probe tries one escape a hostile handler would try, and says whether it
// worked: {"ok": true} or {"ok": false, "error": "..."}. The tests run the
// same probes confined (each must fail) and unconfined (each must work), so
// a probe that cannot work proves nothing.
func probe(ctx context.Context, kind, target string) map[string]any {
	err := tryProbe(ctx, kind, target)
	if err != nil {
		return map[string]any{"ok": false, "error": err.Error()}
	}
	return map[string]any{"ok": true}
}

func tryProbe(ctx context.Context, kind, target string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	switch kind {
	case "read": // a file: the model key, config.toml, the audit log, a canary in the user's home
		f, err := os.Open(target)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.Read(make([]byte, 1))
		if err == io.EOF {
			err = nil
		}
		return err
	case "write": // create a file
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = f.WriteString("probe")
		return cmpErr(err, f.Close())
	case "control": // the control socket: ask for the core's status over HTTP
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", target)
		}}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://carapace/v1/status", nil)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	case "unix": // any pathname socket: connect only
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", target)
		if err != nil {
			return err
		}
		return c.Close()
	case "signal": // signal 0 to a process outside the plugin: the core
		pid, err := strconv.Atoi(target)
		if err != nil {
			return err
		}
		return syscall.Kill(pid, 0)
	case "environ": // another process's environment, as ptrace's read check allows
		b, err := os.ReadFile("/proc/" + target + "/environ")
		if err == nil && len(b) == 0 {
			return fmt.Errorf("empty")
		}
		return err
	case "tcp": // a TCP connection, straight
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", target)
		if err != nil {
			return err
		}
		_, err = c.Write([]byte("probe\n"))
		return cmpErr(err, c.Close())
	case "udp": // a datagram, straight
		c, err := net.Dial("udp", target)
		if err != nil {
			return err
		}
		_, err = c.Write([]byte("probe"))
		return cmpErr(err, c.Close())
	case "resolve": // a DNS query to the server at target (the test counts what arrives; nobody answers)
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", target)
		}}
		qctx, qcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer qcancel()
		_, err := r.LookupHost(qctx, "probe.example")
		if e, ok := err.(*net.DNSError); ok && e.IsTimeout {
			return nil // sent; unanswered, as the test's listener never answers
		}
		return err
	case "egress": // host:port through the plugin's egress point (the SDK)
		c, err := plugin.Dial(ctx, "tcp", target)
		if err != nil {
			return err
		}
		_, err = c.Write([]byte("probe\n"))
		return cmpErr(err, c.Close())
	}
	return fmt.Errorf("unknown probe %q", kind)
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
