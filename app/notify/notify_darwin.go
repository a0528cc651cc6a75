//go:build darwin && cgo

package notify

// macOS: UNUserNotificationCenter through notify_darwin.m. The logic is
// in mac.go (tested on every platform); this file binds it.
//
// Only compiled on macOS with cgo. On the project's Linux machines it is
// type-checked (go run ./cmd/darwincheck), not run;
// notify_darwin_test.go runs on macOS (the macOS CI workflow), outside a
// bundle, where New must refuse.

/*
#cgo CFLAGS: -fobjc-arc -mmacosx-version-min=12.0 -Wall
#cgo LDFLAGS: -framework Foundation -framework UserNotifications
#include <stdlib.h>
#include "notify_darwin.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unsafe"
)

// How long to wait for the notification centre's completion handlers.
const (
	macShowTimeout     = 5 * time.Second
	macSettingsTimeout = 2 * time.Second
)

// darwin is the process's notifier: the notification centre has one
// delegate, so there is one notifier at a time.
var darwin struct {
	mu    sync.Mutex
	n     *macNotifier
	calls macCalls
}

// New returns the macOS notifier. It refuses, with an error that wraps
// ErrUnavailable and without touching the notification centre, when the
// process has no bundle identifier: run Carapace.app, not the bare
// binary (the centre would raise an exception that ends the process).
// It registers the carapace.approval category, withdraws approvals left
// by an earlier process, and asks once for permission to show alerts
// with sound; macOS shows its prompt only the first time and remembers
// the answer, which Permission reports.
//
// Call New before systray.Run: a response that launched the app reaches
// the delegate only if it is set before the app finishes launching. New
// starts no run loop; the delegate is served by the notification centre's
// own threads while systray's loop runs. opts is not used on macOS (the
// bundle gives the name and icon). One notifier may be open at a time.
func New(log *slog.Logger, opts Options) (Notifier, error) {
	_ = opts
	if C.carapace_notify_bundled() == 0 {
		return nil, fmt.Errorf("%w: this process has no bundle identifier (run Carapace.app, not the bare binary)", ErrUnavailable)
	}
	n := newMacNotifier(log, cgoCenter{})
	// Registered before start: the authorization answer may arrive
	// before start returns, and its callback looks for the notifier.
	darwin.mu.Lock()
	if darwin.n != nil {
		darwin.mu.Unlock()
		return nil, errors.New("a notifier is already open in this process: close it first")
	}
	darwin.n = n
	darwin.mu.Unlock()
	if msg := C.carapace_notify_start(); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		darwin.mu.Lock()
		darwin.n = nil
		darwin.mu.Unlock()
		return nil, fmt.Errorf("%w: set up the notification centre: %s", ErrUnavailable, C.GoString(msg))
	}
	return n, nil
}

// current returns the open notifier, or nil.
func current() *macNotifier {
	darwin.mu.Lock()
	defer darwin.mu.Unlock()
	return darwin.n
}

// cgoCenter is the macCenter of notify_darwin.m.
type cgoCenter struct{}

func (cgoCenter) settings() (macSettings, error) {
	id, ch := darwin.calls.start()
	C.carapace_notify_settings(C.uint64_t(id))
	r, err := darwin.calls.wait(id, ch, macSettingsTimeout, "read the notification settings")
	return r.settings, err
}

func (cgoCenter) add(key, title, body string, approve bool) error {
	ck, ct, cb := C.CString(key), C.CString(title), C.CString(body)
	defer C.free(unsafe.Pointer(ck))
	defer C.free(unsafe.Pointer(ct))
	defer C.free(unsafe.Pointer(cb))
	id, ch := darwin.calls.start()
	offer := C.int(0)
	if approve {
		offer = 1
	}
	C.carapace_notify_show(C.uint64_t(id), ck, ct, cb, offer)
	_, err := darwin.calls.wait(id, ch, macShowTimeout, "add the notification")
	return err
}

func (cgoCenter) remove(keys []string) error {
	var errs []error
	for _, k := range keys {
		ck := C.CString(k)
		msg := C.carapace_notify_remove(ck)
		C.free(unsafe.Pointer(ck))
		if msg != nil {
			errs = append(errs, fmt.Errorf("%s: %s", k, C.GoString(msg)))
			C.free(unsafe.Pointer(msg))
		}
	}
	return errors.Join(errs...)
}

func (cgoCenter) stop() {
	C.carapace_notify_stop()
	darwin.mu.Lock()
	darwin.n = nil
	darwin.mu.Unlock()
}

// carapaceNotifyResponse is the delegate's report of a button pressed.
//
//export carapaceNotifyResponse
func carapaceNotifyResponse(key, action *C.char) {
	if n := current(); n != nil {
		n.respond(C.GoString(key), C.GoString(action))
	}
}

// carapaceNotifyAuthorized is the answer to the authorization request;
// errText is NULL unless the request failed.
//
//export carapaceNotifyAuthorized
func carapaceNotifyAuthorized(granted C.int, errText *C.char) {
	if n := current(); n != nil {
		n.authorized(granted != 0, goStringOrEmpty(errText))
	}
}

// carapaceNotifyDone ends a call of carapace_notify_settings or
// carapace_notify_show; errText is NULL on success.
//
//export carapaceNotifyDone
func carapaceNotifyDone(call C.uint64_t, status, alert, style C.int, errText *C.char) {
	darwin.calls.finish(uint64(call), macResult{
		settings: macSettings{Status: int(status), Alert: int(alert), Style: int(style)},
		err:      goStringOrEmpty(errText),
	})
}

func goStringOrEmpty(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}
