// Command carapace-app is Carapace's menu-bar app: it finds or starts the
// core of a home (`carapace serve`, the binary beside it), shows what the
// agent does in the menu bar, and puts every high-risk call in front of
// the user as a notification and a menu item with Approve and Deny. The
// app lives in package app; this is its thin main: flags, logging, the
// platform's notifier and login item (platform_*.go), signals, and the
// tray's loop on the main goroutine.
//
//	carapace-app [--home DIR] [--log-level LEVEL]
//
// The home is --home if given, else $CARAPACE_HOME, else ~/.carapace, as
// for the carapace command. SIGINT and SIGTERM quit as the menu's Quit
// does: a core the app started is stopped, one it found keeps running.
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

	"github.com/carapace-dev/carapace/app"
	"github.com/carapace-dev/carapace/app/tray"
	"github.com/carapace-dev/carapace/core/home"
)

// version is set at build time: -ldflags "-X main.version=1.2.3".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the program: it returns the exit status (0 after a clean quit,
// 1 on an error, 2 on a usage error).
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("carapace-app", flag.ContinueOnError)
	fs.SetOutput(stderr)
	homeFlag := fs.String("home", "", "the Carapace home directory (default $CARAPACE_HOME, else ~/.carapace)")
	levelFlag := fs.String("log-level", "info", "log level: debug, info, warn or error")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "carapace-app: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "carapace-app %s\n", version)
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*levelFlag)); err != nil {
		fmt.Fprintf(stderr, "carapace-app: --log-level %q: want debug, info, warn or error\n", *levelFlag)
		return 2
	}
	h, err := home.Resolve(*homeFlag)
	if err != nil {
		fmt.Fprintf(stderr, "carapace-app: %v\n", err)
		return 1
	}
	logger, closeLog := newLogger(h, level, stderr)
	defer closeLog()
	logger.Info("carapace-app starting", "version", version, "home", h, "pid", os.Getpid())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := newPlatform(logger, h)
	tr := tray.New(logger)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{Home: h, Tray: tr, Notifier: p.notifier, LoginItem: p.loginItem, CalendarAccess: p.calendar, Logger: logger})
	}()
	tr.Run() // the desktop's loop, on the main goroutine, until Run quits it
	if err := <-done; err != nil {
		logger.Error("carapace-app", "err", err)
		return 1
	}
	logger.Info("carapace-app quit")
	return 0
}

// newLogger logs to stderr and to logs/app.log under the home: an app
// started at login has no terminal. Without the file it logs to stderr
// alone.
func newLogger(h home.Dir, level slog.Level, stderr io.Writer) (*slog.Logger, func()) {
	w, closeLog := stderr, func() {}
	if err := os.MkdirAll(h.LogsDir(), 0o700); err == nil {
		if f, err := os.OpenFile(h.Path("logs", "app.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
			w, closeLog = io.MultiWriter(stderr, f), func() { f.Close() }
		}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), closeLog
}
