package server_test

import (
	"testing"

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
