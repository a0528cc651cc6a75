package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// A call that waits (a core that takes the request and does not answer)
// ends on SIGTERM with its JSON error and exit 1, once it has waited
// signalDelay: the real binary, built as the Makefile builds it. The
// control: the same binary against the same core answers when the core
// does.
func TestSignalEndsAWaitingCall(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ipc")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build ipc: %v\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "ipcsig")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := zmq4.NewRouter(ctx)
	defer r.Close()
	if err := r.Listen(zmtp.Scheme + "://" + sock); err != nil {
		t.Fatal(err)
	}
	answer := make(chan bool, 4)
	go func() {
		for {
			m, err := r.Recv()
			if err != nil {
				return
			}
			if !<-answer {
				continue // take it, say nothing
			}
			var req struct{ Correlation string }
			_ = json.Unmarshal(m.Frames[len(m.Frames)-1], &req)
			resp := `{"type":"response","correlation":"` + req.Correlation + `","payload":{"result":{"ok":true}}}`
			_ = r.Send(zmq4.NewMsgFrom(m.Frames[0], []byte(resp)))
		}
	}()
	run := func(sig bool) (int, string, string) {
		cmd := exec.Command(bin, "tool.invoke.echo", `{"message":"hi"}`)
		cmd.Env = []string{"CARAPACE_IPC_ENDPOINT=ipc://" + sock, "CARAPACE_IPC_TIMEOUT=60s"}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if sig {
			time.Sleep(500 * time.Millisecond) // well past signalDelay
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		_ = cmd.Wait()
		return cmd.ProcessState.ExitCode(), out.String(), errb.String()
	}
	answer <- true
	if code, out, errs := run(false); code != 0 || !strings.Contains(out, `"ok":true`) {
		t.Fatalf("answered call: exit %d, %q %q", code, out, errs)
	}
	answer <- false
	code, _, errs := run(true)
	var e struct{ Code, Message string }
	if code != 1 || json.Unmarshal([]byte(strings.TrimSpace(errs)), &e) != nil || e.Code != "PLUGIN_TIMEOUT" || !strings.Contains(e.Message, "interrupted") {
		t.Fatalf("SIGTERM on a waiting call: exit %d, stderr %q; want exit 1 and the JSON error", code, errs)
	}
}
