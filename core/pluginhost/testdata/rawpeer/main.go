// Command rawpeer is a handler that speaks the plugin protocol with zmq4
// directly, without the SDK, to misbehave in ways the SDK never would. What
// it does depends on its plugin name (CARAPACE_PLUGIN_NAME):
//
//	results        answers init with {} and invoke with its "raw" argument, verbatim
//	stranger       like results, after a second connection sent junk without a hello
//	garbage-json   answers its first call with a frame that is not JSON
//	oversized      answers its first call with a frame over the protocol's cap
//	second-hello   answers its first call with another hello
//	unknown-type   answers its first call with a message of an unknown type
//	bad-reply-id   answers its first call with a reply to a call never made
//	wrong-token    says hello with a wrong token, then waits
//	wrong-version  says hello with protocol version 99, then waits
//	exit-early     exits with status 7 at once
//
// A name prefixed with "late-" (late-garbage-json, late-oversized, …)
// answers init normally and misbehaves on its first invoke instead, so that
// the core's tests can load it and see a tool call cut it off.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// endpoint is the core's: over the connection the core made and passed
// as descriptor 3 (a confined handler cannot create a socket), as the
// SDK does.
func endpoint() string {
	ep := os.Getenv(pluginproto.EnvEndpoint)
	fd, err := strconv.Atoi(os.Getenv(pluginproto.EnvConnFD))
	if err != nil {
		return ep
	}
	f := os.NewFile(uintptr(fd), "core")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fail(err)
	}
	if err := zmtp.Register("zipc-rawfd", zmtp.Options{DialConn: func(context.Context, string) (net.Conn, error) { return c, nil }}); err != nil {
		fail(err)
	}
	return "zipc-rawfd://" + strings.TrimPrefix(ep, zmtp.Scheme+"://")
}

func main() {
	name := os.Getenv(pluginproto.EnvName)
	// Record the pid, so a test can check that the process is gone.
	_ = os.WriteFile(filepath.Join(os.Getenv(pluginproto.EnvData), "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600)
	if name == "exit-early" {
		os.Exit(7)
	}
	ctx := context.Background()
	d := zmq4.NewDealer(ctx)
	if err := d.Dial(endpoint()); err != nil {
		fail(err)
	}
	token, version := os.Getenv(pluginproto.EnvToken), pluginproto.Version
	switch name {
	case "wrong-token":
		token = "0123"
	case "wrong-version":
		version = 99
	case "stranger":
		s := zmq4.NewDealer(ctx)
		if err := s.Dial(os.Getenv(pluginproto.EnvEndpoint)); err != nil {
			fail(err)
		}
		send(s, []byte("junk from a connection without the token"))
		send(s, mustJSON(pluginproto.Message{Type: pluginproto.TypeHello, Token: "nope", Version: 1}))
		time.Sleep(50 * time.Millisecond)
	}
	send(d, mustJSON(pluginproto.Message{Type: pluginproto.TypeHello, Token: token, Version: version, PID: os.Getpid()}))
	for {
		msg, err := d.Recv()
		if err != nil {
			fail(err)
		}
		var m pluginproto.Message
		if err := json.Unmarshal(msg.Frames[0], &m); err != nil || m.Type != pluginproto.TypeCall {
			continue
		}
		mode := name
		if late, ok := strings.CutPrefix(name, "late-"); ok {
			mode = ""
			if m.Method == pluginproto.MethodInvoke {
				mode = late
			}
		}
		switch mode {
		case "garbage-json":
			send(d, []byte("this is not json"))
			continue
		case "oversized":
			send(d, bytes.Repeat([]byte("x"), pluginproto.MaxMessage+1))
			continue
		case "second-hello":
			send(d, mustJSON(pluginproto.Message{Type: pluginproto.TypeHello, Token: os.Getenv(pluginproto.EnvToken), Version: 1}))
			continue
		case "unknown-type":
			send(d, []byte(`{"type":"surprise","id":1}`))
			continue
		case "bad-reply-id":
			send(d, mustJSON(pluginproto.Message{Type: pluginproto.TypeReply, ID: 999, Result: json.RawMessage(`{}`)}))
			continue
		}
		reply := pluginproto.Message{Type: pluginproto.TypeReply, ID: m.ID, Result: json.RawMessage(`{}`)}
		if m.Method == pluginproto.MethodInvoke {
			var req struct {
				Arguments struct {
					Raw string `json:"raw"`
				} `json:"arguments"`
			}
			_ = json.Unmarshal(m.Params, &req)
			reply.Result = json.RawMessage(req.Arguments.Raw)
		}
		send(d, mustJSON(reply))
		if m.Method == pluginproto.MethodShutdown {
			return
		}
	}
}

func send(s zmq4.Socket, frame []byte) {
	if err := s.Send(zmq4.NewMsg(frame)); err != nil {
		fail(err)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		fail(err)
	}
	return b
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rawpeer:", err)
	os.Exit(1)
}
