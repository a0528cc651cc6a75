package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
	"github.com/carapace-dev/carapace/ipc"
)

// TestDependencies pins what the in-container binary may link, for the
// host and for the Linux targets of the agent images: no cgo, no HTTP stack,
// no way to start processes, and few packages. On Linux, where the agent
// images run it, it links no net either (ipc/zmtp/wire speaks to the core
// with raw syscalls there; elsewhere it dials with net), and nothing of the
// model API relay, which is its own binary, cmd/ipc-relay.
func TestDependencies(t *testing.T) {
	const why = "the in-container binary only relays requests to the core"
	for _, target := range [][2]string{{"", ""}, {"linux", "amd64"}, {"linux", "arm64"}} {
		forbidden := map[string]string{
			"net/http":    why,
			"os/exec":     "it must not start processes",
			"runtime/cgo": "it runs on an image with nothing else in it",
			"plugin":      "it must not load code",
			"net/rpc":     why,
			"crypto/tls":  why,
			// Started once per tool call: what it links runs its
			// package initialisers every time (docs/PERFORMANCE.md).
			"github.com/go-zeromq/zmq4/...": "it speaks ZMTP through ipc/zmtp/wire, synchronously: zmq4's sockets, goroutines and initialisers cost more than the call",
			"golang.org/x/text/...":         "zmq4 brought it; nothing here needs it",
			"regexp":                        "compiling a pattern at start-up costs every call",
			"crypto/rand":                   "a correlation is not a secret; its start-up costs every call",
			"github.com/carapace-dev/carapace/ipc/relay": "the model API relay is its own binary (cmd/ipc-relay): a daemon started once per container, whose net, log/slog and flag would cost every tool call",
			"log/slog": "its initialisers cost every call; errors are one JSON line, written by hand",
			"flag":     "ipc takes a topic and a JSON argument, no flags; flag's start-up costs every call",
		}
		maxDeps := 90 // darwin's wire dials with net
		if target[0] == "linux" {
			forbidden["net"] = "on Linux it speaks to the core with raw syscalls (ipc/zmtp/wire, conn_linux.go): net's initialisers, netip, unique, weak and dnsmessage cost every call (measured: 268 → 219 page faults a run without them)"
			maxDeps = 80
		}
		deptest.Checker{
			GOOS:      target[0],
			GOARCH:    target[1],
			CGO:       "0",
			Forbidden: forbidden,
			NoCgo:     true,
			MaxDeps:   maxDeps,
			Want:      []string{"github.com/carapace-dev/carapace/ipc"},
		}.Check(t)
	}
}

// TestStaticBinary builds the binary as the Makefile does and checks it has
// no dynamic loader: it must run on an image with nothing else in it.
func TestStaticBinary(t *testing.T) { deptest.Static(t, "ipc") }

// The usage text teaches tool calls only: the relay and its socket are
// ipc-relay's.
func TestUsageHasNoRelay(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, strings.NewReader(""), &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "tool.invoke.<tool>") {
		t.Fatalf("--help: code %d stdout %q", code, stdout.String())
	}
	for _, s := range []string{"relay", "CARAPACE_LLM_SOCKET"} {
		if strings.Contains(stdout.String(), s) {
			t.Errorf("usage names %q:\n%s", s, stdout.String())
		}
	}
}

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		out  string // substring of stdout
		err  string // substring of stderr
	}{
		{"no args", nil, nil, 2, "", "usage: ipc"},
		{"help", []string{"--help"}, nil, 0, "usage: ipc", ""},
		{"flag", []string{"-x"}, nil, 2, "", "usage: ipc"},
		{"too many", []string{"a", "{}", "extra"}, nil, 2, "", "usage: ipc"},
		{"bad timeout", []string{"tool.invoke.echo"}, map[string]string{"CARAPACE_IPC_TIMEOUT": "soon"}, 2, "", "CARAPACE_IPC_TIMEOUT"},
		{"relay is ipc-relay", []string{"relay", "--listen", "127.0.0.1:8377"}, nil, 2, "", "its own binary: ipc-relay --listen"},
		{"relay help is ipc-relay's", []string{"relay", "--help"}, nil, 2, "", "ipc-relay --help"},
		{"bad json", []string{"tool.invoke.echo", "{nope"}, nil, 1, "", `"code":"VALIDATION_FAILED"`},
		{"array", []string{"tool.invoke.echo", "[1]"}, nil, 1, "", `"field":"arguments"`},
		{"unreachable", []string{"tool.invoke.echo", "{}"}, map[string]string{"CARAPACE_IPC_ENDPOINT": "ipc:///nonexistent/ipc.sock", "CARAPACE_IPC_TIMEOUT": "1s"}, 1, "", `"code":"PLUGIN_UNAVAILABLE"`},
		{"bad endpoint", []string{"tool.invoke.echo", "{}"}, map[string]string{"CARAPACE_IPC_ENDPOINT": "tcp://1.2.3.4:5"}, 1, "", `"code":"PLUGIN_UNAVAILABLE"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := run(tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.out) || !strings.Contains(stderr.String(), tt.err) {
				t.Fatalf("code %d stdout %q stderr %q; want %d, %q, %q", code, stdout.String(), stderr.String(), tt.code, tt.out, tt.err)
			}
			if code == 1 {
				var e map[string]any
				if err := json.Unmarshal(bytes.TrimSpace(stderr.Bytes()), &e); err != nil {
					t.Fatalf("stderr is not one JSON object: %q", stderr.String())
				}
			}
		})
	}
}

func TestOversizedStdin(t *testing.T) {
	big := `{"a":"` + strings.Repeat("x", 1<<20) + `"}`
	var stdout, stderr bytes.Buffer
	code := run([]string{"tool.invoke.echo", "-"}, strings.NewReader(big), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "limit") {
		t.Fatalf("code %d stderr %q", code, stderr.String())
	}
}

// TestRuntimeSettings pins the run-time features the binary turns off in
// godebug.go: the go command records them in the binary as its default
// GODEBUG, and each was paid for by every call.
func TestRuntimeSettings(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.DefaultGODEBUG}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), ",")
	for _, want := range []string{"containermaxprocs=0", "updatemaxprocs=0", "decoratemappings=0"} {
		if !slices.Contains(got, want) {
			t.Errorf("bin/ipc's default GODEBUG is %q; want it to hold %s (cmd/ipc/godebug.go)", out, want)
		}
	}
}

// TestNoFmtNorReflectiveJSON: bin/ipc links neither fmt nor encoding/json's
// reflective encoder and decoder. They were about a twentieth of its
// start (docs/CONTAINERS.md#ipc-against-a-hello-world); their work is done
// by hand (ipc's decodeAnswer, Error.AppendJSON, statusLine), each
// checked against encoding/json. The scanner behind json.Valid stays.
// Control: the same search finds fmt in ipc-relay, which links it.
func TestNoFmtNorReflectiveJSON(t *testing.T) {
	forbidden := func(name string) bool {
		return strings.HasPrefix(name, "fmt.") ||
			strings.HasPrefix(name, "encoding/json.Marshal") || strings.HasPrefix(name, "encoding/json.Unmarshal") ||
			strings.HasPrefix(name, "encoding/json.(*decodeState)") || strings.HasPrefix(name, "encoding/json.(*encodeState)")
	}
	count := func(names []string) (n int, first string) {
		for _, s := range names {
			if forbidden(s) {
				if n == 0 {
					first = s
				}
				n++
			}
		}
		return n, first
	}
	ipcSyms := deptest.LinkedSymbols(t, ".")
	if n, first := count(ipcSyms); n > 0 {
		t.Errorf("bin/ipc links %d symbols of fmt or encoding/json's codec, %s the first", n, first)
	}
	if !slices.Contains(ipcSyms, "encoding/json.Valid") || !slices.Contains(ipcSyms, "main.statusLine") {
		t.Errorf("bin/ipc's symbols lack encoding/json.Valid or main.statusLine: the search reads the wrong table")
	}
	if n, _ := count(deptest.LinkedSymbols(t, "../ipc-relay")); n == 0 {
		t.Errorf("control: no fmt symbol found in ipc-relay, which links fmt")
	}
}

// TestStatusLine: the line that says a call waits for the user is what
// encoding/json wrote for it before.
func TestStatusLine(t *testing.T) {
	for _, c := range []ipc.Confirmation{
		{ID: "ab12", ExpiresAt: time.Date(2026, 11, 28, 9, 0, 0, 500, time.UTC)},
		{ID: `x"<&>` + "\u2028", ExpiresAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", 3600))},
		{},
	} {
		want, err := json.Marshal(map[string]any{"status": "waiting_for_confirmation", "confirmation": c.ID, "expires_at": c.ExpiresAt,
			"hint": "the user must approve this call on the host (carapace confirm approve " + c.ID + ")"})
		if err != nil {
			t.Fatal(err)
		}
		if got := statusLine(c); string(got) != string(want) {
			t.Errorf("statusLine\n%s\nencoding/json\n%s", got, want)
		}
	}
}
