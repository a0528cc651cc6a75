//go:build darwin && cgo

package loginitem

// macOS: SMAppService.mainAppService through loginitem_darwin.m. The
// rules are in mac.go (tested on every platform); this file binds them.
//
// Only compiled on macOS with cgo. On the project's Linux machines it is
// type-checked (go run ./cmd/darwincheck), not run;
// loginitem_darwin_test.go runs on macOS (the macOS CI workflow), outside
// a bundle, where nothing may be registered.

/*
#cgo CFLAGS: -fobjc-arc -mmacosx-version-min=12.0 -Wall
#cgo LDFLAGS: -framework Foundation -framework ServiceManagement
#include <stdlib.h>
#include "loginitem_darwin.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"unsafe"
)

// New returns the macOS login item: SMAppService.mainAppService, which
// starts the running app's bundle when the user logs in (macOS 13 and
// later; older systems get errors wrapping ErrUnsupported, and so does a
// process that is not Carapace.app). opts is not used on macOS.
func New(opts Options) Item {
	_ = opts
	home, _ := os.UserHomeDir() // "" only disallows ~/Applications
	return &macItem{svc: cgoService{}, home: home}
}

// cgoService is the macService of loginitem_darwin.m.
type cgoService struct{}

func (cgoService) bundle() (string, bool) {
	p := C.carapace_loginitem_bundle()
	if p == nil {
		return "", false
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoString(p), true
}

func (cgoService) status() (macStatus, error) {
	var msg *C.char
	st := C.carapace_loginitem_status(&msg)
	switch {
	case st == -1:
		return 0, fmt.Errorf("%w: login items need macOS 13 or later", ErrUnsupported)
	case msg != nil:
		defer C.free(unsafe.Pointer(msg))
		return 0, errors.New(C.GoString(msg))
	}
	return macStatus(st), nil
}

func (cgoService) register() error { return set(true) }

func (cgoService) unregister() error { return set(false) }

// set registers or unregisters the app.
func set(on bool) error {
	var c C.int
	if on {
		c = 1
	}
	if msg := C.carapace_loginitem_set(c); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		return errors.New(C.GoString(msg))
	}
	return nil
}
