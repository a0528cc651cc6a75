// Command stubborn is a fake core for boot's tests: it serves the control
// API for --home with an in-memory backend, but ignores both POST /v1/stop
// and SIGTERM, so that only SIGKILL ends it.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/core/home"
)

func main() {
	dir := flag.String("home", "", "the home")
	flag.Parse() // "serve" is left over
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	h := home.Dir(*dir)
	if err := h.Ensure(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := control.Listen(h.ControlSocket())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "stubborn: serving")
	srv := control.NewServer(controltest.NewBackend(h), slog.New(slog.NewTextHandler(os.Stderr, nil)))
	_ = srv.Serve(ln)
}
