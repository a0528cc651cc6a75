package loginitem

// The Go half of the macOS login item. loginitem_darwin.go and
// loginitem_darwin.m bind SMAppService.mainAppService (macOS 13 and
// later); the rules are here, free of build constraints, so that their
// tests run on every platform.

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
)

// ErrNeedsApproval: the app is registered as a login item but macOS
// will not start it until the user allows it (a login item the user
// turned off, or one macOS asks about). Only the user can change that.
var ErrNeedsApproval = errors.New("the login item waits for your approval in System Settings › General › Login Items")

// macStatus is SMAppServiceStatus.
type macStatus int

const (
	macNotRegistered    macStatus = 0
	macEnabled          macStatus = 1
	macRequiresApproval macStatus = 2
	macNotFound         macStatus = 3
)

// String names s as SMAppService does.
func (s macStatus) String() string {
	switch s {
	case macNotRegistered:
		return "not registered"
	case macEnabled:
		return "enabled"
	case macRequiresApproval:
		return "requires approval"
	case macNotFound:
		return "not found"
	}
	return fmt.Sprintf("status %d", int(s))
}

// macService is what macItem needs of SMAppService.mainAppService:
// loginitem_darwin.go implements it with cgo, the tests with a fake.
type macService interface {
	// bundle returns the path of the running app's bundle; ok is false
	// when the process is not an app bundle with an identifier.
	bundle() (path string, ok bool)
	// status reads the login item's status; an error wrapping
	// ErrUnsupported means macOS is older than 13.
	status() (macStatus, error)
	// register and unregister change it.
	register() error
	unregister() error
}

// macItem implements Item on a macService.
type macItem struct {
	svc  macService
	home string // the user's home, for ~/Applications
	mu   sync.Mutex
}

var _ Item = (*macItem)(nil)

// Enabled implements Item: true only when macOS will start the app at
// login. A registration that waits for the user's approval is false,
// with an error wrapping ErrNeedsApproval for the menu to show.
func (m *macItem) Enabled() (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.bundle(); err != nil {
		return false, err
	}
	st, err := m.svc.status()
	if err != nil {
		return false, fmt.Errorf("read the login item's status: %w", err)
	}
	switch st {
	case macEnabled:
		return true, nil
	case macRequiresApproval:
		return false, fmt.Errorf("start at login: %w", ErrNeedsApproval)
	}
	return false, nil
}

// SetEnabled implements Item. Registering needs the app in /Applications
// (or ~/Applications): a login item points at the bundle it was
// registered from, and a copy run from a disk image or Downloads (which
// macOS may move to a random place first) would not be there at the next
// login. Registering or unregistering what already is, is a no-op.
func (m *macItem) SetEnabled(on bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	path, err := m.bundle()
	if err != nil {
		return err
	}
	st, err := m.svc.status()
	if err != nil {
		return fmt.Errorf("read the login item's status: %w", err)
	}
	if !on {
		if st == macNotRegistered || st == macNotFound {
			return nil
		}
		if err := m.svc.unregister(); err != nil {
			return fmt.Errorf("stop starting Carapace at login: %w", err)
		}
		return nil
	}
	if st == macEnabled {
		return nil
	}
	if !macInstalled(path, m.home) {
		return fmt.Errorf("start at login: move Carapace.app to /Applications first (it runs from %s)", path)
	}
	regErr := m.svc.register()
	after, err := m.svc.status()
	switch {
	case err == nil && after == macRequiresApproval:
		// macOS registered it but asks the user (or the user had turned
		// it off): register may or may not report that as an error.
		return fmt.Errorf("start at login: %w", ErrNeedsApproval)
	case regErr != nil:
		return fmt.Errorf("register Carapace as a login item: %w", regErr)
	case err != nil:
		return fmt.Errorf("read the login item's status after registering: %w", err)
	case after != macEnabled:
		return fmt.Errorf("register Carapace as a login item: macOS reports %v afterwards", after)
	}
	return nil
}

// bundle returns the app bundle's path, or an error wrapping
// ErrUnsupported when the process is not an app bundle.
func (m *macItem) bundle() (string, error) {
	path, ok := m.svc.bundle()
	if !ok {
		return "", fmt.Errorf("%w: Carapace is not running as Carapace.app", ErrUnsupported)
	}
	return path, nil
}

// macInstalled reports whether the bundle at path is in /Applications or
// in home's Applications folder.
func macInstalled(path, home string) bool {
	path = filepath.Clean(path)
	dirs := []string{"/Applications"}
	if home != "" {
		dirs = append(dirs, filepath.Join(home, "Applications"))
	}
	for _, d := range dirs {
		if rel, ok := strings.CutPrefix(path, d+"/"); ok && rel != "" && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}
