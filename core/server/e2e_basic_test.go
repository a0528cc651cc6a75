package server_test

import (
	"context"
	"strings"
	"testing"

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
