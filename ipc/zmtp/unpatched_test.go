package zmtp

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/internal/testutil"
)

// The flaws of zmq4 v0.17.0, reproduced against zmq4 without this package.

// TestZMQ4MetadataParserPanics calls zmq4's own READY metadata parser
// (Metadata.UnmarshalZMTP → Property.Write) on malformed variants, in process
// and under recover, and records which of them panic; ParseReady must reject
// every one without panicking.
func TestZMQ4MetadataParserPanics(t *testing.T) {
	st := prop("Socket-Type", "DEALER")
	for _, tc := range []struct {
		name      string
		md        []byte
		zmq4Panic bool
	}{
		{"key length past end", cat(st, []byte{3, 'a', 'b'}), true},
		{"key length past end, alone", []byte{2, 'a'}, true},
		{"truncated value length", cat(st, []byte{1, 'a', 0, 0}), true},
		{"no value length", cat(st, []byte{1, 'a'}), true},
		// zmq4 does check these two:
		{"value length past end", cat(st, []byte{1, 'a', 0, 0, 0, 9, 'x'}), false},
		{"key length beyond the whole buffer", []byte{200}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Exact capacity, as zmq4's make([]byte, size) frame body has:
			// slicing past len is then slicing past cap, which panics.
			md := append(make([]byte, 0, len(tc.md)), tc.md...)
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				m := zmq4.Metadata{}
				_ = m.UnmarshalZMTP(md)
				return false
			}()
			if panicked != tc.zmq4Panic {
				t.Errorf("zmq4 panicked=%v, want %v", panicked, tc.zmq4Panic)
			}
			if _, err := ParseReady(cat([]byte("\x05READY"), md)); err == nil {
				t.Error("ParseReady accepted it")
			}
		})
	}
}

// TestZMQ4SocketTypePanics: zmq4's Conn.init calls
// SocketType(peer's Socket-Type).IsCompatible(own type), and IsCompatible
// panics on any type it does not know — including "" (no Socket-Type in
// READY) and "dealer" in lower case. ParseReady only ever hands zmq4 a
// canonical, known type.
func TestZMQ4SocketTypePanics(t *testing.T) {
	for _, tc := range []struct {
		peer      string
		zmq4Panic bool
	}{
		{"DEALER", false},
		{"PUB", false}, // incompatible, but an error
		{"", true},
		{"dealer", true},
		{"FOO", true},
	} {
		panicked := func() (p bool) {
			defer func() { p = recover() != nil }()
			zmq4.SocketType(tc.peer).IsCompatible(zmq4.Router)
			return false
		}()
		if panicked != tc.zmq4Panic {
			t.Errorf("zmq4 IsCompatible(%q): panicked=%v, want %v", tc.peer, panicked, tc.zmq4Panic)
		}
		md := prop("Socket-Type", tc.peer)
		if tc.peer == "" {
			md = prop("Identity", "x")
		}
		st, err := ParseReady(cat([]byte("\x05READY"), md))
		if err == nil && !slices.Contains([]string{"PAIR", "PUB", "SUB", "REQ", "REP", "DEALER", "ROUTER", "PULL", "PUSH", "XPUB", "XSUB"}, st) {
			t.Errorf("ParseReady(%q) = %q, not canonical", tc.peer, st)
		}
	}
}

// TestUnpatchedZMQ4Crashes proves attacks 1 and 3 are real (and the socket
// type panic above): a plain zmq4
// ROUTER on "ipc://" runs in a child process (this test binary re-executed as
// TestHelperProcess), and one forged stream from an unprivileged peer kills
// the whole process.
func TestUnpatchedZMQ4Crashes(t *testing.T) {
	st := prop("Socket-Type", "DEALER")
	for _, tc := range []struct {
		name   string
		stream []byte
	}{
		{"frame header claims 2^62 bytes", cat(validGreeting(), dealerReady(), header(0, 1<<62))},
		{"READY key length past end", cat(validGreeting(), readyCmd(st, []byte{3, 'a', 'b'}))},
		{"READY truncated value length", cat(validGreeting(), readyCmd(st, []byte{1, 'a', 0, 0}))},
		{"READY without Socket-Type", cat(validGreeting(), readyCmd(prop("Identity", "x")))},
		{"READY Socket-Type dealer in lower case", cat(validGreeting(), readyCmd(prop("Socket-Type", "dealer")))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := sockPath(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
			cmd.Env = append(os.Environ(), "GO_WANT_HELPER_PROCESS=1", "ZT_HELPER_SOCK="+path)
			var out testutil.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			for start := time.Now(); !strings.Contains(out.String(), "LISTENING\n"); {
				if time.Since(start) > 20*time.Second {
					t.Fatalf("helper never listened: %s", out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}

			c := rawConn(t, path)
			if _, err := c.Write(tc.stream); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				if err == nil || cmd.ProcessState.ExitCode() == 0 {
					t.Fatalf("helper exited cleanly (%v): %s", err, out.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("helper survived the attack: %s", out.String())
			}
			text := out.String()
			if !strings.Contains(text, "panic") && !strings.Contains(text, "out of memory") {
				t.Fatalf("helper died without a panic or OOM: %s", text)
			}
			t.Logf("unpatched zmq4 died, exit status %d: %s", cmd.ProcessState.ExitCode(), firstLine(text, "panic"))
		})
	}
}

// TestHelperProcess is the child of TestUnpatchedZMQ4Crashes: a plain zmq4
// ROUTER on the default "ipc://" transport. In a normal run it does nothing.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("GO_WANT_HELPER_PROCESS") != "1" {
		return
	}
	r := zmq4.NewRouter(t.Context())
	if err := r.Listen("ipc://" + os.Getenv("ZT_HELPER_SOCK")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println("LISTENING")
	go func() {
		for {
			if _, err := r.Recv(); err != nil {
				return
			}
		}
	}()
	time.Sleep(30 * time.Second) // the attack is expected to kill us long before
	os.Exit(0)
}

func firstLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
