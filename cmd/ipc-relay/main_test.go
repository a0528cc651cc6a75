package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil"
	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// bound is a failure bound for things that should happen at once.
const bound = 10 * time.Second

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// TestMain removes the binary relayBinary built, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// relayBinary builds cmd/ipc-relay once, static as the Makefile builds it.
func relayBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "relaybin"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "ipc-relay")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// TestDependencies pins what the relay may link, for the host and for the
// Linux targets of the agent images: no cgo, no HTTP stack, no way to start
// processes.
func TestDependencies(t *testing.T) {
	const why = "the relay copies bytes and knows nothing of HTTP"
	for _, target := range [][2]string{{"", ""}, {"linux", "amd64"}, {"linux", "arm64"}} {
		deptest.Checker{
			GOOS:   target[0],
			GOARCH: target[1],
			CGO:    "0",
			Forbidden: map[string]string{
				"net/http":    why,
				"net/rpc":     why,
				"crypto/tls":  why,
				"os/exec":     "it must not start processes",
				"runtime/cgo": "it runs on an image with nothing else in it",
				"plugin":      "it must not load code",
			},
			NoCgo:   true,
			MaxDeps: 95,
			Want:    []string{"github.com/carapace-dev/carapace/ipc/relay"},
		}.Check(t)
	}
}

// TestStaticBinary builds the binary as the Makefile does and checks it has
// no dynamic loader: it must run on an image with nothing else in it.
func TestStaticBinary(t *testing.T) { deptest.Static(t, "ipc-relay") }

func TestUsage(t *testing.T) {
	const rule = "must be 127.0.0.1, ::1 or localhost"
	tests := []struct {
		name string
		args []string
		code int
		out  string // substring of stdout
		err  string // substring of stderr
	}{
		{"help", []string{"--help"}, 0, "usage: ipc-relay", ""},
		{"help names the environment", []string{"-h"}, 0, "CARAPACE_LLM_SOCKET", ""},
		{"no listen", nil, 2, "", "--listen is required"},
		{"all interfaces", []string{"--listen", "0.0.0.0:8080"}, 2, "", rule},
		{"LAN address", []string{"--listen", "192.168.1.20:8080"}, 2, "", rule},
		{"empty host", []string{"--listen", ":8080"}, 2, "", rule},
		{"IPv6 any", []string{"--listen=[::]:8080"}, 2, "", rule},
		{"no port", []string{"--listen", "127.0.0.1"}, 2, "", "numeric port"},
		{"named port", []string{"--listen", "127.0.0.1:http"}, 2, "", "numeric port"},
		{"unknown flag", []string{"--listen", "127.0.0.1:0", "--verbose"}, 2, "", "usage: ipc-relay"},
		{"extra argument", []string{"--listen", "127.0.0.1:0", "tool.invoke.x"}, 2, "", `unexpected argument "tool.invoke.x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.out) || !strings.Contains(stderr.String(), tt.err) {
				t.Fatalf("code %d stdout %q stderr %q; want %d, %q, %q", code, stdout.String(), stderr.String(), tt.code, tt.out, tt.err)
			}
			if code == 2 && !strings.Contains(stderr.String(), "usage: ipc-relay") {
				t.Fatalf("stderr %q has no usage text", stderr.String())
			}
		})
	}
}

// echoServer is the stand-in for the host's proxy: a Unix socket that echoes
// every connection until EOF, then half-closes.
func echoServer(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ri")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "llm.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(bound))
				if _, err := io.Copy(c, c); err == nil {
					c.(*net.UnixConn).CloseWrite()
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait(); os.RemoveAll(dir) })
	return path
}

var listening = regexp.MustCompile(`^ipc-relay: listening on (127\.0\.0\.1:\d+), relaying to (.+)$`)

// startRelayBinary runs `ipc-relay --listen 127.0.0.1:0 extra...` and returns
// the address and socket its first stderr line announces, its whole stderr,
// and the process.
func startRelayBinary(t *testing.T, env []string, extra ...string) (addr, socket string, stderr *testutil.Buffer, cmd *exec.Cmd) {
	t.Helper()
	cmd = exec.Command(relayBinary(t), append([]string{"--listen", "127.0.0.1:0"}, extra...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr = &testutil.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	deadline := time.Now().Add(bound)
	for !strings.Contains(stderr.String(), "\n") {
		if time.Now().After(deadline) {
			t.Fatalf("ipc-relay printed no line in %v", bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
	line, _, _ := strings.Cut(stderr.String(), "\n")
	m := listening.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("first stderr line %q; want %v", line, listening)
	}
	return m[1], m[2], stderr, cmd
}

// TestRelayBinary drives the real binary: port 0, the announced address,
// bytes both ways on a kept-alive connection, a half-close, and a clean exit
// on SIGTERM.
func TestRelayBinary(t *testing.T) {
	tests := []struct {
		name  string
		flags func(socket string) []string
		env   func(socket string) []string
	}{
		{"--socket", func(s string) []string { return []string{"--socket", s} }, func(string) []string { return nil }},
		{"CARAPACE_LLM_SOCKET", func(string) []string { return nil }, func(s string) []string { return []string{"CARAPACE_LLM_SOCKET=" + s} }},
		{"--socket over the environment", func(s string) []string { return []string{"--socket=" + s} },
			func(string) []string { return []string{"CARAPACE_LLM_SOCKET=/nonexistent/llm.sock"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := echoServer(t)
			addr, announced, _, cmd := startRelayBinary(t, tt.env(sock), tt.flags(sock)...)
			if announced != sock {
				t.Fatalf("relaying to %q; want %q", announced, sock)
			}
			c, err := net.DialTimeout("tcp", addr, bound)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(bound))
			for i := range 20 { // kept alive: each answer arrives without EOF
				msg := fmt.Appendf(nil, "request %d\n", i)
				got := make([]byte, len(msg))
				if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
					t.Fatalf("exchange %d: %q, %v", i, got, err)
				}
			}
			if _, err := c.Write([]byte("last")); err != nil {
				t.Fatal(err)
			}
			c.(*net.TCPConn).CloseWrite()
			if got, err := io.ReadAll(c); err != nil || string(got) != "last" {
				t.Fatalf("after half-close: %q, %v", got, err)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			waitExit(t, cmd, 0)
		})
	}
}

// TestRelayBinaryNoSocket: with nothing behind the socket, the binary closes
// each connection, logs the failure once, and keeps running.
func TestRelayBinaryNoSocket(t *testing.T) {
	addr, _, stderr, cmd := startRelayBinary(t, nil, "--socket", "/nonexistent/llm.sock")
	for i := range 3 {
		c, err := net.DialTimeout("tcp", addr, bound)
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		c.SetDeadline(time.Now().Add(bound))
		c.Write([]byte("SECRET-PAYLOAD"))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
			t.Fatalf("attempt %d: read %v; want the connection closed", i, err)
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	waitExit(t, cmd, 0)
	_, log, _ := strings.Cut(stderr.String(), "\n")
	if strings.Count(log, "cannot reach the socket") != 1 || strings.Contains(log, "SECRET") {
		t.Fatalf("stderr after the first line:\n%s\nwant one rate-limited failure line and no payload", log)
	}
}

// TestRelayBinaryRefuses: the loopback rule holds in the real binary.
func TestRelayBinaryRefuses(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		t.Run(listen, func(t *testing.T) {
			out, err := exec.Command(relayBinary(t), "--listen", listen, "--socket", "/nonexistent/llm.sock").CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "must be 127.0.0.1, ::1 or localhost") {
				t.Fatalf("exit %v, output %q; want exit 2 naming the rule", err, out)
			}
		})
	}
}

// TestRelayBinaryCannotListen: an address already taken is a failure to
// listen, exit 1 with one line that says so; a free one (the control) is
// not.
func TestRelayBinaryCannotListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, err := exec.Command(relayBinary(t), "--listen", ln.Addr().String(), "--socket", "/nonexistent/llm.sock").CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.HasPrefix(string(out), "ipc-relay: ") || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("exit %v, output %q; want exit 1 and one line starting with ipc-relay:", err, out)
	}
	_, _, _, cmd := startRelayBinary(t, nil, "--socket", "/nonexistent/llm.sock")
	cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, cmd, 0)
}

func waitExit(t *testing.T, cmd *exec.Cmd, want int) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Fatalf("exit code %d; want %d", code, want)
		}
	case <-time.After(bound):
		t.Fatal("ipc-relay did not exit after the signal")
	}
}
