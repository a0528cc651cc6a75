package control

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil"
)

// TestUIDListenerRejects checks the rejection path with real peer
// credentials but without a second user: the listener expects a uid that is
// not ours. (TestPeerUID covers a real second user when run as root.)
func TestUIDListenerRejects(t *testing.T) {
	dir, err := os.MkdirTemp("", "ct")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	inner, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.Buffer{}
	tests := []struct {
		name   string
		uid    int
		accept bool
	}{
		{"our uid", os.Geteuid(), true},
		{"another uid", os.Geteuid() + 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln := newUIDListener(inner, tt.uid)
			ln.setLogger(slog.New(slog.NewTextHandler(logs, nil)))
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := ln.Accept()
				if err == nil {
					accepted <- c
				}
			}()
			c, err := net.Dial("unix", inner.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tt.accept {
				select {
				case sc := <-accepted:
					sc.Close()
				case <-time.After(5 * time.Second):
					t.Fatal("our own connection was not accepted")
				}
				return
			}
			// A rejected connection is closed by the listener: our read
			// sees EOF, and Accept keeps waiting.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || strings.Contains(err.Error(), "timeout") {
				t.Fatalf("read on a rejected connection: n=%d err=%v, want EOF", n, err)
			}
			// Accept logs before it closes, but the race detector cannot
			// see that order through the kernel: take the lock.
			if !strings.Contains(logs.String(), "rejected a connection from another user") {
				t.Errorf("rejection not logged: %s", logs.String())
			}
			select {
			case <-accepted:
				t.Fatal("Accept returned a rejected connection")
			case <-time.After(50 * time.Millisecond):
			}
			inner.Close() // ends the Accept goroutine
		})
	}
}
