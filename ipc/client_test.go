package ipc

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
)

// silentCore listens at a new socket and, on every connection, does a
// ROUTER's handshake, reads the request and never answers. It counts the
// connections.
func silentCore(t *testing.T) (path string, conns *atomic.Int32) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipcclient")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path = filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int32)
	hello := bytes.Join([][]byte{wire.Greeting[:], wire.EncodeReady("ROUTER")}, nil)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				_, _ = c.Write(hello)
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return path, conns
}

// A core that takes the request and never answers: the call resends on a
// new connection after RetryInterval and ends at Timeout with
// PLUGIN_TIMEOUT; its alarm rings once on the way.
func TestCallSilentCoreTimesOut(t *testing.T) {
	path, conns := silentCore(t)
	var rings atomic.Int32
	start := time.Now()
	_, e := Call(context.Background(), "ipc://"+path, "tool.invoke.echo", []byte(`{}`), ClientOptions{
		Timeout: 400 * time.Millisecond, RetryInterval: 150 * time.Millisecond,
		AlarmAfter: 50 * time.Millisecond, OnAlarm: func() { rings.Add(1) },
	})
	if e == nil || e.Code != CodePluginTimeout || !strings.Contains(e.Message, "no answer from the Carapace core within 400ms") {
		t.Fatalf("Call = %v; want PLUGIN_TIMEOUT, no answer within 400ms", e)
	}
	if time.Since(start) < 400*time.Millisecond {
		t.Fatal("the call gave up before its timeout")
	}
	if n := conns.Load(); n < 2 {
		t.Fatalf("%d connections; want a resend on a new one", n)
	}
	if n := rings.Load(); n != 1 {
		t.Fatalf("the alarm rang %d times, want 1", n)
	}
}

// What bin/ipc does on SIGINT: the alarm (ringing inside the wait for the
// answer) arms a cancel, and cancelling ends the wait with its error.
func TestCallInterruptedByTheAlarm(t *testing.T) {
	path, _ := silentCore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, e := Call(ctx, "ipc://"+path, "tool.invoke.echo", []byte(`{}`), ClientOptions{
		Timeout: time.Minute, AlarmAfter: 30 * time.Millisecond,
		OnAlarm: func() { go cancel() },
	})
	if e == nil || e.Code != CodePluginTimeout || !strings.Contains(e.Message, "interrupted") {
		t.Fatalf("Call = %v; want PLUGIN_TIMEOUT, interrupted", e)
	}
}

// A core that is not there: the call retries until ConnectWait and says it
// cannot reach it; the alarm rings between attempts.
func TestCallUnreachable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.sock")
	var rings atomic.Int32
	_, e := Call(context.Background(), "ipc://"+path, "tool.invoke.echo", nil, ClientOptions{
		ConnectWait: 300 * time.Millisecond, AlarmAfter: 60 * time.Millisecond,
		OnAlarm: func() { rings.Add(1) },
	})
	if e == nil || e.Code != CodePluginUnavailable || !strings.Contains(e.Message, "cannot reach the Carapace core") || !strings.Contains(e.Message, "no such file") {
		t.Fatalf("Call = %v; want PLUGIN_UNAVAILABLE, cannot reach, no such file", e)
	}
	if n := rings.Load(); n != 1 {
		t.Fatalf("the alarm rang %d times, want 1", n)
	}
}
