// Command ipc-relay is the agent container's way to the model API: it
// relays every TCP connection made to a loopback address, byte for byte, to
// the Unix socket of the host's model API proxy (package ipc/relay), where
// the core's proxy adds the credential. Claude Code is pointed at
// http://127.0.0.1:PORT; the image's entrypoint starts it once per container.
//
//	ipc-relay --listen 127.0.0.1:PORT [--socket /run/carapace/llm.sock]
//
// It runs until SIGINT or SIGTERM (exit 0). The listen address must be on
// loopback (127.0.0.1, ::1 or localhost); anything else is a usage error
// (exit 2). The socket defaults to $CARAPACE_LLM_SOCKET, else
// /run/carapace/llm.sock. Once listening it prints one line on stderr,
// "ipc-relay: listening on ADDR, relaying to PATH", with the actual address,
// so port 0 can be used; later failures are logged on stderr as text. A
// failure to listen exits 1.
//
// It is its own binary, not a mode of ipc: ipc is started once per tool
// call, and what the relay links (net, log/slog, flag) would run its
// package initialisers on every call. It is static, has no cgo, and links
// neither net/http nor os/exec: the relay copies bytes and knows nothing of
// HTTP.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/carapace-dev/carapace/ipc/relay"
)

const usage = `usage: ipc-relay --listen 127.0.0.1:PORT [--socket PATH]

Relays every TCP connection made to the listen address, byte for byte, to the
Unix socket of the host's model API proxy, until SIGINT or SIGTERM. Point
Claude Code at http://127.0.0.1:PORT.

  --listen ADDR   host:port to listen on. The host must be 127.0.0.1, ::1 or
                  localhost; anything else is refused. Port 0 picks a free port.
  --socket PATH   the model API socket (default $CARAPACE_LLM_SOCKET, else
                  /run/carapace/llm.sock)

Once listening it prints "ipc-relay: listening on ADDR, relaying to PATH" on
stderr, with the port actually chosen. A connection the socket does not accept
is closed; such failures are logged on stderr, one line per 10s at most.
Usage errors exit 2, a failure to listen exits 1, a signal exits 0.

Environment:
  CARAPACE_LLM_SOCKET   the model API socket (default /run/carapace/llm.sock)
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is ipc-relay: parse, listen, announce, serve until a signal.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ipc-relay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "", "")
	socket := fs.String("socket", "", "")
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipc-relay: "+format+"\n\n%s", append(a, usage)...)
		return 2
	}
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return 0
	case err != nil:
		return usageError("%v", err)
	case fs.NArg() > 0:
		return usageError("unexpected argument %q", fs.Arg(0))
	case *listen == "":
		return usageError("--listen is required")
	}
	if _, err := relay.LoopbackAddr(*listen); err != nil {
		return usageError("--listen: %v", err)
	}
	if *socket == "" {
		*socket = os.Getenv("CARAPACE_LLM_SOCKET")
	}
	if *socket == "" {
		*socket = relay.DefaultSocket
	}

	ln, err := relay.Listen(*listen)
	if err != nil {
		fmt.Fprintf(stderr, "ipc-%v\n", err) // relay errors start with "relay: "
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "ipc-relay: listening on %s, relaying to %s\n", ln.Addr(), *socket)
	err = relay.Serve(ctx, ln, relay.Options{Socket: *socket, Logger: slog.New(slog.NewTextHandler(stderr, nil))})
	if err != nil {
		fmt.Fprintf(stderr, "ipc-%v\n", err)
		return 1
	}
	return 0
}
