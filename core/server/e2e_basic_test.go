package server_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/server"
	"github.com/carapace-dev/carapace/ipc"
)

func TestEchoThroughRealBinary(t *testing.T) {
	c := startCore(t, "")
	s := c.Session(t, "main")
	r := runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"hello","uppercase":true}`)
	if r.Code != 0 || r.Result["message"] != "HELLO" {
		t.Fatalf("echo: %+v", r)
	}
	r = runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"hi","priority":"high"}`)
	wantError(t, r, ipc.CodeValidationFailed, 3, "priority")
}

// The core reports which config.toml it runs, for carapace config set
// and doctor to tell a change that waits for a restart.
func TestStatusConfigDigest(t *testing.T) {
	const cfg = "[tasks]\nmax_failures = 4\n"
	c := startCore(t, cfg)
	st, err := c.Client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(c.Home.Config())
	if err != nil || !strings.Contains(string(data), "max_failures = 4") {
		t.Fatalf("config.toml: %q, %v", data, err)
	}
	if st.ConfigDigest != config.Digest(data) || st.ConfigDigest == config.Digest(nil) {
		t.Fatalf("status config digest %q, want %q", st.ConfigDigest, config.Digest(data))
	}
}

func TestSecondCoreRefused(t *testing.T) {
	c := startCore(t, "")
	err := server.Run(context.Background(), server.Options{Home: c.Home})
	if err == nil || !strings.Contains(err.Error(), "another core is running") {
		t.Fatalf("second core in the same home: %v", err)
	}
	// The first is unharmed.
	s := c.Session(t, "main")
	if r := runIPC(t, s.Socket, nil, "tool.invoke.echo", `{"message":"still here"}`); r.Code != 0 {
		t.Fatalf("first core after a refused second: %+v", r)
	}
}
